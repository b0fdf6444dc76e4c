"""Input checks shared by the kernels' public wrappers (the kernels themselves trust their input)."""

from __future__ import annotations

import numpy as np


def as_scores(scores: np.ndarray, name: str = "scores") -> np.ndarray:
    """Return ``scores`` as a contiguous float32 vector; NaN is rejected, never silently ranked.

    The kernels rank float32 (a model's scores are): float64 input is rounded to nearest, so
    values closer than float32 can tell apart tie (and keep their input order), and values
    beyond its range become ±inf. Their reference twins rank the same rounding.
    """
    arr = np.ascontiguousarray(scores, dtype=np.float32)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    return arr


def as_codes(codes: np.ndarray, upper: int, name: str) -> np.ndarray:
    """Return ``codes`` as a contiguous int64 vector with every value in [0, upper)."""
    arr = np.ascontiguousarray(codes, dtype=np.int64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= upper):
        raise ValueError(f"{name} must lie in [0, {upper})")
    return arr
