"""What opening an embedded vector index writes, counted before it is opened; the private copies
read-only servers open instead."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from retrieval_server import stale_runs
from retrieval_server.backends import disk
from retrieval_server.backends.disk import MIB, READ_COPY_PREFIX, copy_for_reading, opening_bytes
from retrieval_server.domain import ResourceExhausted


def _sparse(path: Path, size: int, written: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.write(b"x" * written)
        f.truncate(size)


def test_only_the_holes_of_the_files_the_engine_faults_in_count(tmp_path: Path) -> None:
    segment = tmp_path / "segments" / "s1"
    _sparse(segment / "vector_storage-dense" / "vectors" / "chunk_0.mmap", 32 * MIB)
    _sparse(segment / "vector_storage-parent" / "vectors" / "chunk_0.mmap", 32 * MIB, written=MIB)
    _sparse(segment / "payload_index" / "f-map" / "page_0.dat", 4 * MIB)
    # Written as data arrives, not at open: the write-ahead log, sparse stores, payload storage.
    _sparse(tmp_path / "wal" / "open-1", 32 * MIB)
    _sparse(segment / "vector_storage-bm25" / "store" / "page_0.dat", 32 * MIB)
    _sparse(segment / "payload_storage" / "page_0.dat", 32 * MIB)
    needed = opening_bytes(tmp_path)
    # Block granularity: the written MiB may leave part of a block unaccounted either way.
    assert abs(needed - (32 + 31 + 4) * MIB) <= 64 * 1024
    assert opening_bytes(tmp_path / "absent") == 0


@pytest.fixture
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary directory of the test's own, which this process has made no folder in yet."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setattr(stale_runs, "_swept", set())
    return folder


def test_a_killed_servers_copy_of_the_index_is_removed_by_the_next_copy(tmp_path: Path, own_tmp: Path) -> None:
    """A read-only server that is killed (the OOM killer) leaves its copy; each restart of one that
    keeps being killed added another, as large as the index, until the volume was full."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    killed, alive = own_tmp / f"{READ_COPY_PREFIX}{gone.pid}-a1", own_tmp / f"{READ_COPY_PREFIX}{os.getppid()}-b2"
    killed_metadata = own_tmp / f"retrieval-readonly-metadata-{gone.pid}-c3"
    for folder in (killed, alive, killed_metadata):
        folder.mkdir()
    (tmp_path / "index").mkdir()
    first = copy_for_reading(tmp_path / "index", 0)
    assert first.name.startswith(f"{READ_COPY_PREFIX}{os.getpid()}-")
    assert sorted(own_tmp.iterdir()) == sorted([alive, killed_metadata, first])  # another store's copies are its own to sweep
    # This process's own copies are live ones: a second store opened beside the first keeps it.
    second = copy_for_reading(tmp_path / "index", 0)
    assert sorted(own_tmp.iterdir()) == sorted([alive, killed_metadata, first, second])


def _allocated(folder: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in folder.rglob("*") if f.is_file())


def test_a_copy_of_the_index_keeps_its_files_sparse(tmp_path: Path, own_tmp: Path) -> None:
    """The engine preallocates its files sparse: 32 MiB per dense vector's chunk. A plain copy
    writes their holes, 231 MiB on disk per worker for an index of 0.2 MiB."""
    index = tmp_path / "index"
    _sparse(index / "segments" / "s1" / "vector_storage-dense" / "vectors" / "chunk_0.mmap", 32 * MIB, written=4096)
    with (index / "middle.dat").open("wb") as f:  # data after a hole, and a hole at the end
        f.seek(8 * MIB)
        f.write(b"y" * 4096)
        f.truncate(16 * MIB)
    (index / "small.json").write_text("{}")
    if _allocated(index) > MIB:
        pytest.skip("this file system does not keep files sparse")
    copy = copy_for_reading(index, 0)
    assert _allocated(copy) <= _allocated(index) + 64 * 1024
    for f in index.rglob("*"):
        if f.is_file():
            assert (copy / f.relative_to(index)).read_bytes() == f.read_bytes()


def test_the_free_space_a_copy_needs_is_what_its_source_holds_on_disk_and_what_opening_it_writes(
    tmp_path: Path, own_tmp: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted by apparent size, a one-document index (hundreds of MiB of holes) was refused on a
    volume with room for it many times over. The holes the engine fills as it opens the copy count."""
    index = tmp_path / "index"
    _sparse(index / "wal" / "open-1", 64 * MIB, written=4096)  # written as data arrives, not at open
    if _allocated(index) > MIB:
        pytest.skip("this file system does not keep files sparse")
    monkeypatch.setattr(disk, "free_bytes", lambda _path: 32 * MIB)
    copy = copy_for_reading(index, 16)
    assert (copy / "wal" / "open-1").stat().st_size == 64 * MIB
    _sparse(index / "segments" / "s1" / "vector_storage-dense" / "vectors" / "chunk_0.mmap", 17 * MIB)  # faulted in at open
    with pytest.raises(ResourceExhausted, match="RETRIEVAL_MIN_FREE_DISK_MB=16"):
        copy_for_reading(index, 16)
