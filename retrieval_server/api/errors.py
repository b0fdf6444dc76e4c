"""Domain errors as gRPC statuses a program can read: a code, a human message, google.rpc details.

* INVALID_ARGUMENT carries a ``google.rpc.BadRequest`` with one field violation per invalid field;
* every other domain error carries a ``google.rpc.ErrorInfo`` with a stable ``reason``
  (``TOKEN_EXPIRED``, ``ROLE_REQUIRED``, ``READ_ONLY``, ...) in the ``retrieval.v1`` domain;
* RESOURCE_EXHAUSTED and UNAVAILABLE also carry a ``google.rpc.RetryInfo`` saying when to retry,
  except an UNAVAILABLE ``BACKEND_TIMEOUT``: the backend let its whole timeout pass, and a retry
  would wait as long again (the clients do not retry it); and a RESOURCE_EXHAUSTED
  ``STREAM_STALLED``, a stream given up on a reader that stopped reading.

The details travel in the ``grpc-status-details-bin`` trailer (grpcio-status), which every gRPC
library decodes; the message stays readable on its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import NoReturn

from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

import grpc

from retrieval_server.domain import (
    DeadlineExceeded,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ReadOnly,
    ResourceExhausted,
    ServiceError,
    RequestNotRead,
    StreamStalled,
    TimedOut,
    TooManyCalls,
    Unauthenticated,
    Unavailable,
)
from retrieval_server.identifiers import cut_utf8

log = logging.getLogger(__name__)

DOMAIN = "retrieval.v1"

#: domain error -> (status code, ErrorInfo reason, seconds to wait before retrying or None)
_MAPPING: dict[type[ServiceError], tuple[grpc.StatusCode, str, float | None]] = {
    InvalidArgument: (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", None),
    NotFound: (grpc.StatusCode.NOT_FOUND, "NOT_FOUND", None),
    Unauthenticated: (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", None),
    PermissionDenied: (grpc.StatusCode.PERMISSION_DENIED, "ROLE_REQUIRED", None),
    ReadOnly: (grpc.StatusCode.FAILED_PRECONDITION, "READ_ONLY", None),
    ResourceExhausted: (grpc.StatusCode.RESOURCE_EXHAUSTED, "DISK_FULL", 60.0),
    # No RetryInfo: the server gave up on this reader, and would on the same reader again.
    StreamStalled: (grpc.StatusCode.RESOURCE_EXHAUSTED, "STREAM_STALLED", None),
    Unavailable: (grpc.StatusCode.UNAVAILABLE, "BACKEND_UNAVAILABLE", 1.0),
    TimedOut: (grpc.StatusCode.UNAVAILABLE, "BACKEND_TIMEOUT", None),
    DeadlineExceeded: (grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_TOO_SHORT", None),
    # A call of the same address ends within a second or so, as a rule: a retry then finds room.
    TooManyCalls: (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_CALLS", 1.0),
    RequestNotRead: (grpc.StatusCode.DEADLINE_EXCEEDED, "REQUEST_NOT_READ", None),
}


def _mapped(exc: ServiceError) -> tuple[grpc.StatusCode, str, float | None]:
    """The mapping of the error's kind, or of the nearest kind it derives from (a WrongModel is an Unavailable)."""
    for kind in type(exc).__mro__:
        if kind in _MAPPING:
            return _MAPPING[kind]
    return grpc.StatusCode.INTERNAL, "INTERNAL", None


def _packed(message: object) -> any_pb2.Any:
    out = any_pb2.Any()
    out.Pack(message)  # type: ignore[arg-type]
    return out


#: UTF-8 bytes of a status's message, and of a violation's field and description, sent: the
#: message (percent-encoded) and the details (which repeat it, base64-encoded) travel in
#: trailers, and a gRPC C-core client (Python, C++) refuses trailers over 8 KiB: a request with a
#: thousand invalid documents, or a header value echoed whole, reached its caller as
#: RESOURCE_EXHAUSTED, no field named
MAX_MESSAGE_BYTES = 512
MAX_VIOLATION_BYTES = 256
#: bytes of the violations listed; the rest are counted in one more, with no field
MAX_VIOLATIONS_BYTES = 1_536


def _violations(violations: tuple[tuple[str, str], ...]) -> list[error_details_pb2.BadRequest.FieldViolation]:
    out, used = [], 0
    for n, (field, description) in enumerate(violations):
        field, description = cut_utf8(field, MAX_VIOLATION_BYTES), cut_utf8(description, MAX_VIOLATION_BYTES)
        used += len(field.encode()) + len(description.encode())
        if used > MAX_VIOLATIONS_BYTES:
            out.append(error_details_pb2.BadRequest.FieldViolation(description=f"{len(violations) - n} more invalid fields"))
            break
        out.append(error_details_pb2.BadRequest.FieldViolation(field=field, description=description))
    return out


def status_of(exc: ServiceError) -> grpc.Status:
    code, _, retry_s = _mapped(exc)
    details = []
    if isinstance(exc, InvalidArgument):
        details.append(_packed(error_details_pb2.BadRequest(field_violations=_violations(exc.violations))))
    else:
        details.append(_packed(error_details_pb2.ErrorInfo(reason=reason_of(exc), domain=DOMAIN)))
    if retry_s is not None:
        details.append(_packed(error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=int(retry_s)))))
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=cut_utf8(str(exc), MAX_MESSAGE_BYTES), details=details)
    return rpc_status.to_status(status)


async def abort(context: grpc.aio.ServicerContext, exc: ServiceError) -> NoReturn:
    """End the call with ``exc``'s status and details (raises, as ``context.abort`` does).
    ``abort``, not ``abort_with_status`` (which only calls it): OpenTelemetry's servicer context
    records the code on the RPC's span from ``abort`` alone, and every call ended the other way
    was traced as a success.

    A caller that left before its status could be sent ends the call as a cancel does
    (``CancelledError``, the status's code kept for the metrics): the status of a StreamQuery given
    up on a stalled reader waits behind the message not read, and its send fails once the reader
    closes. Raised as gRPC's error, gRPC logged it at ERROR with a 40-line traceback, one a stream,
    unless it had seen the close first; a cancel it logs at DEBUG."""
    status = status_of(exc)
    try:
        await context.abort(status.code, status.details, status.trailing_metadata)
    except grpc.aio.InternalError:  # ExecuteBatchError: the status could not be sent
        log.debug("the caller left before the call's status was sent", extra={"code": status.code.name, "reason": reason_of(exc)})
        raise asyncio.CancelledError from None


def code_of(exc: ServiceError) -> grpc.StatusCode:
    return _mapped(exc)[0]


def reason_of(exc: ServiceError) -> str:
    """The stable reason of its ErrorInfo: the error's own, else its kind's."""
    return getattr(exc, "reason", None) or _mapped(exc)[1]
