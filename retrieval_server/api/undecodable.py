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
and longest ids, fits in half of it), and an ingest at most the configured number of documents
and :func:`nested_fields` fields in them, counted on the wire in as many steps (57 MiB of empty
grantees in one document parsed into 970 MiB).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import grpc

from retrieval_server.api.edge import Layer
from retrieval_server.api.errors import abort
from retrieval_server.api.handlers import CheckMessage, Refused, rewrap
from retrieval_server.domain import InvalidArgument
from retrieval_server.identifiers import MAX_DOCUMENT_ID_CHARS

#: what a request of any method but IngestDocuments may weigh, at least (see request_bytes)
MAX_REQUEST_BYTES = 2 * 1024 * 1024
INGEST_METHOD = "/retrieval.v1.RetrievalService/IngestDocuments"
#: the fields each document of an ingest may hold: its ten, repeated or unknown ones besides
FIELDS_PER_DOCUMENT = 16
#: the fields more the documents of one ingest may hold among them, for grantees and metadata
#: entries: a document at both limits (1,000 grantees, and 16 KiB of metadata, fewer than 16,385
#: entries) fits five times, and parsing all of them takes a few MiB
SHARED_FIELDS = 100_000


@dataclass(frozen=True, slots=True)
class _Undecodable:
    reason: str
    #: the field the google.rpc.BadRequest names: the documents of an ingest, else the request
    field: str = "request"


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


def _entries(raw: bytes, start: int, end: int, limit: int, spans: list[tuple[int, int]] | None = None) -> int | None:
    """How many fields ``raw[start:end]`` holds, read from the wire without parsing them, counted
    up to ``limit`` + 1 (at most that many steps, whatever the size). None when the bytes cannot be
    read as a message (a group, a malformed varint, a length past the end): such bytes are not the
    message, and the parser, which would take unknown groups and read on, is not asked. ``spans``,
    when given, gets where each field 1 of wire type 2 (a submessage) lies."""
    pos, count = start, 0
    try:
        while pos < end:
            # One-byte varints read inline: the call is most of a step's cost.
            key = raw[pos]
            key, pos = (key, pos + 1) if key < 0x80 else _varint(raw, pos)
            wire = key & 7
            if wire == 0:
                _, pos = _varint(raw, pos)
            elif wire == 2:
                length = raw[pos]
                length, pos = (length, pos + 1) if length < 0x80 else _varint(raw, pos)
                if spans is not None and key == 0x0A:
                    spans.append((pos, pos + length))
                pos += length
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return None
            if pos > end:
                return None
            count += 1
            if count > limit:
                return count
    except (IndexError, ValueError):
        return None
    return count


def nested_fields(documents: int) -> int:
    """The fields ``documents`` documents of one ingest may hold in all: :data:`FIELDS_PER_DOCUMENT`
    each, and :data:`SHARED_FIELDS` more among them, for their grantees and metadata entries."""
    return FIELDS_PER_DOCUMENT * documents + SHARED_FIELDS


def weigh_ingest(raw: bytes, max_documents: int) -> str | None:
    """Why an IngestDocumentsRequest is not parsed (None: it may be): more than ``max_documents``
    documents, more fields in them than :func:`nested_fields` allows, or bytes that are not the
    message. At most as many steps as the two limits allow."""
    invalid = "the request is not a valid IngestDocumentsRequest protobuf message"
    spans: list[tuple[int, int]] = []
    # IngestDocumentsRequest has one field, `documents`: every top-level entry is a document.
    documents = _entries(raw, 0, len(raw), max_documents, spans)
    if documents is None:
        return invalid
    if documents > max_documents:
        return f"documents may list at most {max_documents} files (RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST)"
    budget = left = nested_fields(documents)
    for start, end in spans:
        fields = _entries(raw, start, end, left)
        if fields is None:
            return invalid
        left -= fields
        if left < 0:
            return (
                f"the documents may hold at most {budget} fields in all, each granted user and metadata entry"
                f" counting one ({FIELDS_PER_DOCUMENT} a document, {SHARED_FIELDS} more among them): send fewer per request"
            )
    return None


def _safe(deserializer: Callable[[bytes], Any], message_type: str, weigh: Callable[[bytes], str | None], field: str) -> Callable[[bytes], Any]:
    def deserialize(raw: bytes) -> Any:
        too_heavy = weigh(raw)
        if too_heavy is not None:
            return _Undecodable(too_heavy, field)
        try:
            return deserializer(raw)
        except Exception:
            return _Undecodable(f"the request is not a valid {message_type} protobuf message")

    return deserialize


def _rejecting(method: str, on_refused: Refused | None) -> CheckMessage:
    async def reject(request: Any, context: grpc.aio.ServicerContext) -> None:
        if isinstance(request, _Undecodable):
            # With its google.rpc.BadRequest, as every INVALID_ARGUMENT (it came without details).
            exc = InvalidArgument(request.reason, field=request.field)
            if on_refused is not None:
                on_refused(method, context, exc)
            await abort(context, exc)

    return reject


def request_bytes(query_max_bytes: int, max_ids: int) -> int:
    """What a request of any method but IngestDocuments may weigh: :data:`MAX_REQUEST_BYTES`, or
    twice the largest query and filter (or delete) the settings let through, if more."""
    return max(MAX_REQUEST_BYTES, 2 * (query_max_bytes + max_ids * (4 * MAX_DOCUMENT_ID_CHARS + 8)))


def reject_undecodable(max_documents: int, max_bytes: int = MAX_REQUEST_BYTES, on_refused: Refused | None = None) -> Layer:
    """A layer of :class:`~retrieval_server.api.edge.Edge`: each handler with a deserializer that
    never raises, answering a request that is undecodable, or too heavy to parse, with
    INVALID_ARGUMENT: an ingest of more than ``max_documents`` documents, a request of another
    method over ``max_bytes`` (see :func:`request_bytes`). ``on_refused`` is told of each such
    call, as :class:`~retrieval_server.api.auth.Authenticate`'s is (the audit log's lines)."""

    def weigh(raw: bytes) -> str | None:
        if len(raw) > max_bytes:
            return f"the request is {len(raw)} bytes; this method reads at most {max_bytes}"
        return None

    def layer(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        deserializer = handler.request_deserializer
        if deserializer is None:
            return handler
        name = getattr(deserializer, "__qualname__", "request").split(".")[0]
        ingest = method == INGEST_METHOD
        checked = _safe(deserializer, name, partial(weigh_ingest, max_documents=max_documents) if ingest else weigh, "documents" if ingest else "request")
        return rewrap(handler, deserializer=checked, check_message=_rejecting(method, on_refused))

    return layer
