"""`retrieval-server serve` as a real process: startup errors and graceful SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from retrieval.v1 import retrieval_pb2 as pb
from retrieval.v1 import retrieval_pb2_grpc
from retrieval_client import AsyncRetrievalClient, RetrievalClient
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from bench.server_process import free_port, listening_processes, wait_healthy
from tests.support.paths import inherited_env
from tests.support.subprocesses import reaped
from tests.support.workers import listening_workers, on_new_connection

CLI = [sys.executable, "-m", "retrieval_server.cli"]


def _env(**extra: str) -> dict[str, str]:
    env = inherited_env()
    env.update(RETRIEVAL_LOG_FORMAT="json", RETRIEVAL_METRICS_PORT="0", **extra)
    return env


def test_invalid_setting_is_a_clear_startup_error() -> None:
    proc = subprocess.run([*CLI, "serve"], env=_env(RETRIEVAL_PORT="eighty"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "invalid configuration" in proc.stderr and "RETRIEVAL_PORT" in proc.stderr


def test_second_process_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    port = free_port()
    env = _env(RETRIEVAL_DATA_DIR=str(tmp_path), RETRIEVAL_PORT=str(port), RETRIEVAL_HOST="127.0.0.1")
    server = subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        _wait_serving(f"127.0.0.1:{port}", server)
        second = subprocess.run([*CLI, "ingest", "--local", str(tmp_path / "nothing.txt")], env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert "open in another process" in second.stderr
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
def test_an_index_of_other_vectors_is_a_clear_startup_error(tmp_path: Path, backend: str) -> None:
    """A Dot-distance index (made by something else) is refused with one line naming it, not served."""
    import qdrant_edge as qe
    from qdrant_client import QdrantClient, models

    env = _env(RETRIEVAL_DATA_DIR=str(tmp_path / "data"), RETRIEVAL_PORT=str(free_port()), RETRIEVAL_HOST="127.0.0.1")
    if backend == "edge":
        (tmp_path / "data" / "vectors").mkdir(parents=True)
        qe.EdgeShard.create(str(tmp_path / "data" / "vectors"), qe.EdgeConfig(
            vectors={"dense": qe.EdgeVectorParams(size=384, distance=qe.Distance.Dot)},
            sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)})).close()
    else:
        env["RETRIEVAL_QDRANT_PATH"] = str(tmp_path / "qdrant")
        client = QdrantClient(path=str(tmp_path / "qdrant"))
        client.create_collection("retrieval_chunks", vectors_config={"dense": models.VectorParams(size=384, distance=models.Distance.DOT)},
                                 sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)})
        client.close()
    proc = subprocess.run([*CLI, "serve"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "compares 'dense' vectors by Dot distance" in errors[0] and "a new RETRIEVAL_DATA_DIR" in errors[0]


def drain(proc: subprocess.Popen[str], msg: str = "document stored", count: int = 1) -> tuple[list[str], threading.Event, threading.Thread]:
    """Read the process's stderr to the end in a thread (a full pipe would block its logging);
    the event is set once ``count`` lines have logged ``msg``, or at the end of the stream. The
    lines are all there once the thread has ended (joined), not when the process has."""
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        found = 0
        for line in proc.stderr:
            lines.append(line)
            if f'"msg": "{msg}"' in line:
                found += 1
                if found == count:
                    seen.set()
        seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return lines, seen, reader


def _wait_serving(target: str, proc: subprocess.Popen[str]) -> None:
    wait_healthy(target, proc, timeout_s=300)


@pytest.mark.slow
async def test_sigterm_finishes_in_flight_calls_and_closes_backends(tmp_path: Path) -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    # The grace period is an upper bound on an orderly stop, never waited out: it only has to exceed
    # the ingest on the slowest machine. The ingest is known to be in flight from the server's own
    # "document stored" events (small upsert batches: many of them), not from a sleep.
    env = _env(RETRIEVAL_DATA_DIR=str(tmp_path), RETRIEVAL_PORT=str(port), RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_GRACE_PERIOD_S="3600",
               RETRIEVAL_LOG_LEVEL="DEBUG", RETRIEVAL_UPSERT_BATCH_SIZE="16")
    server = subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)
    logs, stored, reader = drain(server)
    await asyncio.to_thread(wait_healthy, target, server, 600)
    docs = [
        pb.DocumentInput(document_id=f"doc{i}", filename=f"doc{i}.txt", content=f"Document {i} talks about topic {i % 17} at length. {'More words here. ' * 40}".encode())
        for i in range(60)
    ]
    async with AsyncRetrievalClient(target, role="ADMIN", timeout=3600) as client:
        call = asyncio.ensure_future(client.ingest(docs))
        await asyncio.to_thread(stored.wait)
        assert not call.done()
        server.send_signal(signal.SIGTERM)
        resp = await call
    assert len(resp.documents) == 60 and not resp.errors
    assert await asyncio.to_thread(server.wait, 3600) == 0
    await asyncio.to_thread(reader.join)  # the stream's end: its last lines may still be on their way when the process has ended
    assert '"msg": "stopped"' in "".join(logs)

    # Everything the in-flight call wrote was flushed and the folder was released.
    app = Application(load_settings(data_dir=tmp_path))
    await app.open()
    try:
        assert await app.metadata.count_documents() == 60
        assert await app.vectors.count() == sum(d.child_chunks for d in resp.documents)
    finally:
        await app.close()


def test_sigterm_while_a_store_does_not_answer_ends_the_start_up(tmp_path: Path) -> None:
    """A start-up waiting on a store that never answers stops on SIGTERM, closing what it opened;
    it used to wait out the store's timeout (an hour here), and only SIGKILL ended it sooner."""
    with socket.socket() as silent:  # accepts MySQL's connection, and never greets it
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        env = _env(RETRIEVAL_DATA_DIR=str(tmp_path), RETRIEVAL_PORT=str(free_port()), RETRIEVAL_HOST="127.0.0.1",
                   RETRIEVAL_MYSQL_DSN=f"mysql://u:p@127.0.0.1:{silent.getsockname()[1]}/db", RETRIEVAL_MYSQL_TIMEOUT_S="3600")
        server = subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)
        with reaped(server):
            logs, _, reader = drain(server)
            silent.settimeout(600)
            connection, _ = silent.accept()  # the server is starting: its signal handlers are in place
            with connection:
                server.send_signal(signal.SIGTERM)
                # The bound turns the old wait (the store's hour) into a failure; the stop takes seconds.
                assert server.wait(timeout=600) == 0
            reader.join()
    assert '"msg": "stopped while starting"' in "".join(logs)


def test_cli_ingest_reports_broken_files_and_goes_on(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text("# Guide\n\nThe guide explains how to reset a password.")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    (folder / "ignored.bin").write_bytes(b"\x00")  # not a supported type: a folder scan skips it
    env = _env(RETRIEVAL_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run(
        [*CLI, "ingest", "--local", "--access", "private", "--owner", "alice", str(folder)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 3, proc.stderr  # some stored, some failed: a script can tell
    assert "added     guide" in proc.stdout
    assert "broken.pdf" in proc.stderr and "not a readable PDF" in proc.stderr
    assert "1 documents indexed, 1 failed" in proc.stderr
    again = subprocess.run([*CLI, "ingest", "--local", str(folder / "guide.md"), "--access", "private", "--owner", "alice"],
                           env=env, capture_output=True, text=True, timeout=300)
    assert "unchanged guide  (1 parents, 1 children)" in again.stdout  # stored as sent: nothing embedded again


def test_cli_ingest_local_imports_no_query_side_or_unconfigured_modules(tmp_path: Path) -> None:
    """Two small files through `ingest --local` should cost the model, not imports: no numba kernel
    is called on that path, and nothing optional is configured."""
    (tmp_path / "a.txt").write_text("Tides are caused by the gravitational pull of the moon.")
    (tmp_path / "b.md").write_text("# Bread\n\nSourdough rises because wild yeast ferments the dough.")
    script = (
        "import json, sys\n"
        "from retrieval_server import cli\n"
        f"code = cli.main(['ingest', '--local', '--quiet', {str(tmp_path / 'a.txt')!r}, {str(tmp_path / 'b.md')!r}])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], env=_env(RETRIEVAL_DATA_DIR=str(tmp_path / "data")), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    *printed, last = proc.stdout.splitlines()
    result = json.loads(last)
    assert result["code"] == 0 and any(line.startswith("added     a") for line in printed), proc.stdout + proc.stderr
    # gRPC and the generated code included: a command that serves no RPC has none to count.
    unwanted = ("numba", "llvmlite", "networkx", "httpx", "rich", "aio_pika", "asyncmy", "redis", "qdrant_client", "opentelemetry.sdk",
                "grpc", "google.protobuf", "retrieval", "rapidfuzz")
    loaded = {m for m in result["modules"] if any(m == u or m.startswith(u + ".") for u in unwanted)}
    assert not loaded, sorted(loaded)
    # The query workflow is built when a server first asks for it; ingestion reads the term
    # statistics (adaptive) and the glossary (analysis, with its asyncio-only helper abandon and
    # model_text, whose characters-a-token bound it cuts a model's text by) only.
    workflow = {m for m in result["modules"] if m.startswith("retrieval_server.workflow.")}
    assert workflow <= {f"retrieval_server.workflow.{name}" for name in ("adaptive", "analysis", "abandon", "model_text")}, sorted(workflow)


@pytest.mark.slow
def test_two_processes_share_the_port_and_serve_read_only_copies(tmp_path: Path) -> None:
    import psutil

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "tides.txt").write_text("Tides are caused by the gravitational pull of the moon on the oceans.")
    (folder / "bread.txt").write_text("Sourdough bread rises because wild yeast ferments the dough overnight.")
    data = tmp_path / "data"
    ingest = subprocess.run([*CLI, "ingest", "--local", "--quiet", str(folder)], env=_env(RETRIEVAL_DATA_DIR=str(data)),
                            capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    port = free_port()
    env = _env(RETRIEVAL_DATA_DIR=str(data), RETRIEVAL_PORT=str(port), RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_PROCESSES="2")
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)) as server:
        _wait_serving(f"127.0.0.1:{port}", server)
        deadline = time.monotonic() + 300
        while listening_processes(server.pid, port) < 2:
            assert time.monotonic() < deadline, "the second worker never listened"
            time.sleep(0.3)
        workers = listening_workers(server, port)
        assert len(workers) == 2

        def ask(stub: retrieval_pb2_grpc.RetrievalServiceStub) -> None:
            for _ in range(5):
                resp = stub.Query(pb.QueryRequest(query="what makes bread rise", top_k=1, use_cache=False), timeout=60)
                assert resp.contexts[0].document_id == "bread"

        # SO_REUSEPORT spreads connections, not calls: open new ones until both workers have answered on one.
        served = [0, 0]
        for _ in range(40):
            served[on_new_connection(f"127.0.0.1:{port}", port, workers, ask)] += 1
            if min(served) > 0:
                break
        assert min(served) > 0, f"connections per worker: {served}"
        with RetrievalClient(f"127.0.0.1:{port}", role="ADMIN") as client:
            with pytest.raises(grpc.RpcError) as err:
                client.ingest([pb.DocumentInput(filename="x.txt", content=b"new text")])
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "read-only" in err.value.details()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=90) == 0
        assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)


@pytest.mark.slow
@pytest.mark.parametrize(("loop", "processes"), [("uvloop", 1), ("asyncio", 1), ("asyncio", 2)])
def test_serve_runs_on_the_configured_event_loop_and_stops_on_sigterm(tmp_path: Path, loop: str, processes: int) -> None:
    (tmp_path / "tides.txt").write_text("Tides are caused by the gravitational pull of the moon on the oceans.")
    data = tmp_path / "data"
    ingest = subprocess.run([*CLI, "ingest", "--local", "--quiet", str(tmp_path / "tides.txt")], env=_env(RETRIEVAL_DATA_DIR=str(data)),
                            capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    port = free_port()
    env = _env(RETRIEVAL_DATA_DIR=str(data), RETRIEVAL_PORT=str(port), RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_EVENT_LOOP=loop,
               RETRIEVAL_PROCESSES=str(processes))
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)) as server:
        # Each process (each worker of several) logs "serving" once its health is SERVING.
        logs, serving, _ = drain(server, "serving", count=processes)
        _wait_serving(f"127.0.0.1:{port}", server)
        # A bound against a hang only (a server that never logs the line): it ends at the line.
        assert serving.wait(timeout=300), "".join(logs)
        started = [json.loads(line) for line in logs if '"msg": "serving"' in line]
        assert [s["event_loop"] for s in started] == [loop] * processes, "".join(logs)
        with RetrievalClient(f"127.0.0.1:{port}") as client:
            # a miss, a cache hit through the workflow, then the response bytes kept for repeats
            for _ in range(3):
                assert client.query("what causes tides", top_k=1).contexts[0].document_id == "tides"
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=90) == 0


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_a_hangup_of_the_process_group_stops_every_process_gracefully(tmp_path: Path, processes: int) -> None:
    """A closed terminal sends SIGHUP to its whole process group: its default killed a single
    server, and a supervisor's workers, with their calls in flight. Each now drains ("shutting
    down"), a worker on the SIGTERM its supervisor forwards."""
    (tmp_path / "tides.txt").write_text("Tides are caused by the gravitational pull of the moon on the oceans.")
    data = tmp_path / "data"
    ingest = subprocess.run([*CLI, "ingest", "--local", "--quiet", str(tmp_path / "tides.txt")], env=_env(RETRIEVAL_DATA_DIR=str(data)),
                            capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    env = _env(RETRIEVAL_DATA_DIR=str(data), RETRIEVAL_PORT=str(free_port()), RETRIEVAL_HOST="127.0.0.1", RETRIEVAL_PROCESSES=str(processes))
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)) as server:
        logs, serving, reader = drain(server, "serving", count=processes)
        assert serving.wait(timeout=300) and server.poll() is None, "".join(logs)
        os.killpg(server.pid, signal.SIGHUP)
        assert server.wait(timeout=300) == 0, "".join(logs)
        reader.join()
    records = [json.loads(line) for line in logs if line.startswith("{")]
    stopped = [r["pid"] for r in records if r["logger"] == "retrieval_server.server" and r["msg"] == "stopped"]
    served = [r["pid"] for r in records if r["msg"] == "serving"]
    assert sorted(stopped) == sorted(served) and len(served) == processes, "".join(logs)


#: ``serve`` through the console script's entry point, sent SIGTERM once that has begun: as soon as
#: a process can be (Popen returning is sooner still, before Python has started)
SIGTERM_AT_ENTRY = """
import os, signal, sys
from retrieval_server import cli
serve = cli.main
def main(argv, keep):
    os.kill(os.getpid(), signal.SIGTERM)
    return serve(argv, keep)
cli.main = main
sys.argv = ["retrieval-server", "serve"]
cli.run()
"""


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_a_sigterm_as_serve_starts_stops_it_cleanly(tmp_path: Path, processes: int) -> None:
    """Until serve handled SIGTERM (the settings read, the server's modules imported), the signal
    took its default: as PID 1 (the image's entry point) one that has none is dropped, and docker
    stop waited out its timeout. It is caught from the entry point on, and stops the start-up."""
    env = _env(RETRIEVAL_DATA_DIR=str(tmp_path / "data"), RETRIEVAL_PORT=str(free_port()), RETRIEVAL_HOST="127.0.0.1",
               RETRIEVAL_PROCESSES=str(processes))
    done = subprocess.run([sys.executable, "-c", SIGTERM_AT_ENTRY], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    messages = [json.loads(line)["msg"] for line in done.stderr.splitlines() if line.startswith("{")]
    if processes == 1:
        assert messages == ["stopped while starting"], done.stderr
    else:
        assert messages[-1] == "stopped" and "worker starting" not in messages, done.stderr  # no worker was started
