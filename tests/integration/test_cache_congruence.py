"""One behavioural suite for every SemanticCache: in-process, and Redis (a real redis-server)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import time
from typing import Any
import threading
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

from retrieval_server.backends import cache as cache_module
from retrieval_server.backends import redis_cache
from retrieval_server.backends.cache import CachePolicy, MemoryCache, SemanticCache, answer_chars
from retrieval_server.backends.redis_cache import SYNC_SKEW_S, RedisCache
from retrieval_server.backends.cache import CachedAnswer, PassReport
from retrieval_server.domain import Access, AccessFilter, ChildEvidence, Document, Identity, ParentChunk, RetrievedContext, Role, Strategy
from retrieval_server.knowledge import EntityMatch, EntityType, GraphHop, GraphTrace, MatchKind
from tests.support.redis_server import redis_server

DIM = 8
PUBLIC, ALICE, BOB = "public", AccessFilter(readers=("alice",)).partition, AccessFilter(readers=("bob",)).partition
ROOT = AccessFilter.for_identity(Identity("alice", Role.SUPER_ADMIN)).partition


_counter = iter(range(10**6))


def make(kind: str, request: pytest.FixtureRequest, ttl_s: float = 60.0, prefix: str | None = None) -> SemanticCache:
    if kind == "memory":
        return MemoryCache(DIM, CachePolicy(ttl_s=ttl_s))
    # A fresh key prefix per test keeps tests apart on one server. The service's fail-fast timeout
    # (a quarter second) is not under test here: on a busy machine a healthy server can miss it.
    return RedisCache(request.getfixturevalue("redis_url"), DIM, CachePolicy(ttl_s=ttl_s),
                      prefix=prefix or f"t{next(_counter)}", timeout_s=30.0)


@pytest_asyncio.fixture(params=["memory", "redis"])
async def cache(request: pytest.FixtureRequest) -> AsyncIterator[SemanticCache]:
    c = make(request.param, request)
    yield c
    await c.close()


def _vec(*head: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(head)] = head
    return v / np.linalg.norm(v)


def _answer(*contexts: RetrievedContext) -> CachedAnswer:
    return CachedAnswer(tuple(contexts), Strategy.HYBRID)


def _ctx(doc_id: str, access: Access = Access.PUBLIC, owner: str = "") -> RetrievedContext:
    doc = Document(doc_id, title=f"T {doc_id}", access=access, owner_id=owner, metadata={"k": "v"}, granted_user_ids=("zed",))
    parent = ParentChunk(f"{doc_id}#p0", doc_id, 0, f"content of {doc_id} — ünïcode", 12, page=3)
    return RetrievedContext(parent, doc, 0.75, (ChildEvidence(f"{doc_id}#p0c0", "child text", 0.75),))


async def test_exact_and_similar_lookups(cache: SemanticCache) -> None:
    assert await cache.lookup("what is rrf", _vec(1), "cfg", PUBLIC) is None
    await cache.store("What is RRF", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
    exact = await cache.lookup("  what IS rrf ", None, "cfg", PUBLIC)
    assert exact is not None and exact.similarity == 1.0 and exact.contexts == (_ctx("d1"),) and exact.strategy is Strategy.HYBRID
    similar = await cache.lookup("explain rrf", _vec(1, 0.1), "cfg", PUBLIC)
    assert similar is not None and similar.similarity >= 0.95 and similar.contexts[0].document.document_id == "d1"
    assert await cache.lookup("describe rrf", _vec(1, 1), "cfg", PUBLIC) is None  # cosine 0.71
    assert await cache.lookup("What is RRF", _vec(1), "other-config", PUBLIC) is None


async def test_an_exact_match_sets_case_aside_not_letters(cache: SemanticCache) -> None:
    await cache.store("Straße in Zürich", None, "cfg", PUBLIC, _answer(_ctx("d1")))
    assert await cache.lookup("STRAßE  in zürich", None, "cfg", PUBLIC) is not None
    assert await cache.lookup("strasse in zürich", None, "cfg", PUBLIC) is None


async def test_a_query_answered_by_similarity_is_then_found_by_its_text(cache: SemanticCache) -> None:
    """Its repeats need no embedding: a lookup without a vector finds the entry that answered it,
    with the similarity it was answered at, until that entry is invalidated."""
    await cache.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
    await cache.store("bm25 weights", _vec(0, 1), "cfg", PUBLIC, _answer(_ctx("d2")))
    assert await cache.lookup("explain rrf", None, "cfg", PUBLIC) is None  # not seen yet
    similar = await cache.lookup("explain rrf", _vec(1, 0.1), "cfg", PUBLIC)
    assert similar is not None and 0.95 <= similar.similarity < 1.0
    again = await cache.lookup("  Explain RRF", None, "cfg", PUBLIC)
    assert again is not None and again.contexts == (_ctx("d1"),) and again.similarity == pytest.approx(similar.similarity)
    # Only where it was answered: not in another configuration or partition.
    assert await cache.lookup("explain rrf", None, "other-config", PUBLIC) is None
    assert await cache.lookup("explain rrf", None, "cfg", ALICE) is None
    # Its own answer, once stored, replaces the alias.
    await cache.store("explain rrf", _vec(1, 0.1), "cfg", PUBLIC, _answer(_ctx("d3")))
    own = await cache.lookup("explain rrf", None, "cfg", PUBLIC)
    assert own is not None and own.similarity == 1.0 and own.contexts == (_ctx("d3"),)
    # An alias goes with the entry it points at.
    assert await cache.lookup("weights of bm25", _vec(0, 1, 0.1), "cfg", PUBLIC) is not None
    assert await cache.invalidate_documents(["d2"]) == 1
    assert await cache.lookup("weights of bm25", None, "cfg", PUBLIC) is None
    assert await cache.lookup("weights of bm25", _vec(0, 1, 0.1), "cfg", PUBLIC) is None
    assert await cache.lookup("what is rrf", None, "cfg", PUBLIC) is not None


REPORT = PassReport(
    0.72, True, True, "what is rrf (fusion)", ("what is rrf", "what is fusion"),
    GraphTrace((EntityMatch("rrf", "RRF", EntityType.CONCEPT, "rrf", MatchKind.CASE_FOLDED, 1.0),),
               (GraphHop(0, 1.0, ("RRF",), 3), GraphHop(1, 0.77, ("BM25", "HNSW"), 2)), "v7"),
    ("rerank:unavailable", "analysis:hyde:skipped: needs an LLM"),
)


async def test_an_answer_keeps_the_report_of_the_pass_that_found_it(cache: SemanticCache) -> None:
    """What the response said of that pass, which each hit reports again: the answer held its
    contexts and strategy only, and every hit reported the metrics of no pass."""
    await cache.store("what is rrf", _vec(1), "cfg", PUBLIC, dataclasses.replace(_answer(_ctx("d1")), report=REPORT))
    exact = await cache.lookup("What is RRF", None, "cfg", PUBLIC)
    similar = await cache.lookup("explain rrf", _vec(1, 0.1), "cfg", PUBLIC)
    again = await cache.lookup("explain rrf", None, "cfg", PUBLIC)
    assert exact is not None and similar is not None and again is not None
    assert exact.report == similar.report == again.report == REPORT


async def test_redis_an_entry_of_the_previous_format_is_not_served(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis keeps its entries across an upgrade, and servers of the previous release keep writing
    them through a rolling one. Format 3 stored no graph version for a trace with matches and no
    relation followed, and such an entry was served without a check of the graph."""
    prefix = f"t{next(_counter)}"
    with monkeypatch.context() as m:
        m.setattr(redis_cache, "ENTRY_FORMAT", 3)
        previous = make("redis", request, prefix=prefix)
    current = make("redis", request, prefix=prefix)
    try:
        await previous.store("what is rrf", _vec(1), "cfg", PUBLIC, dataclasses.replace(_answer(_ctx("d1")), report=REPORT))
        assert await previous.lookup("what is rrf", None, "cfg", PUBLIC) is not None
        assert await current.lookup("what is rrf", None, "cfg", PUBLIC) is None
        assert await current.lookup("explain rrf", _vec(1, 0.1), "cfg", PUBLIC) is None
    finally:
        await previous.close()
        await current.close()


async def test_memory_aliases_are_bounded_and_expire_with_their_entry() -> None:
    now = [1000.0]
    c = MemoryCache(DIM, CachePolicy(ttl_s=10.0, max_entries=2), clock=lambda: now[0])
    await c.store("q", _vec(1), "cfg", PUBLIC, _answer(_ctx("a")))
    for i in range(4):
        assert await c.lookup(f"paraphrase {i}", _vec(1, 0.01 * (i + 1)), "cfg", PUBLIC) is not None
    # At most max_entries aliases are kept: the first two paraphrases are found by their text, the others are not.
    found = [await c.lookup(f"paraphrase {i}", None, "cfg", PUBLIC) is not None for i in range(4)]
    assert found == [True, True, False, False]
    now[0] += 10.01
    assert await c.lookup("paraphrase 0", None, "cfg", PUBLIC) is None
    assert await c.lookup("q", None, "cfg", PUBLIC) is None


async def test_memory_holds_at_most_its_characters_the_oldest_dropped_first() -> None:
    """Counted by entries alone, 100,000 top-100 answers over documents at their metadata limits
    could hold more memory than the machine has."""
    one = answer_chars(_answer(_ctx("d0")).contexts) + len("q0")  # the query it answers is kept with it
    c = MemoryCache(DIM, CachePolicy(ttl_s=60.0, max_chars=3 * one))
    for i in range(5):
        await c.store(f"q{i}", _vec(1, i), "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
    assert [await c.lookup(f"q{i}", None, "cfg", PUBLIC) is not None for i in range(5)] == [False, False, True, True, True]
    # An answer larger than the whole budget is not kept (it would push out every other, then itself),
    # and the one it would have replaced is gone: it is no answer to that question any more.
    await c.store("q4", _vec(1, 4), "cfg", PUBLIC, _answer(*(_ctx(f"big{i}") for i in range(4))))
    assert await c.lookup("q4", None, "cfg", PUBLIC) is None and await c.lookup("q3", None, "cfg", PUBLIC) is not None
    big = _ctx("big")
    bigger = RetrievedContext(big.parent, Document("big", metadata={"note": "x" * 10_000}), 0.5, big.children)
    assert answer_chars((bigger,)) - answer_chars((big,)) >= 10_000 - len(big.document.title) - len("zedkv")


async def test_partitions_by_caller_visibility(cache: SemanticCache) -> None:
    await cache.store("budget", _vec(0, 1), "cfg", ALICE, _answer(_ctx("secret", Access.PRIVATE, "alice")))
    await cache.store("menu", _vec(0, 0, 1), "cfg", PUBLIC, _answer(_ctx("menu")))
    hit = await cache.lookup("budget", _vec(0, 1), "cfg", ALICE)
    assert hit is not None and hit.strategy is Strategy.HYBRID
    for other in (BOB, PUBLIC, ROOT):
        assert await cache.lookup("budget", _vec(0, 1), "cfg", other) is None, other
        assert await cache.lookup("budget", None, "cfg", other) is None, other
    # A public answer serves the public partition only: not a reader with private access, not a super admin.
    assert await cache.lookup("menu", _vec(0, 0, 1), "cfg", PUBLIC) is not None
    for other in (ALICE, ROOT):
        assert await cache.lookup("menu", _vec(0, 0, 1), "cfg", other) is None


async def test_invalidation_by_document(cache: SemanticCache) -> None:
    await cache.store("q1", _vec(1), "cfg", PUBLIC, _answer(_ctx("a"), _ctx("b")))
    await cache.store("q2", _vec(0, 1), "cfg", PUBLIC, _answer(_ctx("c")))
    assert await cache.invalidate_documents(["b", "nope"]) == 1
    assert await cache.lookup("q1", _vec(1), "cfg", PUBLIC) is None
    assert await cache.lookup("q2", _vec(0, 1), "cfg", PUBLIC) is not None


async def test_redis_an_invalidation_reads_no_entry(request: pytest.FixtureRequest) -> None:
    """The entries citing a popular document, read whole to find their keys, took longer than the
    cache's timeout: nothing was removed, and every stale hit's retry counted against the breaker."""
    import redis.asyncio as aioredis

    c = make("redis", request)
    server = aioredis.Redis.from_url(request.getfixturevalue("redis_url"))
    try:
        page = "a long cited passage " * 500  # 10 KB a context
        for i in range(40):
            ctx = _ctx("popular")
            await c.store(f"question {i}", _vec(1, i / 40), f"cfg{i % 3}", PUBLIC if i % 2 else ALICE,
                          _answer(RetrievedContext(dataclasses.replace(ctx.parent, content=page), ctx.document, 0.5, ctx.children), _ctx(f"other{i}")))
        before = (await server.info("stats"))["total_net_output_bytes"]
        assert await c.invalidate_documents(["popular"]) == 40
        sent = (await server.info("stats"))["total_net_output_bytes"] - before
        assert sent < 40 * len(page) / 10, sent
        # Gone by their text and by their vector.
        assert all([await c.lookup(f"question {i}", None, f"cfg{i % 3}", PUBLIC if i % 2 else ALICE) is None for i in range(40)])
        assert await c.lookup("question", _vec(1, 0.5), "cfg0", ALICE) is None
    finally:
        await server.aclose()
        await c.close()


async def test_redis_a_documents_set_holds_the_entries_not_expired(request: pytest.FixtureRequest) -> None:
    """Every store citing a document added to its set, and renewed its TTL: the set of a document
    cited every few seconds grew for as long as it was (280,000 members), past what an invalidation
    could remove within the cache's timeout."""
    clock = _Clock(time.time())
    c = _process(request, f"t{next(_counter)}", clock, ttl_s=10.0)
    try:
        for i in range(100):
            await c.store(f"question {i}", _vec(1, i), "cfg", PUBLIC, _answer(_ctx("popular"), _ctx(f"d{i}")))
            clock.now += 1.0  # a store a second, each expiring 10 s later (scores are on this clock)
        live = await c._redis.zcount(c._k("s", "cfg", 0), clock.now, "+inf")
        assert live == 10 and await c._redis.zcard(c._k("d", "popular")) <= live + 1
    finally:
        await c.close()


async def test_redis_an_invalidation_removes_a_large_set_a_page_at_a_time(request: pytest.FixtureRequest) -> None:
    """The entries citing a document were removed in one transaction: a set larger than the
    cache's timeout allowed was never removed, each retry (every stale hit's) failed whole and
    counted against the breaker, and three opened it for every partition. Each page removed stays
    removed, so a call cut by the timeout leaves less for the next."""
    import redis.asyncio as aioredis

    from retrieval_server.backends.cache import GuardedCache
    from retrieval_server.backends.circuit_breaker import CircuitBreaker

    c = make("redis", request, ttl_s=600.0)
    assert isinstance(c, RedisCache)
    server = aioredis.Redis.from_url(request.getfixturevalue("redis_url"))
    doc_key, now = c._k("d", "popular"), time.time()
    try:
        for i in range(3):
            await c.store(f"question {i}", _vec(1, i), "cfg", PUBLIC, _answer(_ctx("popular")))
        # Entries that Redis has already removed, expiring before the three real ones; and expired ones.
        for start in range(0, 50_000, 10_000):
            await server.zadd(doc_key, {f'["{start + i:032x}", "cfg", 0, "{i:032x}"]': now + 300 for i in range(10_000)})
        await server.zadd(doc_key, {f'["{i:032x}", "cfg", 0, "gone"]': now - 300 for i in range(10_000)})
        live = 50_000 + 3
        pipeline, progress, never = c._redis.pipeline, asyncio.Event(), asyncio.Event()

        def cut_after_progress(*args: Any, **kwargs: Any) -> Any:
            pipe = pipeline(*args, **kwargs)
            execute = pipe.execute

            async def held(*a: Any, **k: Any) -> Any:
                if progress.is_set():
                    await never.wait()  # the call's timeout strikes here
                result = await execute(*a, **k)
                if await server.zcount(doc_key, now, "+inf") < live:
                    progress.set()
                return result

            pipe.execute = held
            return pipe

        c._redis.pipeline = cut_after_progress  # type: ignore[method-assign]
        cut, progressed = asyncio.ensure_future(c.invalidate_documents(["popular"])), asyncio.ensure_future(progress.wait())
        await asyncio.wait([cut, progressed], return_when=asyncio.FIRST_COMPLETED)
        for task in (cut, progressed):
            task.cancel()
        await asyncio.gather(cut, progressed, return_exceptions=True)
        c._redis.pipeline = pipeline  # type: ignore[method-assign]
        assert 0 < await server.zcard(doc_key) < live  # what the cut call removed stayed removed
        assert await server.zcount(doc_key, "-inf", now) == 0  # the expired went unread
        guarded = GuardedCache(c, CircuitBreaker(3, 5.0), 30.0)
        assert await guarded.invalidate_documents(["popular"]) == 3
        assert not guarded.breaker.failures and not await server.exists(doc_key)
        assert all([await c.lookup(f"question {i}", None, "cfg", PUBLIC) is None for i in range(3)])
    finally:
        await server.aclose()
        await c.close()


async def test_redis_an_invalidation_of_many_documents_reads_their_sets_together(request: pytest.FixtureRequest) -> None:
    """A delete of 1,000 documents made a round trip for each: it always outlasted the cache's
    timeout, the documents past the cut kept their entries, and every such delete counted against
    the breaker."""
    c = make("redis", request, ttl_s=600.0)
    assert isinstance(c, RedisCache)
    ids = [f"doc-{i}" for i in range(1000)]
    try:
        for i, docs in enumerate([("doc-0",), ("doc-1", "doc-2"), ("doc-500",), ("doc-999",), ("kept",)]):
            await c.store(f"question {i}", _vec(1, i), "cfg", PUBLIC, _answer(*(_ctx(d) for d in docs)))
        pipeline, executed = c._redis.pipeline, []

        def counted(*args: Any, **kwargs: Any) -> Any:
            pipe = pipeline(*args, **kwargs)
            execute = pipe.execute

            async def once(*a: Any, **k: Any) -> Any:
                executed.append(len(pipe.command_stack))
                return await execute(*a, **k)

            pipe.execute = once
            return pipe

        c._redis.pipeline = counted  # type: ignore[method-assign]
        assert await c.invalidate_documents(ids) == 4  # the one citing two of them counted once
        c._redis.pipeline = pipeline  # type: ignore[method-assign]
        assert len(executed) <= 4, executed  # the sets read 500 at a time, each batch's entries removed at once
        assert [await c.lookup(f"question {i}", None, "cfg", PUBLIC) is not None for i in range(5)] == [False] * 4 + [True]
        assert await c.lookup("question", _vec(1, 0), "cfg", PUBLIC) is None  # gone from the mirror's partition too
        assert not await c._redis.exists(*(c._k("d", d) for d in ("doc-0", "doc-1", "doc-2", "doc-500", "doc-999")))
    finally:
        await c.close()


async def test_redis_a_documents_set_of_the_previous_format_is_left_to_its_servers(request: pytest.FixtureRequest) -> None:
    """Format 2 kept a document's entries in a plain set: servers of both formats sharing one key
    in a rolling upgrade would each fail on the other's type (WRONGTYPE), and their stores and
    invalidations would open their breakers. Keys carry the format, so each keeps to its own."""
    import redis.asyncio as aioredis

    prefix = f"t{next(_counter)}"
    c = make("redis", request, prefix=prefix)
    assert isinstance(c, RedisCache)
    server = aioredis.Redis.from_url(request.getfixturevalue("redis_url"))
    previous = f"{prefix}:f2:d:d1"
    try:
        await server.sadd(previous, '["0123", "cfg", 0, "abcd"]')
        await c.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
        assert await c.lookup("explain rrf", _vec(1, 0.05), "cfg", PUBLIC) is not None
        assert await c.invalidate_documents(["d1"]) == 1
        assert await c.lookup("what is rrf", None, "cfg", PUBLIC) is None
        assert await server.type(previous) == b"set" and await server.scard(previous) == 1
    finally:
        await server.aclose()
        await c.close()


async def test_redis_full_serves_what_it_holds(tmp_path: Path) -> None:
    """Under maxmemory with noeviction Redis refuses writes and serves reads. The alias written
    with a similarity hit failed that hit's round trip: the answer was thrown away and the failure
    counted against the breaker, as a store's did, until the breaker refused the reads too."""
    from retrieval_server.backends.cache import GuardedCache
    from retrieval_server.backends.circuit_breaker import CircuitBreaker

    with redis_server(tmp_path / "full") as url:
        c = RedisCache(url, DIM, CachePolicy(ttl_s=600.0), timeout_s=30.0)
        guarded = GuardedCache(c, CircuitBreaker(1, 3600.0), 30.0)
        try:
            await guarded.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
            await c._redis.config_set("maxmemory-policy", "noeviction")
            await c._redis.config_set("maxmemory", "1")  # every write refused
            similar = await guarded.lookup("explain rrf", _vec(1, 0.1), "cfg", PUBLIC)
            assert similar is not None and 0.95 <= similar.similarity < 1.0
            await guarded.store("bm25 weights", _vec(0, 1), "cfg", PUBLIC, _answer(_ctx("d2")))
            assert not guarded.breaker.failures and not guarded.breaker.is_open
            assert await guarded.lookup("what is rrf", None, "cfg", PUBLIC) is not None
            await c._redis.config_set("maxmemory", "0")
            assert await c.lookup("bm25 weights", None, "cfg", PUBLIC) is None  # not stored
            assert await c.lookup("explain rrf", None, "cfg", PUBLIC) is None  # its alias was not written
        finally:
            await c.close()


async def test_memory_entries_expire() -> None:
    now = [1000.0]
    c = MemoryCache(DIM, CachePolicy(ttl_s=1.0), clock=lambda: now[0])
    await c.store("q", _vec(1), "cfg", PUBLIC, _answer(_ctx("a")))
    assert await c.lookup("q", _vec(1), "cfg", PUBLIC) is not None
    now[0] += 1.01
    assert await c.lookup("q", None, "cfg", PUBLIC) is None
    assert await c.lookup("other words", _vec(1), "cfg", PUBLIC) is None


async def test_redis_entries_expire(request: pytest.FixtureRequest) -> None:
    # Redis expires keys on its own clock: the TTL is long enough that a stalled machine still finds the
    # entry right after storing it, and the test then waits for the expiry to happen.
    c = make("redis", request, ttl_s=3.0)
    try:
        await c.store("q", _vec(1), "cfg", PUBLIC, _answer(_ctx("a")))
        assert await c.lookup("q", _vec(1), "cfg", PUBLIC) is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while await c.lookup("q", None, "cfg", PUBLIC) is not None:
            assert loop.time() < deadline, "the entry never expired"
            await asyncio.sleep(0.2)
        assert await c.lookup("other words", _vec(1), "cfg", PUBLIC) is None
    finally:
        await c.close()


async def test_redis_keys_live_the_ttl_to_the_millisecond(request: pytest.FixtureRequest) -> None:
    """Rounded to whole seconds, a TTL of 0.3 s let Redis serve an entry the memory cache had
    dropped, and one of 1.4 s dropped it early."""
    c = make("redis", request, ttl_s=600.9)
    assert isinstance(c, RedisCache)
    try:
        await c.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
        entry_id = (await c._redis.get(c._exact_key("cfg", 0, "what is rrf"))).decode()
        for key in (c._k("e", entry_id), c._k("v", entry_id), c._exact_key("cfg", 0, "what is rrf"), c._k("s", "cfg", 0), c._k("d", "d1")):
            assert 600_000 < await c._redis.pttl(key) <= 600_900, key
    finally:
        await c.close()


async def test_redis_aliases_expire_with_their_entry(request: pytest.FixtureRequest) -> None:
    """An alias key is never left without an expiry: it lives as long as the entry it points at."""
    c = make("redis", request, ttl_s=600.0)
    assert isinstance(c, RedisCache)
    try:
        await c.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
        assert await c.lookup("explain rrf", _vec(1, 0.1), "cfg", PUBLIC) is not None
        alias = c._exact_key("cfg", 0, "explain rrf")
        entry_id = (await c._redis.get(alias)).decode().split(" ")[0]
        alias_ms, entry_ms = await c._redis.pttl(alias), await c._redis.pttl(c._k("e", entry_id))
        assert 0 < alias_ms <= 600_000 and abs(alias_ms - entry_ms) < 5_000
    finally:
        await c.close()


async def test_redis_entries_are_shared_between_processes(request: pytest.FixtureRequest) -> None:
    """Two clients on one prefix behave like two worker processes."""
    a, b = make("redis", request, prefix="shared"), make("redis", request, prefix="shared")
    try:
        assert await b.lookup("similar question", _vec(1, 0.05), "cfg", PUBLIC) is None  # b's mirror starts empty
        await a.store("question", _vec(1), "cfg", PUBLIC, _answer(_ctx("d")))
        hit = await b.lookup("similar question", _vec(1, 0.05), "cfg", PUBLIC)
        assert hit is not None and hit.contexts[0].document.document_id == "d"
        await a.invalidate_documents(["d"])
        assert await b.lookup("similar question", _vec(1, 0.05), "cfg", PUBLIC) is None
    finally:
        await a.close()
        await b.close()


async def _entry_ids(c: RedisCache) -> list[str]:
    return sorted([k.decode().rsplit(":", 1)[1] async for k in c._redis.scan_iter(match=c._k("e", "*"))])


async def test_redis_values_that_cannot_be_read_are_misses_and_removed(request: pytest.FixtureRequest) -> None:
    """An entry another build wrote (JSON of another shape) or a vector of the wrong size is a miss,
    and goes; lookups never fail on it (their failures would open the cache's breaker for every
    partition, for as long as the value lived)."""
    c = make("redis", request)
    assert isinstance(c, RedisCache)
    try:
        await c.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
        await c.store("what is bm25", _vec(0, 1), "cfg", PUBLIC, _answer(_ctx("d2")))
        rrf, bm25 = [(await c._redis.get(c._exact_key("cfg", 0, q))).decode() for q in ("what is rrf", "what is bm25")]
        await c._redis.set(c._k("e", rrf), b'{"contexts": [{"document": {"language": "en"}}], "strategy": "HYBRID"}')
        await c._redis.set(c._k("v", bm25), b"\x00" * 12)
        for _ in range(3):
            assert await c.lookup("what is rrf", None, "cfg", PUBLIC) is None
            assert await c.lookup("explain bm25", _vec(0, 1, 0.1), "cfg", PUBLIC) is None
        assert await _entry_ids(c) == [bm25]  # the unreadable entry went
        for unreadable in (b"0123abcd 0.97x", b"\xff\xfe"):  # an exact-match key another build wrote
            await c._redis.set(c._exact_key("cfg", 0, "what is hnsw"), unreadable)
            assert await c.lookup("what is hnsw", None, "cfg", PUBLIC) is None
            assert await c._redis.get(c._exact_key("cfg", 0, "what is hnsw")) is None
        assert [m.decode() for m in await c._redis.zrange(c._k("s", "cfg", 0), 0, -1)] == []  # neither vector is matched again
        assert (await c.lookup("what is bm25", None, "cfg", PUBLIC)) is not None  # its exact key still finds it
        await c.invalidate_documents(["d1", "d2"])
        assert await _entry_ids(c) == []
    finally:
        await c.close()


async def test_redis_an_unreadable_entry_this_process_mirrors_stops_matching(request: pytest.FixtureRequest) -> None:
    """Found unreadable by a similarity match, an entry leaves the partition's sorted set and this
    process's mirror too: else each similar lookup matched it again (and missed) until its TTL,
    never reaching the readable entry beside it."""
    c = make("redis", request)
    assert isinstance(c, RedisCache)
    try:
        await c.store("what is rrf", _vec(1, 0.02), "cfg", PUBLIC, _answer(_ctx("bad")))
        await c.store("what is rrf fusion", _vec(1, 0.2), "cfg", PUBLIC, _answer(_ctx("good")))
        assert (await c.lookup("explain rrf", _vec(1), "cfg", PUBLIC)) is not None  # the partition is mirrored
        bad = (await c._redis.get(c._exact_key("cfg", 0, "what is rrf"))).decode()
        await c._redis.set(c._k("e", bad), b'{"contexts": 1}')
        assert await c.lookup("explain rrf again", _vec(1), "cfg", PUBLIC) is None  # the bad one, closest, is read and goes
        hit = await c.lookup("explain rrf once more", _vec(1), "cfg", PUBLIC)
        assert hit is not None and hit.contexts[0].document.document_id == "good"
    finally:
        await c.close()


async def test_an_answer_whose_vector_no_lookup_could_match_is_found_by_its_text(cache: SemanticCache) -> None:
    """The in-process cache raised on a zero or NaN vector where Redis's stored the answer without
    it: reached from update_cache, that failed the request (INTERNAL)."""
    for i, vector in enumerate((np.zeros(DIM, dtype=np.float32), np.full(DIM, np.nan, dtype=np.float32), np.ones(DIM + 1, dtype=np.float32))):
        await cache.store(f"question {i}", vector, "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
        found = await cache.lookup(f"question {i}", None, "cfg", PUBLIC)
        assert found is not None and found.contexts == (_ctx(f"d{i}"),)
    assert await cache.lookup("explain", _vec(1), "cfg", PUBLIC) is None
    await cache.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("rrf")))  # a matchable one beside them still matches
    assert await cache.lookup("explain rrf", _vec(1, 0.1), "cfg", PUBLIC) is not None


async def test_redis_stores_no_vector_a_lookup_could_not_match(request: pytest.FixtureRequest) -> None:
    c = make("redis", request)
    assert isinstance(c, RedisCache)
    try:
        for vector in (np.zeros(DIM, dtype=np.float32), np.full(DIM, np.nan, dtype=np.float32), np.ones(DIM + 1, dtype=np.float32)):
            await c.store("what is rrf", vector, "cfg", PUBLIC, _answer(_ctx("d1")))
        assert await c._redis.zcard(c._k("s", "cfg", 0)) == 0
        assert await c.lookup("what is rrf", None, "cfg", PUBLIC) is not None  # found by its text
        assert await c.lookup("explain rrf", _vec(1), "cfg", PUBLIC) is None
    finally:
        await c.close()


async def test_redis_partitions_keep_the_newest_max_entries(request: pytest.FixtureRequest) -> None:
    """Storing past CACHE_MAX_ENTRIES removes a partition's oldest entries from Redis: it grew with
    the queries, and each lookup loaded every entry past what the process mirrors, again and again."""
    c = RedisCache(request.getfixturevalue("redis_url"), DIM, CachePolicy(ttl_s=600.0, max_entries=3),
                   prefix=f"t{next(_counter)}", timeout_s=30.0)
    try:
        for i in range(5):
            await c.store(f"question {i}", _vec(*([0.0] * i), 1), "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
        assert await c._redis.zcard(c._k("s", "cfg", 0)) == 3 and len(await _entry_ids(c)) == 3
        for i in range(5):
            hit = await c.lookup(f"another question {i}", _vec(*([0.0] * i), 1), "cfg", PUBLIC)
            assert (hit is not None) is (i >= 2), i
    finally:
        await c.close()


async def test_redis_entries_without_a_vector_count_against_max_entries(request: pytest.FixtureRequest) -> None:
    """Only entries with a vector were counted and trimmed: a partition of max_entries 10 kept the
    300 answers stored without one (a query too long for the model, an embedder that failed)."""
    c = RedisCache(request.getfixturevalue("redis_url"), DIM, CachePolicy(ttl_s=600.0, max_entries=3),
                   prefix=f"t{next(_counter)}", timeout_s=30.0)
    try:
        for i in range(6):
            await c.store(f"question {i}", _vec(1, i) if i % 2 else None, "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
        assert len(await _entry_ids(c)) == 3
        assert [await c.lookup(f"question {i}", None, "cfg", PUBLIC) is not None for i in range(6)] == [False] * 3 + [True] * 3
        assert await c._redis.zcard(c._k("s", "cfg", 0)) == 2  # the similarity scan lists only the vectors
    finally:
        await c.close()


def _traced_growth(before: int) -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before


async def test_memory_entries_are_bounded_across_configurations() -> None:
    """RETRIEVAL_CACHE_MAX_ENTRIES bounds the whole cache, not each configuration (strategy, top_k,
    document filter, ...): a caller varying its options must not grow it past the bound."""
    c = MemoryCache(DIM, CachePolicy(ttl_s=60.0, max_entries=4))
    for i in range(20):
        await c.store(f"q{i}", _vec(1, i), f"cfg{i}", PUBLIC, _answer(_ctx(f"d{i}")))
    assert len(c) == 4
    assert await c.lookup("q0", None, "cfg0", PUBLIC) is None  # the oldest went first
    assert await c.lookup("q19", None, "cfg19", PUBLIC) is not None


async def test_memory_use_follows_entries_not_configurations() -> None:
    """Entries spread over many configurations cost about what as many entries in one cost, and
    a configuration whose entries are all gone holds no memory."""
    dim, n = 384, 60  # the model's size: each configuration's matcher was allocated at up to 256 rows
    vectors = np.random.default_rng(7).standard_normal((n, dim)).astype(np.float32)
    one, spread = MemoryCache(dim, CachePolicy(max_entries=n)), MemoryCache(dim, CachePolicy(max_entries=n))
    answers = [_answer(_ctx(f"d{i}")) for i in range(n)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            await one.store(f"q{i}", vectors[i], "cfg", PUBLIC, answers[i])
        in_one = _traced_growth(before)
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            await spread.store(f"q{i}", vectors[i], f"cfg{i}", PUBLIC, answers[i])
        in_many = _traced_growth(before)
        # A matcher per configuration costs some; one allocated for many rows each cost 30 times more.
        assert in_many < 3 * in_one, (in_one, in_many)
        assert await spread.invalidate_documents([f"d{i}" for i in range(n)]) == n
        assert _traced_growth(before) < in_one / 4, "emptied configurations still hold memory"
    finally:
        tracemalloc.stop()
        await one.close()
        await spread.close()


async def test_memory_a_configuration_left_with_a_few_entries_gives_the_others_rows_back() -> None:
    """A configuration's vectors grow by doubling; they also shrink, or one that once held many
    entries kept them all (traffic moving from one top_k to another piled matrices up)."""
    dim, n = 384, 2048
    vectors = np.random.default_rng(3).standard_normal((n, dim)).astype(np.float32)
    c = MemoryCache(dim, CachePolicy(max_entries=n))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            await c.store(f"q{i}", vectors[i], "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
        full = _traced_growth(before)
        assert await c.invalidate_documents([f"d{i}" for i in range(n - 2)]) == n - 2
        kept = _traced_growth(before)
        assert kept < full / 4, (full, kept)
        for i in (n - 2, n - 1):
            found = await c.lookup(f"paraphrase {i}", vectors[i], "cfg", PUBLIC)
            assert found is not None and found.similarity > 0.999
    finally:
        tracemalloc.stop()
        await c.close()


async def test_redis_mirrors_of_emptied_partitions_hold_no_memory(request: pytest.FixtureRequest) -> None:
    """Each process mirrors the vectors of the partitions it is asked about, and partitions are
    open-ended (one per reader and configuration): a partition whose entries are gone, or that
    never had any, must not keep a mirror for the life of the process."""
    dim, n = 384, 60  # the model's size: a mirror kept at 256 rows was 400 KB
    c = RedisCache(request.getfixturevalue("redis_url"), dim, prefix=f"t{next(_counter)}", timeout_s=30.0)
    vectors = np.random.default_rng(7).standard_normal((n + 1, dim)).astype(np.float32)
    readers = [AccessFilter(readers=(f"user{i}",)).partition for i in range(n)]
    try:
        # The connection exists and the matcher's kernel is compiled before memory is counted.
        await c.store("warm", vectors[n], "cfg", PUBLIC, _answer(_ctx("warm")))
        assert await c.lookup("warm up", vectors[n], "cfg", PUBLIC) is not None
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for i, reader in enumerate(readers):
            assert await c.lookup("unseen", vectors[i], "cfg", reader) is None
        never_stored = _traced_growth(before)
        for i, reader in enumerate(readers):
            await c.store(f"q{i}", vectors[i], "cfg", reader, _answer(_ctx(f"d{i}")))
            assert await c.lookup(f"similar {i}", vectors[i], "cfg", reader) is not None
        assert await c.invalidate_documents([f"d{i}" for i in range(n)]) == n
        for i, reader in enumerate(readers):
            assert await c.lookup(f"similar again {i}", vectors[i], "cfg", reader) is None
        after = _traced_growth(before)
        # A few KB per partition of allocator and client noise at most; a kept mirror is 100 times that.
        assert never_stored < n * 4096 and after < n * 4096, (never_stored, after)
    finally:
        tracemalloc.stop()
        await c.close()


async def test_redis_a_mirror_left_with_a_few_entries_gives_the_others_rows_back(request: pytest.FixtureRequest) -> None:
    dim, n = 384, 512
    c = RedisCache(request.getfixturevalue("redis_url"), dim, prefix=f"t{next(_counter)}", timeout_s=30.0)
    vectors = np.random.default_rng(5).standard_normal((n, dim)).astype(np.float32)
    try:
        for i in range(n):
            await c.store(f"q{i}", vectors[i], "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
        assert await c.lookup("similar", vectors[0], "cfg", PUBLIC) is not None
        mirror = next(iter(c._mirrors.values()))
        assert mirror.matcher.capacity >= n
        assert await c.invalidate_documents([f"d{i}" for i in range(n - 2)]) == n - 2
        assert mirror.matcher.capacity <= 8 and len(mirror.row_of) == 2
        for i in (n - 2, n - 1):
            found = await c.lookup(f"similar {i}", vectors[i], "cfg", PUBLIC)
            assert found is not None and found.contexts[0].document.document_id == f"d{i}"
    finally:
        await c.close()


async def test_redis_mirrors_of_partitions_not_asked_about_again_are_dropped(request: pytest.FixtureRequest) -> None:
    """A partition asked about once (a reader who never comes back) keeps no mirror once its
    entries have expired, without a lookup of that partition."""
    now = [time.time()]
    c = RedisCache(request.getfixturevalue("redis_url"), DIM, CachePolicy(ttl_s=60.0), clock=lambda: now[0],
                   prefix=f"t{next(_counter)}", timeout_s=30.0)
    readers = [AccessFilter(readers=(f"user{i}",)).partition for i in range(5)]
    try:
        for i, reader in enumerate(readers):
            await c.store(f"q{i}", _vec(1, i), "cfg", reader, _answer(_ctx(f"d{i}")))
            assert await c.lookup(f"similar {i}", _vec(1, i + 0.01), "cfg", reader) is not None
        assert len(c._mirrors) == len(readers)
        now[0] += 61.0  # every entry has expired (scores in the sorted sets are on this clock)
        assert await c.lookup("another", _vec(0, 1), "cfg", PUBLIC) is None
        assert not c._mirrors, "mirrors of expired partitions are kept"
    finally:
        await c.close()


async def test_redis_lookups_read_what_was_stored_since_not_the_whole_partition(request: pytest.FixtureRequest) -> None:
    """Read whole on every lookup, a partition of 20,000 entries took 0.2 s a lookup, past the
    cache's timeout. What another process stores is still found at once, what it invalidates is
    never served, and the whole partition is read again every FULL_SYNC_S."""
    from retrieval_server.backends.redis_cache import FULL_SYNC_S

    now, prefix = [time.time()], f"t{next(_counter)}"
    a = RedisCache(request.getfixturevalue("redis_url"), DIM, CachePolicy(ttl_s=600.0), clock=lambda: now[0],
                   prefix=prefix, timeout_s=30.0)
    b = RedisCache(request.getfixturevalue("redis_url"), DIM, CachePolicy(ttl_s=600.0), prefix=prefix, timeout_s=30.0)
    whole_reads: list[int] = []
    read = a._redis.zrevrangebyscore

    async def counted(*args: Any, **kwargs: Any) -> Any:
        whole_reads.append(1)
        return await read(*args, **kwargs)

    a._redis.zrevrangebyscore = counted  # type: ignore[method-assign]
    try:
        for i in range(30):
            await b.store(f"q{i}", _vec(1, i), "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
        assert await a.lookup("similar 0", _vec(1, 0.01), "cfg", PUBLIC) is not None
        for i in range(5):
            now[0] += 1.0
            await b.store(f"new {i}", _vec(0, 1, i), "cfg", PUBLIC, _answer(_ctx(f"n{i}")))
            hit = await a.lookup(f"similar new {i}", _vec(0, 1, i + 0.01), "cfg", PUBLIC)
            assert hit is not None and hit.contexts[0].document.document_id == f"n{i}"
        assert len(whole_reads) == 1
        await b.invalidate_documents(["d0"])
        assert await a.lookup("similar 0 again", _vec(1, 0.01), "cfg", PUBLIC) is None
        assert await a.lookup("similar 0 once more", _vec(1, 0.01), "cfg", PUBLIC) is None
        now[0] += FULL_SYNC_S
        assert await a.lookup("similar 1", _vec(1, 1.01), "cfg", PUBLIC) is not None
        assert len(whole_reads) == 2
    finally:
        await a.close()
        await b.close()


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _process(request: pytest.FixtureRequest, prefix: str, clock: Callable[[], float], **policy: Any) -> RedisCache:
    """A RedisCache as one process sees it (two on one prefix are two processes)."""
    return RedisCache(request.getfixturevalue("redis_url"), DIM, CachePolicy(**policy), clock=clock, prefix=prefix, timeout_s=30.0)


async def test_redis_a_full_partition_mirrors_the_entries_redis_keeps(request: pytest.FixtureRequest) -> None:
    """A whole read added the newest entry first, so the next new one evicted it, not the entry
    Redis trimmed: a live entry went unmatched."""
    clock, prefix = _Clock(time.time()), f"t{next(_counter)}"
    a, b = (_process(request, prefix, clock, ttl_s=100.0, max_entries=4) for _ in range(2))
    try:
        for i in range(1, 5):
            await b.store(f"q{i}", _vec(*[0.0] * i, 1), "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
            clock.now += 1
        assert (await a.lookup("like 2", _vec(0, 0, 1, 0.01), "cfg", PUBLIC)) is not None  # a reads the partition whole
        await b.store("q5", _vec(0, 0, 0, 0, 0, 1), "cfg", PUBLIC, _answer(_ctx("d5")))  # Redis trims q1
        for i in (5, 4, 3, 2):
            hit = await a.lookup(f"like {i} again", _vec(*[0.0] * i, 1, 0.01), "cfg", PUBLIC)
            assert hit is not None and hit.contexts[0].document.document_id == f"d{i}", i
    finally:
        await a.close()
        await b.close()


async def test_redis_a_writer_whose_clock_runs_ahead_hides_no_one_elses_entries(request: pytest.FixtureRequest) -> None:
    """An entry's score is its writer's clock plus the TTL: one scored ahead moved the read past
    every other process's entries until the next whole read."""
    clock, ahead, prefix = _Clock(time.time()), _Clock(time.time() + 30), f"t{next(_counter)}"
    a, b = _process(request, prefix, clock, ttl_s=600.0), _process(request, prefix, clock, ttl_s=600.0)
    fast = _process(request, prefix, ahead, ttl_s=600.0)
    try:
        await fast.store("ahead", _vec(1), "cfg", PUBLIC, _answer(_ctx("ahead")))
        assert (await a.lookup("like ahead", _vec(1, 0.01), "cfg", PUBLIC)) is not None
        for i in range(3):
            clock.now += 1
            await b.store(f"q{i}", _vec(0, 1, i), "cfg", PUBLIC, _answer(_ctx(f"d{i}")))
            hit = await a.lookup(f"like {i}", _vec(0, 1, i + 0.01), "cfg", PUBLIC)
            assert hit is not None and hit.contexts[0].document.document_id == f"d{i}", i
    finally:
        for c in (a, b, fast):
            await c.close()


@pytest.mark.parametrize("read_fails", [False, True], ids=["read", "fails"])
async def test_redis_a_partition_read_whole_outlives_the_lookup_that_was_cut(
    request: pytest.FixtureRequest, read_fails: bool
) -> None:
    """A lookup is held to the cache's timeout (0.25 s): a partition too large to read in that
    time was read again, and cut again, by every lookup, and the breaker opened. A read that fails
    after its lookup was cut is no later lookup's error (it was raised there, with Redis well again)."""
    clock, prefix = _Clock(time.time()), f"t{next(_counter)}"
    a, b = _process(request, prefix, clock), _process(request, prefix, clock)
    read, started, release, reads = a._redis.zrevrangebyscore, asyncio.Event(), asyncio.Event(), []

    async def held(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        if len(reads) == 1:
            started.set()
            await release.wait()
            if read_fails:
                raise TimeoutError("Timeout reading from socket")
        return await read(*args, **kwargs)

    a._redis.zrevrangebyscore = held  # type: ignore[method-assign]
    try:
        await b.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
        cut = asyncio.ensure_future(a.lookup("explain rrf", _vec(1, 0.05), "cfg", PUBLIC))
        await started.wait()
        cut.cancel()
        [reading] = a._full_reads.values()
        release.set()
        await asyncio.gather(cut, reading, return_exceptions=True)
        assert cut.cancelled() and reading.done()
        hit = await a.lookup("explain rrf again", _vec(1, 0.05), "cfg", PUBLIC)
        assert hit is not None and hit.contexts[0].document.document_id == "d1"
        assert len(reads) == (2 if read_fails else 1)  # what the cut lookup's read found serves the next one
    finally:
        await a.close()
        await b.close()


async def test_redis_a_lookup_cut_while_reading_new_vectors_leaves_them_to_the_next(request: pytest.FixtureRequest) -> None:
    """A lookup moved its mirror past the entries it listed before reading their vectors: cut
    there (by the cache's timeout, or the request's deadline), it left them out of this process's
    matches until the next whole read of the partition, a minute later."""
    clock, prefix = _Clock(time.time()), f"t{next(_counter)}"
    writer, reader = _process(request, prefix, clock, ttl_s=600.0), _process(request, prefix, clock, ttl_s=600.0)
    mget, started, never = reader._redis.mget, asyncio.Event(), asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        started.set()
        await never.wait()

    try:
        await writer.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
        assert await reader.lookup("explain rrf", _vec(1, 0.01), "cfg", PUBLIC) is not None  # the reader mirrors the partition
        await writer.store("what is bm25", _vec(0, 1), "cfg", PUBLIC, _answer(_ctx("d2")))
        clock.now += 2 * SYNC_SKEW_S
        await writer.store("what is hnsw", _vec(0, 0, 1), "cfg", PUBLIC, _answer(_ctx("d3")))
        reader._redis.mget = held  # type: ignore[method-assign]
        cut, reading = asyncio.ensure_future(reader.lookup("explain bm25", _vec(0, 1, 0.01), "cfg", PUBLIC)), asyncio.ensure_future(started.wait())
        await asyncio.wait([cut, reading], return_when=asyncio.FIRST_COMPLETED)
        for task in (cut, reading):
            task.cancel()
        await asyncio.gather(cut, reading, return_exceptions=True)
        reader._redis.mget = mget  # type: ignore[method-assign]
        for words, vector, doc in (("explain bm25 again", _vec(0, 1, 0.01), "d2"), ("explain hnsw", _vec(0, 0, 1, 0.01), "d3")):
            hit = await reader.lookup(words, vector, "cfg", PUBLIC)
            assert hit is not None and hit.contexts[0].document.document_id == doc, words
    finally:
        await writer.close()
        await reader.close()


class HeldMatcher:
    """A cache's matcher whose scans wait for ``release``, noting for each change made to it
    whether a scan was running."""

    def __init__(self, inner: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.inner, self.loop = inner, loop
        self.scanning, self.changed_while_scanning = False, list[bool]()
        self.entered, self.release = asyncio.Event(), threading.Event()

    def match(self, *args: Any) -> tuple[int, float]:
        self.scanning = True
        try:
            self.loop.call_soon_threadsafe(self.entered.set)
            self.release.wait()
            return self.inner.match(*args)
        finally:
            self.scanning = False

    def add(self, *args: Any, **kwargs: Any) -> int:
        self.changed_while_scanning.append(self.scanning)
        return self.inner.add(*args, **kwargs)

    def remove(self, row: int) -> None:
        self.changed_while_scanning.append(self.scanning)
        self.inner.remove(row)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_memory_an_exact_repeat_does_not_wait_for_another_querys_similarity_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan ran on the shared blocking executor, holding the cache's lock while queued behind
    vector searches: every lookup waited for them, an exact repeat (a dict read) too."""
    monkeypatch.setattr(cache_module, "INLINE_SCAN_ROWS", 0)  # every scan on the cache's thread
    c = MemoryCache(DIM)
    try:
        await c.store("hot question", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
        held = c._matchers["cfg"] = HeldMatcher(c._matchers["cfg"], asyncio.get_running_loop())  # type: ignore[assignment]
        ended: list[str] = []
        scan = asyncio.ensure_future(c.lookup("a paraphrase", _vec(1, 1), "cfg", PUBLIC))
        scan.add_done_callback(lambda _: ended.append("scan"))
        await held.entered.wait()
        repeat = asyncio.ensure_future(c.lookup("hot question", None, "cfg", PUBLIC))
        repeat.add_done_callback(lambda _: ended.append("repeat"))
        held.release.set()
        assert (await repeat) is not None and await scan is None
        assert ended == ["repeat", "scan"]
    finally:
        held.release.set()
        await c.close()


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_lookup_cancelled_during_its_scan_returns_at_once_and_keeps_the_matcher_until_the_scan_has_ended(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str,
) -> None:
    """The matcher is not thread-safe: a lookup cut by the cache's timeout while its scan ran on the
    cache's thread released the lock at once, and a store or a forget then changed the matcher
    under the scan. Then it held the lock until the scan ended, and returned only then: the
    timeout no longer bounded the lookup."""
    monkeypatch.setattr(cache_module, "INLINE_SCAN_ROWS", 0)
    monkeypatch.setattr(redis_cache, "INLINE_SCAN_ROWS", 0)
    c = make(kind, request)
    loop = asyncio.get_running_loop()
    try:
        await c.store("what is rrf", _vec(1), "cfg", PUBLIC, _answer(_ctx("d1")))
        await c.store("what is bm25", _vec(0, 1), "cfg", PUBLIC, _answer(_ctx("d2")))
        if isinstance(c, MemoryCache):
            held = c._matchers["cfg"] = HeldMatcher(c._matchers["cfg"], loop)  # type: ignore[assignment]
            change = c.invalidate_documents(["d2"])
        else:
            assert isinstance(c, RedisCache)
            assert await c.lookup("explain rrf", _vec(1, 0.1), "cfg", PUBLIC) is not None  # mirrors the partition
            mirror = c._mirrors[("cfg", 0)]
            held = mirror.matcher = HeldMatcher(mirror.matcher, loop)  # type: ignore[assignment]
            change = c._forget("cfg", 0, *mirror.row_of)
        scan = asyncio.ensure_future(c.lookup("describe rrf", _vec(1, 0.2), "cfg", PUBLIC))
        await held.entered.wait()
        scan.cancel()
        changed = asyncio.ensure_future(change)
        at_release: list[tuple[bool, int]] = []

        def release() -> None:
            at_release.append((scan.done(), len(held.changed_while_scanning)))
            held.release.set()

        # After both have run as far as they can: the lookup has returned, and the change waits.
        loop.call_soon(release)
        with pytest.raises(asyncio.CancelledError):
            await scan
        await changed
        assert at_release == [(True, 0)]
        assert held.changed_while_scanning and not any(held.changed_while_scanning)
    finally:
        held.release.set()
        await c.close()
