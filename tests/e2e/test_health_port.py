"""RETRIEVAL_HEALTH_PORT: grpc.health.v1 alone, plaintext, for probes that cannot speak TLS."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.server_process import free_port
from retrieval_server.config import load_settings
from retrieval_server.healthcheck import check, main
from retrieval_server.server import start_server
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
    assert exited.value.code == 2 and "--timeout must be > 0 seconds" in capsys.readouterr().err


def test_the_probe_reports_invalid_settings_in_one_message(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Without an address the probe reads RETRIEVAL_HEALTH_PORT and RETRIEVAL_PORT from the settings.
    monkeypatch.setenv("RETRIEVAL_PORT", "eighty")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "invalid configuration" in err and "RETRIEVAL_PORT" in err
