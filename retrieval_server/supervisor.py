"""Several server processes on one port (SO_REUSEPORT), each with its own Application.

The workers are spawned, not forked, so no gRPC object, thread or model session crosses a
process boundary. The embedded engines lock their folder to one process, so with embedded
storage each worker serves a fresh copy of the vector folder, read-only; with a Qdrant server
every worker writes to it directly.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import shutil
import signal
import time
from multiprocessing.process import BaseProcess
from pathlib import Path

from retrieval_server.config import Settings
from retrieval_server.observability.logging import configure
from retrieval_server.observability.multiprocess import MultiprocessMetrics

log = logging.getLogger(__name__)

#: A worker that dies this soon after starting is a startup failure (bad port, bad index): give up.
STARTUP_WINDOW_S = 20.0


def replica_dir(settings: Settings, worker: int) -> Path:
    return settings.data_dir / "replicas" / f"worker-{worker}"


def worker_settings(settings: Settings, worker: int) -> Settings:
    update: dict[str, object] = {"metrics_enabled": False}  # the supervisor serves every worker's metrics
    if not settings.shares_writable_storage:
        update.update(read_only=True, vectors_dir=replica_dir(settings, worker))
    return settings.model_copy(update=update)


def prepare_replicas(settings: Settings) -> None:
    """Copy the vector folder once per worker; the copies are rebuilt at every start."""
    source = settings.embedded_vectors_dir
    if not source.is_dir():
        log.warning("no index at %s yet: the workers serve an empty, read-only index", source)
    for worker in range(settings.processes):
        target = replica_dir(settings, worker)
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)


def _run_worker(settings: Settings, worker: int) -> None:
    from retrieval_server.server import serve

    configure(settings.log_level, settings.log_format)
    log.info("worker starting", extra={"worker": worker})
    asyncio.run(serve(settings))


def supervise(settings: Settings) -> int:
    """Run ``settings.processes`` workers until SIGTERM/SIGINT; restart one that crashes after startup."""
    if not settings.shares_writable_storage:
        prepare_replicas(settings)
    metrics = MultiprocessMetrics() if settings.metrics_enabled else None
    if metrics is not None:
        try:
            port = metrics.serve(settings.host, settings.metrics_port)
        except OSError as exc:
            metrics.close()
            log.error("cannot serve metrics on %s:%s: %s", settings.host, settings.metrics_port, exc)
            return 1
        log.info("serving metrics", extra={"metrics_port": port, "metrics_dir": str(metrics.directory)})
    ctx = multiprocessing.get_context("spawn")
    stopping = False

    def start(worker: int, restart: bool = False) -> tuple[BaseProcess, float]:
        proc = ctx.Process(target=_run_worker, args=(worker_settings(settings, worker), worker), name=f"retrieval-worker-{worker}")
        proc.start()
        if metrics is not None and proc.pid is not None:
            metrics.worker_started(worker, proc.pid, restart=restart)
        return proc, time.monotonic()

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    workers = [start(i) for i in range(settings.processes)]
    log.info("supervising", extra={"processes": settings.processes, "port": settings.port, "read_only": not settings.shares_writable_storage})
    code = 0
    while not stopping:
        time.sleep(0.2)
        for i, (proc, started) in enumerate(workers):
            if proc.is_alive() or stopping:
                continue
            if metrics is not None and proc.pid is not None:
                metrics.worker_exited(i, proc.pid)
            if time.monotonic() - started < STARTUP_WINDOW_S:
                log.error("worker %d exited with %s during startup; stopping", i, proc.exitcode)
                stopping, code = True, 1
                break
            log.error("worker %d exited with %s; restarting it", i, proc.exitcode)
            workers[i] = start(i, restart=True)
    for proc, _ in workers:
        if proc.is_alive():
            proc.terminate()  # SIGTERM: the worker finishes in-flight calls within its grace period
    for proc, _ in workers:
        proc.join(settings.grace_period_s + 30)
        if proc.is_alive():
            proc.kill()
            proc.join()
    if metrics is not None:
        metrics.close()
    log.info("stopped")
    return code
