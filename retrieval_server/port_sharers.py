"""Who else listens on the port a supervisor's workers share (Linux: /proc).

SO_REUSEPORT lets any socket of the same user that sets it join the workers' group, however the
port is held: another server run by that user (a plain ``grpc.server()`` sets it by default on
Linux) took a share of the new connections and answered them its own way, and nothing said so.
The kernel keeps other users' sockets out; this finds the rest. Where there is no /proc it finds
nothing.

Not only on the workers' own address: the kernel gives a connection to the listener bound to its
address before a wildcard's, so one on 127.0.0.1 beside workers on 0.0.0.0 took every loopback
connection. A listener counts where its address and the workers' can take the same connections.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Collection, Iterable

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: /proc/net/tcp's state of a listening socket
LISTEN = "0A"
_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def _address(written: str) -> _Address:
    """A local address as /proc/net/tcp{,6} writes it: its 32-bit words in hex, each read in the
    host's byte order. An IPv4-mapped one (a tcp6 socket bound to ::ffff:127.0.0.1) is its IPv4
    address, as it takes that address's connections."""
    packed = b"".join(int(written[i:i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(written), 8))
    address = ipaddress.ip_address(packed)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _overlap(a: _Address, b: _Address) -> bool:
    """Whether listeners on ``a`` and ``b``, one port, can take the same connections: the same
    address, or either a wildcard of the other's family; [::] of IPv4's too, as gRPC's [::] is
    dual-stack (and /proc does not tell whether a socket set IPV6_V6ONLY)."""
    if a == b:
        return True
    return any(wild.is_unspecified and wild.version in (other.version, 6) for wild, other in ((a, b), (b, a)))


def _listeners(ports: Collection[int]) -> dict[int, tuple[_Address, int]]:
    """The sockets listening on ``ports``: inode -> (local address, port)."""
    found: dict[int, tuple[_Address, int]] = {}
    for table in _TABLES:
        try:
            with open(table) as rows:
                next(rows, None)  # the header
                for row in rows:
                    fields = row.split()
                    if len(fields) < 10 or fields[3] != LISTEN:
                        continue
                    address, _, port = fields[1].rpartition(":")
                    if int(port, 16) in ports:
                        found[int(fields[9])] = (_address(address), int(port, 16))
        except OSError:
            continue  # no IPv6, or no /proc
    return found


def _sockets(pid: int) -> set[int]:
    """The inodes of the sockets ``pid`` holds (none if it is gone or not ours to read).

    A process whose main thread has exited (a zombie, not reaped while another thread lives: a
    killed worker's last threads for some 35 ms, or for good one in uninterruptible I/O) lists no
    descriptors, while its other threads still hold its sockets: they are read from each thread's.
    Read from the process alone, a worker's own listener was then taken for another server's."""
    try:
        if os.listdir(f"/proc/{pid}/fd"):
            folders = [f"/proc/{pid}/fd"]
        else:
            folders = [f"/proc/{pid}/task/{tid}/fd" for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return set()
    return set().union(*map(_descriptor_sockets, folders))


def _descriptor_sockets(folder: str) -> set[int]:
    """The inodes of the sockets in a /proc descriptor folder (none if it cannot be read)."""
    inodes: set[int] = set()
    try:
        descriptors = os.listdir(folder)
    except OSError:
        return inodes
    for fd in descriptors:
        try:
            target = os.readlink(f"{folder}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


def _owner(inode: int) -> int | None:
    """The pid of a process holding socket ``inode``, if one is readable here (the same user's, in
    this pid namespace)."""
    try:
        pids = [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return None
    return next((pid for pid in pids if inode in _sockets(pid)), None)


class PortSharers:
    """Finds, on ``ports``, listeners beside the workers' own that can take their connections: each once."""

    def __init__(self, ports: Collection[int]) -> None:
        self._ports = set(ports)
        self._found: set[int] = set()

    def new(self, workers: Iterable[int]) -> list[tuple[int, int | None]]:
        """The listeners found since the last call, as (port, pid or None when unreadable), given
        the pids of the workers."""
        pids = list(workers)
        ours = set().union(*map(_sockets, pids))
        listening = _listeners(self._ports)
        # Read again after the listeners: a worker that started listening in between is not taken
        # for a stranger (nor, read before, one that exited).
        ours |= set().union(*map(_sockets, pids))
        shared = {listening[inode] for inode in ours if inode in listening}
        strangers = [
            (inode, (address, port))
            for inode, (address, port) in listening.items()
            if inode not in ours | self._found and any(port == p and _overlap(address, a) for a, p in shared)
        ]
        self._found.update(inode for inode, _ in strangers)
        return [(port, _owner(inode)) for inode, (_, port) in strangers]
