"""Free space on the volumes the embedded engines write to, checked before they write.

The embedded vector engine memory-maps its files: on a full volume a write faults with SIGBUS
and the process dies without a word. So every write is refused first, with a clear error, while
free space is below a floor.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from retrieval_server.domain import ResourceExhausted
from retrieval_server.stale_runs import own_folder

MIB = 1024 * 1024
#: a private copy of the vector folder in the temporary directory: this, the pid, "-", a random part
READ_COPY_PREFIX = "retrieval-readonly-"


def estimated_bytes(content_bytes: int, children: int = 0, dim: int = 384) -> int:
    """What storing that much text is expected to add on disk: parent rows and full-text index,
    child payloads, and a dense plus a sparse vector per child (generous, so the floor holds)."""
    return 4 * content_bytes + children * (dim * 4 + 2048)


def free_bytes(path: Path) -> int:
    """Free bytes for an unprivileged writer on the volume holding ``path`` (or its nearest existing parent)."""
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize


def folder_bytes(path: Path) -> int:
    """What the files in ``path`` hold on disk: their allocated blocks, not their sizes, as the
    engine preallocates its files sparse (and :func:`copy_sparse` keeps them so)."""
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


#: how much of a file's data :func:`copy_sparse` reads at a time
COPY_CHUNK_BYTES = 1024 * 1024


def copy_sparse(source: str, target: str) -> str:
    """:func:`shutil.copy2` that leaves the source's holes holes (a ``copy_function`` for
    :func:`shutil.copytree`): the engine preallocates its files sparse, 32 MiB per dense vector's
    chunk, and a plain copy wrote them whole, 231 MiB on disk per worker for an index of 0.2 MiB.
    Where the file system cannot tell the holes (no SEEK_DATA), a plain copy."""
    with open(source, "rb") as src:
        size = os.fstat(src.fileno()).st_size
        try:
            start = os.lseek(src.fileno(), 0, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no data at all, only a hole
                return shutil.copy2(source, target)
            start = size
        with open(target, "wb") as dst:
            while start < size:
                end = os.lseek(src.fileno(), start, os.SEEK_HOLE)
                src.seek(start)
                dst.seek(start)
                while start < end and (chunk := src.read(min(COPY_CHUNK_BYTES, end - start))):
                    dst.write(chunk)
                    start += len(chunk)
                try:
                    start = os.lseek(src.fileno(), end, os.SEEK_DATA)
                except OSError as exc:
                    if exc.errno != errno.ENXIO:
                        raise
                    break  # only a hole is left
            dst.truncate(size)
    shutil.copystat(source, target)
    return target


def _faulted_in_at_open(path: Path) -> bool:
    """The embedded engine's files that it reads whole into memory when it opens an index: the
    dense vectors' chunks and the payload index's pages. It preallocates them sparse (32 MiB per
    dense vector, 2-4 MiB per indexed field), so opening writes their holes."""
    return (path.name.startswith("chunk_") and path.suffix == ".mmap") or "payload_index" in path.parts


def opening_bytes(vectors: Path) -> int:
    """What opening the vector index in ``vectors`` adds on disk: the unwritten part of the files
    the engine faults in (a one-document index with two dense vectors: 0.4 MiB on disk, 64 MiB
    once open; its payload indexes add 2-4 MiB per field once it has them). Without room for it
    the engine dies of SIGBUS at start-up."""
    if not vectors.is_dir():
        return 0
    total = 0
    for f in vectors.rglob("*"):
        if f.is_file() and _faulted_in_at_open(f):
            st = f.stat()
            total += max(0, st.st_size - st.st_blocks * 512)
    return total


@dataclass(frozen=True, slots=True)
class DiskSpace:
    """The volumes written to (embedded stores only: a MySQL or Qdrant server watches its own disk)."""

    paths: tuple[Path, ...]
    floor_bytes: int

    @staticmethod
    def of(paths: Iterable[Path], floor_mb: int) -> DiskSpace:
        return DiskSpace(tuple(dict.fromkeys(paths)), floor_mb * MIB)

    def shortest(self) -> tuple[Path, int] | None:
        """The watched path with the least free space, and that space."""
        sizes = [(p, free_bytes(p)) for p in self.paths]
        return min(sizes, key=lambda ps: ps[1]) if sizes else None

    def check(self, needed_bytes: int = 0, what: str = "this write") -> None:
        """Raise :class:`ResourceExhausted` unless ``needed_bytes`` more still leave the floor free."""
        low = self.shortest()
        if low is not None and low[1] - needed_bytes < self.floor_bytes:
            path, free = low
            raise ResourceExhausted(
                f"only {free // MIB} MiB free on the volume of {path} ({what} needs about {needed_bytes // MIB + 1} MiB more), "
                f"below the floor RETRIEVAL_MIN_FREE_DISK_MB={self.floor_bytes // MIB}: free space or raise the volume's size"
            )


def copy_for_reading(source: Path, floor_mb: int) -> Path:
    """A private copy of a folder to open read-only data from (the engine writes while it loads), in
    the process's temporary folder: a worker's is the one its supervisor removes after it exits;
    another process's, left by a kill, is removed by the next to copy there (:func:`own_folder`)."""
    target = own_folder(READ_COPY_PREFIX)
    # What the source holds on disk, and the holes the engine writes in the copy as it opens it.
    DiskSpace.of([target], floor_mb).check(folder_bytes(source) + opening_bytes(source), "the private copy of the index")
    if source.is_dir():
        shutil.copytree(source, target, copy_function=copy_sparse, dirs_exist_ok=True)
    return target
