"""Plain-Python twins of the numba kernels: the tests' oracle, and the benchmarks' baseline.

Each function computes the same result as its kernel, written for clarity rather than speed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def group_by_parent(
    parent_codes: Sequence[int], scores: Sequence[float]
) -> list[tuple[int, float, list[int]]]:
    """Return ``[(parent, best_score, [child indices best first]), ...]`` best parent first."""
    if any(math.isnan(s) for s in scores):
        raise ValueError("scores contains NaN")
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parent_codes):
        children.setdefault(p, []).append(i)
    groups = []
    for p, kids in children.items():
        kids.sort(key=lambda i: (-scores[i], i))
        groups.append((p, float(scores[kids[0]]), kids))
    # Ties between parents go to the one whose best child came first in the input.
    groups.sort(key=lambda g: (-g[1], g[2][0]))
    return groups
