"""When a request's retrieval legs are given up, and which are."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from retrieval_server.workflow import leg_cutoff


def test_the_cutoff_keeps_the_reserve_or_half_the_time_left() -> None:
    assert leg_cutoff.when(None, 10.0, 50) is None
    assert leg_cutoff.when(2.0, 10.0, 50) == pytest.approx(11.95)  # the deadline less the reserve
    assert leg_cutoff.when(0.06, 10.0, 50) == pytest.approx(10.03)  # a tight deadline: half of it for the legs
    assert leg_cutoff.when(-1.0, 10.0, 50) == pytest.approx(9.0)  # already past: at once


def _never() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


def _answered(value: Any) -> asyncio.Future[Any]:
    future = _never()
    future.set_result(value)
    return future


async def test_without_a_cutoff_every_leg_is_waited_for() -> None:
    late = _never()
    asyncio.get_running_loop().call_soon(late.set_result, [])
    assert await leg_cutoff.settle({"a": _answered([]), "b": late}, None, time.monotonic) == []
    assert late.done()


async def test_legs_running_at_the_cutoff_are_cancelled_and_named() -> None:
    slow, slower = _never(), _never()
    futures = {"dense:0": _answered([1]), "metadata": slow, "graph": slower}
    assert await leg_cutoff.settle(futures, time.monotonic(), time.monotonic) == ["metadata", "graph"]
    assert slow.cancelled() and slower.cancelled()


async def test_a_failed_leg_is_not_an_answer_so_the_first_real_one_is_waited_for() -> None:
    failed, first, last = _never(), _never(), _never()
    failed.set_exception(RuntimeError("down"))
    loop = asyncio.get_running_loop()
    # Both after the cut-off, which has passed: the first to answer ends the wait, the other is given up.
    loop.call_soon(lambda: loop.call_soon(first.set_result, []))
    given_up = await leg_cutoff.settle({"keyword:0": failed, "dense:0": first, "graph": last}, time.monotonic() - 1, time.monotonic)
    assert given_up == ["graph"] and first.result() == [] and last.cancelled()
