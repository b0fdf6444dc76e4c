"""Small-to-big grouping: child hits gathered under their parent chunks.

Parents are ordered by their best child's score; each parent's children by score. Ties are
broken by input position, so the output is deterministic. The result is CSR-shaped
(``offsets`` into ``children``) so it crosses the numba boundary as flat arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scoring_core._jit import kernel
from scoring_core._sort import argsort_desc_f32
from scoring_core._validate import as_codes, as_count, as_scores


@dataclass(frozen=True, slots=True)
class GroupedHits:
    """Children grouped by parent.

    Attributes
    ----------
    parents : int64[m]
        Parent codes, best parent first.
    parent_scores : float32[m]
        Each parent's best child score.
    offsets : int64[m + 1]
        ``children[offsets[i]:offsets[i + 1]]`` are the children of ``parents[i]``.
    children : int64[n]
        Indices into the input arrays, best child first within each parent.
    """

    parents: np.ndarray
    parent_scores: np.ndarray
    offsets: np.ndarray
    children: np.ndarray

    def __len__(self) -> int:
        return int(self.parents.shape[0])


@kernel("Tuple((int64[:], float32[:], int64[:], int64[:]))(int64[::1], float32[::1], int64)", nogil=True)
def _group_kernel(parent_codes, scores, n_codes):  # pragma: no cover - compiled
    # Codes lie in [0, n_codes), and n_codes is at most the rows' count (see group_by_parent).
    n = scores.shape[0]
    order = argsort_desc_f32(scores)  # stable: ties by input position
    rank_of = np.full(n_codes, -1, dtype=np.int64)
    counts = np.zeros(n_codes, dtype=np.int64)
    parents = np.empty(n_codes, dtype=np.int64)
    parent_scores = np.empty(n_codes, dtype=np.float32)
    m = 0
    for i in range(n):
        c = order[i]
        p = parent_codes[c]
        if rank_of[p] < 0:
            rank_of[p] = m
            parents[m] = p
            parent_scores[m] = scores[c]
            m += 1
        counts[rank_of[p]] += 1
    offsets = np.zeros(m + 1, dtype=np.int64)
    for r in range(m):
        offsets[r + 1] = offsets[r] + counts[r]
    cursor = offsets[:m].copy()
    children = np.empty(n, dtype=np.int64)
    for i in range(n):
        c = order[i]
        r = rank_of[parent_codes[c]]
        children[cursor[r]] = c
        cursor[r] += 1
    return parents[:m], parent_scores[:m], offsets, children


def group_by_parent(parent_codes: np.ndarray, scores: np.ndarray, n_parents: int) -> GroupedHits:
    """Group child hits under parents.

    Parameters
    ----------
    parent_codes : int array [n]
        Parent of each child, as a code in ``[0, n_parents)``.
    scores : float array [n]
        Child scores; higher is better. NaN raises ``ValueError``; ±inf rank as extremes.
    n_parents : int
        Number of distinct parent codes the caller may use.
    """
    # One integer for the check and the kernel: a float 2.5 would admit code 2 to 2 slots.
    n = max(as_count(n_parents, "n_parents"), 0)
    s = as_scores(scores)
    codes = as_codes(parent_codes, n, "parent_codes")
    if codes.shape[0] != s.shape[0]:
        raise ValueError(f"parent_codes and scores differ in length: {codes.shape[0]} != {s.shape[0]}")
    # The kernel keeps a slot per code: codes past the rows' count (n_parents may be 2**40) are
    # numbered densely first, so its memory follows the rows. The order does not depend on the codes.
    span = int(codes.max()) + 1 if codes.size else 0
    if span <= codes.shape[0]:
        parents, parent_scores, offsets, children = _group_kernel(codes, s, np.int64(span))
    else:
        present, dense = np.unique(codes, return_inverse=True)
        parents, parent_scores, offsets, children = _group_kernel(np.ascontiguousarray(dense, dtype=np.int64), s, np.int64(present.shape[0]))
        parents = present[parents]
    return GroupedHits(parents, parent_scores, offsets, children)
