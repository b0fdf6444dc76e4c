"""The retrieval legs' cut-off: a request with a deadline does not wait for a slow leg past the
time it needs to fuse, rerank and enrich what the other legs found.

Without it, one slow optional leg (a metadata search on a loaded MySQL, a wide graph expansion)
held the request until its deadline and the caller got DEADLINE_EXCEEDED, though the dense and
keyword legs had answered long before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from retrieval_server.workflow.abandon import abandon


def when(time_left: float | None, now: float, reserve_ms: float) -> float | None:
    """When (on the clock ``now`` was read from) legs still running are given up: the deadline less
    ``reserve_ms``, or less half the time left when that is less, so that a tight deadline still
    gives its legs half of it. None: no deadline, wait for every leg."""
    if time_left is None:
        return None
    return now + time_left - min(reserve_ms / 1e3, max(time_left, 0.0) / 2)


async def settle(
    futures: Mapping[str, asyncio.Future[Any]], cutoff: float | None, clock: Callable[[], float], found: Callable[[Any], bool] = bool
) -> list[str]:
    """Wait for every future, or until ``cutoff`` if one has found something by then (``found`` of
    its result), else until the first that does: with nothing found, a leg past the cut-off is
    still the only chance of an answer. An empty list or a failure is not an answer: a dense leg
    after a failed embedding returns [] at once, and must not have the keyword legs given up.
    Those still running are cancelled; their names are returned."""
    running = set(futures.values())
    if not running:
        return []
    if cutoff is None:
        await asyncio.wait(running)
        return []
    _, running = await asyncio.wait(running, timeout=max(0.0, cutoff - clock()))
    while running and not any(_found(f, found) for f in futures.values()):
        _, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
    abandon(running)
    return [name for name, f in futures.items() if f in running]


def _found(future: asyncio.Future[Any], found: Callable[[Any], bool]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None and found(future.result())
