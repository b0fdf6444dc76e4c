"""The grpc-ecosystem server metrics on a real grpc.aio server, for every handler shape and ending."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry

from retrieval_server.api.edge import Edge
from retrieval_server.observability.grpc_metrics import GrpcMetricsLayer, GrpcServerMetrics, go_code

SERVICE = "test.v1.Probe"


class Probe:
    """Handlers of each shape, over raw bytes (no proto needed)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def echo(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def reject(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "query must not be empty")
        raise AssertionError("unreachable")

    async def not_found(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        context.set_code(grpc.StatusCode.NOT_FOUND)
        return b""

    async def crash(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        raise RuntimeError("a bug")

    async def hang(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            # A caller's deadline ends its stream on its side first (the server's copy of the
            # deadline comes a transit later), so which one cancels the handler is a race; this
            # handler outlives the server's deadline, as work that runs past it does.
            while (remaining := context.time_remaining()) is not None and remaining > 0:
                await asyncio.sleep(remaining)
            raise
        return b""

    async def gen(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        for i in range(3):
            yield bytes([i])

    async def write(self, request: bytes, context: grpc.aio.ServicerContext) -> None:
        for i in range(4):
            await context.write(bytes([i]))

    async def total(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        return bytes([sum([len(r) async for r in requests])])

    async def read_all(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        n = 0
        while (message := await context.read()) is not grpc.aio.EOF:
            n += len(message)
        return bytes([n])

    async def chat(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        async for r in requests:
            yield r
            yield r


def _handlers(p: Probe) -> grpc.GenericRpcHandler:
    u, s, c, b = (grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler,
                  grpc.stream_unary_rpc_method_handler, grpc.stream_stream_rpc_method_handler)
    return grpc.method_handlers_generic_handler(SERVICE, {
        "Echo": u(p.echo), "Reject": u(p.reject), "NotFound": u(p.not_found), "Crash": u(p.crash), "Hang": u(p.hang),
        "Gen": s(p.gen), "Write": s(p.write), "Total": c(p.total), "ReadAll": c(p.read_all), "Chat": b(p.chat),
    })


class Harness:
    def __init__(self, registry: CollectorRegistry, channel: grpc.aio.Channel, probe: Probe) -> None:
        self.registry, self.channel, self.probe = registry, channel, probe

    def value(self, name: str, method: str, grpc_type: str, **labels: str) -> float:
        v = self.registry.get_sample_value(name, {"grpc_type": grpc_type, "grpc_service": SERVICE, "grpc_method": method, **labels})
        return v or 0.0

    def unary(self, method: str) -> Callable[..., Any]:
        return self.channel.unary_unary(f"/{SERVICE}/{method}")

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 120.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            assert loop.time() < deadline, "condition never held"
            await asyncio.sleep(0.01)


@pytest_asyncio.fixture(scope="module")
async def harness() -> AsyncIterator[Harness]:
    registry = CollectorRegistry()
    metrics = GrpcServerMetrics(registry, (0.01, 0.1, 1.0), SERVICE)
    probe = Probe()
    server = grpc.aio.server()
    edge = Edge([GrpcMetricsLayer(metrics)])
    edge.add_generic_rpc_handlers((_handlers(probe),))
    edge.serve_on(server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield Harness(registry, channel, probe)
    await channel.close()
    await server.stop(None)


def test_go_code_names() -> None:
    assert [go_code(c) for c in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED, grpc.StatusCode.INVALID_ARGUMENT,
                                 grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAUTHENTICATED)] == [
        "OK", "Canceled", "InvalidArgument", "DeadlineExceeded", "Unauthenticated"]


async def test_unary_ok_counts_one_message_each_way(harness: Harness) -> None:
    for _ in range(3):
        assert await harness.unary("Echo")(b"hi") == b"hi"
    v = harness.value
    assert v("grpc_server_started_total", "Echo", "unary") == 3
    assert v("grpc_server_handled_total", "Echo", "unary", grpc_code="OK") == 3
    assert v("grpc_server_msg_received_total", "Echo", "unary") == 3
    assert v("grpc_server_msg_sent_total", "Echo", "unary") == 3
    assert v("grpc_server_handling_seconds_count", "Echo", "unary") == 3


@pytest.mark.parametrize(("method", "status", "label"), [
    ("Reject", grpc.StatusCode.INVALID_ARGUMENT, "InvalidArgument"),
    ("NotFound", grpc.StatusCode.NOT_FOUND, "NotFound"),
    ("Crash", grpc.StatusCode.UNKNOWN, "Unknown"),
])
async def test_failed_calls_are_counted_with_their_code_and_send_nothing(harness: Harness, method: str, status: grpc.StatusCode, label: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await harness.unary(method)(b"x")
    assert err.value.code() == status
    # context.abort sends the status before it raises, so the caller can see it before the
    # interceptor's bookkeeping has run.
    await harness.until(lambda: harness.value("grpc_server_handled_total", method, "unary", grpc_code=label) == 1)
    assert harness.value("grpc_server_handled_total", method, "unary", grpc_code="OK") == 0
    assert harness.value("grpc_server_msg_sent_total", method, "unary") == 0


async def test_a_call_cancelled_by_the_client_is_counted_as_canceled(harness: Harness) -> None:
    harness.probe.entered.clear()
    call = harness.unary("Hang")(b"x")
    await harness.probe.entered.wait()
    call.cancel()
    await harness.until(lambda: harness.value("grpc_server_handled_total", "Hang", "unary", grpc_code="Canceled") == 1)
    assert harness.value("grpc_server_started_total", "Hang", "unary") == 1


async def test_a_call_past_its_deadline_is_counted_as_deadline_exceeded(harness: Harness) -> None:
    harness.probe.entered.clear()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        # Long enough for the call to reach its handler on a busy machine (one that arrives past
        # its deadline never starts, and is not counted).
        await harness.unary("Hang")(b"x", timeout=5)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await harness.until(lambda: harness.value("grpc_server_handled_total", "Hang", "unary", grpc_code="DeadlineExceeded") == 1)


async def test_server_streams_count_each_message_sent(harness: Harness) -> None:
    assert [m async for m in harness.channel.unary_stream(f"/{SERVICE}/Gen")(b"x")] == [b"\x00", b"\x01", b"\x02"]
    assert len([m async for m in harness.channel.unary_stream(f"/{SERVICE}/Write")(b"x")]) == 4
    v = harness.value
    assert v("grpc_server_msg_sent_total", "Gen", "server_stream") == 3
    assert v("grpc_server_msg_sent_total", "Write", "server_stream") == 4
    assert v("grpc_server_msg_received_total", "Gen", "server_stream") == 1
    assert v("grpc_server_handled_total", "Gen", "server_stream", grpc_code="OK") == 1
    assert v("grpc_server_handled_total", "Write", "server_stream", grpc_code="OK") == 1


async def test_client_and_bidi_streams_count_each_message_received(harness: Harness) -> None:
    async def five() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"ab"

    assert await harness.channel.stream_unary(f"/{SERVICE}/Total")(five()) == bytes([10])
    assert await harness.channel.stream_unary(f"/{SERVICE}/ReadAll")(five()) == bytes([10])
    assert len([m async for m in harness.channel.stream_stream(f"/{SERVICE}/Chat")(five())]) == 10
    v = harness.value
    assert v("grpc_server_msg_received_total", "Total", "client_stream") == 5
    assert v("grpc_server_msg_received_total", "ReadAll", "client_stream") == 5
    assert v("grpc_server_msg_sent_total", "Total", "client_stream") == 1
    assert v("grpc_server_msg_received_total", "Chat", "bidi_stream") == 5
    assert v("grpc_server_msg_sent_total", "Chat", "bidi_stream") == 10
    assert v("grpc_server_handled_total", "Chat", "bidi_stream", grpc_code="OK") == 1


async def test_unknown_methods_pass_through(harness: Harness) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await harness.channel.unary_unary(f"/{SERVICE}/Nope")(b"x")
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
