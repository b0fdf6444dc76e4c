"""The blocking executor runs queued work by priority: a query never waits behind queued ingestion."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from retrieval_server.backends.executor import BlockingExecutor, JobLock, Priority


async def test_a_query_job_overtakes_queued_background_jobs() -> None:
    executor = BlockingExecutor(1)
    release, started = threading.Event(), threading.Event()
    order: list[str] = []

    def blocker() -> None:
        started.set()
        release.wait()

    try:
        running = asyncio.ensure_future(executor.run(blocker, priority=Priority.BACKGROUND))
        await asyncio.to_thread(started.wait)  # the only thread is busy
        background = [asyncio.ensure_future(executor.run(order.append, f"ingest-{i}", priority=Priority.BACKGROUND)) for i in range(5)]
        await asyncio.sleep(0)  # the background jobs are queued first
        query = asyncio.ensure_future(executor.run(order.append, "query"))
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(running, query, *background)
        assert order == ["query", *(f"ingest-{i}" for i in range(5))]
    finally:
        executor.shutdown()


async def test_cancelled_jobs_are_skipped_and_errors_reach_the_caller() -> None:
    executor = BlockingExecutor(1)
    release = threading.Event()
    ran: list[int] = []
    try:
        blocked = asyncio.ensure_future(executor.run(release.wait))
        doomed = asyncio.ensure_future(executor.run(ran.append, 1))
        await asyncio.sleep(0)
        doomed.cancel()
        # The job is skipped once the cancellation reaches its future, which happens on the loop
        # (a done callback), not inside cancel(): wait for the task to end before freeing the thread.
        try:
            await doomed
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("the cancelled task finished")
        release.set()
        await blocked
        await executor.run(ran.append, 2)
        assert ran == [2]

        def boom() -> None:
            raise ValueError("nope")

        try:
            await executor.run(boom)
        except ValueError as exc:
            assert str(exc) == "nope"
        else:
            raise AssertionError("the job's exception was lost")
    finally:
        executor.shutdown()


async def test_a_query_preempts_a_running_background_job_only_when_no_thread_is_free() -> None:
    for workers in (1, 2):
        executor = BlockingExecutor(workers)
        started, stop = threading.Event(), threading.Event()
        preempted: list[int] = []

        def background() -> str:
            started.set()
            stop.wait()  # a long model run: it ends when preempted (or, with a free thread, when released)
            return "stopped"

        def preempt() -> None:
            preempted.append(workers)
            stop.set()

        try:
            running = asyncio.ensure_future(executor.run(background, priority=Priority.BACKGROUND, preempt=preempt))
            await asyncio.to_thread(started.wait)
            # The bound turns a query stuck behind the job into a failure, not a hang.
            assert await asyncio.wait_for(executor.run(lambda: "query"), 300) == "query"
            if workers == 1:
                assert preempted == [1] and await running == "stopped"
            else:
                assert preempted == [] and not running.done(), "a free thread took the query: nothing to stop"
                stop.set()
                await running
            # A finished job is no longer preempted.
            assert await executor.run(lambda: "again") == "again" and preempted == ([1] if workers == 1 else [])
        finally:
            stop.set()
            executor.shutdown()


def _own_nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is a Linux feature; elsewhere pools keep the process's")
async def test_a_niced_pool_runs_its_jobs_at_a_lower_scheduling_priority_than_the_rest_of_the_process() -> None:
    process = os.getpriority(os.PRIO_PROCESS, os.getpid())
    plain, niced = BlockingExecutor(1), BlockingExecutor(1, name="beside", nice=3)
    try:
        assert await plain.run(_own_nice) == process
        assert await niced.run(_own_nice, priority=Priority.BACKGROUND) == min(19, process + 3)
        # Only the pool's own threads: the process and its other threads keep their priority.
        assert _own_nice() == process and os.getpriority(os.PRIO_PROCESS, os.getpid()) == process
        assert await plain.run(_own_nice) == process
    finally:
        plain.shutdown()
        niced.shutdown()


async def test_a_holder_cancelled_while_its_job_runs_raises_at_once_and_the_lock_is_held_until_the_job_ends() -> None:
    """What a cache's lock guards (its matcher) is read by the job: released at the cancellation,
    the lock let a store change the matcher under the running scan; kept by a holder waiting for the
    job, a lookup cut by the cache's timeout returned only when its scan had ended."""
    executor, lock = BlockingExecutor(1), JobLock()
    loop, release, started = asyncio.get_running_loop(), threading.Event(), asyncio.Event()
    next_holder_found_the_job_ended: list[bool] = []

    def scan() -> None:
        loop.call_soon_threadsafe(started.set)
        release.wait()
        raise ValueError("read by the lock, as nobody awaits it")

    async def hold() -> None:
        async with lock:
            await lock.run(executor, scan)

    async def next_holder() -> None:
        async with lock:
            next_holder_found_the_job_ended.append(release.is_set())

    try:
        cut = asyncio.ensure_future(hold())
        await started.wait()
        cut.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cut  # while the job still waits for release
        after = asyncio.ensure_future(next_holder())
        loop.call_soon(release.set)  # after the next holder has asked for the lock
        await after
        assert next_holder_found_the_job_ended == [True]
    finally:
        release.set()
        executor.shutdown()


async def test_a_job_run_under_the_lock_returns_its_result_or_raises_its_error_to_the_holder() -> None:
    executor, lock = BlockingExecutor(1), JobLock()
    try:
        async with lock:
            assert await lock.run(executor, sum, [1, 2]) == 3
        async with lock:
            with pytest.raises(ZeroDivisionError):
                await lock.run(executor, lambda: 1 / 0)
        async with lock:  # released after each
            pass
        with pytest.raises(RuntimeError, match="holder"):
            await lock.run(executor, sum, [1])
    finally:
        executor.shutdown()
