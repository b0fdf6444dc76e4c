"""Who else listens on the port a supervisor's workers share (Linux: /proc).

SO_REUSEPORT lets any socket of the same user that sets it join the workers' group, however the
port is held: another server run by that user (a plain ``grpc.server()`` sets it by default on
Linux) took a share of the new connections and answered them its own way, and nothing said so.
The kernel keeps other users' sockets out; this finds the rest. Where there is no /proc it finds
nothing.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable

#: /proc/net/tcp's state of a listening socket
LISTEN = "0A"
_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def _listeners(ports: Collection[int]) -> dict[int, tuple[str, int]]:
    """The sockets listening on ``ports``: inode -> (local address as /proc writes it, port)."""
    found: dict[int, tuple[str, int]] = {}
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
                        found[int(fields[9])] = (address, int(port, 16))
        except OSError:
            continue  # no IPv6, or no /proc
    return found


def _sockets(pid: int) -> set[int]:
    """The inodes of the sockets ``pid`` holds (none if it is gone or not ours to read)."""
    inodes: set[int] = set()
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in descriptors:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


def _owner(inode: int) -> int | None:
    """The pid of a process holding socket ``inode``, if one is readable here (the same user's, in
    this pid namespace)."""
    target = f"socket:[{inode}]"
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return None
    for pid in entries:
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return int(pid)
            except OSError:
                continue
    return None


class PortSharers:
    """Finds, on ``ports``, listeners beside the workers' own on the same address: each once."""

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
        strangers = [(inode, where) for inode, where in listening.items() if where in shared and inode not in ours | self._found]
        self._found.update(inode for inode, _ in strangers)
        return [(port, _owner(inode)) for inode, (_, port) in strangers]
