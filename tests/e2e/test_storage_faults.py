"""Storage the engines cannot use: a read-only volume, a full one, a port in use (issue #9 defects 5, 6, 10).

Each runs `retrieval-server serve` as a real process on a tmpfs of its own (tests/support/volumes.py):
start-up failures exit non-zero with one clear line (no traceback, no hang, no SIGBUS); a
read-only volume is served with RETRIEVAL_READ_ONLY=true; a volume that fills up while serving
refuses ingests with RESOURCE_EXHAUSTED, says so in Health, keeps answering queries, and accepts
ingests again once space is back.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from bench.server_process import free_port, wait_healthy
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_client import RetrievalClient
from tests.support.paths import inherited_env
from tests.support.volumes import Volume, fill, require_private_mounts

CLI = [sys.executable, "-m", "retrieval_server.cli"]
pytestmark = pytest.mark.slow


def _env(data: Path, port: int, **extra: str) -> dict[str, str]:
    env = inherited_env()
    env.update(RETRIEVAL_DATA_DIR=str(data), RETRIEVAL_PORT=str(port), RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_METRICS_PORT="0",
               RETRIEVAL_LOG_FORMAT="json")
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small data folder with one document, built by the CLI."""
    root = tmp_path_factory.mktemp("index")
    require_private_mounts(root)
    (root / "docs").mkdir()
    (root / "docs" / "tides.txt").write_text("Tides are caused by the gravitational pull of the moon on the oceans.")
    data = root / "data"
    r = subprocess.run([*CLI, "ingest", "--local", "--quiet", str(root / "docs")], env=_env(data, 0), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return data


def _fails_at_startup_with_stderr(argv: list[str], env: dict[str, str]) -> tuple[str, str]:
    """Run a server that must not start; return its one error line and all it wrote to stderr."""
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])  # not a signal (SIGBUS), not a hang
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0], proc.stderr


def _fails_at_startup(argv: list[str], env: dict[str, str]) -> str:
    """Run a server that must not start; return its one error line."""
    return _fails_at_startup_with_stderr(argv, env)[0]


@pytest.fixture
def server_proc() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_read_only_volume_is_refused_with_one_line(index: Path, tmp_path: Path) -> None:
    volume = Volume(tmp_path / "ro", 64, seed=index, read_only=True)
    line = _fails_at_startup(volume.command([*CLI, "serve"]), _env(volume.mountpoint, free_port()))
    assert "not writable" in line and "RETRIEVAL_READ_ONLY=true" in line


def test_read_only_mode_serves_a_read_only_volume(index: Path, tmp_path: Path, server_proc: list[subprocess.Popen[str]]) -> None:
    volume = Volume(tmp_path / "ro", 64, seed=index, read_only=True)
    port = free_port()
    proc = subprocess.Popen(volume.command([*CLI, "serve"]), env=_env(volume.mountpoint, port, RETRIEVAL_READ_ONLY="true"),
                            stderr=subprocess.PIPE, text=True)
    server_proc.append(proc)
    wait_healthy(f"127.0.0.1:{port}", proc, timeout_s=180)
    with RetrievalClient(f"127.0.0.1:{port}", role="ADMIN") as client:
        assert client.query("why are there tides", top_k=1).contexts[0].document_id == "tides"
        with pytest.raises(grpc.RpcError) as err:
            client.ingest([pb.DocumentInput(filename="x.txt", content=b"new text")])
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 0


def test_a_volume_below_the_floor_is_refused_at_startup_without_sigbus(index: Path, tmp_path: Path) -> None:
    # 8 MiB is less than a new vector index preallocates: the engine used to die of SIGBUS here.
    empty = Volume(tmp_path / "small", 8)
    line = _fails_at_startup(empty.command([*CLI, "serve"]), _env(empty.mountpoint, free_port()))
    assert "RETRIEVAL_MIN_FREE_DISK_MB" in line and "MiB free" in line
    # An existing index on a nearly full volume: loading it used to fault as well.
    seeded = Volume(tmp_path / "seeded", 24, seed=index)
    line = _fails_at_startup(seeded.command([*CLI, "serve"]), _env(seeded.mountpoint, free_port(), RETRIEVAL_MIN_FREE_DISK_MB="32"))
    assert "below the floor" in line
    # Above the floor, but without room for what opening the index writes: the engine faults its
    # vectors in whole (64 MiB for this one-document index, which has too few points for payload
    # indexes), which used to be a SIGBUS.
    roomy = Volume(tmp_path / "roomy", 64, seed=index)
    line = _fails_at_startup(roomy.command([*CLI, "serve"]), _env(roomy.mountpoint, free_port(), RETRIEVAL_MIN_FREE_DISK_MB="16"))
    assert "opening the vector index needs about" in line and "below the floor" in line


def test_a_volume_that_fills_up_refuses_ingests_and_recovers(index: Path, tmp_path: Path, server_proc: list[subprocess.Popen[str]]) -> None:
    volume = Volume(tmp_path / "fills", 160, seed=index)  # room for the index once open (see above)
    port = free_port()
    proc = subprocess.Popen(volume.command([*CLI, "serve"]), env=_env(volume.mountpoint, port, RETRIEVAL_MIN_FREE_DISK_MB="16"),
                            stderr=subprocess.DEVNULL, text=True)
    server_proc.append(proc)
    wait_healthy(f"127.0.0.1:{port}", proc, timeout_s=180)
    filler = fill(volume.seen_from(proc.pid), leave_bytes=64 * 1024)
    doc = pb.DocumentInput(filename="glaciers.txt", content=b"Glaciers carve valleys over thousands of years.")
    with RetrievalClient(f"127.0.0.1:{port}", role="ADMIN") as client:
        with pytest.raises(grpc.RpcError) as err:
            client.ingest([doc])
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "RETRIEVAL_MIN_FREE_DISK_MB=16" in (err.value.details() or "")
        health = client.health()
        assert health.status == pb.SERVING_STATUS_DEGRADED
        assert {c.name: c.status for c in health.components}["disk"] == pb.SERVING_STATUS_DEGRADED
        assert client.query("why are there tides", top_k=1).contexts[0].document_id == "tides"  # still serving
        filler.unlink()
        assert not client.ingest([doc]).errors
        assert client.health().status == pb.SERVING_STATUS_SERVING
    assert proc.poll() is None


def test_a_second_server_on_a_port_in_use_fails(tmp_path: Path, server_proc: list[subprocess.Popen[str]]) -> None:
    port = free_port()
    first = subprocess.Popen([*CLI, "serve"], env=_env(tmp_path / "a", port), stderr=subprocess.DEVNULL, text=True)
    server_proc.append(first)
    wait_healthy(f"127.0.0.1:{port}", first, timeout_s=180)
    line = _fails_at_startup([*CLI, "serve"], _env(tmp_path / "b", port))
    assert "address already in use" in line
    # Nor may a supervisor of several processes join it.
    line = _fails_at_startup([*CLI, "serve"], _env(tmp_path / "c", port, RETRIEVAL_PROCESSES="2"))
    assert "address already in use" in line
    # Nor a server on a name of several addresses, one of them the first's: gRPC binds the others
    # and serves, and the clients of localhost:port were shared out between two indexes.
    for processes in ("1", "2"):
        line = _fails_at_startup([*CLI, "serve"], _env(tmp_path / "d", port, RETRIEVAL_HOST="localhost", RETRIEVAL_PROCESSES=processes))
        assert "address already in use" in line and f"localhost:{port}" in line
    with RetrievalClient(f"127.0.0.1:{port}") as client:
        assert client.health().status == pb.SERVING_STATUS_SERVING


def test_a_supervisor_whose_workers_cannot_start_fails_with_one_line(tmp_path: Path) -> None:
    line, stderr = _fails_at_startup_with_stderr([*CLI, "serve"], _env(tmp_path / "empty", free_port(), RETRIEVAL_PROCESSES="2"))
    assert "could not start" in line and "ingest into it first" in line
    # Each worker logged its reason at ERROR too, before the supervisor's line: up to 3 times with 2.
    assert stderr.count("ingest into it first") == 1, stderr


def test_a_server_cannot_join_a_supervisors_port(index: Path, tmp_path: Path, server_proc: list[subprocess.Popen[str]]) -> None:
    port = free_port()
    shutil.copytree(index, tmp_path / "a")
    supervisor = subprocess.Popen([*CLI, "serve"], env=_env(tmp_path / "a", port, RETRIEVAL_PROCESSES="2"), stderr=subprocess.DEVNULL, text=True)
    server_proc.append(supervisor)
    wait_healthy(f"127.0.0.1:{port}", supervisor, timeout_s=240)
    for extra in ({}, {"RETRIEVAL_PROCESSES": "2"}):
        line = _fails_at_startup([*CLI, "serve"], _env(tmp_path / "b", port, **extra))
        assert "address already in use" in line
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=180) == 0
