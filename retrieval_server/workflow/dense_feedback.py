"""Dense pseudo-relevance feedback: Rocchio on the query vector, then a second dense search.

The query's nearest ``docs`` child chunks (inside the caller's access filter, so only documents
the caller may read move the query) are taken as relevant; the query vector moves towards their
centroid, ``q' = (1 - weight) * q + weight * c`` (``q`` and the centroid ``c`` of the chunks'
vectors both unit length, so ``weight`` alone sets how far it moves), renormalized, and is
searched again as a leg of its own that is fused with the others (Rocchio 1971; the dense form of
Li et al., "Pseudo Relevance Feedback with Deep Language Models and Dense Retrievers: Successes
and Pitfalls", TOIS 2023, whose Rocchio setting is 5 documents, query 0.4, feedback 0.6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from retrieval_server.backends.vector_store import VectorStore
from retrieval_server.domain import PointFilter, VectorHit


@dataclass(frozen=True, slots=True)
class DenseFeedback:
    #: feedback chunks (0: off)
    docs: int = 0
    #: the centroid's share of the moved query, in [0, 1]
    weight: float = 0.6


def rocchio(query: np.ndarray, feedback: Sequence[np.ndarray], weight: float) -> np.ndarray:
    """The unit query moved ``weight`` of the way towards the unit centroid of ``feedback``."""
    q = _unit(np.asarray(query, dtype=np.float32))
    if not len(feedback) or weight <= 0:
        return q
    centroid = _unit(np.mean(np.stack([np.asarray(v, dtype=np.float32) for v in feedback]), axis=0))
    moved = (1.0 - weight) * q + weight * centroid
    # Feedback opposite the query cancels it: nothing to move towards, the query stands.
    return _unit(moved) if float(np.linalg.norm(moved)) > 1e-6 else q


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


async def search(vectors: VectorStore, query: np.ndarray, limit: int, flt: PointFilter, options: DenseFeedback) -> list[VectorHit]:
    """The second dense search, with the moved query; empty when feedback is off or nothing is readable."""
    if options.docs <= 0:
        return []
    feedback = await vectors.nearest_vectors(query, options.docs, flt)
    if not feedback:
        return []
    return await vectors.search_dense(rocchio(query, feedback, options.weight), limit, flt)
