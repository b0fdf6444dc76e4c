from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from retrieval_server.domain import QueryMetrics
from retrieval_server.workflow.graph import END, Graph, Node
from tests.support.clock import Clock


@dataclass
class S:
    n: int = 0
    metrics: QueryMetrics = field(default_factory=QueryMetrics)


async def inc(state: S, deps: None) -> dict[str, int]:
    return {"n": state.n + 1}


async def test_router_loops_and_stages_are_recorded_in_order() -> None:
    graph = Graph[S, None]("inc").node("inc", inc, lambda s: s.n).edge("inc", lambda s: "inc" if s.n < 3 else END)
    state = await graph.run(S(), None)
    assert state.n == 3
    assert [(m.stage, m.count) for m in state.metrics.stages] == [("inc", 1), ("inc", 2), ("inc", 3)]
    assert all(m.duration_ms >= 0 for m in state.metrics.stages)


async def test_runaway_graph_is_stopped() -> None:
    graph = Graph[S, None]("inc", max_steps=5).node("inc", inc).edge("inc", "inc")
    with pytest.raises(RuntimeError, match="5 steps"):
        await graph.run(S(), None)


def test_validate_rejects_dangling_edges() -> None:
    with pytest.raises(ValueError, match="unknown node"):
        Graph[S, None]("a").node("a", inc).edge("a", "b").validate()
    with pytest.raises(ValueError, match="no outgoing edge"):
        Graph[S, None]("a").node("a", inc).validate()


async def _record_end(state: S, deps: None) -> dict[str, int]:
    return {"n": state.n + 100}


def _with_deadline_jump(slow: Node, *, cut: bool, clock: Clock) -> Graph[S, None]:
    """The deadline is read on ``clock``, a test's, which moves only when told: no stall of a busy
    machine moves it, while a node's cut comes on the loop's clock, relative to the node's start."""
    return (
        Graph[S, None]("inc", clock=clock).node("inc", inc).node("slow", slow, lambda s: s.n, cut_at_deadline=cut)
        .node("after", inc, cut_at_deadline=True).node("end", _record_end)
        .edge("inc", "slow").edge("slow", "after").edge("after", END).edge("end", END)
    )


async def test_a_cuttable_node_running_at_the_deadline_is_cancelled_and_the_run_jumps() -> None:
    cancelled = asyncio.Event()

    async def held(state: S, deps: None) -> dict[str, int]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"n": -1}

    state = await _with_deadline_jump(held, cut=True, clock=Clock()).run(S(), None, deadline=0.05, on_deadline="end")
    assert cancelled.is_set() and state.n == 101  # inc's update kept, the held node's none, then the jump
    assert [(m.stage, m.count) for m in state.metrics.stages] == [("inc", 0), ("slow", 0), ("end", 0)]  # the cut stage made nothing
    assert state.metrics.degraded == ["deadline:partial_results"]


async def test_a_node_not_made_cuttable_finishes_and_the_jump_comes_after_it() -> None:
    clock = Clock()

    async def late(state: S, deps: None) -> dict[str, int]:
        await asyncio.sleep(0.2)  # past where a cut would have come (0.05 s)
        clock.now = 2.0  # and past the deadline on the graph's clock
        return {"n": state.n + 10}

    state = await _with_deadline_jump(late, cut=False, clock=clock).run(S(), None, deadline=0.05, on_deadline="end")
    assert state.n == 111 and [m.stage for m in state.metrics.stages] == ["inc", "slow", "end"]


async def test_past_the_deadline_a_node_not_made_cuttable_runs_and_nothing_is_partial() -> None:
    """Only the work the deadline may replace is jumped over: a GENERATION request whose tools ran
    past it goes on to its answer, which is whole."""
    clock = Clock()

    async def late(state: S, deps: None) -> dict[str, int]:
        clock.now = 2.0
        return {"n": state.n + 10}

    graph = (
        Graph[S, None]("inc", clock=clock).node("inc", late).node("answer", inc).node("end", _record_end)
        .edge("inc", "answer").edge("answer", END).edge("end", END)
    )
    state = await graph.run(S(), None, deadline=1.0, on_deadline="end")
    assert state.n == 11 and [m.stage for m in state.metrics.stages] == ["inc", "answer"] and state.metrics.degraded == []


async def test_a_nodes_own_timeout_is_its_error_not_the_deadline() -> None:
    async def times_out(state: S, deps: None) -> dict[str, int]:
        raise TimeoutError("the node's own")

    with pytest.raises(TimeoutError, match="the node's own"):
        await _with_deadline_jump(times_out, cut=True, clock=Clock()).run(S(), None, deadline=60.0, on_deadline="end")


async def test_a_deadline_passed_after_the_finishing_node_ran_is_no_jump_back_to_it() -> None:
    """The pipeline's on_deadline node (select) also runs on its own after the last pass: a deadline
    crossed in it or after it ran it again, and called a whole answer partial."""
    clock = Clock()

    async def finishing(state: S, deps: None) -> dict[str, int]:
        clock.now = 2.0  # past the deadline while it runs
        return {"n": state.n + 100}

    graph = (
        Graph[S, None]("inc", clock=clock).node("inc", inc).node("end", finishing).node("after", inc)
        .edge("inc", "end").edge("end", "after").edge("after", END)
    )
    state = await graph.run(S(), None, deadline=1.0, on_deadline="end")
    assert state.n == 102 and [m.stage for m in state.metrics.stages] == ["inc", "end", "after"]
    assert state.metrics.degraded == []
