"""The graph leg in the query workflow, on a synthetic wiki of data stores, services and projects.

Two-hop questions ("Which projects depend on a service that uses LedgerDB?") have answers that do
not name what the question names: dense and keyword search miss them, the graph leg finds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bench.graph.corpus import make_wiki
from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import Access, AccessFilter, DocumentSource, Identity, QueryOptions, Role, StageMetric, Strategy
from retrieval_server.knowledge import MatchKind
from retrieval_server.workflow.knowledge_graph import KnowledgeGraph
from retrieval_server.workflow.pipeline import QueryPipeline

ANON, ALICE, BOB = Identity(), Identity("alice", Role.USER), Identity("bob", Role.USER)
WIKI = make_wiki(7)
SECRET = "ProjectZephyr is a confidential acquisition. ProjectZephyr depends on VaultKeeper. VaultKeeper uses LedgerDB."


def _source(doc_id: str, text: str, **kw: Any) -> DocumentSource:
    return DocumentSource(filename=f"{doc_id}.txt", content=text.encode(), document_id=doc_id, **kw)


@pytest_asyncio.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Application]:
    application = Application(load_settings(data_dir=tmp_path_factory.mktemp("graph"), cache_backend="none", store_backoff_s=0.001))
    await application.open()
    sources = [_source(d, t) for d, t in WIKI.documents.items()]
    sources.append(_source("zephyr", SECRET, access=Access.PRIVATE, owner_id="alice"))
    report = await application.ingest(sources)
    assert not report.errors
    yield application
    await application.close()


def _pipeline(app: Application, **settings: Any) -> QueryPipeline:
    deps = app.pipeline.deps
    return QueryPipeline(dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, **settings)))


def _docs(result: Any) -> list[str]:
    return [c.document.document_id for c in result.contexts]


async def _recall(pipeline: QueryPipeline, strategy: Strategy) -> float:
    recalls = []
    for q in WIKI.questions():
        got = set(_docs(await pipeline.query(QueryOptions(q.text, 5, strategy=strategy, use_cache=False))))
        recalls.append(len(got & q.relevant) / len(q.relevant))
    return sum(recalls) / len(recalls)


async def test_the_graph_leg_answers_the_second_hop(app: Application) -> None:
    with_graph = await _recall(app.pipeline, Strategy.HYBRID)
    without = await _recall(_pipeline(app, graph_expansion=False), Strategy.HYBRID)
    graph_alone = await _recall(app.pipeline, Strategy.GRAPH)
    dense, keyword = await _recall(app.pipeline, Strategy.SEMANTIC), await _recall(app.pipeline, Strategy.KEYWORD)
    assert with_graph >= without + 0.3, (with_graph, without)
    assert graph_alone >= 0.7 and max(dense, keyword, without) <= 0.5, (graph_alone, dense, keyword, without)


async def test_a_project_found_only_through_a_service(app: Application) -> None:
    q = next(q for q in WIKI.questions() if q.kind == "projects-via-store")
    store = q.text.rsplit(" ", 1)[1].rstrip("?")
    for doc in q.relevant:
        assert store not in WIKI.documents[doc]  # the answer never names what the question names
    hybrid = await app.pipeline.query(QueryOptions(q.text, 5, strategy=Strategy.HYBRID, use_cache=False))
    assert q.relevant & set(_docs(hybrid))
    graph = hybrid.metrics.graph
    assert graph is not None and [m.name for m in graph.matches] == [store] and graph.matches[0].kind is MatchKind.EXACT
    assert [h.hop for h in graph.hops][:2] == [0, 1] and [h.penalty for h in graph.hops][:2] == [1.0, 0.77]
    users = {s for s, stores in WIKI.uses.items() if store in stores}
    assert users <= set(graph.hops[1].entities)  # the services that use the store are its neighbours
    assert sum(h.chunks for h in graph.hops) > 0
    semantic = await app.pipeline.query(QueryOptions(q.text, 5, strategy=Strategy.SEMANTIC, use_cache=False))
    assert semantic.metrics.graph is None  # SEMANTIC has no graph leg
    adaptive = await app.pipeline.query(QueryOptions(q.text, 5, strategy=Strategy.ADAPTIVE, use_cache=False))
    assert adaptive.metrics.graph is not None and q.relevant & set(_docs(adaptive))  # ADAPTIVE adds it too
    off = await _pipeline(app, graph_expansion=False).query(QueryOptions(q.text, 5, strategy=Strategy.HYBRID, use_cache=False))
    assert off.metrics.graph is None


async def test_graph_strategy_is_the_graph_leg_alone(app: Application) -> None:
    r = await app.pipeline.query(QueryOptions("Who maintains AuthSvc?", 3, strategy=Strategy.GRAPH, use_cache=False))
    assert r.metrics.strategy_used is Strategy.GRAPH and _docs(r)[0] == "authsvc"
    assert all(c.score <= 1.0 for c in r.contexts)  # one leg: its own scores (hop strengths)
    nothing = await app.pipeline.query(QueryOptions("how are releases planned", 3, strategy=Strategy.GRAPH, use_cache=False))
    assert nothing.contexts == () and any("GRAPH strategy needs" in s for s in nothing.suggestions)
    fuzzy = await app.pipeline.query(QueryOptions("Who maintains AuthSvcc?", 3, strategy=Strategy.GRAPH, use_cache=False))
    assert fuzzy.metrics.graph is not None and fuzzy.metrics.graph.matches[0].kind is MatchKind.FUZZY
    assert _docs(fuzzy)[0] == "authsvc"


async def test_graph_leg_obeys_access_and_filters(app: Application) -> None:
    question = "Which projects depend on a service that uses LedgerDB?"
    for who, sees in ((ANON, False), (BOB, False), (ALICE, True)):
        r = await app.pipeline.query(QueryOptions(question, 10, strategy=Strategy.GRAPH, identity=who, use_cache=False))
        assert ("zephyr" in _docs(r)) is sees, who
        reached = {e for h in r.metrics.graph.hops for e in h.entities}  # type: ignore[union-attr]
        assert ("VaultKeeper" in reached) is sees  # learned only from alice's document
    hidden = await app.pipeline.query(QueryOptions("What does ProjectZephyr depend on?", 5, strategy=Strategy.GRAPH, identity=BOB, use_cache=False))
    assert hidden.contexts == () and hidden.metrics.graph is not None and hidden.metrics.graph.matches == ()
    scoped = await app.pipeline.query(
        QueryOptions(question, 10, strategy=Strategy.GRAPH, document_ids=("ledgerdb",), use_cache=False)
    )
    assert set(_docs(scoped)) == {"ledgerdb"}


async def test_reingest_and_delete_update_what_the_leg_finds(app: Application) -> None:
    question = QueryOptions("What does ProjectNeutrino depend on?", 2, strategy=Strategy.GRAPH, use_cache=False)
    await app.ingest([_source("neutrino", "ProjectNeutrino depends on AuditSvc. It launches in spring.")])
    r = await app.pipeline.query(question)
    assert _docs(r) == ["neutrino", "auditsvc"] and r.metrics.graph.hops[1].entities == ("AuditSvc",)  # type: ignore[union-attr]
    await app.ingest([_source("neutrino", "ProjectNeutrino depends on ReviewSvc. It launches in spring.")])
    r = await app.pipeline.query(question)
    assert _docs(r) == ["neutrino", "reviewsvc"] and r.metrics.graph.hops[1].entities == ("ReviewSvc",)  # type: ignore[union-attr]
    await app.delete(["neutrino"])
    r = await app.pipeline.query(QueryOptions("What does ProjectNeutrino depend on?", 5, strategy=Strategy.GRAPH, use_cache=False))
    assert r.contexts == ()


async def test_a_retry_keeps_to_the_chunks_a_hop_may_add(app: Application) -> None:
    """A retry widened the leg as the pool: five chunks at a hop where GRAPH_MAX_CHUNKS_PER_HOP is 3."""
    r = await _pipeline(app, graph_max_neighbors=2, graph_max_chunks_per_hop=3, sufficiency_threshold=1.01).query(
        QueryOptions("Which projects depend on a service that uses LedgerDB?", 10, strategy=Strategy.GRAPH, use_cache=False)
    )
    assert r.metrics.iterations == 2 and r.metrics.graph is not None
    hops = [h.chunks for h in r.metrics.graph.hops]
    assert len(hops) == 3 and hops[0] == 3 and max(hops) <= 3, hops


class _BrokenStore:
    """A metadata store whose graph reads fail (a lost connection, a corrupt table)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name.startswith("graph_"):
            async def fail(*_a: Any, **_k: Any) -> Any:
                raise ConnectionError("graph tables unavailable")

            return fail
        return getattr(self._inner, name)


async def test_a_graph_failure_degrades_hybrid_and_never_fails_it(app: Application) -> None:
    broken = KnowledgeGraph(_BrokenStore(app.metadata), app.executor)  # type: ignore[arg-type]
    p = QueryPipeline(dataclasses.replace(app.pipeline.deps, graph=broken))
    r = await p.query(QueryOptions("Which projects depend on a service that uses LedgerDB?", 5, strategy=Strategy.HYBRID, use_cache=False))
    assert r.contexts and "graph:store_error" in r.metrics.degraded
    g = await p.query(QueryOptions("Who maintains AuthSvc?", 5, strategy=Strategy.GRAPH, use_cache=False))
    assert g.contexts == () and "graph:store_error" in g.metrics.degraded


class _FailsOnceSet(_BrokenStore):
    """A metadata store whose graph reads fail once ``failing`` is set."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.failing = False

    def __getattr__(self, name: str) -> Any:
        return super().__getattr__(name) if self.failing else getattr(self._inner, name)


async def test_a_retry_whose_graph_leg_failed_reports_no_trace(app: Application) -> None:
    """The retry, which searched a wider pool, scores higher and answers, without a graph leg: the
    first pass's trace was reported as its own (and would pin a cached answer to the graph's version)."""
    store = _FailsOnceSet(app.metadata)

    def after(event: Any) -> None:
        if isinstance(event, StageMetric) and event.stage == "check_sufficiency":
            store.failing = True

    p = QueryPipeline(dataclasses.replace(
        app.pipeline.deps, graph=KnowledgeGraph(store, app.executor),  # type: ignore[arg-type]
        settings=dataclasses.replace(app.pipeline.deps.settings, sufficiency_threshold=1.01),
    ))
    r = await p.query(QueryOptions("Who maintains AuthSvc?", 3, strategy=Strategy.HYBRID, use_cache=False), events=after)
    assert r.metrics.iterations == 2 and "graph:store_error" in r.metrics.degraded and r.contexts
    assert r.metrics.graph is None


class _NamesHeld:
    """A metadata store whose name reads (graph_keys) wait until ``released`` is set, ``asked``
    saying that one is waiting and ``ended`` that one is over, whatever ended it; ``reads`` counts them."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.asked, self.released, self.ended = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        if name != "graph_keys":
            return getattr(self._inner, name)

        async def held() -> Any:
            self.reads += 1
            self.asked.set()
            try:
                await self.released.wait()
                return await self._inner.graph_keys()
            finally:
                self.ended.set()

        return held


async def test_names_loaded_for_a_query_that_gave_up_serve_the_next(app: Application) -> None:
    """The names are loaded by the query that finds them out of date (the first, and the first after
    each write), and a query cut by its deadline or the leg's cut-off cancelled the load: the next
    one began again, and while each query's time ran out first (a large graph, short deadlines)
    the graph leg matched against the names before the write, or none at all."""
    store = _NamesHeld(app.metadata)
    graph = KnowledgeGraph(store, app.executor)  # type: ignore[arg-type]
    question, everything = "Who maintains AuthSvc?", AccessFilter(reads_everything=True)
    first = asyncio.ensure_future(graph.match(question, everything))
    await store.asked.wait()
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    store.released.set()
    assert [m.name for m in await graph.match(question, everything)] == ["AuthSvc"]
    assert store.reads == 1  # the load the first query began went on without it, and serves this one


class _Written(_NamesHeld):
    """A :class:`_NamesHeld` whose graph version is ``version``, which a test changes as each
    document an ingest writes does; ``version_read`` says that a query has read it."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.version, self.version_read = "v0", asyncio.Event()

    async def graph_version(self) -> str:
        self.version_read.set()
        return self.version


async def test_queries_that_gave_up_during_writes_leave_one_names_load_for_all_the_writes(app: Application) -> None:
    """Each query that found the names out of date left a load of the version it saw, each load run
    in turn, whole, after its query gave up: an ingest changes the version with every document, so
    a query after it waited behind a load for each query made during it, and found the names
    before its writes until its time ran out."""
    store = _Written(app.metadata)
    graph = KnowledgeGraph(store, app.executor)  # type: ignore[arg-type]
    question, everything = "Who maintains AuthSvc?", AccessFilter(reads_everything=True)
    queries = []
    for write in range(6):
        store.version, store.version_read = f"v{write}", asyncio.Event()
        queries.append(asyncio.ensure_future(graph.match(question, everything)))
        await store.version_read.wait()
        await store.asked.wait()  # the first query's load holds the names' read
    for query in queries:
        query.cancel()
    await asyncio.gather(*queries, return_exceptions=True)
    store.released.set()
    assert [m.name for m in await graph.match(question, everything)] == ["AuthSvc"]
    assert store.reads == 2  # the load begun before the writes, and one after all of them


async def test_names_a_query_gave_up_loading_are_no_longer_read_once_the_application_closed(tmp_path: Path) -> None:
    """A server's stop cancels the queries still running, then closes the application: the names
    load such a query left running went on, awaited by nobody, reading stores closed under it."""
    application = Application(load_settings(data_dir=tmp_path, cache_backend="none"))
    await application.open()
    store = _NamesHeld(application.metadata)
    try:
        assert not (await application.ingest([_source("auth", "AuthSvc uses LedgerDB. AuthSvc is maintained by Alice.")])).errors
        application.graph.store = store  # type: ignore[assignment]
        query = asyncio.ensure_future(application.graph.match("Who maintains AuthSvc?", AccessFilter(reads_everything=True)))
        await store.asked.wait()
        query.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await query
        await application.close()
        assert store.ended.is_set()
    finally:
        store.released.set()
        await application.close()


async def test_hybrid_follows_stated_relations_only(app: Application) -> None:
    await app.ingest([_source("lunch", "ZorblaxSvc and QuuxorSvc came up over lunch. Nobody said more about ZorblaxSvc.")])
    hybrid = await app.pipeline.query(QueryOptions("What about ZorblaxSvc?", 3, strategy=Strategy.HYBRID, use_cache=False))
    trace = hybrid.metrics.graph
    assert trace is not None and [m.name for m in trace.matches] == ["ZorblaxSvc"] and trace.hops == ()  # co-occurs only
    graph = await app.pipeline.query(QueryOptions("What about ZorblaxSvc?", 3, strategy=Strategy.GRAPH, use_cache=False))
    assert graph.metrics.graph is not None and graph.metrics.graph.hops and _docs(graph) == ["lunch"]


async def test_names_beyond_ascii_and_decomposed_text_are_found_as_typed(app: Application) -> None:
    """A file may spell "ü" as "u" and a combining mark (NFD: PDF extraction, macOS names); a caller
    types it composed. Names of any script are names, and either spelling finds the document."""
    text = "MünchenSvc depends on ZürichDB. José García maintains MünchenSvc; the Ørsted Team owns ZürichDB."
    await app.ingest([_source("munich", unicodedata.normalize("NFD", text))])
    r = await app.pipeline.query(QueryOptions("What does MünchenSvc depend on?", 3, strategy=Strategy.GRAPH, use_cache=False))
    trace = r.metrics.graph
    assert trace is not None and [(m.name, m.kind) for m in trace.matches] == [("MünchenSvc", MatchKind.EXACT)]
    assert "ZürichDB" in trace.hops[1].entities and _docs(r)[0] == "munich"
    team = await app.pipeline.query(QueryOptions("What does the Ørsted Team own?", 3, strategy=Strategy.GRAPH, use_cache=False))
    assert team.metrics.graph is not None and [(m.name, m.kind) for m in team.metrics.graph.matches] == [("Ørsted Team", MatchKind.EXACT)]
    entities = await app.graph.entities(None, AccessFilter(), ["munich"])
    assert {e.name for e in entities.values()} >= {"MünchenSvc", "ZürichDB", "José García", "Ørsted Team"}
    keyword = await app.pipeline.query(QueryOptions("José García", 3, strategy=Strategy.KEYWORD, use_cache=False))
    assert _docs(keyword)[:1] == ["munich"]
    [context] = [c for c in keyword.contexts if c.document.document_id == "munich"]
    assert "José García" in context.parent.content  # stored composed, as it is shown
