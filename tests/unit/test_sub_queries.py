"""execute_sub_queries: the sub-queries' lists are merged by rank, since their scores are on
different scales (cosines against BM25)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval_server.domain import QueryOptions, SparseVector, Strategy, VectorHit
from retrieval_server.workflow import nodes
from retrieval_server.workflow.analysis import Analysis
from retrieval_server.workflow.state import QueryState, WorkflowDeps, WorkflowSettings


def _hit(chunk_id: str, score: float) -> VectorHit:
    return VectorHit(chunk_id, chunk_id + "#p", "d-" + chunk_id, 0, 0, chunk_id, 0, score)


class _Embedder:
    async def embed(self, texts: Sequence[str], **kw: object) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)


class _Sparse:
    def query(self, text: str) -> SparseVector:
        return SparseVector((1,), (1.0,))


class _Vectors:
    async def search_dense(self, vector: np.ndarray, limit: int, flt: object) -> list[VectorHit]:
        # the sub-query's best match by far, then middling ones: cosines
        return [_hit("dense-best", 0.95)] + [_hit(f"dense-{i}", 0.5) for i in range(limit - 1)]

    async def search_sparse(self, vector: SparseVector, limit: int, flt: object, titled: bool = False) -> list[VectorHit]:
        # weak keyword matches, on BM25's scale
        return [_hit(f"kw-{i}", 9.0 - 0.1 * i) for i in range(limit)]


async def test_the_sub_queries_lists_are_merged_by_rank_not_by_raw_score() -> None:
    deps = WorkflowDeps(embedder=_Embedder(), sparse=_Sparse(), vectors=_Vectors(), metadata=None, analyzer=None,  # type: ignore[arg-type]
                        settings=WorkflowSettings())
    state = QueryState(options=QueryOptions("q", 10, strategy=Strategy.HYBRID), strategy=Strategy.HYBRID, pool=80)
    state.analysis = Analysis(sub_queries=["first part", "second part"])
    state.fused = [_hit(f"main-{i}", 1.0 / (i + 1)) for i in range(30)]
    order = [h.chunk_id for h in (await nodes.execute_sub_queries(state, deps))["fused"]]
    # First in the dense lists as kw-0 is in the keyword lists: ahead of every keyword hit after
    # kw-0 (by raw score, the cosine of 0.95 came after every BM25 score).
    assert order.index("dense-best") < order.index("kw-1")
    assert order[0] == "main-0"  # the main results weigh as much as all the sub-queries' lists together
