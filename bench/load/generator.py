"""A grpc.aio load generator: closed loop at fixed concurrency, open loop at a fixed rate, or one
query at a time beside other work (:func:`interleaved`).

Open-loop latency counts from when a request was due, not when it was sent, so a server that
falls behind shows its queueing delay instead of hiding it (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import numpy as np
from google.protobuf.message import Message

from bench.load.scenarios import Scenario
from bench.transport import PLAINTEXT, Transport
from retrieval.v1 import retrieval_pb2 as pb


#: what the configuration alone decides, on every answer: a technique that needs an LLM, where
#: none is configured, skipped ("analysis:hyde:skipped: needs an LLM")
WITHOUT_LLM = ":skipped: needs an LLM"
#: what the query alone decides: a query of stop words only has no keyword terms (NFCorpus's
#: "Down But Not Out"); its answer is the one the service gives it, on every run
OF_THE_QUERY = frozenset({"keyword:no_terms"})


def unexpected(reason: str) -> bool:
    """Whether an answer degraded for ``reason`` is not the answer the benchmark meant to measure:
    every reason but a technique skipped for want of an LLM and what the query's own words decide
    (a stage that failed or was cut ran less than it does, and its time is not the stage's)."""
    return not ((reason.startswith("analysis:") and reason.endswith(WITHOUT_LLM)) or reason in OF_THE_QUERY)


@dataclass(slots=True)
class Samples:
    latencies_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    stage_ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    #: each stage's time in every response that ran it (for medians beside medians of floors)
    stage_runs: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: answers degraded for a reason :func:`unexpected`, by reason
    degraded: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    cached: int = 0
    responses: int = 0
    elapsed_s: float = 0.0

    def record(self, resp: Message, ms: float) -> None:
        self.latencies_ms.append(ms)
        self.responses += 1
        if isinstance(resp, pb.QueryResponse):
            self.cached += resp.cached
            # Per answer: a reason a retry's pass reported again is one answer degraded.
            for reason in set(resp.metrics.degraded):
                if unexpected(reason):
                    self.degraded[reason] += 1
            mine: dict[str, float] = defaultdict(float)
            for st in resp.metrics.stages:
                mine[st.stage] += st.duration_ms  # a retry runs a stage again
            for stage, ms in mine.items():
                self.stage_ms[stage] += ms
                self.stage_runs[stage].append(ms)

    def summary(self) -> dict[str, object]:
        lat = np.asarray(self.latencies_ms) if self.latencies_ms else np.asarray([np.nan])
        n = max(self.responses, 1)
        stages = sorted(((k, v / n) for k, v in self.stage_ms.items()), key=lambda kv: -kv[1])
        return {
            "requests": self.responses + sum(self.errors.values()),
            "rps": round(self.responses / self.elapsed_s, 2) if self.elapsed_s else 0.0,
            "p50_ms": round(float(np.percentile(lat, 50)), 2),
            "p95_ms": round(float(np.percentile(lat, 95)), 2),
            "p99_ms": round(float(np.percentile(lat, 99)), 2),
            "errors": sum(self.errors.values()),
            "error_codes": dict(self.errors),
            # Rounded down: one miss among thousands of answers still reads below 1.
            "cache_hit_rate": self.cached * 1000 // n / 1000,
            "degraded": dict(self.degraded),
            "stage_ms": {k: round(v, 2) for k, v in stages},
            "stage_p50_ms": {k: round(float(np.median(v)), 2) for k, v in self.stage_runs.items()},
        }


async def _attempt(method: grpc.aio.UnaryUnaryMultiCallable, req: Message, timeout_s: float) -> tuple[Message | None, str]:
    try:
        return await method(req, timeout=timeout_s), ""
    except grpc.aio.AioRpcError as exc:
        return None, exc.code().name


def _record(samples: Samples, outcome: tuple[Message | None, str], ms: float) -> None:
    resp, error = outcome
    if resp is None:
        samples.errors[error] += 1
    else:
        samples.record(resp, ms)


async def _call(method: grpc.aio.UnaryUnaryMultiCallable, req: Message, samples: Samples, start: float, timeout_s: float) -> None:
    _record(samples, await _attempt(method, req, timeout_s), (time.perf_counter() - start) * 1e3)


async def warm(
    target: str, scenario: Scenario, queries: list[str], *, concurrency: int = 4, connections: int = 1, transport: Transport = PLAINTEXT
) -> None:
    """Send each query once over every one of ``connections`` connections.

    Fills the semantic cache for the cached scenario. With several server processes each has its
    own cache and SO_REUSEPORT assigns connections, not calls: sending every query over several
    connections reaches every process with high probability (a repeat is a cheap cache hit).
    """
    chans = [transport.channel(target, [("grpc.use_local_subchannel_pool", 1)]) for _ in range(connections)]
    try:
        methods = [scenario.method_on(c) for c in chans]
        sem = asyncio.Semaphore(concurrency)

        async def one(q: str) -> None:
            for method in methods:
                async with sem:
                    await method(scenario.build(q), timeout=120)

        await asyncio.gather(*(one(q) for q in queries))
    finally:
        for c in chans:
            await c.close()


async def closed_loop(
    target: str, scenario: Scenario, queries: list[str], *, concurrency: int, duration_s: float, warmup_s: float = 2.0,
    timeout_s: float = 60.0, channels: int = 1, transport: Transport = PLAINTEXT, min_calls: int = 0,
) -> Samples:
    """``concurrency`` callers, each sending its next request as soon as the last one returns.

    Counted: the calls that complete inside the measured window, which ends on time however long
    the calls in flight would take (they are cancelled), so slow scenarios are not under-counted.
    ``min_calls``: the window stays open past ``duration_s`` until that many calls completed in
    it (a smoke run on a slow machine still gets its samples; the rate uses the real window).
    """
    requests = [scenario.build(q) for q in queries]
    samples = Samples()
    enough = asyncio.Event()
    if min_calls <= 0:
        enough.set()
    chans = [transport.channel(target, [("grpc.use_local_subchannel_pool", 1)]) for _ in range(channels)]
    try:
        methods = [scenario.method_on(c) for c in chans]
        cursor = itertools.count()
        measure_from = time.perf_counter() + warmup_s
        end = measure_from + duration_s

        async def caller(worker: int) -> None:
            method = methods[worker % len(methods)]
            while True:
                req = requests[next(cursor) % len(requests)]
                start = time.perf_counter()
                outcome = await _attempt(method, req, timeout_s)
                done = time.perf_counter()
                if measure_from <= done and (done <= end or not enough.is_set()):
                    _record(samples, outcome, (done - start) * 1e3)
                    if samples.responses + sum(samples.errors.values()) >= min_calls:
                        enough.set()

        callers = asyncio.gather(*(caller(i) for i in range(concurrency)))
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        if not enough.is_set():
            # Also returns when the callers fail: their exception is raised below.
            waiting = asyncio.ensure_future(enough.wait())
            await asyncio.wait([waiting, callers], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
        closed = time.perf_counter()
        callers.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await callers
        samples.elapsed_s = max(duration_s, closed - measure_from)
    finally:
        for c in chans:
            await c.close()
    return samples


async def open_loop(
    target: str, scenario: Scenario, queries: list[str], *, rate: float, duration_s: float, timeout_s: float = 60.0,
    channels: int = 1, transport: Transport = PLAINTEXT,
) -> Samples:
    """Requests due at a fixed rate, whether or not earlier ones have returned."""
    requests = [scenario.build(q) for q in queries]
    samples = Samples()
    chans = [transport.channel(target, [("grpc.use_local_subchannel_pool", 1)]) for _ in range(channels)]
    try:
        methods = [scenario.method_on(c) for c in chans]
        tasks = []
        t0 = time.perf_counter()
        total = int(rate * duration_s)
        for i in range(total):
            due = t0 + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(_call(methods[i % len(methods)], requests[i % len(requests)], samples, due, timeout_s)))
        await asyncio.gather(*tasks)
        samples.elapsed_s = time.perf_counter() - t0
    finally:
        for c in chans:
            await c.close()
    return samples


async def interleaved(
    target: str, scenario: Scenario, queries: list[str], beside: Callable[[str, int], None], *, warm_up: int = 10,
    timeout_s: float = 60.0, transport: Transport = PLAINTEXT,
) -> Samples:
    """Each query sent once, in turn, with ``beside(query, i)`` called next to it: after the
    answer for even ``i``, before the request for odd ``i`` (so that neither side always runs
    second). Only the calls are timed here; ``beside`` times its own work. The first ``warm_up``
    queries are sent once before, not counted (``beside`` warms its own side)."""
    samples = Samples()
    channel = transport.channel(target, [("grpc.use_local_subchannel_pool", 1)])
    try:
        method = scenario.method_on(channel)
        for q in queries[: min(warm_up, len(queries))]:
            await _attempt(method, scenario.build(q), timeout_s)
        t0 = time.perf_counter()
        for i, q in enumerate(queries):
            if i % 2:
                beside(q, i)
            req = scenario.build(q)
            start = time.perf_counter()
            _record(samples, await _attempt(method, req, timeout_s), (time.perf_counter() - start) * 1e3)
            if not i % 2:
                beside(q, i)
        samples.elapsed_s = time.perf_counter() - t0
    finally:
        await channel.close()
    return samples
