from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Strategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STRATEGY_UNSPECIFIED: _ClassVar[Strategy]
    STRATEGY_SEMANTIC: _ClassVar[Strategy]
    STRATEGY_KEYWORD: _ClassVar[Strategy]
    STRATEGY_HYBRID: _ClassVar[Strategy]
    STRATEGY_ADAPTIVE: _ClassVar[Strategy]
    STRATEGY_GRAPH: _ClassVar[Strategy]

class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODE_UNSPECIFIED: _ClassVar[Mode]
    MODE_RETRIEVAL_ONLY: _ClassVar[Mode]
    MODE_GENERATION: _ClassVar[Mode]

class Fusion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUSION_UNSPECIFIED: _ClassVar[Fusion]
    FUSION_RRF: _ClassVar[Fusion]
    FUSION_WEIGHTED: _ClassVar[Fusion]

class ServingStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVING_STATUS_UNSPECIFIED: _ClassVar[ServingStatus]
    SERVING_STATUS_SERVING: _ClassVar[ServingStatus]
    SERVING_STATUS_DEGRADED: _ClassVar[ServingStatus]
    SERVING_STATUS_NOT_SERVING: _ClassVar[ServingStatus]
    SERVING_STATUS_NOT_CONFIGURED: _ClassVar[ServingStatus]

class Access(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCESS_UNSPECIFIED: _ClassVar[Access]
    ACCESS_PUBLIC: _ClassVar[Access]
    ACCESS_PRIVATE: _ClassVar[Access]

class Route(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROUTE_UNSPECIFIED: _ClassVar[Route]
    ROUTE_RETRIEVE: _ClassVar[Route]
    ROUTE_TOOL: _ClassVar[Route]
    ROUTE_DIRECT_ANSWER: _ClassVar[Route]

class EntityMatchKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENTITY_MATCH_KIND_UNSPECIFIED: _ClassVar[EntityMatchKind]
    ENTITY_MATCH_KIND_EXACT: _ClassVar[EntityMatchKind]
    ENTITY_MATCH_KIND_CASE_FOLDED: _ClassVar[EntityMatchKind]
    ENTITY_MATCH_KIND_FUZZY: _ClassVar[EntityMatchKind]
STRATEGY_UNSPECIFIED: Strategy
STRATEGY_SEMANTIC: Strategy
STRATEGY_KEYWORD: Strategy
STRATEGY_HYBRID: Strategy
STRATEGY_ADAPTIVE: Strategy
STRATEGY_GRAPH: Strategy
MODE_UNSPECIFIED: Mode
MODE_RETRIEVAL_ONLY: Mode
MODE_GENERATION: Mode
FUSION_UNSPECIFIED: Fusion
FUSION_RRF: Fusion
FUSION_WEIGHTED: Fusion
SERVING_STATUS_UNSPECIFIED: ServingStatus
SERVING_STATUS_SERVING: ServingStatus
SERVING_STATUS_DEGRADED: ServingStatus
SERVING_STATUS_NOT_SERVING: ServingStatus
SERVING_STATUS_NOT_CONFIGURED: ServingStatus
ACCESS_UNSPECIFIED: Access
ACCESS_PUBLIC: Access
ACCESS_PRIVATE: Access
ROUTE_UNSPECIFIED: Route
ROUTE_RETRIEVE: Route
ROUTE_TOOL: Route
ROUTE_DIRECT_ANSWER: Route
ENTITY_MATCH_KIND_UNSPECIFIED: EntityMatchKind
ENTITY_MATCH_KIND_EXACT: EntityMatchKind
ENTITY_MATCH_KIND_CASE_FOLDED: EntityMatchKind
ENTITY_MATCH_KIND_FUZZY: EntityMatchKind

class QueryFilters(_message.Message):
    __slots__ = ("document_ids",)
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("query", "top_k", "strategy", "mode", "use_cache", "filters", "fusion", "rerank")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    USE_CACHE_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    query: str
    top_k: int
    strategy: Strategy
    mode: Mode
    use_cache: bool
    filters: QueryFilters
    fusion: Fusion
    rerank: bool
    def __init__(self, query: _Optional[str] = ..., top_k: _Optional[int] = ..., strategy: _Optional[_Union[Strategy, str]] = ..., mode: _Optional[_Union[Mode, str]] = ..., use_cache: _Optional[bool] = ..., filters: _Optional[_Union[QueryFilters, _Mapping]] = ..., fusion: _Optional[_Union[Fusion, str]] = ..., rerank: _Optional[bool] = ...) -> None: ...

class ChildChunk(_message.Message):
    __slots__ = ("chunk_id", "content", "score")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    content: str
    score: float
    def __init__(self, chunk_id: _Optional[str] = ..., content: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class DocumentMetadata(_message.Message):
    __slots__ = ("title", "url", "page", "chunk_index", "source", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    title: str
    url: str
    page: int
    chunk_index: int
    source: str
    extra: _containers.ScalarMap[str, str]
    def __init__(self, title: _Optional[str] = ..., url: _Optional[str] = ..., page: _Optional[int] = ..., chunk_index: _Optional[int] = ..., source: _Optional[str] = ..., extra: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Context(_message.Message):
    __slots__ = ("parent_chunk_id", "document_id", "content", "tokens", "score", "metadata", "child_chunks")
    PARENT_CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CHILD_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    parent_chunk_id: str
    document_id: str
    content: str
    tokens: int
    score: float
    metadata: DocumentMetadata
    child_chunks: _containers.RepeatedCompositeFieldContainer[ChildChunk]
    def __init__(self, parent_chunk_id: _Optional[str] = ..., document_id: _Optional[str] = ..., content: _Optional[str] = ..., tokens: _Optional[int] = ..., score: _Optional[float] = ..., metadata: _Optional[_Union[DocumentMetadata, _Mapping]] = ..., child_chunks: _Optional[_Iterable[_Union[ChildChunk, _Mapping]]] = ...) -> None: ...

class StageMetric(_message.Message):
    __slots__ = ("stage", "duration_ms", "count")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    stage: str
    duration_ms: float
    count: int
    def __init__(self, stage: _Optional[str] = ..., duration_ms: _Optional[float] = ..., count: _Optional[int] = ...) -> None: ...

class Metrics(_message.Message):
    __slots__ = ("total_ms", "stages", "cache_hit", "iterations", "sufficiency_score", "rerank_fallback_triggered", "degraded", "decomposition_used", "strategy_used", "route", "graph", "rewritten_query", "sub_queries")
    TOTAL_MS_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SUFFICIENCY_SCORE_FIELD_NUMBER: _ClassVar[int]
    RERANK_FALLBACK_TRIGGERED_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    DECOMPOSITION_USED_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_USED_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    REWRITTEN_QUERY_FIELD_NUMBER: _ClassVar[int]
    SUB_QUERIES_FIELD_NUMBER: _ClassVar[int]
    total_ms: float
    stages: _containers.RepeatedCompositeFieldContainer[StageMetric]
    cache_hit: bool
    iterations: int
    sufficiency_score: float
    rerank_fallback_triggered: bool
    degraded: _containers.RepeatedScalarFieldContainer[str]
    decomposition_used: bool
    strategy_used: Strategy
    route: RouteDecision
    graph: GraphTrace
    rewritten_query: str
    sub_queries: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, total_ms: _Optional[float] = ..., stages: _Optional[_Iterable[_Union[StageMetric, _Mapping]]] = ..., cache_hit: _Optional[bool] = ..., iterations: _Optional[int] = ..., sufficiency_score: _Optional[float] = ..., rerank_fallback_triggered: _Optional[bool] = ..., degraded: _Optional[_Iterable[str]] = ..., decomposition_used: _Optional[bool] = ..., strategy_used: _Optional[_Union[Strategy, str]] = ..., route: _Optional[_Union[RouteDecision, _Mapping]] = ..., graph: _Optional[_Union[GraphTrace, _Mapping]] = ..., rewritten_query: _Optional[str] = ..., sub_queries: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("query", "contexts", "metrics", "cached", "suggestions", "answer")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CONTEXTS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    SUGGESTIONS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    query: str
    contexts: _containers.RepeatedCompositeFieldContainer[Context]
    metrics: Metrics
    cached: bool
    suggestions: _containers.RepeatedScalarFieldContainer[str]
    answer: Answer
    def __init__(self, query: _Optional[str] = ..., contexts: _Optional[_Iterable[_Union[Context, _Mapping]]] = ..., metrics: _Optional[_Union[Metrics, _Mapping]] = ..., cached: _Optional[bool] = ..., suggestions: _Optional[_Iterable[str]] = ..., answer: _Optional[_Union[Answer, _Mapping]] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("query", "top_k")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    query: str
    top_k: int
    def __init__(self, query: _Optional[str] = ..., top_k: _Optional[int] = ...) -> None: ...

class SearchResult(_message.Message):
    __slots__ = ("text", "document_id", "chunk_index", "title", "page", "url", "score")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INDEX_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    text: str
    document_id: str
    chunk_index: int
    title: str
    page: int
    url: str
    score: float
    def __init__(self, text: _Optional[str] = ..., document_id: _Optional[str] = ..., chunk_index: _Optional[int] = ..., title: _Optional[str] = ..., page: _Optional[int] = ..., url: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("query", "results", "results_not_listed")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_NOT_LISTED_FIELD_NUMBER: _ClassVar[int]
    query: str
    results: _containers.RepeatedCompositeFieldContainer[SearchResult]
    results_not_listed: int
    def __init__(self, query: _Optional[str] = ..., results: _Optional[_Iterable[_Union[SearchResult, _Mapping]]] = ..., results_not_listed: _Optional[int] = ...) -> None: ...

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ComponentHealth(_message.Message):
    __slots__ = ("name", "status", "detail")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    name: str
    status: ServingStatus
    detail: str
    def __init__(self, name: _Optional[str] = ..., status: _Optional[_Union[ServingStatus, str]] = ..., detail: _Optional[str] = ...) -> None: ...

class HealthResponse(_message.Message):
    __slots__ = ("status", "components", "version")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    status: ServingStatus
    components: _containers.RepeatedCompositeFieldContainer[ComponentHealth]
    version: str
    def __init__(self, status: _Optional[_Union[ServingStatus, str]] = ..., components: _Optional[_Iterable[_Union[ComponentHealth, _Mapping]]] = ..., version: _Optional[str] = ...) -> None: ...

class DocumentInput(_message.Message):
    __slots__ = ("document_id", "filename", "content", "title", "url", "source", "access", "owner_id", "metadata", "granted_user_ids")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    GRANTED_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    filename: str
    content: bytes
    title: str
    url: str
    source: str
    access: Access
    owner_id: str
    metadata: _containers.ScalarMap[str, str]
    granted_user_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_id: _Optional[str] = ..., filename: _Optional[str] = ..., content: _Optional[bytes] = ..., title: _Optional[str] = ..., url: _Optional[str] = ..., source: _Optional[str] = ..., access: _Optional[_Union[Access, str]] = ..., owner_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., granted_user_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class IngestDocumentsRequest(_message.Message):
    __slots__ = ("documents",)
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[DocumentInput]
    def __init__(self, documents: _Optional[_Iterable[_Union[DocumentInput, _Mapping]]] = ...) -> None: ...

class IngestedDocument(_message.Message):
    __slots__ = ("document_id", "parent_chunks", "child_chunks", "replaced", "unchanged")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    CHILD_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    parent_chunks: int
    child_chunks: int
    replaced: bool
    unchanged: bool
    def __init__(self, document_id: _Optional[str] = ..., parent_chunks: _Optional[int] = ..., child_chunks: _Optional[int] = ..., replaced: _Optional[bool] = ..., unchanged: _Optional[bool] = ...) -> None: ...

class IngestError(_message.Message):
    __slots__ = ("source", "reason")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    source: str
    reason: str
    def __init__(self, source: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class IngestDocumentsResponse(_message.Message):
    __slots__ = ("documents", "errors", "documents_not_listed")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_NOT_LISTED_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[IngestedDocument]
    errors: _containers.RepeatedCompositeFieldContainer[IngestError]
    documents_not_listed: int
    def __init__(self, documents: _Optional[_Iterable[_Union[IngestedDocument, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[IngestError, _Mapping]]] = ..., documents_not_listed: _Optional[int] = ...) -> None: ...

class DeleteDocumentsRequest(_message.Message):
    __slots__ = ("document_ids",)
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteDocumentsResponse(_message.Message):
    __slots__ = ("deleted", "not_found")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    deleted: _containers.RepeatedScalarFieldContainer[str]
    not_found: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, deleted: _Optional[_Iterable[str]] = ..., not_found: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("name", "arguments_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments_json: str
    def __init__(self, name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class RouteDecision(_message.Message):
    __slots__ = ("route", "tool_calls", "reason", "decided_by")
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    route: Route
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    reason: str
    decided_by: str
    def __init__(self, route: _Optional[_Union[Route, str]] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., reason: _Optional[str] = ..., decided_by: _Optional[str] = ...) -> None: ...

class EntityMatch(_message.Message):
    __slots__ = ("name", "entity_type", "text", "kind", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    entity_type: str
    text: str
    kind: EntityMatchKind
    score: float
    def __init__(self, name: _Optional[str] = ..., entity_type: _Optional[str] = ..., text: _Optional[str] = ..., kind: _Optional[_Union[EntityMatchKind, str]] = ..., score: _Optional[float] = ...) -> None: ...

class GraphHop(_message.Message):
    __slots__ = ("hop", "penalty", "entities", "chunks")
    HOP_FIELD_NUMBER: _ClassVar[int]
    PENALTY_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    hop: int
    penalty: float
    entities: _containers.RepeatedScalarFieldContainer[str]
    chunks: int
    def __init__(self, hop: _Optional[int] = ..., penalty: _Optional[float] = ..., entities: _Optional[_Iterable[str]] = ..., chunks: _Optional[int] = ...) -> None: ...

class GraphTrace(_message.Message):
    __slots__ = ("entities", "hops")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[EntityMatch]
    hops: _containers.RepeatedCompositeFieldContainer[GraphHop]
    def __init__(self, entities: _Optional[_Iterable[_Union[EntityMatch, _Mapping]]] = ..., hops: _Optional[_Iterable[_Union[GraphHop, _Mapping]]] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ("name", "arguments_json", "success", "result_json", "error", "summary", "duration_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments_json: str
    success: bool
    result_json: str
    error: str
    summary: str
    duration_ms: float
    def __init__(self, name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., success: _Optional[bool] = ..., result_json: _Optional[str] = ..., error: _Optional[str] = ..., summary: _Optional[str] = ..., duration_ms: _Optional[float] = ...) -> None: ...

class AnswerSentence(_message.Message):
    __slots__ = ("text", "citations")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    text: str
    citations: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, text: _Optional[str] = ..., citations: _Optional[_Iterable[int]] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("marker", "parent_chunk_id", "document_id", "title")
    MARKER_FIELD_NUMBER: _ClassVar[int]
    PARENT_CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    marker: int
    parent_chunk_id: str
    document_id: str
    title: str
    def __init__(self, marker: _Optional[int] = ..., parent_chunk_id: _Optional[str] = ..., document_id: _Optional[str] = ..., title: _Optional[str] = ...) -> None: ...

class Answer(_message.Message):
    __slots__ = ("text", "sentences", "citations", "route", "extractive", "supported", "model", "tool_results")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SENTENCES_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    EXTRACTIVE_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    text: str
    sentences: _containers.RepeatedCompositeFieldContainer[AnswerSentence]
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    route: Route
    extractive: bool
    supported: bool
    model: str
    tool_results: _containers.RepeatedCompositeFieldContainer[ToolResult]
    def __init__(self, text: _Optional[str] = ..., sentences: _Optional[_Iterable[_Union[AnswerSentence, _Mapping]]] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., route: _Optional[_Union[Route, str]] = ..., extractive: _Optional[bool] = ..., supported: _Optional[bool] = ..., model: _Optional[str] = ..., tool_results: _Optional[_Iterable[_Union[ToolResult, _Mapping]]] = ...) -> None: ...

class StreamQueryRequest(_message.Message):
    __slots__ = ("query",)
    QUERY_FIELD_NUMBER: _ClassVar[int]
    query: QueryRequest
    def __init__(self, query: _Optional[_Union[QueryRequest, _Mapping]] = ...) -> None: ...

class StreamQueryResponse(_message.Message):
    __slots__ = ("stage", "answer_delta", "response")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    ANSWER_DELTA_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    stage: StageMetric
    answer_delta: str
    response: QueryResponse
    def __init__(self, stage: _Optional[_Union[StageMetric, _Mapping]] = ..., answer_delta: _Optional[str] = ..., response: _Optional[_Union[QueryResponse, _Mapping]] = ...) -> None: ...
