"""The bounded thread pools that keep blocking work (inference, embedded engines) off the event loop.

Work is taken in priority order: a query's model run or engine call never waits behind queued
ingestion work, only behind the one job a thread is already running, and not even that one when
the job can be preempted: a background job submitted with ``preempt`` is told to stop (and
raises, e.g. :class:`scoring_core.encoders.Interrupted`) when a query job arrives while every
thread is busy. Ingestion submits its work in pieces at :attr:`Priority.BACKGROUND` and watches
:meth:`BlockingExecutor.query_jobs` to see whether queries are coming.

Priority in the queue does not reach the cores: a pool that only runs background work beside the
queries' (ingestion's model runs while queries come) is made with ``nice``, so that the kernel, too,
gives the queries' threads the cores it shares with them.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import itertools
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class Priority(enum.IntEnum):
    """Lower runs first."""

    QUERY = 0
    BACKGROUND = 1


#: ``nice`` of a pool that runs only work that should take what the queries leave of the cores:
#: the lowest priority the kernel has (the threads' nice value is capped at 19 anyway)
BACKGROUND_NICE = 19

_STOP = 2  # after every priority: a stop marker is taken once the queue holds nothing else


@dataclass(order=True, frozen=True, slots=True)
class _Item:
    priority: int
    order: int
    future: Future[Any] | None = field(compare=False)
    job: Callable[[], Any] | None = field(compare=False)
    preempt: Callable[[], None] | None = field(compare=False)


class BlockingExecutor:
    """A fixed number of threads; ``await run(fn, *args)`` runs ``fn`` on one of them.

    ``nice``: how much lower than the process's the threads' scheduling priority is (Linux: a
    thread's own nice value; 19 at most, as the kernel allows). Only for pools whose every job
    may wait for the rest of the process."""

    def __init__(self, workers: int, name: str = "blocking", *, nice: int = 0) -> None:
        self._nice = nice
        self._queue: queue.PriorityQueue[_Item] = queue.PriorityQueue()
        self._order = itertools.count()
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(workers)]
        self._closed = False
        self._query_jobs = 0
        self._lock = threading.Lock()
        self._busy = 0
        #: the preempt hooks of the background jobs running now, by their order number
        self._preemptible: dict[int, Callable[[], None]] = {}
        for thread in self._threads:
            thread.start()

    @property
    def workers(self) -> int:
        return len(self._threads)

    def query_jobs(self) -> int:
        """How many :attr:`Priority.QUERY` jobs were submitted so far (from the event loop's thread)."""
        return self._query_jobs

    async def run(
        self,
        fn: Callable[P, T],
        *args: P.args,
        priority: Priority = Priority.QUERY,
        preempt: Callable[[], None] | None = None,
        **kwargs: P.kwargs,
    ) -> T:
        """``preempt`` (background jobs): called, from the event loop's thread, when a query job
        arrives while this job runs and no thread is free; the job should then stop soon."""
        if self._closed:
            raise RuntimeError("executor is shut down")
        if priority is Priority.QUERY:
            self._query_jobs += 1
            self._preempt()
        future: Future[T] = Future()
        self._queue.put(_Item(int(priority), next(self._order), future, functools.partial(fn, *args, **kwargs), preempt))
        # Cancelling the awaiting task cancels the future: a job not yet started is then skipped.
        return await asyncio.wrap_future(future)

    def _preempt(self) -> None:
        with self._lock:
            hooks = list(self._preemptible.values()) if self._busy >= len(self._threads) else []
        for hook in hooks:
            hook()

    def _lower_priority(self) -> None:
        # Linux schedules threads as tasks of their own, each with its nice value; elsewhere the same
        # call would renice the whole process, so the threads keep the process's priority there.
        if not self._nice or sys.platform != "linux":
            return
        tid = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + self._nice))
        except OSError as exc:  # e.g. a seccomp profile that refuses it: the pool still works
            log.warning("could not lower the priority of %s: %s", threading.current_thread().name, exc)

    def _work(self) -> None:
        self._lower_priority()
        while True:
            item = self._queue.get()
            future, job = item.future, item.job
            if future is None or job is None:
                return
            if not future.set_running_or_notify_cancel():
                continue
            with self._lock:
                self._busy += 1
                if item.preempt is not None:
                    self._preemptible[item.order] = item.preempt
            try:
                result = job()
            except BaseException as exc:  # handed to the awaiting task, as concurrent.futures does
                future.set_exception(exc)
            else:
                future.set_result(result)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._preemptible.pop(item.order, None)

    def shutdown(self) -> None:
        """Let running and queued jobs finish, then stop the threads."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._queue.put(_Item(_STOP, next(self._order), None, None, None))
        for thread in self._threads:
            thread.join()


class JobLock:
    """An asyncio lock (``async with``) over what a job on an executor's thread reads (a cache's
    matcher). A holder cancelled while such a job runs (:meth:`run`) raises at once, and the lock is
    released only when the job has ended: released at the cancellation, its next holder changed what
    the thread still read; kept by a holder waiting for the job, the cache's timeout no longer
    bounded the lookup it cut."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        #: the current holder's job
        self._job: asyncio.Future[Any] | None = None

    async def __aenter__(self) -> None:
        await self._lock.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        # Nothing awaited: a cancelled holder leaves at once.
        job, self._job = self._job, None
        if job is not None and not job.done():
            job.add_done_callback(self._release_after)
        else:
            self._lock.release()

    def _release_after(self, job: asyncio.Future[Any]) -> None:
        if not job.cancelled():
            job.exception()  # retrieved, so that asyncio does not log what nobody awaits
        self._lock.release()

    async def run(self, executor: BlockingExecutor, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``executor.run(fn, ...)`` at query priority, by the lock's holder. A job not started when
        the holder is cancelled still runs, holding the lock until it has."""
        if not self._lock.locked():
            raise RuntimeError("JobLock.run is for the lock's holder (inside async with)")
        job = self._job = asyncio.ensure_future(executor.run(fn, *args, **kwargs))
        return await asyncio.shield(job)
