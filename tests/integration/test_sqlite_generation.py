"""The SQLite store's generation, read from the wal-index header, against SQLite's own ``PRAGMA
data_version``: it must change whenever another connection or process commits, and not when
nothing was committed (a served answer is only as current as this number)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.backends.metadata_store.wal_index import HEADER_BYTES, WalIndexHeader, mapped_by_this_process
from retrieval_server.domain import Document, ParentChunk


@contextmanager
def _pragma(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection of its own that only reads ``PRAGMA data_version``: SQLite's answer to compare with."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def _version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


async def test_the_wal_index_is_read_and_changes_with_commits_by_this_process_and_another_only(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    store = SqliteMetadataStore(path)
    await store.open()
    try:
        assert store._wal_index is not None  # where the generation is read
        first = store.generation()
        assert first is not None and store.generation() == first
        await store.replace_document(Document("d1", title="t", content_hash="h1"), [ParentChunk("d1#p0", "d1", 0, "text", 1)])
        after_ingest = store.generation()
        assert after_ingest != first
        assert await store.get_document("d1") is not None and store.generation() == after_ingest  # reads commit nothing
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("SELECT count(*) FROM documents").fetchall()
        assert store.generation() == after_ingest
        other.execute("UPDATE documents SET title = 'u' WHERE document_id = 'd1'")
        after_update = store.generation()
        assert after_update not in (first, after_ingest)
        other.close()
        subprocess.run([sys.executable, "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None);"
                        " c.execute(\"DELETE FROM documents WHERE document_id = 'd1'\")", str(path)], check=True)
        assert store.generation() not in (first, after_ingest, after_update)
        assert await store.get_document("d1") is None
    finally:
        await store.close()


_ACTIONS = st.lists(st.sampled_from(["insert", "update-nothing", "read", "rollback", "checkpoint"]), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=_ACTIONS)
def test_the_wal_index_changes_whenever_data_version_does(tmp_path_factory: object, actions: list[str]) -> None:
    import asyncio

    path = Path(tmp_path_factory.mktemp("g")) / "m.sqlite3"  # type: ignore[attr-defined]

    async def run() -> None:
        store = SqliteMetadataStore(path)
        await store.open()
        try:
            assert store._wal_index is not None  # where the generation is read
            writer = sqlite3.connect(path, isolation_level=None)
            with _pragma(path) as sqlite_says:
                for i, action in enumerate(actions):
                    before, version = store.generation(), _version(sqlite_says)
                    if action == "insert":
                        writer.execute("INSERT INTO documents (document_id, access, updated_at) VALUES (?, 'public', 0)", [f"d{i}"])
                    elif action == "update-nothing":
                        writer.execute("UPDATE documents SET title = 'x' WHERE document_id = 'none'")
                    elif action == "read":
                        writer.execute("SELECT count(*) FROM documents").fetchall()
                    elif action == "rollback":
                        writer.execute("BEGIN IMMEDIATE")
                        writer.execute("INSERT INTO documents (document_id, access, updated_at) VALUES ('r', 'public', 0)")
                        writer.execute("ROLLBACK")
                    else:
                        writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                    committed = _version(sqlite_says) != version
                    # Every commit shows; a checkpoint may show as a change that was none (a served answer lost, no harm).
                    assert (store.generation() != before) == committed or (action == "checkpoint" and not committed)
            writer.close()
        finally:
            await store.close()

    asyncio.run(run())


def test_a_torn_header_reads_as_unknown(tmp_path: Path) -> None:
    whole = bytes(range(HEADER_BYTES))
    assert WalIndexHeader(whole + whole).read() == int.from_bytes(whole, "little")
    assert WalIndexHeader(whole + bytes(HEADER_BYTES)).read() is None


async def test_a_wal_index_this_process_does_not_map_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    store = SqliteMetadataStore(path)
    await store.open()
    try:
        shm = Path(f"{path}-shm")
        copy = tmp_path / "copy.sqlite3-shm"
        copy.write_bytes(shm.read_bytes())
        assert mapped_by_this_process(shm, shm.stat().st_ino)
        assert not mapped_by_this_process(copy, copy.stat().st_ino)  # the same bytes, not SQLite's memory
        assert WalIndexHeader.open(tmp_path / "copy.sqlite3") is None
        assert WalIndexHeader.open(tmp_path / "absent.sqlite3") is None
    finally:
        await store.close()


def test_a_database_not_in_wal_mode_has_no_wal_index(tmp_path: Path) -> None:
    path = tmp_path / "rollback.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    assert WalIndexHeader.open(path) is None
    conn.close()


async def test_without_a_wal_index_the_store_asks_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    store = SqliteMetadataStore(path)
    await store.open()
    try:
        assert store._wal_index is not None
        store._wal_index.close()
        store._wal_index = None  # as where no wal-index can be read
        first = store.generation()
        await store.replace_document(Document("d1", title="t", content_hash="h1"), [ParentChunk("d1#p0", "d1", 0, "text", 1)])
        assert store.generation() != first
    finally:
        await store.close()
