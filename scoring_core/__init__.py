"""scoring_core: the retrieval hot path as pure computation.

numpy arrays in, numpy arrays out; numba kernels with plain-Python twins in
:mod:`scoring_core.reference`; ONNX encoders in :mod:`scoring_core.encoders`.
No I/O beyond loading model files, no asyncio, and no import from retrieval_server.
"""

import threading

from scoring_core._jit import KERNELS
from scoring_core.cache_matching import CosineMatcher
from scoring_core.dedup import content_hashes, dedup_by_key, near_duplicates
from scoring_core.fusion import Fused, rrf, score_fusion
from scoring_core.grouping import GroupedHits, group_by_parent
from scoring_core.name_filter import NameFilter
from scoring_core.selection import threshold_with_fallback, top_k


def warm_up(stop: threading.Event | None = None) -> None:
    """Load every kernel from numba's cache (compiling it the first time), off the request path.

    ``stop``, once set, ends it before the next kernel: the first compile of them all takes about
    25 s, which a server stopped while it starts must not wait for (a container's stop kills it
    after 10 s)."""
    for k in KERNELS:
        if stop is not None and stop.is_set():
            return
        k.dispatcher()


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
