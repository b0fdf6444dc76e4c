"""grpc.health.v1 Watch at a shutdown: what ends it, and when."""

from __future__ import annotations

import asyncio

import pytest
from grpc_health.v1 import health_pb2

from retrieval_server import server
from retrieval_server.server import _Health

S, N, U = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


class _Context:
    """A Watch's call: the statuses it sent, and a signal at each."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.wrote = asyncio.Event()

    async def write(self, response: health_pb2.HealthCheckResponse) -> None:
        self.sent.append(response.status)
        self.wrote.set()


def _watch(health: _Health, service: str) -> tuple[asyncio.Task[None], _Context]:
    context = _Context()
    return asyncio.create_task(health.Watch(health_pb2.HealthCheckRequest(service=service), context)), context  # type: ignore[arg-type]


@pytest.mark.parametrize("service", ["", "not.served.Here"])
async def test_a_watch_open_when_the_shutdown_begins_ends_once_it_has_sent_its_status(service: str) -> None:
    """It held every stop for the whole grace period: gRPC's client-side health checking keeps one
    on every connection."""
    health = _Health()
    watch, context = _watch(health, service)
    await context.wrote.wait()
    await health.enter_graceful_shutdown()
    await watch  # ended, not cancelled
    assert context.sent == ([U] if service else [S, N])  # one of a service not served sends nothing more


@pytest.mark.parametrize("service", ["", "not.served.Here"])
async def test_a_watch_started_after_the_shutdown_began_stays_until_its_bound_or_the_stop(monkeypatch: pytest.MonkeyPatch, service: str) -> None:
    """Ended once it had sent its status, it was started again at once by gRPC's client-side
    health checking: the health port, open until the main drain is over, took thousands."""
    health = _Health()
    await health.enter_graceful_shutdown()
    monkeypatch.setattr(server, "WATCH_AFTER_SHUTDOWN_S", 3600.0)  # only the stop ends it
    watch, context = _watch(health, service)
    await context.wrote.wait()
    assert watch.cancel()  # still open once its status is sent: the server's stop cancels it
    with pytest.raises(asyncio.CancelledError):
        await watch
    assert context.sent == [U if service else N]
    monkeypatch.setattr(server, "WATCH_AFTER_SHUTDOWN_S", 0.0)  # its bound passed at once
    watch, context = _watch(health, service)
    await watch  # ended by the bound, OK
    assert context.sent == [U if service else N]
    assert health._server_watchers == {}  # noqa: SLF001 (none left behind)
