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
from tests.support.paths import require_binary


@contextmanager
def redis_server(workdir: Path, *, port: int | None = None, keep_process: bool = False) -> Iterator[Any]:
    """Yield the server's URL, or ``(url, process)`` with ``keep_process`` (for tests that stop or freeze it)."""
    binary = require_binary("redis-server", "/usr/bin/redis-server")
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.1)
        yield (url, proc) if keep_process else url
    finally:
        if proc.poll() is None:
            proc.send_signal(18)  # SIGCONT: a frozen server must be able to act on SIGTERM
            proc.terminate()
        proc.wait(timeout=30)
