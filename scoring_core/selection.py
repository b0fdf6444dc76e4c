"""Top-k selection and the rerank threshold with its fallback.

Both return indices, best first, ties by input position. Top-k keeps a bounded min-heap in a
flat array (no full sort), so selecting 10 of 10,000 touches each score once, and puts the
k it keeps in order by heapsort: O(n log k) in all.
"""

from __future__ import annotations

import numpy as np

from scoring_core._jit import kernel
from scoring_core._sort import argsort_desc_f32
from scoring_core._validate import as_count, as_real, as_scores


@kernel(["boolean(float32, int64, float32, int64)", "boolean(float64, int64, float64, int64)"], inline="always")
def _worse(s1, i1, s2, i2):  # pragma: no cover - compiled
    # (s1, i1) ranks below (s2, i2): lower score, or the same score later in the input.
    return s1 < s2 or (s1 == s2 and i1 > i2)


@kernel(["void(float32[::1], int64[::1], int64, float32, int64)", "void(float64[::1], int64[::1], int64, float64, int64)"],
        inline="always")
def _sift_down(heap_s, heap_i, size, s, i):  # pragma: no cover - compiled
    # (s, i) put at the root of the min-heap heap_s[:size] (the root's old entry dropped) and sifted down.
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size and _worse(heap_s[child + 1], heap_i[child + 1], heap_s[child], heap_i[child]):
            child += 1
        if _worse(heap_s[child], heap_i[child], s, i):
            heap_s[pos] = heap_s[child]
            heap_i[pos] = heap_i[child]
            pos = child
        else:
            break
    heap_s[pos] = s
    heap_i[pos] = i


@kernel(["int64[:](float32[::1], int64)", "int64[:](float64[::1], int64)"], nogil=True)
def _top_k_kernel(scores, k):  # pragma: no cover - compiled
    n = scores.shape[0]
    k = min(k, n)
    heap_s = np.empty(k, dtype=scores.dtype)
    heap_i = np.empty(k, dtype=np.int64)
    size = 0
    for i in range(n):
        s = scores[i]
        if size < k:
            # Sift up: the root holds the worst kept candidate.
            pos = size
            size += 1
            while pos > 0:
                parent = (pos - 1) // 2
                if _worse(s, i, heap_s[parent], heap_i[parent]):
                    heap_s[pos] = heap_s[parent]
                    heap_i[pos] = heap_i[parent]
                    pos = parent
                else:
                    break
            heap_s[pos] = s
            heap_i[pos] = i
        elif k > 0 and _worse(heap_s[0], heap_i[0], s, i):
            _sift_down(heap_s, heap_i, size, s, i)
    # Best first, by heapsort: the root (the worst kept) moves to the end of a heap one shorter.
    # An insertion sort took k**2 / 2 comparisons, and fusion asks for up to a quarter of its ids.
    for end in range(size - 1, 0, -1):
        s, i = heap_s[end], heap_i[end]
        heap_s[end] = heap_s[0]
        heap_i[end] = heap_i[0]
        _sift_down(heap_s, heap_i, end, s, i)
    return heap_i[:size]


@kernel("int64[:](float32[::1], float64)", nogil=True)
def _above_kernel(scores, threshold):  # pragma: no cover - compiled
    idx = np.flatnonzero(scores.astype(np.float64) >= threshold)  # not at the threshold's float32 rounding
    return idx[argsort_desc_f32(scores[idx])]


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first. NaN raises; ±inf rank as extremes."""
    k = as_count(k, "k")
    if k < 0:
        raise ValueError("k must be >= 0")
    return _top_k_kernel(as_scores(scores), k)


def threshold_with_fallback(scores: np.ndarray, threshold: float = 0.3, fallback: int = 3) -> tuple[np.ndarray, bool]:
    """Indices scoring at least ``threshold`` (best first); when none does, the ``fallback`` best.

    Returns ``(indices, fallback_triggered)``.
    """
    s = as_scores(scores)
    threshold = as_real(threshold, "threshold")
    if np.isnan(threshold):
        raise ValueError("threshold must not be NaN")
    fallback = as_count(fallback, "fallback")
    if fallback < 0:  # checked whether or not the fallback is needed, like top_k's k
        raise ValueError("fallback must be >= 0")
    kept = _above_kernel(s, threshold)
    if kept.shape[0] or s.shape[0] == 0:
        return kept, False
    return _top_k_kernel(s, fallback), True
