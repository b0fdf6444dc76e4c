"""GENERATION: the router's three branches, each tool, answers with citations (extractive, and written
by an LLM served by a local OpenAI-compatible server), and the degradations when any of them fails."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import pytest_asyncio
from pydantic import BaseModel

from bench.graph.corpus import make_wiki
from retrieval_server.app import Application
from retrieval_server.backends.circuit_breaker import CircuitBreaker
from retrieval_server.backends.llm import AnthropicChat, GeminiChat, OpenAICompatibleChat
from retrieval_server.config import load_settings
from retrieval_server.domain import Access, AccessFilter, ChildChunk, DeadlineExceeded, DocumentSource, Identity, Mode, ParentChunk, QueryOptions, Role, Strategy
from retrieval_server.ingest.graph_extraction import ClassicalGraphExtractor, LlmGraphExtractor
from retrieval_server.knowledge import Route, RouteDecision, ToolCall
from retrieval_server.observability.log_limit import LogLimit
from retrieval_server.workflow.answer import NOT_ANSWERABLE, UNSUPPORTED
from retrieval_server.workflow.assistant import Assistant
from retrieval_server.workflow.pipeline import QueryPipeline
from retrieval_server.workflow.routing import LlmRouter, RuleRouter
from retrieval_server.workflow.sentences import sentences_of_contexts
from retrieval_server.workflow import tools as tools_module
from retrieval_server.workflow.tools import TOOLS, ToolContext, run_tool
from tests.support.clock import Clock
from tests.support.http_servers import Sse, json_server
from tests.support.intercept import Intercepted

WIKI = make_wiki(7)
#: A time limit for a tool call or a local model server that a busy machine meets (where the limit is not what is tested).
TOOL_S = 60.0
ALICE, BOB = Identity("alice", Role.USER), Identity("bob", Role.USER)
CYCLE = "CycleA calls CycleB. CycleB calls CycleC. CycleC calls CycleA. OrbitSvc depends on CycleA."


def _source(doc_id: str, text: str, **kw: Any) -> DocumentSource:
    return DocumentSource(filename=f"{doc_id}.txt", content=text.encode(), document_id=doc_id, **kw)


@pytest_asyncio.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Application]:
    application = Application(load_settings(data_dir=tmp_path_factory.mktemp("assistant"), cache_backend="none", tool_timeout_s=TOOL_S))
    await application.open()
    sources = [_source(d, t) for d, t in WIKI.documents.items()]
    sources += [
        _source("cycle", CYCLE),
        _source("secret", "ProjectZephyr depends on AuthSvc. ProjectZephyr is confidential.", access=Access.PRIVATE, owner_id="alice"),
    ]
    assert not (await application.ingest(sources)).errors
    yield application
    await application.close()


def _with(app: Application, **assistant: Any) -> QueryPipeline:
    deps = app.pipeline.deps
    return QueryPipeline(dataclasses.replace(deps, assistant=dataclasses.replace(Assistant(), **assistant)))


def _ask(q: str, **kw: Any) -> QueryOptions:
    return QueryOptions(q, kw.pop("top_k", 5), strategy=kw.pop("strategy", Strategy.HYBRID), mode=Mode.GENERATION, use_cache=False, **kw)


def _stages(r: Any) -> list[str]:
    return [s.stage for s in r.metrics.stages]


def _dependents(target: str) -> set[str]:
    """What uses, calls or depends on ``target`` in the public wiki."""
    return (
        {s for s, stores in WIKI.uses.items() if target in stores}
        | {s for s, called in WIKI.calls.items() if target in called}
        | {p for p, deps in WIKI.depends.items() if target in deps}
    )


# --- the router's three branches ----------------------------------------------------------------


async def test_direct_answer_skips_retrieval(app: Application) -> None:
    r = await app.pipeline.query(_ask("Hello there!"))
    assert _stages(r) == ["build_access_filter", "route", "generate"] and r.contexts == ()
    assert r.metrics.route is not None and r.metrics.route.route is Route.DIRECT_ANSWER
    assert r.answer is not None and r.answer.route is Route.DIRECT_ANSWER and r.answer.extractive and "indexed documents" in r.answer.text


async def test_tool_route_counts_dependents_over_the_graph(app: Application) -> None:
    store = "LedgerDB"
    r = await app.pipeline.query(_ask(f"How many services depend on {store}?"))
    assert _stages(r) == ["build_access_filter", "route", "run_tools", "generate"]
    assert r.metrics.route is not None and r.metrics.route.route is Route.TOOL
    [result] = r.answer.tool_results  # type: ignore[union-attr]
    expected = sorted(s for s, stores in WIKI.uses.items() if store in stores)
    assert result.name == "calculate" and result.success and result.result["value"] == len(expected)
    assert result.result["lists"][f"dependents of {store}"] == expected
    assert f"= {len(expected)}" in r.answer.text  # type: ignore[union-attr]


async def test_retrieve_route_answers_with_citations(app: Application) -> None:
    r = await app.pipeline.query(_ask("What does AuthSvc handle?"))
    stages = _stages(r)
    assert stages[:2] == ["build_access_filter", "route"] and stages[-1] == "generate" and "retrieve" in stages and "update_cache" in stages
    a = r.answer
    assert a is not None and a.route is Route.RETRIEVE and a.extractive and a.supported and a.model == "extractive"
    assert any("AuthSvc handles" in s.text for s in a.sentences)
    for s in a.sentences:
        assert s.citations and all(1 <= c <= len(r.contexts) for c in s.citations)
    assert {c.marker for c in a.citations} == {c for s in a.sentences for c in s.citations}
    for c in a.citations:
        assert r.contexts[c.marker - 1].parent.parent_chunk_id == c.parent_chunk_id
    assert "[1]" in a.text or "[2]" in a.text


async def test_a_cached_retrieval_is_answered_again(app: Application) -> None:
    from retrieval_server.backends.cache import MemoryCache

    p = QueryPipeline(dataclasses.replace(app.pipeline.deps, cache=MemoryCache(app.embedder.dim)))
    question = QueryOptions("What does AuthSvc handle?", 3, strategy=Strategy.HYBRID, mode=Mode.GENERATION)
    first = await p.query(question)
    again = await p.query(question)
    assert again.cached and _stages(again) == ["build_access_filter", "route", "check_cache", "generate"]
    assert again.answer is not None and again.answer.text == first.answer.text  # type: ignore[union-attr]


async def test_requests_the_router_answers_without_retrieval_never_ask_the_cache(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """retrieval_query_cache_total counted a greeting answered directly, or a question the tools
    answered alone, as a miss: the hit ratio fell with every such request, though none asked."""
    from retrieval_server.api.servicer import RetrievalServicer
    from retrieval_server.backends.cache import MemoryCache

    cache = MemoryCache(app.embedder.dim)
    monkeypatch.setattr(app, "pipeline", QueryPipeline(dataclasses.replace(app.pipeline.deps, cache=cache)))
    servicer, counted = RetrievalServicer(app), []
    for question in ("Hello there!", "How many services depend on LedgerDB?", "What does AuthSvc handle?", "What does AuthSvc handle?"):
        before = _cache_outcomes(app)
        options = QueryOptions(question, 3, strategy=Strategy.HYBRID, mode=Mode.GENERATION)
        servicer._respond(options, await app.pipeline.query(options), SimpleNamespace(time_remaining=lambda: None))
        after = _cache_outcomes(app)
        counted.append([k for k in after if after[k] != before.get(k, 0.0)])
    assert counted == [["bypassed"], ["bypassed"], ["miss"], ["hit"]]


def _cache_outcomes(app: Application) -> dict[str, float]:
    return {s.labels["outcome"]: s.value for m in app.metrics.registry.collect() if m.name == "retrieval_query_cache"
            for s in m.samples if s.name.endswith("_total")}


async def test_unsupported_questions_say_so(app: Application) -> None:
    r = await app.pipeline.query(_ask("What is the boiling point of liquid nitrogen in kelvin?"))
    assert r.answer is not None and not r.answer.supported and r.answer.text.startswith(UNSUPPORTED)


# --- tools -------------------------------------------------------------------------------------------


def _ctx(app: Application, query: str = "q", identity: Identity = Identity(), contexts: tuple[Any, ...] = ()) -> ToolContext:
    return ToolContext(query, AccessFilter.for_identity(identity), (), app.graph, contexts, app.embedder)


async def test_lookup_facts(app: Application) -> None:
    r = await run_tool(TOOLS, "lookup_facts", {"entity": "authsvc"}, _ctx(app), TOOL_S)
    assert r.success and r.result["name"] == "AuthSvc" and r.result["type"] == "SERVICE"
    deps_in = {x["entity"] for x in r.result["relations"] if x["direction"] == "in" and x["relation"] == "DEPENDS_ON"}
    assert deps_in == {p for p, d in WIKI.depends.items() if "AuthSvc" in d}
    assert "authsvc" in {s["document_id"] for s in r.result["sources"]} and r.result["chunks"] >= 1
    private = await run_tool(TOOLS, "lookup_facts", {"entity": "ProjectZephyr"}, _ctx(app, identity=BOB), TOOL_S)
    assert not private.success and "no known entity" in private.error
    assert (await run_tool(TOOLS, "lookup_facts", {"entity": "ProjectZephyr"}, _ctx(app, identity=ALICE), TOOL_S)).success


async def test_lookup_facts_lists_are_bounded_and_counted(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub entity named by 4,000 documents made a tool's answer over the response limit, which
    only contexts are cut to meet; and a count of chunks read through a cap said the cap."""
    whole = await run_tool(TOOLS, "lookup_facts", {"entity": "authsvc"}, _ctx(app), TOOL_S)
    assert len(whole.result["relations"]) > 1 and whole.result["chunks"] > 1 and not whole.result["chunks_more"]
    monkeypatch.setattr(tools_module, "MAX_LISTED", 1)
    monkeypatch.setattr(tools_module, "MAX_COUNTED_CHUNKS", 1)
    r = await run_tool(TOOLS, "lookup_facts", {"entity": "authsvc"}, _ctx(app), TOOL_S)
    assert r.result["relations"] == whole.result["relations"][:1] and r.result["relations_total"] == len(whole.result["relations"])
    assert r.result["sources"] == whole.result["sources"][:1] and r.result["sources_total"] == len(whole.result["sources"])
    assert r.result["chunks"] == 1 and r.result["chunks_more"]


async def test_analyze_dependencies_stops_at_its_node_cap_within_a_level() -> None:
    """The cap was checked once a level: a hub's level added all its 1,200 dependencies, and every
    edge touching the level either way went through the cycle search."""
    from retrieval_server.knowledge import EntityType, GraphEdge, GraphEntity, RelationType

    hub = [GraphEdge("x", f"lib{i}", RelationType.DEPENDS_ON, 1.0) for i in range(1_200)]
    users = [GraphEdge(f"svc{j}", "lib0", RelationType.DEPENDS_ON, 1.0) for j in range(50)]  # into the level: no dependency of x

    class Hub:
        async def resolve(self, name: str, access: AccessFilter, document_ids: Any = ()) -> GraphEntity:
            return GraphEntity("x", "X", EntityType.SERVICE, 1, ("d",))

        async def edges(self, keys: Any, access: AccessFilter, document_ids: Any = (), relations: Any = None) -> list[GraphEdge]:
            keys = set(keys)
            return [e for e in hub + users if e.source in keys or e.target in keys]

        async def entities(self, keys: Any, access: AccessFilter, document_ids: Any = ()) -> dict[str, GraphEntity]:
            return {k: GraphEntity(k, k, EntityType.SERVICE, 1, ("d",)) for k in keys}

    ctx = ToolContext("q", AccessFilter.for_identity(Identity()), (), Hub(), (), None)  # type: ignore[arg-type]
    r = await run_tool(TOOLS, "analyze_dependencies", {"entity": "X", "direction": "dependencies", "max_depth": 2}, ctx, TOOL_S)
    assert r.success, r.error
    found = r.result["dependencies"]["direct"] + [t["entity"] for t in r.result["dependencies"]["transitive"]]
    assert len(found) == tools_module.AnalyzeDependencies.max_nodes - 1 and not any(n.startswith("svc") for n in found)
    # A cycle closing on the deepest level back into the entity is found: its last edge was read
    # at the first level, as one into the entity.
    hub[:], users[:] = [GraphEdge("x", "b", RelationType.DEPENDS_ON, 1.0), GraphEdge("b", "c", RelationType.DEPENDS_ON, 1.0),
                        GraphEdge("c", "x", RelationType.DEPENDS_ON, 1.0)], []
    r = await run_tool(TOOLS, "analyze_dependencies", {"entity": "X", "direction": "dependencies", "max_depth": 2}, ctx, TOOL_S)
    assert [sorted(cycle) for cycle in r.result["cycles"]] == [["b", "c", "x"]], r.result


async def test_a_dependency_ring_without_short_cycles_is_searched_within_a_budget() -> None:
    """A ring of 160 services, each depending on the next 20, has no cycle of 6 or fewer: networkx
    searched the whole component on the event loop (6 s, past the tool's timeout, which cannot stop it)."""
    from retrieval_server.knowledge import EntityType, GraphEdge, GraphEntity, RelationType

    n, k = 160, 20
    ring = [GraphEdge(f"s{i}", f"s{(i + j) % n}", RelationType.DEPENDS_ON, 1.0) for i in range(n) for j in range(1, k + 1)]

    class Ring:
        async def resolve(self, name: str, access: AccessFilter, document_ids: Any = ()) -> GraphEntity:
            return GraphEntity("s0", "S0", EntityType.SERVICE, 1, ("d",))

        async def edges(self, keys: Any, access: AccessFilter, document_ids: Any = (), relations: Any = None) -> list[GraphEdge]:
            keys = set(keys)
            return [e for e in ring if e.source in keys or e.target in keys]

        async def entities(self, keys: Any, access: AccessFilter, document_ids: Any = ()) -> dict[str, GraphEntity]:
            return {key: GraphEntity(key, key.upper(), EntityType.SERVICE, 1, ("d",)) for key in keys}

    ctx = ToolContext("q", AccessFilter.for_identity(Identity()), (), Ring(), (), None)  # type: ignore[arg-type]
    r = await run_tool(TOOLS, "analyze_dependencies", {"entity": "S0", "direction": "both", "max_depth": 5}, ctx, TOOL_S)
    assert r.success, r.error
    assert r.result["cycles"] == [] and r.result["cycles_complete"] is False and "0 or more dependency cycles" in r.summary


async def test_calculate_is_safe(app: Application) -> None:
    ok = await run_tool(TOOLS, "calculate", {"expression": "(2 + 3) * 4 ** 2 / 8"}, _ctx(app), TOOL_S)
    assert ok.success and ok.result["value"] == 10
    count = await run_tool(TOOLS, "calculate", {"expression": 'count_dependents("AuthSvc") + count_entities("PROJECT")'}, _ctx(app), TOOL_S)
    assert count.success and count.result["value"] == len(_dependents("AuthSvc")) + len(WIKI.depends)
    for bad in ("__import__('os').system('true')", "open('/etc/passwd')", "(1).__class__", "9 ** 9 ** 9", "1 / 0", "x + 1"):
        r = await run_tool(TOOLS, "calculate", {"expression": bad}, _ctx(app), TOOL_S)
        assert not r.success and r.error, bad


async def test_analyze_dependencies_finds_transitive_links_and_cycles(app: Application) -> None:
    r = await run_tool(TOOLS, "analyze_dependencies", {"entity": "OrbitSvc", "direction": "dependencies"}, _ctx(app), TOOL_S)
    assert r.success and r.result["dependencies"]["direct"] == ["CycleA"]
    assert {(t["entity"], t["depth"]) for t in r.result["dependencies"]["transitive"]} == {("CycleB", 2), ("CycleC", 3)}
    assert len(r.result["cycles"]) == 1 and sorted(r.result["cycles"][0]) == ["CycleA", "CycleB", "CycleC"]
    project = next(iter(WIKI.depends))
    down = await run_tool(TOOLS, "analyze_dependencies", {"entity": WIKI.depends[project][0], "direction": "dependents"}, _ctx(app), TOOL_S)
    assert project in down.result["dependents"]["direct"] and "dependencies" not in down.result
    bad = await run_tool(TOOLS, "analyze_dependencies", {"entity": "OrbitSvc", "max_depth": 99}, _ctx(app), TOOL_S)
    assert not bad.success and "max_depth" in bad.error


async def test_summarize_extracts_from_the_contexts(app: Application) -> None:
    r = await app.pipeline.query(_ask("Summarize what AuthSvc does", top_k=3))
    stages = _stages(r)
    assert stages.index("update_cache") < stages.index("run_tools") < stages.index("generate")  # retrieval first
    [tool] = r.answer.tool_results  # type: ignore[union-attr]
    assert tool.name == "summarize" and tool.success and tool.result["model"] == "extractive"
    assert r.answer is not None and r.answer.citations and all(1 <= c.marker <= len(r.contexts) for c in r.answer.citations)


async def test_a_documents_own_reference_markers_are_not_cited(tmp_path: Any) -> None:
    """"... benchmarks [2]." copied into an extractive answer or summary read as a citation of
    another context, and "[7]" of none: a document's bracketed numbers go in parentheses, and the
    summary's sentences keep their contexts as the tool found them, not as its text reads."""
    docs = {
        "zeta": "ZetaCache stores session tokens in memory for fast lookups, as shown in earlier benchmarks [2]. "
                "ZetaCache evicts the least recently used session token when memory is full [7].",
        "other": "The billing service sends monthly invoices to every customer account by email.",
    }
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none", tool_timeout_s=TOOL_S))
    await application.open()
    try:
        assert not (await application.ingest([_source(d, t) for d, t in docs.items()])).errors
        for question in ("How does ZetaCache store session tokens?", "Summarize how ZetaCache stores session tokens"):
            r = await application.pipeline.query(_ask(question, top_k=2))
            a = r.answer
            assert a is not None and a.extractive and "[7]" not in a.text and "benchmarks (2) [" in a.text and "full (7) [" in a.text, question
            for s in a.sentences:
                [cited] = s.citations
                assert ("ZetaCache" in s.text) is (r.contexts[cited - 1].document.document_id == "zeta"), (question, s)
    finally:
        await application.close()


async def test_a_summary_whose_model_fails_is_the_extractive_one(app: Application) -> None:
    """Every other model consumer falls back when the model fails; summarize failed, and the answer
    read 'The summarize tool failed: failed: LlmError: ...'."""
    with json_server(lambda path, body: (503, {"error": "down"})) as server:
        model = _model(server.url)
        try:
            r = await _with(app, chat=model).query(_ask("Summarize what AuthSvc does", top_k=3))
        finally:
            await model.close()
    [tool] = r.answer.tool_results  # type: ignore[union-attr]
    assert tool.name == "summarize" and tool.success and tool.result["model"] == "extractive" and tool.summary
    assert "tool:summarize:llm_failed_used_extractive" in r.metrics.degraded and "tool:summarize:failed" not in r.metrics.degraded
    assert any("/chat/completions" in path and "summarize" in body["messages"][0]["content"] for path, body in server.requests)


async def test_a_summary_the_model_wrote_is_its_answer_when_the_answer_model_fails(app: Application) -> None:
    """The summary's text, written by the model, was returned as extractive=True, model="extractive"
    (no model wrote it, its sentences copied from the contexts) when the answer's call failed."""
    summary = "AuthSvc handles sign-in [1]. It was written in 1887 [9]."
    with json_server(_llm({"You summarize": summary, "numbered contexts": 503})) as server:
        model = _model(server.url)
        try:
            r = await _with(app, chat=model).query(_ask("Summarize what AuthSvc does", top_k=3))
        finally:
            await model.close()
    a = r.answer
    assert a is not None and [t.result["model"] for t in a.tool_results] == ["openai:test-model"]
    assert not a.extractive and a.model == "openai:test-model" and "answer:llm_failed_used_extractive" in r.metrics.degraded
    assert [(s.text, s.citations) for s in a.sentences] == [("AuthSvc handles sign-in.", (1,)), ("It was written in 1887.", ())]
    assert "answer:invalid_citation_removed" in r.metrics.degraded and "[9]" not in a.text


async def test_a_tools_unexpected_error_is_said_once_as_a_failure() -> None:
    class _Broken(_Slow):
        name: ClassVar[str] = "broken"
        description: ClassVar[str] = "raises"

        async def run(self, params: Any, ctx: Any) -> tuple[Any, str]:
            raise RuntimeError("disk on fire")

    ctx = ToolContext("q", AccessFilter.for_identity(Identity()), (), None, (), None)  # type: ignore[arg-type]
    r = await run_tool({"broken": _Broken()}, "broken", {}, ctx, TOOL_S)  # type: ignore[dict-item]
    assert not r.success and r.error == "RuntimeError: disk on fire"  # its readers say "failed" themselves


class _SlowParams(BaseModel):
    pass


class _Slow:
    name: ClassVar[str] = "slow"
    description: ClassVar[str] = "never finishes in time"
    Params: ClassVar[type[BaseModel]] = _SlowParams
    needs_contexts: ClassVar[bool] = False
    asks_the_model: ClassVar[bool] = False

    async def run(self, params: Any, ctx: Any) -> tuple[Any, str]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class _Fixed:
    name = "fixed"

    def __init__(self, decision: RouteDecision) -> None:
        self._decision = decision

    async def decide(self, query: str, matches: Any, within: Any) -> tuple[RouteDecision, str | None]:
        return self._decision, None


def _routed_to(app: Application, decision: RouteDecision, tool_timeout_s: float) -> QueryPipeline:
    deps = app.pipeline.deps
    return QueryPipeline(
        dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, tool_timeout_s=tool_timeout_s),
                            assistant=Assistant(router=_Fixed(decision), tools={**TOOLS, "slow": _Slow()}))  # type: ignore[arg-type]
    )


async def test_a_slow_tool_times_out_and_degrades(app: Application) -> None:
    # The tool never returns, so even a short limit is its subject alone.
    p = _routed_to(app, RouteDecision(Route.TOOL, (ToolCall("slow"),)), tool_timeout_s=0.05)
    r = await p.query(_ask("anything"))
    assert "tool:slow:timeout" in r.metrics.degraded
    assert r.answer is not None and not r.answer.supported and "slow tool failed" in r.answer.text


async def test_a_failing_tool_degrades(app: Application) -> None:
    # Under a limit a busy machine meets: the failure, not the clock, is reported.
    p = _routed_to(app, RouteDecision(Route.TOOL, (ToolCall("calculate", {"expression": "1 +"}),)), tool_timeout_s=TOOL_S)
    r = await p.query(_ask("anything"))
    assert "tool:calculate:failed" in r.metrics.degraded and not any(d.endswith(":timeout") for d in r.metrics.degraded)
    assert r.answer is not None and not r.answer.supported and "calculate tool failed" in r.answer.text


# --- an LLM behind a local OpenAI-compatible server ---------------------------------------------------


def _llm(answers: dict[str, Any]) -> Any:
    """An OpenAI-compatible handler choosing its answer by the prompt's first words; ``stream``
    requests get SSE (an answer given as Sse events, as given)."""

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        assert path == "/v1/chat/completions"
        system, prompt = body["messages"][0]["content"], body["messages"][1]["content"]
        key = next((k for k in answers if k in system or prompt.startswith(k)), None)
        if key is None:
            return 500, {"error": "no answer for this prompt"}
        answer = answers[key]
        if isinstance(answer, int):
            return answer, {"error": "failing on purpose"}
        if isinstance(answer, Sse):
            return 200, answer
        if body.get("stream"):
            tokens = [answer[i : i + 7] for i in range(0, len(answer), 7)]
            return 200, Sse([(None, json.dumps({"choices": [{"delta": {"content": t}}]})) for t in tokens] + [(None, "[DONE]")])
        return 200, {"choices": [{"message": {"role": "assistant", "content": answer}}]}

    return handle


def _model(url: str) -> OpenAICompatibleChat:
    return OpenAICompatibleChat(url + "/v1", "test-model", "k", timeout_s=TOOL_S, max_retries=0, backoff_s=0)


async def _replied(
    app: Application, reply: Any, question: str = "What does AuthSvc handle?", *, stream: bool = False, prompt: str = "numbered contexts",
    **ask: Any,
) -> tuple[Any, list[Any], list[tuple[str, dict[str, Any]]]]:
    """A GENERATION query for ``question`` (three contexts unless ``ask`` says otherwise) whose
    model replies ``reply`` to the prompt that holds ``prompt``: the result, the events a streaming
    caller (``stream``) heard, and the requests the model server got."""
    events: list[Any] = []
    with json_server(_llm({prompt: reply})) as server:
        model = _model(server.url)
        try:
            r = await _with(app, chat=model).query(_ask(question, **{"top_k": 3, **ask}), events.append if stream else None)
        finally:
            await model.close()
    return r, events, server.requests


async def test_a_direct_answer_the_built_in_one_replaces_keeps_what_happened_to_the_models(app: Application) -> None:
    """The fallback's reason replaced the tags recorded before it: a model's answer of markers alone
    said only answer:llm_failed_used_extractive, one ignoring max_tokens only answer:truncated."""
    for written, settings, want in [
        ("[1][3]", {}, ["answer:invalid_citation_removed", "answer:llm_failed_used_extractive"]),
        ("Hello " * 2_000, {"answer_max_tokens": 64}, ["answer:runaway_cut", "answer:truncated"]),
    ]:
        with json_server(_llm({"You are the assistant": written})) as server:
            model = _model(server.url)
            try:
                r = await _limited(app, **settings)(chat=model).query(_ask("Hello there!"))
            finally:
                await model.close()
        assert r.answer is not None and r.answer.route is Route.DIRECT_ANSWER and r.answer.extractive
        assert [d for d in r.metrics.degraded if d.startswith("answer:")] == want, written[:20]


async def test_llm_answer_with_a_citation_that_points_nowhere(app: Application) -> None:
    text = "AuthSvc is maintained by Alice Chen [1]. It uses a ledger [9]. Ask the platform group. [2]"
    r, _, requests = await _replied(app, text)
    a = r.answer
    assert a is not None and not a.extractive and a.model == "openai:test-model" and a.supported
    assert "answer:invalid_citation_removed" in r.metrics.degraded
    assert [s.citations for s in a.sentences] == [(1,), (), (2,)] and "[9]" not in a.text
    assert {c.marker for c in a.citations} == {1, 2}
    prompt = requests[0][1]["messages"][1]["content"]
    assert "[1] (" in prompt and "Question: What does AuthSvc handle?" in prompt  # grounded: numbered contexts


async def test_a_direct_answer_by_the_model_loses_its_markers_which_point_nowhere(app: Application) -> None:
    """A direct answer has no contexts: its markers were kept in Answer.text, citing nothing."""
    with json_server(_llm({"You are the assistant": "Hello! I am the assistant [1][3].\n\nSee the guide. [12]"})) as server:
        model = _model(server.url)
        try:
            r = await _with(app, chat=model).query(_ask("Hello there!"))
        finally:
            await model.close()
    a = r.answer
    assert a is not None and a.route is Route.DIRECT_ANSWER and a.model == "openai:test-model" and not a.extractive
    assert a.text == "Hello! I am the assistant. See the guide." and a.citations == ()
    assert [(s.text, s.citations) for s in a.sentences] == [("Hello!", ()), ("I am the assistant.", ()), ("See the guide.", ())]
    assert "answer:invalid_citation_removed" in r.metrics.degraded


async def test_a_direct_answer_streams_as_the_model_writes_it(app: Application) -> None:
    """The direct prompt asks for no NOT_ANSWERABLE, yet a reply opening like it was held back as
    one: "NOT_ANSWERABLE" streamed nothing, and Answer.text read "NOT_ANSWERABLE"."""
    r, events, _ = await _replied(app, "NOT_ANSWERABLE", "Hello there!", stream=True, prompt="You are the assistant")
    assert r.answer is not None and r.answer.route is Route.DIRECT_ANSWER and not r.answer.extractive
    assert "".join(e for e in events if isinstance(e, str)) == r.answer.text == "NOT_ANSWERABLE"


#: the sentinel opening a reply that cites what the model read: each was taken for an answer, citing it
CITED_VERDICTS = [
    "NOT_ANSWERABLE [1]", "NOT_ANSWERABLE. Context [1] covers sign-in only.",
    "NOT_ANSWERABLE - context [1] covers sign-in only, not the port.", "NOT_ANSWERABLE: context [1] covers sign-in only, not the port.",
    "NOT_ANSWERABLE (context [1] covers sign-in only).", "NOT_ANSWERABLE\nContext [1] covers sign-in only, not the port.",
    "NOT_ANSWERABLE。上下文 [1] 只介绍了登录。", "NOT_ANSWERABLE is what AuthSvc never returns [1].",
    # A label before it was streamed ("**Final answer:"), and then the stand-in never was.
    "Answer: NOT_ANSWERABLE, context [1] covers sign-in only.", "**Final answer:** NOT_ANSWERABLE, context [1] covers sign-in only.",
]
#: (a reply answering part of the question, cited, and the sentinel as a sentence of its own for
#: the rest; its answer, the sentinel's sentences left out; what is streamed, the words before it)
PARTLY_ANSWERED = [
    ("The contexts describe AuthSvc [1] but do not give its port. NOT_ANSWERABLE",
     "The contexts describe AuthSvc but do not give its port [1].", "The contexts describe AuthSvc [1] but do not give its port."),
    ("AuthSvc handles sign-in [1]. The contexts do not give its port. NOT_ANSWERABLE",
     "AuthSvc handles sign-in [1]. The contexts do not give its port.", "AuthSvc handles sign-in [1]. The contexts do not give its port."),
    ("Context [2] is about PaymentRouter, not its port.\n\n**NOT_ANSWERABLE.**",
     "Context is about PaymentRouter, not its port [2].", "Context [2] is about PaymentRouter, not its port."),
    ("AuthSvc 负责登录 [1]。NOT_ANSWERABLE。", "AuthSvc 负责登录 [1]。", "AuthSvc 负责登录 [1]。"),
    # The sentinel as a list's item: served, supported, with its marker; a numbered item's "2." left.
    ("- AuthSvc handles sign-in [1].\n- NOT_ANSWERABLE", "- AuthSvc handles sign-in [1].", "- AuthSvc handles sign-in [1]."),
    ("+ AuthSvc handles sign-in [1].\n+ NOT_ANSWERABLE", "+ AuthSvc handles sign-in [1].", "+ AuthSvc handles sign-in [1]."),
    ("1. AuthSvc handles sign-in [1].\n2. NOT_ANSWERABLE", "1. AuthSvc handles sign-in [1].", "1. AuthSvc handles sign-in [1]."),
    # A number ending a sentence is no list item's: streamed and kept ("TLS 1.2. NOT_ANSWERABLE" lost "2.").
    ("AuthSvc handles sign-in [1]. It requires TLS 1.2. NOT_ANSWERABLE.", "AuthSvc handles sign-in [1]. It requires TLS 1.2.",
     "AuthSvc handles sign-in [1]. It requires TLS 1.2."),
    ("AuthSvc handles sign-in [1]. It locks an account after 5. NOT_ANSWERABLE",
     "AuthSvc handles sign-in [1]. It locks an account after 5.", "AuthSvc handles sign-in [1]. It locks an account after 5."),
    ("How many times does AuthSvc retry a sign-in [1]? 3. NOT_ANSWERABLE", "How many times does AuthSvc retry a sign-in [1]? 3.",
     "How many times does AuthSvc retry a sign-in [1]? 3."),
]
#: the sentinel as models write it besides alone: each was the answer, supported, once a tool had run
NOT_ANSWERABLE_FORMS = [
    "NOT_ANSWERABLE", "**NOT_ANSWERABLE**", "`NOT_ANSWERABLE`", "Answer: NOT_ANSWERABLE",
    "The contexts do not say who maintains the billing ledger. NOT_ANSWERABLE", *CITED_VERDICTS,
]


async def test_llm_answers_that_cannot_be_used_fall_back(app: Application) -> None:
    uncited, _, _ = await _replied(app, "It is maintained by someone, I believe.")
    assert "answer:uncited_used_extractive" in uncited.metrics.degraded and uncited.answer.extractive  # type: ignore[union-attr]
    # With nothing retrieved (the filter names no document), what the model writes is its own knowledge.
    nothing, _, _ = await _replied(app, "The capital of France is Paris.", "What is the capital of France?", document_ids=("no-such-doc",))
    assert not nothing.contexts and "answer:uncited_used_extractive" in nothing.metrics.degraded
    assert nothing.answer is not None and not nothing.answer.supported and nothing.answer.text == UNSUPPORTED
    failed, _, _ = await _replied(app, 503)
    assert "answer:llm_failed_used_extractive" in failed.metrics.degraded and failed.answer.extractive  # type: ignore[union-attr]
    for reply in NOT_ANSWERABLE_FORMS:
        refused, _, _ = await _replied(app, reply, "What is the speed of light?")
        assert refused.answer is not None and not refused.answer.supported and refused.answer.text == UNSUPPORTED, reply


@pytest.mark.parametrize("stream", [False, True], ids=["completed", "streamed"])
@pytest.mark.parametrize("reply", [
    "When its contexts do not answer, the model must reply NOT_ANSWERABLE [1].",
    "AuthSvc returns the status code not_answerable for such requests [1].",
])
async def test_an_answer_that_mentions_not_answerable_is_an_answer(app: Application, reply: str, stream: bool) -> None:
    """The sentinel was read in any case, cited or not: each of these answers was thrown away for
    "The documents I can read do not answer this question.", supported=False."""
    r, events, _ = await _replied(app, reply, stream=stream)
    assert r.answer is not None and r.answer.supported and not r.answer.extractive and r.answer.text == reply
    assert [s.citations for s in r.answer.sentences] == [(1,)] and not [d for d in r.metrics.degraded if d.startswith("answer:")]
    if stream:
        assert "".join(e for e in events if isinstance(e, str)) == reply


@pytest.mark.parametrize("reply", NOT_ANSWERABLE_FORMS)
async def test_a_model_that_cannot_answer_from_a_tools_result_gives_way_to_it(app: Application, reply: str) -> None:
    """The calculator counted, the model replied NOT_ANSWERABLE, and the answer read "The documents
    I can read do not answer this question.", supported=False."""
    store = "LedgerDB"
    r, _, _ = await _replied(app, reply, f"How many services depend on {store}?", top_k=5)
    expected = sorted(s for s, stores in WIKI.uses.items() if store in stores)
    [tool] = r.answer.tool_results  # type: ignore[union-attr]
    assert tool.name == "calculate" and tool.success and "answer:not_answerable_used_extractive" in r.metrics.degraded
    assert r.answer is not None and r.answer.supported and r.answer.extractive and f"= {len(expected)}" in r.answer.text
    assert NOT_ANSWERABLE not in r.answer.text


async def test_an_answer_the_model_is_still_writing_at_the_deadline_is_answered_extractively(app: Application) -> None:
    # The model never answers (until the test ends): the request's deadline, not the model's own
    # timeout (a minute here), ends the wait, and the retrieved contexts are answered from. That the
    # query returns at all, with the model still held, shows the wait was cut.
    release = threading.Event()

    def held(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        release.wait(TOOL_S)
        return 503, {"error": "too late"}

    with json_server(held) as server:
        model = _model(server.url)
        try:
            deadline = time.monotonic() + 2.0  # time to retrieve; if retrieval takes longer, the answer is the same
            r = await _with(app, chat=model).query(_ask("What does AuthSvc handle?", top_k=3, deadline=deadline))
        finally:
            release.set()
            await model.close()
    assert r.contexts and r.answer is not None and r.answer.extractive and r.answer.supported
    assert "answer:deadline_used_extractive" in r.metrics.degraded and "answer:llm_failed_used_extractive" not in r.metrics.degraded


async def test_the_extractive_answers_ranking_ends_at_the_deadline(app: Application) -> None:
    """Ranking the contexts' sentences is a model's run over up to 80 of them (seconds for long
    ones): the deadline passed with the contexts ready, and DEADLINE_EXCEEDED came instead of them.
    Here the ranking never ends: the deadline does, and each context's first sentence answers."""
    embedder = app.pipeline.deps.embedder

    async def held(method: Any, texts: Any, *args: Any, **kwargs: Any) -> Any:
        if len(texts) > 1:  # the sentences; the query alone is embedded for retrieval
            await asyncio.Event().wait()
        return await method(texts, *args, **kwargs)

    deps = dataclasses.replace(app.pipeline.deps, embedder=Intercepted(embedder, "embed", held))
    deadline = time.monotonic() + 2.0  # time to retrieve; if retrieval takes longer, the answer is the same
    # The bound only turns a ranking the deadline does not end into a failure instead of a hang.
    r = await asyncio.wait_for(QueryPipeline(deps).query(_ask("What does AuthSvc handle?", top_k=3, deadline=deadline)), 120)
    assert r.contexts and r.answer is not None and r.answer.extractive and "deadline:answer_unranked" in r.metrics.degraded
    firsts: dict[int, str] = {}
    for sentence in sentences_of_contexts(r.contexts):
        firsts.setdefault(sentence.context, sentence.text)
    assert r.answer.sentences and [(s.citations[0], s.text) for s in r.answer.sentences] == list(firsts.items())[: len(r.answer.sentences)]


async def test_an_extractive_answer_whose_ranking_fails_answers_unranked(app: Application) -> None:
    """The embedder failing on the answer's sentences failed the request INTERNAL, its contexts
    found (mid-StreamQuery too): each context's first sentence answers, as at the deadline."""
    async def failing(method: Any, texts: Any, *args: Any, **kwargs: Any) -> Any:
        if len(texts) > 1:  # the sentences; the query alone is embedded for retrieval
            raise RuntimeError("onnxruntime: Non-zero status code returned while running MatMul node")
        return await method(texts, *args, **kwargs)

    deps = dataclasses.replace(app.pipeline.deps, embedder=Intercepted(app.pipeline.deps.embedder, "embed", failing))
    events: list[Any] = []
    r = await QueryPipeline(deps).query(_ask("What does AuthSvc handle?", top_k=3, rerank=False), events.append)
    assert r.contexts and r.answer is not None and r.answer.extractive and r.answer.supported
    assert "answer:ranking_failed_unranked" in r.metrics.degraded and "deadline:answer_unranked" not in r.metrics.degraded
    firsts: dict[int, str] = {}
    for sentence in sentences_of_contexts(r.contexts):
        firsts.setdefault(sentence.context, sentence.text)
    assert [(s.citations[0], s.text) for s in r.answer.sentences] == list(firsts.items())
    assert "".join(e for e in events if isinstance(e, str)) == r.answer.text


async def test_a_generation_request_whose_deadline_passed_before_retrieval_is_deadline_exceeded(app: Application) -> None:
    """Nothing was searched: "the documents do not answer this" would be a false statement about them."""
    answerable = _ask("What does AuthSvc handle?", top_k=3)
    assert (await app.pipeline.query(answerable)).answer.supported  # type: ignore[union-attr]
    with pytest.raises(DeadlineExceeded):
        await app.pipeline.query(dataclasses.replace(answerable, deadline=time.monotonic()))


async def test_a_model_summary_cut_by_the_tool_timeout_counts_against_the_model(app: Application) -> None:
    """The tool timeout is the operator's limit on a call that is all model time: like an analysis
    technique's timeout, it is the model's failure, and its circuit breaker counts it."""
    release = threading.Event()

    def held(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        release.wait(TOOL_S)
        return 503, {"error": "too late"}

    retrieved = await app.pipeline.query(_ask("What does AuthSvc handle?", top_k=2))
    with json_server(held) as server:
        breaker = CircuitBreaker(failure_threshold=1, cooldown_s=3600.0, clock=Clock())
        model = OpenAICompatibleChat(server.url + "/v1", "test-model", "k", timeout_s=TOOL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            ctx = dataclasses.replace(_ctx(app, contexts=tuple(retrieved.contexts)), chat=model)
            # The model never answers: the tool's limit is the subject, however short.
            r = await run_tool(TOOLS, "summarize", {}, ctx, 0.05)
        finally:
            release.set()
            await model.close()
    assert not r.success and r.error.startswith("timed out")
    assert breaker.is_open


@contextlib.asynccontextmanager
async def _held_model() -> AsyncIterator[tuple[OpenAICompatibleChat, CircuitBreaker]]:
    """A client, with its breaker, of a local OpenAI-compatible server that answers nothing until the
    test ends; its HTTP timeout is a minute: only the service's own limits end the wait."""
    release = threading.Event()
    breaker = CircuitBreaker(failure_threshold=1, cooldown_s=3600.0, clock=Clock())

    def held(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        release.wait(TOOL_S)
        return 503, {"error": "too late"}

    with json_server(held) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "test-model", "k", timeout_s=TOOL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            yield model, breaker
        finally:
            release.set()
            await model.close()


def _limited(app: Application, clock: Clock | None = None, **settings: Any) -> Any:
    """A pipeline with some workflow settings replaced and the assistant given by the caller."""
    deps = app.pipeline.deps
    deps = dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, **settings))

    def made(**assistant: Any) -> QueryPipeline:
        with_assistant = dataclasses.replace(deps, assistant=dataclasses.replace(Assistant(), **assistant))
        return QueryPipeline(with_assistant, clock=clock) if clock is not None else QueryPipeline(with_assistant)

    return made


async def test_a_summary_model_still_writing_at_the_deadline_gives_way_to_the_extractive_summary(app: Application) -> None:
    """The summary model was waited for up to TOOL_TIMEOUT_S whatever the deadline: a held model
    gave DEADLINE_EXCEEDED with the contexts ready in 40 ms. On a clock that stands still, the
    deadline leaves 4 s: the model gets half of what the tools may take, the answer's model the rest."""
    release = threading.Event()
    breaker = CircuitBreaker(failure_threshold=1, cooldown_s=3600.0, clock=Clock())

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if "summarize" in body["messages"][0]["content"]:
            release.wait(TOOL_S)
            return 503, {"error": "too late"}
        return 200, {"choices": [{"message": {"role": "assistant", "content": "AuthSvc handles sign-in [1]."}}]}

    with json_server(handle) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "test-model", "k", timeout_s=TOOL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            # The tool timeout is a minute: only the deadline can end the wait in time.
            made = _limited(app, Clock(), tool_timeout_s=TOOL_S)
            r = await asyncio.wait_for(made(chat=model).query(_ask("Summarize what AuthSvc does", top_k=3, deadline=4.0)), TOOL_S / 2)
        finally:
            release.set()
            await model.close()
    [tool] = r.answer.tool_results  # type: ignore[union-attr]
    assert tool.name == "summarize" and tool.success and tool.result["model"] == "extractive" and tool.summary
    assert "tool:summarize:deadline_used_extractive" in r.metrics.degraded and not breaker.is_open
    assert r.answer is not None and r.answer.text == "AuthSvc handles sign-in [1]." and r.contexts


@pytest.mark.parametrize("by", ["router_timeout", "deadline"])
async def test_a_router_model_that_takes_too_long_gives_way_to_the_rules(app: Application, by: str) -> None:
    """The router's call, whole, is bounded by LLM_TIMEOUT_S and by half the time the deadline leaves;
    only the operator's limit is held against the model's breaker."""
    if by == "deadline":  # 4 s on a clock that stands still: the router gets 2 s, retrieval the rest
        made, query = _limited(app, Clock()), _ask("What does AuthSvc handle?", top_k=3, deadline=4.0)
    else:
        made, query = _limited(app, router_timeout_s=0.2), _ask("What does AuthSvc handle?", top_k=3)
    async with _held_model() as (model, breaker):
        r = await asyncio.wait_for(made(router=LlmRouter(model, TOOLS, RuleRouter())).query(query), TOOL_S / 2)
    assert r.metrics.route is not None and r.metrics.route.decided_by == "rules" and r.contexts
    assert {"router_timeout": "router:timeout_used_rules", "deadline": "router:deadline_used_rules"}[by] in r.metrics.degraded
    assert breaker.is_open is (by == "router_timeout")


async def test_an_answer_the_model_is_still_writing_after_the_answer_timeout_is_answered_extractively(app: Application) -> None:
    """Without a deadline, ANSWER_TIMEOUT_S ends the wait (the HTTP client's own timeout bounds each
    read only), and counts against the model."""
    async with _held_model() as (model, breaker):
        r = await asyncio.wait_for(_limited(app, answer_timeout_s=0.2)(chat=model).query(_ask("What does AuthSvc handle?", top_k=3)), TOOL_S / 2)
    assert r.contexts and r.answer is not None and r.answer.extractive and r.answer.supported
    assert "answer:timeout_used_extractive" in r.metrics.degraded and breaker.is_open


@pytest.mark.parametrize("caller", ["router", "summary", "answer"])
async def test_a_call_that_failed_once_and_would_back_off_past_the_operators_limit_counts_once(app: Application, caller: str) -> None:
    """A backoff that would end after the operator's limit on the call is not started, as analysis
    has it: the failure before it is the call's answer, counted once. It was started, cut by the
    limit, and counted twice (the backoff's cut failure, then the cut call's): two calls opened a
    breaker of three."""
    breaker = CircuitBreaker(failure_threshold=3, cooldown_s=3600.0, clock=Clock())
    with json_server(lambda path, body: (503, {"error": "overloaded"})) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "test-model", "k", timeout_s=TOOL_S, max_retries=2, backoff_s=TOOL_S, breaker=breaker)
        try:
            if caller == "router":
                r = await _limited(app, router_timeout_s=TOOL_S / 2)(router=LlmRouter(model, TOOLS, RuleRouter())).query(_ask("What does AuthSvc handle?", top_k=3))
                assert "router:llm_failed_used_rules" in r.metrics.degraded
            elif caller == "summary":
                retrieved = await app.pipeline.query(_ask("What does AuthSvc handle?", top_k=2))
                ctx = dataclasses.replace(_ctx(app, contexts=tuple(retrieved.contexts)), chat=model)
                summary = await run_tool(TOOLS, "summarize", {}, ctx, TOOL_S / 2)
                assert summary.success and summary.result["model"] == "extractive"
            else:
                r = await _limited(app, answer_timeout_s=TOOL_S / 2)(chat=model).query(_ask("What does AuthSvc handle?", top_k=3))
                assert "answer:llm_failed_used_extractive" in r.metrics.degraded
        finally:
            await model.close()
    assert len(server.requests) == 1 and breaker.failures == 1


async def test_a_summary_whose_backoff_would_end_past_its_share_of_the_deadline_fails_at_once(app: Application) -> None:
    """The summary's model gets half the time the deadline leaves the tool, but the backoff was
    weighed against the tool's whole limit: one ending between the two was started, then cut by the
    summary's bound, a model that had failed reported as the deadline's."""
    breaker = CircuitBreaker(failure_threshold=3, cooldown_s=3600.0, clock=Clock())
    tags: list[str] = []
    with json_server(lambda path, body: (503, {"error": "overloaded"})) as server:
        # The clock stands still: the tool may take TOOL_S, the summary's model TOOL_S / 2.
        model = OpenAICompatibleChat(server.url + "/v1", "test-model", "k", timeout_s=TOOL_S, max_retries=2, backoff_s=0.75 * TOOL_S, breaker=breaker)
        try:
            retrieved = await app.pipeline.query(_ask("What does AuthSvc handle?", top_k=2))
            ctx = dataclasses.replace(_ctx(app, contexts=tuple(retrieved.contexts)), chat=model, degrade=tags.append, time_left=lambda: TOOL_S)
            summary = await run_tool(TOOLS, "summarize", {}, ctx, TOOL_S)
        finally:
            await model.close()
    assert summary.success and summary.result["model"] == "extractive"
    assert tags == ["tool:summarize:llm_failed_used_extractive"] and len(server.requests) == 1 and breaker.failures == 1


def _logged_by(app: Application, model: OpenAICompatibleChat, log_limit: LogLimit) -> QueryPipeline:
    """A pipeline whose router and answer writer ask ``model``, their failures logged through ``log_limit``."""
    router = LlmRouter(model, TOOLS, RuleRouter(), log_limit=log_limit)
    return QueryPipeline(dataclasses.replace(app.pipeline.deps, log_limit=log_limit,
                                             assistant=dataclasses.replace(Assistant(), router=router, chat=model)))


@pytest.mark.parametrize(("status", "kind"), [(400, "LlmRefused"), (503, "LlmError")], ids=["refused", "failing"])
async def test_the_router_answer_and_summary_log_a_failing_model_once_per_kind_not_each_request(
    app: Application, caplog: pytest.LogCaptureFixture, status: int, kind: str
) -> None:
    """Each of them logged WARNING on every request whose model call failed, the refusals of an
    open breaker too (an LLM down for a minute: a line per request and caller). Once per caller
    and kind, the rest at DEBUG: a refusal of the request leaves the breaker closed, and the
    breaker (here opened by the first request's three failures) refuses the later calls."""
    log_limit = LogLimit(clock=Clock())  # time stands still: one line per caller and kind, however long the test takes
    caplog.set_level(logging.DEBUG, logger="retrieval_server.workflow")
    with json_server(lambda path, body: (status, {"error": {"message": "max_tokens: 300 > 256", "type": "invalid_request_error"}})) as server:
        model = _model(server.url)
        try:
            pipeline = _logged_by(app, model, log_limit)
            for _ in range(3):
                r = await pipeline.query(_ask("What does AuthSvc handle?", top_k=2))
                assert {"router:llm_failed_used_rules", "answer:llm_failed_used_extractive"} <= set(r.metrics.degraded)
                retrieved = tuple(r.contexts)
                ctx = dataclasses.replace(_ctx(app, contexts=retrieved), chat=model, log_limit=log_limit)
                assert (await run_tool(TOOLS, "summarize", {}, ctx, TOOL_S)).result["model"] == "extractive"
        finally:
            await model.close()
    lines = [r for r in caplog.records if "failed" in r.getMessage()]
    for what in ("LLM router", "answer generation", "summary by the model"):
        mine = [r for r in lines if r.getMessage().startswith(what)]
        warned = [r.getMessage() for r in mine if r.levelno >= logging.WARNING]
        assert len(mine) == 3 and len(warned) == 1, (what, [(r.levelname, r.getMessage()) for r in mine])
        assert all(kind in m and f"HTTP {status}" in m for m in warned), warned


async def test_an_answer_model_failing_every_call_beside_a_router_that_succeeds_is_logged(
    app: Application, caplog: pytest.LogCaptureFixture,
) -> None:
    """One client and one breaker per provider: the router's successes reset the count of the
    answer's failures (a reasoning model spending max_tokens thinking, no text every time), the
    breaker never opened, and the answer's failure was logged at DEBUG only, on every request."""
    decision = json.dumps({"action": "retrieve", "tools": [], "reason": "docs"})

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if "You route questions" in body["messages"][0]["content"]:
            return 200, {"choices": [{"message": {"role": "assistant", "content": decision}, "finish_reason": "stop"}]}
        return 200, {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}]}

    log_limit = LogLimit(clock=Clock())  # time stands still: one line, however long the test takes
    caplog.set_level(logging.DEBUG, logger="retrieval_server.workflow")
    breaker = CircuitBreaker(failure_threshold=3, cooldown_s=3600.0, name="llm:openai")
    with json_server(handle) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "test-model", "k", timeout_s=TOOL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            pipeline = _logged_by(app, model, log_limit)
            for _ in range(4):
                r = await pipeline.query(_ask("What does AuthSvc handle?", top_k=2))
                assert "answer:llm_failed_used_extractive" in r.metrics.degraded, r.metrics.degraded
        finally:
            await model.close()
    assert not breaker.is_open
    mine = [r for r in caplog.records if r.getMessage().startswith("answer generation failed")]
    warned = [r for r in mine if r.levelno >= logging.WARNING]
    assert len(mine) == 4 and len(warned) == 1 and "finish_reason length" in warned[0].getMessage(), [r.getMessage() for r in mine]
    assert warned[0].pathname.endswith("answer.py")  # the caller's line, not log_failure's


async def test_llm_router_decides_and_invalid_decisions_fall_back_to_rules(app: Application) -> None:
    decision = json.dumps({"action": "tool", "tools": [{"name": "lookup_facts", "arguments": {"entity": "PaymentRouter"}}], "reason": "facts"})
    with json_server(_llm({"You route questions": decision})) as server:
        model = _model(server.url)
        try:
            r = await _with(app, router=LlmRouter(model, TOOLS, RuleRouter())).query(_ask("what about payments?"))
        finally:
            await model.close()
    assert r.metrics.route is not None and r.metrics.route.decided_by == "llm:openai:test-model"
    assert [t.name for t in r.answer.tool_results] == ["lookup_facts"] and r.answer.tool_results[0].success  # type: ignore[union-attr]
    assert "'tools' section" not in server.requests[0][1]["messages"][1]["content"] and "analyze_dependencies" in server.requests[0][1]["messages"][1]["content"]
    for bad in ('{"action": "tool", "tools": [{"name": "rm_rf", "arguments": {}}]}', '{"action": "tool", "tools": [{"name": "calculate", "arguments": {"expr": 1}}]}', "sure!"):
        with json_server(_llm({"You route questions": bad})) as server:
            model = _model(server.url)
            try:
                r = await _with(app, router=LlmRouter(model, TOOLS, RuleRouter())).query(_ask("Hello"))
            finally:
                await model.close()
        assert "router:llm_failed_used_rules" in r.metrics.degraded and r.metrics.route.route is Route.DIRECT_ANSWER  # type: ignore[union-attr]


async def test_a_failed_tools_error_quoting_a_bracket_is_no_citation(app: Application) -> None:
    """The error quotes the entity as the router passed it: its [7] was a marker in Answer.text, citing nothing."""
    decision = json.dumps({"action": "tool", "tools": [{"name": "lookup_facts", "arguments": {"entity": "Foo [7]"}}], "reason": "facts"})
    with json_server(_llm({"You route questions": decision})) as server:
        model = _model(server.url)
        try:
            r = await _with(app, router=LlmRouter(model, TOOLS, RuleRouter())).query(_ask("Tell me about Foo [7]"))
        finally:
            await model.close()
    a = r.answer
    assert a is not None and not a.tool_results[0].success and a.tool_results[0].error == "no known entity named 'Foo [7]'"
    assert a.text == f"{UNSUPPORTED} The lookup_facts tool failed: no known entity named 'Foo (7)'." and a.citations == ()


async def test_streamed_tokens_reach_the_caller(app: Application) -> None:
    text = "AuthSvc is maintained by Alice Chen [1]."
    r, events, requests = await _replied(app, text, stream=True)
    tokens = [e for e in events if isinstance(e, str)]
    assert len(tokens) > 3 and "".join(tokens) == text and requests[0][1]["stream"] is True
    stages = [e.stage for e in events if not isinstance(e, str)]
    assert stages == _stages(r)  # every stage, as it finished, in order
    assert r.answer is not None and r.answer.text == "AuthSvc is maintained by Alice Chen [1]."


async def test_a_streamed_answer_the_check_replaces_is_replaced_by_the_final_response_only(app: Application) -> None:
    """The pieces streamed are the text as the model wrote it; when the citation check rejects it,
    the extractive replacement is the final response's text, not more pieces run on after the
    rejected ones (which a chat UI would show as one answer)."""
    text = "It is maintained by someone, I believe."  # cites nothing: replaced
    r, events, _ = await _replied(app, text, stream=True)
    assert "answer:uncited_used_extractive" in r.metrics.degraded and r.answer is not None and r.answer.extractive
    assert "".join(e for e in events if isinstance(e, str)) == text


@pytest.mark.parametrize("reply", ["NOT_ANSWERABLE", "**NOT_ANSWERABLE**", " `NOT_ANSWERABLE`\n", "Answer: NOT_ANSWERABLE"])
async def test_a_streamed_not_answerable_reaches_the_caller_as_its_replacement_only(app: Application, reply: str) -> None:
    """The sentinel was sent to a streaming caller as answer text ("NOT_ANSWERABLE" on the screen),
    the replacement only in the final response. With the tools' answer as without."""
    for question in ("What is the speed of light?", "How many services depend on LedgerDB?"):
        r, events, _ = await _replied(app, reply, question, stream=True)
        assert r.answer is not None and NOT_ANSWERABLE not in r.answer.text
        assert "".join(e for e in events if isinstance(e, str)) == r.answer.text, question
    # A reply that only opens like it is streamed whole, a label held until what follows it is not the sentinel.
    for text in ("NOTE: AuthSvc is maintained by Alice Chen [1].", "Answer: AuthSvc is maintained by Alice Chen [1]."):
        r, events, _ = await _replied(app, text, stream=True)
        assert "".join(e for e in events if isinstance(e, str)) == text and r.answer is not None and not r.answer.extractive, text


@pytest.mark.parametrize("reply", CITED_VERDICTS)
async def test_a_verdict_citing_what_the_model_read_is_not_answerable_and_never_streamed(app: Application, reply: str) -> None:
    """"NOT_ANSWERABLE [1]" was the answer, supported, and streamed as written: the sentinel was
    read only where nothing was cited; then "NOT_ANSWERABLE - context [1] covers ..." was."""
    r, events, _ = await _replied(app, reply, "What port does AuthSvc listen on?", stream=True)
    assert r.answer is not None and not r.answer.supported and r.answer.text == UNSUPPORTED
    # Nothing came before the sentinel (its markdown and label aside, held with it): the stand-in.
    assert "".join(e for e in events if isinstance(e, str)) == UNSUPPORTED


@pytest.mark.parametrize("stream", [False, True], ids=["completed", "streamed"])
@pytest.mark.parametrize(("reply", "text", "streamed"), PARTLY_ANSWERED)
async def test_an_answer_to_part_of_the_question_is_kept_without_its_not_answerable(
    app: Application, reply: str, text: str, streamed: str, stream: bool
) -> None:
    """A reply that answered half a question, cited, and said NOT_ANSWERABLE for the other half was
    thrown away whole: "The documents I can read do not answer this question.", supported=False."""
    r, events, _ = await _replied(app, reply, "What does AuthSvc handle, and on which port?", stream=stream)
    assert r.answer is not None and r.answer.supported and not r.answer.extractive and r.answer.text == text
    assert all(s.text and NOT_ANSWERABLE not in s.text for s in r.answer.sentences) and r.answer.citations
    assert [d for d in r.metrics.degraded if d.startswith("answer:")] == ["answer:partly_not_answerable"]
    if stream:
        # The words before the sentinel, as the model wrote them: the final Answer.text is the answer.
        assert "".join(e for e in events if isinstance(e, str)) == streamed


async def test_a_streamed_reply_is_held_back_only_where_it_may_be_not_answerable_as_the_check_reads_it(app: Application) -> None:
    """The hold-back read the sentinel in any case and without its "_": "Not answerable ..." and
    "NOT ANSWERABLE" were held to the reply's end, the first an answer. The sentinel said after
    other words was sent, though never the answer; cut inside it ("NOT_", "ANSW", no finish), it
    was sent as "NOT_ANSW"."""
    for reply in ("Not answerable from the tool alone; AuthSvc handles sign-in [1].", "NOT ANSWERABLE"):
        _, events, _ = await _replied(app, reply, stream=True)
        pieces = [e for e in events if isinstance(e, str)]
        # The model server's first piece, "Not ans", less what may open an "Answer:" label before the sentinel.
        assert pieces[0] == reply[:3] and "".join(pieces) == reply, reply
    before = "The contexts do not say who maintains the billing ledger."
    for question in ("What does AuthSvc handle?", "How many services depend on LedgerDB?"):
        r, events, _ = await _replied(app, f"{before} {NOT_ANSWERABLE}", question, stream=True)
        assert r.answer is not None and NOT_ANSWERABLE not in r.answer.text
        assert "".join(e for e in events if isinstance(e, str)) == before, question  # sent: the final text replaces it
    cut = Sse([(None, json.dumps({"choices": [{"delta": {"content": t}}]})) for t in ("NOT_", "ANSW")]
              + [(None, json.dumps({"choices": [{"delta": {}, "finish_reason": "length"}]})), (None, "[DONE]")])
    r, events, _ = await _replied(app, cut, stream=True)
    assert r.answer is not None and r.answer.extractive and "answer:truncated" in r.metrics.degraded
    assert "".join(e for e in events if isinstance(e, str)) == r.answer.text


@pytest.mark.parametrize("streamed", [False, True], ids=["completed", "streamed"])
@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("AuthSvc is maintained by Alice Chen [1]. It also hand", "AuthSvc is maintained by Alice Chen [1]."),
        # A citation after the stop belongs to the sentence before it (and is rendered inside it).
        ("AuthSvc is maintained by Alice Chen [1]. It handles tokens. [2]", "AuthSvc is maintained by Alice Chen [1]. It handles tokens [2]."),
    ],
    ids=["cut-mid-sentence", "cut-after-a-sentence"],
)
async def test_an_answer_stopped_at_max_tokens_loses_its_cut_sentence(app: Application, written: str, kept: str, streamed: bool) -> None:
    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if not body.get("stream"):
            return 200, {"choices": [{"message": {"role": "assistant", "content": written}, "finish_reason": "length"}]}
        return 200, Sse([(None, json.dumps({"choices": [{"delta": {"content": written}}]})),
                         (None, json.dumps({"choices": [{"delta": {}, "finish_reason": "length"}]})), (None, "[DONE]")])

    events: list[Any] = []
    with json_server(handle) as server:
        model = _model(server.url)
        try:
            r = await _with(app, chat=model).query(_ask("What does AuthSvc handle?", top_k=3), events.append if streamed else None)
        finally:
            await model.close()
    assert r.answer is not None and not r.answer.extractive and r.answer.text == kept
    assert ("answer:truncated" in r.metrics.degraded) is written.endswith("hand")
    if streamed:
        assert "".join(e for e in events if isinstance(e, str)) == written  # what was sent stays sent; the final text replaces it


async def test_a_direct_answer_and_a_summary_stopped_at_max_tokens_lose_their_cut_sentence(app: Application) -> None:
    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        system = body["messages"][0]["content"]
        text = "Hello! I can help with that. I am a retrie" if "summar" not in system.lower() else "AuthSvc issues tokens [1]. It does not"
        return 200, {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "length"}]}

    retrieved = await app.pipeline.query(_ask("What does AuthSvc handle?", top_k=2))
    with json_server(handle) as server:
        model = _model(server.url)
        try:
            direct = await _with(app, chat=model).query(_ask("Hello"))
            ctx = dataclasses.replace(_ctx(app, contexts=tuple(retrieved.contexts)), chat=model)
            summary = await run_tool(TOOLS, "summarize", {}, ctx, TOOL_S)
        finally:
            await model.close()
    assert direct.answer is not None and direct.answer.text == "Hello! I can help with that." and "answer:truncated" in direct.metrics.degraded
    assert summary.success and summary.summary == "AuthSvc issues tokens [1]." and summary.result["truncated"] is True


@pytest.mark.parametrize("streamed", [False, True], ids=["completed", "streamed"])
async def test_a_model_ignoring_max_tokens_is_cut_at_what_they_can_hold(app: Application, streamed: bool) -> None:
    """A model ignoring max_tokens wrote 7.9 MB: a 27 MB response no default client reads, and its
    check held the event loop for a minute. Its text (here one within the response's limit) is cut
    at ANSWER_MAX_TOKENS' worth of characters, the stream closed there; its summary the same."""
    from retrieval_server.workflow.model_text import CHARS_PER_TOKEN

    runaway = "AuthSvc handles sign-in [1]. " * 2_000  # 58,000 characters, far past 64 tokens' worth

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if body.get("stream"):
            return 200, Sse([(None, json.dumps({"choices": [{"delta": {"content": runaway[i : i + 5_000]}}]}))
                             for i in range(0, len(runaway), 5_000)] + [(None, "[DONE]")])
        return 200, {"choices": [{"message": {"role": "assistant", "content": runaway}, "finish_reason": "stop"}]}

    events: list[Any] = []
    retrieved = await app.pipeline.query(_ask("What does AuthSvc handle?", top_k=2))
    with json_server(handle) as server:
        model = _model(server.url)
        try:
            r = await _limited(app, answer_max_tokens=64)(chat=model).query(_ask("What does AuthSvc handle?", top_k=3), events.append if streamed else None)
            ctx = dataclasses.replace(_ctx(app, contexts=tuple(retrieved.contexts)), chat=model, degrade=(tags := []).append)
            summary = await run_tool(TOOLS, "summarize", {}, ctx, TOOL_S)
        finally:
            await model.close()
    budget = 64 * CHARS_PER_TOKEN
    assert r.answer is not None and not r.answer.extractive and "answer:runaway_cut" in r.metrics.degraded
    assert 0 < len(r.answer.text) <= budget and r.answer.sentences[0].text == "AuthSvc handles sign-in."
    if streamed:
        assert len("".join(e for e in events if isinstance(e, str))) == budget
    assert summary.success and 0 < len(summary.summary) <= 400 * CHARS_PER_TOKEN and summary.result["truncated"] is True
    assert tags == ["tool:summarize:runaway_cut"]


@pytest.mark.parametrize("protocol", ["anthropic", "gemini"])
async def test_streaming_over_the_other_protocols(protocol: str) -> None:
    tokens = ["Auth", "Svc is ", "maintained [1]."]

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if protocol == "anthropic":
            assert path == "/v1/messages" and body["stream"] is True
            events = [("message_start", json.dumps({"type": "message_start"}))]
            events += [("content_block_delta", json.dumps({"type": "content_block_delta", "delta": {"type": "text_delta", "text": t}})) for t in tokens]
            return 200, Sse([*events, ("message_stop", json.dumps({"type": "message_stop"}))])
        assert path == "/v1beta/models/gem:streamGenerateContent?alt=sse"
        last = len(tokens) - 1
        return 200, Sse([(None, json.dumps({"candidates": [{"content": {"parts": [{"text": t}]}, **({"finishReason": "STOP"} if i == last else {})}]}))
                         for i, t in enumerate(tokens)])

    with json_server(handle) as server:
        cls = AnthropicChat if protocol == "anthropic" else GeminiChat
        model = cls(server.url, "gem", "k", timeout_s=TOOL_S, max_retries=0, backoff_s=0)
        try:
            got = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    assert got == tokens


# --- LLM graph extraction ------------------------------------------------------------------------------


async def _extracted(handle: Any, parents: list[ParentChunk]) -> Any:
    """The graph an LLM extractor makes of ``parents`` (one child each) through a model server answering with ``handle``."""
    children = [ChildChunk(f"{p.parent_chunk_id}c{i}", p.parent_chunk_id, "d", i, p.chunk_index, p.content, p.tokens) for i, p in enumerate(parents)]
    with json_server(handle) as server:
        model = _model(server.url)
        try:
            return await LlmGraphExtractor(model, ClassicalGraphExtractor()).extract(parents, children)
        finally:
            await model.close()


async def test_llm_extraction_is_validated_and_falls_back_per_chunk() -> None:
    good = json.dumps({"entities": [{"name": "Billing Core", "type": "SERVICE"}, {"name": "Ledger", "type": "SERVICE"}],
                       "relations": [{"source": "Billing Core", "target": "Ledger", "type": "USES"}]})

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        prompt = body["messages"][1]["content"]
        content = good if "Billing Core" in prompt else "I cannot help with that."
        return 200, {"choices": [{"message": {"content": content}}]}

    parents = [
        ParentChunk("d#p0", "d", 0, "Billing Core writes every invoice to the Ledger.", 12),
        ParentChunk("d#p1", "d", 1, "ProjectAlpha depends on AuthSvc.", 8),
    ]
    g = await _extracted(handle, parents)
    assert g.extractor == "llm:openai:test-model+classical" and not g.provisional  # the model answered: settled
    names = {e.name: e for e in g.entities}
    assert {"Billing Core", "Ledger", "ProjectAlpha", "AuthSvc"} <= set(names)  # the model's names, and the fallback's
    assert names["Billing Core"].chunk_ids == ("d#p0c0",)
    stated = {(r.source, r.relation.value, r.target) for r in g.relations if r.relation.value != "CO_OCCURS"}
    assert stated == {("billingcore", "USES", "ledger"), ("projectalpha", "DEPENDS_ON", "authsvc")}


async def test_llm_names_whose_case_folds_differently_are_located() -> None:
    """re's case-insensitive match and str.lower() disagree on a dotted capital I: the text's
    "Izmir Gateway" matches the model's "İzmir Gateway", whose lower case is another string. The
    mention is the model's entity; a document's graph is not lost to a KeyError."""
    answer = json.dumps({"entities": [{"name": "İzmir Gateway", "type": "SERVICE"}, {"name": "Billing", "type": "SERVICE"}],
                         "relations": [{"source": "İzmir Gateway", "target": "Billing", "type": "CALLS"}]})
    text = "İzmir Gateway calls Billing. The Izmir Gateway is fast."
    g = await _extracted(lambda path, body: (200, {"choices": [{"message": {"content": answer}}]}), [ParentChunk("d#p0", "d", 0, text, 12)])
    assert g.extractor == "llm:openai:test-model"
    names = {e.name: e for e in g.entities}
    assert names["İzmir Gateway"].mentions == 2
    assert {(r.source, r.relation.value, r.target) for r in g.relations if r.relation.value == "CALLS"} == {("izmirgateway", "CALLS", "billing")}
