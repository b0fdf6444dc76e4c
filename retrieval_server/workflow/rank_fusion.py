"""Fusion of the legs' ranked hit lists through scoring_core, per chunk or per parent.

The legs rank child chunks. A query no longer than a child can be matched by one child, and the
legs mostly agree on which one: fusing chunks keeps that child's evidence together. A query
with more tokens than a child holds cannot fit in any child, so its parts are matched by
different children of the same parent, one leg finding one and another leg another: fused per
chunk, that parent's evidence is split over several fused scores and loses to a parent whose
single child both legs happen to rank. Such queries are fused per parent: each leg ranks a
parent by its best child (MaxP), and those ranks are fused. The parent is also the unit the
service returns. On the tuning splits this lifts long queries and leaves every shorter query
as it was, while fusing every query per parent loses on sentence queries; once a long query's
windows are searched (``query_windows``), whose fold already gathers a parent's evidence on the
dense side, fusing per chunk is the better of the two, so ``chunk`` is the default and ``auto``
serves deployments that turn the windows off (README, "Sixth round").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Literal

import numpy as np

from retrieval_server.domain import Fusion, VectorHit, parent_point_of, point_of
from retrieval_server.workflow.state import WorkflowSettings
from scoring_core import rrf, score_fusion

FusionUnit = Literal["auto", "chunk", "parent"]


def fuses_by_parent(long_query: bool, settings: WorkflowSettings) -> bool:
    """Whether a query's legs are fused per parent. Under ``auto``: when it is ``long_query``, longer
    than a child chunk (``query_windows.cut`` finds windows in it); no length is guessed or tuned."""
    if settings.fusion_unit == "auto":
        return long_query
    return settings.fusion_unit == "parent"


def fuse_lists(
    lists: list[list[VectorHit]], weights: list[float], settings: WorkflowSettings, fusion: Fusion, limit: int, *, by_parent: bool = False
) -> list[VectorHit]:
    """Ranked hit lists (best first) fused into one list of child hits, best first, at most
    ``limit`` of them.

    Per chunk, each hit scores its fused score. Per parent, every hit scores its parent's fused
    score, so grouping ranks the parents as fused; within a parent the children keep their order
    of the fusion per chunk (the child the legs agree on first)."""
    if not by_parent:
        return _fuse(lists, weights, settings, fusion, limit, point_of)
    parents = _fuse(lists, weights, settings, fusion, limit, parent_point_of)
    rank = {parent_point_of(h): i for i, h in enumerate(parents)}
    chunks = _fuse(lists, weights, settings, fusion, sum(map(len, lists)), point_of)
    # sorted() is stable: the children of one parent stay together, in their per-chunk order.
    ranked = sorted((h for h in chunks if parent_point_of(h) in rank), key=lambda h: rank[parent_point_of(h)])
    return [h.scored(parents[rank[parent_point_of(h)]].score) for h in ranked[:limit]]


def _fuse(
    lists: list[list[VectorHit]], weights: list[float], settings: WorkflowSettings, fusion: Fusion, limit: int, unit: Callable[[VectorHit], Hashable]
) -> list[VectorHit]:
    """Fusion of the lists' units (integer codes for the kernels), each unit at its first, best
    place in a list; the result holds each unit's first hit, rescored."""
    codes: dict[Hashable, int] = {}
    hit_of: dict[int, VectorHit] = {}
    firsts: list[dict[int, float]] = []
    for hits in lists:
        first: dict[int, float] = {}
        for h in hits:
            code = codes.setdefault(unit(h), len(codes))
            if code not in first:
                first[code] = h.score
                hit_of.setdefault(code, h)
        firsts.append(first)
    id_lists = [np.fromiter(f, dtype=np.int64, count=len(f)) for f in firsts]
    if fusion is Fusion.WEIGHTED:
        score_lists = [np.fromiter(f.values(), dtype=np.float64, count=len(f)) for f in firsts]
        fused = score_fusion(id_lists, score_lists, weights, settings.score_normalization, limit=limit)  # type: ignore[arg-type]
    else:
        fused = rrf(id_lists, k=settings.rrf_k, weights=weights, limit=limit)
    return [hit_of[c].scored(sc) for c, sc in zip(fused.ids.tolist(), fused.scores.tolist(), strict=True)]
