"""SQLite's full-text search ranks by score and rowid, and reads document ids only for what it keeps:
ties at the cut must still come out in document-id order, as the plain statement gives them."""

from __future__ import annotations

from pathlib import Path

from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.metadata_store.sqlite import RANK_AHEAD, SqliteMetadataStore, exact_prefix
from retrieval_server.domain import AccessFilter, Document, Identity, ParentChunk


def test_the_sure_prefix_stops_before_the_score_the_fetch_was_cut_in() -> None:
    fetched = [("a", 3.0), ("b", 2.0), ("c", 1.0), ("d", 1.0)]
    assert exact_prefix(fetched, 2) == ([("a", 3.0), ("b", 2.0)], False)
    assert exact_prefix(fetched[:3], 2) == (fetched[:3], True)  # fewer than fetched: every match is there
    assert exact_prefix([("a", 1.0), ("b", 1.0)], 1) == ([], False)


async def test_a_tie_across_the_cut_is_answered_in_document_id_order(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        limit = 3
        # Two clear winners, then more equal titles than the fetch holds, inserted so that rowid
        # order is the reverse of document-id order.
        await store.replace_document(Document("win1", title="glacier glacier"), [ParentChunk("win1#p0", "win1", 0, "x", 1)])
        await store.replace_document(Document("win2", title="glacier"), [ParentChunk("win2#p0", "win2", 0, "x", 1)])
        tied = [f"tie{i:02d}" for i in range(3 * limit * RANK_AHEAD)]
        for doc_id in reversed(tied):
            await store.replace_document(Document(doc_id, title="glacier lake view"), [ParentChunk(f"{doc_id}#p0", doc_id, 0, "x", 1)])
        public = AccessFilter.for_identity(Identity())
        got = await store.search_documents("glacier", limit, public)
        assert got == await MetadataStore.search_documents(store, "glacier", limit, public)
        assert [d for d, _ in got] == ["win1", "win2", "tie00"]
    finally:
        await store.close()
