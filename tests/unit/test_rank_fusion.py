"""Rank fusion per chunk and per parent (workflow.rank_fusion), and the fuse node's choice between them."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.domain import Fusion, QueryOptions, Strategy, VectorHit
from retrieval_server.workflow import nodes
from retrieval_server.workflow.rank_fusion import fuse_lists, fuses_by_parent
from retrieval_server.workflow.state import QueryState, WorkflowDeps, WorkflowSettings

SETTINGS = WorkflowSettings(rrf_k=10.0, fusion_unit="auto")


def _hit(chunk: str, score: float = 0.0) -> VectorHit:
    doc, rest = chunk.split("#")
    return VectorHit(chunk, f"{doc}#{rest.split('c')[0]}", doc, 0, 0, chunk, 0, score)


def _split_evidence() -> list[list[VectorHit]]:
    """Parent a#p0 is first in both legs, through a different child in each; b#p0's one child is
    second in both."""
    dense = [_hit("a#p0c1", 0.9), _hit("b#p0c0", 0.8), _hit("x#p0c0", 0.7), _hit("a#p0c2", 0.6)]
    keyword = [_hit("a#p0c2", 14.0), _hit("b#p0c0", 12.0), _hit("y#p0c0", 11.0), _hit("a#p0c1", 9.0)]
    return [dense, keyword]


def test_per_chunk_a_parent_whose_legs_found_different_children_loses_to_one_child_both_found() -> None:
    fused = fuse_lists(_split_evidence(), [1.0, 1.0], SETTINGS, Fusion.RRF, 100)
    assert fused[0].chunk_id == "b#p0c0" and fused[0].score == pytest.approx(2 / 12)
    assert {h.chunk_id: h.score for h in fused}["a#p0c1"] == pytest.approx(1 / 11 + 1 / 14)


def test_per_parent_each_leg_ranks_a_parent_by_its_best_child() -> None:
    fused = fuse_lists(_split_evidence(), [1.0, 1.0], SETTINGS, Fusion.RRF, 100, by_parent=True)
    # Both legs rank a#p0 first and b#p0 second: a#p0 = 2/11, b#p0 = 2/12; x and y third in one leg.
    assert [(h.chunk_id, h.score) for h in fused] == [
        ("a#p0c1", pytest.approx(2 / 11)), ("a#p0c2", pytest.approx(2 / 11)), ("b#p0c0", pytest.approx(2 / 12)),
        ("x#p0c0", pytest.approx(1 / 13)), ("y#p0c0", pytest.approx(1 / 13)),
    ]
    # Every child any leg returned is kept, once; the limit counts children.
    assert [h.chunk_id for h in fuse_lists(_split_evidence(), [1.0, 1.0], SETTINGS, Fusion.RRF, 2, by_parent=True)] == ["a#p0c1", "a#p0c2"]


def test_per_parent_children_keep_the_order_of_the_fusion_per_chunk() -> None:
    dense = [_hit("a#p0c1", 0.9), _hit("a#p0c2", 0.8)]
    keyword = [_hit("a#p0c2", 5.0), _hit("a#p0c3", 4.0)]
    fused = fuse_lists([dense, keyword], [1.0, 1.0], SETTINGS, Fusion.RRF, 100, by_parent=True)
    # Per chunk: c2 = 1/12 + 1/11, c1 = 1/11, c3 = 1/12.
    assert [h.chunk_id for h in fused] == ["a#p0c2", "a#p0c1", "a#p0c3"]
    assert [h.score for h in fused] == pytest.approx([2 / 11] * 3)


def test_weighted_fusion_per_parent_takes_each_legs_best_child_score() -> None:
    settings = dataclasses.replace(SETTINGS, score_normalization="minmax")
    dense = [_hit("a#p0c1", 0.9), _hit("a#p0c2", 0.85), _hit("b#p0c0", 0.5)]
    keyword = [_hit("b#p0c0", 10.0), _hit("a#p0c2", 4.0)]
    fused = fuse_lists([dense, keyword], [0.7, 0.3], settings, Fusion.WEIGHTED, 100, by_parent=True)
    scores = {h.chunk_id: h.score for h in fused}
    # Parents: dense a 0.9 -> 1, b 0.5 -> 0; keyword b 10 -> 1, a 4 -> 0.
    assert scores == pytest.approx({"a#p0c1": 0.7, "a#p0c2": 0.7, "b#p0c0": 0.3})


def test_auto_fuses_per_parent_only_queries_longer_than_a_child() -> None:
    auto = WorkflowSettings(fusion_unit="auto")
    assert not fuses_by_parent(False, auto) and fuses_by_parent(True, auto)
    assert fuses_by_parent(False, dataclasses.replace(auto, fusion_unit="parent"))
    assert not fuses_by_parent(True, dataclasses.replace(auto, fusion_unit="chunk"))
    mapped = Application.workflow_settings(load_settings(fusion_unit="parent", child_chunk_tokens=64, parent_chunk_tokens=256))
    assert (mapped.fusion_unit, mapped.child_chunk_tokens) == ("parent", 64)
    assert Application.workflow_settings(load_settings()).fusion_unit == "chunk"


@pytest.mark.parametrize(("long_query", "first"), [(False, "b#p0c0"), (True, "a#p0c1")])
def test_the_fuse_node_fuses_a_long_query_per_parent(long_query: bool, first: str) -> None:
    deps = WorkflowDeps(embedder=None, sparse=None, vectors=None, metadata=None, analyzer=None, settings=SETTINGS)  # type: ignore[arg-type]
    dense, keyword = _split_evidence()
    state = QueryState(options=QueryOptions("a query", 5, strategy=Strategy.HYBRID), pool=40,
                       legs={"dense:0": dense, "keyword:0": keyword}, long_query=long_query)
    fused = asyncio.run(nodes.fuse(state, deps))["fused"]
    assert fused[0].chunk_id == first


hits_strategy = st.lists(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 2), st.integers(0, 3)), max_size=10, unique=True), min_size=1, max_size=3
)


@given(hits_strategy, st.lists(st.floats(0.1, 2.0), min_size=3, max_size=3))
def test_per_parent_fusion_agrees_with_the_plain_definition(raw: list[list[tuple[str, int, int]]], weights: list[float]) -> None:
    lists = [[_hit(f"{d}#p{p}c{c}", 1.0 - i / 100) for i, (d, p, c) in enumerate(hits)] for hits in raw]
    w = weights[: len(lists)]
    fused = fuse_lists(lists, w, SETTINGS, Fusion.RRF, 1000, by_parent=True)
    # Plain definition: a parent scores the sum over legs of w / (k + its rank among the leg's distinct parents).
    expected: dict[str, float] = {}
    for hits, wi in zip(lists, w, strict=True):
        ranked = list(dict.fromkeys(h.parent_chunk_id for h in hits))
        for r, parent in enumerate(ranked, start=1):
            expected[parent] = expected.get(parent, 0.0) + wi / (10.0 + r)
    children = {h.chunk_id for hits in lists for h in hits}
    assert sorted(h.chunk_id for h in fused) == sorted(children)
    for h in fused:
        assert h.score == pytest.approx(expected[h.parent_chunk_id])
    assert all(x.score >= y.score - 1e-12 for x, y in zip(fused, fused[1:]))
    # Each parent's children are contiguous.
    order = [h.parent_chunk_id for h in fused]
    assert all(order.index(p) + order.count(p) - 1 == max(i for i, q in enumerate(order) if q == p) for p in set(order))


def test_document_evidence_applies_to_queries_fused_per_chunk_only() -> None:
    settings = dataclasses.replace(SETTINGS, document_evidence=0.25)
    deps = WorkflowDeps(embedder=None, sparse=None, vectors=None, metadata=None, analyzer=None, settings=settings)  # type: ignore[arg-type]

    def fused(long_query: bool) -> dict[str, float]:
        state = QueryState(options=QueryOptions("a query", 5, strategy=Strategy.HYBRID), pool=40,
                           legs=dict(zip(("dense:0", "keyword:0"), _split_evidence(), strict=True)), long_query=long_query)
        return {h.chunk_id: h.score for h in asyncio.run(nodes.fuse(state, deps))["fused"]}

    sibling = 1 / 11 + 1 / 14  # a#p0c1 and a#p0c2 per chunk
    assert fused(False)["a#p0c1"] == pytest.approx(sibling + 0.25 * sibling)
    # Per parent the siblings already share the parent's score; nothing is added twice.
    assert fused(True)["a#p0c1"] == pytest.approx(2 / 11) and fused(True)["a#p0c2"] == pytest.approx(2 / 11)
