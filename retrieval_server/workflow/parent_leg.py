"""The parent and document legs of multi-granularity retrieval: the query against the parents' own vectors.

A parent vector embeds a whole section (or a whole short document, title first), so it sees a
match that no 128-token child holds. The document leg searches only each document's first parent:
its vector is the title and the document's first model window (256 tokens), what a
whole-document embedding (MTEB's protocol) holds. Their hits must fuse with the child legs on the
same keys, or RRF would count a parent and its children as different candidates: each parent hit
is reported as the child of that parent that the other legs ranked best, else as the parent's
first child.
"""

from __future__ import annotations

from collections.abc import Collection

from retrieval_server.domain import VectorHit, parent_point_of


def as_children(parent_hits: list[VectorHit], other_legs: dict[str, list[VectorHit]]) -> list[VectorHit]:
    """Parent hits (in rank order, carrying their first child) mapped onto the best-ranked child hit."""
    best: dict[tuple[str, str], tuple[int, VectorHit]] = {}
    for hits in other_legs.values():
        for rank, h in enumerate(hits):
            point = parent_point_of(h)
            known = best.get(point)
            if known is None or rank < known[0]:
                best[point] = (rank, h)
    out = []
    for p in parent_hits:
        child = best.get(parent_point_of(p))
        out.append((child[1] if child else p).scored(p.score))
    return out


#: the dense legs: one query embedding against three granularities of the documents, and the
#: feedback search (dense_feedback), a second opinion at the children's granularity
DENSE_GRANULARITIES = ("dense", "parent", "document", "feedback")


def dense_shares(kinds: Collection[str], query_words: int, crossover_words: float) -> dict[str, float]:
    """Each dense leg's share of the dense weight; the shares sum to 1, so that adding a
    granularity never tips the dense-vs-keyword balance.

    A long query is matched by a long text rather than by one passage of it: the document leg
    takes ``n / (n + c)`` for a query of ``n`` words (``c``: ``crossover_words``, where both count
    the same), the finer legs (children, parents) share the rest equally. The feedback search
    halves the children's share with them: it searches the same vectors with a moved query.
    """
    # Without the children's own leg (failed), the feedback search stands in for it.
    present = [k for k in DENSE_GRANULARITIES if k in kinds and not (k == "feedback" and "dense" in kinds)]
    if "document" not in present or len(present) == 1:
        shares = {k: 1.0 / len(present) for k in present}
    else:
        document = query_words / (query_words + crossover_words) if crossover_words > 0 else 0.5
        finer = [k for k in present if k != "document"]
        shares = {"document": document, **{k: (1.0 - document) / len(finer) for k in finer}}
    if "feedback" in kinds and "dense" in shares:
        shares["dense"] = shares["feedback"] = shares["dense"] / 2
    return shares
