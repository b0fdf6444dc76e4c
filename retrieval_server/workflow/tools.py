"""Tools the router can call: small objects with typed parameters, each run under a timeout.

* ``lookup_facts``: what the knowledge graph knows about an entity (type, mentions, relations, sources).
* ``summarize``: the retrieved contexts in a few sentences (an LLM, or extractive without one or when it fails).
* ``calculate``: safe arithmetic plus counts over the graph (``count_dependents("AuthService", "SERVICE")``).
* ``analyze_dependencies``: direct and transitive dependencies and dependents of an entity, and cycles.

:func:`run_tool` validates the arguments, applies the timeout and turns every failure into a
:class:`ToolResult` with ``success=False``: a tool never fails the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from retrieval_server.backends.embedder import Embedder
from retrieval_server.backends.llm import ChatModel, LlmError, log_failure, waited_for
from retrieval_server.observability.log_limit import LogLimit
from retrieval_server.domain import AccessFilter, RetrievedContext
from retrieval_server.knowledge import DEPENDENCY_RELATIONS, EntityType, GraphEdge, GraphEntity, RelationType, ToolResult, entity_type_named
from retrieval_server.workflow.calculator import CalculationError, evaluate
from retrieval_server.workflow.cycles import bounded_cycles
from retrieval_server.workflow.knowledge_graph import KnowledgeGraph
from retrieval_server.workflow.model_text import whole_sentences, within_budget
from retrieval_server.workflow.sentences import Sentence, sentences_of_contexts
from retrieval_server.workflow.time_limit import Limit

log = logging.getLogger(__name__)


class ToolError(Exception):
    """The tool ran but has no answer (unknown entity, no graph, nothing to summarize)."""


def _no_report(tag: str) -> None:
    pass


def _no_deadline() -> float | None:
    return None


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may use for one request."""

    query: str
    access: AccessFilter
    document_ids: tuple[str, ...]
    graph: KnowledgeGraph | None
    contexts: Sequence[RetrievedContext]
    embedder: Embedder
    chat: ChatModel | None = None
    chat_temperature: float = 0.2
    query_vector: np.ndarray | None = None
    #: reports what a tool that still succeeded did without (the request's degradations)
    degrade: Callable[[str], None] = _no_report
    #: seconds the request's deadline leaves the tools, the answer's reserve kept (None: no deadline)
    time_left: Callable[[], float | None] = _no_deadline
    #: the application's, which spaces the lines of failures no breaker speaks for
    log_limit: LogLimit = field(default_factory=LogLimit)


class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    #: retrieval must run before it (it works on the retrieved contexts)
    needs_contexts: ClassVar[bool]
    #: its time goes to the request's model when there is one, so a timeout is the model's failure
    asks_the_model: ClassVar[bool]

    async def run(self, params: Any, ctx: ToolContext) -> tuple[Any, str]:
        """``(result, summary)``: a JSON-serializable result and one sentence for the answer."""
        ...


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


def _graph(ctx: ToolContext) -> KnowledgeGraph:
    if ctx.graph is None:
        raise ToolError("the knowledge graph is disabled on this server")
    return ctx.graph


async def _entity(ctx: ToolContext, name: str) -> GraphEntity:
    entity = await _graph(ctx).resolve(name, ctx.access, ctx.document_ids)
    if entity is None:
        raise ToolError(f"no known entity named '{name}'")
    return entity


def _listing(names: Sequence[str], limit: int = 8) -> str:
    shown = list(names[:limit])
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    if len(shown) <= 1:
        return "".join(shown) + more
    return ", ".join(shown[:-1]) + (f", {shown[-1]}{more}" if more else f" and {shown[-1]}")


# --- lookup_facts --------------------------------------------------------------------------------


class LookupFactsParams(_Params):
    entity: str = Field(min_length=1, max_length=200, description="the entity's name")


#: relations (the stated ones first, then by weight) and source documents a lookup lists
MAX_LISTED = 100
#: chunks naming the entity a lookup counts; past it, ``chunks_more`` says there are more
MAX_COUNTED_CHUNKS = 1_000


class LookupFacts:
    name = "lookup_facts"
    description = "What the knowledge graph knows about one entity: type, mentions, relations and source documents."
    Params = LookupFactsParams
    needs_contexts = False
    asks_the_model = False

    async def run(self, params: LookupFactsParams, ctx: ToolContext) -> tuple[Any, str]:
        graph = _graph(ctx)
        key = (await _entity(ctx, params.entity)).key
        # The entity read again with its relations and sources, as they are now, in one snapshot:
        # a document made private since it was resolved must be neither counted nor named.
        others, edges, documents = await graph.entity_facts(key, ctx.access, ctx.document_ids, MAX_LISTED)
        if key not in others:
            raise ToolError(f"no known entity named '{params.entity}'")
        entity = others[key]
        name = {k: e.name for k, e in others.items()}
        relations = [
            {
                "direction": "out" if e.source == entity.key else "in",
                "relation": e.relation.value,
                "entity": name.get(e.target if e.source == entity.key else e.source, ""),
                "weight": round(e.weight, 3),
            }
            for e in sorted(edges, key=lambda e: (e.relation is RelationType.CO_OCCURS, -e.weight, e.source, e.target))
        ]
        chunks = len((await graph.chunks([entity.key], ctx.access, ctx.document_ids, per_entity=MAX_COUNTED_CHUNKS + 1)).get(entity.key, []))
        # Lists bounded, with what they leave out counted: a hub entity named by 4,000 documents made
        # an answer over the response limit, which only contexts are cut to meet.
        result = {
            "name": entity.name,
            "type": entity.entity_type.value,
            "mentions": entity.mentions,
            "chunks": min(chunks, MAX_COUNTED_CHUNKS),
            "chunks_more": chunks > MAX_COUNTED_CHUNKS,
            "relations": relations[:MAX_LISTED],
            "relations_total": len(relations),
            "sources": [{"document_id": d, "title": documents[d].title} for d in entity.document_ids[:MAX_LISTED]],
            "sources_total": len(entity.document_ids),
        }
        typed = [r for r in relations if r["relation"] != RelationType.CO_OCCURS.value]
        facts = [
            f"{entity.name if r['direction'] == 'out' else r['entity']} {r['relation'].lower().replace('_', ' ')} "
            f"{r['entity'] if r['direction'] == 'out' else entity.name}"
            for r in typed[:6]
        ]
        summary = (
            f"{entity.name} is a {entity.entity_type.value.lower()} mentioned {entity.mentions} times in "
            f"{len(entity.document_ids)} document{'s' if len(entity.document_ids) != 1 else ''}"
            + (f"; {'; '.join(facts)}" if facts else "")
            + "."
        )
        return result, summary


# --- summarize -------------------------------------------------------------------------------------


class SummarizeParams(_Params):
    max_sentences: int = Field(3, ge=1, le=10, description="sentences in the summary")


_SUMMARY_SYSTEM = "You summarize documents faithfully. Use only the numbered contexts; cite them as [n]."
_SUMMARY_PROMPT = "Summarize these contexts in at most {n} sentences for the question: {query}\n\n{contexts}"
#: the model failed (its breaker counts it): the summary is the extractive one, as answers fall back
SUMMARY_LLM_FAILED = "tool:summarize:llm_failed_used_extractive"
#: the request's deadline cut the model's summary: the summary is the extractive one
SUMMARY_DEADLINE = "tool:summarize:deadline_used_extractive"
#: the model ignored max_tokens: its summary is cut where it ran past what they can hold
SUMMARY_RUNAWAY = "tool:summarize:runaway_cut"
_SUMMARY_MAX_TOKENS = 400


class Summarize:
    name = "summarize"
    description = "Summarize the retrieved contexts in a few sentences (retrieval runs first)."
    Params = SummarizeParams
    needs_contexts = True
    asks_the_model = True

    async def run(self, params: SummarizeParams, ctx: ToolContext) -> tuple[Any, str]:
        if not ctx.contexts:
            raise ToolError("nothing was retrieved to summarize")
        if ctx.chat is not None:
            # Like routing, half the time left: the answer's model writes from the summary after it.
            within = Limit.of(math.inf, ctx.time_left(), share=0.5)
            bound = asyncio.timeout(within.seconds if within.by_deadline else None)
            # A retry's backoff past this bound is not started (run_tool waits for the tool's whole
            # limit, twice this): the failure before it is the model's, where the bound's cut
            # would be the deadline's.
            waited = waited_for(within.seconds) if within.by_deadline else contextlib.nullcontext()
            try:
                with waited:
                    async with bound:
                        return await self._written(params, ctx, ctx.chat)
            except Exception as exc:
                # The deadline's cut: a TimeoutError, or whatever the model made of its cancellation;
                # the caller's budget, not the model's failure (its breaker counts neither way).
                if bound.expired():
                    log.debug("summary by the model cut by the deadline after %.3f s; summarizing extractively", within.seconds)
                    ctx.degrade(SUMMARY_DEADLINE)
                elif isinstance(exc, LlmError):
                    log_failure(log, ctx.log_limit, "summary by the model", exc, "summarizing extractively")
                    ctx.degrade(SUMMARY_LLM_FAILED)
                else:
                    raise
        picked = await _central_sentences(ctx, params.max_sentences)
        text = " ".join(f"{s.text} [{s.context}]" for s in picked)
        return {"summary": text, "model": "extractive", "sentences": [{"text": s.text, "context": s.context} for s in picked]}, text

    @staticmethod
    async def _written(params: SummarizeParams, ctx: ToolContext, chat: ChatModel) -> tuple[Any, str]:
        numbered = "\n\n".join(f"[{i}] {c.parent.content}" for i, c in enumerate(ctx.contexts, 1))
        text, over = within_budget(
            await chat.complete(
                _SUMMARY_SYSTEM,
                _SUMMARY_PROMPT.format(n=params.max_sentences, query=ctx.query, contexts=numbered),
                temperature=ctx.chat_temperature,
                max_tokens=_SUMMARY_MAX_TOKENS,
            ),
            _SUMMARY_MAX_TOKENS,
        )
        if over:
            ctx.degrade(SUMMARY_RUNAWAY)
        summary, cut = whole_sentences(text)
        summary = summary.strip()
        if not summary:
            raise ToolError("the model's summary was cut before its first sentence ended")
        return {"summary": summary, "model": chat.name, **({"truncated": True} if cut else {})}, summary


async def _central_sentences(ctx: ToolContext, n: int) -> list[Sentence]:
    """Extractive summary: sentences close to both the question and the contexts' centroid, varied (MMR)."""
    candidates = sentences_of_contexts(ctx.contexts)
    if not candidates:
        raise ToolError("the contexts have no sentences")
    vectors = await ctx.embedder.embed([s.text for s in candidates])
    query = ctx.query_vector if ctx.query_vector is not None else (await ctx.embedder.embed([ctx.query]))[0]
    centroid = vectors.mean(axis=0)
    centroid = centroid / max(float(np.linalg.norm(centroid)), 1e-9)
    relevance = 0.5 * (vectors @ query) + 0.5 * (vectors @ centroid)
    chosen: list[int] = []
    while len(chosen) < min(n, len(candidates)):
        redundancy = (vectors @ vectors[chosen].T).max(axis=1) if chosen else np.zeros(len(candidates))
        mmr = 0.7 * relevance - 0.3 * redundancy
        mmr[chosen] = -np.inf
        chosen.append(int(np.argmax(mmr)))
    return [candidates[i] for i in sorted(chosen, key=lambda i: (candidates[i].context, candidates[i].position))]


# --- calculate --------------------------------------------------------------------------------------


class CalculateParams(_Params):
    expression: str = Field(
        min_length=1,
        max_length=500,
        description='arithmetic (+ - * / // % **, abs, round, min, max, sqrt, log) and graph counts: count_dependents("X", "SERVICE"), '
        'count_dependencies("X"), count_related("X"), count_entities("PROJECT"), mentions("X")',
    )


class Calculate:
    name = "calculate"
    description = "Safe arithmetic, and counts over the knowledge graph."
    Params = CalculateParams
    needs_contexts = False
    asks_the_model = False

    async def run(self, params: CalculateParams, ctx: ToolContext) -> tuple[Any, str]:
        listed: dict[str, list[str]] = {}

        async def neighbours(name: str, entity_type: str | None, incoming: bool | None, relations: frozenset[RelationType] | None) -> int:
            graph = _graph(ctx)
            entity = await _entity(ctx, name)
            edges = await graph.edges([entity.key], ctx.access, ctx.document_ids, relations)
            keys = {
                (e.source if e.target == entity.key else e.target)
                for e in edges
                if e.relation is not RelationType.CO_OCCURS and (incoming is None or (e.target == entity.key) == incoming)
            } - {entity.key}
            found = await graph.entities(keys, ctx.access, ctx.document_ids)
            wanted = _entity_type(entity_type)
            names = sorted(e.name for e in found.values() if wanted is None or e.entity_type is wanted)
            label = {True: 'dependents', False: 'dependencies', None: 'related'}[incoming]
            listed[f"{label} of {entity.name}"] = names
            return len(names)

        async def count_dependents(entity: str, entity_type: str | None = None) -> int:
            return await neighbours(entity, entity_type, True, DEPENDENCY_RELATIONS)

        async def count_dependencies(entity: str, entity_type: str | None = None) -> int:
            return await neighbours(entity, entity_type, False, DEPENDENCY_RELATIONS)

        async def count_related(entity: str, entity_type: str | None = None) -> int:
            return await neighbours(entity, entity_type, None, None)

        async def count_entities(entity_type: str | None = None) -> int:
            wanted = _entity_type(entity_type)
            found = await _graph(ctx).entities(None, ctx.access, ctx.document_ids)
            return sum(1 for e in found.values() if wanted is None or e.entity_type is wanted)

        async def mentions(entity: str) -> int:
            return (await _entity(ctx, entity)).mentions

        functions = {
            "count_dependents": count_dependents,
            "count_dependencies": count_dependencies,
            "count_related": count_related,
            "count_entities": count_entities,
            "mentions": mentions,
        }
        try:
            value = await evaluate(params.expression, functions)
        except CalculationError as exc:
            raise ToolError(str(exc)) from None
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            value = int(value)
        summary = f"{params.expression} = {value}"
        for label, names in listed.items():
            summary += f"; {label}: {_listing(names) or 'none'}"
        return {"expression": params.expression, "value": value, "lists": listed}, summary + "."


def _entity_type(value: str | None) -> EntityType | None:
    if value is None or not value.strip():
        return None
    found = entity_type_named(value)
    if found is None:
        raise CalculationError(f"unknown entity type '{value}'; known: {', '.join(t.value for t in EntityType)}")
    return found


# --- analyze_dependencies ------------------------------------------------------------------------------


class AnalyzeDependenciesParams(_Params):
    entity: str = Field(min_length=1, max_length=200)
    direction: Literal["dependencies", "dependents", "both"] = "both"
    max_depth: int = Field(5, ge=1, le=10)


class AnalyzeDependencies:
    name = "analyze_dependencies"
    description = "Direct and transitive dependencies and dependents of an entity, and the dependency cycles around it."
    Params = AnalyzeDependenciesParams
    needs_contexts = False
    asks_the_model = False
    max_nodes = 500

    async def run(self, params: AnalyzeDependenciesParams, ctx: ToolContext) -> tuple[Any, str]:
        graph = _graph(ctx)
        entity = await _entity(ctx, params.entity)
        nodes = {entity.key: None}  # in the order found: the entity first
        successors: dict[str, dict[str, None]] = {}
        result: dict[str, Any] = {"entity": entity.name, "type": entity.entity_type.value}
        for direction in ("dependencies", "dependents"):
            if params.direction not in (direction, "both"):
                continue
            depth = {entity.key: 0}
            frontier = [entity.key]
            fetched: list[GraphEdge] = []
            for level in range(1, params.max_depth + 1):
                if not frontier or len(depth) >= self.max_nodes:
                    break
                nxt = []
                # The frontier as a set, and the cap within the level: looked up in the list, for every
                # edge touching it either way, a level of 450 entities and 450,000 edges held the
                # event loop 9 s, past the tool's timeout, which cannot stop it.
                leaving = set(frontier)
                edges = await graph.edges(frontier, ctx.access, ctx.document_ids, DEPENDENCY_RELATIONS)
                fetched.extend(edges)
                for e in edges:
                    src, dst = (e.source, e.target) if direction == "dependencies" else (e.target, e.source)
                    if src in leaving and dst not in depth and len(depth) < self.max_nodes:
                        depth[dst] = level
                        nxt.append(dst)
                frontier = nxt
            # Every edge read among what was found, either way: one into the entity, read at the first
            # level, closes a cycle through the deepest.
            for e in fetched:
                if e.source in depth and e.target in depth:
                    nodes.update(dict.fromkeys((e.source, e.target)))
                    successors.setdefault(e.source, {})[e.target] = None
            result[direction] = depth
        names = {k: e.name for k, e in (await graph.entities(list(nodes), ctx.access, ctx.document_ids)).items()}
        summary_parts = []
        for direction in ("dependencies", "dependents"):
            if direction not in result:
                continue
            depth = result[direction]
            direct = sorted(names.get(k, k) for k, d in depth.items() if d == 1)
            transitive = sorted((names.get(k, k), d) for k, d in depth.items() if d > 1)
            result[direction] = {"direct": direct, "transitive": [{"entity": n, "depth": d} for n, d in transitive]}
            verb = "depends on" if direction == "dependencies" else "is needed by"
            part = f"{entity.name} {verb} {_listing(direct) or 'nothing'} directly"
            if transitive:
                part += f" and {_listing([n for n, _ in transitive])} transitively"
            summary_parts.append(part)
        # Within a budget of steps: the search runs on the event loop, where the tool timeout cannot stop it.
        found, complete = bounded_cycles(list(nodes), {k: list(v) for k, v in successors.items()}, params.max_depth + 1)
        cycles = [[names.get(k, k) for k in cycle] for cycle in found]
        result["cycles"] = sorted(cycles)
        result["cycles_complete"] = complete
        summary = "; ".join(summary_parts)
        summary += f"; {len(cycles)}{'' if complete else ' or more'} dependency cycle{'s' if len(cycles) != 1 else ''}" + (
            f": {' ; '.join(' -> '.join([*c, c[0]]) for c in result['cycles'][:3])}" if cycles else ""
        )
        return result, summary + "."


TOOLS: dict[str, Tool] = {t.name: t for t in (LookupFacts(), Summarize(), Calculate(), AnalyzeDependencies())}  # type: ignore[misc]


def describe_tools(tools: Mapping[str, Tool]) -> str:
    """One line per tool with its parameters' JSON schema, for a router prompt."""
    lines = []
    for t in tools.values():
        schema = t.Params.model_json_schema()
        params = {k: {kk: vv for kk, vv in v.items() if kk in ("type", "enum", "default", "description")} for k, v in schema.get("properties", {}).items()}
        lines.append(f"- {t.name}: {t.description} Arguments: {json.dumps(params)}")
    return "\n".join(lines)


async def run_tool(tools: Mapping[str, Tool], name: str, arguments: Mapping[str, Any], ctx: ToolContext, timeout_s: float) -> ToolResult:
    """Validate, run under ``timeout_s`` and the time the request's deadline leaves it
    (``ctx.time_left``), and report; never raises."""
    t0 = time.perf_counter()

    def done(success: bool, result: Any = None, error: str = "", summary: str = "") -> ToolResult:
        return ToolResult(name, dict(arguments), success, result, error, summary, (time.perf_counter() - t0) * 1e3)

    tool = tools.get(name)
    if tool is None:
        return done(False, error=f"unknown tool '{name}'")
    try:
        params = tool.Params.model_validate(dict(arguments))
    except ValidationError as exc:
        return done(False, error="invalid arguments: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
    within = Limit.of(timeout_s, ctx.time_left())
    try:
        # A model call's retry whose backoff would end past the limit is not started (see LlmRouter.decide).
        with waited_for(within.seconds):
            result, summary = await asyncio.wait_for(tool.run(params, ctx), within.seconds)
    except TimeoutError:
        if tool.asks_the_model and ctx.chat is not None and not within.by_deadline:
            ctx.chat.gave_up()  # the operator's limit on the call, not the request's: counts for its breaker
        return done(False, error=f"timed out after {within.seconds:g} s" + (" (deadline)" if within.by_deadline else ""))
    except ToolError as exc:
        return done(False, error=str(exc))
    except Exception as exc:
        # Not "failed: ...": every reader of a failed result says that already ("The x tool failed: ").
        return done(False, error=f"{type(exc).__name__}: {exc}")
    return done(True, result, summary=summary)
