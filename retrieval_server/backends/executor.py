"""The bounded thread pools that keep blocking work (inference, embedded engines) off the event loop.

Work is taken in priority order: a query's model run or engine call never waits behind queued
ingestion work, only behind the one job a thread is already running. Ingestion submits its work
in pieces at :attr:`Priority.BACKGROUND`, so a large document delays a query by at most one piece
instead of its whole embedding; it watches :meth:`BlockingExecutor.query_jobs` to make its pieces
small while queries come.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Priority(enum.IntEnum):
    """Lower runs first."""

    QUERY = 0
    BACKGROUND = 1


_STOP = 2  # after every priority: a stop marker is taken once the queue holds nothing else


class BlockingExecutor:
    """A fixed number of threads; ``await run(fn, *args)`` runs ``fn`` on one of them."""

    def __init__(self, workers: int, name: str = "blocking") -> None:
        self._queue: queue.PriorityQueue[tuple[int, int, Future[Any] | None, Callable[[], Any] | None]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        self._closed = False
        self._query_jobs = 0
        for thread in self._threads:
            thread.start()

    @property
    def workers(self) -> int:
        return len(self._threads)

    def query_jobs(self) -> int:
        """How many :attr:`Priority.QUERY` jobs were submitted so far (from the event loop's thread)."""
        return self._query_jobs

    async def run(self, fn: Callable[P, T], *args: P.args, priority: Priority = Priority.QUERY, **kwargs: P.kwargs) -> T:
        if self._closed:
            raise RuntimeError("executor is shut down")
        if priority is Priority.QUERY:
            self._query_jobs += 1
        future: Future[T] = Future()
        self._queue.put((int(priority), next(self._order), future, functools.partial(fn, *args, **kwargs)))
        # Cancelling the awaiting task cancels the future: a job not yet started is then skipped.
        return await asyncio.wrap_future(future)

    def _work(self) -> None:
        while True:
            _, _, future, job = self._queue.get()
            if future is None or job is None:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = job()
            except BaseException as exc:  # handed to the awaiting task, as concurrent.futures does
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self) -> None:
        """Let running and queued jobs finish, then stop the threads."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._queue.put((_STOP, next(self._order), None, None))
        for thread in self._threads:
            thread.join()
