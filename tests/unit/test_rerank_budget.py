"""Reranking: repeated (query, text) pairs are not scored twice; a time budget and the request's deadline cap the candidates."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import pytest

from retrieval_server.backends.reranker import FallbackReranker, MeasuredReranker, RerankError, ScoringRate
from retrieval_server.domain import QueryOptions, VectorHit
from retrieval_server.workflow import nodes
from retrieval_server.workflow.state import QueryState, WorkflowDeps, WorkflowSettings
from tests.support.clock import Clock


class Model:
    """Scores a text by its length (times `scale`); records what it was asked to score."""

    def __init__(self, name: str = "model", fail: bool = False, scale: float = 1.0) -> None:
        self.name, self.fail, self.scale = name, fail, scale
        self.asked: list[list[str]] = []

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        self.asked.append(list(texts))
        if self.fail:
            raise RerankError("down")
        return [self.scale * len(t) for t in texts]


async def test_a_repeated_pair_is_scored_once() -> None:
    model = Model()
    reranker = MeasuredReranker(model, pair_cache_size=100)
    assert await reranker.rerank("q", ["a", "bb"]) == [1.0, 2.0]
    assert await reranker.rerank("q", ["bb", "ccc", "a", "ccc"]) == [2.0, 3.0, 1.0, 3.0]
    assert model.asked == [["a", "bb"], ["ccc"]]  # only the new pair, once though asked twice
    assert await reranker.rerank("other query", ["a"]) == [1.0]
    assert model.asked[-1] == ["a"]  # a pair is the query and the text


async def test_pairs_that_join_to_the_same_string_are_scored_apart() -> None:
    model = Model()
    reranker = MeasuredReranker(model, pair_cache_size=100)
    await reranker.rerank("tax\0invoice", ["paid"])
    await reranker.rerank("tax", ["invoice\0paid"])
    assert model.asked == [["paid"], ["invoice\0paid"]]


async def test_the_pair_cache_keeps_the_most_recent_and_can_be_off() -> None:
    model = Model()
    reranker = MeasuredReranker(model, pair_cache_size=2)
    await reranker.rerank("q", ["a", "b", "c"])
    await reranker.rerank("q", ["a"])
    assert model.asked[-1] == ["a"]  # evicted by b and c
    off = Model()
    uncached = MeasuredReranker(off, pair_cache_size=0)
    await uncached.rerank("q", ["a"])
    await uncached.rerank("q", ["a"])
    assert off.asked == [["a"], ["a"]]


async def test_a_fallback_models_scores_are_reported_and_not_remembered() -> None:
    primary, local = Model("tei", fail=True), Model("local")
    reranker = MeasuredReranker(FallbackReranker(primary, local), pair_cache_size=100)
    scores, degraded = await reranker.rerank_reporting("q", ["a"])
    assert scores == [1.0] and degraded == "rerank:tei_failed_used_local"
    primary.fail = False
    assert await reranker.rerank_reporting("q", ["a"]) == ([1.0], None)
    assert primary.asked == [["a"], ["a"]]


async def test_a_degraded_answer_scores_the_remembered_pairs_with_the_fallback_too() -> None:
    """Remembered scores are the primary model's: beside the fallback's (another scale) they
    decided the order and what passed the threshold by what happened to be cached."""
    primary, local = Model("tei"), Model("local", scale=10.0)
    reranker = MeasuredReranker(FallbackReranker(primary, local), pair_cache_size=100)
    await reranker.rerank("q", ["a", "bb"])
    primary.fail = True
    scores, degraded = await reranker.rerank_reporting("q", ["a", "bb", "ccc", "a"])
    assert degraded == "rerank:tei_failed_used_local"
    assert scores == [10.0, 20.0, 30.0, 10.0]
    assert local.asked == [["ccc"], ["a", "bb"]]  # each pair once


def test_the_rate_is_measured_per_pair_and_follows_the_load() -> None:
    rate = ScoringRate(weight=0.5)
    assert rate.pairs_within(1000) is None
    rate.observe(10, 1.0)
    assert rate.pairs_within(1000) == 10
    rate.observe(30, 1.0)
    assert rate.pairs_per_s == pytest.approx(20.0)
    assert rate.pairs_within(250) == 5


def _hit(i: int) -> VectorHit:
    return VectorHit(f"d{i}#p0c0", f"d{i}#p0", f"d{i}", 0, 0, "x" * (i + 1), 0, 1.0 / (i + 1))


def _state(top_k: int, candidates: int) -> QueryState:
    return QueryState(options=QueryOptions("q", top_k), fused=[_hit(i) for i in range(candidates)], rerank_threshold=-1e9)


def _deps(reranker: Any, budget_ms: float, candidates: int = 50, reserve_ms: float = 50.0) -> WorkflowDeps:
    settings = WorkflowSettings(rerank_candidates=candidates, rerank_budget_ms=budget_ms, deadline_reserve_ms=reserve_ms)
    return WorkflowDeps(embedder=None, sparse=None, vectors=None, metadata=None, analyzer=None, reranker=reranker, settings=settings)  # type: ignore[arg-type]


async def test_the_budget_caps_candidates_at_the_measured_rate() -> None:
    model = Model()
    rate = ScoringRate()
    rate.observe(100, 1.0)  # 100 pairs/s: 50 ms holds 5
    state = _state(top_k=3, candidates=20)
    out = await nodes.rerank(state, _deps(MeasuredReranker(model, 0, rate=rate), budget_ms=50))
    assert len(model.asked[0]) == 5 and len(out["reranked"]) == 5
    assert "rerank:budget" in state.metrics.degraded


async def test_the_budget_never_cuts_below_top_k_nor_applies_before_a_measurement() -> None:
    rate = ScoringRate()
    rate.observe(100, 1.0)
    model = Model()
    await nodes.rerank(_state(top_k=8, candidates=20), _deps(MeasuredReranker(model, 0, rate=rate), budget_ms=50))
    assert len(model.asked[0]) == 8
    unmeasured = Model()
    state = _state(top_k=3, candidates=20)
    await nodes.rerank(state, _deps(MeasuredReranker(unmeasured, 0), budget_ms=50))
    assert len(unmeasured.asked[0]) == 20 and not state.metrics.degraded
    roomy = Model()
    state = _state(top_k=3, candidates=20)
    await nodes.rerank(state, _deps(MeasuredReranker(roomy, 0, rate=rate), budget_ms=1000))
    assert len(roomy.asked[0]) == 20 and not state.metrics.degraded


async def test_the_budget_never_cuts_below_top_k_distinct_texts() -> None:
    """Ten copies of one section lead the fused list: the hits that hold top_k parents hold one
    context, which is all enrich would make of them (and of a fallback's best three)."""
    rate = ScoringRate()
    rate.observe(100, 1.0)  # 50 ms holds 5
    model = Model()
    copies = [dataclasses.replace(_hit(0), chunk_id=f"copy{i}#p0c0", parent_chunk_id=f"copy{i}#p0", document_id=f"copy{i}") for i in range(10)]
    state = QueryState(options=QueryOptions("q", 3), fused=[*copies, *(_hit(i) for i in range(1, 11))], rerank_threshold=-1e9)
    out = await nodes.rerank(state, _deps(MeasuredReranker(model, 0, rate=rate), budget_ms=50))
    assert len(out["reranked"]) == 12 and "rerank:budget" in state.metrics.degraded


async def test_the_rate_comes_from_the_calls_the_model_really_made() -> None:
    ticks = iter([0.0, 0.5, 1.0, 1.0])
    model = Model()
    reranker = MeasuredReranker(model, 100, clock=lambda: next(ticks))
    await reranker.rerank("q", ["a", "b", "c", "d", "e"])  # 5 pairs in 0.5 s
    assert reranker.rate.pairs_per_s == pytest.approx(10.0)
    await reranker.rerank("q", ["a", "b"])  # all remembered: no call, no measurement
    assert reranker.rate.pairs_per_s == pytest.approx(10.0) and len(model.asked) == 1


def _rate(pairs_per_s: float = 100.0) -> ScoringRate:
    """A measured rate, one per reranker: each call a reranker makes is measured into it."""
    rate = ScoringRate()
    rate.observe(int(pairs_per_s), 1.0)
    return rate


def _with_deadline(state: QueryState, time_left_s: float) -> QueryState:
    clock = Clock(100.0)
    state.clock, state.options = clock, dataclasses.replace(state.options, deadline=clock.now + time_left_s)
    return state


async def test_a_deadline_caps_the_candidates_at_what_fits_before_it() -> None:
    model = Model()
    # 200 ms left, 100 ms of it kept for enrichment (half the 200 ms reserve): 10 pairs fit.
    state = _with_deadline(_state(top_k=3, candidates=20), 0.2)
    deps = _deps(MeasuredReranker(model, 0, rate=_rate()), budget_ms=0, reserve_ms=200)
    out = await nodes.rerank(state, deps)
    assert len(model.asked[0]) == 10 and out["rerank_applied"]
    assert state.metrics.degraded == ["deadline:rerank_capped"]
    # The tighter of the deadline and the configured budget holds.
    tighter = Model()
    state = _with_deadline(_state(top_k=3, candidates=20), 0.2)
    await nodes.rerank(state, _deps(MeasuredReranker(tighter, 0, rate=_rate()), budget_ms=50, reserve_ms=200))
    assert len(tighter.asked[0]) == 5 and state.metrics.degraded == ["deadline:rerank_capped", "rerank:budget"]


async def test_a_deadline_too_near_for_top_k_keeps_the_fused_order_and_one_far_off_changes_nothing() -> None:
    model = Model()
    state = _with_deadline(_state(top_k=3, candidates=20), 0.12)  # 20 ms left after the reserve: 2 pairs < top_k
    out = await nodes.rerank(state, _deps(MeasuredReranker(model, 0, rate=_rate()), budget_ms=0, reserve_ms=200))
    assert model.asked == [] and out == {"reranked": state.fused, "rerank_applied": False}
    assert state.metrics.degraded == ["deadline:rerank_skipped"]
    state = _with_deadline(_state(top_k=3, candidates=20), 10.0)
    await nodes.rerank(state, _deps(MeasuredReranker(model, 0, rate=_rate()), budget_ms=0, reserve_ms=200))
    assert len(model.asked[0]) == 20 and not state.metrics.degraded


class Frozen:
    """A reranker that never answers (a frozen server); it measured fast before it froze."""

    def __init__(self) -> None:
        self.rate, self.cancelled = _rate(1e6), False

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return []


async def test_a_reranker_that_has_not_answered_when_the_time_left_runs_out_is_given_up() -> None:
    frozen = Frozen()
    # 0.2 s left on a clock that stands still: the call gets 0.1 s (half of it; and half the 200 ms reserve is kept).
    state = _with_deadline(_state(top_k=3, candidates=20), 0.2)
    out = await asyncio.wait_for(nodes.rerank(state, _deps(frozen, budget_ms=0, reserve_ms=200)), 60)
    assert frozen.cancelled and out == {"reranked": state.fused, "rerank_applied": False}
    assert state.metrics.degraded == ["deadline:rerank_skipped"]


async def test_reranking_gets_at_most_half_the_time_left_and_a_cut_call_teaches_nothing() -> None:
    class AnswersAfter(Model):
        async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            await asyncio.sleep(1.5)
            return await super().rerank(query, texts)

    inner = AnswersAfter()
    reranker = MeasuredReranker(inner, pair_cache_size=100)
    # 2 s left, no reserve: the call gets 1 s, half of it, and the answer would come at 1.5 s.
    state = _with_deadline(_state(top_k=3, candidates=5), 2.0)
    out = await asyncio.wait_for(nodes.rerank(state, _deps(reranker, budget_ms=0, reserve_ms=0)), 60)
    assert out["rerank_applied"] is False and state.metrics.degraded == ["deadline:rerank_skipped"]
    assert inner.asked == [] and reranker.rate.pairs_per_s is None  # nothing scored, nothing measured
    assert await reranker.rerank("q", ["a"]) == [1.0] and len(inner.asked) == 1  # nor remembered: a pair is scored anew


async def test_no_time_left_for_reranking_skips_the_call() -> None:
    model = Model()
    state = _with_deadline(_state(top_k=3, candidates=5), 0.02)  # less than half a 50 ms reserve
    await nodes.rerank(state, _deps(model, budget_ms=0))
    assert model.asked == [] and state.metrics.degraded == ["deadline:rerank_skipped"]


async def test_a_rerankers_own_timeout_is_a_failure_not_the_deadline() -> None:
    class TimesOut(Model):
        async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            raise TimeoutError("the client's own timeout")

    state = _with_deadline(_state(top_k=3, candidates=20), 10.0)
    await nodes.rerank(state, _deps(TimesOut(), budget_ms=0))
    assert state.metrics.degraded == ["rerank:failed"]


async def test_probabilities_near_one_keep_the_rerankers_order_and_meet_the_threshold_exactly() -> None:
    """The sigmoids of logits 10..26: in float32 every one above ~17 was 1.0, so those kept the
    fused order and all passed a threshold between them."""
    logits = [13, 25, 10, 22, 17, 26, 11, 19, 24, 14, 21, 12, 16, 23, 18, 15, 20]

    class Sigmoid(Model):
        async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
            return [1 / (1 + math.exp(-logits[len(t) - 1])) for t in texts]  # _hit(i)'s text has i + 1 characters

    best_first = sorted(range(len(logits)), key=lambda i: -logits[i])
    state = _state(top_k=3, candidates=len(logits))
    out = await nodes.rerank(state, _deps(Sigmoid(), budget_ms=0))
    assert [len(h.content) - 1 for h in out["reranked"]] == best_first
    state = _state(top_k=3, candidates=len(logits))
    state.rerank_threshold = 1 / (1 + math.exp(-20))
    out = await nodes.rerank(state, _deps(Sigmoid(), budget_ms=0))
    assert [logits[len(h.content) - 1] for h in out["reranked"]] == [26, 25, 24, 23, 22, 21, 20] and not out["rerank_fell_back"]
