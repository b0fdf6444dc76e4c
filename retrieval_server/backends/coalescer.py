"""Calls to a batch-capable engine gathered into batches while the engine is busy.

An embedded engine answers a batch of searches for much less CPU per search than one search at a
time (qdrant-edge: about 6 ms for one exact search over SciFact's 20k chunks, 2.5 ms each in a
batch of 8, on the 2-core machine), and for less still when equal searches are next to each other
(see :func:`~retrieval_server.backends.vector_store.edge.grouped_order`). A query's dense searches
(its variants, the parent leg) are asked for in the same turn of the event loop once its embedding
is ready, and under load other requests' searches arrive while a batch runs: each batch takes
whatever is waiting, so a lone request is never delayed (it goes at the end of the current turn)
and a busy engine sees ever larger batches instead of a growing queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Req = TypeVar("Req")
Res = TypeVar("Res")


class Coalescer(Generic[Req, Res]):
    """``await submit(request)`` answers through ``run(batch)``, which returns one result per
    request in order; at most ``slots`` batches run at once, each of at most ``max_batch``."""

    def __init__(self, run: Callable[[list[Req]], Awaitable[list[Res]]], *, slots: int = 1, max_batch: int = 64) -> None:
        if slots < 1 or max_batch < 1:
            raise ValueError("slots and max_batch must be at least 1")
        self._run = run
        self._slots = slots
        self._max_batch = max_batch
        self._pending: list[tuple[Req, asyncio.Future[Res]]] = []
        self._running: set[asyncio.Task[None]] = set()
        self._scheduled = False

    async def submit(self, request: Req) -> Res:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Res] = loop.create_future()
        self._pending.append((request, future))
        self._schedule(loop)
        return await future

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        # At the end of this turn, so that everything asked for in it goes together.
        if not self._scheduled and len(self._running) < self._slots:
            self._scheduled = True
            loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        # A caller that went away (cancelled) is not searched for.
        self._pending = [(r, f) for r, f in self._pending if not f.done()]
        while self._pending and len(self._running) < self._slots:
            batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch :]
            task = asyncio.ensure_future(self._answer(batch))
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._pending:
            self._schedule(asyncio.get_running_loop())

    async def _answer(self, batch: list[tuple[Req, asyncio.Future[Res]]]) -> None:
        try:
            results = await self._run([r for r, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} requests was answered with {len(results)} results")
        except BaseException as exc:  # every waiting caller hears of it, a cancellation included
            error = exc if isinstance(exc, Exception) else RuntimeError("the batch was cancelled")
            for _, f in batch:
                if not f.done():
                    f.set_exception(error)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, f), result in zip(batch, results, strict=True):
            if not f.done():
                f.set_result(result)
