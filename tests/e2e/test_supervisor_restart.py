"""A worker of a multi-process server killed and restarted: what it left behind is removed; the
workers' log lines reach the supervisor's stderr whole."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from bench.server_process import free_port
from tests.support.paths import inherited_env
from tests.support.subprocesses import reaped

CLI = [sys.executable, "-m", "retrieval_server.cli"]


def _record(line: str) -> dict[str, Any] | None:
    """The JSON record ``line`` holds; None for another line (the CLI's ``error:``, or a line
    another process's cut into)."""
    if not line.startswith("{"):
        return None
    try:
        return json.loads(line)  # type: ignore[no-any-return]
    except ValueError:
        return None


class _Serving:
    """Reads a server's JSON log to its end; ``wait(n)`` returns the pids of the first ``n``
    workers that logged "worker ready", which they do once the supervisor knows it (None if the log
    ended first). Killed between "serving" and that report, a worker counts as one that could not
    start, and the supervisor stops."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.pids: list[int] = []
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with self._changed:
                self.lines.append(line)
                if (record := _record(line)) is not None and record.get("msg") == "worker ready":
                    self.pids.append(record["pid"])
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait(self, n: int) -> list[int] | None:
        return self.pids[:n] if self.until(lambda: len(self.pids) >= n) else None

    def until(self, done: Callable[[], bool]) -> bool:
        """Wait until ``done()`` (asked each time a line comes) or the log's end; whether it is done."""
        with self._changed:
            # The timeout only turns a hung server into a failure instead of a stalled suite.
            self._changed.wait_for(lambda: done() or self._ended, timeout=600)
            return done()

    def messages(self, text: str) -> list[dict[str, Any]]:
        """The JSON records logged so far whose message holds ``text``."""
        with self._changed:
            return [record for line in self.lines if (record := _record(line)) is not None and text in record["msg"]]

    def join(self) -> None:
        self._reader.join()


def _two_workers(tmp_path: Path, port: int) -> tuple[dict[str, str], Path]:
    """The environment of a two-process server over a one-document index, and its temporary
    folder, where read-only workers copy the index."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = inherited_env("PROMETHEUS_")
    env.update(TMPDIR=str(scratch), RETRIEVAL_LOG_FORMAT="json", RETRIEVAL_DATA_DIR=str(tmp_path / "data"), RETRIEVAL_HOST="127.0.0.1",
               RETRIEVAL_PORT=str(port), RETRIEVAL_METRICS_PORT="0", RETRIEVAL_PROCESSES="2")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tides.txt").write_text("Tides are caused by the gravitational pull of the moon on the oceans.")
    ingest = subprocess.run([*CLI, "ingest", "--local", "--quiet", str(tmp_path / "docs")], env=env, capture_output=True, text=True, timeout=300)
    assert ingest.returncode == 0, ingest.stderr
    return env, scratch


@contextlib.contextmanager
def _two_serving(env: dict[str, str]) -> Iterator[tuple[_Serving, list[int]]]:
    """``serve`` with ``env`` until both workers are ready: its log and the workers' pids. Left
    without an error, it is stopped with SIGTERM and must exit 0."""
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)) as server:
        log = _Serving(server)
        first = log.wait(2)
        assert first is not None, "".join(log.lines[-20:])
        yield log, first
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=300) == 0, "".join(log.lines[-20:])
        log.join()


@pytest.mark.slow
def test_the_workers_log_lines_reach_a_slow_reader_whole(tmp_path: Path) -> None:
    """The workers wrote to the supervisor's stderr: a write to a full pipe is atomic only up to
    PIPE_BUF (4 KiB), and two workers' audit lines of 100 long ids (about 20 KB) were cut into each
    other for a log reader that fell behind (176 of 240 not JSON). The pipe here holds 4 KiB, as
    one a reader keeps full does."""
    import fcntl

    import grpc

    from retrieval.v1 import retrieval_pb2 as pb
    from retrieval.v1 import retrieval_pb2_grpc as pb_grpc

    port = free_port()
    env, _ = _two_workers(tmp_path, port)
    admin = [("x-user-id", "ops"), ("x-user-role", "SUPER_ADMIN")]
    channels, calls = 16, 5

    def deletes(channel: int) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]) as opened:
            stub = pb_grpc.RetrievalServiceStub(opened)
            for call in range(calls):
                ids = [f"{channel}-{call}-{i}-".ljust(200, "x") for i in range(100)]
                with pytest.raises(grpc.RpcError):  # the workers are read-only: each call still writes its audit line
                    stub.DeleteDocuments(pb.DeleteDocumentsRequest(document_ids=ids), metadata=admin, timeout=120)

    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)) as server:
        assert server.stderr is not None
        fcntl.fcntl(server.stderr.fileno(), fcntl.F_SETPIPE_SZ, 4096)
        log = _Serving(server)
        workers = log.wait(2)
        assert workers is not None, "".join(log.lines[-20:])
        threads = [threading.Thread(target=deletes, args=(c,)) for c in range(channels)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=300) == 0, "".join(log.lines[-20:])
        log.join()
    assert [line[:200] for line in log.lines if _record(line) is None] == []
    audited = log.messages("admin action")
    assert len(audited) == channels * calls
    assert {record["pid"] for record in audited} == set(workers)  # both wrote at once (16 connections, spread by the kernel)
    assert log.messages("stopped")[-1]["logger"] == "retrieval_server.supervisor"  # the workers' last lines before it


@pytest.mark.slow
def test_a_killed_workers_copy_of_the_index_is_removed(tmp_path: Path) -> None:
    env, scratch = _two_workers(tmp_path, free_port())
    with _two_serving(env) as (log, first):
        # A crash (the OOM killer, say): the worker cleans nothing up, and the supervisor restarts it.
        killed = psutil.Process(first[0])
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        assert log.wait(3) is not None, "".join(log.lines[-20:])
        assert len(list(scratch.rglob("retrieval-readonly-*"))) == 2  # the two live workers' copies, not the dead one's
    assert "restarting it" in "".join(log.lines)
    # Each copy is as large as the index: one left per crash would fill the disk of a server that
    # keeps crashing, and refuse its next restart.
    assert sorted(p.name for p in scratch.iterdir() if p.name.startswith("retrieval-")) == []


@pytest.mark.slow
def test_a_restart_that_fails_is_retried_while_the_other_worker_serves(tmp_path: Path) -> None:
    """A crashed worker whose restart fails (here its data folder is briefly away; memory short
    while the model loads, or MySQL restarting, do the same) stopped the whole server, the healthy
    worker too. It is now started again, 1 s later, then 2 s, ..., until it serves."""
    env, _ = _two_workers(tmp_path, free_port())
    data, away = tmp_path / "data", tmp_path / "data.away"
    with _two_serving(env) as (log, first):
        data.rename(away)
        killed = psutil.Process(first[0])
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        # Two failed restarts, so that the second waits twice as long as the first.
        log.until(lambda: len(log.messages("could not start again")) >= 2)
        away.rename(data)
        assert [m["retry_in_s"] for m in log.messages("could not start again")[:2]] == [1, 2], "".join(log.lines[-20:])
        assert log.wait(3) is not None, "".join(log.lines[-20:])  # the third attempt serves
        assert psutil.Process(first[1]).is_running()  # the healthy worker was never stopped
        # One crash, one restart: the retries of a start that failed counted one each.
        [metrics_port] = [m["metrics_port"] for m in log.messages("serving metrics")]
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=60) as page:
            restarts = [line for line in page.read().decode().splitlines() if line.startswith("retrieval_worker_restarts_total")]
        assert sorted(float(line.split()[-1]) for line in restarts) == [0, 1], restarts


@pytest.mark.slow
def test_a_restart_that_cannot_be_spawned_leaves_the_supervisor_stoppable(tmp_path: Path) -> None:
    """A restart whose spawn raised (here: the workers' folder removed by a tmp cleaner; ENOMEM
    or EAGAIN after an OOM kill take the same path) escaped the supervisor with the other worker
    serving: the exit hung joining it, SIGTERM only set a flag. The restart is now retried, and
    SIGTERM stops everything with exit 0."""
    import shutil

    env, scratch = _two_workers(tmp_path, free_port())
    with _two_serving(env) as (log, first):
        for folder in scratch.glob("retrieval-workers-*"):
            shutil.rmtree(folder)
        killed = psutil.Process(first[0])
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        # The escaped error was printed as the CLI's "error:" line while the supervisor stayed.
        log.until(lambda: bool(log.messages("could not start again")) or any(line.startswith("error:") for line in log.lines))
        assert log.messages("could not start again"), "".join(log.lines[-20:])
        assert psutil.Process(first[1]).is_running()
    assert not psutil.pid_exists(first[1]) or psutil.Process(first[1]).status() == psutil.STATUS_ZOMBIE
    assert not any(line.startswith("error:") for line in log.lines)


#: ``serve`` whose supervisor cannot duplicate a descriptor once, at the first restart (EMFILE:
#: the metrics server's connections took the last ones)
_DUP_REFUSED_ONCE = """
import errno, os, sys
from retrieval_server import supervisor
calls = [0]
def dup(fd, _dup=os.dup):
    calls[0] += 1
    if calls[0] == 3:
        raise OSError(errno.EMFILE, "Too many open files")
    return _dup(fd)
supervisor.os = type(sys)("os_with_dup_refused")
supervisor.os.__dict__.update({k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
supervisor.os.dup = dup
from retrieval_server.cli import main
sys.exit(main(["serve"]))
"""


@pytest.mark.slow
def test_a_restart_whose_log_pipe_cannot_be_made_starts_no_worker_it_does_not_track(tmp_path: Path) -> None:
    """The worker's log relay was set up after its process started: a descriptor or a thread
    refused there failed the restart with the new worker already running, untracked, its lines
    going nowhere, and SIGTERM then hung the supervisor joining it."""
    env, _ = _two_workers(tmp_path, free_port())
    with reaped(subprocess.Popen([sys.executable, "-c", _DUP_REFUSED_ONCE], env=env, stderr=subprocess.PIPE, text=True)) as server:
        log = _Serving(server)
        first = log.wait(2)
        assert first is not None, "".join(log.lines[-20:])
        killed = psutil.Process(first[0])
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        assert log.until(lambda: bool(log.messages("could not start again"))), "".join(log.lines[-20:])
        assert log.wait(3) is not None, "".join(log.lines[-20:])  # the retry serves
        workers = {p.pid for p in psutil.Process(server.pid).children() if "multiprocessing" in " ".join(p.cmdline())
                   and "resource_tracker" not in " ".join(p.cmdline())}
        assert workers == {first[1], log.pids[2]}, (workers, log.pids)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=300) == 0, "".join(log.lines[-20:])
        log.join()


@pytest.mark.slow
def test_a_hung_worker_is_killed_and_restarted(tmp_path: Path) -> None:
    """A worker that stops answering (SIGSTOP here; a deadlock, or a call that never returns on its
    event loop) kept its share of new connections and was never noticed. Its heartbeats stop, and
    after 6 of them missed the supervisor kills it and starts another."""
    env, _ = _two_workers(tmp_path, free_port())
    env["RETRIEVAL_WORKER_HEARTBEAT_S"] = "0.5"
    with _two_serving(env) as (log, first):
        hung = psutil.Process(first[0])
        hung.suspend()
        replaced = log.wait(3)
        assert replaced is not None, "".join(log.lines[-20:])
        assert [m["worker_pid"] for m in log.messages("sent no heartbeat")] == [first[0]]
        assert replaced[2] != first[0] and not hung.is_running()
        assert psutil.Process(first[1]).is_running()  # the one that kept beating was left alone


@pytest.mark.slow
def test_a_worker_stopped_on_its_own_is_started_again_as_no_crash(tmp_path: Path) -> None:
    """SIGTERM sent to one worker (not through the supervisor): its clean exit was logged at ERROR
    as a crash, and counted in retrieval_worker_restarts_total, which fires RetrievalWorkerRestarting."""
    env, _ = _two_workers(tmp_path, free_port())
    with _two_serving(env) as (log, first):
        stopped = psutil.Process(first[0])
        stopped.send_signal(signal.SIGTERM)
        stopped.wait(timeout=300)  # the supervisor's child: its exit code is the supervisor's to read
        assert log.wait(3) is not None, "".join(log.lines[-20:])  # started again: the port keeps its listeners
        [metrics_port] = [m["metrics_port"] for m in log.messages("serving metrics")]
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=60) as page:
            restarts = [line for line in page.read().decode().splitlines() if line.startswith("retrieval_worker_restarts_total")]
    [again] = log.messages("stopped; starting it again")
    assert (again["level"], again["worker_pid"]) == ("INFO", first[0]), again
    assert log.messages("exited with") == []
    assert sorted(float(line.split()[-1]) for line in restarts) == [0, 0], restarts


@pytest.mark.slow
def test_a_restarted_worker_that_hangs_while_starting_is_killed(tmp_path: Path) -> None:
    """A start that hangs beats no heartbeat: its slot stayed dead, and nothing was logged."""
    env, _ = _two_workers(tmp_path, free_port())
    env["RETRIEVAL_WORKER_START_TIMEOUT_S"] = "3"
    with _two_serving(env) as (log, first):
        psutil.Process(first[0]).kill()

        def replacement() -> list[int]:
            return [m["pid"] for m in log.messages("worker starting") if m["pid"] not in first]

        assert log.until(lambda: bool(replacement())), "".join(log.lines[-20:])
        stuck = psutil.Process(replacement()[0])
        stuck.suspend()  # before it reports serving: its start hangs
        assert log.until(lambda: bool(log.messages("did not report serving within 3 s"))), "".join(log.lines[-20:])
        assert log.messages("did not report serving within 3 s")[0]["worker_pid"] == stuck.pid
        assert psutil.Process(first[1]).is_running()  # the one serving was left alone


def test_a_supervisor_that_cannot_take_the_port_sweeps_nothing(tmp_path: Path) -> None:
    """A killed supervisor's workers drain on, holding the port and serving from their folder: a new
    supervisor swept that folder away before it found the port taken."""
    import socket

    port = free_port()
    env, scratch = _two_workers(tmp_path, port)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    draining = scratch / f"retrieval-workers-{gone.stdout.strip()}-old"
    (draining / "0").mkdir(parents=True)
    with socket.socket() as worker:  # the old workers' listener
        worker.bind(("127.0.0.1", port))
        worker.listen()
        run = subprocess.run([*CLI, "serve"], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "address already in use" in run.stderr, run.stderr[-2000:]
    assert (draining / "0").is_dir()


@pytest.mark.slow
def test_workers_stop_with_a_supervisor_that_was_killed(tmp_path: Path) -> None:
    """Killed (the OOM killer, say), the supervisor can neither stop its workers nor remove their
    files: they kept serving with nobody to restart them, kept the port, so that no new server
    could start, and kept their copies of the index. The kernel now sends them SIGTERM."""
    import socket

    port = free_port()
    env, scratch = _two_workers(tmp_path, port)
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)) as server:
        log = _Serving(server)
        workers = log.wait(2)
        assert workers is not None, "".join(log.lines[-20:])
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=60)
        for pid in workers:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).wait(timeout=300)  # the bound only turns a worker that stays into a failure
        log.join()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # free again: a new server can start
    assert list(scratch.rglob("retrieval-readonly-*")) == [], "".join(log.lines[-30:])
    # The workers' folder itself, the supervisor's, stays; the next supervisor removes it (in
    # Kubernetes /tmp is a small memory volume that outlives the container's restarts).
    killed = list(scratch.glob(f"retrieval-workers-{server.pid}-*"))
    assert len(killed) == 1, sorted(p.name for p in scratch.iterdir())
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)) as again:
        log = _Serving(again)
        assert log.wait(2) is not None, "".join(log.lines[-20:])
        assert not killed[0].exists()
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=300) == 0
        log.join()
    assert [p.name for p in scratch.iterdir() if p.name.startswith("retrieval-workers-")] == []


@pytest.mark.slow
def test_workers_that_do_not_stop_are_killed_at_one_deadline_and_the_exit_says_so(tmp_path: Path) -> None:
    """Two hung workers (SIGSTOP: a drain that never ends): each was waited for in turn, grace +
    30 s apiece, then killed without a word, and the supervisor exited 0."""
    env, _ = _two_workers(tmp_path, free_port())
    env.update(RETRIEVAL_GRACE_PERIOD_S="0", RETRIEVAL_EVENTS_PUBLISH_TIMEOUT_S="0.1")
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)) as server:
        log = _Serving(server)
        pids = log.wait(2)
        assert pids is not None, "".join(log.lines[-20:])
        for pid in pids:
            psutil.Process(pid).suspend()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=300) == 1, "".join(log.lines[-20:])
        log.join()
    killed = log.messages("did not stop within 5.1 s; killing it")
    assert sorted(m["worker"] for m in killed) == [0, 1] and all(m["level"] == "ERROR" for m in killed), "".join(log.lines[-20:])
    assert [m["level"] for m in log.messages("stopped")] == ["ERROR"]  # "stopped, killing workers 0, 1", not a clean "stopped"
    assert log.messages("stopped")[0]["killed"] == [0, 1]


@pytest.mark.slow
def test_a_worker_that_dies_while_it_stops_is_no_clean_stop(tmp_path: Path) -> None:
    """A worker killed during its drain (the OOM killer, say) had its in-flight calls cut off as a
    worker killed for its deadline does; the supervisor only checked that it was gone, and exited 0
    with "stopped" at INFO."""
    env, _ = _two_workers(tmp_path, free_port())
    with reaped(subprocess.Popen([*CLI, "serve"], env=env, stderr=subprocess.PIPE, text=True)) as server:
        log = _Serving(server)
        assert log.wait(2) is not None, "".join(log.lines[-20:])
        pids = {m["worker"]: m["pid"] for m in log.messages("worker ready")}
        dying = psutil.Process(pids[0])
        dying.suspend()  # it takes its SIGTERM, and stays in its stop, until it is killed
        server.send_signal(signal.SIGTERM)
        # The supervisor sends every worker SIGTERM before it waits for any: once worker 1 drains, worker 0 is stopping too.
        assert log.until(lambda: any(m["pid"] == pids[1] for m in log.messages("shutting down"))), "".join(log.lines[-20:])
        dying.kill()
        assert server.wait(timeout=300) == 1, "".join(log.lines[-20:])
        log.join()
    [died] = log.messages("while stopping")
    assert (died["level"], died["worker"], died["exit_code"]) == ("ERROR", 0, -signal.SIGKILL), died
    assert [m["level"] for m in log.messages("stopped") if m["logger"] == "retrieval_server.supervisor"] == ["ERROR"], "".join(log.lines[-20:])


@pytest.mark.slow
def test_another_server_that_joins_the_workers_port_is_reported(tmp_path: Path) -> None:
    """The kernel lets the same user's SO_REUSEPORT listener join the workers' group however the
    port is held: a plain grpc.server() (which sets it by default on Linux) took a share of the
    connections, and nothing said so."""
    import os
    from concurrent import futures

    import grpc

    port = free_port()
    env, _ = _two_workers(tmp_path, port)
    with _two_serving(env) as (log, _):
        stranger = grpc.server(futures.ThreadPoolExecutor(1))
        assert stranger.add_insecure_port(f"127.0.0.1:{port}") == port  # the kernel let it in
        stranger.start()
        try:
            assert log.until(lambda: bool(log.messages("another server listens"))), "".join(log.lines[-20:])
        finally:
            stranger.stop(None)
    [found] = log.messages("another server listens")
    assert (found["level"], found["port"], found["sharer_pid"]) == ("ERROR", port, os.getpid()), found
