from __future__ import annotations

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.api import served_answers
from retrieval_server.api.served_answers import ServedAnswers
from retrieval_server.domain import Identity, Mode, QueryMetrics, QueryOptions, QueryResult, Role, Strategy


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _result(*, cached: bool = True, degraded: tuple[str, ...] = ()) -> QueryResult:
    return QueryResult("q", (), QueryMetrics(cache_hit=cached, degraded=list(degraded), strategy_used=Strategy.HYBRID), cached=cached)


RESPONSE = pb.QueryResponse(query="q", cached=True, metrics=pb.Metrics(total_ms=7.0, cache_hit=True))


def test_an_answer_is_served_while_the_generation_holds_and_within_its_ttl() -> None:
    clock = Clock()
    answers = ServedAnswers(4, ttl_s=10, clock=clock)
    key = ((), "c", "q")
    answers.remember(key, 3, _result(), RESPONSE)
    assert answers.get(key, 3) is not None
    assert answers.get(key, 4) is None and answers.get(key, 3) is None  # dropped once the store changed
    answers.remember(key, 3, _result(), RESPONSE)
    clock.now = 10.0
    assert answers.get(key, 3) is None


def test_only_verified_undegraded_hits_on_a_store_with_a_generation_are_kept() -> None:
    answers = ServedAnswers(4, ttl_s=10, clock=Clock())
    for i, (generation, result) in enumerate([(None, _result()), (1, _result(cached=False)), (1, _result(degraded=("cache:unavailable",)))]):
        answers.remember(((), "c", str(i)), generation, result, RESPONSE)
    assert len(answers) == 0


def test_the_least_recently_served_is_dropped_first() -> None:
    answers = ServedAnswers(2, ttl_s=10, clock=Clock())
    for q in "abc":
        answers.remember(((), "c", q), 1, _result(), RESPONSE)
        answers.get(((), "c", "a"), 1)
    assert answers.get(((), "c", "a"), 1) and answers.get(((), "c", "c"), 1) and answers.get(((), "c", "b"), 1) is None


def test_served_bytes_parse_as_the_response_with_this_requests_metrics() -> None:
    answers = ServedAnswers(2, ttl_s=10, clock=Clock())
    answers.remember(((), "c", "q"), 1, _result(), RESPONSE)
    served = answers.get(((), "c", "q"), 1)
    assert served is not None
    body, result = served_answers.serve(served, started=0.0)
    parsed = pb.QueryResponse.FromString(body)
    assert parsed.query == "q" and parsed.cached and parsed.metrics.cache_hit
    assert parsed.metrics.strategy_used == pb.STRATEGY_HYBRID and [s.stage for s in parsed.metrics.stages] == ["check_cache"]
    assert parsed.metrics.total_ms != 7.0 and parsed.metrics.total_ms == result.metrics.total_ms and result.cached


def test_the_key_names_the_callers_principals_and_every_option() -> None:
    base = QueryOptions("q", 5, Strategy.HYBRID)
    bob = QueryOptions("q", 5, Strategy.HYBRID, identity=Identity("bob", Role.USER))
    root = QueryOptions("q", 5, Strategy.HYBRID, identity=Identity("bob", Role.SUPER_ADMIN))
    # A user id is free text: a user called "all" must not share the super admin's key.
    named_all = QueryOptions("q", 5, Strategy.HYBRID, identity=Identity("all", Role.USER))
    keys = {served_answers.key_of(o) for o in (base, bob, root, named_all, QueryOptions("q", 6, Strategy.HYBRID),
                                                QueryOptions("q", 5, Strategy.KEYWORD), QueryOptions("q", 5, Strategy.HYBRID, rerank=False))}
    assert len(keys) == 7
    assert served_answers.key_of(root) == served_answers.key_of(QueryOptions("q", 5, Strategy.HYBRID, identity=Identity("eve", Role.SUPER_ADMIN)))
    assert served_answers.key_of(QueryOptions("q", 5, use_cache=False)) is None
    assert served_answers.key_of(QueryOptions("q", 5, mode=Mode.GENERATION)) is None
