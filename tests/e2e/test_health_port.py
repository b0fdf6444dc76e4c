"""RETRIEVAL_HEALTH_PORT: grpc.health.v1 alone, plaintext, for probes that cannot speak TLS."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bench.server_process import free_port
from retrieval_server.config import load_settings
from retrieval_server.healthcheck import check, main, probe_host
from retrieval_server.server import SERVICE_NAME, _Health, start_server
from tests.support.ports import refused_port


async def test_the_health_port_follows_the_servers_status(tmp_path: Path) -> None:
    health_port = free_port()
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path, health_port=health_port)
    running = await start_server(settings)
    try:
        assert await asyncio.to_thread(check, f"127.0.0.1:{health_port}", 60.0)  # the probe's 4 s default is for a container
        assert await asyncio.to_thread(main, [f"127.0.0.1:{running.port}", "--timeout", "60"]) == 0
    finally:
        await running.stop(1.0)
    assert not await asyncio.to_thread(check, f"127.0.0.1:{health_port}", 1.0)


def test_the_probe_reports_an_absent_server_and_rejects_a_nonpositive_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with refused_port() as port:
        assert main([f"127.0.0.1:{port}", "--timeout", "60"]) == 1  # refused: no wait for the deadline
    assert f"127.0.0.1:{port}: UNAVAILABLE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["127.0.0.1:1", "--timeout", "0"])
    # 1, not argparse's 2: Docker's HEALTHCHECK reserves 2 ("do not use this exit code").
    assert exited.value.code == 1 and "--timeout must be > 0 seconds" in capsys.readouterr().err


def test_the_probe_names_a_status_other_than_serving(capsys: pytest.CaptureFixture[str]) -> None:
    """NOT_SERVING exited 1 with nothing on stderr: a failing container health check logged nothing."""
    from concurrent import futures

    from grpc_health.v1 import health

    server = grpc.server(futures.ThreadPoolExecutor(2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        for status in ("NOT_SERVING", "SERVICE_UNKNOWN"):
            servicer.set("", health_pb2.HealthCheckResponse.ServingStatus.Value(status))
            assert main([f"127.0.0.1:{port}", "--timeout", "60"]) == 1
            assert capsys.readouterr().err == f"127.0.0.1:{port}: {status}\n"
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        assert main([f"127.0.0.1:{port}", "--timeout", "60"]) == 0 and capsys.readouterr().err == ""
    finally:
        server.stop(0)


def test_the_probe_reports_invalid_settings_in_one_message(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Without an address the probe reads RETRIEVAL_HEALTH_PORT and RETRIEVAL_PORT from the settings.
    monkeypatch.setenv("RETRIEVAL_PORT", "eighty")
    assert main([]) == 1  # not 2, which Docker's HEALTHCHECK reserves
    err = capsys.readouterr().err
    assert "invalid configuration" in err and "RETRIEVAL_PORT" in err


async def test_the_services_status_follows_the_stores_and_the_overall_status_stays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A readiness probe (which asks for retrieval.v1.RetrievalService) takes a process whose store
    is down out of rotation, and back when it is up; liveness ("") does not restart it meanwhile."""
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path, health_interval_s=0.05)
    running = await start_server(settings)
    ping = running.app.metadata.ping
    down = asyncio.Event()

    async def failing_ping() -> None:
        if down.is_set():
            raise ConnectionError("the store went away")
        await ping()

    monkeypatch.setattr(running.app.metadata, "ping", failing_ping)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            statuses = stub.Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
            seen = [(await asyncio.wait_for(statuses.read(), 60)).status]
            down.set()
            seen.append((await asyncio.wait_for(statuses.read(), 60)).status)
            assert (await stub.Check(health_pb2.HealthCheckRequest(service=""))).status == health_pb2.HealthCheckResponse.SERVING
            down.clear()
            seen.append((await asyncio.wait_for(statuses.read(), 60)).status)
            statuses.cancel()
    finally:
        await running.stop(1.0)
    S, N = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    assert seen == [S, N, S]


async def test_a_watch_writing_when_the_shutdown_begins_sends_the_shutdowns_status_before_it_ends() -> None:
    """The shutdown raises its flag, then sets each status, waiting for each Watch's lock: a Watch
    that was sending SERVING then saw the flag with the status not yet changed, and ended without
    sending NOT_SERVING (seen under load in the test above: [SERVING] where [SERVING, NOT_SERVING])."""
    health = _Health()
    sent: list[int] = []
    writing, release = asyncio.Event(), asyncio.Event()

    class Context:
        async def write(self, response: health_pb2.HealthCheckResponse) -> None:
            sent.append(response.status)
            if len(sent) == 1:
                writing.set()
                await release.wait()

    watch = asyncio.create_task(health.Watch(health_pb2.HealthCheckRequest(service=""), Context()))  # type: ignore[arg-type]
    await writing.wait()
    shutdown = asyncio.create_task(health.enter_graceful_shutdown())
    while not health._gracefully_shutting_down:  # the flag is raised before any status is set
        await asyncio.sleep(0)
    release.set()
    async with asyncio.timeout(60):  # the bound only ends a run that would hang
        await watch
        await shutdown
    assert sent == [health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING]


@pytest.mark.parametrize("service", ["", SERVICE_NAME, "not.served.Here"])
async def test_a_watch_ends_once_it_has_sent_the_shutdowns_status_and_holds_no_stop(tmp_path: Path, service: str) -> None:
    """gRPC's client-side health checking keeps a Watch open on every connection: it held every
    stop, an idle server's too, for the whole grace period, then ended UNAVAILABLE."""
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path)
    running = await start_server(settings)
    stopping: asyncio.Task[None] | None = None
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=service))
        try:
            first = (await asyncio.wait_for(watch.read(), 60)).status
            stopping = asyncio.create_task(running.stop(3600.0))  # a grace no test waits for

            async def rest() -> list[int]:
                statuses = []
                while (response := await watch.read()) is not grpc.aio.EOF:
                    statuses.append(response.status)
                return statuses

            statuses = [first, *await asyncio.wait_for(rest(), 60)]  # the bound only turns a Watch that stays into a failure
            assert await watch.code() == grpc.StatusCode.OK
        finally:
            watch.cancel()  # held open, it would hold the stop for its grace
            await (stopping if stopping is not None else running.stop(1.0))
    S, N, U = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING, health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
    assert statuses == ([U] if service == "not.served.Here" else [S, N])


@pytest.mark.parametrize(
    ("listen", "probed"),
    [("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("127.0.0.2", "127.0.0.2"), ("10.1.2.3", "10.1.2.3"), ("fd00::5", "[fd00::5]")],
)
def test_the_probe_asks_where_the_server_listens(listen: str, probed: str) -> None:
    assert probe_host(listen) == probed


async def test_the_probe_finds_a_server_bound_to_one_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    settings = load_settings(host="127.0.0.2", port=port, metrics_enabled=False, data_dir=tmp_path)
    running = await start_server(settings)
    try:
        monkeypatch.setenv("RETRIEVAL_HOST", "127.0.0.2")
        monkeypatch.setenv("RETRIEVAL_PORT", str(port))
        monkeypatch.setenv("RETRIEVAL_DATA_DIR", str(tmp_path))
        assert await asyncio.to_thread(main, ["--timeout", "60"]) == 0
    finally:
        await running.stop(1.0)


@pytest.mark.parametrize("names", [{"dns": ("retrieval.test",)}, {"ips": ("127.0.0.1",)}, {}])
async def test_the_probe_asks_a_tls_port_over_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                  names: dict[str, tuple[str, ...]]) -> None:
    """Without a health port, a server serving TLS is asked over TLS, trusting the chain it serves
    for the name its certificate gives (a DNS name, an address, else its common name): asked in
    plaintext, a healthy TLS container was reported unhealthy for ever. With mutual TLS the probe
    has no certificate to show, and says to set the health port."""
    from tests.support.pki import Authority

    ca = Authority(tmp_path / "pki", "probe-ca")
    served = ca.issue("retrieval-server", **names)  # type: ignore[arg-type]
    port = free_port()
    settings = load_settings(host="127.0.0.1", port=port, metrics_enabled=False, data_dir=tmp_path / "data", tls_cert=served.cert, tls_key=served.key)
    running = await start_server(settings)
    try:
        for name, value in (("RETRIEVAL_HOST", "127.0.0.1"), ("RETRIEVAL_PORT", str(port)), ("RETRIEVAL_DATA_DIR", str(tmp_path / "data")),
                            ("RETRIEVAL_TLS_CERT", str(served.cert)), ("RETRIEVAL_TLS_KEY", str(served.key))):
            monkeypatch.setenv(name, value)
        assert await asyncio.to_thread(main, ["--timeout", "60"]) == 0
        monkeypatch.setenv("RETRIEVAL_TLS_CLIENT_CA", str(ca.ca))
        assert await asyncio.to_thread(main, ["--timeout", "60"]) == 1
        assert "set RETRIEVAL_HEALTH_PORT" in capsys.readouterr().err
    finally:
        await running.stop(1.0)
