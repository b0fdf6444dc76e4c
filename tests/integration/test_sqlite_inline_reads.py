"""SQLite's small primary-key reads on the event loop's connection: one statement needs no transaction."""

from __future__ import annotations

from pathlib import Path

from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.domain import Document, ParentChunk


async def test_one_statement_reads_skip_the_transaction_and_two_statement_reads_keep_it(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        await store.replace_document(Document("d1", title="t", content_hash="h1", granted_user_ids=("bob",)),
                                     [ParentChunk("d1#p0", "d1", 0, "text", 1)])
        statements: list[str] = []
        store._inline.set_trace_callback(statements.append)  # type: ignore[union-attr]
        assert await store.document_versions(["d1", "gone"]) == {"d1": "h1"}
        assert (await store.get_parents(["d1#p0"]))["d1#p0"].content == "text"
        assert [s.split()[0] for s in statements] == ["SELECT", "SELECT"]
        statements.clear()
        doc = await store.get_document("d1")
        assert doc is not None and doc.granted_user_ids == ("bob",)
        # The document and its grants: two statements, one consistent view.
        assert [s.split()[0] for s in statements] == ["BEGIN", "SELECT", "SELECT", "COMMIT"]
    finally:
        await store.close()
