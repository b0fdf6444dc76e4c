"""The audit line of an admin action (retrieval_server/api/audit.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from retrieval_server.api import auth
from retrieval_server.api.audit import audited, cut_short
from retrieval_server.domain import Identity, Role


class _EndingContext:
    """A call's context whose peer is gone once the call has ended, as grpc.aio's is after it has
    expired the call's deadline (``context.peer()`` answers ''), and whose time left is
    ``remaining`` then (None: no deadline)."""

    def __init__(self, remaining: float | None) -> None:
        self.ended = False
        self.remaining = remaining

    def peer(self) -> str:
        return "" if self.ended else "ipv4:10.1.2.3:40000"

    def time_remaining(self) -> float | None:
        return self.remaining if self.ended else 30.0


def _cancelled_line(context: _EndingContext, caplog: pytest.LogCaptureFixture) -> logging.LogRecord:
    token = auth._current.set(Identity("ops", Role.ADMIN))  # as Authenticate sets it before the servicer runs
    try:
        with caplog.at_level(logging.INFO, logger="retrieval_server.audit"), pytest.raises(asyncio.CancelledError):
            with audited("IngestDocuments", context, ["kites"]) as record:  # type: ignore[arg-type]
                record.update(stored=["kites"])
                context.ended = True  # grpc.aio cancels the action as it runs
                raise asyncio.CancelledError
    finally:
        auth._current.reset(token)
    [line] = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    return line


def test_the_line_names_the_peer_and_the_code_of_a_call_its_deadline_ended(caplog: pytest.LogCaptureFixture) -> None:
    # The caller and grpc_server_handled_total see DEADLINE_EXCEEDED: the line said CANCELLED.
    line = _cancelled_line(_EndingContext(remaining=0.0), caplog)
    assert (line.outcome, line.peer, line.stored) == ("DEADLINE_EXCEEDED", "ipv4:10.1.2.3:40000", ["kites"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("remaining", [None, 12.0])
def test_a_call_its_caller_cancelled_is_cancelled(remaining: float | None, caplog: pytest.LogCaptureFixture) -> None:
    line = _cancelled_line(_EndingContext(remaining), caplog)
    assert (line.outcome, line.stored) == ("CANCELLED", ["kites"])  # type: ignore[attr-defined]


def test_a_call_cut_short_before_the_servicer_ran_has_one_line_and_one_the_servicer_audited_no_second(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Cut while its message was awaited or its token verified, an ingest left no line; the edge's
    outermost layer now tells of every call cut short, and a call the servicer audited (or a layer
    refused) keeps its one line."""
    before, served = _EndingContext(remaining=0.0), _EndingContext(remaining=None)
    with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
        before.ended = True
        cut_short("/retrieval.v1.RetrievalService/IngestDocuments", before, "ipv4:10.1.2.3:40000")  # type: ignore[arg-type]
        cut_short("/retrieval.v1.RetrievalService/Query", before, "ipv4:10.1.2.3:40000")  # type: ignore[arg-type]  # not an admin action
    [line] = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert (line.rpc, line.outcome, line.peer, line.user, line.role, line.documents) == (  # type: ignore[attr-defined]
        "IngestDocuments", "DEADLINE_EXCEEDED", "ipv4:10.1.2.3:40000", "", "", [])
    caplog.clear()
    _cancelled_line(served, caplog)
    with caplog.at_level(logging.INFO, logger="retrieval_server.audit"):
        cut_short("/retrieval.v1.RetrievalService/IngestDocuments", served, "ipv4:10.1.2.3:40000")  # type: ignore[arg-type]
    assert [r.outcome for r in caplog.records if r.name == "retrieval_server.audit"] == ["CANCELLED"]  # type: ignore[attr-defined]
