"""A real Prometheus server (Debian's package) scraping given targets, started and stopped by the tests."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.server_process import free_port
from tests.support.paths import require_binary


@contextmanager
def prometheus_server(workdir: Path, targets: list[str]) -> Iterator[str]:
    """Scrape ``targets`` (host:port) every second as job ``retrieval``; yields the HTTP API's base URL."""
    binary = require_binary("prometheus", "/usr/bin/prometheus")
    workdir.mkdir(parents=True, exist_ok=True)
    listed = ", ".join(f"'{t}'" for t in targets)
    (workdir / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: retrieval\n    static_configs: [{{targets: [{listed}]}}]\n"
    )
    web = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [binary, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address={web}"],
        stdout=subprocess.DEVNULL, stderr=(workdir / "prometheus.log").open("wb"),
    )
    try:
        yield f"http://{web}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def query(base: str, promql: str) -> float | None:
    """The first value of an instant query, or None when there is none (or Prometheus is not up yet)."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            result = json.load(resp)["data"]["result"]
    except OSError:
        return None
    return float(result[0]["value"][1]) if result else None


def eventually(base: str, promql: str, at_least: float, timeout_s: float = 60.0) -> float:
    """Wait until the query's value reaches ``at_least`` (scrapes are asynchronous); return it."""
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = query(base, promql)
        if value is not None and value >= at_least:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{promql} = {value}, expected at least {at_least}")
