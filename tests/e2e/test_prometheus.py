"""A real Prometheus server scrapes the service's /metrics endpoint."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from retrieval.v1 import retrieval_pb2 as pb
from tests.e2e.conftest import Live
from tests.support.prometheus import eventually, prometheus_server, query


async def _eventually(base: str, promql: str, at_least: float) -> float:
    # Off the event loop: the in-process server finishes a call's bookkeeping on that loop, and
    # an aborted call's status reaches the caller before it.
    return await asyncio.to_thread(eventually, base, promql, at_least)


async def _query(base: str, promql: str) -> float | None:
    return await asyncio.to_thread(query, base, promql)


@pytest.fixture(scope="module")
def prometheus(live: Live, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prometheus_server(tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{live.running.metrics_port}"]) as base:
        yield base


async def test_prometheus_scrapes_requests_stages_and_errors(live: Live, prometheus: str) -> None:
    for q in ("rank fusion", "semantic cache", "parent chunks"):
        await live.stub.Query(pb.QueryRequest(query=q, top_k=2, use_cache=False))
    with pytest.raises(grpc.aio.AioRpcError):
        await live.stub.Query(pb.QueryRequest(query="   "))
    assert await _eventually(prometheus, 'up{job="retrieval"}', 1) == 1
    assert await _eventually(prometheus, 'retrieval_requests_total{method="Query",code="OK"}', 3) >= 3
    assert await _eventually(prometheus, 'retrieval_requests_total{method="Query",code="INVALID_ARGUMENT"}', 1) == 1
    assert await _eventually(prometheus, 'retrieval_stage_duration_seconds_count{stage="retrieve"}', 3) >= 3
    # use_cache=false: the cache was not asked, which is not a miss (the hit ratio's alert reads misses).
    assert await _eventually(prometheus, 'retrieval_query_cache_total{outcome="bypassed"}', 3) >= 3
    assert await _query(prometheus, 'retrieval_query_cache_total{outcome="miss"}') is None
    assert await _eventually(prometheus, "process_resident_memory_bytes", 1) > 10e6


async def test_grpc_ecosystem_metrics_cover_every_service_on_the_port(live: Live, prometheus: str) -> None:
    health = health_pb2_grpc.HealthStub(live.channel)
    assert (await health.Check(health_pb2.HealthCheckRequest())).status == health_pb2.HealthCheckResponse.SERVING
    watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
    assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()
    reflection = reflection_pb2_grpc.ServerReflectionStub(live.channel)
    replies = [r async for r in reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))]
    assert len(replies) == 1
    await live.stub.Search(pb.SearchRequest(query="rank fusion", top_k=2))
    with pytest.raises(grpc.aio.AioRpcError):
        await live.stub.Search(pb.SearchRequest(query="x", top_k=1000))

    def series(name: str, service: str, method: str, grpc_type: str, **extra: str) -> str:
        labels = {"grpc_service": service, "grpc_method": method, "grpc_type": grpc_type, **extra}
        return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"

    ours = "retrieval.v1.RetrievalService"
    assert await _eventually(prometheus, series("grpc_server_handled_total", ours, "Search", "unary", grpc_code="OK"), 1) >= 1
    assert await _eventually(prometheus, series("grpc_server_handled_total", ours, "Search", "unary", grpc_code="InvalidArgument"), 1) == 1
    assert await _eventually(prometheus, series("grpc_server_handling_seconds_count", ours, "Search", "unary"), 2) >= 2
    assert await _eventually(prometheus, series("grpc_server_handled_total", "grpc.health.v1.Health", "Check", "unary", grpc_code="OK"), 1) >= 1
    assert await _eventually(prometheus, series("grpc_server_handled_total", "grpc.health.v1.Health", "Watch", "server_stream", grpc_code="Canceled"), 1) == 1
    assert await _eventually(prometheus, series("grpc_server_msg_sent_total", "grpc.health.v1.Health", "Watch", "server_stream"), 1) >= 1
    reflection_service = "grpc.reflection.v1alpha.ServerReflection"
    assert await _eventually(prometheus, series("grpc_server_msg_received_total", reflection_service, "ServerReflectionInfo", "bidi_stream"), 1) >= 1
    assert await _eventually(prometheus, series("grpc_server_handled_total", reflection_service, "ServerReflectionInfo", "bidi_stream", grpc_code="OK"), 1) >= 1
    # Every method's series exist from the start, at zero, as go-grpc-prometheus makes them.
    assert await _query(prometheus, series("grpc_server_handled_total", ours, "DeleteDocuments", "unary", grpc_code="Unauthenticated")) == 0
