"""One behavioural suite for every MetadataStore: SQLite and a real MariaDB."""

from __future__ import annotations

import dataclasses
import unicodedata
from types import SimpleNamespace
from typing import Any

import pytest

from retrieval_server.backends import metadata_store as metadata_store_module
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.domain import Access, AccessFilter, Document, Identity, ParentChunk, Role, WrongModel
from tests.support.clock import Clock


async def read_parents(store: MetadataStore, parent_ids: list[str]) -> dict[str, ParentChunk]:
    """The parents of what enrich reads (it reads their documents in the same snapshot)."""
    return (await store.get_parents_and_documents(parent_ids))[0]


def _parents(doc_id: str, n: int, text: str = "body") -> list[ParentChunk]:
    return [ParentChunk(f"{doc_id}#p{i}", doc_id, i, f"{text} {i} — ünïcödé 🙂", 10 + i, page=i + 1) for i in range(n)]


async def test_round_trip(metadata_store: MetadataStore) -> None:
    doc = Document("d1", "Title", "http://x", "src.pdf", Access.PRIVATE, "alice", {"lang": "en"}, ("bob", "carol"), "hash1")
    assert await metadata_store.replace_document(doc, _parents("d1", 3)) is False
    assert await metadata_store.get_document("d1") == doc
    parents, documents = await metadata_store.get_parents_and_documents(["d1#p2", "d1#p0", "missing"])
    assert set(parents) == {"d1#p0", "d1#p2"} and documents == {"d1": doc}
    assert parents["d1#p2"] == _parents("d1", 3)[2]
    assert await metadata_store.count_documents() == 1


async def test_replace_leaves_no_orphans(metadata_store: MetadataStore) -> None:
    await metadata_store.replace_document(Document("d1", granted_user_ids=("bob",)), _parents("d1", 5))
    assert await metadata_store.replace_document(Document("d1", title="v2"), _parents("d1", 2, "new")) is True
    parents = await read_parents(metadata_store, [f"d1#p{i}" for i in range(5)])
    assert sorted(parents) == ["d1#p0", "d1#p1"] and parents["d1#p0"].content.startswith("new")
    doc = await metadata_store.get_document("d1")
    assert doc is not None and doc.title == "v2" and doc.granted_user_ids == ()


async def test_relocate_changes_url_source_and_hash_of_the_stored_version_only(metadata_store: MetadataStore) -> None:
    doc = Document("d1", "Title", "http://x", "/home/ci/a.txt", Access.PRIVATE, "alice", {"lang": "en"}, ("bob",), "0123456789abcdef" + "a" * 48)
    await metadata_store.replace_document(doc, _parents("d1", 2))
    moved = Document("d1", "Title", "http://y", "a.txt", Access.PRIVATE, "alice", {"lang": "en"}, ("bob",), "0123456789abcdef" + "b" * 48)
    assert await metadata_store.relocate_document(moved, doc.content_hash) is True
    assert await metadata_store.get_document("d1") == moved and len(await read_parents(metadata_store, ["d1#p0", "d1#p1"])) == 2
    # Another version was stored since: nothing is written.
    assert await metadata_store.relocate_document(dataclasses.replace(moved, source="b.txt"), doc.content_hash) is False
    assert (await metadata_store.get_document("d1")) == moved
    with pytest.raises(ValueError, match="needs its points written"):
        await metadata_store.relocate_document(dataclasses.replace(moved, content_hash="f" * 64), moved.content_hash)


async def test_delete_removes_rows(metadata_store: MetadataStore) -> None:
    await metadata_store.replace_document(Document("d1"), _parents("d1", 2))
    await metadata_store.replace_document(Document("d2"), _parents("d2", 1))
    assert await metadata_store.delete_document("d1") is True
    assert await metadata_store.delete_document("d1") is False
    assert await read_parents(metadata_store, ["d1#p0", "d2#p0"]) == {"d2#p0": _parents("d2", 1)[0]}
    assert await metadata_store.list_document_ids() == ["d2"]


async def test_failed_transaction_changes_nothing(metadata_store: MetadataStore) -> None:
    await metadata_store.replace_document(Document("d1", title="old"), _parents("d1", 2))
    clash = _parents("d1", 1) + _parents("d1", 1)  # duplicate primary key inside one replace
    try:
        await metadata_store.replace_document(Document("d1", title="new"), clash)
    except Exception:
        pass
    else:
        raise AssertionError("a duplicate parent id must fail the transaction")
    doc = await metadata_store.get_document("d1")
    assert doc is not None and doc.title == "old"
    assert len(await read_parents(metadata_store, ["d1#p0", "d1#p1"])) == 2


async def test_many_ids_in_one_lookup(metadata_store: MetadataStore) -> None:
    await metadata_store.replace_document(Document("big"), _parents("big", 1200))
    got = await read_parents(metadata_store, [f"big#p{i}" for i in range(1200)])
    assert len(got) == 1200


async def test_info_is_upserted(metadata_store: MetadataStore) -> None:
    assert await metadata_store.get_info("embedding_model") is None
    await metadata_store.set_info("embedding_model", "a")
    await metadata_store.set_info("embedding_model", "b")
    assert await metadata_store.get_info("embedding_model") == "b"


async def test_the_first_value_added_stays(metadata_store: MetadataStore) -> None:
    assert await metadata_store.add_info("embedding_model", "a") == "a"
    assert await metadata_store.add_info("embedding_model", "b") == "a"
    assert await metadata_store.get_info("embedding_model") == "a"


async def test_a_write_of_another_model_than_the_index_records_stores_nothing(metadata_store: MetadataStore) -> None:
    # The first write of an index without a model records its own.
    await metadata_store.replace_document(Document("d1"), _parents("d1", 1), model="a")
    assert await metadata_store.get_info("embedding_model") == "a"
    with pytest.raises(WrongModel, match="records embedding model a, but this process embeds with b"):
        await metadata_store.replace_document(Document("d2"), _parents("d2", 1), model="b")
    assert await metadata_store.list_document_ids() == ["d1"]


async def test_full_text_search_respects_access(metadata_store: MetadataStore) -> None:
    docs = [
        Document("glaciers", "Glaciers of the Alps", metadata={"topic": "geology"}),
        Document("volcano", "Volcanic eruptions", metadata={"region": "alps"}),
        Document("secret", "Alps expedition budget", access=Access.PRIVATE, owner_id="alice"),
        Document("granted", "Alps rescue plan", access=Access.PRIVATE, owner_id="bob", granted_user_ids=("carol",)),
        Document("unrelated", "Cooking pasta"),
    ]
    for d in docs:
        await metadata_store.replace_document(d, [])
    anon = await metadata_store.search_documents("alps", 10, AccessFilter.for_identity(Identity()))
    assert {d for d, _ in anon} == {"glaciers", "volcano"}
    assert all(s > 0 for _, s in anon)
    alice = {d for d, _ in await metadata_store.search_documents("alps", 10, AccessFilter.for_identity(Identity("alice", Role.USER)))}
    assert alice == {"glaciers", "volcano", "secret"}
    carol = {d for d, _ in await metadata_store.search_documents("alps rescue", 10, AccessFilter.for_identity(Identity("carol", Role.USER)))}
    assert carol == {"glaciers", "volcano", "granted"}
    root = {d for d, _ in await metadata_store.search_documents("alps", 10, AccessFilter.for_identity(Identity("root", Role.SUPER_ADMIN)))}
    assert root == {"glaciers", "volcano", "secret", "granted"}
    only = await metadata_store.search_documents("alps", 10, AccessFilter.for_identity(Identity()), document_ids=["volcano"])
    assert [d for d, _ in only] == ["volcano"]
    geology = await metadata_store.search_documents("geology", 10, AccessFilter.for_identity(Identity()))
    assert [d for d, _ in geology] == ["glaciers"]  # metadata values are searchable
    assert await metadata_store.search_documents("!!", 10, AccessFilter.for_identity(Identity())) == []
    # "İ" lower-cased is "i" and a combining dot: the query's word was cut at the dot.
    await metadata_store.replace_document(Document("tr", "İzmir İstanbul"), [])
    for asked in ("İstanbul", "istanbul", "İZMİR"):
        assert [d for d, _ in await metadata_store.search_documents(asked, 10, AccessFilter.for_identity(Identity()))] == ["tr"], asked
    await metadata_store.delete_document("glaciers")
    assert "glaciers" not in {d for d, _ in await metadata_store.search_documents("alps", 10, AccessFilter.for_identity(Identity()))}


async def test_a_decomposed_metadata_value_is_found_by_its_composed_spelling(metadata_store: MetadataStore) -> None:
    """A caller's metadata may spell "ü" as "u" and a combining mark; the query (NFC) spells it
    composed. Values are kept as sent (loaders compose titles and text, not a caller's fields);
    both stores' full-text search equates the two spellings."""
    decomposed = unicodedata.normalize("NFD", "Zürich")
    await metadata_store.replace_document(Document("office", "Office handbook", metadata={"city": decomposed}), [])
    await metadata_store.replace_document(Document("other", "Office parking", metadata={"city": "Basel"}), [])
    public = AccessFilter.for_identity(Identity())
    assert [d for d, _ in await metadata_store.search_documents("Zürich", 10, public)] == ["office"]
    assert (await metadata_store.get_document("office")).metadata == {"city": decomposed}  # type: ignore[union-attr]


async def test_a_word_split_by_a_soft_hyphen_or_a_zero_width_space_is_found_whole(metadata_store: MetadataStore) -> None:
    """Both stores' tokenizers cut a word at a soft hyphen (HTML's &shy;) or a zero-width space,
    in a title, a metadata value or the query; the word itself then found nothing."""
    await metadata_store.replace_document(Document("ddsg", "Donau\u00addampf\u00adschiff history", metadata={"status": "co\u200bordinated"}), [])
    await metadata_store.replace_document(Document("other", "Donau delta survey", metadata={"status": "planned"}), [])
    public = AccessFilter.for_identity(Identity())
    for asked in ("Donaudampfschiff", "coordinated", "co\u00adordinated", "donau\ufeffdampf\u2060schiff"):
        assert [d for d, _ in await metadata_store.search_documents(asked, 10, public)] == ["ddsg"], asked


async def test_words_of_innodbs_stopword_list_are_found_as_in_sqlite(metadata_store: MetadataStore) -> None:
    """InnoDB's default list left "www", "com" and "und" out of MariaDB's index, so the metadata
    leg never found them there, though SQLite did and the leg's own stop words keep them."""
    for d in (Document("portal", "Www portal"), Document("site", "Mirror of example.com"), Document("de", "Forschung und Lehre"),
              Document("film", "The Who live")):
        await metadata_store.replace_document(d, [])
    public = AccessFilter.for_identity(Identity())
    for asked, found in [("www", "portal"), ("com", "site"), ("und", "de")]:
        assert [d for d, _ in await metadata_store.search_documents(asked, 10, public)] == [found], asked
    # With stop words kept (RETRIEVAL_METADATA_STOPWORDS), "the" is a word MariaDB finds as well.
    assert [d for d, _ in await metadata_store.search_documents("the", 10, public, keep_stopwords=True)] == ["film"]


async def test_a_one_character_han_word_is_searched(metadata_store: MetadataStore) -> None:
    """猫 ("cat") is a word, not an initial to leave out (InnoDB skips words under
    innodb_ft_min_token_size, 3 by default, so only SQLite finds it)."""
    await metadata_store.replace_document(Document("cat", "猫 と 犬"), [])
    await metadata_store.replace_document(Document("a", "a b c"), [])
    found = [d for d, _ in await metadata_store.search_documents("猫", 10, AccessFilter.for_identity(Identity()))]
    assert found == (["cat"] if isinstance(metadata_store, SqliteMetadataStore) else [])


async def test_full_text_search_leaves_out_stopwords(metadata_store: MetadataStore) -> None:
    for d in (Document("glaciers", "Glaciers of the Alps"), Document("history", "The history of the world")):
        await metadata_store.replace_document(d, [])
    public = AccessFilter.for_identity(Identity())
    # A title sharing only "the" and "of" with the query is no match.
    assert [d for d, _ in await metadata_store.search_documents("the glaciers of iceland", 10, public)] == ["glaciers"]
    # The 16 terms searched are the query's first 16 that are not stopwords.
    chatter = "what is it that we would have been about if there were any of those which could"
    assert len(set(chatter.split())) > 16
    assert [d for d, _ in await metadata_store.search_documents(f"{chatter} glaciers", 10, public)] == ["glaciers"]


async def test_reads_neither_wait_for_nor_see_an_open_write(metadata_store: MetadataStore) -> None:
    import asyncio

    await metadata_store.replace_document(Document("d1", title="committed"), _parents("d1", 1))
    async with metadata_store.transaction() as tx:
        await tx.execute("UPDATE documents SET title = ? WHERE document_id = ?", ["uncommitted", "d1"])
        # While an ingest holds its transaction, queries go on reading the last committed state.
        doc = await asyncio.wait_for(metadata_store.get_document("d1"), timeout=120)  # a read that waits for the write never ends
        parents = await asyncio.wait_for(read_parents(metadata_store, ["d1#p0"]), timeout=120)
    assert doc is not None and doc.title == "committed" and list(parents) == ["d1#p0"]
    after = await metadata_store.get_document("d1")
    assert after is not None and after.title == "uncommitted"


async def test_cancelled_calls_leave_no_transaction_behind(metadata_store: MetadataStore) -> None:
    """A caller that gives up (deadline, client gone) cancels its task at any await point."""
    import asyncio

    await metadata_store.replace_document(Document("d1", title="t"), _parents("d1", 2))
    for i in range(60):
        calls = [
            asyncio.ensure_future(metadata_store.get_documents(["d1"])),
            asyncio.ensure_future(read_parents(metadata_store, ["d1#p0"])),
            asyncio.ensure_future(metadata_store.replace_document(Document(f"x{i}"), _parents(f"x{i}", 1))),
        ]
        for _ in range(i % 6):  # cancel after a varying number of loop turns: before, inside and after BEGIN
            await asyncio.sleep(0)
        for c in calls:
            c.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
    # Every connection still works, for reads and for writes.
    for _ in range(4):
        doc = await metadata_store.get_document("d1")
        assert doc is not None and doc.title == "t"
    assert await metadata_store.replace_document(Document("after", title="ok"), _parents("after", 1)) is False
    got = await metadata_store.get_document("after")
    assert got is not None and got.title == "ok"


async def test_metadata_search_answers_as_every_match_filtered_by_the_access_rule(metadata_store: MetadataStore) -> None:
    """Whatever a store does to search faster, the answer is every match (the one statement with no
    access rule) kept by :meth:`AccessFilter.allows` and cut to the limit: same documents, same
    scores, same order, for every caller, limit and query (private documents crowding the best
    matches force the SQLite store's fallback). Compared with the one statement's answer instead,
    this said nothing of MariaDB, whose search is that statement."""
    import random

    rng = random.Random(5)
    words = ["alpine", "glacier", "river", "the", "of", "valley", "snow", "rock", "ice", "lake"]
    users = ["alice", "bob", "carol"]
    docs: dict[str, Document] = {}
    for i in range(120):
        private = i % 3 != 0
        owner = rng.choice(users) if private else ""
        title = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
        doc = Document(f"doc{i:03d}", title, access=Access.PRIVATE if private else Access.PUBLIC, owner_id=owner,
                       granted_user_ids=(rng.choice(users),) if private and i % 5 == 0 else ())
        await metadata_store.replace_document(doc, _parents(doc.document_id, 1))
        docs[doc.document_id] = doc
    everything = AccessFilter.for_identity(Identity("root", Role.SUPER_ADMIN))
    callers = [Identity(), Identity("alice", Role.USER), Identity("carol", Role.USER), Identity("root", Role.SUPER_ADMIN)]
    for query in ["the glacier", "of the", "snow lake river", "ice", "nothing here"]:
        matches = await MetadataStore.search_documents(metadata_store, query, len(docs), everything)
        for caller in callers:
            access = AccessFilter.for_identity(caller)
            readable = [(d, s) for d, s in matches if access.allows(docs[d])]
            for limit in (1, 3, 10):
                got = await metadata_store.search_documents(query, limit, access)
                assert got == readable[:limit], (query, caller.user_id, limit)
    assert any(docs[d].access is Access.PRIVATE for d, _ in await metadata_store.search_documents("glacier", 10, everything))


async def test_a_pending_write_is_seen_until_it_ends(metadata_store: MetadataStore) -> None:
    """What lets an ingest of unchanged content finish a write that stopped half-way instead of skipping it."""
    await metadata_store.replace_document(Document("pw1"), _parents("pw1", 1))
    assert await metadata_store.has_pending_write("pw1") is False
    await metadata_store.begin_write("pw1")
    assert await metadata_store.has_pending_write("pw1") is True
    assert await metadata_store.has_pending_write("pw2") is False
    await metadata_store.end_write("pw1")
    assert await metadata_store.has_pending_write("pw1") is False


async def test_a_writer_clears_its_own_intent_and_not_one_begun_since(
    metadata_store: MetadataStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ingest or delete clears its intents after letting the documents' locks go, once one sync
    covered their vectors: an intent another write recorded meanwhile (in flight, or abandoned by
    a killed process) must stay, or nothing would reconcile that write's vectors."""
    clock = Clock(1_700_000_000.25)
    monkeypatch.setattr(metadata_store_module, "time", SimpleNamespace(time=clock))
    first = await metadata_store.begin_write("pw1")
    assert await metadata_store.pending_since("pw1") == first == clock.now
    clock.now += 0.5  # the other write, stamped later
    renewed = await metadata_store.begin_write("pw1")
    await metadata_store.end_write("pw1", first)
    assert await metadata_store.pending_since("pw1") == renewed != first
    await metadata_store.delete_document("pw2")
    deleted = await metadata_store.pending_since("pw2")
    assert deleted is not None
    await metadata_store.end_write("pw2", deleted)
    await metadata_store.end_write("pw1", renewed)
    # Only these two: on MariaDB the database is shared with the module's other tests.
    assert not {"pw1", "pw2"} & set(await metadata_store.pending_writes()) and await metadata_store.pending_since("pw1") is None


async def test_writers_of_different_new_documents_never_fail_each_other(metadata_store: MetadataStore) -> None:
    """Eight ingests of new documents at once (eight requests, or eight processes on one MariaDB),
    then their deletes: every write lands. At InnoDB's REPEATABLE READ, deleting a row that is not
    there yet locked its gap, and writers of one gap deadlocked on their inserts: 56 of 80 failed
    as UNAVAILABLE."""
    import asyncio

    async def write(doc_id: str) -> None:
        await metadata_store.begin_write(doc_id)
        await metadata_store.replace_document(Document(doc_id, title=f"title of {doc_id}"), _parents(doc_id, 2))
        await metadata_store.end_write(doc_id)

    ids = [f"new-{i:03d}" for i in range(64)]
    for start in range(0, len(ids), 8):
        await asyncio.gather(*(write(d) for d in ids[start : start + 8]))
    assert await metadata_store.count_documents() == len(ids) and not set(ids) & set(await metadata_store.pending_writes())
    for start in range(0, len(ids), 8):
        assert all(await asyncio.gather(*(metadata_store.delete_document(d) for d in ids[start : start + 8])))
    assert await metadata_store.count_documents() == 0


@pytest.mark.mariadb
async def test_a_server_logging_statements_takes_writes_at_repeatable_read(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A binary log in STATEMENT format refuses writes at READ COMMITTED (error 1665): there every
    write failed as UNAVAILABLE. The store sees the format at open and keeps REPEATABLE READ."""
    from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore
    from tests.support.mariadb import mariadb_server

    with mariadb_server(tmp_path_factory.mktemp("statement-log"), ["--log-bin=binlog", "--binlog-format=STATEMENT", "--server-id=1"]) as dsn:
        store, other = MysqlMetadataStore(dsn), MysqlMetadataStore(dsn)
        await store.open()
        await other.open()
        try:
            assert await store.replace_document(Document("d1", title="logged"), _parents("d1", 1)) is False
            assert (await store.get_document("d1")).title == "logged"  # type: ignore[union-attr]
            assert await store.delete_document("d1")
            # Another process records the model between this write's first read and its insert: read
            # from the snapshot of the first read, the row was not there (IndexError, not WrongModel).
            first_writer = store._add_info

            async def raced(tx: Any, key: str, value: str) -> str:
                assert await other.add_info(key, "model-B") == "model-B"
                return await first_writer(tx, key, value)

            store._add_info = raced  # type: ignore[method-assign]
            with pytest.raises(WrongModel, match="model-B"):
                await store.replace_document(Document("d2", title="raced"), [], model="model-A")
            assert await store.get_document("d2") is None
        finally:
            await store.close()
            await other.close()


@pytest.mark.mariadb
async def test_opening_an_existing_schema_logs_nothing_and_migrates_the_mentions_index(
    mariadb_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each open of an existing schema logged ten driver warnings (the server's notes: a table that
    exists, an index that exists, one that does not). The notes are off for the schema statements
    alone: a note after open is logged again."""
    import logging

    from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore

    store = MysqlMetadataStore(mariadb_dsn, pool_size=1)
    await store.open()
    try:
        async with store.transaction() as tx:  # the mentions index as it was before the ranked one
            await tx.execute("DROP INDEX IF EXISTS graph_mentions_rank ON graph_mentions")
            await tx.execute("CREATE INDEX graph_mentions_key ON graph_mentions (entity_key)")
    finally:
        await store.close()
    with caplog.at_level(logging.INFO):
        await store.open()
        try:
            async with store.snapshot() as tx:
                indexes = {r[0] for r in await tx.fetchall(
                    "SELECT index_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'graph_mentions'"
                )}
                # The session that created the schema is the pool's connection, set back as it was.
                assert await tx.fetchall("SELECT @@session.sql_notes, @@session.innodb_ft_enable_stopword") == [(1, 1)]
            await store.close()
            assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
            assert "graph_mentions_rank" in indexes and "graph_mentions_key" not in indexes
            await store.open()  # once more, on the schema as it now is
            async with store.snapshot() as tx:
                await tx.execute("DROP TABLE IF EXISTS no_such_table")  # a note, for the driver to log
        finally:
            await store.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == ["Unknown table 'retrieval_test.no_such_table'"]
