"""Requests that are not valid protobuf, or too heavy to parse, get INVALID_ARGUMENT with a plain
message before the servicer runs.

grpc answers a deserializer's exception with UNKNOWN and a Python class name. This layer gives
every method (ours, health, reflection) a deserializer that hands the failure to the method as a
value instead, and answers it with INVALID_ARGUMENT.

A request is parsed before anything else reads it, authentication included, and parsing takes
16 to 80 times the wire size in memory for messages of many small entries (60 MiB of empty ids
made a 1 GB Query, and 60 MiB of empty documents a 4.8 GB ingest, for a caller without
credentials). So a request is weighed first: every method but IngestDocuments reads at most
:data:`MAX_REQUEST_BYTES` (a query of the longest text, with a filter of the most and longest ids,
fits in half of it), and an ingest at most the configured number of documents, counted on the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from retrieval_server.api.edge import Layer
from retrieval_server.api.handlers import rewrap

#: what a request of any method but IngestDocuments may weigh
MAX_REQUEST_BYTES = 2 * 1024 * 1024
INGEST_METHOD = "/retrieval.v1.RetrievalService/IngestDocuments"
#: IngestDocumentsRequest.documents
_DOCUMENTS_FIELD = 1


@dataclass(frozen=True, slots=True)
class _Undecodable:
    reason: str


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = raw[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def entries_over(raw: bytes, field: int, limit: int) -> bool:
    """Whether a message holds more than ``limit`` entries of its top-level ``field``, read from
    the wire without parsing anything else (False when the bytes cannot be read: the parser says)."""
    pos, count = 0, 0
    try:
        while pos < len(raw):
            key, pos = _varint(raw, pos)
            wire = key & 7
            if wire == 0:
                _, pos = _varint(raw, pos)
            elif wire == 2:
                length, pos = _varint(raw, pos)
                pos += length
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return False
            if key >> 3 == field:
                count += 1
                if count > limit:
                    return True
    except IndexError:
        return False
    return False


def _safe(deserializer: Callable[[bytes], Any], message_type: str, weigh: Callable[[bytes], str | None]) -> Callable[[bytes], Any]:
    def deserialize(raw: bytes) -> Any:
        too_heavy = weigh(raw)
        if too_heavy is not None:
            return _Undecodable(too_heavy)
        try:
            return deserializer(raw)
        except Exception:
            return _Undecodable(f"the request is not a valid {message_type} protobuf message")

    return deserialize


async def _reject_undecodable(request: Any, context: grpc.aio.ServicerContext) -> None:
    if isinstance(request, _Undecodable):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)


def reject_undecodable(max_documents: int) -> Layer:
    """A layer of :class:`~retrieval_server.api.edge.Edge`: each handler with a deserializer that
    never raises, answering a request that is undecodable, or too heavy to parse, with
    INVALID_ARGUMENT (an ingest of more than ``max_documents`` documents is one)."""

    def weigh_ingest(raw: bytes) -> str | None:
        if entries_over(raw, _DOCUMENTS_FIELD, max_documents):
            return f"documents may list at most {max_documents} files (RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST)"
        return None

    def weigh(raw: bytes) -> str | None:
        if len(raw) > MAX_REQUEST_BYTES:
            return f"the request is {len(raw)} bytes; this method reads at most {MAX_REQUEST_BYTES}"
        return None

    def layer(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        deserializer = handler.request_deserializer
        if deserializer is None:
            return handler
        name = getattr(deserializer, "__qualname__", "request").split(".")[0]
        checked = _safe(deserializer, name, weigh_ingest if method == INGEST_METHOD else weigh)
        return rewrap(handler, deserializer=checked, check_message=_reject_undecodable)

    return layer
