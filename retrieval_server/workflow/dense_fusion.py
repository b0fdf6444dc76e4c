"""The dense granularities fused by their raw cosines (CombMAX), not by rank.

The child, parent and document legs search one query vector with one model, so their cosines
share a scale: a document's dense score is its best cosine at any granularity. A sentence-long
query matches the child that holds it better than any whole document (the child wins); a long
query matches a whole section or document better than any 128-token passage of it (the coarser
vector wins), with no query-length parameter. Rank fusion of the same legs has to guess each
granularity's share from the query's length (``parent_leg.dense_shares``), and a list's ranks
cannot tell a close second from a distant one. On the tuning splits this fusion is above the
child leg and the document vector alone on long queries, and at least the child leg on short
ones (README, "Fourth round").
"""

from __future__ import annotations

from retrieval_server.domain import VectorHit, point_of

#: the legs that search the query's own vector (variant 0); other variants (reformulations, HyDE)
#: and the feedback search use other vectors, whose cosines are not comparable, and stay legs of
#: their own in rank fusion
SAME_VECTOR = ("dense:0", "parent:0", "document:0")


def max_cosine(lists: list[list[VectorHit]]) -> list[VectorHit]:
    """One list of chunks, each with its best cosine over ``lists`` (hits of the coarser legs are
    already mapped onto children: ``parent_leg.as_children``), best first."""
    best: dict[tuple[str, str], VectorHit] = {}
    for hits in lists:
        for h in hits:
            point = point_of(h)
            known = best.get(point)
            if known is None or h.score > known.score:
                best[point] = h
    return sorted(best.values(), key=lambda h: -h.score)


def fold_granularities(legs: list[tuple[str, list[VectorHit]]]) -> list[tuple[str, list[VectorHit]]]:
    """``legs`` with the same-vector dense legs replaced by their CombMAX, as the one ``dense:0``
    leg (so that it takes the whole dense weight in rank fusion); unchanged with fewer than two."""
    same = [hits for leg, hits in legs if leg in SAME_VECTOR]
    if len(same) < 2:
        return legs
    return [("dense:0", max_cosine(same)), *((leg, hits) for leg, hits in legs if leg not in SAME_VECTOR)]
