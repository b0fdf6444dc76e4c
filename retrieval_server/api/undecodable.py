"""Requests that are not valid protobuf, or too heavy to parse, get INVALID_ARGUMENT with a plain
message before the servicer runs.

grpc answers a deserializer's exception with UNKNOWN and a Python class name. This layer gives
every method (ours, health, reflection) a deserializer that hands the failure to the method as a
value instead, and answers it with INVALID_ARGUMENT.

A request is parsed before anything else reads it, authentication included, and parsing takes
16 to 80 times the wire size in memory for messages of many small entries (60 MiB of empty ids
made a 1 GB Query, and 60 MiB of empty documents a 4.8 GB ingest, for a caller without
credentials). So a request is weighed first: every method but IngestDocuments reads at most
:func:`request_bytes` (a query of the longest text the settings allow, with a filter of the most
and longest ids, fits in half of it), and an ingest at most the configured number of documents,
counted on the wire in as many steps. Within one document, repeated fields (grantees, metadata)
are parsed before they are counted: the message size bounds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from retrieval_server.api.edge import Layer
from retrieval_server.api.handlers import rewrap
from retrieval_server.identifiers import MAX_DOCUMENT_ID_CHARS

#: what a request of any method but IngestDocuments may weigh, at least (see request_bytes)
MAX_REQUEST_BYTES = 2 * 1024 * 1024
INGEST_METHOD = "/retrieval.v1.RetrievalService/IngestDocuments"


@dataclass(frozen=True, slots=True)
class _Undecodable:
    reason: str


def _varint(raw: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; IndexError past the end, ValueError past
    the 10 bytes a 64-bit varint takes (a run of 0xff bytes would grow a huge integer)."""
    value = 0
    for shift in range(0, 70, 7):
        byte = raw[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
    raise ValueError("a varint longer than 10 bytes")


def entries_over(raw: bytes, limit: int) -> bool | None:
    """Whether a message holds more than ``limit`` top-level fields, read from the wire without
    parsing them: at most ``limit`` + 1 steps, whatever the message's size. None when its top
    level cannot be read (a group, a malformed varint, a length past the end): such bytes are not
    the message, and the parser, which would take unknown groups and read on, is not asked."""
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
                return None
            if pos > len(raw):
                return None
            count += 1
            if count > limit:
                return True
    except (IndexError, ValueError):
        return None
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


def request_bytes(query_max_bytes: int, max_ids: int) -> int:
    """What a request of any method but IngestDocuments may weigh: :data:`MAX_REQUEST_BYTES`, or
    twice the largest query and filter (or delete) the settings let through, if more."""
    return max(MAX_REQUEST_BYTES, 2 * (query_max_bytes + max_ids * (4 * MAX_DOCUMENT_ID_CHARS + 8)))


def reject_undecodable(max_documents: int, max_bytes: int = MAX_REQUEST_BYTES) -> Layer:
    """A layer of :class:`~retrieval_server.api.edge.Edge`: each handler with a deserializer that
    never raises, answering a request that is undecodable, or too heavy to parse, with
    INVALID_ARGUMENT: an ingest of more than ``max_documents`` documents, a request of another
    method over ``max_bytes`` (see :func:`request_bytes`)."""

    def weigh_ingest(raw: bytes) -> str | None:
        # IngestDocumentsRequest has one field, `documents`: every top-level entry is a document.
        over = entries_over(raw, max_documents)
        if over is None:
            return "the request is not a valid IngestDocumentsRequest protobuf message"
        if over:
            return f"documents may list at most {max_documents} files (RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST)"
        return None

    def weigh(raw: bytes) -> str | None:
        if len(raw) > max_bytes:
            return f"the request is {len(raw)} bytes; this method reads at most {max_bytes}"
        return None

    def layer(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        deserializer = handler.request_deserializer
        if deserializer is None:
            return handler
        name = getattr(deserializer, "__qualname__", "request").split(".")[0]
        checked = _safe(deserializer, name, weigh_ingest if method == INGEST_METHOD else weigh)
        return rewrap(handler, deserializer=checked, check_message=_reject_undecodable)

    return layer
