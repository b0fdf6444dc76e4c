"""`retrieval-server serve` exports its spans over OTLP/gRPC to a collector-protocol receiver."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from bench.server_process import free_port, wait_healthy
from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_client import RetrievalClient
from tests.support.otlp_receiver import otlp_receiver
from tests.support.paths import inherited_env
from tests.support.ports import refused_port

CLI = [sys.executable, "-m", "retrieval_server.cli"]
TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE}-b7ad6b7169203331-01"


@pytest.mark.slow
def test_spans_reach_an_otlp_receiver_configured_by_otel_variables(tmp_path: Path) -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    with otlp_receiver() as (endpoint, received), refused_port() as tei_port:
        env = inherited_env("OTEL_")
        env.update(
            RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_PORT=str(port), RETRIEVAL_METRICS_ENABLED="false", RETRIEVAL_LOG_FORMAT="json",
            RETRIEVAL_DATA_DIR=str(tmp_path / "data"), RETRIEVAL_TRACES_EXPORTER="otlp",
            # TEI is configured but absent: the failure is logged inside the trace (at DEBUG: each request's).
            RETRIEVAL_TEI_URL=f"http://127.0.0.1:{tei_port}", RETRIEVAL_TEI_TIMEOUT_S="30", RETRIEVAL_LOG_LEVEL="DEBUG",
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_INSECURE="true",
            OTEL_SERVICE_NAME="retrieval-under-test", OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test",
            OTEL_BSP_SCHEDULE_DELAY="100",
        )
        log = tmp_path / "server.log"
        server = subprocess.Popen([*CLI, "serve"], env=env, stderr=log.open("w"))
        try:
            wait_healthy(target, server, timeout_s=180, log=log)
            with RetrievalClient(target, role="ADMIN") as client:
                client.ingest([pb.DocumentInput(document_id="tides", filename="tides.txt",
                                                content=b"Tides are caused by the gravitational pull of the moon on the oceans.")])
            with grpc.insecure_channel(target) as channel:
                retrieval_pb2_grpc.RetrievalServiceStub(channel).Query(
                    pb.QueryRequest(query="what causes the tides", top_k=1), metadata=[("traceparent", TRACEPARENT)], timeout=60)
            spans = received.wait_for(lambda got: any(s.name.endswith("/Query") and s.trace_id.hex() == TRACE for _, s in got)
                                      and any(s.name == "stage.rerank" for _, s in got))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=120)
    ours = [(resource, s) for resource, s in spans if s.trace_id.hex() == TRACE]
    names = {s.name for _, s in ours}
    assert {"/retrieval.v1.RetrievalService/Query", "workflow.query", "stage.retrieve", "stage.rerank",
            "embedder.embed", "vector_store.search_dense", "reranker.rerank"} <= names
    resource = ours[0][0]
    assert resource["service.name"] == "retrieval-under-test" and resource["deployment.environment"] == "test"
    rpc = next(s for _, s in ours if s.name.endswith("/Query"))
    assert rpc.parent_span_id.hex() == "b7ad6b7169203331"
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("trace_id") == TRACE and "reranking failed" in line["msg"] for line in lines)

