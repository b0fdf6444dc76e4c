"""`retrieval-server serve` as a child process of a benchmark: started, health-checked, stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from retrieval.v1 import retrieval_pb2 as pb
from bench.transport import PLAINTEXT, Transport
from retrieval_client import RetrievalClient, Tls


#: Ports :func:`free_port` handed out in this process. The kernel may pick a port it just freed
#: again, and callers take several before the first is bound (a server's port and its metrics
#: port, say): without this, two of them could be the same.
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A loopback port nobody listens on now and that this process was not given before."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


@dataclass(frozen=True, slots=True)
class RunningServer:
    target: str
    pid: int
    log: Path


def listening_processes(pid: int, port: int) -> int:
    """How many processes of the tree under ``pid`` listen on ``port`` (workers sharing it with SO_REUSEPORT)."""
    import psutil

    root = psutil.Process(pid)
    count = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="tcp")
        except psutil.Error:
            continue
        count += any(c.status == psutil.CONN_LISTEN and c.laddr.port == port for c in conns)
    return count


def _wait_listening(pid: int, port: int, processes: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while listening_processes(pid, port) < processes:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {listening_processes(pid, port)} of {processes} server processes listen on {port}")
        time.sleep(0.3)


def wait_healthy(target: str, proc: subprocess.Popen[Any], timeout_s: float, log: Path | None = None, tls: Tls | None = None,
                 poll_s: float = 0.3) -> None:
    """Poll the Health RPC every ``poll_s`` until SERVING or DEGRADED; fail with the server's output if it exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = log.read_text()[-4000:] if log else (proc.stderr.read() if proc.stderr else "")
            raise RuntimeError(f"the server exited with {proc.returncode}; its output:\n{output}")
        try:
            with RetrievalClient(target, timeout=2, tls=tls) as client:
                if client.health().status in (pb.SERVING_STATUS_SERVING, pb.SERVING_STATUS_DEGRADED):
                    return
        except grpc.RpcError:
            pass
        time.sleep(poll_s)
    raise RuntimeError(f"the server did not become healthy in {timeout_s:.0f} s" + (f"; log: {log}" if log else ""))


def parse_set(items: Sequence[str]) -> dict[str, str]:
    """A bench's ``--set`` items as server settings; ValueError naming those that are not RETRIEVAL_NAME=VALUE."""
    if bad := [item for item in items if "=" not in item or not item.startswith("RETRIEVAL_")]:
        raise ValueError(f"--set takes RETRIEVAL_NAME=VALUE (got {bad})")
    return dict(item.split("=", 1) for item in items)


def service_env(settings: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without its RETRIEVAL_* variables, plus ``settings``.

    RETRIEVAL_MODEL defaults to int8: without a model folder the benches mean the bundled int8
    model, as their in-process floors load it; a new index would otherwise time int8 against fp32
    and may take fp32.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("RETRIEVAL_")}
    return {**env, "RETRIEVAL_MODEL": "int8", **settings}


@contextmanager
def running_server(settings: Mapping[str, str], log: Path, *, timeout_s: float = 300.0, transport: Transport = PLAINTEXT,
                   code: Path | None = None) -> Iterator[RunningServer]:
    """Serve with exactly these RETRIEVAL_* settings (the caller's own RETRIEVAL_* variables are dropped).

    ``code``: a checkout whose ``retrieval_server`` to run instead of the installed one (``-m`` puts
    the working directory first on the path), to compare two versions in one run."""
    port = free_port()
    env = service_env({"RETRIEVAL_HOST": "127.0.0.1", "RETRIEVAL_PORT": str(port), "RETRIEVAL_LOG_FORMAT": "json",
                       "RETRIEVAL_METRICS_PORT": "0", **transport.server_settings(), **settings})
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "retrieval_server.cli", "serve"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                cwd=code)
    target = f"127.0.0.1:{port}"
    try:
        wait_healthy(target, proc, timeout_s, log, transport.tls)
        _wait_listening(proc.pid, port, int(env.get("RETRIEVAL_PROCESSES", "1")), timeout_s)
        yield RunningServer(target, proc.pid, log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
