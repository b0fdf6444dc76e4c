"""A Query's RetrievalCompleted event and cache outcome are for calls that end OK: an answer ready
only after the caller's deadline reached nobody, and counted as served."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import grpc

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.api.auth import Authenticate, HeaderAuthenticator
from retrieval_server.api.edge import Edge
from retrieval_server.api.servicer import RetrievalServicer, register
from retrieval_server.config import Settings
from retrieval_server.domain import QueryMetrics, QueryOptions, QueryResult, Strategy
from retrieval_server.observability.analytics import Analytics, RetrievalCompleted
from retrieval_server.observability.metrics import ServiceMetrics


class Sink:
    def __init__(self) -> None:
        self.events: list[RetrievalCompleted] = []

    def publish(self, event: RetrievalCompleted) -> None:
        self.events.append(event)


class Pipeline:
    """Answers once ``release`` is set, holding the server's event loop until then: grpc.aio can
    cancel the handler only at an await, so the answer comes back as if the caller were there."""

    deps = SimpleNamespace(cache=None)

    def __init__(self) -> None:
        self.release = threading.Event()

    async def query(self, options: QueryOptions, on_event: Any = None) -> QueryResult:
        self.release.wait()
        return QueryResult(options.query, (), QueryMetrics(strategy_used=Strategy.HYBRID))


async def test_a_query_answered_after_its_deadline_publishes_no_event_and_counts_no_cache_outcome() -> None:
    sink, metrics, pipeline = Sink(), ServiceMetrics(), Pipeline()
    app = SimpleNamespace(settings=Settings(), pipeline=pipeline, tracing=SimpleNamespace(enabled=False),
                          metadata=SimpleNamespace(generation=lambda: 0), metrics=metrics, analytics=Analytics(sink, "hash", None))
    edge = Edge([Authenticate(HeaderAuthenticator())])
    register(RetrievalServicer(app), edge)  # type: ignore[arg-type]
    server = grpc.aio.server()
    edge.serve_on(server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()

    def call() -> grpc.StatusCode:
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                retrieval_pb2_grpc.RetrievalServiceStub(channel).Query(pb.QueryRequest(query="how do tides work", use_cache=False), timeout=0.5)
            return grpc.StatusCode.OK
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
        finally:
            pipeline.release.set()  # the answer is ready once the caller has given up on it

    try:
        with ThreadPoolExecutor(1) as pool:
            code = await asyncio.wrap_future(pool.submit(call))
    finally:
        await server.stop(grace=30)  # returns once the handler has ended
    assert code is grpc.StatusCode.DEADLINE_EXCEEDED
    assert sink.events == []
    assert metrics.cache.labels("bypassed")._value.get() == 0
