"""scoring_core: the retrieval hot path as pure computation.

numpy arrays in, numpy arrays out; numba kernels with plain-Python twins in
:mod:`scoring_core.reference`; ONNX encoders in :mod:`scoring_core.encoders`.
No I/O beyond loading model files, no asyncio, and no import from retrieval_server.
"""

import numpy as np

from scoring_core.cache_matching import CosineMatcher
from scoring_core.dedup import content_hashes, dedup_by_key, near_duplicates
from scoring_core.fusion import Fused, rrf, score_fusion
from scoring_core.grouping import GroupedHits, group_by_parent
from scoring_core.name_filter import NameFilter
from scoring_core.selection import threshold_with_fallback, top_k


def warm_up() -> None:
    """Load every kernel from numba's cache (compiling it the first time), off the request path."""
    s = np.array([0.2, 0.1], dtype=np.float32)
    group_by_parent(np.zeros(2, dtype=np.int64), s, 1)
    rrf([[1, 2], [2]])
    score_fusion([[1, 2]], [[0.5, 0.1]], method="minmax")
    dedup_by_key(np.array([1, 1]), s)
    near_duplicates(np.eye(2, dtype=np.float32), s)
    top_k(s, 1)
    threshold_with_fallback(s)
    m = CosineMatcher(2, initial_capacity=1)
    m.add(np.array([1.0, 0.0]), expires_at=1.0)
    m.match(np.array([1.0, 0.0]), now=0.0)
    NameFilter(["ab"]).candidates("ab", 88.0)


__all__ = [
    "CosineMatcher",
    "Fused",
    "GroupedHits",
    "NameFilter",
    "content_hashes",
    "dedup_by_key",
    "group_by_parent",
    "near_duplicates",
    "rrf",
    "score_fusion",
    "threshold_with_fallback",
    "top_k",
    "warm_up",
]
