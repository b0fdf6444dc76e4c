"""The circuit breaker of optional dependencies (cache, TEI, LLM), on an injected clock."""

from __future__ import annotations

import asyncio

import pytest

from retrieval_server.backends.circuit_breaker import CircuitBreaker
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
