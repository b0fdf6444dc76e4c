from __future__ import annotations

import time

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.api import served_answers
from retrieval_server.api.served_answers import ServedAnswers
from retrieval_server.domain import (
    Document, Identity, Mode, ParentChunk, QueryMetrics, QueryOptions, QueryResult, RetrievedContext, Role, Strategy,
)
from retrieval_server.knowledge import EntityMatch, EntityType, GraphHop, GraphTrace, MatchKind
from tests.support.clock import Clock


OPTIONS = QueryOptions("q", 5, Strategy.HYBRID)


def _result(*, cached: bool = True, degraded: tuple[str, ...] = ()) -> QueryResult:
    return QueryResult("q", (), QueryMetrics(cache_hit=cached, degraded=list(degraded), strategy_used=Strategy.HYBRID), cached=cached)


RESPONSE = pb.QueryResponse(query="q", cached=True, metrics=pb.Metrics(total_ms=7.0, cache_hit=True))


def test_an_answer_is_served_while_the_generation_holds_and_within_its_ttl() -> None:
    clock = Clock()
    answers = ServedAnswers(4, ttl_s=10, clock=clock)
    key = ((), "c", "q")
    answers.remember(key, 3, OPTIONS, _result(), RESPONSE)
    assert answers.get(key, 3) is not None
    assert answers.get(key, 4) is None and answers.get(key, 3) is None  # dropped once the store changed
    answers.remember(key, 3, OPTIONS, _result(), RESPONSE)
    clock.now = 10.0
    assert answers.get(key, 3) is None


def test_only_verified_hits_on_a_store_with_a_generation_degraded_by_nothing_of_their_own_are_kept() -> None:
    """A hit's degradations that describe its contexts (no reranker, say) are reported by every hit
    and by the replay: such an answer is kept. What befell that request (the edge's cut to size, a
    deadline) need not befall the next: such an answer is not."""
    answers = ServedAnswers(8, ttl_s=10, clock=Clock())
    refused = [(None, OPTIONS, _result()), (1, OPTIONS, _result(cached=False)), (1, OPTIONS, _result(degraded=("cache:unavailable",))),
               (1, OPTIONS, _result(degraded=("rerank:unavailable", "response:contexts_capped"))),
               (1, OPTIONS, _result(degraded=("deadline:partial_results",))),
               (1, QueryOptions("q", 5, use_cache=False), _result()), (1, QueryOptions("q", 5, mode=Mode.GENERATION), _result())]
    for i, (generation, options, result) in enumerate(refused):
        answers.remember(((False, ()), str(i).encode()), generation, options, result, RESPONSE)
    assert len(answers) == 0
    answers.remember(((False, ()), b"kept"), 1, OPTIONS, _result(), RESPONSE)
    answers.remember(((False, ()), b"unranked"), 1, OPTIONS, _result(degraded=("rerank:unavailable", "keyword:no_terms")), RESPONSE)
    assert len(answers) == 2


def test_a_replay_reports_what_the_hit_it_repeats_reported() -> None:
    """The replay reported the metrics of no pass (sufficiency 0, nothing rewritten, no sub-queries,
    no graph trace), whatever the hit it repeats had reported of the pass that found its contexts."""
    graph = GraphTrace((EntityMatch("rrf", "RRF", EntityType.CONCEPT, "rrf", MatchKind.EXACT, 1.0),), (GraphHop(0, 1.0, ("RRF",), 2),), "v1")
    metrics = QueryMetrics(cache_hit=True, strategy_used=Strategy.HYBRID, sufficiency_score=0.7, rerank_fallback_triggered=True,
                           decomposition_used=True, rewritten_query="q (rrf)", sub_queries=["q1", "q2"], graph=graph,
                           degraded=["rerank:unavailable"])
    answers = ServedAnswers(2, ttl_s=10, clock=Clock())
    answers.remember(((), "c", "q"), 1, OPTIONS, QueryResult("q", (), metrics, cached=True), RESPONSE)
    served = answers.get(((), "c", "q"), 1)
    assert served is not None and served.degraded == ("rerank:unavailable",)  # for the events and the counters
    m = pb.QueryResponse.FromString(served_answers.serve(served, started=0.0)[0]).metrics
    assert (round(m.sufficiency_score, 3), m.rerank_fallback_triggered, m.decomposition_used, m.rewritten_query) == (0.7, True, True, "q (rrf)")
    assert list(m.sub_queries) == ["q1", "q2"] and list(m.degraded) == ["rerank:unavailable"] and m.iterations == 0
    assert [e.name for e in m.graph.entities] == ["RRF"] and [h.entities for h in m.graph.hops] == [["RRF"]]
    assert [s.stage for s in m.stages] == ["check_cache"]


def test_the_least_recently_served_is_dropped_first() -> None:
    answers = ServedAnswers(2, ttl_s=10, clock=Clock())
    for q in "abc":
        answers.remember(((), "c", q), 1, OPTIONS, _result(), RESPONSE)
        answers.get(((), "c", "a"), 1)
    assert answers.get(((), "c", "a"), 1) and answers.get(((), "c", "c"), 1) and answers.get(((), "c", "b"), 1) is None


def test_the_answers_bytes_are_bounded_too() -> None:
    """Counted alone, 1,024 answers of 2.6 MiB held 2.6 GiB."""
    big = pb.QueryResponse(query="q", cached=True, suggestions=["s" * 1_000])
    sizing = ServedAnswers(1, ttl_s=10, clock=Clock())
    sizing.remember(b"k", 1, OPTIONS, _result(), big)
    served = sizing.get(b"k", 1)
    assert served is not None
    size = served_answers.held_bytes(served)
    answers = ServedAnswers(100, ttl_s=10, max_bytes=3 * size, clock=Clock())
    for q in "abcd":
        answers.remember(((), "c", q), 1, OPTIONS, _result(), big)
    assert len(answers) == 3 and answers.get(((), "c", "a"), 1) is None and answers.get(((), "c", "d"), 1) is not None
    answers.remember(((), "c", "d"), 1, OPTIONS, _result(), big)  # the same key again: counted once
    assert len(answers) == 3 and answers.get(((), "c", "b"), 1) is not None
    huge = pb.QueryResponse(query="q", cached=True, suggestions=["s" * 3 * size])
    answers.remember(((), "c", "e"), 1, OPTIONS, _result(), huge)  # larger than the whole budget: not kept
    assert answers.get(((), "c", "e"), 1) is None and len(answers) == 3


def _served() -> served_answers.ServedAnswer:
    """An answer remembered and found again."""
    answers = ServedAnswers(2, ttl_s=10, clock=Clock())
    answers.remember(((), "c", "q"), 1, OPTIONS, _result(), RESPONSE)
    served = answers.get(((), "c", "q"), 1)
    assert served is not None
    return served


def test_served_bytes_parse_as_the_response_with_this_requests_metrics() -> None:
    served = _served()
    body, took_ms = served_answers.serve(served, started=0.0)
    parsed = pb.QueryResponse.FromString(body)
    assert parsed.query == "q" and parsed.cached and parsed.metrics.cache_hit
    assert parsed.metrics.strategy_used == pb.STRATEGY_HYBRID and [s.stage for s in parsed.metrics.stages] == ["check_cache"]
    assert parsed.metrics.total_ms != 7.0 and parsed.metrics.total_ms == took_ms
    assert (served.strategy, served.contexts) == (Strategy.HYBRID, 0)


def test_an_answer_holds_its_contexts_only_in_its_body() -> None:
    """The workflow's result kept beside the body held its contexts' text twice, uncounted."""
    import gc
    import tracemalloc

    def answer(i: int) -> tuple[QueryResult, pb.QueryResponse]:
        text = f"{i} " + "passage text " * 1_500  # 20 KB
        doc = Document(f"d{i}", title="t")
        contexts = (RetrievedContext(ParentChunk(f"d{i}#p0", f"d{i}", 0, text, 100), doc, 0.5, ()),)
        result = QueryResult("q", contexts, QueryMetrics(cache_hit=True, strategy_used=Strategy.HYBRID), cached=True)
        return result, pb.QueryResponse(query="q", cached=True, contexts=[pb.Context(content=text)])

    answers = ServedAnswers(100, ttl_s=10, clock=Clock())
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        bodies = 0
        for i in range(20):
            result, response = answer(i)
            answers.remember(((), "c", str(i)), 1, OPTIONS, result, response)
            bodies += len(response.SerializeToString())
            del result, response
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(answers) == 20 and held < 1.5 * bodies, (held, bodies)
    served = answers.get(((), "c", "3"), 1)
    assert served is not None and served.contexts == 1


def test_what_an_entry_holds_is_counted_not_its_body_alone() -> None:
    """Keyed by the request as sent and the caller's principals, and holding the options whole,
    answers to requests of 1,000 document ids by callers in 300 groups held 20 times the bytes of
    their bodies, past RETRIEVAL_CACHE_SERVED_ANSWERS_MB."""
    import gc
    import tracemalloc

    max_bytes = 2**20
    answers = ServedAnswers(1_000, ttl_s=10, max_bytes=max_bytes, clock=Clock())
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100):
            identity = Identity(f"user-{i}", Role.USER, tuple(f"team-{i}-{g:03d}-" + "x" * 40 for g in range(300)))
            ids = tuple(f"doc-{i}-{d:04d}-" + "y" * 24 for d in range(1_000))
            query = f"what do the trials say of dosage {i} " * 20
            request = pb.QueryRequest(query=query, top_k=5, strategy=pb.STRATEGY_HYBRID, filters=pb.QueryFilters(document_ids=ids))
            options = QueryOptions(query, 5, Strategy.HYBRID, document_ids=ids, identity=identity)
            response = pb.QueryResponse(query=query, cached=True, contexts=[pb.Context(content="c" * 1_500) for _ in range(5)])
            answers.remember(served_answers.key_of(identity, request), 1, options, _result(), response)
            del identity, ids, query, request, options, response
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0 < len(answers) and held < max_bytes, (len(answers), held)


def test_the_key_names_the_callers_principals_and_the_request_as_sent() -> None:
    def key(identity: Identity = Identity(), **fields: object) -> served_answers.Key:
        sent = {"query": "q", "top_k": 5, "strategy": pb.STRATEGY_HYBRID, **fields}
        return served_answers.key_of(identity, pb.QueryRequest(**sent))  # type: ignore[arg-type]

    bob, root = Identity("bob", Role.USER), Identity("bob", Role.SUPER_ADMIN)
    # A user id is free text: a user called "all" must not share the super admin's key.
    keys = {key(), key(bob), key(root), key(Identity("all", Role.USER)), key(Identity("bob", Role.USER, ("staff",))),
            key(top_k=6), key(strategy=pb.STRATEGY_KEYWORD), key(rerank=False), key(query="Q"), key(filters=pb.QueryFilters(document_ids=["d"]))}
    assert len(keys) == 10
    # Defaults spelled out are the same request.
    assert key(use_cache=True) == key() == key(rerank=True) != key(use_cache=False)
    assert key(root) == key(Identity("eve", Role.SUPER_ADMIN)) and key(bob) == key(Identity("bob", Role.ADMIN))


def test_a_request_that_turns_the_cache_off_is_never_looked_up() -> None:
    assert served_answers.may_serve(pb.QueryRequest(query="q")) and served_answers.may_serve(pb.QueryRequest(query="q", use_cache=True))
    assert not served_answers.may_serve(pb.QueryRequest(query="q", use_cache=False))


def test_each_serving_reports_its_own_duration_and_leaves_earlier_bytes_as_they_were() -> None:
    served = _served()
    first, first_ms = served_answers.serve(served, started=0.0)
    second, second_ms = served_answers.serve(served, started=time.perf_counter())
    assert second_ms < first_ms
    for body, took_ms in ((first, first_ms), (second, second_ms)):
        metrics = pb.QueryResponse.FromString(body).metrics
        assert metrics.total_ms == took_ms and [(s.stage, s.duration_ms) for s in metrics.stages] == [("check_cache", took_ms)]
