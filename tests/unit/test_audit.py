"""The audit line of an admin action (retrieval_server/api/audit.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from retrieval_server.api import auth
from retrieval_server.api.audit import audited
from retrieval_server.domain import Identity, Role


class _EndingContext:
    """A call's context whose peer is gone once the call has ended, as grpc.aio's is after it has
    expired the call's deadline (``context.peer()`` answers '')."""

    def __init__(self) -> None:
        self.ended = False

    def peer(self) -> str:
        return "" if self.ended else "ipv4:10.1.2.3:40000"


def test_the_line_names_the_peer_of_a_call_its_deadline_ended(caplog: pytest.LogCaptureFixture) -> None:
    context = _EndingContext()
    token = auth._current.set(Identity("ops", Role.ADMIN))  # as Authenticate sets it before the servicer runs
    try:
        with caplog.at_level(logging.INFO, logger="retrieval_server.audit"), pytest.raises(asyncio.CancelledError):
            with audited("IngestDocuments", context, ["kites"]) as record:  # type: ignore[arg-type]
                record.update(stored=["kites"])
                context.ended = True  # the deadline passes as the action runs
                raise asyncio.CancelledError
    finally:
        auth._current.reset(token)
    [line] = [r for r in caplog.records if r.name == "retrieval_server.audit"]
    assert (line.outcome, line.peer, line.stored) == ("CANCELLED", "ipv4:10.1.2.3:40000", ["kites"])  # type: ignore[attr-defined]
