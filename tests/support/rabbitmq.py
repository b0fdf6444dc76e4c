"""A real rabbitmq-server (Debian's package) on loopback with a temporary directory, started by the tests.

Each broker gets its own node name, AMQP port, Erlang distribution port and its own epmd (on a
port of its own), so it never meets another broker on the machine, and everything it writes
stays in the test's directory. It can be stopped and started again on the same port and data
(a broker outage), or frozen with SIGSTOP (a broker that accepts connections and answers nothing).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.server_process import free_port
from tests.support.paths import require_binary

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
EPMD = "/usr/bin/epmd"


def _amqp_ready(port: int) -> bool:
    """The broker answers the AMQP protocol header with its Connection.Start frame."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            return s.recv(1) == b"\x01"  # a METHOD frame
    except OSError:
        return False


class RabbitMq:
    def __init__(self, workdir: Path) -> None:
        require_binary("rabbitmq-server", SERVER)
        self.workdir = workdir
        self.port = free_port()
        self._epmd_port = free_port()
        self._env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")},
            "HOME": str(workdir),  # the Erlang cookie goes here
            "ERL_EPMD_PORT": str(self._epmd_port),
            "RABBITMQ_NODENAME": f"rabbit-test-{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(workdir / "log"),
            "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(workdir / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(workdir / "rabbitmq.pid"),
        }
        (workdir / "rabbitmq-env.conf").write_text("")
        (workdir / "enabled_plugins").write_text("[].\n")
        self._epmd = subprocess.Popen([EPMD, "-port", str(self._epmd_port), "-address", "127.0.0.1"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def start(self, timeout_s: float = 180.0) -> None:
        log = (self.workdir / "server.out").open("ab")
        self._proc = subprocess.Popen([SERVER], env=self._env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not _amqp_ready(self.port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                out = (self.workdir / "server.out").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"rabbitmq-server did not start (exit {self._proc.poll()}):\n{out}")
            time.sleep(0.25)

    def stop(self) -> None:
        """A clean broker shutdown (SIGTERM), waited for."""
        if self._proc is not None and self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            self._proc.wait(timeout=120)
        self._proc = None

    def freeze(self) -> None:
        assert self._proc is not None
        os.killpg(self._proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self._proc is not None
        os.killpg(self._proc.pid, signal.SIGCONT)

    def close(self) -> None:
        if self._proc is not None:
            self.thaw()
        self.stop()
        self._epmd.terminate()
        self._epmd.wait(timeout=30)


@contextmanager
def rabbitmq_server(workdir: Path) -> Iterator[RabbitMq]:
    broker = RabbitMq(workdir)
    try:
        broker.start()
        yield broker
    finally:
        broker.close()
