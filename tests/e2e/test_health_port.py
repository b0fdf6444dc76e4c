"""RETRIEVAL_HEALTH_PORT: grpc.health.v1 alone, plaintext, for probes that cannot speak TLS."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.server_process import free_port
from retrieval_server.config import load_settings
from retrieval_server.healthcheck import check, main
from retrieval_server.server import start_server


async def test_the_health_port_follows_the_servers_status(tmp_path: Path) -> None:
    health_port = free_port()
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path, health_port=health_port)
    running = await start_server(settings)
    try:
        assert await asyncio.to_thread(check, f"127.0.0.1:{health_port}", 60.0)  # the probe's 4 s default is for a container
        assert await asyncio.to_thread(main, [f"127.0.0.1:{running.port}"]) == 0
    finally:
        await running.stop(1.0)
    assert not await asyncio.to_thread(check, f"127.0.0.1:{health_port}", 1.0)
