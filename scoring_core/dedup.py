"""Deduplication of scored candidates.

All three return the indices of the kept candidates, best score first (ties by input position):

* :func:`dedup_by_key`: one candidate per key (a chunk id, or a content hash from
  :func:`content_hashes`), keeping the best-scored one.
* :func:`near_duplicates`: greedy in score order, a candidate is dropped when its cosine
  similarity to an already kept one reaches the threshold (default 0.85).
"""

from __future__ import annotations

import functools
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


@functools.cache
def _space_table() -> np.ndarray:
    """Whether each code point below U+3001 is one ``str.split()`` splits at (none above is); made
    at the first call, not at import (0.7 ms, which every CLI command would pay)."""
    return np.array([chr(c).isspace() for c in range(0x3001)], dtype=np.bool_)


@kernel("uint8[::1](uint8[::1], int64[::1], int64[::1], boolean[::1])", nogil=True)
def _normalize_kernel(data, offsets, out_offsets, space):  # pragma: no cover - compiled
    # Each text's words one space apart (" ".join(t.split())), A-Z lowered, in UTF-8 as they came:
    # casefolded but for ASCII texts, whose casefolding is that lowering. White space past ASCII
    # is told by its code point, read from the lead byte and the next one or two.
    out = np.empty(data.shape[0], dtype=np.uint8)
    m = 0
    out_offsets[0] = 0
    for t in range(offsets.shape[0] - 1):
        start = m
        gap = False
        i, end = offsets[t], offsets[t + 1]
        while i < end:
            b = data[i]
            if b < 0x80:
                width, c = 1, np.int64(b)
            elif b < 0xE0:
                width, c = 2, (np.int64(b & 0x1F) << 6) | (data[i + 1] & 0x3F)
            elif b < 0xF0:
                width, c = 3, (np.int64(b & 0x0F) << 12) | (np.int64(data[i + 1] & 0x3F) << 6) | (data[i + 2] & 0x3F)
            else:
                width, c = 4, np.int64(0x10000)
            if c < space.shape[0] and space[c]:
                gap = m > start
                i += width
                continue
            if gap:
                out[m] = 32
                m += 1
                gap = False
            if width == 1:
                out[m] = b + 32 if 65 <= b <= 90 else b
                m += 1
            else:
                for j in range(width):
                    out[m + j] = data[i + j]
                m += width
            i += width
        out_offsets[t + 1] = m
    return out[:m]


def content_hashes(texts: Sequence[str]) -> np.ndarray:
    """64-bit content keys, equal for texts that differ only in case and whitespace: the first 8
    bytes (little-endian) of the BLAKE2b digest of the text's words, casefolded, one space apart.

    A cryptographic digest, so that a writer cannot make a text collide with another's and have
    it dropped as its copy. The words are joined by a kernel in one pass over the UTF-8 bytes:
    ``str.split`` made an object of every word, 40 % of ``enrich`` at top_k 100 on SciFact. A lone
    surrogate raises UnicodeEncodeError, as encoding it does."""
    encoded = [t.encode() if t.isascii() else t.casefold().encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    # A bytearray: numba compiles a read-only array (one over bytes) as another type.
    data = np.frombuffer(bytearray().join(encoded), dtype=np.uint8)
    bounds = np.empty_like(offsets)
    normalized = memoryview(_normalize_kernel(data, offsets, bounds, _space_table()))
    ends = bounds.tolist()
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(normalized[ends[i] : ends[i + 1]], digest_size=8).digest(), "little") for i in range(len(encoded))),
        dtype=np.uint64, count=len(encoded),
    )


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
