"""A minimal graph runner: nodes are ``async def node(state, deps) -> update``, routers pure functions.

Each node run is recorded as a stage (name, duration, count) in the state's metrics, in order.
An optional observer wraps the run and each stage (tracing spans); without one nothing is added.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from retrieval_server.domain import QueryMetrics, StageMetric

END = "__end__"
#: degradation tag of an answer the deadline cut short
PARTIAL_RESULTS = "deadline:partial_results"


class HasMetrics(Protocol):
    metrics: QueryMetrics


S = TypeVar("S", bound=HasMetrics)
D = TypeVar("D")
Node = Callable[[S, D], Awaitable[dict[str, Any] | None]]
Router = Callable[[S], str]
_UNOBSERVED = nullcontext()


class Observer(Protocol[S]):  # type: ignore[misc]
    """Context managers around a whole run and around each stage (entered before the node runs,
    left after its update is applied and its stage recorded)."""

    def run(self, state: S) -> AbstractContextManager[object]: ...

    def stage(self, name: str, state: S) -> AbstractContextManager[object]: ...


@dataclass(frozen=True, slots=True)
class _Step(Generic[S, D]):
    node: Node
    count: Callable[[S], int]
    cut_at_deadline: bool


class Graph(Generic[S, D]):
    def __init__(self, start: str | Router, max_steps: int = 64, clock: Callable[[], float] = time.monotonic) -> None:
        """``start`` is the first node's name, or a router choosing it from the state; deadlines are
        read on ``clock``."""
        self._start = start
        self._clock = clock
        self._steps: dict[str, _Step[S, D]] = {}
        self._next: dict[str, str | Router] = {}
        self._max_steps = max_steps
        self._observer: Observer[S] | None = None

    def node(self, name: str, fn: Node, count: Callable[[S], int] = lambda _s: 0, *, cut_at_deadline: bool = False) -> Graph[S, D]:
        """``cut_at_deadline``: a run of this node still going at the deadline is cancelled (its
        update dropped) and the run jumps to ``on_deadline``, which answers with what earlier nodes made."""
        self._steps[name] = _Step(fn, count, cut_at_deadline)
        return self

    def edge(self, src: str, dst: str | Router) -> Graph[S, D]:
        """``dst`` is a node name, :data:`END`, or a router choosing one from the state."""
        self._next[src] = dst
        return self

    def observe(self, observer: Observer[S] | None) -> Graph[S, D]:
        self._observer = observer
        return self

    def validate(self) -> None:
        for src in self._steps:
            if src not in self._next:
                raise ValueError(f"node '{src}' has no outgoing edge")
        for src, dst in self._next.items():
            if isinstance(dst, str) and dst != END and dst not in self._steps:
                raise ValueError(f"edge {src} -> {dst}: unknown node")

    async def run(
        self,
        state: S,
        deps: D,
        *,
        deadline: float | None = None,
        on_deadline: str | None = None,
        on_stage: Callable[[StageMetric], None] | None = None,
    ) -> S:
        """Run from the start node. Past ``deadline`` (on the graph's clock), jump to ``on_deadline``
        once, which finishes the request with what is ready: before the next node made with
        ``cut_at_deadline`` (the work the deadline may replace), or at once from one. Other nodes run
        past it: they finish an answer that is whole (tools and the answer of a GENERATION request,
        after the cache or after retrieval). ``on_stage`` hears of each stage as it ends."""
        if self._observer is None:
            return await self._run(state, deps, deadline, on_deadline, on_stage)
        with self._observer.run(state):
            return await self._run(state, deps, deadline, on_deadline, on_stage)

    async def _run(
        self, state: S, deps: D, deadline: float | None, on_deadline: str | None, on_stage: Callable[[StageMetric], None] | None
    ) -> S:
        name = self._start if isinstance(self._start, str) else self._start(state)
        jumped = was_cut = False
        for _ in range(self._max_steps):
            if name == END:
                return state
            if deadline is not None and on_deadline and not jumped and (was_cut or (self._steps[name].cut_at_deadline and self._clock() > deadline)):
                jumped = True
                state.metrics.degraded.append(PARTIAL_RESULTS)
                name = on_deadline
            # Reached on its own, it finishes the request as well: a deadline passed from here on
            # jumped back to it, ran it again and called a whole answer partial (or, with no
            # context, a failure).
            jumped = jumped or name == on_deadline
            step = self._steps[name]
            cut = deadline is not None and bool(on_deadline) and not jumped and step.cut_at_deadline
            with self._observer.stage(name, state) if self._observer is not None else _UNOBSERVED:
                t0 = time.perf_counter()
                if cut:
                    assert deadline is not None
                    update, was_cut = await self._cut_at(deadline, step, state, deps)
                else:
                    update, was_cut = await step.node(state, deps), False
                for key, value in (update or {}).items():
                    setattr(state, key, value)
                # A cut stage produced nothing: the state still holds the previous pass's output.
                stage = StageMetric(name, (time.perf_counter() - t0) * 1e3, 0 if was_cut else step.count(state))
                state.metrics.stages.append(stage)
            if on_stage is not None:
                on_stage(stage)
            if was_cut:
                continue  # to the jump: the node's edge is not taken
            nxt = self._next[name]
            name = nxt if isinstance(nxt, str) else nxt(state)
        raise RuntimeError(f"graph did not finish within {self._max_steps} steps")

    async def _cut_at(self, deadline: float, step: _Step[S, D], state: S, deps: D) -> tuple[dict[str, Any] | None, bool]:
        """The node's update, or (None, True) when the deadline came first."""
        # Relative to the loop's own clock: the graph's clock may be another (a test's).
        timeout = asyncio.timeout(max(0.0, deadline - self._clock()))
        try:
            async with timeout:
                return await step.node(state, deps), False
        except TimeoutError:
            if not timeout.expired():
                raise  # the node's own timeout, not the deadline
            return None, True
