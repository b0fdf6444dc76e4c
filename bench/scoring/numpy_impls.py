"""numpy-vectorized versions of the kernels: the middle column of the benchmark.

Same results as the kernels (checked in bench runs by comparing outputs); written the way one
would without numba.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

_ASCII_SPACE = np.zeros(256, dtype=np.bool_)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True


def _exact_product(a: np.ndarray | float, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a * b`` and its rounding error (Dekker), as the kernels compute their terms."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = a * b
        c = 134217729.0 * a
        a_hi = c - (c - a)
        a_lo = a - a_hi
        c = 134217729.0 * b
        b_hi = c - (c - b)
        b_lo = b - b_hi
        err = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    # A product near float64's range overflows the split: its error is then beyond reach (NaN).
    return p, np.where(np.isfinite(err), err, 0.0)


def _fuse(ids: np.ndarray, contrib: np.ndarray, contrib_err: np.ndarray, list_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each id's terms summed error-free (two-sum, one term of every id at a time) and rounded
    once, as the kernels sum them: equal exact sums tie, and ties go to first appearance."""
    pos = np.arange(ids.shape[0])
    # Drop repeats of an id inside one list (keep the first, best-ranked one).
    order = np.lexsort((pos, list_of, ids))
    s_ids, s_list = ids[order], list_of[order]
    first_in_list = np.ones(order.shape[0], dtype=bool)
    first_in_list[1:] = (s_ids[1:] != s_ids[:-1]) | (s_list[1:] != s_list[:-1])
    keep = order[first_in_list]
    uniq, inverse = np.unique(ids[keep], return_inverse=True)
    scores = np.zeros(uniq.shape[0])
    err = np.zeros(uniq.shape[0])
    by_id = np.argsort(inverse, kind="stable")
    group = inverse[by_id]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    nth = np.arange(group.shape[0]) - np.repeat(starts, np.diff(np.r_[starts, group.shape[0]]))
    for j in range(int(nth.max(initial=-1)) + 1):
        at = by_id[nth == j]
        target, term = inverse[at], contrib[keep][at]
        a = scores[target]
        with np.errstate(over="ignore", invalid="ignore"):
            total = a + term
            part = total - a
            # An infinite sum's error is inf - inf, NaN: it keeps none, as in the kernels.
            err[target] += np.where(np.isfinite(total), (a - (total - part)) + (term - part) + contrib_err[keep][at], 0.0)
        scores[target] = total
    scores += err
    first = np.full(uniq.shape[0], ids.shape[0], dtype=np.int64)
    np.minimum.at(first, inverse, keep)
    ranked = np.lexsort((first, -scores))
    return uniq[ranked], scores[ranked]


def rrf(lists: Sequence[np.ndarray], k: float = 60.0) -> tuple[np.ndarray, np.ndarray]:
    ids = np.concatenate(lists)
    ranks = np.concatenate([np.arange(1, len(l) + 1) for l in lists])
    list_of = np.concatenate([np.full(len(l), i) for i, l in enumerate(lists)])
    d = (k + ranks).astype(np.float64)  # exact: k is whole here
    q = 1.0 / d
    p, p_err = _exact_product(q, d)
    return _fuse(ids, q, ((1.0 - p) - p_err) / d, list_of)


def score_fusion(lists: Sequence[np.ndarray], scores: Sequence[np.ndarray], weights: Sequence[float], method: str) -> tuple[np.ndarray, np.ndarray]:
    normed = []
    for w, s in zip(weights, scores, strict=True):
        if method == "minmax":
            lo, hi = s.min(), s.max()
        else:
            std = s.std(ddof=1) if s.shape[0] > 1 else 0.0
            lo, hi = s.mean() - 3 * std, s.mean() + 3 * std
        normed.append(_exact_product(w, np.full_like(s, 0.5) if hi == lo else (s - lo) / (hi - lo)))
    list_of = np.concatenate([np.full(len(l), i) for i, l in enumerate(lists)])
    return _fuse(np.concatenate(lists), np.concatenate([t for t, _ in normed]), np.concatenate([e for _, e in normed]), list_of)


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


def content_hashes(texts: Sequence[str]) -> np.ndarray:
    """ASCII texts normalized over their joined bytes: a separator is kept (as one space) where it
    ends a run inside a text, every other separator dropped; the rest by str.split as the kernel."""
    out = np.empty(len(texts), dtype=np.uint64)
    at = [i for i, t in enumerate(texts) if t.isascii()]
    encoded = [texts[i].encode("ascii") for i in at]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    owner = np.repeat(np.arange(len(encoded)), lengths)
    space = _ASCII_SPACE[data]
    word = ~space
    # words before each byte within its text, and whether the next byte of the same text is a word's
    before = np.cumsum(word) - word
    # less the texts' before it, counted per text: indexing at each text's first byte read past the
    # bytes for an empty text last
    words = np.bincount(owner, weights=word, minlength=len(encoded)).astype(np.int64)
    before -= np.repeat(np.cumsum(words) - words, lengths)
    next_word = np.zeros_like(word)
    next_word[:-1] = word[1:] & (owner[1:] == owner[:-1])
    keep = word | (space & next_word & (before > 0))
    text = np.where((data >= 65) & (data <= 90), data + 32, data).astype(np.uint8)
    text[space] = 32
    kept, ends = text[keep].tobytes(), np.concatenate(([0], np.cumsum(np.bincount(owner[keep], minlength=len(encoded)))))
    for j, i in enumerate(at):
        out[i] = int.from_bytes(hashlib.blake2b(kept[ends[j] : ends[j + 1]], digest_size=8).digest(), "little")
    for i, t in enumerate(texts):
        if not t.isascii():
            out[i] = int.from_bytes(hashlib.blake2b(" ".join(t.split()).casefold().encode(), digest_size=8).digest(), "little")
    return out
