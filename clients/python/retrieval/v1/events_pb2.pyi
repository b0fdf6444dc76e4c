import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from retrieval.v1 import retrieval_pb2 as _retrieval_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetrievalMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RETRIEVAL_METHOD_UNSPECIFIED: _ClassVar[RetrievalMethod]
    RETRIEVAL_METHOD_QUERY: _ClassVar[RetrievalMethod]
    RETRIEVAL_METHOD_SEARCH: _ClassVar[RetrievalMethod]
RETRIEVAL_METHOD_UNSPECIFIED: RetrievalMethod
RETRIEVAL_METHOD_QUERY: RetrievalMethod
RETRIEVAL_METHOD_SEARCH: RetrievalMethod

class RetrievalCompleted(_message.Message):
    __slots__ = ("event_type", "event_id", "timestamp", "source", "version", "method", "query", "query_sha256", "user_id", "strategy", "top_k", "result_count", "latency_ms", "cache_hit", "degraded", "trace_id")
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    QUERY_SHA256_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    event_type: str
    event_id: str
    timestamp: _timestamp_pb2.Timestamp
    source: str
    version: str
    method: RetrievalMethod
    query: str
    query_sha256: str
    user_id: str
    strategy: _retrieval_pb2.Strategy
    top_k: int
    result_count: int
    latency_ms: float
    cache_hit: bool
    degraded: _containers.RepeatedScalarFieldContainer[str]
    trace_id: str
    def __init__(self, event_type: _Optional[str] = ..., event_id: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[str] = ..., version: _Optional[str] = ..., method: _Optional[_Union[RetrievalMethod, str]] = ..., query: _Optional[str] = ..., query_sha256: _Optional[str] = ..., user_id: _Optional[str] = ..., strategy: _Optional[_Union[_retrieval_pb2.Strategy, str]] = ..., top_k: _Optional[int] = ..., result_count: _Optional[int] = ..., latency_ms: _Optional[float] = ..., cache_hit: _Optional[bool] = ..., degraded: _Optional[_Iterable[str]] = ..., trace_id: _Optional[str] = ...) -> None: ...
