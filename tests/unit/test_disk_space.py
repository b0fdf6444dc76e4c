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
from retrieval_server.backends.disk import MIB, READ_COPY_PREFIX, copy_for_reading, opening_bytes


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

