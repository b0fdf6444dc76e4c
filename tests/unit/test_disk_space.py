"""What opening an embedded vector index writes, counted before it is opened."""

from __future__ import annotations

from pathlib import Path

from retrieval_server.backends.disk import MIB, opening_bytes


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
