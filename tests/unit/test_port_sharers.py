"""Which of the same user's listeners on the workers' port the supervisor reports (Linux: /proc)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from retrieval_server.port_sharers import PortSharers

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc")

_STRANGER = """
import socket, sys
family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(family)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
print("listening", flush=True)
sys.stdin.read()  # until the test is done with it
"""


def _worker(host: str) -> socket.socket:
    """A worker's listener on ``host`` (this process's), on a free port; [::] dual-stack, as gRPC binds it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.socket(family)
    except OSError:
        pytest.skip("no IPv6 here")
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, 0))
    sock.listen()
    return sock


@pytest.fixture
def strangers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.communicate(timeout=60)


def _listen(started: list[subprocess.Popen[str]], host: str, port: int) -> int:
    proc = subprocess.Popen([sys.executable, "-c", _STRANGER, host, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline() == "listening\n"
    return proc.pid


@pytest.mark.parametrize(
    ("workers", "other", "reported"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        # The kernel gives a connection to the listener on its address before the wildcard's: every
        # loopback connection went to this one, unreported.
        ("0.0.0.0", "127.0.0.1", True),
        ("127.0.0.1", "0.0.0.0", True),
        ("0.0.0.0", "::ffff:127.0.0.1", True),  # a tcp6 socket bound to a v4-mapped address
        ("::", "127.0.0.1", True),  # dual-stack: the workers take IPv4 connections too
        ("127.0.0.1", "127.0.0.2", False),  # no connection either could take
    ],
)
def test_a_listener_that_can_take_the_workers_connections_is_reported_once(
    strangers: list[subprocess.Popen[str]], workers: str, other: str, reported: bool
) -> None:
    with _worker(workers) as worker:
        port = worker.getsockname()[1]
        sharers = PortSharers({port})
        assert sharers.new([os.getpid()]) == []
        pid = _listen(strangers, other, port)
        assert sharers.new([os.getpid()]) == ([(port, pid)] if reported else [])
        assert sharers.new([os.getpid()]) == []


#: a worker on the port whose main thread has exited while another thread holds its sockets, as a
#: killed worker's does for some 35 ms: /proc lists its descriptors no more
_EXITING = """
import ctypes, socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()

def last_thread():
    while open("/proc/self/stat").read().rpartition(")")[2].split()[0] != "Z":
        pass  # until the main thread has exited
    print("exiting", flush=True)
    sys.stdin.read()  # until the test is done with it

threading.Thread(target=last_thread).start()
ctypes.CDLL(None).pthread_exit(None)
"""


def _exiting_worker(strangers: list[subprocess.Popen[str]], port: int) -> subprocess.Popen[str]:
    """A worker whose main thread has exited while its last thread holds a listener on ``port``."""
    exiting = subprocess.Popen([sys.executable, "-c", _EXITING, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    strangers.append(exiting)
    assert exiting.stdout is not None and exiting.stdout.readline() == "exiting\n"
    return exiting


def test_no_listener_is_reported_while_a_worker_exits(strangers: list[subprocess.Popen[str]]) -> None:
    """The supervisor looked for other servers in the pass it killed a hung worker: the worker's
    own listener, its descriptors no longer listed, was reported as another server's."""
    with _worker("127.0.0.1") as worker:
        port = worker.getsockname()[1]
        exiting = _exiting_worker(strangers, port)
        sharers = PortSharers({port})
        assert sharers.new([os.getpid(), exiting.pid]) == []
        exiting.communicate(timeout=60)  # gone, and reaped
        assert sharers.new([os.getpid()]) == []
        pid = _listen(strangers, "127.0.0.1", port)
        assert sharers.new([os.getpid()]) == [(port, pid)]  # one after is still found


def test_a_listener_is_reported_while_a_worker_is_a_zombie(strangers: list[subprocess.Popen[str]]) -> None:
    """A worker's main thread stays a zombie for as long as another of its threads lives (one in
    uninterruptible I/O at a SIGKILL): the check found nothing all that while, another server on
    the port too."""
    with _worker("127.0.0.1") as worker:
        port = worker.getsockname()[1]
        exiting = _exiting_worker(strangers, port)
        sharers = PortSharers({port})
        pid = _listen(strangers, "127.0.0.1", port)
        assert sharers.new([os.getpid(), exiting.pid]) == [(port, pid)]  # the exiting worker's own listener is not
        assert sharers.new([os.getpid(), exiting.pid]) == []
