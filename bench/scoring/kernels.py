"""Kernel benchmarks: numba vs numpy-vectorized vs the plain-Python reference, in one run.

Every case also checks that the three agree on its input, so the ratios compare equal work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba as nb
import numpy as np

import scoring_core as sc
from bench.scoring import numpy_impls as npi
from bench.scoring.timing import measure
from scoring_core import reference as ref


@dataclass
class KernelRow:
    kernel: str
    size: str
    numba_ms: float
    numpy_ms: float
    python_ms: float | None

    @property
    def vs_python(self) -> float | None:
        return None if self.python_ms is None else self.python_ms / self.numba_ms

    @property
    def vs_numpy(self) -> float:
        return self.numpy_ms / self.numba_ms


def _case(name: str, size: str, numba_fn: Callable[[], object], numpy_fn: Callable[[], object],
          python_fn: Callable[[], object] | None, same: Callable[[object, object, object | None], bool]) -> KernelRow:
    a, b = numba_fn(), numpy_fn()
    c = python_fn() if python_fn else None
    if not same(a, b, c):
        raise AssertionError(f"{name} {size}: numba, numpy and reference disagree")
    py_ms = measure(python_fn, min_time=0.5, max_reps=5, min_reps=1) * 1e3 if python_fn else None
    return KernelRow(name, size, measure(numba_fn) * 1e3, measure(numpy_fn) * 1e3, py_ms)


def _ids_equal(a: object, b: object, c: object | None) -> bool:
    ids_a = a.ids.tolist() if hasattr(a, "ids") else list(map(int, a))  # type: ignore[attr-defined,call-overload]
    ids_b = list(map(int, b[0] if isinstance(b, tuple) else b))  # type: ignore[call-overload]
    ids_c = None if c is None else [int(x[0]) if isinstance(x, tuple) else int(x) for x in c]  # type: ignore[attr-defined]
    return ids_a == ids_b and (ids_c is None or ids_a == ids_c)


def kernel_cases() -> Iterator[KernelRow]:
    rng = np.random.default_rng(42)
    for per_list in (1_000, 10_000):
        lists = [rng.permutation(per_list * 2)[:per_list].astype(np.int64) for _ in range(4)]
        py_lists = [l.tolist() for l in lists]
        yield _case("rrf", f"4x{per_list:,}", lambda: sc.rrf(lists), lambda: npi.rrf(lists), lambda: ref.rrf(py_lists), _ids_equal)  # noqa: B023
        # What the service asks for: the best 50 to rerank (the baselines rank all, then cut).
        yield _case("rrf[top 50]", f"4x{per_list:,}", lambda: sc.rrf(lists, limit=50),  # noqa: B023
                    lambda: tuple(x[:50] for x in npi.rrf(lists)), lambda: ref.rrf(py_lists)[:50], _ids_equal)  # noqa: B023
    for per_list in (1_000, 10_000):
        lists = [rng.permutation(per_list * 2)[:per_list].astype(np.int64) for _ in range(2)]
        scores = [np.sort(rng.random(per_list))[::-1].copy() for _ in range(2)]
        py = ([l.tolist() for l in lists], [s.tolist() for s in scores])
        for method in ("minmax", "dbsf"):
            yield _case(f"score_fusion[{method}]", f"2x{per_list:,}",
                        lambda: sc.score_fusion(lists, scores, [0.7, 0.3], method),  # noqa: B023
                        lambda: npi.score_fusion(lists, scores, [0.7, 0.3], method),  # noqa: B023
                        lambda: ref.score_fusion(*py, [0.7, 0.3], method), _ids_equal)  # noqa: B023
    for n in (10_000, 100_000):
        codes = rng.integers(0, n // 5, size=n)
        s = rng.random(n).astype(np.float32)
        py_codes, py_s = codes.tolist(), s.tolist()

        def same_groups(a: object, b: object, c: object | None) -> bool:
            parents_ok = a.parents.tolist() == b[0].tolist()  # type: ignore[attr-defined,index]
            return parents_ok and a.children.tolist() == b[1].tolist() and (c is None or [g[0] for g in c] == a.parents.tolist())  # type: ignore[attr-defined,index,union-attr]

        yield _case("group_by_parent", f"{n:,} children", lambda: sc.group_by_parent(codes, s, n // 5),  # noqa: B023
                    lambda: npi.group_by_parent(codes, s), lambda: ref.group_by_parent(py_codes, py_s), same_groups)  # noqa: B023
    for n in (1_000, 10_000):
        keys = rng.integers(0, n // 3, size=n)
        s = rng.random(n).astype(np.float32)
        yield _case("dedup_by_key", f"{n:,}", lambda: sc.dedup_by_key(keys, s), lambda: npi.dedup_by_key(keys, s),  # noqa: B023
                    lambda: ref.dedup_by_key(keys.tolist(), s.tolist()), _ids_equal)  # noqa: B023
    for n in (100, 1_000):
        base = rng.normal(size=(n // 4, 384)).astype(np.float32)
        emb = (np.repeat(base, 4, axis=0) + 0.3 * rng.normal(size=(n, 384))).astype(np.float32)
        s = rng.random(n).astype(np.float32)
        py_fn = (lambda: ref.near_duplicates(emb.tolist(), s.tolist(), 0.85)) if n <= 100 else None  # noqa: B023
        yield _case("near_duplicates", f"{n:,}x384", lambda: sc.near_duplicates(emb, s, 0.85),  # noqa: B023
                    lambda: npi.near_duplicates(emb, s, 0.85), py_fn, _ids_equal)  # noqa: B023
    for n in (10_000, 100_000):
        s = rng.random(n).astype(np.float32)
        yield _case("top_k[k=10]", f"{n:,}", lambda: sc.top_k(s, 10), lambda: npi.top_k(s, 10),  # noqa: B023
                    lambda: ref.top_k(s.tolist(), 10), _ids_equal)  # noqa: B023
    for n in (1_000, 10_000):
        s = (rng.random(n) * 0.4).astype(np.float32)
        yield _case("threshold_with_fallback", f"{n:,}", lambda: sc.threshold_with_fallback(s, 0.3, 3)[0],  # noqa: B023
                    lambda: npi.threshold_with_fallback(s, 0.3, 3), lambda: ref.threshold_with_fallback(s.tolist(), 0.3, 3)[0], _ids_equal)  # noqa: B023
    # What enrich hashes at top_k 100: a hundred parents of about 1,100 characters (a fifth of
    # SciFact's hold a character past ASCII), some of them copies differing in case and white space.
    words = ["Tidal", "forcing", "rises", "twice", "a", "day", "under", "the", "moon's", "gravitational", "pull", "of",
             "(p < 0.001)", "IL-6", "expression", "in", "vivo;", "cells", "were", "treated", "with", "2.5", "mg/kg"]
    for n in (100, 1_000):
        texts = [" ".join(rng.choice(words, size=180).tolist()) for _ in range(n)]
        texts[::5] = [t.replace("IL-6", "β-catenin") for t in texts[::5]]
        texts[1::10] = ["  " + t.upper().replace(" ", "\n ") for t in texts[::10]][: len(texts[1::10])]
        yield _case("content_hashes", f"{n:,}x{sum(map(len, texts)) // n:,} chars", lambda: sc.content_hashes(texts),  # noqa: B023
                    lambda: npi.content_hashes(texts), lambda: ref.content_hashes(texts), _same_keys)  # noqa: B023


def _same_keys(a: object, b: object, c: object | None) -> bool:
    return a.tolist() == b.tolist() and (c is None or a.tolist() == c)  # type: ignore[attr-defined]


@nb.njit(nb.float32(nb.float32[:, ::1]), cache=True, nogil=True, fastmath=True)
def _stream_read(matrix):  # pragma: no cover - compiled
    # The memory-bandwidth probe: read every byte once, as the matcher does, with no other work.
    acc = np.float32(0.0)
    n, d = matrix.shape
    for i in range(n):
        for j in range(d):
            acc += matrix[i, j]
    return acc


@dataclass
class CacheRow:
    entries: int
    threads: int
    numba_ms: float
    numpy_ms: float
    python_ms: float | None
    stream_ms: float
    mbytes: float

    @property
    def bandwidth_fraction(self) -> float:
        return self.stream_ms / self.numba_ms

    @property
    def gbps(self) -> float:
        return self.mbytes / 1e3 / (self.numba_ms / 1e3)

    @property
    def stream_gbps(self) -> float:
        return self.mbytes / 1e3 / (self.stream_ms / 1e3)


def _parallel_stream(pool: ThreadPoolExecutor, matrix: np.ndarray, threads: int) -> None:
    bounds = np.linspace(0, matrix.shape[0], threads + 1).astype(int)
    list(pool.map(lambda ab: _stream_read(matrix[ab[0] : ab[1]]), zip(bounds[:-1], bounds[1:], strict=True)))


def cache_cases(sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000), threads: tuple[int, ...] = (1, 2)) -> Iterator[CacheRow]:
    """Matcher vs numpy (BLAS limited to the same thread count) vs a streaming read of the same bytes."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(7)
    pool = ThreadPoolExecutor(max(threads))
    for n in sizes:
        m1 = sc.CosineMatcher(384, threshold=0.95, initial_capacity=n, max_entries=n)
        block = 50_000
        for start in range(0, n, block):
            vecs = rng.normal(size=(min(block, n - start), 384)).astype(np.float32)
            for v in vecs:
                # Every row public: the scan must read every byte, or the GB/s would flatter it.
                m1.add(v, expires_at=1e12, scope=0)
        matrix, live, expires, scope = m1.snapshot()
        q = matrix[n // 2].copy()
        want = npi.cache_match(matrix, live, expires, scope, q, 0.0, 1, 0.95)
        py_ms = None
        if n <= 10_000:
            rows, lv, ex, scp, ql = matrix.tolist(), live.tolist(), expires.tolist(), scope.tolist(), q.tolist()
            py_ms = measure(lambda: ref.cache_match(rows, lv, ex, scp, ql, 0.0, 0, 0.95), min_time=0.5, max_reps=3, min_reps=1) * 1e3  # noqa: B023
        for t in threads:
            m = m1
            if t > 1:  # the same rows, scanned by t threads
                m = sc.CosineMatcher(384, threshold=0.95, initial_capacity=1, max_entries=n, threads=t)
                m._matrix, m._live, m._expires, m._scope, m._added, m._rows = m1._matrix, m1._live, m1._expires, m1._scope, m1._added, m1._rows
            assert m.match(q, now=0.0, caller_scope=1)[0] == want[0] == n // 2
            with threadpool_limits(limits=t):
                numpy_ms = measure(lambda: npi.cache_match(matrix, live, expires, scope, q, 0.0, 1, 0.95)) * 1e3  # noqa: B023
            stream = (lambda: _stream_read(matrix)) if t == 1 else (lambda: _parallel_stream(pool, matrix, t))  # noqa: B023
            yield CacheRow(
                entries=n,
                threads=t,
                numba_ms=measure(lambda: m.match(q, now=0.0, caller_scope=1)) * 1e3,  # noqa: B023
                numpy_ms=numpy_ms,
                python_ms=py_ms if t == 1 else None,
                stream_ms=measure(stream) * 1e3,
                mbytes=matrix.nbytes / 1e6,
            )
            if m is not m1:
                m.close()
    pool.shutdown()
