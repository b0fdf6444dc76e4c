"""The coalescer: what is asked for together, or while the engine is busy, goes in one batch."""

from __future__ import annotations

import asyncio

import pytest

from retrieval_server.backends.coalescer import Coalescer


class Engine:
    """Doubles its inputs; each batch waits for ``release`` so that a test decides when it ends."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.fail: Exception | None = None

    async def run(self, batch: list[int]) -> list[int]:
        self.batches.append(batch)
        self.started.set()
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return [2 * x for x in batch]


async def test_requests_of_one_turn_form_one_batch_and_results_keep_their_order() -> None:
    engine = Engine()
    engine.release.set()
    c: Coalescer[int, int] = Coalescer(engine.run)
    assert await asyncio.gather(*(c.submit(x) for x in (1, 2, 3))) == [2, 4, 6]
    assert engine.batches == [[1, 2, 3]]


async def test_requests_arriving_while_the_engine_is_busy_wait_and_go_together() -> None:
    engine = Engine()
    c: Coalescer[int, int] = Coalescer(engine.run, slots=1)
    first = asyncio.ensure_future(c.submit(1))
    await engine.started.wait()
    later = [asyncio.ensure_future(c.submit(x)) for x in (2, 3, 4)]
    await asyncio.sleep(0)  # their turn ends: with the only slot busy, nothing more may start
    assert engine.batches == [[1]]
    engine.release.set()
    assert await first == 2
    assert await asyncio.gather(*later) == [4, 6, 8]
    assert engine.batches == [[1], [2, 3, 4]]


async def test_batches_are_capped_and_slots_run_side_by_side() -> None:
    engine = Engine()
    c: Coalescer[int, int] = Coalescer(engine.run, slots=2, max_batch=2)
    calls = [asyncio.ensure_future(c.submit(x)) for x in range(5)]
    await engine.started.wait()
    await asyncio.sleep(0)
    assert engine.batches == [[0, 1], [2, 3]]
    engine.release.set()
    assert await asyncio.gather(*calls) == [0, 2, 4, 6, 8]
    assert engine.batches == [[0, 1], [2, 3], [4]]


async def test_a_failed_batch_fails_each_caller_and_the_next_batch_runs() -> None:
    engine = Engine()
    engine.fail = ValueError("engine down")
    engine.release.set()
    c: Coalescer[int, int] = Coalescer(engine.run)
    results = await asyncio.gather(c.submit(1), c.submit(2), return_exceptions=True)
    assert [type(r) for r in results] == [ValueError, ValueError]
    engine.fail = None
    assert await c.submit(3) == 6


async def test_a_cancelled_caller_is_left_out_and_the_others_are_answered() -> None:
    engine = Engine()
    c: Coalescer[int, int] = Coalescer(engine.run, slots=1)
    first = asyncio.ensure_future(c.submit(1))
    await engine.started.wait()
    gone, kept = asyncio.ensure_future(c.submit(2)), asyncio.ensure_future(c.submit(3))
    await asyncio.sleep(0)
    gone.cancel()
    engine.release.set()
    assert (await first, await kept) == (2, 6)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert engine.batches == [[1], [3]]


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        Coalescer(Engine().run, slots=0)
