"""A lock by name held across the processes of one host: ``flock`` on one of a folder's files.

Names share ``STRIPES`` files, so two names may wait for each other (never deadlock: a holder
takes one name at a time). A file per name would leave a file behind for every document ever
written. ``flock`` locks belong to the open file, not the process: two holders in one process
exclude each other too, and a holder that dies (its process killed) lets go with its descriptor.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

log = logging.getLogger(__name__)

#: files the names share: of five writes at once, two share one about one time in 25
STRIPES = 256
#: the longest pause between two tries while another process holds the file (from 1 ms, doubling)
MAX_PAUSE_S = 0.05


def stripe_of(name: str) -> str:
    return f"{hashlib.sha256(name.encode()).digest()[0] % STRIPES:02x}"


@asynccontextmanager
async def file_lock(folder: Path, name: str, *, wait: bool = True) -> AsyncIterator[bool]:
    """Hold ``name``'s file in ``folder`` (created if missing) exclusively while the block runs;
    yields whether it is held (always, unless ``wait`` is false and another holder has it).

    Tries without blocking and pauses between tries: a blocking ``flock`` would hold a thread that
    cannot be cancelled, and the holder's write takes milliseconds to seconds. (Read-only is enough
    for ``flock``, and lets processes of other users sharing the folder take it too.)"""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / stripe_of(name), os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        pause = 0.0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
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
