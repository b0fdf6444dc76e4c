"""The supervisor's rules that need no worker process."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from types import SimpleNamespace

import pytest

from retrieval_server.stale_runs import remove_stale_runs
from retrieval_server import supervisor
from retrieval_server.observability import log_relay
from retrieval_server.observability.log_relay import LogRelay
from retrieval_server.supervisor import SCRATCH_PREFIX, _Clock, _stopped_cleanly, _Worker, restart_delay, start_ignoring_interrupts
from tests.support.paths import inherited_env


def test_a_restart_that_keeps_failing_is_tried_again_less_and_less_often_up_to_a_minute() -> None:
    assert [restart_delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert restart_delay(10_000) == 60  # no overflow after days of failures


def test_the_workers_folders_of_supervisors_that_are_gone_are_removed(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead, own, alive = (tmp_path / f"retrieval-workers-{pid}-x1y2" for pid in (gone.pid, os.getpid(), os.getppid()))
    for folder in (dead, own, alive):
        (folder / "0").mkdir(parents=True)
    # A container restarted gives the new supervisor the old one's pid: its own pid, in a folder
    # it has not made yet, is a dead supervisor's too.
    kept = [
        alive,
        tmp_path / "retrieval-workers-xa9q08cz",  # no pid in its name
        tmp_path / f"retrieval-workers-{gone.pid}-file",  # not a folder
        tmp_path / f"retrieval-workers-{gone.pid}-link",  # nor a link to one
        tmp_path / "retrieval-metrics-0-x",
    ]
    kept[1].mkdir()
    kept[2].write_text("")
    kept[3].symlink_to(alive)
    kept[4].mkdir()
    assert sorted(remove_stale_runs(tmp_path, SCRATCH_PREFIX)) == sorted([dead, own])
    assert sorted(tmp_path.iterdir()) == sorted(kept)


def _report_dispositions(report: Connection) -> None:
    report.send([signal.getsignal(sig) is signal.SIG_IGN for sig in (signal.SIGINT, signal.SIGHUP)])


def test_a_worker_starts_with_interrupts_ignored_and_the_supervisor_keeps_its_handlers() -> None:
    """A Ctrl-C to the process group while the workers imported their modules printed a
    KeyboardInterrupt traceback from each (spawned, a worker inherits an ignored signal only)."""
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    before = [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGHUP)]
    proc = ctx.Process(target=_report_dispositions, args=(sender,))
    start_ignoring_interrupts(proc)
    sender.close()
    try:
        assert receiver.recv() == [True, True]
    finally:
        proc.join()
    assert proc.exitcode == 0
    assert [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGHUP)] == before


_FAILING_WORKER = (
    "import pathlib, sys\n"
    "from multiprocessing import Pipe\n"
    "from retrieval_server import server, supervisor\n"
    "from retrieval_server.config import load_settings\n"
    "async def serve(settings, on_ready=None, on_stopping=None):\n"
    "    if sys.argv[1] == 'served':\n"
    "        on_ready()\n"
    "    raise RuntimeError('the vector folder vanished')\n"
    "server.serve = serve\n"
    "receiver, sender = Pipe(duplex=False)\n"
    "try:\n"
    "    supervisor._run_worker(load_settings(), 0, sender, pathlib.Path(sys.argv[2]))\n"
    "finally:\n"
    "    reports = []\n"
    "    while receiver.poll():  # all sent by now\n"
    "        reports.append(receiver.recv())\n"
    "    print(reports[-1])\n"
)


def _failing_worker_log(tmp_path: Path, when: str) -> tuple[list[dict[str, object]], str]:
    """A worker whose serve() raises, having reported ready (``served``) or not: its JSON log
    records and the reason it sent the supervisor."""
    (tmp_path / "scratch").mkdir()
    env = inherited_env()
    env.update(RETRIEVAL_DATA_DIR=str(tmp_path / "data"), RETRIEVAL_METRICS_ENABLED="false", RETRIEVAL_LOG_FORMAT="json")
    done = subprocess.run([sys.executable, "-c", _FAILING_WORKER, when, str(tmp_path / "scratch")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    return [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")], done.stdout.strip()


def test_a_worker_that_fails_after_it_served_logs_why_at_error(tmp_path: Path) -> None:
    """The supervisor logs only its exit code ("worker 0 exited with 1; restarting it"), and the
    worker logged the exception at DEBUG: why it crashed was never printed."""
    records, reason = _failing_worker_log(tmp_path, "served")
    [failed] = [r for r in records if r["level"] == "ERROR"]
    assert failed["worker"] == 0 and "RuntimeError: the vector folder vanished" in str(failed["exc"]), records
    assert reason == "the vector folder vanished"


def test_a_worker_that_cannot_start_leaves_its_reason_to_the_supervisor(tmp_path: Path) -> None:
    """The supervisor prints the reason it is sent once: an ERROR here too printed it once more per worker."""
    records, reason = _failing_worker_log(tmp_path, "not served")
    assert [r for r in records if r["level"] == "ERROR"] == [], records
    assert reason == "the vector folder vanished"


def test_a_stop_is_unclean_only_for_what_the_stop_cut() -> None:
    """A worker the supervisor had killed itself just before the stop (stuck starting: SIGKILL)
    made the stop unclean, exit 1, as if the stop had cut its calls."""
    def worker(code: int, *, ready: bool, killed: bool = False) -> object:
        return SimpleNamespace(process=SimpleNamespace(exitcode=code), ready=ready, killed=killed)

    assert _stopped_cleanly(worker(0, ready=True))
    assert _stopped_cleanly(worker(-signal.SIGTERM, ready=False))  # still importing: nothing in flight
    assert _stopped_cleanly(worker(-signal.SIGKILL, ready=False, killed=True))  # stuck starting, killed and logged then
    assert not _stopped_cleanly(worker(-signal.SIGKILL, ready=True))  # the OOM killer during the drain
    assert not _stopped_cleanly(worker(-signal.SIGTERM, ready=True))
    assert not _stopped_cleanly(worker(1, ready=False))



class _Time:
    """The supervisor's monotonic clock (its log relay's too), moved by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1000.0
        for module in (supervisor, log_relay):
            monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: self.now))


def _worker(started_at: float, *reports: str, relay: LogRelay | None = None, name: str = "") -> _Worker:
    """A restarted worker whose pipe holds ``reports``, its log relayed as ``name`` by ``relay``."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    for report in reports:
        sender.send(report)
    sender.close()
    held = (lambda: relay.blocked_s(name)) if relay is not None else (lambda: 0.0)
    return _Worker(SimpleNamespace(), receiver, restarted=True, started_at=started_at, held=held)  # type: ignore[arg-type]


def test_a_worker_is_not_hung_for_the_time_the_supervisor_was_frozen_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole server frozen (docker pause, a cgroup freeze, a suspended VM) 6 s with a 3 s
    limit: on the thaw the supervisor's first pass came before the workers' beats, and killed every
    one of them."""
    wall = _Time(monkeypatch)
    clock = _Clock(late_s=0.5)
    serving = _worker(clock.now(), supervisor.READY)
    serving.read_reports(clock.now())
    starting = _worker(clock.now())
    wall.now += 0.5
    assert not serving.hung(3.0, clock.woke(0.5))
    wall.now += 6.0  # frozen in the wait
    now = clock.woke(0.5)
    assert not serving.hung(3.0, now)
    assert not starting.stuck_starting(3.0, now)
    # Its silence while the supervisor ran counts: each pass's wait, the frozen one's too.
    for _ in range(4):
        wall.now += 0.5
        now = clock.woke(0.5)
    assert not serving.hung(3.0, now)
    wall.now += 0.5
    now = clock.woke(0.5)
    assert serving.hung(3.0, now) and starting.stuck_starting(3.0, now)


def test_a_worker_is_not_hung_while_its_log_relay_is_held_but_another_worker_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader of the supervisor's stderr that stalls (Docker's blocking log mode over a slow
    driver) held the relay, and a worker's event loop on its next log line once its pipe was full:
    its heartbeats stopped, and the supervisor killed it, cutting its calls. Only that worker is
    excused: one sum of every relay's time let a chatty worker, under a slow reader, keep a
    deadlocked one from ever being killed."""

    class Stalled:
        def __init__(self) -> None:
            self.writing, self.reading = threading.Event(), threading.Event()

        def write(self, text: str) -> int:
            self.writing.set()
            self.reading.wait()
            return len(text)

        def flush(self) -> None:
            pass

    wall = _Time(monkeypatch)
    out = Stalled()
    relay = LogRelay(out)  # type: ignore[arg-type]
    clock = _Clock(late_s=0.5)
    serving = _worker(clock.now(), supervisor.READY, relay=relay, name="worker-0")
    serving.read_reports(clock.now())
    deadlocked = _worker(clock.now(), supervisor.READY, relay=relay, name="worker-1")
    deadlocked.read_reports(clock.now())
    wall.now += 0.5
    assert not serving.hung(3.0, clock.woke(0.5))
    read, write = os.pipe()
    relay.follow(read, "worker-0")
    os.write(write, b"an audit line\n")
    out.writing.wait()
    for _ in range(5):
        wall.now += 0.5
        assert not deadlocked.hung(3.0, clock.woke(0.5))
    wall.now += 0.5
    assert deadlocked.hung(3.0, now := clock.woke(0.5))  # 3.5 s silent, its own relay idle
    assert not serving.hung(3.0, now)
    for _ in range(13):  # 10 s held in all: the worker is silent all along
        wall.now += 0.5
        assert not serving.hung(3.0, clock.woke(0.5))
    out.reading.set()
    os.close(write)
    relay.join()  # the write is over
    # Its silence since counts, with what it was before the relay was held.
    for _ in range(5):
        wall.now += 0.5
        now = clock.woke(0.5)
    assert not serving.hung(3.0, now)
    wall.now += 0.5
    assert serving.hung(3.0, clock.woke(0.5))


def test_a_worker_that_reported_stopping_is_held_to_the_stops_deadline_not_its_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker sent SIGTERM alone stops beating while it drains: it was killed as hung 6 beats
    later, partway through a drain of a 60 s grace, its calls cut."""
    wall = _Time(monkeypatch)
    clock = _Clock(late_s=0.5)
    draining = _worker(clock.now(), supervisor.READY, supervisor.HEARTBEAT, supervisor.STOPPING)
    draining.read_reports(clock.now())
    assert draining.stopping and draining.failure == ""
    wall.now += 20.0
    assert not draining.hung(3.0, now := clock.now()) and not draining.stop_overdue(70.0, now)
    wall.now += 50.5
    assert draining.stop_overdue(70.0, clock.now())


_STOPPING_WORKER = (
    "import asyncio, pathlib, sys\n"
    "from multiprocessing import Pipe\n"
    "from retrieval_server import server, supervisor\n"
    "from retrieval_server.config import load_settings\n"
    "async def serve(settings, on_ready=None, on_stopping=None):\n"
    "    on_ready()\n"
    "    await asyncio.sleep(0)\n"  # its heartbeat beats once
    "    on_stopping()\n"
    "    for _ in range(3):\n"  # a drain, its heartbeat cancelled
    "        await asyncio.sleep(0)\n"
    "server.serve = serve\n"
    "receiver, sender = Pipe(duplex=False)\n"
    "supervisor._run_worker(load_settings(), 0, sender, pathlib.Path(sys.argv[1]))\n"
    "reports = []\n"
    "while receiver.poll():  # all sent by now\n"
    "    reports.append(receiver.recv())\n"
    "print(*reports)\n"
)


def test_a_worker_told_to_stop_says_so_and_then_beats_no_more(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()
    env = inherited_env()
    env.update(RETRIEVAL_DATA_DIR=str(tmp_path / "data"), RETRIEVAL_METRICS_ENABLED="false")
    done = subprocess.run([sys.executable, "-c", _STOPPING_WORKER, str(tmp_path / "scratch")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reports = done.stdout.split()
    assert reports == [supervisor.READY, supervisor.HEARTBEAT, supervisor.STOPPING]
