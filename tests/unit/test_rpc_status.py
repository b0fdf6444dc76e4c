"""The servicer's wrappers behind the edge's metrics layer: every way a call can end gets its
status, and retrieval_requests_total (a view of grpc_server_handled_total) records it."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from google.rpc import error_details_pb2, status_pb2
from prometheus_client import CollectorRegistry

from retrieval_server.api.servicer import _rpc
from retrieval_server.domain import InvalidArgument, Unavailable
from retrieval_server.observability.grpc_metrics import GrpcMetricsLayer, GrpcServerMetrics

SERVICE = "retrieval.v1.RetrievalService"


class Context:
    """What the wrappers use of grpc.aio's servicer context: abort raises, as grpc.aio's does."""

    def __init__(self) -> None:
        self.status: tuple[grpc.StatusCode, str] | None = None
        self.trailing: tuple[tuple[str, str | bytes], ...] = ()
        #: a stream's messages, as written
        self.written: list[str] = []
        #: set to hold every write after the first: a caller that stops reading
        self.stalled = asyncio.Event()
        self.wrote = asyncio.Event()

    async def write(self, message: str) -> None:
        if self.written and self.stalled.is_set():
            await asyncio.Event().wait()
        self.written.append(message)
        self.wrote.set()

    def code(self) -> grpc.StatusCode | None:
        return self.status[0] if self.status else None

    def time_remaining(self) -> float | None:
        return None

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: tuple[tuple[str, str | bytes], ...] = ()) -> None:
        self.status = (code, details)
        self.trailing = trailing_metadata
        raise grpc.aio.AbortError()


class Metrics:
    """The grpc_server_* series and the service's view of them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.grpc = GrpcServerMetrics(self.registry, (0.1, 1.0), SERVICE)

    @property
    def rpcs(self) -> list[tuple[str, str]]:
        """(method, code) of every call retrieval_requests_total counted, one entry per call."""
        requests = next(family for family in self.registry.collect() if family.name == "retrieval_requests")
        return sorted((s.labels["method"], s.labels["code"]) for s in requests.samples if s.name.endswith("_total")
                      for _ in range(int(s.value)))


class App:
    def __init__(self) -> None:
        self.metrics = Metrics()


class Servicer:
    def __init__(self, error: BaseException | None) -> None:
        self._app = App()
        self._error = error

    @_rpc
    async def Unary(self, request: Any, context: Context) -> str:
        if self._error is not None:
            raise self._error
        return "done"

    @_rpc
    async def Stream(self, request: Any, context: Context) -> None:
        await context.write("first")
        if self._error is not None:
            raise self._error
        await context.write("second")


def _edge(servicer: Servicer, name: str) -> grpc.RpcMethodHandler:
    """The servicer's method as the server calls it: inside the metrics layer."""
    method = getattr(servicer, name)
    handler = grpc.unary_stream_rpc_method_handler(method) if name == "Stream" else grpc.unary_unary_rpc_method_handler(method)
    return GrpcMetricsLayer(servicer._app.metrics.grpc)(f"/{SERVICE}/{name}", handler)


async def _stream(servicer: Servicer, context: Context) -> list[str]:
    await _edge(servicer, "Stream").unary_stream(None, context)
    return context.written


async def _unary(servicer: Servicer, context: Context) -> str:
    return await _edge(servicer, "Unary").unary_unary(None, context)


CALLS = ((_unary, "Unary"), (_stream, "Stream"))


async def test_a_call_that_returns_is_ok() -> None:
    servicer, context = Servicer(None), Context()
    assert await _unary(servicer, context) == "done"
    assert await _stream(servicer, context) == ["first", "second"]
    assert context.status is None and servicer._app.metrics.rpcs == [("Stream", "OK"), ("Unary", "OK")]


@pytest.mark.parametrize(("error", "code"), [(InvalidArgument("top_k must be at most 100", "top_k"), grpc.StatusCode.INVALID_ARGUMENT),
                                             (Unavailable("the vector store is down"), grpc.StatusCode.UNAVAILABLE)])
async def test_a_domain_error_ends_the_call_with_its_status(error: Exception, code: grpc.StatusCode) -> None:
    for call, name in CALLS:
        servicer, context = Servicer(error), Context()
        with pytest.raises(grpc.aio.AbortError):
            await call(servicer, context)
        assert context.status is not None and context.status[0] is code and str(error) in context.status[1]
        assert servicer._app.metrics.rpcs == [(name, code.name)]


async def test_an_unexpected_error_is_internal_and_its_text_is_not_sent(caplog: pytest.LogCaptureFixture) -> None:
    for call, name in CALLS:
        servicer, context = Servicer(RuntimeError("secret path /etc/x")), Context()
        with pytest.raises(grpc.aio.AbortError):
            await call(servicer, context)
        assert context.status == (grpc.StatusCode.INTERNAL, f"internal error in {name}")
        assert servicer._app.metrics.rpcs == [(name, "INTERNAL")]
        # Its details, as every error's: an ErrorInfo whose reason a program can read.
        [(_, packed)] = [m for m in context.trailing if m[0] == "grpc-status-details-bin"]
        [detail] = status_pb2.Status.FromString(packed).details
        info = error_details_pb2.ErrorInfo()
        assert detail.Unpack(info) and info.reason == "INTERNAL" and info.domain == "retrieval.v1"
    assert "secret path" in caplog.text  # logged for the operator


async def test_an_abort_keeps_its_code_and_a_cancelled_call_is_cancelled() -> None:
    class Aborting(Servicer):
        @_rpc
        async def Unary(self, request: Any, context: Context) -> str:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no")
            return "unreachable"

    servicer, context = Aborting(None), Context()
    with pytest.raises(grpc.aio.AbortError):
        await _unary(servicer, context)
    assert context.status == (grpc.StatusCode.PERMISSION_DENIED, "no") and servicer._app.metrics.rpcs == [("Unary", "PERMISSION_DENIED")]

    for call, name in CALLS:
        servicer, context = Servicer(asyncio.CancelledError()), Context()
        with pytest.raises(asyncio.CancelledError):
            await call(servicer, context)
        assert context.status is None and servicer._app.metrics.rpcs == [(name, "CANCELLED")]


async def test_a_stream_the_caller_stops_reading_is_cancelled_not_an_error() -> None:
    servicer, context = Servicer(None), Context()
    context.stalled.set()
    stream = asyncio.ensure_future(_stream(servicer, context))
    await context.wrote.wait()
    stream.cancel()  # what grpc.aio does to the handler of a call its caller left
    with pytest.raises(asyncio.CancelledError):
        await stream
    assert context.written == ["first"] and context.status is None and servicer._app.metrics.rpcs == [("Stream", "CANCELLED")]
