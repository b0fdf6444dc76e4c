"""The query graph and the Search flow, wired from the nodes.

    START -> build_access_filter --GENERATION--> route --retrieve--> check_cache
                     |                                  --tool / direct--> (run_tools ->) generate -> END
                check_cache --hit--> END (GENERATION: generate)
                     | miss
               analyze_query <-------------------------+ retry (insufficient, iterations < max)
                     |                                  |
               retrieve -> fuse -> rerank -> enrich -> check_sufficiency
                                      ^                  | insufficient, max reached,
                                      |                  | sub-queries exist
                                      +-- execute_sub_queries
                                                         | sufficient (or nothing left)
                                             select -> update_cache -> END
                                                               | GENERATION
                                                 (run_tools ->) generate -> END

    enrich goes back to retrieve, once, when a document it found was replaced since it was searched,
    and with a wider pool when copies of one text filled it (up to nodes.HITS_PER_RESULT hits a context).

The access filter comes first because it names the cache partition (an answer is looked up and
stored under the filter it is computed with, so it never reaches a caller who reads another set)
and bounds the router's entity matching. A GENERATION request then goes to the router
(workflow/assistant.py), which sends it to retrieval (check_cache), to its tools, or straight to
generate.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from retrieval_server.domain import SEND_MARGIN_S, AccessFilter, DeadlineExceeded, Identity, PointFilter, QueryOptions, QueryResult, SearchResult
from retrieval_server.knowledge import Answer, Route
from retrieval_server.workflow import assistant, nodes, routers
from retrieval_server.workflow.abandon import abandon
from retrieval_server.workflow.graph import END, PARTIAL_RESULTS, Graph, Observer
from retrieval_server.workflow.state import EventSink, QueryState, WorkflowDeps
from scoring_core import content_hashes, dedup_by_key


def build_query_graph(deps: WorkflowDeps, clock: Callable[[], float] = time.monotonic) -> Graph[QueryState, WorkflowDeps]:
    s = deps.settings
    graph: Graph[QueryState, WorkflowDeps] = (
        Graph[QueryState, WorkflowDeps]("build_access_filter", clock=clock)
        .node("build_access_filter", nodes.build_access_filter)
        .node("check_cache", nodes.check_cache, lambda st: len(st.contexts) if st.cache_hit else 0)
        .node("analyze_query", nodes.analyze_query, lambda st: 1 + len(st.analysis.reformulations) + len(st.analysis.sub_queries), cut_at_deadline=True)
        .node("retrieve", nodes.retrieve, lambda st: sum(len(h) for h in st.legs.values()), cut_at_deadline=True)
        .node("fuse", nodes.fuse, lambda st: len(st.fused), cut_at_deadline=True)
        .node("rerank", nodes.rerank, lambda st: len(st.reranked), cut_at_deadline=True)
        .node("enrich", nodes.enrich, lambda st: len(st.contexts), cut_at_deadline=True)
        # Not cut, nor jumped over: no I/O, and it counts the pass that ran (metrics.iterations).
        .node("check_sufficiency", nodes.check_sufficiency, lambda st: len(st.contexts))
        .node("execute_sub_queries", nodes.execute_sub_queries, lambda st: len(st.fused), cut_at_deadline=True)
        .node("select", nodes.select, lambda st: len(st.contexts))
        .node("update_cache", nodes.update_cache)
        .node("route", assistant.route, lambda st: len(st.route.tool_calls) if st.route else 0)
        .node("run_tools", assistant.run_tools, lambda st: sum(r.success for r in st.tool_results))
        .node("generate", assistant.generate, lambda st: len(st.answer.sentences) if st.answer else 0)
        .edge("build_access_filter", routers.after_access)
        .edge("check_cache", routers.after_cache)
        .edge("analyze_query", "retrieve")
        .edge("retrieve", "fuse")
        .edge("fuse", "rerank")
        .edge("rerank", "enrich")
        .edge("enrich", routers.after_enrich)
        .edge("check_sufficiency", routers.make_after_sufficiency(s.sufficiency_threshold, s.max_iterations))
        .edge("execute_sub_queries", "rerank")
        .edge("select", "update_cache")
        .edge("update_cache", routers.after_retrieval)
        .edge("route", routers.make_after_route(assistant.assistant_of(deps).tools))
        .edge("run_tools", "generate")
        .edge("generate", END)
    )
    graph.validate()
    return graph


class QueryPipeline:
    def __init__(
        self, deps: WorkflowDeps, *, search_text_chars: int = 800, observer: Observer[QueryState] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``clock`` is what request deadlines (``QueryOptions.deadline``) are measured on."""
        self._deps = deps
        self._clock = clock
        self._graph = build_query_graph(deps, clock).observe(observer)
        self._search_text_chars = search_text_chars

    @property
    def deps(self) -> WorkflowDeps:
        return self._deps

    async def query(self, options: QueryOptions, events: EventSink | None = None) -> QueryResult:
        """Run the graph; ``events`` (a streaming caller) hears of each finished stage and of the answer's text."""
        t0 = time.perf_counter()
        budget = None if options.deadline is None else max(0.0, options.deadline - self._clock())
        state = QueryState(options=options, rerank_threshold=self._deps.settings.rerank_threshold, events=events, clock=self._clock)
        try:
            await self._graph.run(state, self._deps, deadline=options.deadline, on_deadline="select", on_stage=events)
        finally:
            # check_cache's embedding that no retrieve awaited (the deadline came first, or the
            # strategy searches no vector): not run for nobody when it is still queued.
            abandon([state.query_embedding])
        state.metrics.total_ms = (time.perf_counter() - t0) * 1e3
        if PARTIAL_RESULTS in state.metrics.degraded and not state.contexts and not _answered_without_contexts(state.answer):
            # Partial results are worth returning; an empty answer is not an answer, nor is
            # GENERATION's "the documents do not answer this" when nothing was searched.
            # The budget the caller's deadline left, not the time taken, which says nothing of
            # how much time the caller gave.
            raise DeadlineExceeded(
                f"the call's deadline left {(budget or 0.0) * 1e3:.0f} ms for the work after the time kept to send the answer "
                f"(at most {SEND_MARGIN_S * 1e3:.0f} ms and at most a quarter of the call's time); nothing was found in that time: allow more time"
            )
        return QueryResult(
            options.query,
            tuple(state.contexts),
            state.metrics,
            cached=state.cache_hit,
            suggestions=tuple(state.suggestions),
            answer=state.answer,
        )

    async def search(self, query: str, top_k: int, identity: Identity) -> list[SearchResult]:
        """The MARP contract: dense search, duplicate texts removed, text trimmed."""
        vector = (await self._deps.embedder.embed([query]))[0]
        access = PointFilter(access=AccessFilter.for_identity(identity))
        # Fetch extra so that removing duplicate texts (and stale versions) still leaves top_k results.
        limit, searched_again = top_k * 3, False
        while True:
            hits = await self._deps.vectors.search_dense(vector, limit, access)
            docs = await self._deps.metadata.get_documents(list({h.document_id for h in hits}))
            current = [h for h in hits if h.document_id in docs and h.version == docs[h.document_id].version]
            # A document replaced since the search is stored all the same, at a version not searched:
            # once more, rather than leave it out.
            if not searched_again and nodes.replaced_since_searched(hits, {d: doc.version for d, doc in docs.items()}):
                searched_again = True
                continue
            # The texts as returned, trimmed: two chunks that differ only past the trim came back as one text twice.
            texts = [h.content[: self._search_text_chars] for h in current]
            kept = dedup_by_key(content_hashes(texts), np.asarray([h.score for h in current], dtype=np.float32))
            # Copies of one text (a file mirrored under many ids) filled a page that held one result:
            # a wider page, while the engine has more and up to the cap, finds the distinct texts.
            if len(kept) >= top_k or len(hits) < limit or limit >= top_k * nodes.HITS_PER_RESULT:
                break
            limit = min(limit * 4, top_k * nodes.HITS_PER_RESULT)
        out = []
        for i in kept[:top_k]:
            h = current[i]
            doc = docs[h.document_id]
            out.append(
                SearchResult(
                    text=texts[i],
                    document_id=h.document_id,
                    chunk_index=h.chunk_index,
                    title=doc.title,
                    page=h.page,
                    url=doc.url,
                    score=h.score,
                )
            )
        return out


def _answered_without_contexts(answer: Answer | None) -> bool:
    """A GENERATION answer that stands without contexts: a direct answer, or one from a tool's result."""
    return answer is not None and (answer.route is Route.DIRECT_ANSWER or any(t.success for t in answer.tool_results))
