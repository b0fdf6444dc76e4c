"""Routers: pure functions of the state that pick the next node."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from retrieval_server.domain import Mode, Strategy
from retrieval_server.knowledge import Route
from retrieval_server.workflow.assistant import next_after_route
from retrieval_server.workflow.graph import END
from retrieval_server.workflow.state import QueryState
from retrieval_server.workflow.tools import Tool


def after_access(state: QueryState) -> str:
    return "route" if state.options.mode is Mode.GENERATION else "check_cache"


def after_cache(state: QueryState) -> str:
    return after_retrieval(state) if state.cache_hit else "analyze_query"


def after_retrieval(state: QueryState) -> str:
    """Retrieval is done (or came from the cache): a GENERATION request goes on to its tools or its answer."""
    if state.options.mode is not Mode.GENERATION:
        return END
    if state.route is not None and state.route.route is Route.TOOL and state.route.tool_calls and not state.tool_results:
        return "run_tools"
    return "generate"


def after_enrich(state: QueryState) -> str:
    # After sub-queries, a search of the main query alone would drop their results: those hits go.
    return "retrieve" if state.search_again and not state.sub_queries_done else "check_sufficiency"


def make_after_route(tools: Mapping[str, Tool]) -> Callable[[QueryState], str]:
    def after_route(state: QueryState) -> str:
        return next_after_route(state, tools)

    return after_route


def make_after_sufficiency(threshold: float, max_iterations: int):  # type: ignore[no-untyped-def]
    def after_sufficiency(state: QueryState) -> str:
        if state.sufficiency >= threshold:
            return "select"
        if state.iteration < max_iterations:
            return "analyze_query"
        # Sub-queries search the vector legs; GRAPH is the graph leg alone.
        if state.analysis.sub_queries and not state.sub_queries_done and state.strategy is not Strategy.GRAPH:
            return "execute_sub_queries"
        return "select"

    return after_sufficiency
