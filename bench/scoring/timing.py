"""Wall-clock timing, timeit-style: the best of several batches of calls.

This VM is shared; interference only ever adds time, so the minimum over batches is the most
repeatable estimate (Python's timeit documentation makes the same argument). Every column of a
table is measured the same way in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def measure(fn: Callable[[], object], *, min_time: float = 0.3, max_reps: int = 200, min_reps: int = 3) -> float:
    """Seconds per call of ``fn``: the fastest of ``min_reps``+ batches, each at least ~min_time/5 long."""
    t0 = time.perf_counter()
    fn()  # warm-up: JIT load, caches, allocator
    one = max(time.perf_counter() - t0, 1e-7)
    number = max(1, min(max_reps, int(min_time / 5 / one)))
    best = float("inf")
    start = time.perf_counter()
    batches = 0
    while batches < min_reps or (time.perf_counter() - start < min_time and batches < 20):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
        batches += 1
    return best
