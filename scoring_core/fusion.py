"""Rank and score fusion of several ranked lists of integer ids.

Lists travel as one flat id array plus ``offsets`` (list ``l`` is ``ids[offsets[l]:offsets[l+1]]``,
best first). The fused order is by descending score; ties go to the id that appeared first when
the lists are read in order. An id repeated inside one list counts once, at its first (best) rank.

A fused score is the exact sum of the id's terms rounded once to float64 (each term carried with
its rounding error, the sum accumulated error-free): summed in plain float64, equal sums of three
or more terms (ranks 1, 2, 3 in three lists; 1/63 + 1/84 = 2/72) came out an ulp apart, so
their order was the rounding's, not first appearance. RRF's term is exactly ``w / (k + rank)``;
score fusion's, ``w`` times the float64 normalized score. The errors themselves are summed in
float64, so a sum is exact to about 2**-104 of it: a term that much smaller than the others (a
subnormal weight, or 1e-36 beside 1) can round a sum at a midpoint the other way. A sum past
float64's range is inf.

* :func:`rrf`: Reciprocal Rank Fusion, ``sum_l w_l / (k + rank)`` with ranks from 1
  (Cormack, Clarke & Buettcher 2009; k = 60).
* :func:`score_fusion`: weighted sum of per-list normalized scores, with min-max or
  distribution-based (DBSF: mean ± 3 sample standard deviations as extremes) normalization, as
  Qdrant defines them: a list whose extremes coincide normalizes to 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from scoring_core._jit import kernel
from scoring_core._sort import argsort_desc_f64
from scoring_core._validate import as_count, as_integers, as_real, as_reals
from scoring_core.selection import _top_k_kernel

_F = "Tuple((int64[:], float64[:]))"
_SPLITTER = 134217729.0  # 2**27 + 1: splits a float64 into two halves whose products are exact


@kernel("UniTuple(float64, 2)(float64, float64)", nogil=True)
def _exact_product(a, b):  # pragma: no cover - compiled
    """``a * b`` rounded, and its rounding error (Dekker's product): their sum is exact."""
    p = a * b
    c = _SPLITTER * a
    a_hi = c - (c - a)
    a_lo = a - a_hi
    c = _SPLITTER * b
    b_hi = c - (c - b)
    b_lo = b - b_hi
    err = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    # A product near float64's range overflows the split: its error is then beyond reach.
    return p, err if np.isfinite(err) else 0.0


@dataclass(frozen=True, slots=True)
class Fused:
    """Fused ranking: ``ids[i]`` has ``scores[i]``, best first. ``ids`` are uint64 when every
    list was a uint64 array or some id was 2**63 or more (a Python int), int64 otherwise."""

    ids: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@kernel(f"{_F}(int64[::1], float64[::1], float64[::1], int64[::1], int64)", nogil=True)
def _sum_by_id(ids, contrib, contrib_err, list_of, limit):  # pragma: no cover - compiled
    """Each id's sum of ``contrib + contrib_err`` (a term and its rounding error), rounded once."""
    n = ids.shape[0]
    # Open addressing (Fibonacci hashing, linear probing): entries get numbered in order of
    # first appearance, which is the tie order, so no sort by position is needed afterwards.
    bits = 1
    while (1 << bits) < 2 * n:
        bits += 1
    mask = (1 << bits) - 1
    # Interleaved (key, entry) slots: a probe reads one cache line, not two dependent ones.
    table = np.full(2 << bits, -1, dtype=np.int64)
    out_ids = np.empty(n, dtype=np.int64)
    out_scores = np.zeros(n, dtype=np.float64)
    out_err = np.zeros(n, dtype=np.float64)
    last_list = np.empty(n, dtype=np.int64)
    m = 0
    shift = np.uint64(64 - bits)
    for p in range(n):
        key = ids[p]
        slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> shift)
        while True:
            e = table[2 * slot + 1]
            if e == -1:
                table[2 * slot] = key
                table[2 * slot + 1] = m
                out_ids[m] = key
                out_scores[m] = contrib[p]
                out_err[m] = contrib_err[p]
                last_list[m] = list_of[p]
                m += 1
                break
            if table[2 * slot] == key:
                if last_list[e] != list_of[p]:  # a repeat inside one list counts once
                    # Knuth's two-sum: the addition's rounding error, kept with the terms' own.
                    a = out_scores[e]
                    b = contrib[p]
                    total = a + b
                    # A sum past float64's range is inf, whose error would be inf - inf, a NaN
                    # that ranked the id last: an infinite sum keeps none.
                    if np.isfinite(total):
                        b_part = total - a
                        out_err[e] += (a - (total - b_part)) + (b - b_part) + contrib_err[p]
                    out_scores[e] = total
                    last_list[e] = list_of[p]
                break
            slot = (slot + 1) & mask
    for e in range(m):
        out_scores[e] += out_err[e]
    if 0 <= limit < m // 4:
        # Only the best `limit` are wanted: a heap over the m scores beats sorting all of them.
        ranked = _top_k_kernel(out_scores[:m].copy(), limit)
    else:
        ranked = argsort_desc_f64(out_scores[:m].copy())[: m if limit < 0 else limit]
    return out_ids[:m][ranked], out_scores[:m][ranked]


@kernel(f"{_F}(int64[::1], int64[::1], float64[::1], float64, int64)", nogil=True)
def _rrf_kernel(ids, offsets, weights, k, limit):  # pragma: no cover - compiled
    n = ids.shape[0]
    contrib = np.empty(n, dtype=np.float64)
    contrib_err = np.empty(n, dtype=np.float64)
    list_of = np.empty(n, dtype=np.int64)
    for lst in range(offsets.shape[0] - 1):
        w = weights[lst]
        for j in range(offsets[lst], offsets[lst + 1]):
            rank = np.float64(j - offsets[lst] + 1)
            d = k + rank
            d_part = d - k
            d_err = (k - (d - d_part)) + (rank - d_part)  # k + rank = d + d_err exactly
            q = w / d
            p, p_err = _exact_product(q, d)
            # w / (d + d_err) = q + (w - q * d - q * d_err) / d, to float64's precision squared.
            contrib[j] = q
            contrib_err[j] = ((w - p) - p_err - q * d_err) / d
            list_of[j] = lst
    return _sum_by_id(ids, contrib, contrib_err, list_of, limit)


@kernel(f"{_F}(int64[::1], float64[::1], int64[::1], float64[::1], int64, int64)", nogil=True)
def _score_fusion_kernel(ids, scores, offsets, weights, method, limit):  # pragma: no cover - compiled
    n = ids.shape[0]
    contrib = np.empty(n, dtype=np.float64)
    contrib_err = np.empty(n, dtype=np.float64)
    list_of = np.empty(n, dtype=np.int64)
    for lst in range(offsets.shape[0] - 1):
        a, b = offsets[lst], offsets[lst + 1]
        size = b - a
        if size == 0:
            continue
        if method == 0:  # min-max
            lo = scores[a]
            hi = scores[a]
            for j in range(a, b):
                lo = min(lo, scores[j])
                hi = max(hi, scores[j])
        else:  # DBSF
            constant = True
            for j in range(a + 1, b):
                if scores[j] != scores[a]:
                    constant = False
                    break
            # Equal scores have no spread, but their float mean can miss them by an ulp, and the
            # resulting ~1e-17 deviation would map them to 0.5 +- 0.17, not the degenerate 0.5.
            if constant:
                lo = hi = scores[a]
            else:
                mean = 0.0
                for j in range(a, b):
                    mean += scores[j]
                mean /= size
                var = 0.0
                for j in range(a, b):
                    var += (scores[j] - mean) * (scores[j] - mean)
                std = np.sqrt(var / (size - 1))
                lo = mean - 3.0 * std
                hi = mean + 3.0 * std
        if not np.isfinite(hi - lo):
            # Finite scores whose spread overflows would be normalized to NaN and ranked.
            raise ValueError("scores span too wide a range to normalize")
        for j in range(a, b):
            norm = 0.5 if hi == lo else (scores[j] - lo) / (hi - lo)
            contrib[j], contrib_err[j] = _exact_product(weights[lst], norm)
            list_of[j] = lst
    return _sum_by_id(ids, contrib, contrib_err, list_of, limit)


def _flatten(lists: Sequence[np.ndarray | Sequence[int]]) -> tuple[np.ndarray, np.ndarray, bool]:
    """The lists as one int64 id array with its offsets, and whether the ids are uint64 ones."""
    if len(lists) == 0:  # not `not lists`: a 2-D array of lists has no truth value
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64), False
    arrays = [as_integers(x, f"lists[{i}]") for i, x in enumerate(lists)]
    # uint64 ids (Qdrant point ids, content_hashes) go through the kernel as their int64 bits, which
    # for an id from 2**63 up are a negative id's: the two would fuse as one.
    high = any(a.dtype == np.uint64 and a.size and int(a.max()) >= 2**63 for a in arrays)
    if high and any(a.dtype == np.int64 and a.size and int(a.min()) < 0 for a in arrays):
        raise ValueError("lists mix ids from 2**63 up with negative ids (the same 64 bits)")
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([a.shape[0] for a in arrays], out=offsets[1:])
    # Read back as int64, every id from 2**63 up would come out negative, an id nobody gave.
    unsigned = high or all(a.dtype == np.uint64 for a in arrays)
    return np.concatenate([a.view(np.int64) for a in arrays]), offsets, unsigned


def _weights(weights: Sequence[float] | None, n: int) -> np.ndarray:
    if weights is None:
        return np.ones(n, dtype=np.float64)
    w = as_reals(weights, np.float64, "weights")
    if w.shape != (n,):
        raise ValueError(f"weights must have one entry per list ({n}), got {w.shape[0] if w.ndim else 'a scalar'}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be finite and non-negative")
    return w


def _limit(limit: int | None) -> int:
    if limit is None:
        return -1
    n = as_count(limit, "limit")
    if n < 0:
        raise ValueError("limit must be >= 0")
    return n


def rrf(
    lists: Sequence[np.ndarray | Sequence[int]], k: float = 60.0, weights: Sequence[float] | None = None, limit: int | None = None
) -> Fused:
    """Reciprocal Rank Fusion of ranked id lists (best first); ``limit`` keeps only the best ones."""
    k = as_real(k, "k")
    if not (np.isfinite(k) and k >= 0):
        raise ValueError("k must be finite and >= 0")
    ids, offsets, unsigned = _flatten(lists)
    out_ids, out_scores = _rrf_kernel(ids, offsets, _weights(weights, len(lists)), k, _limit(limit))
    return Fused(out_ids.view(np.uint64) if unsigned else out_ids, out_scores)


def score_fusion(
    lists: Sequence[np.ndarray | Sequence[int]],
    scores: Sequence[np.ndarray | Sequence[float]],
    weights: Sequence[float] | None = None,
    method: Literal["minmax", "dbsf"] = "minmax",
    limit: int | None = None,
) -> Fused:
    """Weighted sum of normalized scores (e.g. semantic 0.7 / keyword 0.3); ``limit`` keeps the best."""
    if len(lists) != len(scores):
        raise ValueError("lists and scores must have the same number of lists")
    if method not in ("minmax", "dbsf"):
        raise ValueError("method must be 'minmax' or 'dbsf'")
    ids, offsets, unsigned = _flatten(lists)
    flat = np.concatenate([as_reals(s, np.float64, f"scores[{i}]").ravel() for i, s in enumerate(scores)]) if len(scores) else np.zeros(0)
    if flat.shape != ids.shape or any(len(a) != len(b) for a, b in zip(lists, scores, strict=True)):
        raise ValueError("each list needs one score per id")
    if not np.isfinite(flat).all():
        raise ValueError("scores must be finite (NaN and inf can't be normalized)")
    out_ids, out_scores = _score_fusion_kernel(
        ids, np.ascontiguousarray(flat), offsets, _weights(weights, len(lists)), 0 if method == "minmax" else 1, _limit(limit)
    )
    return Fused(out_ids.view(np.uint64) if unsigned else out_ids, out_scores)
