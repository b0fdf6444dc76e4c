"""SQLite's full-text search ranks by score and rowid, and reads document ids only for what it keeps:
ties must still come out in document-id order, as the plain statement gives them. Its terms leave
stop words out unless asked to keep them."""

from __future__ import annotations

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
