"""Traces: the SDK's in-memory exporter behind a real server, the caller's traceparent, logs; off costs nothing."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource
from retrieval_server.observability.logging import JsonFormatter
from retrieval_server.observability.tracing import Tracing
from retrieval_server.server import RunningServer, start_server
from tests.support.ports import refused_port

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


class RpcSpans(SpanProcessor):
    """Hands over each RetrievalService call's span as it ends, while :attr:`ended` is set: a call
    that aborts has sent its status before its span ends, so its caller may look too early."""

    def __init__(self) -> None:
        self.ended: asyncio.Queue[ReadableSpan] | None = None

    def on_end(self, span: ReadableSpan) -> None:
        if self.ended is not None and span.name.startswith("/retrieval.v1.RetrievalService/"):
            self.ended.put_nowait(span)


class Traced:
    def __init__(self, running: RunningServer, exporter: InMemorySpanExporter, rpc_spans: RpcSpans, channel: grpc.aio.Channel) -> None:
        self.running, self.exporter, self.rpc_spans, self.channel = running, exporter, rpc_spans, channel
        self.stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)


@pytest_asyncio.fixture(scope="module")
async def traced(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rpc_spans = RpcSpans()
    provider.add_span_processor(rpc_spans)
    # A TEI server that is not there: reranking fails inside the trace and says so in the log.
    with refused_port() as tei_port:
        settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path_factory.mktemp("traced"),
                                 tei_url=f"http://127.0.0.1:{tei_port}", tei_timeout_s=30)
        app = Application(settings, tracing=Tracing(provider))
        await app.open()
        await app.ingest([
            DocumentSource(filename="tides.txt", content=b"Tides are caused by the gravitational pull of the moon on the oceans."),
            DocumentSource(filename="bread.txt", content=b"Sourdough bread rises because wild yeast ferments the dough overnight."),
        ])
        # The index optimization an ingest schedules is background work with traces of its own.
        await app.wait_for_optimize()
        running = await start_server(settings, app)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
        yield Traced(running, exporter, rpc_spans, channel)
        await channel.close()
        await running.stop(1.0)


def _by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans}


def _ancestors(span: ReadableSpan, index: dict[int, ReadableSpan]) -> list[str]:
    names = []
    while span.parent is not None and span.parent.span_id in index:
        span = index[span.parent.span_id]
        names.append(span.name)
    return names


async def test_a_query_is_one_trace_joined_to_the_callers(traced: Traced) -> None:
    traced.exporter.clear()
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter())
    logging.getLogger().addHandler(handler)
    # Each request's reranking failure is logged at DEBUG (the breaker logs its opening once).
    nodes_log = logging.getLogger("retrieval_server.workflow.nodes")
    level = nodes_log.level
    nodes_log.setLevel(logging.DEBUG)
    try:
        resp = await traced.stub.Query(pb.QueryRequest(query="why does bread rise", top_k=2, strategy=pb.STRATEGY_HYBRID, use_cache=False),
                                       metadata=[("traceparent", TRACEPARENT), ("x-user-id", "alice")])
    finally:
        nodes_log.setLevel(level)
        logging.getLogger().removeHandler(handler)
    assert resp.contexts[0].document_id == "bread"
    spans = traced.exporter.get_finished_spans()
    assert {format(s.context.trace_id, "032x") for s in spans} == {CALLER_TRACE}, [(s.name, s.parent) for s in spans if format(s.context.trace_id, "032x") != CALLER_TRACE]
    index = _by_id(spans)

    rpc = next(s for s in spans if s.name == "/retrieval.v1.RetrievalService/Query")
    assert format(rpc.parent.span_id, "016x") == CALLER_SPAN and rpc.parent.is_remote
    assert rpc.attributes["retrieval.strategy"] == "hybrid"
    assert rpc.attributes["retrieval.contexts"] == len(resp.contexts)
    assert rpc.attributes["retrieval.cache_hit"] is False
    assert "rerank:failed" in rpc.attributes["retrieval.degraded"]

    workflow = next(s for s in spans if s.name == "workflow.query")
    assert workflow.parent.span_id == rpc.context.span_id
    stages = sorted((s for s in spans if s.name.startswith("stage.")), key=lambda s: s.start_time)
    assert [s.name for s in stages] == [f"stage.{m.stage}" for m in resp.metrics.stages]
    assert all(s.parent.span_id == workflow.context.span_id for s in stages)
    retrieve = next(s for s in stages if s.name == "stage.retrieve")
    assert retrieve.attributes["retrieval.count"] == next(m.count for m in resp.metrics.stages if m.stage == "retrieve")
    assert retrieve.attributes["retrieval.strategy"] == "hybrid"

    backend = {s.name: s for s in spans if "." in s.name and not s.name.startswith(("stage.", "workflow.", "/"))}
    # The query is embedded by retrieve, beside the legs that need no vector.
    for name, stage in [("embedder.embed", "stage.retrieve"), ("vector_store.search_dense", "stage.retrieve"),
                        ("vector_store.search_sparse", "stage.retrieve"), ("metadata_store.search_documents", "stage.retrieve"),
                        ("reranker.rerank", "stage.rerank"), ("metadata_store.get_parents_and_documents", "stage.enrich")]:
        assert name in backend, f"no {name} span; spans: {sorted(backend)}"
        assert _ancestors(backend[name], index)[0] == stage
    dense = backend["vector_store.search_dense"]
    assert dense.attributes["db.system.name"] == "qdrant" and dense.attributes["retrieval.results"] >= 1
    assert backend["metadata_store.get_parents_and_documents"].attributes["db.system.name"] == "sqlite"
    assert backend["reranker.rerank"].status.status_code.name == "ERROR"  # TEI is not there
    assert backend["embedder.embed"].attributes["retrieval.items"] >= 1

    logged = [json.loads(line) for line in lines.getvalue().splitlines()]
    failure = next(line for line in logged if "reranking failed" in line["msg"])
    assert failure["trace_id"] == CALLER_TRACE
    assert int(failure["span_id"], 16) in index


async def test_a_cache_hit_is_traced_with_its_outcome(traced: Traced) -> None:
    # No rerank: this server's TEI is not there, and an answer a failure shaped is not cached.
    request = pb.QueryRequest(query="what causes tides", top_k=1, rerank=False)
    await traced.stub.Query(request)
    traced.exporter.clear()
    resp = await traced.stub.Query(request)
    assert resp.metrics.cache_hit
    spans = traced.exporter.get_finished_spans()
    lookup = [s for s in spans if s.name == "cache.lookup"]
    assert lookup and lookup[-1].attributes["retrieval.cache.outcome"] == "hit"
    rpc = next(s for s in spans if s.name.endswith("/Query"))
    assert rpc.attributes["retrieval.cache_hit"] is True
    # Without the caller's traceparent the RPC span starts a trace of its own.
    assert rpc.parent is None


async def test_a_stream_query_is_traced_as_a_query(traced: Traced) -> None:
    """StreamQuery is a coroutine writing with context.write: the stock interceptor iterated it
    with ``async for``, and every traced StreamQuery failed UNKNOWN."""
    traced.exporter.clear()
    request = pb.StreamQueryRequest(query=pb.QueryRequest(query="what causes tides", top_k=1, rerank=False, use_cache=False))
    events = [e async for e in traced.stub.StreamQuery(request, metadata=[("traceparent", TRACEPARENT)])]
    response = events[-1].response
    assert events[-1].WhichOneof("event") == "response" and response.contexts[0].document_id == "tides"
    spans = traced.exporter.get_finished_spans()
    rpc = next(s for s in spans if s.name == "/retrieval.v1.RetrievalService/StreamQuery")
    assert format(rpc.parent.span_id, "016x") == CALLER_SPAN and rpc.parent.is_remote
    assert rpc.attributes["rpc.method"] == "StreamQuery"
    assert rpc.attributes["retrieval.contexts"] == len(response.contexts)
    assert rpc.attributes["retrieval.cache_hit"] is False
    workflow = next(s for s in spans if s.name == "workflow.query")
    assert workflow.parent.span_id == rpc.context.span_id


@pytest.mark.parametrize(("call", "code", "span_status"), [
    ("empty_query", grpc.StatusCode.INVALID_ARGUMENT, "UNSET"),
    ("non_admin_ingest", grpc.StatusCode.PERMISSION_DENIED, "UNSET"),
    ("store_fails", grpc.StatusCode.INTERNAL, "ERROR"),
])
async def test_a_failed_call_is_traced_with_its_status(traced: Traced, monkeypatch: pytest.MonkeyPatch, call: str,
                                                       code: grpc.StatusCode, span_status: str) -> None:
    """The span's code is the caller's; its status is ERROR only for the codes OpenTelemetry's gRPC
    conventions count as a server's fault (a caller's mistake is not)."""

    async def fails(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the store went away")

    monkeypatch.setattr(traced.running.app.pipeline, "search", fails)
    ended: asyncio.Queue[ReadableSpan] = asyncio.Queue()
    monkeypatch.setattr(traced.rpc_spans, "ended", ended)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        if call == "empty_query":
            await traced.stub.Query(pb.QueryRequest(query="   "))
        elif call == "non_admin_ingest":
            await traced.stub.IngestDocuments(pb.IngestDocumentsRequest(documents=[pb.DocumentInput(filename="a.txt", content=b"hi")]),
                                              metadata=[("x-user-id", "bob")])
        else:
            await traced.stub.Search(pb.SearchRequest(query="tides"))
    assert err.value.code() == code
    # The rich details still reach the caller.
    assert any(key == "grpc-status-details-bin" for key, _ in err.value.trailing_metadata())
    rpc = await ended.get()
    assert rpc.attributes["rpc.grpc.status_code"] == code.value[0]
    assert rpc.status.status_code.name == span_status


async def test_health_probes_and_reflection_are_not_traced(traced: Traced) -> None:
    traced.exporter.clear()
    health = health_pb2_grpc.HealthStub(traced.channel)
    await health.Check(health_pb2.HealthCheckRequest())
    assert traced.exporter.get_finished_spans() == ()


def test_tracing_off_installs_nothing(tmp_path: Path) -> None:
    """The default: no SDK imported, backends unwrapped, no interceptor, no graph observer."""
    script = f"""
import sys, asyncio
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.backends.vector_store.edge import EdgeVectorStore
app = Application(load_settings(data_dir={str(tmp_path)!r}))
assert type(app.vectors) is EdgeVectorStore, type(app.vectors)
assert type(app.embedder).__name__ == "OnnxEmbedder"
assert app.tracing.server_interceptors() == [] and app.tracing.stage_observer() is None
assert app.pipeline._graph._observer is None
loaded = [m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.instrumentation"))]
assert not loaded, loaded
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_stop_waits_a_bounded_time_for_a_collector_that_never_answers(caplog: pytest.LogCaptureFixture) -> None:
    """The exporter waits 10 s for a collector that accepts connections but never answers: the
    stop waited with it, past a pod's grace period (25 s of calls + 5 of events + 5)."""
    import threading

    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    released, exporting = threading.Event(), threading.Event()

    class Hung(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            exporting.set()
            released.wait()
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Hung()))
    with provider.get_tracer("t").start_as_current_span("last"):
        pass
    try:
        Tracing(provider).shutdown()
        assert exporting.is_set() and "the last spans were not exported within 2 s" in caplog.text
    finally:
        released.set()
