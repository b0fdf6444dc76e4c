"""A real redis-server on loopback with a temporary directory, started and stopped by the tests."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from bench.server_process import free_port
from tests.support.controlled_process import ControlledProcess
from tests.support.paths import require_binary

#: A per-call limit a healthy Redis meets on a busy machine; a frozen one costs a call this long
#: before the breaker opens.
HEALTHY_REDIS_S = 5.0


class Redis(ControlledProcess):
    """One server that a test may stop, restart on the same port, freeze and thaw."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self._binary = require_binary("redis-server", "/usr/bin/redis-server")
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self._binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                redis.Redis.from_url(self.url).ping()
                return
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.1)


@contextmanager
def redis_server(workdir: Path, *, port: int | None = None, keep_process: bool = False) -> Iterator[Any]:
    """Yield the server's URL, or ``(url, process)`` with ``keep_process`` (for tests that stop or freeze it)."""
    server = Redis(workdir, port)
    server.start()
    try:
        yield (server.url, server.proc) if keep_process else server.url
    finally:
        server.stop()
