"""Who uses an embedded vector folder: one process writing it, or processes reading copies of it,
never both.

qdrant-edge locks the folder it opens to one process, but a read-only server (and each worker of
``RETRIEVAL_PROCESSES`` > 1) opens a private copy made at start and holds no lock on the folder
itself: an ingest beside it succeeded, and the readers, whose copies kept the old points while
SQLite moved on, left every replaced document out of their answers. So every user of the folder
holds a lock file beside it (``<folder>.lock``, BSD ``flock``): readers shared, the writer
exclusive, and whoever comes second is refused.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from retrieval_server.domain import Unavailable


def lock_file(folder: Path) -> Path:
    return folder.with_name(folder.name + ".lock")


def hold(folder: Path, *, reading: bool) -> int | None:
    """The descriptor holding the lock (closing it lets go), or None where no lock file can be made
    beside the folder (a read-only volume, or a folder mounted below a read-only one): no other
    process can make one there either. Raises :class:`Unavailable` when another process holds it
    the other way (or writes it, for a writer)."""
    path = lock_file(folder)
    try:
        if not reading:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.ENOENT):
            return None
        raise
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if reading else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Unavailable(
            f"vector folder {folder} is open in another process (one process writes a folder, and none "
            "reads a copy of it meanwhile: a server with RETRIEVAL_READ_ONLY or RETRIEVAL_PROCESSES > 1 "
            "reads copies; stop it first)"
        ) from None
    return fd
