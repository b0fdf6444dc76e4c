"""When a request's retrieval legs are given up, and which are."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from retrieval_server.workflow import leg_cutoff, nodes


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


async def test_a_failure_or_an_empty_list_is_not_an_answer_so_the_first_real_one_is_waited_for() -> None:
    failed, empty, first, last = _never(), _never(), _never(), _never()
    failed.set_exception(RuntimeError("down"))
    empty.set_result([])  # a dense leg after a failed embedding
    loop = asyncio.get_running_loop()
    # After the cut-off, which has passed: the first to find something ends the wait, the other is given up.
    loop.call_soon(lambda: loop.call_soon(first.set_result, ["hit"]))
    futures = {"keyword:0": failed, "dense:0": empty, "keyword:1": first, "graph": last}
    assert await leg_cutoff.settle(futures, time.monotonic() - 1, time.monotonic) == ["graph"]
    assert last.cancelled()


async def test_a_graph_leg_that_matched_entities_but_found_no_chunks_is_not_an_answer() -> None:
    graph = _answered(([], ["entity"], "trace"))  # retrieve's graph result: (hits, matches, trace)
    keyword = _never()
    asyncio.get_running_loop().call_soon(keyword.set_result, ["hit"])
    futures = {"graph": graph, "keyword:0": keyword}
    assert await leg_cutoff.settle(futures, time.monotonic() - 1, time.monotonic, found=nodes._found) == []
    assert keyword.result() == ["hit"]
