"""The c=1 rows of Search and HYBRID, query by query beside their in-process floor.

A request at c=1 takes a few milliseconds, and a shared host's load drifts by 10-40 % within
minutes: a floor measured minutes away from its cell reads that drift as the service's overhead
(session 30's first bracketed run: the floors before and after the server within 10 % of each
other, the service's c=1 cells 40-50 % above them, in a spell between them). Here each query goes
to the server once and has its floor's calls made once, the two side by side, query after query,
on a copy of the index (the server holds the original folder, and the engine opens a folder in one
process at a time). Both medians then come from the same queries at the same moments.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.floor.inprocess import SCHEDULES, DirectCalls, schedule_medians
from bench.load import generator
from bench.load.scenarios import Scenario


@dataclass(slots=True)
class PairedFloor:
    """Median ms of the floor's requests made beside the service's, over the same queries."""

    queries: int = 0
    search_made_ms: float = 0.0
    hybrid_made_ms: dict[str, float] = field(default_factory=dict)
    retrieve_made_ms: dict[str, float] = field(default_factory=dict)

    def hybrid_made(self) -> tuple[str, float]:
        return min(self.hybrid_made_ms.items(), key=lambda kv: kv[1])


@contextmanager
def index_copy(index_dir: Path, scratch: Path) -> Iterator[Path]:
    """A copy of the index for the floor's calls while a server holds the original; made while none does."""
    copy = scratch / "floor-index"
    shutil.copytree(index_dir, copy)
    try:
        yield copy
    finally:
        shutil.rmtree(copy, ignore_errors=True)


async def search(target: str, scenario: Scenario, direct: DirectCalls, queries: list[str], top_k: int) -> tuple[generator.Samples, float]:
    """The service's Search samples and the floor's median ms, each query made by both."""
    for q in queries[:10]:
        direct.search_made(q, top_k)
    made: list[float] = []

    def beside(q: str, _: int) -> None:
        t0 = time.perf_counter()
        direct.search_made(q, top_k)
        made.append((time.perf_counter() - t0) * 1e3)

    samples = await generator.interleaved(target, scenario, queries, beside)
    return samples, round(statistics.median(made), 3)


async def hybrid(
    target: str, scenario: Scenario, direct: DirectCalls, queries: list[str], top_k: int, pool: int,
) -> tuple[generator.Samples, dict[str, float], dict[str, float]]:
    """The service's HYBRID samples, and the floor's median ms per schedule: whole and retrieval.

    Each query is made once beside the service's request, as the service answers it once, in one
    schedule, the next query in the next: each schedule's median comes from a third of the queries."""
    names = list(SCHEDULES)
    for q in queries[:10]:
        for name in names:
            direct.hybrid_made(q, name, top_k, pool)
    made: dict[str, list[tuple[float, float]]] = {name: [] for name in names}

    def beside(q: str, i: int) -> None:
        name = names[i % len(names)]
        made[name].append(direct.hybrid_made(q, name, top_k, pool))

    samples = await generator.interleaved(target, scenario, queries, beside)
    return samples, *schedule_medians(made)
