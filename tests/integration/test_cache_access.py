"""The semantic cache never widens what a caller may read, and a failing cache never fails a query.

Regression tests for issue #9 (defects 1-3), run against both caches (in-process and a real
redis-server): an answer is served only to callers whose readable set is the one it was computed
for, whoever asked first; a document deleted or replaced while the cache was unreachable is never
served from it; a cache that is down, frozen or gone is skipped and reported.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_asyncio
import redis.exceptions

from retrieval_server.app import Application
from retrieval_server.backends import redis_cache
from retrieval_server.backends.cache import CachedAnswer, CacheUnavailable, GuardedCache
from retrieval_server.backends.redis_cache import INLINE_SCAN_ROWS, RedisCache
from retrieval_server.config import load_settings
from retrieval_server.domain import Access, Document, DocumentSource, Identity, Mode, ParentChunk, QueryOptions, RetrievedContext, Role, Strategy
from retrieval_server.workflow.analysis import ClassicalAnalyzer
from retrieval_server.workflow import nodes
from retrieval_server.workflow.pipeline import QueryPipeline
from scoring_core.model_builder import BertShape, build_cross_encoder
from tests.integration.conftest import AppWithCorpus
from tests.support.clock import Clock
from tests.support.paths import require_fp32_package
from tests.support.redis_server import HEALTHY_REDIS_S, redis_server

QUERY = "salary increase zebra umbrella"
ANON = Identity()
ROOT_NO_ID = Identity(None, Role.SUPER_ADMIN)
BOB_ROOT, BOB = Identity("bob", Role.SUPER_ADMIN), Identity("bob", Role.USER)
CAROL, DAVE = Identity("carol", Role.USER), Identity("dave", Role.USER)
ALL_STRATEGIES = [Strategy.SEMANTIC, Strategy.KEYWORD, Strategy.HYBRID, Strategy.ADAPTIVE]


def _doc(doc_id: str, text: str, **kw: Any) -> DocumentSource:
    return DocumentSource(filename=f"{doc_id}.txt", content=text.encode(), document_id=doc_id, **kw)


CORPUS = [
    _doc("policy", "The salary policy: every increase is reviewed once a year. Zebra umbrella is the code name."),
    _doc("alice-review", "Alice's salary increase is 7 percent this year (zebra umbrella review).",
         access=Access.PRIVATE, owner_id="alice"),
    _doc("bob-review", "Bob's salary increase is 4 percent (zebra umbrella review); carol may read it.",
         access=Access.PRIVATE, owner_id="bob", granted_user_ids=("carol",)),
]
PRIVATE = {"alice-review", "bob-review"}


@pytest_asyncio.fixture
async def app(app_on_each_cache: AppWithCorpus) -> Application:
    return await app_on_each_cache(CORPUS)


def _docs(result: Any) -> set[str]:
    return {c.document.document_id for c in result.contexts}


async def _ask(app: Application, who: Identity, text: str = QUERY, strategy: Strategy = Strategy.HYBRID) -> Any:
    return await app.pipeline.query(QueryOptions(text, 5, strategy=strategy, identity=who))


@pytest.mark.parametrize("strategy", ALL_STRATEGIES)
@pytest.mark.parametrize("variant", [QUERY, QUERY.upper(), f"  {QUERY}  ", QUERY.replace(" ", "   ")])
async def test_super_admin_without_user_id_never_fills_the_public_partition(app: Application, strategy: Strategy, variant: str) -> None:
    first = await _ask(app, ROOT_NO_ID, QUERY, strategy)
    assert PRIVATE <= _docs(first)  # the super admin reads everything
    anonymous = await _ask(app, ANON, variant, strategy)
    assert not PRIVATE & _docs(anonymous), "a private document leaked through the cache"
    user = await _ask(app, DAVE, variant, strategy)
    assert not PRIVATE & _docs(user)


GRAPH_CORPUS = [
    _doc("zebra-public", "ZebraSvc calls PayrollDB for the yearly salary review."),
    _doc("zebra-private", "ZebraSvc depends on SalaryVault, which holds every salary.", access=Access.PRIVATE, owner_id="alice"),
]


@pytest.mark.parametrize("variant", ["ZebraSvc", "zebrasvc", "  ZebraSvc  "])
async def test_graph_answers_are_cached_per_partition(app: Application, variant: str) -> None:
    """GRAPH's leg reads the graph, not the vectors: its answers are partitioned like every strategy's."""
    assert not (await app.ingest(GRAPH_CORPUS)).errors
    first = await _ask(app, ROOT_NO_ID, "ZebraSvc", Strategy.GRAPH)
    assert {"zebra-public", "zebra-private"} <= _docs(first)
    assert (await _ask(app, ROOT_NO_ID, variant, Strategy.GRAPH)).cached
    for who in (ANON, DAVE, BOB):
        r = await _ask(app, who, variant, Strategy.GRAPH)
        assert "zebra-public" in _docs(r) and "zebra-private" not in _docs(r), f"{who} was served a private document"
    assert "zebra-private" in _docs(await _ask(app, Identity("alice", Role.USER), variant, Strategy.GRAPH))


@pytest.mark.parametrize("change", ["deleted", "made private"])
async def test_a_graph_answer_is_not_served_once_a_relation_it_followed_is_gone(app: Application, change: str) -> None:
    """A cached answer was checked against the documents it cites only: the document stating the
    relation its graph leg followed is not among them, and once deleted (or made private) the
    relation's answer was still served from the cache for the TTL."""
    heavy = [_doc(f"orion{i:02d}", f"OrionSvc handles requests on shard {i}. OrionSvc logs requests. OrionSvc retries requests.") for i in range(20)]
    relation = _doc("relation", "OrionSvc depends on VaultKeeper.")
    vault = _doc("vault", "VaultKeeper stores secrets. VaultKeeper rotates keys. VaultKeeper audits access.")
    assert not (await app.ingest([*heavy, relation, vault])).errors
    question = QueryOptions("What does OrionSvc depend on?", 21, strategy=Strategy.GRAPH, identity=BOB)
    first = await app.pipeline.query(question)
    assert "vault" in _docs(first) and "relation" not in _docs(first)  # there by the relation, which it does not cite
    assert (await app.pipeline.query(question)).cached
    if change == "deleted":
        await app.delete(["relation"])
    else:
        assert not (await app.ingest([_doc("relation", relation.content.decode(), access=Access.PRIVATE, owner_id="alice")])).errors
    again = await app.pipeline.query(question)
    assert not again.cached and "vault" not in _docs(again)


def _matched(result: Any) -> list[str]:
    return [m.name for m in result.metrics.graph.matches] if result.metrics.graph is not None else []


#: the only document naming Nimbus Corp, which it states no relation of; carol may read it
MEMO = _doc("memo", "ProjectZephyr depends on AuthSvc. ProjectZephyr is the confidential acquisition of Nimbus Corp.",
            access=Access.PRIVATE, owner_id="alice", granted_user_ids=("carol",))
LEDGER = _doc("ledger", "LedgerDB stores every ledger entry. LedgerDB is replicated across three zones.")
NIMBUS = "Nimbus Corp ledger entries replicated across three zones"


async def _revoke_memo(app: Application) -> None:
    assert not (await app.ingest([_doc("memo", MEMO.content.decode(), access=Access.PRIVATE, owner_id="alice")])).errors


@pytest.mark.parametrize("change", ["deleted", "grant revoked"])
async def test_a_cached_graph_trace_names_no_entity_its_caller_can_no_longer_read(app: Application, change: str) -> None:
    """A hit reports its answer's graph trace again. An entity only a private memo names, with no
    stated relation, was matched and no relation followed, so the answer was checked against the
    documents it cites only: after the memo was deleted, or carol's grant to it revoked, her hits
    still named the entity."""
    assert not (await app.ingest([MEMO, LEDGER])).errors
    question = QueryOptions(NIMBUS, 1, strategy=Strategy.HYBRID, identity=CAROL)
    first = await app.pipeline.query(question)
    assert _docs(first) == {"ledger"} and _matched(first) == ["Nimbus Corp"]  # named by the memo, which it does not cite
    hit = await app.pipeline.query(question)
    assert hit.cached and _matched(hit) == ["Nimbus Corp"]
    if change == "deleted":
        await app.delete(["memo"])
    else:
        await _revoke_memo(app)
    again = await app.pipeline.query(question)
    assert _matched(again) == [] and "memo" not in _docs(again)


def _previous_release(state: Any) -> str | None:
    """The graph version the release before stored: only when a relation was followed."""
    trace = state.metrics.graph
    followed = trace is not None and any(h.hop > 0 and h.chunks for h in trace.hops)
    return trace.graph_version if followed else None


async def test_an_answer_stored_without_the_graph_version_its_trace_needs_is_not_served(
    app: Application, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The release before stored no graph version for a trace with matches and no relation
    followed: its entries (kept by either cache, and written by its servers during a rolling
    upgrade) were served with no check of the graph, naming the entity of a memo whose grant was
    revoked."""
    assert not (await app.ingest([MEMO, LEDGER])).errors
    question = QueryOptions(NIMBUS, 1, strategy=Strategy.HYBRID, identity=CAROL)
    with monkeypatch.context() as m:
        m.setattr(nodes, "_graph_version_used", _previous_release)
        first = await app.pipeline.query(question)
    assert _matched(first) == ["Nimbus Corp"] and not first.cached
    await _revoke_memo(app)
    again = await app.pipeline.query(question)
    assert _matched(again) == [] and not again.cached


async def test_a_graph_trace_is_as_old_as_the_matches_the_router_read(app: Application, monkeypatch: pytest.MonkeyPatch) -> None:
    """The graph leg reuses the entities the router matched, and read the graph's version only when
    it ran: a grant revoked in between was taken for already seen, and the answer, naming what the
    router had matched, was served from the cache after it."""
    assert not (await app.ingest([MEMO, LEDGER])).errors
    graph = app.pipeline.deps.graph
    assert graph is not None
    match, revoked = graph.match, asyncio.Event()

    async def revoking_after_the_first(*args: Any, **kwargs: Any) -> Any:
        matches = await match(*args, **kwargs)
        if not revoked.is_set():
            revoked.set()
            await _revoke_memo(app)
        return matches

    monkeypatch.setattr(graph, "match", revoking_after_the_first)
    question = QueryOptions(NIMBUS, 1, strategy=Strategy.HYBRID, mode=Mode.GENERATION, identity=CAROL)
    first = await app.pipeline.query(question)
    assert revoked.is_set() and _docs(first) == {"ledger"} and _matched(first) == ["Nimbus Corp"]
    again = await app.pipeline.query(question)
    assert _matched(again) == []


async def test_a_graph_answer_is_kept_when_a_reingest_leaves_the_graph_as_it_was(app: Application) -> None:
    """A document re-ingested with only its title changed bumped the graph's version: every
    answer with a graph trace was computed again, though no entity or relation had changed."""
    other = "OrionSvc depends on VaultKeeper. VaultKeeper stores secrets."
    assert not (await app.ingest([MEMO, LEDGER, _doc("other", other, title="Orion")])).errors
    question = QueryOptions(NIMBUS, 1, strategy=Strategy.HYBRID, identity=CAROL)
    assert _matched(await app.pipeline.query(question)) == ["Nimbus Corp"]
    assert not (await app.ingest([_doc("other", other, title="Orion (renamed)")])).errors
    again = await app.pipeline.query(question)
    assert again.cached and _matched(again) == ["Nimbus Corp"]


async def test_the_same_user_shares_answers_as_user_or_admin_and_not_as_super_admin(app: Application) -> None:
    """Answers are keyed by the access filter: a USER and an ADMIN of one id read the same set."""
    as_root = await _ask(app, BOB_ROOT)
    assert "alice-review" in _docs(as_root)
    as_user = await _ask(app, BOB)
    assert "alice-review" not in _docs(as_user) and "bob-review" in _docs(as_user)
    as_admin = await _ask(app, Identity("bob", Role.ADMIN))
    assert as_admin.cached and _docs(as_admin) == _docs(as_user)
    # And the other way round: an answer computed for bob-as-USER does not serve bob as SUPER_ADMIN.
    again_root = await _ask(app, BOB_ROOT, QUERY.upper())
    assert "alice-review" in _docs(again_root)


async def test_a_revoked_grant_is_not_served_from_the_cache(app: Application) -> None:
    granted = await _ask(app, CAROL)
    assert "bob-review" in _docs(granted)
    assert (await _ask(app, CAROL)).cached
    # bob re-ingests his review without carol's grant.
    revoked = [_doc("bob-review", CORPUS[2].content.decode(), access=Access.PRIVATE, owner_id="bob")]
    assert not (await app.ingest(revoked)).errors
    after = await _ask(app, CAROL)
    assert "bob-review" not in _docs(after)


async def test_an_unchanged_reingest_keeps_the_answers_citing_it_and_an_access_change_drops_them(
    app: Application, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A periodic re-sync sends every file again, nearly all unchanged: nothing is written, so the
    answers citing them stay (with Redis, every replica's); the same text with other access is
    written, and its answers go."""
    invalidated: list[str] = []
    invalidate = app.cache.invalidate_documents  # type: ignore[union-attr]

    async def recorded(document_ids: Any) -> Any:
        invalidated.extend(document_ids)
        return await invalidate(document_ids)

    monkeypatch.setattr(app.cache, "invalidate_documents", recorded)
    assert "policy" in _docs(await _ask(app, ANON)) and (await _ask(app, ANON)).cached
    report = await app.ingest(CORPUS)
    assert not report.errors and all(d.replaced and d.unchanged for d in report.documents)
    assert invalidated == [] and (await _ask(app, ANON)).cached
    private = [_doc("policy", CORPUS[0].content.decode(), access=Access.PRIVATE, owner_id="alice")]
    assert [(d.replaced, d.unchanged) for d in (await app.ingest(private)).documents] == [(True, False)]
    after = await _ask(app, ANON)
    assert invalidated == ["policy"] and not after.cached and "policy" not in _docs(after)


async def test_callers_with_the_same_readable_set_share_answers(app: Application) -> None:
    await _ask(app, ANON, "public salary policy review")
    # dave can read nothing private: his readable set is the public one, so the public answer serves him.
    assert (await _ask(app, DAVE, "public salary policy review")).cached
    # A super admin reads more: the public answer would hide documents from them.
    assert not (await _ask(app, ROOT_NO_ID, "public salary policy review")).cached


async def test_a_cache_hit_reports_the_strategy_that_produced_the_answer(app: Application) -> None:
    first = await app.pipeline.query(QueryOptions(QUERY, 5, strategy=Strategy.KEYWORD))
    hit = await app.pipeline.query(QueryOptions(QUERY, 5, strategy=Strategy.KEYWORD))
    assert hit.cached and hit.metrics.strategy_used is Strategy.KEYWORD is first.metrics.strategy_used


async def test_a_cache_hit_reports_the_pass_that_found_its_contexts(app: Application) -> None:
    """A hit reported the metrics of no pass (sufficiency 0, nothing rewritten, no sub-queries, no
    graph trace) for the contexts a pass had found: a client gating on sufficiency took every hit
    for an insufficient answer. Its iterations stay 0 (no pass ran for it)."""

    class Rewrites(ClassicalAnalyzer):
        async def rewrite(self, query: str) -> str:
            return f"{query} (PayrollDB)"

    assert not (await app.ingest(GRAPH_CORPUS)).errors
    # Never sufficient, so that its one pass is decomposed too.
    deps = app.pipeline.deps
    pipeline = QueryPipeline(dataclasses.replace(deps, analyzer=Rewrites(), settings=dataclasses.replace(
        deps.settings, sufficiency_threshold=1.01, max_iterations=1)))
    question = "Which database does ZebraSvc call? How often is a salary increase reviewed?"

    async def ask(who: Identity, text: str) -> Any:
        return await pipeline.query(QueryOptions(text, 5, strategy=Strategy.HYBRID, identity=who))

    first = await ask(ANON, question)
    m = first.metrics
    assert not first.cached and m.sufficiency_score > 0 and m.graph is not None and m.graph.matches and m.decomposition_used
    assert m.rewritten_query == f"{question} (PayrollDB)" and len(m.sub_queries) == 2 and "rerank:unavailable" in m.degraded
    for hit in (await ask(ANON, question), await ask(DAVE, f"  {question}\n")):
        h = hit.metrics
        assert hit.cached and hit.contexts == first.contexts and h.iterations == 0
        assert (h.sufficiency_score, h.rerank_fallback_triggered, h.decomposition_used, h.rewritten_query, h.sub_queries, h.graph) == (
            m.sufficiency_score, m.rerank_fallback_triggered, m.decomposition_used, m.rewritten_query, m.sub_queries, m.graph)
        assert h.degraded == m.degraded  # each describes the contexts: no reranker, what analysis could not run
    # In other capitals, the same answer, but not the other text's search: the rewrite reads capitals.
    shouted = await ask(DAVE, question.upper())
    h = shouted.metrics
    assert shouted.cached and shouted.contexts == first.contexts
    assert (h.sufficiency_score, h.rerank_fallback_triggered, h.degraded) == (m.sufficiency_score, m.rerank_fallback_triggered, m.degraded)
    assert (h.decomposition_used, h.rewritten_query, h.sub_queries, h.graph) == (False, "", [], None)


# --- a cache that fails ------------------------------------------------------------------------


async def _asked_of_a_server_of_its_own(data_dir: Path, redis_url: str, prefix: str, **settings: Any) -> Any:
    """The answer to ANON's question from a server opened for it alone over the shared Redis under
    ``prefix``, with CORPUS ingested: what a replica or a restart with ``settings`` would serve."""
    application = Application(load_settings(data_dir=data_dir, cache_backend="redis", redis_url=redis_url,
                                            redis_key_prefix=prefix, cache_timeout_s=HEALTHY_REDIS_S, **settings))
    await application.open()
    try:
        assert not (await application.ingest(CORPUS)).errors
        return await _ask(application, ANON)
    finally:
        await application.close()


async def test_a_shared_redis_keeps_answers_apart_by_the_settings_that_shape_them(tmp_path: Path, redis_url: str) -> None:
    """Redis outlives a restart and is shared by replicas: a server with other fusion parameters is
    not served the answers of the first, while one that differs only in how it runs (its port) is."""
    prefix = f"t{os.urandom(4).hex()}"

    async def ask_once(data: str, **settings: Any) -> Any:
        return await _asked_of_a_server_of_its_own(tmp_path / data, redis_url, prefix, **settings)

    first = await ask_once("a")
    assert not first.cached and "policy" in _docs(first)
    assert not (await ask_once("b", rrf_k=61)).cached, "an answer computed under another RRF k was served"
    assert (await ask_once("c", port=50999)).cached


async def test_a_shared_redis_keeps_answers_apart_by_the_minilm_build_in_use(tmp_path: Path, redis_url: str) -> None:
    """The key prefix was made before open() chose the build (the model id still ''): int8 and fp32
    indexes shared one namespace. Each found the other's answer, cited at another document version
    (the version names the model), dropped it as stale, and a Redis shared by both kept neither."""
    require_fp32_package()
    prefix = f"t{os.urandom(4).hex()}"
    runs = iter(range(100))

    async def cached(model: str) -> bool:
        answer = await _asked_of_a_server_of_its_own(tmp_path / f"data{next(runs)}", redis_url, prefix, model=model,
                                                     model_cache_dir=tmp_path / "models")
        return bool(answer.cached)

    assert not await cached("int8")
    assert not await cached("fp32"), "an answer computed with the int8 build was served to an fp32 index"
    assert await cached("int8"), "the fp32 index dropped the int8 index's answer"


async def test_a_shared_redis_keeps_answers_apart_by_the_reranker_and_the_glossary_in_use(tmp_path: Path, redis_url: str) -> None:
    """Files shape answers as settings do: a local reranker (whether there is one, and which) and
    the glossary (its content, wherever it is). An answer computed without a reranker was served
    as if reranked, and one computed with another glossary's rewrite as if with this one's."""
    prefix = f"t{os.urandom(4).hex()}"
    shape = BertShape(hidden=32, layers=2, heads=2, intermediate=64)
    for name, seed in (("r1", 3), ("r2", 4)):
        (tmp_path / name).mkdir()
        build_cross_encoder(tmp_path / name / "model.onnx", shape, seed=seed, init_std=0.3)
    (tmp_path / "r1-copy").mkdir()
    shutil.copy(tmp_path / "r1" / "model.onnx", tmp_path / "r1-copy" / "model.onnx")
    for name, text in (("g1", "ZU = zebra umbrella\n"), ("g2", "ZU = zulu uniform\n"), ("g1-copy", "ZU = zebra umbrella\n")):
        (tmp_path / f"{name}.txt").write_text(text)
    runs = iter(range(100))

    async def cached(**settings: Any) -> bool:
        return bool((await _asked_of_a_server_of_its_own(tmp_path / f"data{next(runs)}", redis_url, prefix, **settings)).cached)

    assert not await cached()
    assert not await cached(reranker_model_dir=tmp_path / "r1"), "an answer computed without a reranker was served"
    assert not await cached(reranker_model_dir=tmp_path / "r2"), "another reranker's answer was served"
    assert await cached(reranker_model_dir=tmp_path / "r1-copy")
    assert not await cached(glossary_path=tmp_path / "g1.txt")
    assert not await cached(glossary_path=tmp_path / "g2.txt"), "another glossary's answer was served"
    assert await cached(glossary_path=tmp_path / "g1-copy.txt")


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A redis-server this test may stop, freeze and kill."""
    with redis_server(tmp_path / "own-redis", keep_process=True) as (url, proc):
        yield url, proc


async def _redis_app(tmp_path: Path, url: str) -> Application:
    application = Application(load_settings(data_dir=tmp_path / "data", cache_backend="redis", redis_url=url,
                                            cache_timeout_s=HEALTHY_REDIS_S, breaker_cooldown_s=3600))
    await application.open()
    assert not (await application.ingest(CORPUS)).errors
    return application


async def test_redis_killed_degrades_and_deletes_still_apply(tmp_path: Path, own_redis: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = own_redis
    application = await _redis_app(tmp_path, url)
    try:
        assert "policy" in _docs(await _ask(application, ANON))
        assert (await _ask(application, ANON)).cached
        proc.kill()
        proc.wait()
        r = await _ask(application, ANON)
        assert "cache:unavailable" in r.metrics.degraded and not r.cached and "policy" in _docs(r)
        # A delete while Redis is unreachable commits and does not fail...
        deleted, _ = await application.delete(["policy"])
        assert deleted == ["policy"]
        # ...and after its third failure (two lookups and the invalidation: a request whose lookup
        # failed stores nothing) the breaker stops paying the timeout on every call.
        assert application.cache is not None and not application.cache.breaker.is_open
        await _ask(application, ANON)
        assert application.cache.breaker.is_open
        # Health: a configured optional component that fails degrades the service, it does not stop it.
        report = await application.health()
        assert report.serving and report.degraded
        assert {c.name: c.state.value for c in report.components}["cache"] == "failing"
    finally:
        await application.close()


async def test_redis_frozen_is_skipped_after_a_short_timeout(tmp_path: Path, own_redis: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = own_redis
    application = await _redis_app(tmp_path, url)
    try:
        await _ask(application, ANON)
        proc.send_signal(signal.SIGSTOP)
        try:
            r = await _ask(application, ANON)
            assert "cache:unavailable" in r.metrics.degraded and "policy" in _docs(r)
            # One request waits on the frozen cache once: its answer is not stored after the lookup failed.
            assert application.cache is not None and application.cache.breaker.failures == 1
        finally:
            proc.send_signal(signal.SIGCONT)
    finally:
        await application.close()


@pytest.mark.slow
async def test_a_frozen_redis_opens_the_breaker_and_a_trial_after_the_cooldown_closes_it(
    tmp_path: Path, own_redis: tuple[str, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the default BREAKER_FAILURES and BREAKER_COOLDOWN_S (tests/faults runs without a cool-down,
    so it never sees these states): a frozen Redis costs BREAKER_FAILURES requests the timeout; open,
    the breaker answers at once without asking Redis; after the cool-down one trial asks it, and
    fails while Redis is frozen (open again, for another cool-down); once Redis is thawed, the
    trial after the next cool-down closes it and the cache serves again. The cool-down runs on a
    clock the test moves."""
    url, proc = own_redis
    application = Application(load_settings(data_dir=tmp_path / "data", cache_backend="redis", redis_url=url,
                                            cache_timeout_s=HEALTHY_REDIS_S))
    await application.open()
    try:
        assert not (await application.ingest(CORPUS)).errors
        settings, cache, clock = application.settings, application.cache, Clock()
        assert isinstance(cache, GuardedCache) and (settings.breaker_failures, settings.breaker_cooldown_s) == (3, 5.0)
        monkeypatch.setattr(cache.breaker, "clock", clock)
        lookup, asked = cache.inner.lookup, [0]  # lookups that reached Redis

        async def counted(*args: Any) -> Any:
            asked[0] += 1
            return await lookup(*args)

        monkeypatch.setattr(cache.inner, "lookup", counted)
        assert not (await _ask(application, ANON)).cached  # stored, served again below once the breaker closes
        healthy = asked[0]

        def skipped(result: Any) -> bool:
            return "cache:unavailable" in result.metrics.degraded and "policy" in _docs(result)

        proc.send_signal(signal.SIGSTOP)
        try:
            for failures in range(1, settings.breaker_failures + 1):
                assert not cache.breaker.is_open
                assert skipped(await _ask(application, ANON)) and cache.breaker.failures == failures
            assert cache.breaker.is_open and asked[0] == healthy + settings.breaker_failures
            # Open: refused at once, Redis not asked, until the cool-down has passed.
            clock.now += settings.breaker_cooldown_s / 2
            assert skipped(await _ask(application, ANON)) and asked[0] == healthy + settings.breaker_failures
            # Half-open: one trial asks Redis, still frozen, and opens the breaker for another cool-down.
            clock.now += settings.breaker_cooldown_s / 2
            tried = healthy + settings.breaker_failures + 1
            assert skipped(await _ask(application, ANON)) and asked[0] == tried and cache.breaker.is_open
            assert skipped(await _ask(application, ANON)) and asked[0] == tried
        finally:
            proc.send_signal(signal.SIGCONT)
        # Thawed, but within the cool-down the breaker does not ask it.
        assert skipped(await _ask(application, ANON)) and asked[0] == tried
        clock.now += settings.breaker_cooldown_s
        trial = await _ask(application, ANON)
        assert trial.cached and "cache:unavailable" not in trial.metrics.degraded and asked[0] > tried
        assert not cache.breaker.is_open and cache.breaker.failures == 0
        tried = asked[0]
        assert (await _ask(application, ANON)).cached and asked[0] > tried
    finally:
        await application.close()


@pytest.mark.parametrize("inline_rows", [INLINE_SCAN_ROWS, 0], ids=["inline", "own-thread"])
async def test_redis_similarity_lookups_do_not_wait_for_the_model_threads(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch, inline_rows: int,
) -> None:
    """The cosine scan ran on the executor the embedder and reranker share: under load it queued
    behind their jobs past the cache's timeout, and the breaker opened on a healthy Redis, refusing
    exact repeats too. Small mirrors are scanned inline, large ones on the cache's own thread."""
    monkeypatch.setattr(redis_cache, "INLINE_SCAN_ROWS", inline_rows)
    application = Application(load_settings(data_dir=tmp_path, cache_backend="redis", redis_url=redis_url,
                                            redis_key_prefix=f"t{os.urandom(4).hex()}", cache_timeout_s=HEALTHY_REDIS_S))
    await application.open()
    loop, release, started = asyncio.get_running_loop(), threading.Event(), asyncio.Queue[None]()

    def model_job() -> None:
        loop.call_soon_threadsafe(started.put_nowait, None)
        release.wait()

    jobs: list[asyncio.Future[None]] = []
    try:
        cache = application.cache
        assert isinstance(cache, GuardedCache)
        vector = np.random.default_rng(3).standard_normal(application.embedder.dim).astype(np.float32)
        context = RetrievedContext(ParentChunk("policy#p0", "policy", 0, "text", 0), Document("policy"), 1.0, ())
        await cache.store("what is rrf", vector, "cfg", "public", CachedAnswer((context,), Strategy.SEMANTIC))
        # Every model thread busy, and more work queued behind them.
        jobs = [asyncio.ensure_future(application.executor.run(model_job)) for _ in range(application.executor.workers + 2)]
        for _ in range(application.executor.workers):
            await started.get()
        hit = await cache.lookup("explain rrf", vector + 0.01, "cfg", "public")
        assert hit is not None and hit.similarity < 1.0
        assert cache.breaker.failures == 0 and not cache.breaker.is_open
    finally:
        release.set()
        await asyncio.gather(*jobs)
        await application.close()


async def test_the_cache_timeout_is_what_bounds_a_call_to_a_frozen_redis(tmp_path: Path, own_redis: tuple[str, subprocess.Popen[bytes]]) -> None:
    """The Reliability table's CACHE_TIMEOUT_S (0.25 s) bounds a call to a frozen Redis. Timing
    the call would be a wall-clock test; instead: the setting's default is the documented one, it
    reaches both bounds (the Redis client's socket timeouts and the guard's wait), and against a
    frozen Redis the client's own timeout ends the call, which the guard turns into
    CacheUnavailable (``cache:unavailable``). A setting dropped on its way (the client left with
    its own default or none: a frozen call then hangs until the guard below gives up) fails here,
    where the other Redis tests, at HEALTHY_REDIS_S, would pass."""
    assert load_settings().cache_timeout_s == 0.25
    url, proc = own_redis
    # Not the default of any layer: a layer that ignored the setting would show another value.
    settings = load_settings(data_dir=tmp_path / "data", cache_backend="redis", redis_url=url, cache_timeout_s=0.5)
    application = Application(settings)
    await application.open()
    try:
        guarded = application.cache
        assert isinstance(guarded, GuardedCache) and isinstance(guarded.inner, RedisCache)
        assert guarded._timeout == settings.cache_timeout_s
        client = guarded.inner._redis.connection_pool.connection_kwargs
        assert client["socket_timeout"] == client["socket_connect_timeout"] == settings.cache_timeout_s
        proc.send_signal(signal.SIGSTOP)  # before any call: the connection is made, nothing answers it
        try:
            # Redis's TimeoutError, not asyncio's from the hang guard (which only stops a hung test).
            with pytest.raises(redis.exceptions.TimeoutError):
                await asyncio.wait_for(guarded.inner.lookup("q", None, "c", "public"), 600)
            with pytest.raises(CacheUnavailable, match="TimeoutError"):
                await guarded.lookup("q", None, "c", "public")
            assert guarded.breaker.failures == 1
        finally:
            proc.send_signal(signal.SIGCONT)
    finally:
        await application.close()


async def test_a_document_deleted_while_redis_was_down_is_never_served(tmp_path: Path, own_redis: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = own_redis
    application = await _redis_app(tmp_path, url)
    try:
        assert "policy" in _docs(await _ask(application, ANON))
        proc.send_signal(signal.SIGSTOP)  # the invalidation cannot reach Redis
        try:
            await application.delete(["policy"])
            await application.ingest([_doc("alice-review", "Alice moved to another team.", access=Access.PRIVATE, owner_id="alice")])
        finally:
            proc.send_signal(signal.SIGCONT)
        application.cache.breaker.reset()  # type: ignore[union-attr]
        after = await _ask(application, ANON)
        assert "policy" not in _docs(after), "a deleted document was served from the cache"
    finally:
        await application.close()


async def test_redis_absent_at_startup_degrades_and_recovers_by_itself(tmp_path: Path) -> None:
    from bench.server_process import free_port

    port = free_port()
    application = Application(load_settings(data_dir=tmp_path / "data", cache_backend="redis", redis_url=f"redis://127.0.0.1:{port}/0",
                                            cache_timeout_s=HEALTHY_REDIS_S, breaker_cooldown_s=0.0))
    await application.open()
    try:
        assert not (await application.ingest(CORPUS)).errors
        r = await _ask(application, ANON)
        assert "cache:unavailable" in r.metrics.degraded and "policy" in _docs(r)
        with redis_server(tmp_path / "late-redis", port=port):
            await _ask(application, ANON)  # the breaker half-opens (cool-down 0) and the store succeeds
            again = await _ask(application, ANON)
            assert again.cached and "cache:unavailable" not in again.metrics.degraded
    finally:
        await application.close()


def test_cache_keys_cost_the_same_whatever_the_filter_and_the_query_hold() -> None:
    """A filter of 1,000 ids of 200 characters made a 200 KB configuration, carried by every
    entry and Redis key, and a 64 KiB query a 64 KiB exact key: 1,000 such queries held 194 MiB."""
    from retrieval_server.backends.cache import query_key
    from retrieval_server.workflow.nodes import cache_config

    ids = tuple(f"{i:03d}" + "d" * 197 for i in range(1_000))
    wide = cache_config(QueryOptions(QUERY, 5, document_ids=ids))
    assert len(wide) < 100 and wide == cache_config(QueryOptions(QUERY, 5, document_ids=tuple(reversed(ids))))
    assert wide != cache_config(QueryOptions(QUERY, 5, document_ids=ids[:-1]))
    assert cache_config(QueryOptions(QUERY, 5, document_ids=("x", "y"))) != cache_config(QueryOptions(QUERY, 5, document_ids=("x,y",)))
    long_query = "salary " * 9_000
    assert len(query_key(long_query)) == len(query_key("q")) == 32
    assert query_key(f"  {long_query.upper()} ") == query_key(long_query) != query_key(long_query + "x")


async def test_a_document_filter_is_keyed_whatever_its_ids_hold(app: Application) -> None:
    """A document id may hold a comma: the filter ["x,y"] is not the filter ["x", "y"], and an
    answer cached for one must not answer the other with documents outside its filter."""
    docs = [_doc(d, f"Document {d} on the salary review (zebra umbrella).") for d in ("x", "y", "x,y")]
    assert not (await app.ingest(docs)).errors
    two = await app.pipeline.query(QueryOptions(QUERY, 5, strategy=Strategy.HYBRID, document_ids=("x", "y")))
    assert _docs(two) == {"x", "y"}
    one = await app.pipeline.query(QueryOptions(QUERY, 5, strategy=Strategy.HYBRID, document_ids=("x,y",)))
    assert _docs(one) == {"x,y"}, "an answer for another document filter was served from the cache"
