"""A read-only SQLite store on a read-only volume, where SQLite cannot create the WAL's
shared-memory file and so cannot read the WAL: commits a writer left only there (it stopped
before a checkpoint) are read from a private copy of the database and its WAL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from retrieval_server.backends.metadata_store import sqlite
from retrieval_server.domain import Unavailable

WRITE_AND_DIE = """
import asyncio, os, sys
from pathlib import Path
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.domain import Document, ParentChunk

async def main(path, ids):
    store = SqliteMetadataStore(Path(path))
    await store.open()
    for doc_id in ids:
        await store.replace_document(Document(doc_id, title=doc_id), [ParentChunk(doc_id + "#p0", doc_id, 0, "text", 1)])
    if ids[0] == "clean":
        await store.close()
        return
    sys.stdout.flush()
    os._exit(0)  # killed: no checkpoint, its commits are in the WAL only

asyncio.run(main(sys.argv[1], sys.argv[2:]))
"""


def _write(path: Path, *ids: str) -> None:
    subprocess.run([sys.executable, "-c", WRITE_AND_DIE, str(path), *ids], check=True, timeout=120)


@pytest.mark.parametrize("checkpointed", [True, False])
async def test_commits_only_in_the_wal_are_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpointed: bool) -> None:
    """Opened immutable, the server served an older state; with the tables themselves only in the
    WAL, no tables at all. (The volume's read-only-ness is what the store asks: root writes anyway.)"""
    db = tmp_path / "metadata.sqlite3"
    if checkpointed:
        _write(db, "clean")
    _write(db, "late-1", "late-2")
    assert (tmp_path / "metadata.sqlite3-wal").stat().st_size > 0
    writable = os.access
    monkeypatch.setattr(sqlite.os, "access", lambda p, mode, *a, **k: mode != os.W_OK and writable(p, mode, *a, **k))
    before = set(Path(tempfile.gettempdir()).glob("retrieval-readonly-metadata-*"))
    store = sqlite.SqliteMetadataStore(db, read_only=True)
    await store.open()
    try:
        assert set(await store.list_document_ids()) == ({"clean"} if checkpointed else set()) | {"late-1", "late-2"}
    finally:
        await store.close()
    assert set(Path(tempfile.gettempdir()).glob("retrieval-readonly-metadata-*")) <= before  # the copy is gone (another process may remove its own meanwhile)


async def test_a_database_without_a_wal_is_opened_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "metadata.sqlite3"
    _write(db, "clean")
    writable = os.access
    monkeypatch.setattr(sqlite.os, "access", lambda p, mode, *a, **k: mode != os.W_OK and writable(p, mode, *a, **k))
    store = sqlite.SqliteMetadataStore(db, read_only=True)
    await store.open()
    try:
        assert await store.list_document_ids() == ["clean"] and store._copy_dir is None
    finally:
        await store.close()


@pytest.mark.parametrize("mode", ["writer", "read-only", "read-only volume"])
async def test_a_file_that_is_not_a_database_is_refused_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """SQLite said "file is not a database", naming no file; read-only, the store even opened, and
    every query failed so."""
    db = tmp_path / "metadata.sqlite3"
    db.write_bytes(b"not a database" * 100)
    if mode == "read-only volume":  # read from a private copy of the file and its WAL
        (tmp_path / "metadata.sqlite3-wal").write_bytes(b"not a log either" * 100)
        writable = os.access
        monkeypatch.setattr(sqlite.os, "access", lambda p, m, *a, **k: m != os.W_OK and writable(p, m, *a, **k))
    store = sqlite.SqliteMetadataStore(db, read_only=mode != "writer")
    with pytest.raises(Unavailable, match=rf"^the metadata file {re.escape(str(db))} is not a SQLite database, or is damaged "
                                          r"\(file is not a database\): use a new RETRIEVAL_DATA_DIR"):
        await store.open()
    assert store._copy_dir is None  # closed: the copy is gone
