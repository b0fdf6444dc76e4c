"""SQLite's full-text search ranks by score and rowid, and reads document ids only for what it keeps:
ties must still come out in document-id order, as the plain statement gives them. Its terms leave
stop words out unless asked to keep them."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.metadata_store.sqlite import RANK_AHEAD, SqliteMetadataStore
from retrieval_server.domain import AccessFilter, Document, Identity, ParentChunk

PUBLIC = AccessFilter.for_identity(Identity())


async def _add(store: SqliteMetadataStore, doc_id: str, title: str) -> None:
    await store.replace_document(Document(doc_id, title=title), [ParentChunk(f"{doc_id}#p0", doc_id, 0, "x", 1)])


async def test_a_tie_across_the_cut_is_answered_in_document_id_order(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        limit = 3
        # Two clear winners, then more equal titles than the fetch holds, inserted so that rowid
        # order is the reverse of document-id order.
        await _add(store, "win1", "glacier glacier")
        await _add(store, "win2", "glacier")
        tied = [f"tie{i:02d}" for i in range(3 * limit * RANK_AHEAD)]
        for doc_id in reversed(tied):
            await _add(store, doc_id, "glacier lake view")
        got = await store.search_documents("glacier", limit, PUBLIC)
        assert got == await MetadataStore.search_documents(store, "glacier", limit, PUBLIC)
        assert [d for d, _ in got] == ["win1", "win2", "tie00"]
    finally:
        await store.close()


async def test_ties_above_the_cut_are_ordered_by_document_id_without_the_plain_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        limit = 3
        await _add(store, "win", "alpha")
        for doc_id in ("t2", "t1", "t0"):  # equal scores, rowids in the reverse of id order
            await _add(store, doc_id, "alpha beta")
        for i in range(3 * limit * RANK_AHEAD):  # more matches than the fetch, all scoring lower
            await _add(store, f"low{i:02d}", "alpha beta gamma delta epsilon")
        for i in range(8 * limit * RANK_AHEAD):  # "alpha" in under half of the titles: a positive idf
            await _add(store, f"other{i:02d}", "river")
        plain = await MetadataStore.search_documents(store, "alpha", limit, PUBLIC)

        async def no_fallback(*args: object, **kwargs: object) -> list[tuple[str, float]]:
            raise AssertionError("the plain statement answered")

        monkeypatch.setattr(MetadataStore, "search_documents", no_fallback)
        got = await store.search_documents("alpha", limit, PUBLIC)
        assert got == plain and [d for d, _ in got] == ["win", "t0", "t1"]
        assert got[0][1] > got[1][1] == got[2][1] > 0
    finally:
        await store.close()


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMetadataStore]:
    opened = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await opened.open()
    yield opened
    await opened.close()


# MariaDB leaves out its own stopword list whatever it is asked: these hold for SQLite alone.


async def test_a_query_of_stopwords_alone_still_searches_them(store: SqliteMetadataStore) -> None:
    await _add(store, "band", "The Who")
    await _add(store, "other", "Glaciers")
    assert [d for d, _ in await store.search_documents("the who", 3, PUBLIC)] == ["band"]


async def test_stop_words_are_searched_when_asked_to(store: SqliteMetadataStore) -> None:
    await _add(store, "glaciers", "Glaciers of the Alps")
    await _add(store, "history", "The history of the world")
    query = "the glaciers of iceland"
    assert [d for d, _ in await store.search_documents(query, 3, PUBLIC)] == ["glaciers"]
    kept = await store.search_documents(query, 3, PUBLIC, keep_stopwords=True)
    assert [d for d, _ in kept] == ["glaciers", "history"]
    assert kept == await MetadataStore.search_documents(store, query, 3, PUBLIC, keep_stopwords=True)


# A document's row of documents_fts is deleted by its rowid, kept in documents.fts_rowid: by
# document_id (a column FTS5 cannot index), each replace and delete scanned every title.

WORDS = ["alpine", "glacier", "river", "valley", "snow", "rock", "ice", "lake"]


def _title(i: int) -> str:
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 4))


async def _answers(store: SqliteMetadataStore) -> dict[str, list[tuple[str, float]]]:
    return {q: await store.search_documents(q, 10, PUBLIC) for q in ["glacier", "snow lake", "river rock ice", "valley"]}


def _fts_deletes_scanning(conn: sqlite3.Connection, statements: list[str]) -> list[tuple[str, str]]:
    """Each delete of documents_fts rows among ``statements`` and the triggers on documents whose
    plan scans the table (FTS5 names the rowid's equality ``=`` in its plan's index string)."""
    triggers = [r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'documents'")]
    deletes = [d for s in [*statements, *triggers] for d in re.findall(r"DELETE FROM documents_fts\b[^;]*", s, re.IGNORECASE)
               if "old.fts_rowid IS NULL" not in d]  # a row of an earlier release's, found as it found them
    assert deletes, "a document's full-text row is deleted somewhere"
    scanning = []
    for delete in deletes:
        sql = re.sub(r"\bold\.\w+", "?", delete)
        plan = [r[-1] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", [None] * sql.count("?"))]
        if not all(re.search(r"INDEX \d+:\S*=", step) for step in plan if "documents_fts" in step):
            scanning.append((delete, str(plan)))
    return scanning


async def test_a_replace_or_delete_finds_the_full_text_row_by_rowid(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    statements: list[str] = []
    try:
        for i in range(40):
            await _add(store, f"doc{i:02d}", _title(i))
        await store._conn.set_trace_callback(statements.append)  # type: ignore[union-attr]
        for i in range(0, 40, 3):
            await _add(store, f"doc{i:02d}", _title(i + 1))
        for i in range(1, 40, 5):
            await store.delete_document(f"doc{i:02d}")
        await store._conn.set_trace_callback(None)  # type: ignore[union-attr]
        answers = await _answers(store)
        final = {d: (await store.get_document(d)).title for d in await store.list_document_ids()}  # type: ignore[union-attr]
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "m.sqlite3")) as conn:
        assert _fts_deletes_scanning(conn, statements) == []
        assert conn.execute("SELECT COUNT(*) FROM documents_fts").fetchone()[0] == len(final)
    # The same answers as an index that only ever held the final documents.
    fresh = SqliteMetadataStore(tmp_path / "fresh.sqlite3")
    await fresh.open()
    try:
        for doc_id, title in final.items():
            await _add(fresh, doc_id, title)
        assert answers == await _answers(fresh) and answers["glacier"]
    finally:
        await fresh.close()


#: the documents table and its full-text trigger as they were before documents.fts_rowid
OLD_SCHEMA = """
CREATE TABLE documents (
  document_id TEXT PRIMARY KEY,
  title TEXT NOT NULL DEFAULT '',
  url TEXT NOT NULL DEFAULT '',
  source TEXT NOT NULL DEFAULT '',
  access TEXT NOT NULL,
  owner_id TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{}',
  content_hash TEXT NOT NULL DEFAULT '',
  updated_at REAL NOT NULL
);
CREATE VIRTUAL TABLE documents_fts USING fts5(
  document_id UNINDEXED, text, tokenize = 'porter unicode61'
);
CREATE TRIGGER documents_fts_delete AFTER DELETE ON documents BEGIN
  DELETE FROM documents_fts WHERE document_id = old.document_id;
END;
"""


async def test_an_index_made_before_fts_rowid_is_migrated_at_open_and_searches_the_same(tmp_path: Path) -> None:
    old, fresh = SqliteMetadataStore(tmp_path / "old.sqlite3"), SqliteMetadataStore(tmp_path / "fresh.sqlite3")
    with contextlib.closing(sqlite3.connect(tmp_path / "old.sqlite3")) as conn:
        conn.executescript(OLD_SCHEMA)
        for i in reversed(range(30)):  # rowids of the two tables in different orders
            conn.execute("INSERT INTO documents_fts (document_id, text) VALUES (?, ?)", [f"doc{i:02d}", _title(i)])
        for i in range(30):
            conn.execute("INSERT INTO documents (document_id, title, access, updated_at) VALUES (?, ?, 'public', 0)", [f"doc{i:02d}", _title(i)])
        conn.commit()
    await fresh.open()
    for i in range(30):
        await _add(fresh, f"doc{i:02d}", _title(i))
    await old.open()
    try:
        assert await _answers(old) == await _answers(fresh)
        for store in (old, fresh):
            await _add(store, "doc03", "glacier glacier")
            await store.delete_document("doc07")
        assert await _answers(old) == await _answers(fresh)
    finally:
        await old.close()
        await fresh.close()
    with contextlib.closing(sqlite3.connect(tmp_path / "old.sqlite3")) as conn:
        assert _fts_deletes_scanning(conn, []) == []
        pairs = conn.execute("SELECT d.document_id, f.document_id FROM documents d LEFT JOIN documents_fts f ON f.rowid = d.fts_rowid").fetchall()
        assert len(pairs) == 29 and all(a == b for a, b in pairs)
        assert conn.execute("SELECT COUNT(*) FROM documents_fts").fetchone()[0] == 29


async def test_rows_an_earlier_release_wrote_leave_no_text_behind(tmp_path: Path) -> None:
    """An earlier release (after a rollback, or beside this one during an update) writes no
    fts_rowid: the trigger found nothing to delete by it, and the old text stayed searchable under
    the document's id after a replace, and for good after a delete."""
    path = tmp_path / "m.sqlite3"
    store = SqliteMetadataStore(path)
    await store.open()
    for i in range(10):
        await _add(store, f"doc{i:02d}", "river rock")
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:  # as that release replaced and added
        for doc_id, title in (("doc03", "glacier lake"), ("doc20", "valley lake")):
            conn.execute("DELETE FROM documents WHERE document_id = ?", [doc_id])
            conn.execute("DELETE FROM documents_fts WHERE document_id = ?", [doc_id])
            conn.execute("INSERT INTO documents (document_id, title, access, updated_at) VALUES (?, ?, 'public', 0)", [doc_id, title])
            conn.execute("INSERT INTO documents_fts (document_id, text) VALUES (?, ?)", [doc_id, title])
        conn.commit()
    store = SqliteMetadataStore(path)
    await store.open()
    try:
        assert {d for d, _ in await store.search_documents("lake", 10, PUBLIC)} == {"doc03", "doc20"}
        await _add(store, "doc03", "glacier ice")
        await store.delete_document("doc20")
        assert await store.search_documents("lake", 10, PUBLIC) == []
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM documents_fts").fetchone()[0] == conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 10
        assert _fts_deletes_scanning(conn, []) == []
