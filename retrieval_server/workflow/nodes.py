"""Query graph nodes. Each reads the state, does one thing, and returns the fields it changed."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from retrieval_server.domain import ChildEvidence, PointFilter, RetrievedContext, Strategy
from retrieval_server.workflow.state import QueryState, WorkflowDeps
from scoring_core import group_by_parent

log = logging.getLogger(__name__)


def choose_strategy(requested: Strategy) -> Strategy:
    """The strategy this build can run: hybrid and adaptive fall back to dense search (reported)."""
    return Strategy.KEYWORD if requested is Strategy.KEYWORD else Strategy.SEMANTIC


async def embed_query(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    # Metrics are the request's running log: nodes append what they degraded.
    strategy = choose_strategy(state.options.strategy)
    if strategy is not state.options.strategy:
        state.metrics.degraded.append(f"strategy:{state.options.strategy.value}_unavailable")
    if strategy is Strategy.KEYWORD:
        return {"strategy": strategy}
    try:
        vector = (await deps.embedder.embed([state.options.query]))[0]
    except Exception:
        # An embedding failure degrades to keyword search instead of failing the request.
        log.exception("query embedding failed; falling back to keyword search")
        state.metrics.degraded.append("dense:embedding_failed")
        return {"strategy": Strategy.KEYWORD}
    return {"strategy": strategy, "query_vector": vector}


async def retrieve(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    opts = state.options
    flt = PointFilter(identity=opts.identity, document_ids=opts.document_ids)
    limit = opts.top_k * deps.child_candidates_per_context
    if state.strategy is Strategy.KEYWORD or state.query_vector is None:
        hits = await deps.vectors.search_sparse(deps.sparse.query(opts.query), limit, flt)
    else:
        hits = await deps.vectors.search_dense(state.query_vector, limit, flt)
    return {"hits": hits}


async def enrich(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    """Small-to-big: child hits under their parents, parents fetched in one batch."""
    if not state.hits:
        return {"contexts": []}
    parent_ids, codes = np.unique([h.parent_chunk_id for h in state.hits], return_inverse=True)
    scores = np.asarray([h.score for h in state.hits], dtype=np.float32)
    grouped = group_by_parent(codes, scores, len(parent_ids))
    wanted = [str(parent_ids[p]) for p in grouped.parents]
    parents = await deps.metadata.get_parents(wanted)
    documents = await deps.metadata.get_documents([p.document_id for p in parents.values()])
    contexts = []
    for rank, pid in enumerate(wanted):
        parent = parents.get(pid)
        document = documents.get(parent.document_id) if parent else None
        if parent is None or document is None:
            continue  # written to the vectors but not (yet, or any more) to the rows: skip
        kids = grouped.children[grouped.offsets[rank] : grouped.offsets[rank + 1]]
        evidence = tuple(
            ChildEvidence(state.hits[i].chunk_id, state.hits[i].content, state.hits[i].score) for i in kids
        )
        contexts.append(RetrievedContext(parent, document, float(grouped.parent_scores[rank]), evidence))
    return {"contexts": contexts}


async def select(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    state.metrics.strategy_used = state.strategy
    return {"contexts": state.contexts[: state.options.top_k]}
