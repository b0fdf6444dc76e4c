"""Stable descending argsorts of float scores by LSD radix sort (numba).

Comparison sorts cost O(n log n) with a large constant in numba; the kernels only ever sort float
scores, whose IEEE bit patterns can be made order-preserving unsigned integers. An LSD radix sort
over bytes is stable, so equal scores keep their input order: the kernels' tie rule for free.
Passes whose byte is the same for every key are skipped.
"""

from __future__ import annotations

import numpy as np

from scoring_core._jit import kernel


@kernel("uint32[::1](float32[::1])", nogil=True)
def desc_keys_f32(x):  # pragma: no cover - compiled
    bits = (x + np.float32(0.0)).view(np.uint32)
    out = np.empty(x.shape[0], dtype=np.uint32)
    sign = np.uint32(1) << np.uint32(31)
    for i in range(x.shape[0]):
        b = bits[i]
        ascending = ~b if b & sign else b | sign
        out[i] = ~ascending
    return out


@kernel("int64[::1](uint32[::1])", nogil=True)
def radix_argsort32(keys):  # pragma: no cover - compiled
    """Stable ascending argsort of 32-bit keys; (key, index) pairs move together so every pass
    reads sequentially."""
    n = keys.shape[0]
    idx_a = np.arange(n)
    if n < 2:
        return idx_a
    counts = np.zeros((4, 256), dtype=np.int64)
    for i in range(n):
        k = keys[i]
        counts[0, k & 255] += 1
        counts[1, (k >> 8) & 255] += 1
        counts[2, (k >> 16) & 255] += 1
        counts[3, k >> 24] += 1
    keys_a = keys.copy()
    keys_b = np.empty(n, dtype=np.uint32)
    idx_b = np.empty(n, dtype=np.int64)
    pos = np.empty(256, dtype=np.int64)
    for b in range(4):
        if counts[b].max() == n:  # every key has the same byte here
            continue
        total = 0
        for d in range(256):
            pos[d] = total
            total += counts[b, d]
        shift = 8 * b
        for i in range(n):
            k = keys_a[i]
            d = (k >> shift) & 255
            p = pos[d]
            keys_b[p] = k
            idx_b[p] = idx_a[i]
            pos[d] = p + 1
        keys_a, keys_b = keys_b, keys_a
        idx_a, idx_b = idx_b, idx_a
    return idx_a


@kernel("int64[::1](float32[::1])", nogil=True)
def argsort_desc_f32(x):  # pragma: no cover - compiled
    return radix_argsort32(desc_keys_f32(x))


#: a run of equal float32 keys longer than this is settled by a merge sort, not by insertion
#: (quadratic: 40,000 equal keys took a second)
INSERTION_RUN = 32


@kernel("int64[::1](float64[::1])", nogil=True)
def argsort_desc_f64(x):  # pragma: no cover - compiled
    # Sort on the float32 rounding (4 byte passes, not 8): rounding is monotone, so the order is
    # only undecided inside runs of equal float32 keys, which a stable sort on the exact values
    # settles: by insertion for a short run, by a merge sort for a long one.
    keys = desc_keys_f32(x.astype(np.float32))
    order = radix_argsort32(keys)
    n = x.shape[0]
    i = 0
    while i < n:
        j = i + 1
        while j < n and keys[order[j]] == keys[order[i]]:
            j += 1
        if j - i > INSERTION_RUN:
            run = order[i:j].copy()
            negated = np.empty(j - i, np.float64)
            for a in range(j - i):
                negated[a] = -(x[run[a]] + 0.0)
            settled = np.argsort(negated, kind="mergesort")
            for a in range(j - i):
                order[i + a] = run[settled[a]]
            i = j
            continue
        for a in range(i + 1, j):
            item = order[a]
            v = x[item] + 0.0
            b = a - 1
            while b >= i and x[order[b]] + 0.0 < v:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = item
        i = j
    return order
