"""Prometheus metrics: one registry per application, served over HTTP for scraping.

A single server process serves its own registry. With several processes, prometheus-client's
multiprocess mode is on (the supervisor gives the workers a fresh directory for the run, see
:mod:`retrieval_server.observability.multiprocess`): each worker's values live in files there and
the supervisor serves their sum on the one metrics port. No global registry is used.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, PlatformCollector, ProcessCollector

from retrieval_server.observability.metrics_http import serve_metrics

if TYPE_CHECKING:
    from retrieval_server.config import Settings
    from retrieval_server.observability.grpc_metrics import GrpcServerMetrics

#: the service whose calls are also reported under its own names (retrieval_requests_total...)
#: (the contract's full name, written out so that a command that serves no RPC does not import the
#: generated code; tests/unit/test_service_name.py checks it against the descriptor)
SERVICE = "retrieval.v1.RetrievalService"
#: a Query's use of the cache: ``bypassed`` when it was not asked (``use_cache`` false, no cache
#: configured, or a GENERATION request the router answered without retrieval), so that a caller
#: turning it off, or greetings, do not read as a falling hit ratio
CacheOutcome = Literal["hit", "miss", "bypassed"]
# Retrieval latencies run from cache hits of tens of microseconds to seconds with a cross-encoder:
# starting at 1 ms, every cached answer and most stages fell in the first bucket, and their
# quantiles read 0.5-1 ms whatever they took.
_BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005,
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)


@dataclass
class ServiceMetrics:
    # Described by collecting them once, the process and platform collectors can be asked for by
    # name (/metrics?name[]=process_resident_memory_bytes): a registry finds collectors by the
    # names they describe, and theirs describe none.
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        r = self.registry
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self.stages = Histogram("retrieval_stage_duration_seconds", "Query workflow stage latency", ["stage"], buckets=_BUCKETS, registry=r)
        self.cache = Counter("retrieval_query_cache", "Query answers by cache outcome", ["outcome"], registry=r)
        self._hit = self.cache.labels("hit")
        self.degraded = Counter("retrieval_degradations", "Query answers degraded, by what degraded", ["kind"], registry=r)
        self.ingested = Counter("retrieval_ingested_documents", "documents ingested and written (added or replaced; not those found stored unchanged)", registry=r)
        self.ingest_errors = Counter("retrieval_ingest_errors", "documents that failed to ingest", registry=r)
        self.events_published = Counter("retrieval_events_published", "RetrievalCompleted events confirmed by the broker", registry=r)
        self.events_dropped = Counter("retrieval_events_dropped", "RetrievalCompleted events dropped, by reason", ["reason"], registry=r)
        for reason in ("buffer_full", "shutdown"):
            # Exposed at 0 from the start: a series born at its first drop has no earlier sample,
            # and increase() over it misses a single burst (the alert on it never fires).
            self.events_dropped.labels(reason)
        self.events_publish_errors = Counter(
            "retrieval_events_publish_errors", "Failed attempts to publish an event (it is kept and retried)", registry=r
        )
        self.events_buffered = Gauge(
            "retrieval_events_buffered", "RetrievalCompleted events waiting to be published", registry=r, multiprocess_mode="livesum"
        )
        self.undecodable_headers = Counter(
            "retrieval_undecodable_header_values",
            "header values not UTF-8 that gRPC logged (read as Latin-1), their log lines dropped", registry=r,
        )
        self._http: WSGIServer | None = None
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    @cached_property
    def grpc(self) -> GrpcServerMetrics:
        """The RPC metrics, registered when a server first asks for them: a command that only
        ingests has no RPCs to count and does not import gRPC (about 20 ms of its start)."""
        from retrieval_server.observability.grpc_metrics import GrpcServerMetrics

        return GrpcServerMetrics(self.registry, _BUCKETS, SERVICE)

    def _series(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once: every request observes a few series, and
        prometheus-client validates and hashes the labels on each lookup. The label sets are
        bounded (methods, codes, stages, outcomes, degradation kinds), and so is this table."""
        key = (id(metric), labels)
        series = self._children.get(key)
        if series is None:
            series = self._children[key] = metric.labels(*labels)
        return series

    def observe_query(self, stages: Iterable[tuple[str, float]], cache: CacheOutcome, degraded: Iterable[str]) -> None:
        for stage, ms in stages:
            self._series(self.stages, stage).observe(ms / 1e3)
        self._series(self.cache, cache).inc()
        self._count_degraded(degraded)

    def observe_served(self, stage: str, ms: float, degraded: Iterable[str] = ()) -> None:
        """:meth:`observe_query` of an answer served from the cache (one stage, a hit, degraded by
        what describes its contexts alone), without the generality it pays for on every served answer."""
        self._series(self.stages, stage).observe(ms / 1e3)
        self._hit.inc()
        if degraded:
            self._count_degraded(degraded)

    def _count_degraded(self, degraded: Iterable[str]) -> None:
        for item in degraded:
            # "analysis:hyde:skipped: needs an LLM" -> "analysis:hyde": a bounded label set.
            self._series(self.degraded, ":".join(item.split(":")[:2])).inc()

    def serve(self, host: str, port: int, **tls: Any) -> int:
        """Start the /metrics endpoint; returns the bound port (``port`` 0 picks a free one)."""
        self._http = serve_metrics(self.registry, host, port, **tls)
        return int(self._http.server_port)

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None


def metrics_address(settings: Settings) -> str:
    return settings.metrics_host or settings.host


def metrics_tls(settings: Settings) -> dict[str, Any]:
    """serve_metrics's TLS arguments: the gRPC port's certificate (and client CA) when METRICS_TLS."""
    if not settings.metrics_tls or settings.tls_cert is None or settings.tls_key is None:
        return {}
    out: dict[str, Any] = {"certfile": str(settings.tls_cert), "keyfile": str(settings.tls_key)}
    if settings.tls_client_ca is not None:
        out.update(client_cafile=str(settings.tls_client_ca), client_auth_required=True)
    return out
