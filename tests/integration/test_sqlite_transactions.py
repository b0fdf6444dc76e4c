"""The SQLite store's write transactions when SQLite ends one by itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.domain import Document, ParentChunk


async def test_a_full_disk_fails_the_write_with_its_own_error_and_leaves_the_old_version(tmp_path: Path) -> None:
    """SQLite rolls a transaction back itself on SQLITE_FULL: the store's ROLLBACK then failed
    ("cannot rollback - no transaction is active") and hid why the write failed."""
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        await store.replace_document(Document("d1", "old"), [ParentChunk("d1#p0", "d1", 0, "old text", 1)])
        conn = store._conn
        assert conn is not None
        pages = (await conn.execute_fetchall("PRAGMA page_count"))[0][0]
        await conn.execute(f"PRAGMA max_page_count = {pages + 3}")  # stands in for a full disk
        big = [ParentChunk(f"d1#p{i}", "d1", i, "x" * 30_000, 1) for i in range(20)]
        with pytest.raises(sqlite3.OperationalError, match="full"):
            await store.replace_document(Document("d1", "new"), big)
        await conn.execute("PRAGMA max_page_count = 1073741823")
        doc = await store.get_document("d1")
        assert doc is not None and doc.title == "old"
        assert list((await store.get_parents_and_documents(["d1#p0", "d1#p1"]))[0]) == ["d1#p0"]
        assert await store.replace_document(Document("d2", "next"), []) is False
    finally:
        await store.close()
