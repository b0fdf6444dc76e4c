"""numpy-vectorized versions of the kernels: the middle column of the benchmark.

Same results as the kernels (checked in bench runs by comparing outputs); written the way one
would without numba.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _fuse(ids: np.ndarray, contrib: np.ndarray, list_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos = np.arange(ids.shape[0])
    # Drop repeats of an id inside one list (keep the first, best-ranked one).
    order = np.lexsort((pos, list_of, ids))
    s_ids, s_list = ids[order], list_of[order]
    first_in_list = np.ones(order.shape[0], dtype=bool)
    first_in_list[1:] = (s_ids[1:] != s_ids[:-1]) | (s_list[1:] != s_list[:-1])
    keep = order[first_in_list]
    uniq, inverse = np.unique(ids[keep], return_inverse=True)
    scores = np.bincount(inverse, weights=contrib[keep], minlength=uniq.shape[0])
    first = np.full(uniq.shape[0], ids.shape[0], dtype=np.int64)
    np.minimum.at(first, inverse, keep)
    ranked = np.lexsort((first, -scores))
    return uniq[ranked], scores[ranked]


def rrf(lists: Sequence[np.ndarray], k: float = 60.0) -> tuple[np.ndarray, np.ndarray]:
    ids = np.concatenate(lists)
    ranks = np.concatenate([np.arange(1, len(l) + 1) for l in lists])
    list_of = np.concatenate([np.full(len(l), i) for i, l in enumerate(lists)])
    return _fuse(ids, 1.0 / (k + ranks), list_of)


def score_fusion(lists: Sequence[np.ndarray], scores: Sequence[np.ndarray], weights: Sequence[float], method: str) -> tuple[np.ndarray, np.ndarray]:
    normed = []
    for w, s in zip(weights, scores, strict=True):
        if method == "minmax":
            lo, hi = s.min(), s.max()
        else:
            std = s.std(ddof=1) if s.shape[0] > 1 else 0.0
            lo, hi = s.mean() - 3 * std, s.mean() + 3 * std
        normed.append(w * (np.full_like(s, 0.5) if hi == lo else (s - lo) / (hi - lo)))
    list_of = np.concatenate([np.full(len(l), i) for i, l in enumerate(lists)])
    return _fuse(np.concatenate(lists), np.concatenate(normed), list_of)


def group_by_parent(codes: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(parents best first, children ordered by parent rank then score)."""
    order = np.lexsort((np.arange(scores.shape[0]), -scores))
    parents, first = np.unique(codes[order], return_index=True)
    parent_rank = np.empty(parents.shape[0], dtype=np.int64)
    parent_rank[np.argsort(first)] = np.arange(parents.shape[0])
    rank_of_child = parent_rank[np.searchsorted(parents, codes[order])]
    children = order[np.argsort(rank_of_child, kind="stable")]
    return parents[np.argsort(first)], children


def dedup_by_key(keys: np.ndarray, scores: np.ndarray) -> np.ndarray:
    order = np.lexsort((np.arange(scores.shape[0]), -scores))
    _, first = np.unique(keys[order], return_index=True)
    return order[np.sort(first)]


def near_duplicates(emb: np.ndarray, scores: np.ndarray, threshold: float) -> np.ndarray:
    unit = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    sim = unit @ unit.T
    order = np.lexsort((np.arange(scores.shape[0]), -scores))
    kept: list[int] = []
    for c in order:
        if not kept or not (sim[c, kept] >= threshold).any():
            kept.append(int(c))
    return np.asarray(kept)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    k = min(k, scores.shape[0])
    part = np.argpartition(-scores, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
    return part[np.lexsort((part, -scores[part]))]


def threshold_with_fallback(scores: np.ndarray, threshold: float, fallback: int) -> np.ndarray:
    idx = np.flatnonzero(scores >= threshold)
    if idx.shape[0]:
        return idx[np.lexsort((idx, -scores[idx]))]
    return top_k(scores, fallback)


def cache_match(matrix: np.ndarray, live: np.ndarray, expires: np.ndarray, scope: np.ndarray, q: np.ndarray, now: float, caller: int, threshold: float) -> tuple[int, float]:
    """matmul + mask + argmax, the obvious numpy way."""
    sims = matrix @ q
    ok = (live == 1) & (expires > now) & ((scope == 0) | (scope == caller))
    sims = np.where(ok, sims, -np.inf)
    best = int(np.argmax(sims)) if sims.shape[0] else -1
    return (best, float(sims[best])) if best >= 0 and sims[best] >= threshold else (-1, float("nan"))
