"""CPU and memory of the server under test: its process and every worker process under it."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def _rss(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


@dataclass(frozen=True, slots=True)
class Usage:
    #: CPU time over wall time: 1.0 is one core fully busy
    cpu_cores: float
    peak_rss_mb: float


class ResourceSampler:
    """Samples the process tree's RSS every ``interval_s``; CPU is the difference of cumulative times."""

    def __init__(self, pid: int, interval_s: float = 0.25) -> None:
        self._pid = pid
        self._interval = interval_s
        self._stop = threading.Event()
        self._peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self._peak = max(self._peak, _rss(_tree(self._pid)))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self._interval)

    def __enter__(self) -> ResourceSampler:
        self._cpu0 = _cpu_seconds(_tree(self._pid))
        self._t0 = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()  # a run shorter than the thread's first turn still has a sample
        self.usage = Usage(
            cpu_cores=round((_cpu_seconds(_tree(self._pid)) - self._cpu0) / (time.perf_counter() - self._t0), 2),
            peak_rss_mb=round(self._peak / 2**20, 1),
        )
