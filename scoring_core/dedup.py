"""Deduplication of scored candidates.

All three return the indices of the kept candidates, best score first (ties by input position):

* :func:`dedup_by_key`: one candidate per key (a chunk id, or a content hash from
  :func:`content_hashes`), keeping the best-scored one.
* :func:`near_duplicates`: greedy in score order, a candidate is dropped when its cosine
  similarity to an already kept one reaches the threshold (default 0.85).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from scoring_core._jit import kernel
from scoring_core._sort import argsort_desc_f32
from scoring_core._validate import as_integers, as_real, as_scores


@kernel("int64[:](int64[::1], float32[::1])", nogil=True)
def _dedup_kernel(keys, scores):  # pragma: no cover - compiled
    n = keys.shape[0]
    by_score = argsort_desc_f32(scores)
    # Walking in score order, the first time a key is seen is its best candidate.
    bits = 1
    while (1 << bits) < 2 * n:
        bits += 1
    mask = (1 << bits) - 1
    table = np.full(1 << bits, -1, dtype=np.int64)
    kept = np.empty(n, dtype=np.int64)
    m = 0
    shift = np.uint64(64 - bits)
    for r in range(n):
        c = by_score[r]
        key = keys[c]
        slot = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> shift)
        while True:
            e = table[slot]
            if e == -1:
                table[slot] = c
                kept[m] = c
                m += 1
                break
            if keys[e] == key:
                break
            slot = (slot + 1) & mask
    return kept[:m]


@kernel("int64[:](float32[:, ::1], float32[::1], float64)", nogil=True)
def _near_dup_kernel(emb, scores, threshold):  # pragma: no cover - compiled
    n, d = emb.shape
    order = argsort_desc_f32(scores)
    norms = np.empty(n, dtype=np.float64)
    for i in range(n):
        acc = 0.0
        for j in range(d):
            acc += np.float64(emb[i, j]) * np.float64(emb[i, j])
        norms[i] = np.sqrt(acc)
    kept = np.empty(n, dtype=np.int64)
    m = 0
    for r in range(n):
        c = order[r]
        duplicate = False
        for t in range(m):
            k = kept[t]
            dot = 0.0
            for j in range(d):
                dot += np.float64(emb[c, j]) * np.float64(emb[k, j])
            denom = norms[c] * norms[k]
            if denom > 0.0 and dot / denom >= threshold:
                duplicate = True
                break
        if not duplicate:
            kept[m] = c
            m += 1
    return kept[:m]


def dedup_by_key(keys: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Indices of the best candidate per key, best first. NaN scores raise ``ValueError``."""
    s = as_scores(scores)
    k = as_integers(keys, "keys").view(np.int64)  # uint64 keys as their bits: the kernel only compares them
    if k.shape != s.shape:
        raise ValueError(f"keys and scores differ in shape: {k.shape} != {s.shape}")
    return _dedup_kernel(k, s)


def content_hashes(texts: Sequence[str]) -> np.ndarray:
    """64-bit content keys, equal for texts that differ only in case and whitespace."""
    out = np.empty(len(texts), dtype=np.uint64)
    for i, t in enumerate(texts):
        normalized = " ".join(t.split()).casefold().encode()
        out[i] = int.from_bytes(hashlib.blake2b(normalized, digest_size=8).digest(), "little")
    return out


def near_duplicates(embeddings: np.ndarray, scores: np.ndarray, threshold: float = 0.85) -> np.ndarray:
    """Indices kept after greedy near-duplicate removal, best first."""
    s = as_scores(scores)
    e = np.ascontiguousarray(embeddings, dtype=np.float32)
    if e.ndim != 2 or e.shape[0] != s.shape[0]:
        raise ValueError(f"embeddings must be [n, d] with n = len(scores) = {s.shape[0]}, got {e.shape}")
    if not np.isfinite(e).all():
        raise ValueError("embeddings must be finite")
    threshold = as_real(threshold, "threshold")
    if not -1.0 <= threshold <= 1.0:
        raise ValueError("threshold must lie in [-1, 1]")
    return _near_dup_kernel(e, s, threshold)
