"""A real Prometheus server scrapes the service's /metrics endpoint."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from bench.server_process import free_port
from retrieval.v1 import retrieval_pb2 as pb
from tests.e2e.conftest import Live

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


@pytest.fixture(scope="module")
def prometheus(live: Live, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not Path(PROMETHEUS).is_file():
        pytest.skip("no prometheus binary (scripts/test.sh installs Debian's prometheus package)")
    d = tmp_path_factory.mktemp("prometheus")
    (d / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: retrieval\n    static_configs: [{{targets: ['127.0.0.1:{live.running.metrics_port}']}}]\n"
    )
    web = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={d / 'prometheus.yml'}", f"--storage.tsdb.path={d / 'data'}", f"--web.listen-address={web}"],
        stdout=subprocess.DEVNULL, stderr=(d / "prometheus.log").open("wb"),
    )
    try:
        yield f"http://{web}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _query(base: str, promql: str) -> float | None:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            result = json.load(resp)["data"]["result"]
    except OSError:
        return None  # not listening yet
    return float(result[0]["value"][1]) if result else None


def _eventually(base: str, promql: str, at_least: float, timeout_s: float = 60.0) -> float:
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = _query(base, promql)
        if value is not None and value >= at_least:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{promql} = {value}, expected at least {at_least}")


async def test_prometheus_scrapes_requests_stages_and_errors(live: Live, prometheus: str) -> None:
    for q in ("rank fusion", "semantic cache", "parent chunks"):
        await live.stub.Query(pb.QueryRequest(query=q, top_k=2, use_cache=False))
    with pytest.raises(grpc.aio.AioRpcError):
        await live.stub.Query(pb.QueryRequest(query="   "))
    assert _eventually(prometheus, 'up{job="retrieval"}', 1) == 1
    assert _eventually(prometheus, 'retrieval_requests_total{method="Query",code="OK"}', 3) >= 3
    assert _eventually(prometheus, 'retrieval_requests_total{method="Query",code="INVALID_ARGUMENT"}', 1) == 1
    assert _eventually(prometheus, 'retrieval_stage_duration_seconds_count{stage="retrieve"}', 3) >= 3
    assert _eventually(prometheus, 'retrieval_query_cache_total{outcome="miss"}', 3) >= 3
    assert _eventually(prometheus, "process_resident_memory_bytes", 1) > 10e6
