"""The GENERATION nodes of the query graph: route, run_tools, generate.

    START --GENERATION--> route --retrieve--> check_cache -> ... -> update_cache --> generate -> END
                            |  --tool------> run_tools ------------------------------^
                            |    (a tool that needs contexts runs after update_cache)
                            +--direct_answer---------------------------------------> generate

A router, a tool or the model that fails degrades the request (``metrics.degraded``), never fails it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retrieval_server.backends.llm import ChatModel
from retrieval_server.knowledge import Route
from retrieval_server.workflow.answer import DEADLINE_USED_EXTRACTIVE, write_answer
from retrieval_server.workflow.routing import Router, RuleRouter
from retrieval_server.workflow.state import QueryState, WorkflowDeps
from retrieval_server.workflow.time_limit import Limit
from retrieval_server.workflow.tools import TOOLS, Tool, ToolContext, run_tool

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Assistant:
    router: Router = field(default_factory=RuleRouter)
    tools: Mapping[str, Tool] = field(default_factory=lambda: dict(TOOLS))
    #: writes answers and summaries (None: extractive)
    chat: ChatModel | None = None
    temperature: float = 0.2


def assistant_of(deps: WorkflowDeps) -> Assistant:
    return deps.assistant if deps.assistant is not None else Assistant()


async def route(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    """Decide between retrieving, running tools and answering directly; the known entities the query
    names inform the decision (and seed the graph leg later)."""
    o = state.options
    matches, version = state.entity_matches, state.entity_matches_version
    if matches is None and deps.graph is not None:
        try:
            version = await deps.graph.version()
            matches = await deps.graph.match(o.query, state.point_filter.access, o.document_ids)
        except Exception:
            log.error("entity matching failed", exc_info=True)
            state.degrade("graph:store_error")
            matches = None
    # Like analysis, routing only improves the request (the rules decide without a model): half the time left.
    within = Limit.of(deps.settings.router_timeout_s, state.time_left(), share=0.5)
    decision, degraded = await assistant_of(deps).router.decide(o.query, matches or [], within)
    if degraded:
        state.degrade(degraded)
    state.metrics.route = decision
    return {"route": decision, "entity_matches": matches, "entity_matches_version": version}


async def run_tools(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    """The router's tool calls, concurrently, each under the tool timeout and the request's
    deadline less the reserve the answer needs: what was found in time reaches the caller."""
    assistant, o = assistant_of(deps), state.options
    calls = state.route.tool_calls if state.route else ()
    reserve_s = deps.settings.deadline_reserve_ms / 1e3

    def time_left() -> float | None:
        left = state.time_left()
        return None if left is None else left - reserve_s

    ctx = ToolContext(
        query=o.query,
        access=state.point_filter.access,
        document_ids=o.document_ids,
        graph=deps.graph,
        contexts=tuple(state.contexts),
        embedder=deps.embedder,
        chat=assistant.chat,
        chat_temperature=assistant.temperature,
        query_vector=state.own_query_vector(),
        degrade=state.degrade,
        time_left=time_left,
        log_limit=deps.log_limit,
    )
    results = await asyncio.gather(
        *(run_tool(assistant.tools, c.name, c.arguments, ctx, deps.settings.tool_timeout_s) for c in calls)
    )
    for r in results:
        if not r.success:
            state.degrade(f"tool:{r.name}:{'timeout' if r.error.startswith('timed out') else 'failed'}")
    return {"tool_results": list(results)}


async def generate(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    """The answer. Past the request's deadline there is no time for a model: extractive."""
    assistant = assistant_of(deps)
    chat = assistant.chat
    time_left = state.time_left()
    if chat is not None and time_left is not None and time_left <= 0:
        chat = None
        state.degrade(DEADLINE_USED_EXTRACTIVE)
    outcome = await write_answer(state, deps, chat, assistant.temperature, Limit.of(deps.settings.answer_timeout_s, time_left))
    for tag in outcome.degraded:
        state.degrade(tag)
    return {"answer": outcome.answer}


def needs_retrieval_first(state: QueryState, tools: Mapping[str, Tool]) -> bool:
    calls = state.route.tool_calls if state.route else ()
    return any(getattr(tools.get(c.name), "needs_contexts", False) for c in calls)


def next_after_route(state: QueryState, tools: Mapping[str, Tool]) -> str:
    decision = state.route.route if state.route else Route.RETRIEVE
    if decision is Route.DIRECT_ANSWER:
        return "generate"
    if decision is Route.TOOL and not needs_retrieval_first(state, tools):
        return "run_tools"
    return "check_cache"
