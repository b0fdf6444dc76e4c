"""One metrics endpoint for several worker processes (prometheus-client's multiprocess mode).

The supervisor makes a fresh directory for the run and exports it to the workers as
``PROMETHEUS_MULTIPROC_DIR`` before spawning them; prometheus-client reads that variable when a
worker imports it, so each worker's counters and histograms are written to files there. The
supervisor serves their sum on the metrics port, with its own series: restarts and liveness per
worker, and each worker's process metrics (CPU, memory, file descriptors) labelled by worker.
A worker that dies keeps its counts in the sum, so totals never go backwards on a restart: its
counters and histograms are added to totals the supervisor holds in memory and its files deleted,
as prometheus-client would read every dead worker's files at every scrape, for the supervisor's life.
The directory is named after the supervisor's pid: one that was killed cannot remove its own,
and the next to start does.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, ProcessCollector, multiprocess
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from retrieval_server.observability.grpc_metrics import scraped
from retrieval_server.observability.metrics import SERVICE
from retrieval_server.observability.metrics_http import serve_metrics
from retrieval_server.stale_runs import remove_stale_runs

ENV = "PROMETHEUS_MULTIPROC_DIR"
#: the run's directory in the temporary one is this, the supervisor's pid, "-" and a random part
PREFIX = "retrieval-metrics-"

log = logging.getLogger(__name__)


class WorkerCollector:
    """The supervisor's view of its workers, read at scrape time."""

    def __init__(self) -> None:
        self.pids: dict[int, int] = {}
        self.alive: dict[int, bool] = {}
        self.restarts: dict[int, int] = {}
        self._process = ProcessCollector(registry=None)

    def collect(self) -> Iterator[Metric]:
        restarts = CounterMetricFamily("retrieval_worker_restarts", "Worker processes restarted by the supervisor after a crash", labels=["worker"])
        up = GaugeMetricFamily("retrieval_worker_up", "1 while the worker process is alive", labels=["worker"])
        for worker in sorted(self.pids):
            restarts.add_metric([str(worker)], self.restarts.get(worker, 0))
            up.add_metric([str(worker)], 1.0 if self.alive.get(worker) else 0.0)
        yield restarts
        yield up
        # Process metrics of every worker (and the supervisor), one family per name, labelled by worker.
        families: dict[str, Metric] = {}
        sources = [("supervisor", self._process)] + [
            (str(w), ProcessCollector(pid=lambda pid=pid: pid, registry=None)) for w, pid in sorted(self.pids.items()) if self.alive.get(w)
        ]
        for worker, collector in sources:
            for family in collector.collect():
                merged = families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
                merged.samples += [s._replace(labels={**s.labels, "worker": worker}) for s in family.samples]
        yield from families.values()


class _WorkerFiles(multiprocess.MultiProcessCollector):
    """prometheus-client's sum over the workers' files, plus the dead workers' counters and
    histograms, summed in memory: their files, one set per restart, were read by every scrape for
    the supervisor's life (1,500 restarts: 3,000 files, 2.6 s a scrape). Not into an archive file:
    the supervisor would write an mmapped file, and on a full /tmp that write is a SIGBUS, not an
    error, which kills the supervisor and with it every worker. Gauges stay as prometheus-client
    has them: a ``live*`` one's file is deleted, another mode's is kept."""

    def __init__(self, directory: Path) -> None:
        super().__init__(None, path=str(directory))
        self._directory = directory
        # A scrape (the endpoint's threads) reading a dead worker's file and the totals it was
        # just added to counted it twice, or a file deleted under it failed.
        self._lock = threading.Lock()
        #: by family name, the dead workers' summed samples (buckets cumulative, as scraped)
        self._dead: dict[str, Metric] = {}

    def collect(self) -> list[Metric]:
        with self._lock:
            families = {family.name: family for family in super().collect()}
            for dead in self._dead.values():
                family = families.setdefault(dead.name, Metric(dead.name, dead.documentation, dead.type))
                _add(family, dead)
            return list(families.values())

    def fold(self, pid: int) -> None:
        """Add the values of the dead process ``pid`` to the dead workers' totals and delete its files."""
        with self._lock:
            multiprocess.mark_process_dead(pid, str(self._directory))
            for dead in self._directory.glob(f"*_{pid}.db"):
                if dead.name.startswith("gauge_"):
                    continue
                try:
                    families = list(self.merge([str(dead)], accumulate=True))
                except (OSError, RuntimeError) as exc:
                    # Left as it is, it still counts; the supervisor keeps supervising.
                    log.warning("a dead worker's metric file could not be read; kept", extra={"file": str(dead), "error": str(exc)})
                    continue
                dead.unlink()
                for family in families:
                    _add(self._dead.setdefault(family.name, Metric(family.name, family.documentation, family.type)), family)


def _add(total: Metric, more: Metric) -> None:
    """Add ``more``'s samples to ``total``'s, by name and labels. Summing scraped (cumulative)
    buckets is summing the raw ones: a histogram's buckets are the same in every process."""
    summed = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in total.samples}
    for s in more.samples:
        key = (s.name, tuple(sorted(s.labels.items())))
        summed[key] = summed.get(key, 0.0) + s.value
    total.samples = [Sample(name, dict(labels), value) for (name, labels), value in summed.items()]


class _Summed:
    """The workers' summed families, with those made from them at scrape time
    (:func:`~retrieval_server.observability.grpc_metrics.scraped`), as one process's registry has them."""

    def __init__(self, workers: multiprocess.MultiProcessCollector) -> None:
        self._workers = workers

    def collect(self) -> list[Metric]:
        families = list(self._workers.collect())
        made = scraped(families, SERVICE)
        names = {family.name for family in made}
        return [f for f in families if f.name not in names] + made


class _NamedAtScrape(CollectorRegistry):
    """The supervisor's registry, whose ``/metrics?name[]=`` filter reads the names of what it
    collects. prometheus-client's picks collectors by the names they described when registered,
    and the workers' families exist only once a worker wrote them: a scrape asking for any name
    returned nothing."""

    def restricted_registry(self, names: Iterable[str]) -> _Restricted:  # type: ignore[override]
        return _Restricted(self, frozenset(names))


class _Restricted:
    def __init__(self, registry: CollectorRegistry, names: frozenset[str]) -> None:
        self._registry, self._names = registry, names

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            samples = [s for s in family.samples if s.name in self._names]
            if samples:
                kept = Metric(family.name, family.documentation, family.type)
                kept.samples = samples
                yield kept


class MultiprocessMetrics:
    """The run's metric directory and the endpoint serving the sum over all workers."""

    def __init__(self) -> None:
        # A killed supervisor left its workers' files behind, in a /tmp that may be memory.
        remove_stale_runs(Path(tempfile.gettempdir()), PREFIX)
        self.directory = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
        # Read by prometheus-client in each worker at import; the workers inherit it when spawned.
        os.environ[ENV] = str(self.directory)
        self.workers = WorkerCollector()
        self.registry = _NamedAtScrape()
        self._files = _WorkerFiles(self.directory)
        self.registry.register(_Summed(self._files))
        self.registry.register(self.workers)
        self._http: WSGIServer | None = None

    def serve(self, host: str, port: int, **tls: Any) -> int:
        self._http = serve_metrics(self.registry, host, port, **tls)
        return int(self._http.server_port)

    def worker_started(self, worker: int, pid: int) -> None:
        self.workers.pids[worker] = pid
        self.workers.alive[worker] = True

    def worker_restarted(self, worker: int) -> None:
        """Count a restart of ``worker`` after it crashed, once: the starts that retry a restart
        that failed counted one each, and a crash whose restart took 5 tries was 5 restarts."""
        self.workers.restarts[worker] = self.workers.restarts.get(worker, 0) + 1

    def worker_exited(self, worker: int, pid: int) -> None:
        self.workers.alive[worker] = False
        self._files.fold(pid)

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        shutil.rmtree(self.directory, ignore_errors=True)
        os.environ.pop(ENV, None)
