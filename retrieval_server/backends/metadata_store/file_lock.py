"""A lock by name held across the processes of one host: an open file description lock (Linux's
``F_OFD_SETLK``) on one byte of a lock file, at an offset the name hashes to.

One byte per name, so two names never wait for each other (a 62-bit hash), and one file for every
name (a file per document would be left behind for every document ever written). The lock belongs
to the open file, not the process: two holders in one process exclude each other too, and a holder
that dies (its process killed) lets go with its descriptor. (POSIX record locks, ``lockf``, are
the process's: a second descriptor closed anywhere in it would release them all.)
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import hashlib
import logging
import os
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

log = logging.getLogger(__name__)

#: the longest pause between two tries while another process holds the name (from 1 ms, doubling)
MAX_PAUSE_S = 0.05
#: ``struct flock`` on 64-bit Linux: l_type, l_whence, l_start, l_len, l_pid (and padding)
_FLOCK = struct.Struct("hhqqi4x")


def offset_of(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") >> 2


@asynccontextmanager
async def file_lock(path: Path, name: str, *, wait: bool = True) -> AsyncIterator[bool]:
    """Hold ``name`` in the lock file ``path`` (created if missing) exclusively while the block
    runs; yields whether it is held (always, unless ``wait`` is false and another holder has it).

    Tries without blocking and pauses between tries: a blocking lock would hold a thread that
    cannot be cancelled, and the holder's write takes milliseconds to seconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, offset_of(name), 1, 0)
    try:
        pause = 0.0
        while True:
            try:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, request)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if not wait:
                    yield False
                    return
                if not pause:
                    log.info("waiting for another writer's lock", extra={"lock": name})
                pause = min(2 * pause, MAX_PAUSE_S) if pause else 0.001
                await asyncio.sleep(pause)
        yield True
    finally:
        os.close(fd)  # releases the lock
