"""What a caller may read bounds the answer even when a document's access changes during the query.

The graph and metadata legs choose chunks under the caller's filter and then read them by id; the
dense and keyword legs search under the filter. A document re-ingested as private between those
reads comes back as its new version, which the version check alone lets through: enrich checks
each document it returns against the filter as well.

GRAPH shows the race (it fails without enrich's check). HYBRID reads the chunk by id in its
metadata leg too, but today its answer drops that hit for other reasons (the stale hits of its
other legs lead); it is kept as a check of the same rule on the strategy most callers use.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.backends.metadata_store.mysql import _MysqlTx
from retrieval_server.backends.metadata_store.sqlite import _InlineTx, _SqliteTx
from retrieval_server.domain import Access, DocumentSource, Identity, QueryOptions, Role, Strategy, VectorHit
from tests.support.held_commit import HeldCommit
from tests.support.keeper import PUBLIC, SECRET, keeper
from tests.support.mariadb import mariadb_server

@pytest_asyncio.fixture
async def app(tmp_path: Path) -> AsyncIterator[Application]:
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none", store_backoff_s=0.001))
    await application.open()
    yield application
    await application.close()


@pytest.fixture(scope="module")
def read_committed_mariadb_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A MariaDB whose sessions begin at READ COMMITTED, a common production setting."""
    with mariadb_server(tmp_path_factory.mktemp("read-committed"), options=["--transaction-isolation=READ-COMMITTED"]) as dsn:
        yield dsn


@pytest_asyncio.fixture(params=["sqlite", pytest.param("mariadb", marks=pytest.mark.mariadb)])
async def app_on_each_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Application]:
    dsn = request.getfixturevalue("read_committed_mariadb_dsn") if request.param == "mariadb" else None
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none", store_backoff_s=0.001, mysql_dsn=dsn))
    await application.open()
    yield application
    await application.close()


@pytest.mark.parametrize("strategy", [Strategy.GRAPH, Strategy.HYBRID])
async def test_a_document_made_private_between_the_reads_is_not_served(
    app: Application, monkeypatch: pytest.MonkeyPatch, strategy: Strategy
) -> None:
    assert not (await app.ingest([keeper(PUBLIC)])).errors
    vectors = app.pipeline.deps.vectors
    read_by_id = vectors.get_chunks
    regranted = False

    async def after_an_admin_made_it_private(chunk_ids: Sequence[str]) -> list[VectorHit]:
        nonlocal regranted
        if not regranted:
            regranted = True
            assert not (await app.ingest([keeper(SECRET, access=Access.PRIVATE, owner_id="alice")])).errors
        return await read_by_id(chunk_ids)

    monkeypatch.setattr(vectors, "get_chunks", after_an_admin_made_it_private)
    ask = QueryOptions("Ledger Keeper", 3, strategy=strategy, identity=Identity(), use_cache=False, rerank=False)
    result = await app.pipeline.query(ask)
    assert regranted, "the leg did not read chunks by id: the test did not exercise the race"
    assert not [c.parent.content for c in result.contexts if "SECRET" in c.parent.content]
    assert all(c.document.access is Access.PUBLIC for c in result.contexts)
    # Its owner reads the new version.
    alice = QueryOptions("Ledger Keeper root password", 3, strategy=strategy, identity=Identity("alice", Role.USER), use_cache=False, rerank=False)
    assert any("SECRET" in c.parent.content for c in (await app.pipeline.query(alice)).contexts)


async def test_a_replacement_committed_right_after_enrich_reads_the_parents_is_not_mixed(
    app_on_each_store: Application, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A private document re-ingested as public with new text: its new points are written before its
    rows commit, so a public query can find them while the rows still hold the private version. If
    the commit lands right after enrich has read the parents, and the documents are read after it,
    the parent text is the private version's and the document (version, access) the public one's:
    the hits match that version, and the private text would be served to the public. On MariaDB,
    with a server whose sessions default to READ COMMITTED: the snapshot must not take it."""
    app = app_on_each_store
    assert not (await app.ingest([keeper(SECRET, access=Access.PRIVATE, owner_id="alice")])).errors
    held = HeldCommit(app.metadata)

    def then_the_commit(fetchall: Callable[..., Awaitable[list[tuple[Any, ...]]]]) -> Callable[..., Awaitable[list[tuple[Any, ...]]]]:
        async def fetch(self: object, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            rows = await fetchall(self, sql, params)
            if "FROM parent_chunks" in sql and not held.released.is_set():
                await held.release()
            return rows

        return fetch

    monkeypatch.setattr(app.metadata, "replace_document", held.replace_document)
    for tx in (_InlineTx, _SqliteTx, _MysqlTx):  # whichever connection the read takes
        monkeypatch.setattr(tx, "fetchall", then_the_commit(tx.fetchall))
    made_public = asyncio.create_task(app.ingest([keeper(PUBLIC)]))
    await held.points_written.wait()
    ask = QueryOptions("Ledger Keeper quarterly keys", 3, strategy=Strategy.SEMANTIC, identity=Identity(), use_cache=False, rerank=False)
    result = await app.pipeline.query(ask)
    assert not (await made_public).errors
    assert held.released.is_set(), "enrich did not read parents while the replacement was in flight: the race was not exercised"
    assert not [c.parent.content for c in result.contexts if "SECRET" in c.parent.content]
    assert all(c.document.access is Access.PUBLIC for c in result.contexts)


async def test_suggestions_name_no_document_made_private_since_their_search(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not (await app.ingest([DocumentSource(filename="plan.txt", document_id="plan", title="Harbour schedule",
                                                 content=b"The harbour schedule lists ferries and tugboats.")])).errors
    search = app.metadata.search_documents
    regranted = False

    async def then_an_admin_makes_it_private(*args: Any, **kwargs: Any) -> Any:
        nonlocal regranted
        found = await search(*args, **kwargs)
        if not regranted:
            regranted = True
            assert not (await app.ingest([DocumentSource(filename="plan.txt", document_id="plan", title="SECRET merger with Acme",
                                                         content=b"Confidential: the merger closes Friday.", access=Access.PRIVATE,
                                                         owner_id="alice")])).errors
        return found

    monkeypatch.setattr(app.metadata, "search_documents", then_an_admin_makes_it_private)
    # A filter that matches nothing: the answer is empty, and its suggestions name related documents.
    ask = QueryOptions("harbour schedule", 3, strategy=Strategy.SEMANTIC, identity=Identity("bob", Role.USER), document_ids=("none",),
                       use_cache=False)
    result = await app.pipeline.query(ask)
    assert regranted and result.contexts == ()
    assert "remove the document filter" in result.suggestions and not [s for s in result.suggestions if "SECRET" in s or "plan" in s]


async def test_lookup_facts_names_no_source_made_private_since_the_entity_was_read(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    from retrieval_server.domain import AccessFilter
    from retrieval_server.workflow.tools import LookupFacts, LookupFactsParams, ToolContext, ToolError

    assert not (await app.ingest([keeper(PUBLIC)])).errors
    graph = app.pipeline.deps.graph
    assert graph is not None
    resolve = graph.resolve
    regranted = False

    async def then_an_admin_makes_it_private(*args: Any, **kwargs: Any) -> Any:
        nonlocal regranted
        found = await resolve(*args, **kwargs)
        regranted = True
        assert not (await app.ingest([DocumentSource(filename="keeper.txt", document_id="keeper", title="SECRET: root password rotation",
                                                     content=SECRET.encode(), access=Access.PRIVATE, owner_id="alice")])).errors
        return found

    monkeypatch.setattr(graph, "resolve", then_an_admin_makes_it_private)
    ctx = ToolContext(query="what is Ledger Keeper", access=AccessFilter(), document_ids=(), graph=graph, contexts=[], embedder=app.embedder)
    # Its only document: the sources left it out, and the mentions and the summary still counted it.
    with pytest.raises(ToolError, match="no known entity named 'Ledger Keeper'"):
        await LookupFacts().run(LookupFactsParams(entity="Ledger Keeper"), ctx)
    assert regranted
