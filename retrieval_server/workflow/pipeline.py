"""The query graph and the Search flow, wired from the nodes."""

from __future__ import annotations

import time

from retrieval_server.domain import (
    Identity,
    PointFilter,
    QueryOptions,
    QueryResult,
    SearchResult,
)
from retrieval_server.workflow import nodes
from retrieval_server.workflow.graph import END, Graph
from retrieval_server.workflow.state import QueryState, WorkflowDeps


def build_query_graph() -> Graph[QueryState, WorkflowDeps]:
    graph: Graph[QueryState, WorkflowDeps] = (
        Graph[QueryState, WorkflowDeps]("embed_query")
        .node("embed_query", nodes.embed_query, lambda s: 0 if s.query_vector is None else 1)
        .node("retrieve", nodes.retrieve, lambda s: len(s.hits))
        .node("enrich", nodes.enrich, lambda s: len(s.contexts))
        .node("select", nodes.select, lambda s: len(s.contexts))
        .edge("embed_query", "retrieve")
        .edge("retrieve", "enrich")
        .edge("enrich", "select")
        .edge("select", END)
    )
    graph.validate()
    return graph


class QueryPipeline:
    def __init__(self, deps: WorkflowDeps, *, search_text_chars: int = 800) -> None:
        self._deps = deps
        self._graph = build_query_graph()
        self._search_text_chars = search_text_chars

    async def query(self, options: QueryOptions) -> QueryResult:
        t0 = time.perf_counter()
        state = await self._graph.run(QueryState(options=options), self._deps)
        state.metrics.iterations = 1
        state.metrics.total_ms = (time.perf_counter() - t0) * 1e3
        return QueryResult(options.query, tuple(state.contexts), state.metrics)

    async def search(self, query: str, top_k: int, identity: Identity) -> list[SearchResult]:
        """The MARP contract: dense search, duplicate texts removed, text trimmed."""
        vector = (await self._deps.embedder.embed([query]))[0]
        # Fetch extra so that removing duplicate texts still leaves top_k results.
        hits = await self._deps.vectors.search_dense(vector, top_k * 3, PointFilter(identity=identity))
        seen: set[str] = set()
        unique = []
        for h in hits:
            key = " ".join(h.content.split()).lower()
            if key not in seen:
                seen.add(key)
                unique.append(h)
            if len(unique) == top_k:
                break
        docs = await self._deps.metadata.get_documents([h.document_id for h in unique])
        out = []
        for h in unique:
            doc = docs.get(h.document_id)
            if doc is None:
                continue
            out.append(
                SearchResult(
                    text=h.content[: self._search_text_chars],
                    document_id=h.document_id,
                    chunk_index=h.chunk_index,
                    title=doc.title,
                    page=h.page,
                    url=doc.url,
                    score=h.score,
                )
            )
        return out
