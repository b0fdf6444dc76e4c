"""Input checks shared by the kernels' public wrappers and their twins in :mod:`scoring_core.reference`
(the kernels themselves trust their input)."""

from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence

import numpy as np


#: The largest count a kernel takes: its counts are int64.
MAX_COUNT = 2**63 - 1


def as_reals(values: np.ndarray | Sequence[float], dtype: type[np.floating], name: str) -> np.ndarray:
    """Return ``values`` as a contiguous ``dtype`` array; anything but real numbers (bool counts
    as 0 and 1) raises TypeError, as in the twins: numpy reads the string "0.1" as 0.1."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf" and (arr.dtype != object or not all(isinstance(v, numbers.Real) for v in arr.ravel().tolist())):
        raise TypeError(f"{name} must be real numbers, got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=dtype)


def as_real(value: float, name: str) -> float:
    """``value`` as a float; anything but a real number (bool counts as 0 and 1) raises TypeError
    naming ``name``, as the twins' arithmetic does, rather than numpy's "ufunc 'isfinite' not supported"."""
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(value)


def as_scores(scores: np.ndarray, name: str = "scores") -> np.ndarray:
    """Return ``scores`` as a contiguous float32 vector; NaN is rejected, never silently ranked.

    The kernels rank float32 (a model's scores are): float64 input is rounded to nearest, so
    values closer than float32 can tell apart tie (and keep their input order), and values
    beyond its range become ±inf. Their reference twins rank the same rounding.
    """
    arr = as_reals(scores, np.float32, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    return arr


def as_integers(values: np.ndarray | Sequence[int], name: str) -> np.ndarray:
    """Return ``values`` (ids, keys, codes) as a contiguous int64 vector, or uint64 when they are
    uint64 or Python ints beyond int64 that fit uint64 (Qdrant point ids, content hashes).

    Anything but integers (bool counts as 0 and 1, as in Python) is refused: a float id column
    cast to int64 truncates 1.2 and 1.7 into the same id and NaN into INT64_MIN, so distinct items
    would merge.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind not in "biu" and arr.size:
        # numpy infers float64 (or object) for Python ints beyond int64: integers still, each placed
        # exactly by the dtype chosen from their range, never through a float.
        items = arr.tolist() if arr.dtype == object else [] if isinstance(values, np.ndarray) else list(values)
        if not items or not all(isinstance(v, numbers.Integral) for v in items):
            raise ValueError(f"{name} must be integers, got {arr.dtype}")
        lo, hi = min(items), max(items)
        if -(2**63) <= lo and hi < 2**63:
            arr = np.array(items, dtype=np.int64)
        elif lo >= 0 and hi < 2**64:
            arr = np.array(items, dtype=np.uint64)
        else:
            raise ValueError(f"{name} must fit in int64, or in uint64 when none is negative")
    return np.ascontiguousarray(arr, dtype=np.uint64 if arr.dtype == np.uint64 else np.int64)


def as_count(value: int, name: str) -> int:
    """``value`` as an int; a float such as 2.7 raises TypeError rather than being truncated, one
    above :data:`MAX_COUNT` ValueError rather than numba's OverflowError, which names nothing."""
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if n > MAX_COUNT:
        raise ValueError(f"{name} must be at most 2**63 - 1, got {n}")
    return n


def as_codes(codes: np.ndarray, upper: int, name: str) -> np.ndarray:
    """Return ``codes`` as a contiguous int64 vector with every value in [0, upper)."""
    arr = as_integers(codes, name)
    if arr.size and (arr.min() < 0 or arr.max() >= upper):
        raise ValueError(f"{name} must lie in [0, {upper})")
    return arr.astype(np.int64, copy=False)
