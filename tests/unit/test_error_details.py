"""Domain errors become gRPC statuses with google.rpc details a program can read."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from retrieval_server.api.errors import status_of
from retrieval_server.domain import (
    DeadlineExceeded,
    InvalidArgument,
    PermissionDenied,
    ReadOnly,
    ResourceExhausted,
    TimedOut,
    Unauthenticated,
    Unavailable,
    WrongModel,
)


def _details(status: grpc.Status) -> tuple[status_pb2.Status, dict[str, object]]:
    raw = dict(status.trailing_metadata)["grpc-status-details-bin"]
    decoded = status_pb2.Status.FromString(raw)
    out: dict[str, object] = {}
    for any_ in decoded.details:
        for kind in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest, error_details_pb2.RetryInfo):
            if any_.Is(kind.DESCRIPTOR):
                msg = kind()
                any_.Unpack(msg)
                out[kind.__name__] = msg
    return decoded, out


@pytest.mark.parametrize(
    ("error", "code", "reason", "retry_s"),
    [
        (Unauthenticated("the token has expired", "TOKEN_EXPIRED"), grpc.StatusCode.UNAUTHENTICATED, "TOKEN_EXPIRED", None),
        (PermissionDenied("needs ADMIN"), grpc.StatusCode.PERMISSION_DENIED, "ROLE_REQUIRED", None),
        (ReadOnly("read-only"), grpc.StatusCode.FAILED_PRECONDITION, "READ_ONLY", None),
        (ResourceExhausted("disk below the floor"), grpc.StatusCode.RESOURCE_EXHAUSTED, "DISK_FULL", 60),
        (Unavailable("MySQL is down"), grpc.StatusCode.UNAVAILABLE, "BACKEND_UNAVAILABLE", 1),
        # A kind of Unavailable, but not retried: a retry would wait the backend's whole timeout again.
        (TimedOut("MySQL did not answer in time"), grpc.StatusCode.UNAVAILABLE, "BACKEND_TIMEOUT", None),
        (WrongModel("the index records another model"), grpc.StatusCode.UNAVAILABLE, "BACKEND_UNAVAILABLE", 1),
        (DeadlineExceeded("no time left"), grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_TOO_SHORT", None),
    ],
)
def test_error_info_and_retry_info(error: Exception, code: grpc.StatusCode, reason: str, retry_s: int | None) -> None:
    status = status_of(error)  # type: ignore[arg-type]
    assert status.code == code and status.details == str(error)
    decoded, details = _details(status)
    assert decoded.message == str(error)
    info = details["ErrorInfo"]
    assert info.reason == reason and info.domain == "retrieval.v1"  # type: ignore[attr-defined]
    if retry_s is None:
        assert "RetryInfo" not in details
    else:
        assert details["RetryInfo"].retry_delay.seconds == retry_s  # type: ignore[attr-defined]


def test_bad_request_has_one_violation_per_field() -> None:
    error = InvalidArgument("query is empty; top_k is 1000", violations=(("query", "query is empty"), ("top_k", "top_k is 1000")))
    status = status_of(error)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    _, details = _details(status)
    bad = details["BadRequest"]
    assert [(v.field, v.description) for v in bad.field_violations] == [("query", "query is empty"), ("top_k", "top_k is 1000")]  # type: ignore[attr-defined]
    # A single message names its field first: that is the violation's field.
    _, single = _details(status_of(InvalidArgument("documents[3].content must not be empty")))
    assert single["BadRequest"].field_violations[0].field == "documents[3].content"  # type: ignore[attr-defined]


def test_the_trailers_stay_small_whatever_the_violations() -> None:
    """A C-core client refuses trailers over 8 KiB: the message and each violation are cut (by UTF-8
    bytes, since the message is percent-encoded), and violations past a budget are counted."""
    violations = tuple((f"documents[{i}].title", "é" * 2_000) for i in range(1_000))
    status = status_of(InvalidArgument("; ".join(d for _, d in violations[:3]), violations=violations))
    decoded, details = _details(status)
    assert len(status.details.encode()) <= 512 and status.details.endswith("…")
    listed = details["BadRequest"].field_violations  # type: ignore[attr-defined]
    assert all(len(v.description.encode()) <= 256 for v in listed)
    assert listed[-1].field == "" and listed[-1].description == f"{1_000 - len(listed) + 1} more invalid fields"
    trailers = sum(len(k) + len(v) for k, v in status.trailing_metadata)
    assert trailers < 4_096, trailers
