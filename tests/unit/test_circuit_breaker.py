"""The circuit breaker of optional dependencies (cache, TEI, LLM), on an injected clock."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from retrieval_server.backends.circuit_breaker import CircuitBreaker, refused_by_breaker
from tests.support.clock import Clock


class Refused(Exception):
    pass


def test_opens_after_consecutive_failures_then_admits_one_trial_per_cooldown() -> None:
    clock = Clock()
    b = CircuitBreaker(failure_threshold=3, cooldown_s=10.0, clock=clock)
    b.record_failure()
    b.record_success()  # successes reset the count: failures must be consecutive
    for _ in range(2):
        b.record_failure()
    assert not b.is_open and b.allow()
    b.record_failure()
    assert b.is_open and not b.allow()
    clock.now = 9.9
    assert not b.allow()
    clock.now = 10.0
    assert b.allow()  # the half-open trial
    assert not b.allow()  # only one at a time
    b.record_failure()  # the trial failed: another full cool-down
    clock.now = 19.9
    assert not b.allow()
    clock.now = 20.0
    assert b.allow()
    b.record_success()
    assert not b.is_open and b.allow() and b.allow()


async def test_a_cancelled_trial_does_not_leave_the_breaker_stuck() -> None:
    clock = Clock()
    b = CircuitBreaker(failure_threshold=1, cooldown_s=1.0, clock=clock)
    with pytest.raises(ValueError), b.calling(Refused):
        raise ValueError("down")
    with pytest.raises(Refused), b.calling(Refused):
        pass
    clock.now = 1.0

    async def hangs() -> None:
        with b.calling(Refused):
            await asyncio.Event().wait()

    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(hangs(), 0.01)
    clock.now = 2.0
    with b.calling(Refused):  # a new trial is admitted after the next cool-down
        pass
    assert not b.is_open


async def test_a_cancellation_counts_neither_way() -> None:
    """A caller giving up is no verdict on the dependency: it neither opens a closed breaker nor
    closes or reopens an open one, and a cancelled trial lets the next call be the trial."""
    clock = Clock()
    b = CircuitBreaker(failure_threshold=1, cooldown_s=1.0, clock=clock)

    async def hangs() -> None:
        with b.calling(Refused):
            await asyncio.Event().wait()

    for _ in range(3):
        call = asyncio.ensure_future(hangs())
        await asyncio.sleep(0)  # the call is inside the breaker
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    assert not b.is_open
    b.record_failure()
    clock.now = 1.0
    call = asyncio.ensure_future(hangs())  # the half-open trial
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert b.is_open
    with b.calling(Refused):  # the next call is the trial, at once
        pass
    assert not b.is_open


def test_opening_and_closing_are_logged_once_each_naming_the_component(caplog: pytest.LogCaptureFixture) -> None:
    """An open breaker is a designed state, reported by Health and each response's degraded tags:
    its refusals and the failures past the threshold log nothing, its transitions one line each."""
    caplog.set_level(logging.DEBUG, logger="retrieval_server.backends.circuit_breaker")
    clock = Clock()
    b = CircuitBreaker(failure_threshold=2, cooldown_s=1.0, clock=clock, name="reranker (tei)")
    for _ in range(5):
        with contextlib.suppress(ValueError, Refused), b.calling(Refused):
            raise ValueError("connection refused")
    clock.now = 1.0
    with contextlib.suppress(ValueError), b.calling(Refused):  # a failed trial: open again, not newly
        raise ValueError("connection refused")
    clock.now = 2.0
    with b.calling(Refused):
        pass
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert len(lines) == 2, lines
    (opened_level, opened), (closed_level, closed) = lines
    assert opened_level == logging.WARNING and opened.startswith("reranker (tei): circuit open after 2 consecutive failures")
    assert "ValueError: connection refused" in opened
    assert closed_level == logging.INFO and closed.startswith("reranker (tei): circuit closed")


def test_a_refusal_says_it_is_one() -> None:
    b = CircuitBreaker(failure_threshold=1, cooldown_s=60.0, clock=Clock())
    b.record_failure()
    with pytest.raises(Refused) as refused, b.calling(Refused):
        pass
    assert refused_by_breaker(refused.value) and not refused_by_breaker(ValueError("down"))
