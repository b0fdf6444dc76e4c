"""Routers: pure functions of the state that pick the next node."""

from __future__ import annotations

from retrieval_server.workflow.graph import END
from retrieval_server.workflow.state import QueryState


def after_cache(state: QueryState) -> str:
    return END if state.cache_hit else "analyze_query"


def make_after_sufficiency(threshold: float, max_iterations: int):  # type: ignore[no-untyped-def]
    def after_sufficiency(state: QueryState) -> str:
        if state.sufficiency >= threshold:
            return "select"
        if state.iteration < max_iterations:
            return "analyze_query"
        if state.analysis.sub_queries and not state.sub_queries_done:
            return "execute_sub_queries"
        return "select"

    return after_sufficiency
