"""SQLite's small primary-key reads on the event loop's connection: one statement needs no transaction."""

from __future__ import annotations

from pathlib import Path

from retrieval_server.backends.metadata_store.sqlite import INLINE_MAX_ROWS, SqliteMetadataStore
from retrieval_server.config import Settings
from retrieval_server.domain import AccessFilter, Document, Identity, ParentChunk
from retrieval_server.knowledge import DocumentGraph, EntityLabel, EntityType, ExtractedEntity, ExtractedRelation, RelationType


async def test_one_statement_reads_skip_the_transaction_and_two_statement_reads_keep_it(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        await store.replace_document(Document("d1", title="t", content_hash="h1", granted_user_ids=("bob",)),
                                     [ParentChunk("d1#p0", "d1", 0, "text", 1)])
        statements: list[str] = []
        store._inline.set_trace_callback(statements.append)  # type: ignore[union-attr]
        assert await store.document_versions(["d1", "gone"]) == {"d1": "h1"}
        assert [s.split()[0] for s in statements] == ["SELECT"]
        statements.clear()
        doc = await store.get_document("d1")
        assert doc is not None and doc.granted_user_ids == ("bob",)
        # The document and its grants: two statements, one consistent view.
        assert [s.split()[0] for s in statements] == ["BEGIN", "SELECT", "SELECT", "COMMIT"]
    finally:
        await store.close()


async def test_what_enrich_reads_at_the_largest_default_top_k_stays_on_the_event_loops_connection(tmp_path: Path) -> None:
    # enrich reads top_k parents and their documents in one snapshot: at the default top_k_max it
    # is read here, without a hop to a reader thread; a larger read still goes to a reader.
    top_k = Settings.model_fields["top_k_max"].default
    assert top_k <= INLINE_MAX_ROWS
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        for i in range(INLINE_MAX_ROWS + 1):
            await store.replace_document(Document(f"d{i}", title=f"t{i}", content_hash=f"h{i}", metadata={"k": str(i)}),
                                         [ParentChunk(f"d{i}#p0", f"d{i}", 0, f"text {i}", 2)])
        statements: list[str] = []
        store._inline.set_trace_callback(statements.append)  # type: ignore[union-attr]
        parents, documents = await store.get_parents_and_documents([f"d{i}#p0" for i in range(top_k)])
        assert len(parents) == len(documents) == top_k
        assert documents["d7"].metadata == {"k": "7"} and documents["d7"].title == "t7"
        # The parents, the documents and their grants, in one transaction.
        assert [s.split()[0] for s in statements] == ["BEGIN", "SELECT", "SELECT", "SELECT", "COMMIT"]
        statements.clear()
        wide, _ = await store.get_parents_and_documents([f"d{i}#p0" for i in range(INLINE_MAX_ROWS + 1)])
        assert len(wide) == INLINE_MAX_ROWS + 1 and statements == []
    finally:
        await store.close()


async def test_a_querys_graph_reads_are_one_statement_each_with_no_transaction(tmp_path: Path) -> None:
    # Each runs beside the query's vector searches: one hop to a reader, not a snapshot's three.
    store = SqliteMetadataStore(tmp_path / "m.sqlite3")
    await store.open()
    try:
        graph = DocumentGraph(
            (ExtractedEntity("a", "A", EntityType.SERVICE, 1, ("d1#p0c0",)), ExtractedEntity("b", "B", EntityType.SERVICE, 1, ("d1#p0c0",))),
            (ExtractedRelation("a", "b", RelationType.USES, 1.0, "A uses B"),),
        )
        await store.replace_document(Document("d1"), [ParentChunk("d1#p0", "d1", 0, "text", 1)], graph)
        statements: list[str] = []
        for reader in store._all_readers:
            await reader.set_trace_callback(statements.append)
        anyone = AccessFilter.for_identity(Identity())
        assert await store.graph_labels(["a", "b"], anyone) == {
            "a": EntityLabel("A", EntityType.SERVICE, frozenset({"A"})), "b": EntityLabel("B", EntityType.SERVICE, frozenset({"B"}))
        }
        assert await store.graph_endpoints(["a", "c"], anyone, relations=[RelationType.USES]) == {"a"}
        assert await store.graph_edge_weights(["b"], anyone) == [("a", "b", 1.0)]
        assert await store.graph_chunks(["a"], anyone) == {"a": [("d1#p0c0", 1)]}
        assert [s.split()[0] for s in statements] == ["SELECT"] * 4
    finally:
        await store.close()
