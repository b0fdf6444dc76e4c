"""The knowledge graph in every MetadataStore (SQLite and a real MariaDB): replace, delete, access, export."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import networkx as nx
import numpy as np
import pytest
from rapidfuzz import fuzz, process

from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.metadata_store.graph import ENTITIES_PER_STATEMENT
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.domain import Access, AccessFilter, ChildChunk, Document, Identity, ParentChunk, Role
from retrieval_server.ingest.graph_extraction import ClassicalGraphExtractor
from retrieval_server.knowledge import DocumentGraph, EntityType, ExtractedEntity, ExtractedRelation, MatchKind, RelationType
from retrieval_server.workflow.knowledge_graph import FUZZY_PER_GRAM, FUZZY_ROUNDS, KnowledgeGraph, _Gram

# What each caller may read, as the workflow hands it to the graph store.
ANON, ALICE, BOB, CAROL = (AccessFilter.for_identity(i) for i in (Identity(), Identity("alice", Role.USER), Identity("bob", Role.USER), Identity("carol", Role.USER)))
ROOT = AccessFilter.for_identity(Identity("root", Role.SUPER_ADMIN))
E, R = EntityType, RelationType


def _entity(name: str, t: EntityType, mentions: int, *chunks: str) -> ExtractedEntity:
    # Each chunk names the entity once, the first twice (when there are several).
    counts = tuple(2 if i == 0 and len(chunks) > 1 else 1 for i in range(len(chunks)))
    return ExtractedEntity("".join(c for c in name.casefold() if c.isalnum()), name, t, mentions, chunks, counts)


def _rel(s: str, rel: RelationType, t: str, w: float = 1.0) -> ExtractedRelation:
    return ExtractedRelation(s.lower(), t.lower(), rel, w, f"{s} {rel} {t}")


def _parents(doc_id: str) -> list[ParentChunk]:
    return [ParentChunk(f"{doc_id}#p0", doc_id, 0, "text", 5)]


ALPHA = DocumentGraph(
    (_entity("ProjectAlpha", E.PROJECT, 3, "alpha#p0c0", "alpha#p0c1"), _entity("AuthSvc", E.SERVICE, 2, "alpha#p0c1")),
    (_rel("ProjectAlpha", R.DEPENDS_ON, "AuthSvc"),),
)
AUTH = DocumentGraph(
    (_entity("AuthSvc", E.SERVICE, 5, "auth#p0c0"), _entity("DatabaseSvc", E.SERVICE, 1, "auth#p0c0")),
    (_rel("AuthSvc", R.USES, "DatabaseSvc"), _rel("AuthSvc", R.CO_OCCURS, "DatabaseSvc", 0.25)),
)
SECRET = DocumentGraph(
    (_entity("AuthSvc", E.SERVICE, 4, "secret#p0c0"), _entity("ShadowVault", E.SERVICE, 2, "secret#p0c0"), _entity("DatabaseSvc", E.SERVICE, 1)),
    (_rel("AuthSvc", R.USES, "ShadowVault"), _rel("AuthSvc", R.USES, "DatabaseSvc", 2.0), _rel("AuthSvc", R.CALLS, "Unknown")),
)


async def _load(store: MetadataStore) -> None:
    await store.replace_document(Document("alpha"), _parents("alpha"), ALPHA)
    await store.replace_document(Document("auth"), _parents("auth"), AUTH)
    await store.replace_document(
        Document("secret", access=Access.PRIVATE, owner_id="alice", granted_user_ids=("carol",)), _parents("secret"), SECRET
    )


async def test_entities_edges_and_chunks_aggregate_over_documents(metadata_store: MetadataStore) -> None:
    assert await metadata_store.graph_version() is None
    await _load(metadata_store)
    auth = (await metadata_store.graph_entities(["authsvc"], ROOT))["authsvc"]
    assert (auth.name, auth.entity_type, auth.mentions, auth.document_ids) == ("AuthSvc", E.SERVICE, 11, ("alpha", "auth", "secret"))
    edges = {(e.source, e.relation, e.target): e for e in await metadata_store.graph_edges(["authsvc"], ROOT)}
    assert set(edges) == {
        ("projectalpha", R.DEPENDS_ON, "authsvc"),
        ("authsvc", R.USES, "databasesvc"),
        ("authsvc", R.CO_OCCURS, "databasesvc"),
        ("authsvc", R.USES, "shadowvault"),
    }
    assert edges[("authsvc", R.USES, "databasesvc")].weight == 3.0  # 1 (auth) + 2 (secret)
    assert edges[("authsvc", R.USES, "databasesvc")].document_ids == ("auth", "secret")
    only_uses = await metadata_store.graph_edges(["databasesvc"], ROOT, relations=[R.USES])
    assert [(e.source, e.target) for e in only_uses] == [("authsvc", "databasesvc")]
    chunks = await metadata_store.graph_chunks(["authsvc", "projectalpha"], ROOT)
    assert chunks == {
        "authsvc": [("alpha#p0c1", 1), ("auth#p0c0", 1), ("secret#p0c0", 1)],
        "projectalpha": [("alpha#p0c0", 2), ("alpha#p0c1", 1)],
    }
    # The cap keeps the chunks that name the entity most.
    assert (await metadata_store.graph_chunks(["projectalpha"], ROOT, per_entity=1)) == {"projectalpha": [("alpha#p0c0", 2)]}
    assert not await metadata_store.graph_edges(["unknown"], ROOT)  # an edge to a name the document does not list is not stored
    assert "shadowvault" in await metadata_store.graph_keys()
    assert await metadata_store.graph_version() is not None


async def test_private_knowledge_is_visible_only_to_its_readers(metadata_store: MetadataStore) -> None:
    await _load(metadata_store)
    for who in (ANON, BOB):
        seen = await metadata_store.graph_entities(None, who)
        assert set(seen) == {"projectalpha", "authsvc", "databasesvc"} and seen["authsvc"].mentions == 7
        edges = {(e.source, e.target): e for e in await metadata_store.graph_edges(None, who) if e.relation is R.USES}
        assert set(edges) == {("authsvc", "databasesvc")} and edges[("authsvc", "databasesvc")].weight == 1.0
        assert "secret#p0c0" not in dict((await metadata_store.graph_chunks(["authsvc", "shadowvault"], who)).get("authsvc", []))
        assert "shadowvault" not in await metadata_store.graph_chunks(["shadowvault"], who)
    for who in (ALICE, CAROL, ROOT):
        seen = await metadata_store.graph_entities(None, who)
        assert "shadowvault" in seen and seen["authsvc"].mentions == 11
    scoped = await metadata_store.graph_entities(None, ROOT, document_ids=["auth"])
    assert set(scoped) == {"authsvc", "databasesvc"} and scoped["authsvc"].mentions == 5


async def test_reingest_and_delete_leave_no_stale_graph(metadata_store: MetadataStore) -> None:
    await _load(metadata_store)
    version = await metadata_store.graph_version()
    renamed = DocumentGraph((_entity("ProjectAlpha", E.PROJECT, 1, "alpha#p0c0"), _entity("BillingSvc", E.SERVICE, 1, "alpha#p0c0")),
                            (_rel("ProjectAlpha", R.USES, "BillingSvc"),))
    await metadata_store.replace_document(Document("alpha", title="v2"), _parents("alpha"), renamed)
    assert await metadata_store.graph_version() != version
    edges = {(e.source, e.relation, e.target) for e in await metadata_store.graph_edges(["projectalpha"], ROOT)}
    assert edges == {("projectalpha", R.USES, "billingsvc")}  # the old DEPENDS_ON AuthSvc is gone
    assert (await metadata_store.graph_entities(["authsvc"], ROOT))["authsvc"].document_ids == ("auth", "secret")
    # Names that went with a document must leave the matchers' names too: the version changes.
    version = await metadata_store.graph_version()
    await metadata_store.replace_document(Document("auth"), _parents("auth"))  # re-ingested without a graph
    assert await metadata_store.graph_version() != version
    assert "databasesvc" in await metadata_store.graph_entities(None, ROOT)  # still known from "secret"
    assert "databasesvc" not in await metadata_store.graph_entities(None, ANON)
    version = await metadata_store.graph_version()
    await metadata_store.delete_document("secret")
    assert await metadata_store.graph_version() != version
    assert "shadowvault" not in await metadata_store.graph_keys()
    everything = await metadata_store.graph_entities(None, ROOT)
    assert set(everything) == {"projectalpha", "billingsvc"}
    assert {(e.source, e.target) for e in await metadata_store.graph_edges(None, ROOT)} == {("projectalpha", "billingsvc")}
    assert await metadata_store.graph_chunks(["authsvc", "shadowvault"], ROOT) == {}


async def test_the_graph_version_changes_only_with_what_the_graph_shows_of_a_document(metadata_store: MetadataStore) -> None:
    """Every re-ingest of a document with graph rows changed the version, and every cached answer
    with a graph trace was computed again, when only the document's title had changed."""
    await _load(metadata_store)
    secret = Document("secret", access=Access.PRIVATE, owner_id="alice", granted_user_ids=("carol",))
    version = await metadata_store.graph_version()
    await metadata_store.replace_document(Document("alpha", title="renamed", metadata={"k": "v"}), _parents("alpha"), ALPHA)
    await metadata_store.replace_document(secret, _parents("secret"), SECRET)
    await metadata_store.replace_document(Document("plain"), _parents("plain"))  # no graph, before or now
    assert await metadata_store.graph_version() == version
    # Who may read the rows is what the graph shows of them too.
    for changed in (dataclasses.replace(secret, granted_user_ids=()), dataclasses.replace(secret, owner_id="bob"),
                    dataclasses.replace(secret, access=Access.PUBLIC)):
        await metadata_store.replace_document(changed, _parents("secret"), SECRET)
        assert await metadata_store.graph_version() != version, changed
        version = await metadata_store.graph_version()
    heavier = DocumentGraph(ALPHA.entities, (_rel("ProjectAlpha", R.DEPENDS_ON, "AuthSvc", 0.5),))
    await metadata_store.replace_document(Document("alpha"), _parents("alpha"), heavier)
    assert await metadata_store.graph_version() != version


async def test_a_failed_replace_keeps_the_previous_graph(metadata_store: MetadataStore) -> None:
    await _load(metadata_store)
    clash = _parents("alpha") + _parents("alpha")
    try:
        await metadata_store.replace_document(Document("alpha"), clash, DocumentGraph((_entity("Other", E.CONCEPT, 1),), ()))
    except Exception:
        pass
    else:
        raise AssertionError("a duplicate parent id must fail the transaction")
    assert "other" not in await metadata_store.graph_entities(None, ROOT)
    assert ("projectalpha", "authsvc") in {(e.source, e.target) for e in await metadata_store.graph_edges(["projectalpha"], ROOT)}


async def test_matching_exports_and_access(metadata_store: MetadataStore, executor: BlockingExecutor) -> None:
    await _load(metadata_store)
    graph = KnowledgeGraph(metadata_store, executor)
    matches = await graph.match("Which projects depend on authsvc, and what uses ShadowVault or DatabseSvc?", ALICE)
    by_name = {m.name: m for m in matches}
    assert by_name["AuthSvc"].kind is MatchKind.CASE_FOLDED and by_name["AuthSvc"].text == "authsvc"
    assert by_name["ShadowVault"].kind is MatchKind.EXACT and by_name["ShadowVault"].score == 1.0
    assert by_name["DatabaseSvc"].kind is MatchKind.FUZZY and 0.88 <= by_name["DatabaseSvc"].score < 1.0  # a typo
    assert "ShadowVault" not in {m.name for m in await graph.match("what uses ShadowVault", BOB)}
    # New names are picked up once an ingest changes the graph.
    await metadata_store.replace_document(Document("new"), _parents("new"), DocumentGraph((_entity("FreshSvc", E.SERVICE, 1, "new#p0c0"),), ()))
    assert [m.name for m in await graph.match("FreshSvc status", ANON)] == ["FreshSvc"]
    assert [(m.name, m.kind) for m in await graph.match("what about FrshSvc", ANON)] == [("FreshSvc", MatchKind.FUZZY)]  # fuzzy too
    exported = await graph.to_networkx(BOB)
    buffer = io.BytesIO()
    nx.write_graphml(exported, buffer)
    back = nx.read_graphml(io.BytesIO(buffer.getvalue()))
    assert "shadowvault" not in back.nodes and back.nodes["authsvc"]["entity_type"] == "SERVICE"
    assert {(s, t, d["relation"]) for s, t, d in back.edges(data=True)} >= {("projectalpha", "authsvc", "DEPENDS_ON")}
    assert "shadowvault" in (await graph.to_networkx(ALICE)).nodes


async def test_an_export_gives_back_every_document_id_as_stored(metadata_store: MetadataStore, executor: BlockingExecutor) -> None:
    """Ids joined by commas read "runbook,billing" as two documents, and one holding U+FFFE (as a
    name of a document's text may) made writing the GraphML fail for the whole index."""
    odd = ["runbook,billing", "billing\ufffe"]
    for doc_id in odd:
        graph = DocumentGraph((_entity("LedgerSvc", E.SERVICE, 1, f"{doc_id}#p0c0"), _entity("Pay\ufffeSvc", E.SERVICE, 1, f"{doc_id}#p0c0")),
                              (_rel("LedgerSvc", R.USES, "PaySvc"),))
        await metadata_store.replace_document(Document(doc_id), _parents(doc_id), graph)
    buffer = io.BytesIO()
    nx.write_graphml(await KnowledgeGraph(metadata_store, executor).to_networkx(ROOT), buffer)
    back = nx.read_graphml(io.BytesIO(buffer.getvalue()))
    assert sorted(json.loads(back.nodes["ledgersvc"]["documents"])) == sorted(odd)
    assert back.nodes["paysvc"]["name"] == "Pay\ufffdSvc"  # what XML cannot hold, replaced
    assert [sorted(json.loads(d["documents"])) for _, _, d in back.edges(data=True)] == [sorted(odd)]


class _CommitBetweenReads:
    """``store``'s snapshots, with ``commit`` run once right after the first graph read made once
    :attr:`armed`: a writer that commits between two reads of one export or look-up."""

    def __init__(self, store: MetadataStore, commit: Callable[[], Awaitable[Any]], monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed, self.committed = True, False
        snapshot = store.snapshot

        @contextlib.asynccontextmanager
        async def interleaved() -> AsyncIterator[Any]:
            async with snapshot() as tx:
                fetchall = tx.fetchall

                async def fetch(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
                    rows = await fetchall(sql, params)
                    if self.armed and not self.committed and "FROM graph_" in sql:
                        self.committed = True
                        await commit()
                    return rows

                monkeypatch.setattr(tx, "fetchall", fetch)
                yield tx

        monkeypatch.setattr(store, "snapshot", interleaved)


def _uses(a: str, b: str) -> DocumentGraph:
    return DocumentGraph((_entity(a, E.SERVICE, 1), _entity(b, E.SERVICE, 1)), (_rel(a, R.USES, b),))


async def test_an_export_reads_its_nodes_and_edges_in_one_snapshot(
    metadata_store: MetadataStore, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in two snapshots, a document committed between them (an ingest beside the read-only
    export) gave edges whose ends were nodes without name, type, mentions or documents."""
    await metadata_store.replace_document(Document("a"), _parents("a"), _uses("AuthSvc", "UserDb"))
    between = _CommitBetweenReads(
        metadata_store, lambda: metadata_store.replace_document(Document("b"), _parents("b"), _uses("BillingSvc", "LedgerDb")), monkeypatch
    )
    exported = await KnowledgeGraph(metadata_store, executor).to_networkx(ROOT)
    assert between.committed
    assert {n: d.get("name") for n, d in exported.nodes(data=True)} == {"authsvc": "AuthSvc", "userdb": "UserDb"}
    assert list(exported.edges(keys=True)) == [("authsvc", "userdb", "USES")]


async def test_lookup_facts_reads_the_relations_and_their_ends_in_one_snapshot(
    metadata_store: MetadataStore, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relations, then the names at their other ends, read apart: a document replaced between
    the reads named a neighbour ""."""
    from retrieval_server.workflow.tools import LookupFacts, LookupFactsParams, ToolContext

    await metadata_store.replace_document(Document("a"), _parents("a"), _uses("AuthSvc", "UserDb"))
    graph = KnowledgeGraph(metadata_store, executor)
    alone = DocumentGraph((_entity("AuthSvc", E.SERVICE, 1),), ())
    between = _CommitBetweenReads(metadata_store, lambda: metadata_store.replace_document(Document("a"), _parents("a"), alone), monkeypatch)
    between.armed = False
    resolve = graph.resolve

    async def then_arm(*args: Any, **kwargs: Any) -> Any:
        found = await resolve(*args, **kwargs)
        between.armed = True  # the commit lands after the entity is known, between the reads that follow
        return found

    monkeypatch.setattr(graph, "resolve", then_arm)
    ctx = ToolContext(query="what is AuthSvc", access=ROOT, document_ids=(), graph=graph, contexts=[], embedder=None)  # type: ignore[arg-type]
    result, _ = await LookupFacts().run(LookupFactsParams(entity="AuthSvc"), ctx)
    assert between.committed
    assert [(r["direction"], r["relation"], r["entity"]) for r in result["relations"]] == [("out", "USES", "UserDb")]



@pytest.mark.parametrize("when", ["after the entity was resolved", "while its facts were read"])
async def test_lookup_facts_counts_and_names_only_the_sources_it_lists(
    metadata_store: MetadataStore, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Only the sources were checked against the documents as they were last: a document made
    private after the entity was resolved, or between the reads of its relations and its sources,
    was left out of the sources, and still counted in the mentions and sources_total, its relation
    listed."""
    from retrieval_server.workflow.tools import LookupFacts, LookupFactsParams, ToolContext

    await metadata_store.replace_document(Document("a"), _parents("a"), DocumentGraph((_entity("AuthSvc", E.SERVICE, 2),), ()))
    await metadata_store.replace_document(Document("secret"), _parents("secret"), _uses("AuthSvc", "ShadowVault"))
    graph = KnowledgeGraph(metadata_store, executor)

    def made_private() -> Awaitable[bool]:
        secret = Document("secret", access=Access.PRIVATE, owner_id="alice")
        return metadata_store.replace_document(secret, _parents("secret"), _uses("AuthSvc", "ShadowVault"))

    between = _CommitBetweenReads(metadata_store, made_private, monkeypatch)
    between.armed = False
    resolve = graph.resolve

    async def then_made_private(*args: Any, **kwargs: Any) -> Any:
        found = await resolve(*args, **kwargs)
        if when == "after the entity was resolved":
            between.committed = True
            await made_private()
        else:
            between.armed = True
        return found

    monkeypatch.setattr(graph, "resolve", then_made_private)
    ctx = ToolContext(query="what is AuthSvc", access=BOB, document_ids=(), graph=graph, contexts=[], embedder=None)  # type: ignore[arg-type]
    result, summary = await LookupFacts().run(LookupFactsParams(entity="AuthSvc"), ctx)
    assert between.committed
    listed = {s["document_id"] for s in result["sources"]}
    assert result["sources_total"] == len(listed) and f"in {len(listed)} document" in summary
    assert result["mentions"] == (3 if "secret" in listed else 2)
    assert any(r["entity"] == "ShadowVault" for r in result["relations"]) == ("secret" in listed)

async def test_matches_show_nothing_of_names_the_caller_cannot_read(metadata_store: MetadataStore, executor: BlockingExecutor) -> None:
    """Whether a query named an entity exactly is decided by the names the caller may read, and names
    the caller cannot read do not crowd a readable one out of the fuzzy look-up."""
    await _load(metadata_store)
    await metadata_store.replace_document(
        Document("bobs", access=Access.PRIVATE, owner_id="bob"), _parents("bobs"), DocumentGraph((_entity("Auth-Svc", E.PROJECT, 9, "bobs#p0c0"),), ())
    )
    graph = KnowledgeGraph(metadata_store, executor)
    # Only bob's private document writes it "Auth-Svc": to anyone else the query names AuthSvc case-folded.
    assert [(m.name, m.kind) for m in await graph.match("who runs Auth-Svc", ANON)] == [("AuthSvc", MatchKind.CASE_FOLDED)]
    assert [(m.name, m.kind) for m in await graph.match("who runs Auth-Svc", BOB)] == [("Auth-Svc", MatchKind.EXACT)]
    assert [(m.name, m.kind) for m in await graph.match("who runs AuthSvc", BOB)] == [("Auth-Svc", MatchKind.EXACT)]
    # Twenty-six private names closer to the query's typo than the public one (0.96 against 0.957),
    # more than one round of the fuzzy look-up's access check.
    await metadata_store.replace_document(Document("interleukin"), _parents("interleukin"),
                                          DocumentGraph((_entity("Interleukin", E.CONCEPT, 1, "interleukin#p0c0"),), ()))
    await metadata_store.replace_document(
        Document("near", access=Access.PRIVATE, owner_id="bob"), _parents("near"),
        DocumentGraph(tuple(_entity(f"Interleukinz{c}", E.CONCEPT, 1, "near#p0c0") for c in "abcdefghijklmnopqrstuvwxyz"), ()),
    )
    assert [(m.name, m.kind) for m in await graph.match("Interleukinz levels", ANON)] == [("Interleukin", MatchKind.FUZZY)]
    assert [m.name for m in await graph.match("Interleukinz levels", BOB)] == ["Interleukinza"]
    # A word that is exactly a name only a private document knows is looked up fuzzily, as any
    # unknown word: it found nothing, which told the caller that the private name exists.
    await metadata_store.replace_document(Document("service"), _parents("service"),
                                          DocumentGraph((_entity("AuthService", E.SERVICE, 1, "service#p0c0"),), ()))
    asked = "What does AuthServce use?"
    before = [(m.name, m.kind) for m in await graph.match(asked, ANON)]
    await metadata_store.replace_document(Document("typo", access=Access.PRIVATE, owner_id="bob"), _parents("typo"),
                                          DocumentGraph((_entity("AuthServce", E.PROJECT, 1, "typo#p0c0"),), ()))
    assert [(m.name, m.kind) for m in await graph.match(asked, ANON)] == before == [("AuthService", MatchKind.FUZZY)]
    assert [(m.name, m.kind) for m in await graph.match(asked, BOB)] == [("AuthServce", MatchKind.EXACT)]


async def test_a_question_finds_names_as_ingestion_keeps_them_and_at_most_max_matches(
    metadata_store: MetadataStore, executor: BlockingExecutor
) -> None:
    # Ingestion keeps "the JWT's claims" as JWT and "APIs" as API.
    graph_of = DocumentGraph((_entity("JWT", E.CONCEPT, 1, "jwt#p0c0"), _entity("API", E.CONCEPT, 1, "jwt#p0c0")), ())
    await metadata_store.replace_document(Document("jwt"), _parents("jwt"), graph_of)
    graph = KnowledgeGraph(metadata_store, executor)
    assert [m.name for m in await graph.match("When does the JWT's signature expire?", ANON)] == ["JWT"]
    assert [m.name for m in await graph.match("Which APIs does it expose?", ANON)] == ["API"]
    # Whatever a private name's key: "Apis" (a genus, say) in bob's document changes nothing for others.
    await metadata_store.replace_document(Document("bee", access=Access.PRIVATE, owner_id="bob"), _parents("bee"),
                                          DocumentGraph((_entity("Apis", E.CONCEPT, 1, "bee#p0c0"),), ()))
    assert [m.name for m in await graph.match("Which APIs does it expose?", ANON)] == ["API"]
    names = tuple(_entity(f"Svc{i:05d}", E.SERVICE, 1, "many#p0c0") for i in range(400))
    await metadata_store.replace_document(Document("many"), _parents("many"), DocumentGraph(names, ()))
    capped = KnowledgeGraph(metadata_store, executor, max_matches=7)
    # Past the words matched inline: the n-grams are made on the executor, with the same result.
    asked = " ".join(e.name for e in names)
    assert [m.name for m in await capped.match(asked, ANON)] == [e.name for e in names[:7]]
    assert len(await graph.match(asked, ANON)) == 25


async def test_a_name_with_an_apostrophe_or_a_hyphen_is_asked_for_as_ingestion_keeps_it(
    metadata_store: MetadataStore, executor: BlockingExecutor
) -> None:
    """Ingestion kept "O'Brien Team" as "Brien Team": a question naming it found that fuzzily, if at all."""
    text = "O'Brien Team and Hewlett-Packard Labs maintain AuthService."
    children = [ChildChunk("team#p0c0", "team#p0", "team", 0, 0, text, 10)]
    learned = ClassicalGraphExtractor().extract_now([ParentChunk("team#p0", "team", 0, text, 10)], children)
    await metadata_store.replace_document(Document("team"), _parents("team"), learned)
    graph = KnowledgeGraph(metadata_store, executor)
    assert [(m.name, m.kind) for m in await graph.match("What does O'Brien Team maintain?", ANON)] == [("O'Brien Team", MatchKind.EXACT)]
    assert [(m.name, m.kind) for m in await graph.match("What does O’Brien Team maintain?", ANON)] == [
        ("O'Brien Team", MatchKind.CASE_FOLDED)]
    assert [(m.name, m.kind) for m in await graph.match("What do Hewlett-Packard Labs maintain?", ANON)] == [
        ("Hewlett-Packard Labs", MatchKind.EXACT)]
    # After a lower-case elision the name is a word of its own, as ingestion reads it: "l'AuthService" matched only fuzzily.
    assert [(m.name, m.kind) for m in await graph.match("Qui maintient l'AuthService ?", ANON)] == [("AuthService", MatchKind.EXACT)]


async def test_a_name_longer_than_a_stored_key_keeps_its_entity_and_edges(metadata_store: MetadataStore, executor: BlockingExecutor) -> None:
    """A key over 191 characters (what MySQL's index on it takes) was left out with its edges, silently."""
    long_name = "Very" + "Long" * 60 + "Svc"
    text = f"{long_name} depends on LedgerDB. {long_name.replace('VeryLong', 'VeryShort', 1)} uses LedgerDB."
    children = [ChildChunk("long#p0c0", "long#p0", "long", 0, 0, text, 10)]
    learned = ClassicalGraphExtractor().extract_now([ParentChunk("long#p0", "long", 0, text, 10)], children)
    await metadata_store.replace_document(Document("long"), _parents("long"), learned)
    entities = await metadata_store.graph_entities(None, ROOT)
    assert len(entities) == 3 and {e.name for e in entities.values()} >= {long_name, "LedgerDB"}  # two names alike at the start
    [match] = await KnowledgeGraph(metadata_store, executor).match(f"What does {long_name} depend on?", ANON)
    assert (match.name, match.kind) == (long_name, MatchKind.EXACT)
    edges = await metadata_store.graph_edges([match.key], ROOT)
    assert [(e.relation, entities[e.target].name) for e in edges if e.source == match.key] == [(R.DEPENDS_ON, "LedgerDB")]


async def test_endpoints_are_the_keys_graph_edges_shows_for_every_reader(metadata_store: MetadataStore) -> None:
    await _load(metadata_store)
    keys = ["projectalpha", "authsvc", "databasesvc", "shadowvault", "unknown"]
    # Past the keys one statement reads, too: the known keys come last.
    many = [f"nobody{i}" for i in range(ENTITIES_PER_STATEMENT)] + keys
    for who in (ANON, ALICE, BOB, CAROL, ROOT):
        for relations in (None, [R.USES], [r for r in R if r is not R.CO_OCCURS]):
            edges = await metadata_store.graph_edges(keys, who, relations=relations)
            shown = ({e.source for e in edges} | {e.target for e in edges}) & set(keys)
            assert shown and await metadata_store.graph_endpoints(keys, who, relations=relations) == shown
            assert await metadata_store.graph_endpoints(many, who, relations=relations) == shown


async def test_edge_weights_are_graph_edges_without_their_documents_for_every_reader(metadata_store: MetadataStore) -> None:
    await _load(metadata_store)
    for keys in (["projectalpha", "authsvc", "databasesvc", "shadowvault", "unknown"], ["authsvc"], ["databasesvc", "projectalpha"]):
        for who in (ANON, ALICE, BOB, CAROL, ROOT):
            expected = sorted((e.source, e.target, round(e.weight, 9)) for e in await metadata_store.graph_edges(keys, who))
            assert expected and sorted((s, t, round(w, 9)) for s, t, w in await metadata_store.graph_edge_weights(keys, who)) == expected


async def test_labels_are_the_names_and_types_graph_entities_gives_every_reader(metadata_store: MetadataStore) -> None:
    await _load(metadata_store)
    # Bob's own spelling and type, mentioned most: what he reads of "authsvc" differs from the others' view.
    await metadata_store.replace_document(
        Document("bobs", access=Access.PRIVATE, owner_id="bob"), _parents("bobs"), DocumentGraph((_entity("Auth-Svc", E.PROJECT, 9, "bobs#p0c0"),), ())
    )
    keys = ["projectalpha", "authsvc", "databasesvc", "shadowvault", "unknown"]
    seen = set()
    for who in (ANON, ALICE, BOB, CAROL, ROOT):
        for scope in ((), ["auth", "bobs"], ["bobs"]):
            entities = await metadata_store.graph_entities(keys, who, scope)
            labels = await metadata_store.graph_labels(keys, who, scope)
            assert {k: (label.name, label.entity_type) for k, label in labels.items()} == {k: (e.name, e.entity_type) for k, e in entities.items()}
            seen.add((label.name, label.entity_type, label.spellings) if (label := labels.get("authsvc")) else None)
    # The readers' views do differ, and a name only an unreadable document gives is not among the spellings.
    assert {("AuthSvc", E.SERVICE, frozenset({"AuthSvc"})), ("Auth-Svc", E.PROJECT, frozenset({"AuthSvc", "Auth-Svc"})), None} <= seen
    assert await metadata_store.graph_labels([], ROOT) == {}


async def test_fuzzy_lookups_score_as_every_name_would(metadata_store: MetadataStore, executor: BlockingExecutor) -> None:
    """The names the filter leaves, scored, give the best of all names (ties: the earlier name), at
    most as many as the access check's rounds ask for."""
    stems = ["interleukin", "kinase", "receptor", "factor", "protein", "cell"]
    names = ["".join(p) + s for p in itertools.permutations(stems, 2) for s in ("", "s", "1", "a2")]
    near = "quorumsensingabc"  # 160 names one letter from it: all within the threshold
    names += [near[:i] + d + near[i + 1 :] for i in range(len(near)) for d in "0123456789"]
    entities = tuple(_entity(n, E.CONCEPT, 1, "many#p0c0") for n in names)
    await metadata_store.replace_document(Document("many"), _parents("many"), DocumentGraph(entities, ()))
    graph = KnowledgeGraph(metadata_store, executor)
    index = await graph._index()
    grams = [_Gram(0, 1, 1, g, g, False) for g in ("interleukinkinase", "kinasereceptr", "proteincel", "factorfactor", "cellprotein2", near, "zzzzz")]
    found = graph._fuzzy(grams, index)
    scores = process.cdist([g.key for g in grams], index.keys, scorer=fuzz.ratio)
    most = FUZZY_PER_GRAM * FUZZY_ROUNDS
    for gram, per, row in zip(grams, found, scores, strict=True):
        above = np.flatnonzero(row >= 88.0)
        expected = [(index.keys[i], row[i] / 100.0) for i in above[np.argsort(-row[above], kind="stable")[:most]]]
        assert [(c.key, c.score) for c in per] == expected, gram.key
    assert len(found[-2]) == most and any(0 < len(per) < FUZZY_PER_GRAM for per in found) and found[-1] == []


async def test_related_keys_are_the_endpoints_for_every_reader_as_the_graph_grows(metadata_store: MetadataStore, executor: BlockingExecutor) -> None:
    await _load(metadata_store)
    chat = DocumentGraph((_entity("ZorblaxSvc", E.SERVICE, 1, "chat#p0c0"), _entity("QuuxSvc", E.SERVICE, 1, "chat#p0c0")),
                         (_rel("ZorblaxSvc", R.CO_OCCURS, "QuuxSvc", 0.25),))
    await metadata_store.replace_document(Document("chat"), _parents("chat"), chat)
    graph = KnowledgeGraph(metadata_store, executor)
    typed = [r for r in R if r is not R.CO_OCCURS]
    # Stated relations somewhere, readable or not; "databasesvc" only co-occurs in "auth" but is used in "secret".
    assert await metadata_store.graph_stated_keys() == {"projectalpha", "authsvc", "databasesvc", "shadowvault"}
    keys = ["projectalpha", "authsvc", "databasesvc", "shadowvault", "unknown", "freshsvc", "zorblaxsvc"]

    async def agree() -> None:
        for who in (ANON, ALICE, BOB, CAROL, ROOT):
            for relations in (None, [R.USES], typed, [R.CO_OCCURS]):
                assert await graph.related(keys, who, relations=relations) == await metadata_store.graph_endpoints(keys, who, relations=relations)

    await agree()
    assert await graph.related(["unknown", "nothing"], ROOT, relations=typed) == set()
    # A key that gains a stated relation in a later ingest is found by the next query.
    fresh = DocumentGraph(
        (_entity("FreshSvc", E.SERVICE, 1, "fresh#p0c0"), _entity("AuthSvc", E.SERVICE, 1, "fresh#p0c0")), (_rel("FreshSvc", R.CALLS, "AuthSvc"),)
    )
    await metadata_store.replace_document(Document("fresh"), _parents("fresh"), fresh)
    assert await graph.related(["freshsvc"], ANON, relations=typed) == {"freshsvc"}
    await agree()


async def test_chunks_are_each_entitys_most_mentioned_for_every_reader(metadata_store: MetadataStore) -> None:
    """More entities than one statement reads, mentions with ties across documents, a private document:
    each entity's chunks are the first ``per_entity`` of all its readable ones, sorted by mentions
    (most first), then document and chunk."""
    rng = random.Random(11)
    keys = [f"entity{i:03d}" for i in range(ENTITIES_PER_STATEMENT + 7)]
    readable: dict[AccessFilter, dict[str, list[tuple[int, str, str]]]] = {ANON: {}, ALICE: {}}
    for doc_id, private in (("d1", False), ("d0", False), ("d2", True)):
        entities = []
        for key in rng.sample(keys, len(keys) // 2):
            chunks = tuple(f"{doc_id}#p0c{c}" for c in sorted(rng.sample(range(6), rng.randint(1, 4))))
            counts = tuple(rng.randint(1, 3) for _ in chunks)
            entities.append(ExtractedEntity(key, key, E.CONCEPT, sum(counts), chunks, counts))
            for who in (ALICE,) if private else (ANON, ALICE):
                readable[who].setdefault(key, []).extend((-n, doc_id, c) for c, n in zip(chunks, counts, strict=True))
        doc = Document(doc_id, access=Access.PRIVATE, owner_id="alice") if private else Document(doc_id)
        await metadata_store.replace_document(doc, _parents(doc_id), DocumentGraph(tuple(entities), ()))
    for who, expected in readable.items():
        for per_entity in (1, 3, 50):
            want = {k: [(c, -n) for n, _, c in sorted(v)[:per_entity]] for k, v in expected.items()}
            assert await metadata_store.graph_chunks([*keys, "unknown"], who, per_entity=per_entity) == want
    assert await metadata_store.graph_chunks(keys[:5], ANON, ["d0"]) == {
        k: [(c, -n) for n, d, c in sorted(v) if d == "d0"] for k, v in readable[ANON].items() if k in keys[:5] and any(d == "d0" for _, d, _ in v)
    }


async def test_an_older_schema_gets_the_ranked_mentions_index(metadata_store: MetadataStore) -> None:
    """A store created before the ranked index had a plain one on the key: opening it swaps them."""
    sqlite = isinstance(metadata_store, SqliteMetadataStore)
    listing = ("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'graph_mentions'" if sqlite
               else "SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'graph_mentions'")
    async with metadata_store.transaction() as tx:
        await tx.execute("DROP INDEX graph_mentions_rank" + ("" if sqlite else " ON graph_mentions"))
        await tx.execute("CREATE INDEX graph_mentions_key ON graph_mentions (entity_key)")
    await metadata_store.close()
    await metadata_store.open()
    async with metadata_store.transaction() as tx:
        names = {r[0] for r in await tx.fetchall(listing)}
    assert "graph_mentions_rank" in names and "graph_mentions_key" not in names


async def test_a_reader_of_many_groups_within_a_filter_of_many_documents_is_answered(metadata_store: MetadataStore) -> None:
    """Each key's part of a statement repeats the access filter: a token's thousand groups with a
    filter of a thousand ids made statements of 300,000 parameters, which SQLite refuses (the
    graph leg failed). Statements now hold as many keys as fit."""
    from retrieval_server.identifiers import MAX_GROUPS

    await _load(metadata_store)
    many_groups = AccessFilter.for_identity(Identity("carol", Role.USER, tuple(f"group:g{i}" for i in range(MAX_GROUPS))))
    ids = ["alpha", "auth", "secret", *(f"missing-{i}" for i in range(997))]
    keys = [f"nobody{i}" for i in range(ENTITIES_PER_STATEMENT)] + ["authsvc", "shadowvault"]
    assert await metadata_store.graph_endpoints(keys, many_groups, ids) == {"authsvc", "shadowvault"}
    chunks = await metadata_store.graph_chunks(keys, many_groups, ids)
    assert set(chunks) == {"authsvc", "shadowvault"}


async def test_a_filter_of_many_long_four_byte_ids_is_answered(metadata_store: MetadataStore) -> None:
    """Each key's part of a statement repeats the document filter: 25 keys with a thousand ids of
    200 four-byte characters made a 20 MB statement, past MariaDB's max_allowed_packet (16 MiB):
    the server closed the connection and the graph leg failed as UNAVAILABLE. Statements now hold
    as many keys as fit a byte budget too."""
    await _load(metadata_store)
    ids = ["alpha", "auth", "secret", *(f"{i:04d}" + "\U00020BB7" * 196 for i in range(997))]
    keys = [f"nobody{i}" for i in range(23)] + ["authsvc", "shadowvault"]
    assert await metadata_store.graph_endpoints(keys, CAROL, ids) == {"authsvc", "shadowvault"}
    assert set(await metadata_store.graph_chunks(keys, CAROL, ids)) == {"authsvc", "shadowvault"}
