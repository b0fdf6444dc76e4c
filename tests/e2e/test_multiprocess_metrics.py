"""Two worker processes, one metrics port: a real Prometheus sees the whole server's totals, and a
scrape can ask for some series by name."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.server_process import free_port, listening_processes, wait_healthy
from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.observability.multiprocess import PREFIX, MultiprocessMetrics
from tests.support.paths import inherited_env
from tests.support.prometheus import eventually, prometheus_server, query
from tests.support.subprocesses import reaped
from tests.support.workers import listening_workers, on_new_connection

CLI = [sys.executable, "-m", "retrieval_server.cli"]
SEARCH_OK = 'sum(grpc_server_handled_total{grpc_service="retrieval.v1.RetrievalService",grpc_method="Search",grpc_code="OK"})'


def _searches(calls: int) -> Callable[[retrieval_pb2_grpc.RetrievalServiceStub], None]:
    def make(stub: retrieval_pb2_grpc.RetrievalServiceStub) -> None:
        for _ in range(calls):
            stub.Search(pb.SearchRequest(query="how do tides work", top_k=3), timeout=60)

    return make


@pytest.mark.slow
def test_one_scrape_returns_the_sum_over_workers_and_survives_a_restart(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    target = f"127.0.0.1:{port}"
    env = inherited_env("PROMETHEUS_")
    env.update(RETRIEVAL_LOG_FORMAT="json", RETRIEVAL_DATA_DIR=str(tmp_path / "data"), RETRIEVAL_HOST="127.0.0.1",
               RETRIEVAL_PORT=str(port), RETRIEVAL_METRICS_PORT=str(metrics_port), RETRIEVAL_PROCESSES="2")
    # Workers over embedded storage serve it read-only: index a document first.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tides.txt").write_text("Tides are caused by the gravitational pull of the moon on the oceans.")
    ingest = subprocess.run([*CLI, "ingest", "--local", "--quiet", str(tmp_path / "docs")], env=env, capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=(tmp_path / "server.log").open("w"), text=True)) as server:
        wait_healthy(target, server, timeout_s=180, log=tmp_path / "server.log")
        deadline = time.monotonic() + 120
        while listening_processes(server.pid, port) < 2:
            assert time.monotonic() < deadline, "the second worker never listened"
            time.sleep(0.3)
        workers = listening_workers(server, port)
        assert len(workers) == 2
        # SO_REUSEPORT spreads connections: open new ones until both workers have served some calls.
        served = [0, 0]
        for _ in range(40):
            served[on_new_connection(target, port, workers, _searches(3))] += 3
            if min(served) >= 6:
                break
        assert min(served) > 0, f"calls per worker: {served}"
        total = sum(served)

        with prometheus_server(tmp_path / "prometheus", [f"127.0.0.1:{metrics_port}"]) as prom:
            assert eventually(prom, SEARCH_OK, total) == total
            assert eventually(prom, 'sum(retrieval_requests_total{method="Search",code="OK"})', total) == total
            assert eventually(prom, 'sum(grpc_server_handling_seconds_count{grpc_method="Search"})', total) == total
            # A unary call's messages are read from its started and handled series, summed over workers.
            assert eventually(prom, 'sum(grpc_server_msg_received_total{grpc_method="Search"})', total) == total
            assert eventually(prom, 'sum(grpc_server_msg_sent_total{grpc_method="Search"})', total) == total
            assert query(prom, 'count(grpc_server_msg_sent_total{grpc_method="Search"})') == 1
            assert eventually(prom, "sum(retrieval_worker_up)", 2) == 2
            assert eventually(prom, 'count(process_resident_memory_bytes{worker=~"0|1"} > 10e6)', 2) == 2
            assert query(prom, "sum(retrieval_worker_restarts_total)") == 0

            # A worker that crashes after it served (it reported ready before its first call) is
            # restarted; its counts stay in the totals.
            workers[0].send_signal(signal.SIGKILL)
            assert eventually(prom, "sum(retrieval_worker_restarts_total)", 1) == 1
            wait_healthy(target, server, timeout_s=180, log=tmp_path / "server.log")
            deadline = time.monotonic() + 180
            while listening_processes(server.pid, port) < 2:
                assert time.monotonic() < deadline, "the restarted worker never listened"
                time.sleep(0.3)
            workers = listening_workers(server, port)
            for _ in range(4):
                on_new_connection(target, port, workers, _searches(3))
            served_after = 4 * 3
            assert eventually(prom, SEARCH_OK, total + served_after) == total + served_after
            assert eventually(prom, "sum(retrieval_worker_up)", 2) == 2
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0
    log = (tmp_path / "server.log").read_text()
    assert "restarting it" in log


_WORKER = """
from retrieval.v1 import retrieval_pb2
from retrieval_server.observability.metrics import ServiceMetrics
m = ServiceMetrics()
m.grpc.preregister([retrieval_pb2.DESCRIPTOR.services_by_name["RetrievalService"]])
m.ingested.inc(3)
"""


def test_a_scrape_of_the_workers_sum_can_ask_for_series_by_name() -> None:
    """prometheus-client's ``?name[]=`` picks collectors by the names they described when
    registered; the workers' families are known once they are written, and none was found."""
    metrics = MultiprocessMetrics()  # as the supervisor: the workers inherit its directory
    try:
        subprocess.run([sys.executable, "-c", _WORKER], env=os.environ.copy(), check=True, timeout=120)
        metrics.worker_started(0, os.getpid())
        port = metrics.serve("127.0.0.1", 0)
        for name, line in (("retrieval_ingested_documents_total", "retrieval_ingested_documents_total 3.0"),
                           ("retrieval_requests_total", 'retrieval_requests_total{code="OK",method="Query"} 0.0'),
                           ("retrieval_worker_up", 'retrieval_worker_up{worker="0"} 1.0'),
                           ("process_resident_memory_bytes", 'process_resident_memory_bytes{worker="0"}')):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics?name[]={name}", timeout=60) as resp:
                page = resp.read().decode()
            assert line in page, name
            assert "grpc_server_started_total" not in page
    finally:
        metrics.close()


def test_a_supervisor_removes_the_directories_of_supervisors_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One killed with SIGKILL left its directory, and its workers' files, in /tmp for good."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead = tmp_path / f"{PREFIX}{gone.stdout.strip()}-abc"
    running = tmp_path / f"{PREFIX}{os.getppid()}-abc"  # pytest's parent: running
    other = tmp_path / "retrieval-metrics-elsewhere"
    # A container restarted gives the new supervisor the old one's pid (1, as the entry point).
    own = tmp_path / f"{PREFIX}{os.getpid()}-old"
    for directory in (dead, running, other, own):
        directory.mkdir()
        (directory / "counter_1.db").write_bytes(b"")
    metrics = MultiprocessMetrics()
    try:
        assert metrics.directory.parent == tmp_path and metrics.directory.name.startswith(f"{PREFIX}{os.getpid()}-")
        assert not dead.exists() and not own.exists() and running.exists() and other.exists()
    finally:
        metrics.close()


_DYING_WORKER = """
import sys
from prometheus_client import Counter, Gauge, Histogram
n = int(sys.argv[1])
Counter("t_calls", "calls", ["code"]).labels("OK").inc(n)
Histogram("t_seconds", "latency", buckets=(1.0, 2.0)).observe(n)
Gauge("t_busy", "busy", multiprocess_mode="livesum").set(1)
"""


def _sampled(metrics: MultiprocessMetrics) -> dict[str, float]:
    return {f"{s.name}{sorted(s.labels.items())}": s.value for family in metrics.registry.collect() for s in family.samples if s.name.startswith("t_")}


def test_a_dead_workers_counts_are_kept_and_its_files_removed() -> None:
    """Each restart left the dead worker's files, read by every scrape for the supervisor's life
    (1,500 restarts: 3,000 files, 2.6 s a scrape)."""
    metrics = MultiprocessMetrics()  # as the supervisor: the workers inherit its directory
    try:
        restarts = 5
        for n in range(1, restarts + 1):
            proc = subprocess.Popen([sys.executable, "-c", _DYING_WORKER, str(n)], env=os.environ.copy())
            assert proc.wait(timeout=120) == 0
            metrics.worker_started(0, proc.pid)
            if n > 1:
                metrics.worker_restarted(0)
            before = _sampled(metrics)  # its files still there, as while it ran
            metrics.worker_exited(0, proc.pid)
            after = _sampled(metrics)
            # Nothing counted goes backwards, or is counted twice, as its values move to the supervisor's memory.
            assert {k: v for k, v in after.items() if "t_busy" not in k} == {k: v for k, v in before.items() if "t_busy" not in k}
            assert not any("t_busy" in k for k in after)  # a live* gauge forgets the dead
            # No file written in their place: an mmapped one on a full /tmp was a SIGBUS in the supervisor.
            assert list(metrics.directory.iterdir()) == []
        total = sum(range(1, restarts + 1))
        assert after["t_calls_total[('code', 'OK')]"] == total
        assert after["t_seconds_sum[]"] == total
        assert after["t_seconds_count[]"] == restarts
        assert after["t_seconds_bucket[('le', '1.0')]"] == 1
        assert after["t_seconds_bucket[('le', '2.0')]"] == 2
        assert after["t_seconds_bucket[('le', '+Inf')]"] == restarts
    finally:
        metrics.close()


_SUPERVISOR_ON_A_FULL_DISK = """
import os, resource, signal, subprocess, sys
from retrieval_server.observability.multiprocess import MultiprocessMetrics
metrics = MultiprocessMetrics()
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1], "3"], env=os.environ.copy())
assert worker.wait() == 0
metrics.worker_started(0, worker.pid)
# No file may grow from here on: EFBIG, as the signal is ignored, where a full disk is ENOSPC
# (or SIGBUS for an mmapped page).
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
metrics.worker_exited(0, worker.pid)
samples = {s.name: s.value for family in metrics.registry.collect() for s in family.samples}
print(samples["t_calls_total"], samples["t_seconds_count"])
metrics.close()
"""


def test_a_dead_workers_counts_are_kept_by_a_supervisor_that_can_write_no_file() -> None:
    """The dead worker's values were added to an mmapped archive file the supervisor created: on a
    full /tmp that write was a SIGBUS, and the supervisor died with every worker."""
    done = subprocess.run([sys.executable, "-c", _SUPERVISOR_ON_A_FULL_DISK, _DYING_WORKER], env=inherited_env("PROMETHEUS_"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["3.0", "1.0"]
