"""Cosine matching of a query against cached query embeddings (the semantic cache's hot path).

:class:`CosineMatcher` keeps unit-length vectors in a row-major float32 matrix that grows by
doubling; removal, expiry and eviction only clear a row's ``live`` flag and put the row on a free
list, so the matrix is never rebuilt. Each row has an expiry time and a scope: 0 is public, any
other integer one user. A caller sees rows of its own scope, and public rows unless it opts out.

The scan is one pass over the rows: flags first (cheap), then a dot product, so the cost is a
streaming read of the live part of the matrix.
"""

from __future__ import annotations

import math
import operator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from scoring_core._jit import kernel
from scoring_core._validate import as_real

PUBLIC = 0


# fastmath without its no-inf and no-NaN flags: a row that never expires holds expires_at = inf,
# which fastmath=True lets LLVM assume away; reassociation is what vectorizes the dot product.
@kernel("Tuple((int64, float32))(float32[:, ::1], float32[::1], uint8[::1], float64[::1], int64[::1], int64, int64, float64, int64, boolean)", nogil=True,
        fastmath={"reassoc", "contract", "arcp"})
def _best_in_rows(matrix, query, live, expires_at, scope, start, end, now, caller, include_public):  # pragma: no cover - compiled
    """Best visible row in [start, end): (row, score), or (-1, -inf). The first row wins ties."""
    d = query.shape[0]
    best = -1
    best_score = np.float32(-np.inf)
    for i in range(start, end):
        if live[i] == 0 or expires_at[i] <= now:
            continue
        sc = scope[i]
        if sc != caller and (sc != 0 or not include_public):
            continue
        acc = np.float32(0.0)
        for j in range(d):
            acc += matrix[i, j] * query[j]
        if acc > best_score:
            best_score = acc
            best = i
    return best, best_score


def self_match_rounding(dim: int) -> float:
    """How far below 1 the float32 score of a ``dim``-vector against itself may fall: ``dim``
    products summed (the recursive-sum bound, ``dim`` units of 2**-24) after the norms, whose own
    float32 sums and divisions may take as many units again."""
    return (2 * dim + 4) * 2.0**-24


def matchable(vector: np.ndarray, dim: int) -> tuple[np.ndarray, float]:
    """``vector`` as float32 and its norm; ValueError when no lookup could match it (another
    size, zero, not finite)."""
    v = np.asarray(vector, dtype=np.float32).reshape(-1)
    if v.shape[0] != dim:
        raise ValueError(f"vector has {v.shape[0]} dims, expected {dim}")
    norm = float(np.linalg.norm(v))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError("vector must be finite and non-zero")
    return v, norm


def _as_scope(value: int, name: str) -> int:
    """``value`` as a scope; anything but an int64 integer raises naming ``name``: a float scope
    was truncated into another user's (1.5 into 1), a string parsed by numpy."""
    try:
        scope = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if not -(2**63) <= scope < 2**63:
        raise ValueError(f"{name} must fit in int64, got {scope}")
    return scope


def _check_now(now: float) -> None:
    if math.isnan(now):  # no row would count as expired at it: every expired row would be served
        raise ValueError("now must not be NaN")


class CosineMatcher:
    """A growable store of cached query vectors with per-row expiry and scope.

    Not thread-safe: callers serialise every call (the service's caches hold an ``asyncio.Lock``
    around them). :meth:`match` reads the arrays and the row count at separate moments, and an
    :meth:`add` in between may replace the arrays with larger ones; the kernel, trusting its input,
    checks no bounds.

    Parameters
    ----------
    dim : int
        Vector dimension.
    threshold : float
        Minimum cosine similarity for a match, in [0, 1] (default 0.95), compared as given: a
        float32 score of 0.94999998 does not reach 0.95. The float32 score of a vector against
        itself may miss 1 by the sum's and the normalizations' rounding, at most
        ``(2 * dim + 4) * 2**-24`` (4.6e-5 at 384 dims): a threshold above ``1`` minus that is
        taken as that, so that a vector stored always matches itself, at a threshold of 1 too.
    initial_capacity, max_entries : int
        Rows allocated up front; the most rows ever held (the oldest live row is evicted beyond).
    threads : int
        Threads that scan disjoint row ranges of a large matrix at once (the kernel releases the
        GIL). Memory bandwidth, not arithmetic, bounds the scan, and one core rarely saturates it.
    """

    #: Below this many rows one thread is faster than handing work to others.
    PARALLEL_MIN_ROWS = 20_000

    def __init__(
        self, dim: int, threshold: float = 0.95, initial_capacity: int = 1024, max_entries: int = 1_000_000, threads: int = 1
    ) -> None:
        if dim < 1 or initial_capacity < 1 or max_entries < 1:
            raise ValueError("dim, initial_capacity and max_entries must be positive")
        threshold = as_real(threshold, "threshold")
        if not 0.0 <= threshold <= 1.0:  # NaN too: it, or 1.5, silently matched nothing
            raise ValueError(f"threshold must lie in [0, 1], got {threshold}")
        self.dim = dim
        self.threshold = threshold
        self._least = min(self.threshold, 1.0 - self_match_rounding(dim))
        self.max_entries = max_entries
        cap = min(initial_capacity, max_entries)
        self._matrix = np.zeros((cap, dim), dtype=np.float32)
        self._live = np.zeros(cap, dtype=np.uint8)
        self._expires = np.zeros(cap, dtype=np.float64)
        self._scope = np.zeros(cap, dtype=np.int64)
        self._added = np.zeros(cap, dtype=np.int64)
        self._rows = 0  # high-water mark: rows below it have been used
        self._free: list[int] = []
        self._clock = 0
        self._threads = max(1, threads)
        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="cache-match") if self._threads > 1 else None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def __len__(self) -> int:
        return int(self._live[: self._rows].sum())

    @property
    def capacity(self) -> int:
        return int(self._matrix.shape[0])

    def _grow(self) -> None:
        cap = min(self.capacity * 2, self.max_entries)
        for name in ("_matrix", "_live", "_expires", "_scope", "_added"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def _slot(self) -> int:
        if self._free:
            return self._free.pop()
        if self._rows == self.capacity and self.capacity < self.max_entries:
            self._grow()
        if self._rows < self.capacity:
            self._rows += 1
            return self._rows - 1
        # Full: evict the oldest live row.
        live = np.flatnonzero(self._live[: self._rows])
        victim = int(live[np.argmin(self._added[live])])
        self._live[victim] = 0
        return victim

    def add(self, vector: np.ndarray, expires_at: float, scope: int = PUBLIC) -> int:
        """Store a vector (normalized here) until ``expires_at`` (inf: never); return its row."""
        if math.isnan(expires_at):  # it compares false with every time: never expired, never freed
            raise ValueError("expires_at must not be NaN (inf never expires)")
        v, norm = matchable(vector, self.dim)
        scope = _as_scope(scope, "scope")  # before a row is taken: a full matcher evicts one for it
        row = self._slot()
        self._matrix[row] = v / norm
        self._expires[row] = expires_at
        self._scope[row] = scope
        self._clock += 1
        self._added[row] = self._clock
        self._live[row] = 1
        return row

    def remove(self, row: int) -> None:
        if 0 <= row < self._rows and self._live[row]:
            self._live[row] = 0
            self._free.append(row)

    def shrink(self) -> dict[int, int]:
        """When at most a quarter of the allocated rows are live, the live rows moved to the front
        of arrays of twice their number, in their order (ties and eviction order kept): a matcher
        that once held many rows must not keep their memory for its last few. Returns where each
        moved row went ({} when nothing was done); rows that were free are gone."""
        live = np.flatnonzero(self._live[: self._rows])
        if 4 * len(live) > self.capacity or self.capacity == 1:
            return {}
        cap = max(1, 2 * len(live))
        for name in ("_matrix", "_live", "_expires", "_scope", "_added"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), dtype=old.dtype)
            new[: len(live)] = old[live]
            setattr(self, name, new)
        self._rows, self._free = len(live), []
        return {int(old): new for new, old in enumerate(live) if int(old) != new}

    def expire(self, now: float) -> int:
        """Free every row expired at ``now``; return how many."""
        _check_now(now)
        dead = np.flatnonzero((self._live[: self._rows] == 1) & (self._expires[: self._rows] <= now))
        self._live[dead] = 0
        self._free.extend(int(r) for r in dead)
        return int(dead.shape[0])

    def match(self, query: np.ndarray, now: float, caller_scope: int = PUBLIC, include_public: bool = True) -> tuple[int, float]:
        """Best live row with cosine >= threshold in ``caller_scope`` (and the public scope unless
        ``include_public`` is False): ``(row, score)`` or ``(-1, nan)``."""
        _check_now(now)
        caller = _as_scope(caller_scope, "caller_scope")
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query has {q.shape[0]} dims, expected {self.dim}")
        norm = float(np.linalg.norm(q))
        if not np.isfinite(norm) or norm == 0.0:
            return -1, float("nan")
        args = (self._matrix, np.ascontiguousarray(q / norm), self._live, self._expires, self._scope)
        n = self._rows
        if self._pool is None or n < self.PARALLEL_MIN_ROWS:
            row, score = _best_in_rows(*args, 0, n, float(now), caller, include_public)
        else:
            bounds = np.linspace(0, n, self._threads + 1).astype(np.int64)
            parts = list(self._pool.map(
                lambda ab: _best_in_rows(*args, int(ab[0]), int(ab[1]), float(now), caller, include_public),
                zip(bounds[:-1], bounds[1:], strict=True),
            ))
            # Ranges are in row order and each keeps its first maximum: the first strict maximum wins.
            row, score = max(parts, key=lambda rs: rs[1]) if parts else (-1, -np.inf)
        # As Python floats: against a float32 score numpy would round the threshold to float32 first.
        if row >= 0 and float(score) >= self._least:
            return int(row), float(score)
        return -1, float("nan")

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views of the used rows: (matrix, live, expires_at, scope), for the reference twin and benchmarks."""
        n = self._rows
        return self._matrix[:n], self._live[:n], self._expires[:n], self._scope[:n]
