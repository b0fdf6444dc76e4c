from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from retrieval_server.domain import QueryMetrics
from retrieval_server.workflow.graph import END, Graph


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
