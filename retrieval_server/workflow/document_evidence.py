"""Document evidence from several chunks: each fused chunk also counts its document's next-best chunks.

A document that several passages of the fused list point to is more likely relevant than one with
a single lucky passage (passage-level evidence combined into a document score, Callan 1994; the
"best passage plus a share of the rest" form keeps the best passage dominant, so one long
document cannot win on many weak passages). Each chunk gains ``share`` times the fused scores of
its document's best ``others`` other chunks: a document's best chunk scores
``best + share * (second + third)``, and the order of a document's own chunks is unchanged.
"""

from __future__ import annotations

from retrieval_server.domain import VectorHit


def rescore(hits: list[VectorHit], share: float, others: int = 2) -> list[VectorHit]:
    """``hits`` in descending score order (a fused list), rescored and re-sorted."""
    if share <= 0 or not hits:
        return hits
    best: dict[str, list[float]] = {}
    for h in hits:
        scores = best.setdefault(h.document_id, [])
        if len(scores) <= others:
            scores.append(h.score)
    seen: dict[str, int] = {}
    out: list[VectorHit] = []
    for h in hits:
        position = seen.get(h.document_id, 0)
        seen[h.document_id] = position + 1
        top = best[h.document_id]
        # The best `others` scores of the document's other chunks.
        evidence = sum(top) - h.score if position < len(top) else sum(top[:others])
        out.append(h.scored(h.score + share * evidence))
    out.sort(key=lambda h: -h.score)
    return out
