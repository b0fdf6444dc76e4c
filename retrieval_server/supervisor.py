"""Several server processes on one port (SO_REUSEPORT), each with its own Application.

The workers are spawned, not forked, so no gRPC object, thread or model session crosses a
process boundary. The embedded engines lock their folder to one process, so with embedded
storage each worker serves a private copy of the vector folder, read-only; with a Qdrant server
every worker writes to it directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path

from retrieval_server import early_stop, event_loop, startup_gc
from retrieval_server.config import ADDRESS_NOT_HERE, Settings, bind_error, listen_address, listen_sockaddrs
from retrieval_server.domain import Unavailable
from retrieval_server.observability.log_relay import LogRelay
from retrieval_server.observability.logging import configure
from retrieval_server.observability.metrics import metrics_address, metrics_tls
from retrieval_server.observability.multiprocess import MultiprocessMetrics
from retrieval_server.port_sharers import PortSharers
from retrieval_server.stale_runs import remove_stale_runs

log = logging.getLogger(__name__)

READY = "ready"
HEARTBEAT = "alive"
#: a worker told to stop (by the supervisor, or a signal sent to it alone) beats no more while it drains
STOPPING = "stopping"
#: heartbeats a worker may miss before the supervisor takes it for hung
HEARTBEATS_MISSED = 6
#: the workers' folder in the temporary directory: this, the supervisor's pid, "-", a random part
SCRATCH_PREFIX = "retrieval-workers-"
#: prctl(2): the signal a process gets when its parent dies
PR_SET_PDEATHSIG = 1
#: what a stopping worker may take beyond its grace period and the event flush: closing the stores,
#: of which the last spans' export takes at most 2 s (README: terminationGracePeriodSeconds)
STOP_MARGIN_S = 5.0
#: the exit code of a supervisor whose stop was not clean: a worker did not stop in time and was
#: killed, or died (killed by another, crashed) while it stopped
UNCLEAN_STOP = 1
#: a restarted worker that failed to start is started again after 1 s, then 2, 4, ... at most 60
RESTART_BACKOFF_S = 1.0
RESTART_BACKOFF_MAX_S = 60.0
#: how often the supervisor looks for another server's listener on its workers' port
PORT_CHECK_INTERVAL_S = 5.0


def restart_delay(failures: int) -> float:
    """Seconds before starting again a worker whose restart failed ``failures`` times in a row.

    What fails a restart is often passing (the data folder briefly away, memory short while the
    model loads, MySQL restarting): stopping the whole server for it stopped the healthy workers
    too; retrying at once would spin on a cause that lasts.
    """
    return min(RESTART_BACKOFF_MAX_S, RESTART_BACKOFF_S * 2 ** min(failures - 1, 16))


def worker_settings(settings: Settings, worker: int) -> Settings:
    update: dict[str, object] = {"metrics_enabled": False}  # the supervisor serves every worker's metrics
    if not settings.shares_writable_storage:
        # Each worker then serves its own private copy of the vector folder (see EdgeVectorStore).
        update["read_only"] = True
    return settings.model_copy(update=update)


def hold_port(host: str, port: int) -> list[socket.socket]:
    """Fail as a single server would when the port is taken; then hold it for the workers.

    Every address of ``host`` is checked and held (:func:`listen_sockaddrs`), as gRPC listens on
    each: a name of several (``localhost``) was held on its first alone, and a server already on
    that one did not stop the supervisor. The held sockets are bound with SO_REUSEPORT but never
    listen: the workers' listening sockets can join them, while another supervisor or a single
    server (neither binds with SO_REUSEPORT alone) or another user's finds the port in use; the
    same user's SO_REUSEPORT listener is let in by the kernel (see port_sharers). Unless the last run's connections
    are still in TIME_WAIT (a minute after a stop), which refuse a socket without SO_REUSEADDR: a
    restart failed with "address already in use". The probe, with SO_REUSEADDR as gRPC binds, has
    then found no server on the port, and the held socket takes SO_REUSEADDR too; until the
    workers listen, another server could then bind the port as well (two sockets with
    SO_REUSEADDR may, while neither listens).
    """
    if why := bind_error(host, port):
        raise OSError(f"cannot listen on {listen_address(host, port)}: {why}")
    guards: list[socket.socket] = []
    try:
        for family, address in listen_sockaddrs(host, port):
            if guards and port == 0:
                address = (address[0], guards[0].getsockname()[1], *address[2:])  # one port for all
            try:
                guard = socket.socket(family, socket.SOCK_STREAM)
            except OSError as exc:
                if exc.errno not in ADDRESS_NOT_HERE:
                    raise
                continue  # no IPv6 here: gRPC skips the address too
            guards.append(guard)
            guard.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            try:
                guard.bind(address)
            except OSError as exc:
                if exc.errno in ADDRESS_NOT_HERE:
                    guards.pop().close()
                    continue
                if exc.errno != errno.EADDRINUSE:
                    raise
                log.info("the port's last connections are in TIME_WAIT: held with SO_REUSEADDR", extra={"port": port})
                guard.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                guard.bind(address)
    except BaseException:
        for guard in guards:
            guard.close()
        raise
    return guards


def start_ignoring_interrupts(proc: BaseProcess) -> None:
    """Start ``proc`` with SIGINT and SIGHUP ignored, as it inherits an ignored signal through exec
    until it installs its own handlers (the server does once it starts serving; SIGINT then stops
    it gracefully, SIGHUP stays ignored, as its supervisor forwards the stop): a Ctrl-C to the
    process group while the workers imported their modules printed a KeyboardInterrupt traceback
    from each. The supervisor's own handlers are back once the process is started, a signal in
    those few milliseconds lost to it."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGHUP)}
    try:
        proc.start()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_with_the_supervisor() -> int | None:
    """Have the kernel send this worker SIGTERM when the supervisor dies (killed, out of memory):
    a worker left behind kept serving with nobody to restart it, and kept the port, so that no new
    server could start. Returns the supervisor's pid (None where Linux's prctl is missing)."""
    parent = multiprocessing.parent_process()
    if parent is None or not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent.pid:
        os.kill(os.getpid(), signal.SIGTERM)  # it died before the request was made
    return parent.pid


async def _heartbeat(report: Connection, interval_s: float) -> None:
    """Tell the supervisor, from the event loop, that it still turns: a hung worker (a deadlock, a
    call that never returns on the loop) kept its share of new connections (SO_REUSEPORT) without
    answering them, and nobody noticed."""
    while True:
        try:
            report.send(HEARTBEAT)
        except OSError:
            return  # the supervisor is gone, and this worker is being stopped with it
        await asyncio.sleep(interval_s)


def _run_worker(settings: Settings, worker: int, report: Connection, scratch: Path, stderr: Connection | None = None) -> None:
    """A worker process: serve, and tell the supervisor once serving (or why it could not start).

    Its temporary files, the private copy of the vector folder above all, go to ``scratch``, which
    the supervisor removes once the worker has exited: a worker that is killed removes nothing. A
    worker whose supervisor died stops, and removes them itself. Its stderr is ``stderr``'s pipe,
    which the supervisor relays (:class:`LogRelay`).
    """
    if stderr is not None:
        # First, so that whatever it writes there goes through the relay: its log lines, and a
        # traceback printed before its logging is set up.
        os.dup2(stderr.fileno(), sys.stderr.fileno())
        stderr.close()
    # A hangup reaches the whole process group (the terminal closed): its default killed the
    # workers with calls in flight, while the supervisor forwards it to them as SIGTERM. (Started
    # by the supervisor, it is ignored from the start: see start_ignoring_interrupts.)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    supervisor = _stop_with_the_supervisor()
    tempfile.tempdir = str(scratch)
    startup_gc.defer_collection()
    from retrieval_server.server import serve

    configure(settings.log_level, settings.log_format)
    log.info("worker starting", extra={"worker": worker})

    beating: list[asyncio.Task[None]] = []  # held: the loop keeps only a weak reference to a task

    def ready() -> None:
        startup_gc.settle()
        report.send(READY)
        # After the report: from here on the supervisor restarts this worker if it dies, or stops beating.
        beating.append(asyncio.get_running_loop().create_task(_heartbeat(report, settings.worker_heartbeat_s)))
        log.info("worker ready", extra={"worker": worker})

    def stopping() -> None:
        # Told first, as its silence from here on is no hang: a worker sent SIGTERM alone (not
        # through the supervisor) was killed as hung partway through its drain.
        with contextlib.suppress(OSError):  # the supervisor is gone, and this worker is being stopped with it
            report.send(STOPPING)
        # The supervisor reads no reports while it waits for its workers to stop: beats written
        # meanwhile filled the pipe, and the write then held the event loop, and the drain, until
        # the worker was killed.
        for task in beating:
            task.cancel()

    try:
        event_loop.run(serve(settings, on_ready=ready, on_stopping=stopping), settings.event_loop)
    except Exception as exc:
        if beating:
            # Once it served, the supervisor logs only the exit code: this is the one place the reason is told.
            log.error("worker %d failed while serving", worker, exc_info=True, extra={"worker": worker})
        else:
            # The supervisor logs the reason it is sent (the CLI's one `error:` line for a first start,
            # "could not start again" for a restart): an ERROR here too printed it once more per worker.
            log.debug("worker %d could not start", worker, exc_info=True)
        report.send(str(exc) or type(exc).__name__)
        sys.exit(1)
    finally:
        if supervisor is not None and os.getppid() != supervisor:
            shutil.rmtree(scratch, ignore_errors=True)  # nobody else will


class _Clock:
    """The time during which the supervisor could hear its workers, which their silence is measured
    in: the monotonic clock less the time the supervisor was not running. A whole server frozen
    (docker pause, a cgroup freeze, a suspended VM, Ctrl-Z then fg) for longer than the workers'
    silence limit had every worker killed on the thaw, as the supervisor's first pass came before
    their beats. (A worker waiting on its log is excused by its own relay's time: :class:`_Worker`.)"""

    def __init__(self, late_s: float) -> None:
        self._late_s = late_s
        self._away_s = 0.0
        self._last = self.now()

    def now(self) -> float:
        return time.monotonic() - self._away_s

    def woke(self, waited_s: float) -> float:
        """The time now, once a loop pass woke from a wait of at most ``waited_s``. A pass later
        than that by more than ``late_s`` (since the last one woke) was not running: that time is
        taken out of the clock. (A slow pass, a spawn say, is taken out too: a hang is noticed
        that much later.)"""
        now = self.now()
        if (late := now - self._last - waited_s) > self._late_s:
            self._away_s += late
            now -= late
        self._last = now
        return now


def _never_held() -> float:
    return 0.0


@dataclass(slots=True)
class _Worker:
    process: BaseProcess
    report: Connection
    restarted: bool
    started_at: float  # on the supervisor's _Clock, as are the times below
    #: the seconds so far that its log relay was held (LogRelay.blocked_s): a reader of the
    #: supervisor's stderr that stalls holds the relay, and the worker's event loop on its next log
    #: line once its pipe is full; that silence is not its own. Its own relay's alone: every
    #: relay's together let a chatty worker's lines excuse a silent one's hang for good.
    held: Callable[[], float] = _never_held
    ready: bool = False
    failure: str = ""
    last_heard: float = 0.0  # its last report
    held_at_heard: float = 0.0  # held() then (or at its start, before it reported)
    stopping: bool = False  # it reported STOPPING, its last report
    killed: bool = False

    def __post_init__(self) -> None:
        # The relay counts on under a worker's name from its last process: only what follows is this one's.
        self.held_at_heard = self.held()

    def read_reports(self, now: float) -> None:
        while self.report.poll():
            try:
                message = self.report.recv()
            except EOFError:
                return
            self.last_heard = now
            self.held_at_heard = self.held()
            if message == READY:
                self.ready = True
            elif message == STOPPING:
                self.stopping = True
            elif message != HEARTBEAT:
                self.failure = message

    def hung(self, limit_s: float, now: float) -> bool:
        """Whether it served, and has been silent longer than ``limit_s`` while not stopping: read
        its reports first, so that a supervisor that was itself stopped a while counts what waited
        in the pipe."""
        return self.ready and not self.stopping and not self.killed and self._silent_s(now) > limit_s

    def stop_overdue(self, limit_s: float, now: float) -> bool:
        """Whether it reported stopping longer than ``limit_s`` ago and has not exited: a worker
        sent SIGTERM alone drains without beating, and is held to the deadline of a stop."""
        return self.stopping and not self.killed and self._silent_s(now) > limit_s

    def stuck_starting(self, limit_s: float, now: float) -> bool:
        """Whether it was restarted and has not reported serving for longer than ``limit_s``: a
        start that hangs beats no heartbeat, and its slot stayed dead without a word. (A first
        start is the deployment's to bound: a startup probe.)"""
        return self.restarted and not self.ready and not self.killed and now - self.started_at - self._held_since_s() > limit_s

    def _silent_s(self, now: float) -> float:
        """Its silence since its last report, less the time its log relay was held meanwhile."""
        return now - self.last_heard - self._held_since_s()

    def _held_since_s(self) -> float:
        return self.held() - self.held_at_heard


def _stopped_cleanly(worker: _Worker) -> bool:
    """Whether a worker that has exited did so as a stop asks: 0, or, before it served, the
    SIGTERM it was sent, which kills a process still importing its modules (it handles the signal
    only from the start of :func:`serve`) with nothing in flight. One the supervisor killed itself
    before the stop (hung, or stuck starting) is not the stop's doing: that kill was logged then."""
    code = worker.process.exitcode
    return code == 0 or worker.killed or (code == -signal.SIGTERM and not worker.ready)


def supervise(settings: Settings) -> int:
    """Run ``settings.processes`` workers until SIGTERM, SIGINT or SIGHUP; restart one that dies after it served.

    A worker that dies before it first reported serving failed to start (bad index, bad settings):
    the supervisor stops the others and raises with that worker's reason. A restarted one that
    does is started again after :func:`restart_delay` while the others serve. One metrics endpoint
    serves the sum of every worker's metrics. Returns 0, or :data:`UNCLEAN_STOP` when a worker had
    to be killed at the stop (still running after the grace period, the event flush and
    :data:`STOP_MARGIN_S`) or ended it with an exit code other than 0.
    """
    guards: list[socket.socket] = []
    metrics: MultiprocessMetrics | None = None
    scratch: Path | None = None
    ctx = multiprocessing.get_context("spawn")
    stopping = False
    workers: list[_Worker | None] = []
    failures = [0] * settings.processes  # failed restarts in a row, per worker
    due = [0.0] * settings.processes  # when a worker whose restart failed is started again
    silence_s = HEARTBEATS_MISSED * settings.worker_heartbeat_s
    stop_s = settings.grace_period_s + settings.events_publish_timeout_s + STOP_MARGIN_S
    port_checked = 0.0
    # The workers' lines and the supervisor's own, each whole, on the one stderr.
    relay = LogRelay(sys.stderr)
    # A pass a heartbeat later than its wait allows: the workers could have beaten meanwhile.
    clock = _Clock(late_s=settings.worker_heartbeat_s)
    configure(settings.log_level, settings.log_format, stream=relay)

    def start(worker: int, restart: bool = False) -> _Worker:
        # What the worker's previous process left (it was killed, or crashed) goes before it starts again.
        assert scratch is not None  # made once the port is held, before the first start
        own = scratch / str(worker)
        shutil.rmtree(own, ignore_errors=True)
        own.mkdir()
        receiver, sender = ctx.Pipe(duplex=False)
        # The worker's stderr: a pipe of its own (an OS pipe, not messages: a Connection only so
        # that multiprocessing hands its end to the spawned worker, as it does the report's). Its
        # relay starts first: nothing that can fail (a descriptor, a thread refused) may follow the
        # worker's start, which would leave it running untracked, and the exit hung joining it.
        logs, logs_end = ctx.Pipe(duplex=False)
        name = f"worker-{worker}"
        try:
            relay.follow(os.dup(logs.fileno()), name)
        except BaseException:
            for end in (receiver, sender, logs_end):
                end.close()
            raise
        finally:
            logs.close()
        proc = ctx.Process(target=_run_worker, args=(worker_settings(settings, worker), worker, sender, own, logs_end),
                           name=f"retrieval-worker-{worker}")
        try:
            start_ignoring_interrupts(proc)
        except BaseException:
            receiver.close()
            raise
        finally:
            sender.close()
            logs_end.close()  # the worker holds the only end left: its exit (or a failed start) ends the relay
        if metrics is not None and proc.pid is not None:
            metrics.worker_started(worker, proc.pid)
        return _Worker(proc, receiver, restarted=restart, started_at=clock.now(), held=lambda: relay.blocked_s(name))

    def retry_later(worker: int, reason: str) -> None:
        failures[worker] += 1
        delay = restart_delay(failures[worker])
        log.error("worker %d could not start again: %s; retrying in %g s", worker, reason, delay, extra={"worker": worker, "retry_in_s": delay})
        workers[worker] = None
        due[worker] = time.monotonic() + delay

    def restart(worker: int) -> None:
        try:
            workers[worker] = start(worker, restart=True)
        except OSError as exc:
            # A spawn refused (ENOMEM, EAGAIN, EMFILE) or the scratch folder gone (a tmp cleaner):
            # raised from here, it left the other workers serving unsupervised, and the supervisor
            # hung joining them.
            retry_later(worker, str(exc))

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    failed: str | None = None
    killed: list[int] = []  # the workers that did not stop in time
    broken: list[int] = []  # the workers that stopped, but not cleanly
    # Whatever ends the supervision, the workers are stopped and everything held is let go: an
    # error that escaped with workers running hung the exit (multiprocessing joins them), and
    # SIGTERM could no longer stop it.
    try:
        for p in (settings.port, settings.health_port):
            if p:
                guards.extend(hold_port(settings.host, p))
        sharers = PortSharers({guard.getsockname()[1] for guard in guards})
        # Once the port is ours: a killed supervisor's workers, still draining, hold it, and serve
        # from the folders swept here.
        if stale := remove_stale_runs(Path(tempfile.gettempdir()), SCRATCH_PREFIX):
            log.info("removed the workers' folders of supervisors that were killed", extra={"folders": [str(p) for p in stale]})
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        if settings.metrics_enabled:
            metrics = MultiprocessMetrics()
            try:
                port = metrics.serve(metrics_address(settings), settings.metrics_port, **metrics_tls(settings))
            except OSError as exc:
                raise OSError(f"cannot serve metrics on {listen_address(metrics_address(settings), settings.metrics_port)}: {exc}") from exc
            log.info("serving metrics", extra={"metrics_port": port, "metrics_dir": str(metrics.directory)})
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGHUP, stop)  # its default would end the supervisor without its workers
        stopping = early_stop.requested()  # no worker is started for a stop that came first
        for i in range(settings.processes):
            if stopping:
                break
            workers.append(start(i))
        log.info("supervising", extra={"processes": settings.processes, "port": settings.port, "read_only": not settings.shares_writable_storage})
        while not stopping:
            live = [w for w in workers if w is not None]
            waits = [due[i] - time.monotonic() for i, w in enumerate(workers) if w is None]
            # Wakes on a report (heartbeats too), a worker's exit or a restart that is due; the 0.5 s
            # bounds how late SIGTERM, or a worker that stopped beating, is noticed.
            timeout = max(0.0, min([0.5, *waits]))
            wait([w.report for w in live] + [w.process.sentinel for w in live], timeout=timeout)
            now = clock.woke(timeout)
            for i, w in enumerate(workers):
                if stopping:
                    break
                if w is None:
                    if time.monotonic() >= due[i]:
                        restart(i)
                    continue
                w.read_reports(now)
                if w.ready:
                    failures[i] = 0
                if w.hung(silence_s, now) and w.process.is_alive():
                    log.error("worker %d sent no heartbeat for %g s; killing it", i, silence_s, extra={"worker": i, "worker_pid": w.process.pid})
                    w.process.kill()  # its exit, next, restarts it
                    w.killed = True
                if w.stop_overdue(stop_s, now) and w.process.is_alive():
                    log.error("worker %d did not stop within %g s; killing it", i, stop_s, extra={"worker": i, "worker_pid": w.process.pid})
                    w.process.kill()  # its exit, next, restarts it
                    w.killed = True
                if w.stuck_starting(settings.worker_start_timeout_s, now) and w.process.is_alive():
                    w.failure = f"it did not report serving within {settings.worker_start_timeout_s:g} s (RETRIEVAL_WORKER_START_TIMEOUT_S)"
                    log.error("worker %d %s; killing it", i, w.failure, extra={"worker": i, "worker_pid": w.process.pid})
                    w.process.kill()  # its exit, next, schedules another start
                    w.killed = True
                if w.process.is_alive():
                    continue
                if metrics is not None and w.process.pid is not None:
                    metrics.worker_exited(i, w.process.pid)
                reason = w.failure or f"exit code {w.process.exitcode}"
                if not w.ready and not w.restarted:
                    failed = f"worker {i} could not start: {reason}"
                    stopping = True
                    break
                if not w.ready:
                    retry_later(i, reason)
                    continue
                if w.process.exitcode == 0:
                    # It stopped as asked (a signal sent to it alone) and drained: no crash to count
                    # or alert on. Started again all the same, so that the port keeps its listeners.
                    log.info("worker %d stopped; starting it again", i, extra={"worker": i, "worker_pid": w.process.pid})
                else:
                    log.error("worker %d exited with %s; restarting it", i, w.process.exitcode)
                    if metrics is not None:
                        metrics.worker_restarted(i)
                restart(i)
            if not stopping and time.monotonic() - port_checked >= PORT_CHECK_INTERVAL_S:
                port_checked = time.monotonic()
                for port, pid in sharers.new(w.process.pid for w in workers if w is not None and w.process.pid is not None):
                    log.error("another server listens on port %d beside the workers (SO_REUSEPORT, the same user's), pid %s: it takes a share "
                              "of the new connections", port, pid if pid is not None else "unknown", extra={"port": port, "sharer_pid": pid})
    finally:
        live = [(i, w) for i, w in enumerate(workers) if w is not None]
        for _, w in live:
            if w.process.is_alive():
                w.process.terminate()  # SIGTERM: the worker finishes in-flight calls within its grace period
        # One deadline for them all, as they stop together: each waited for in turn, N hung workers
        # held the stop N times as long, past any termination grace period.
        deadline = time.monotonic() + stop_s
        for i, w in live:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                log.error("worker %d did not stop within %g s; killing it", i, stop_s, extra={"worker": i, "worker_pid": w.process.pid})
                w.process.kill()
                w.process.join()
                killed.append(i)
            elif failed is None and not _stopped_cleanly(w):  # a failed start is the error already
                # Killed by another (the OOM killer) or crashed while it drained: its in-flight
                # calls were cut off as surely as a killed one's.
                log.error("worker %d exited with %s while stopping", i, w.process.exitcode,
                          extra={"worker": i, "worker_pid": w.process.pid, "exit_code": w.process.exitcode})
                broken.append(i)
        relay.join()  # every worker has exited: what they wrote last is relayed to its end
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        if metrics is not None:
            metrics.close()
        for guard in guards:
            guard.close()
    if failed:
        raise Unavailable(failed)
    if killed:
        # Their in-flight calls were cut off and what they held was not closed: no clean stop.
        log.error("stopped, killing workers %s", ", ".join(map(str, killed)), extra={"killed": killed, "broken": broken})
        return UNCLEAN_STOP
    if broken:
        log.error("stopped, workers %s not cleanly", ", ".join(map(str, broken)), extra={"broken": broken})
        return UNCLEAN_STOP
    log.info("stopped")
    return 0
