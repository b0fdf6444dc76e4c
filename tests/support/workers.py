"""Which worker process of a multi-process server answered: SO_REUSEPORT assigns each new
connection to one of the listening workers, so a test finds a connection's worker by its socket."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import grpc
import psutil

from retrieval.v1 import retrieval_pb2_grpc


def listening_workers(server: subprocess.Popen[Any], port: int) -> list[psutil.Process]:
    """The server's children that listen on ``port`` (the spawn context also starts a resource tracker)."""
    return [
        c for c in psutil.Process(server.pid).children()
        if any(conn.status == psutil.CONN_LISTEN and conn.laddr.port == port for conn in c.net_connections(kind="tcp"))
    ]


def _established(worker: psutil.Process, port: int) -> set[tuple[str, int]]:
    return {(c.raddr.ip, c.raddr.port) for c in worker.net_connections(kind="tcp")
            if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port and c.raddr}


def on_new_connection(target: str, port: int, workers: list[psutil.Process],
                      calls: Callable[[retrieval_pb2_grpc.RetrievalServiceStub], None]) -> int:
    """Make ``calls`` on a fresh connection; return the index of the worker that served them."""
    before = [_established(w, port) for w in workers]
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        calls(retrieval_pb2_grpc.RetrievalServiceStub(channel))
        owners = [i for i, w in enumerate(workers) if _established(w, port) - before[i]]
    assert len(owners) == 1, f"the connection was found on workers {owners}"
    return owners[0]
