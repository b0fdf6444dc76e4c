"""The parent leg of multi-granularity retrieval: the query against the parents' own vectors.

A parent vector embeds a whole section (or a whole short document, title first), so it sees a
match that no 128-token child holds. Its hits must fuse with the child legs on the same keys, or
RRF would count a parent and its children as different candidates: each parent hit is reported
as the child of that parent that the other legs ranked best, else as the parent's first child.
"""

from __future__ import annotations

import dataclasses

from retrieval_server.domain import VectorHit


def as_children(parent_hits: list[VectorHit], other_legs: dict[str, list[VectorHit]]) -> list[VectorHit]:
    """Parent hits (in rank order, carrying their first child) mapped onto the best-ranked child hit."""
    best: dict[str, tuple[int, VectorHit]] = {}
    for hits in other_legs.values():
        for rank, h in enumerate(hits):
            known = best.get(h.parent_chunk_id)
            if known is None or rank < known[0]:
                best[h.parent_chunk_id] = (rank, h)
    out = []
    for p in parent_hits:
        child = best.get(p.parent_chunk_id)
        out.append(dataclasses.replace(child[1] if child else p, score=p.score))
    return out
