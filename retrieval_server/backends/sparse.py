"""BM25 sparse vectors, tokenized by Qdrant's own BM25 (English stemming and stopwords).

Documents carry term frequencies with BM25 length normalization; queries carry unit weights.
IDF is applied by the engine (the sparse vector is declared with the IDF modifier), so the
statistics follow the collection without re-indexing; deleted points count in them until the
engine vacuums their segment (qdrant-edge: see ``edge.VACUUM_DELETED_SHARE``).

The title as a weighted field (BM25F, Robertson et al. 2004, with one length normalization over
the weighted fields): a term's frequency is ``tf(text) + w * tf(title)`` and the length is
``len(text) + w * len(title)`` before saturation, which is exactly BM25 over the text followed by
the title repeated ``w`` times.
"""

from __future__ import annotations

import qdrant_edge as qe

from retrieval_server.domain import SparseVector


class Bm25Encoder:
    def __init__(self, avg_len: float = 128.0) -> None:
        self._model = qe.Bm25(qe.Bm25Config(avg_len=avg_len))

    def document(self, text: str) -> SparseVector:
        v = self._model.embed_document(text)
        return SparseVector(tuple(v.indices), tuple(v.values))

    def titled_document(self, text: str, title: str, weight: int) -> SparseVector:
        """BM25F: the title as a field of weight ``weight`` (an integer, so the repetition is exact)."""
        return self.document(" ".join([text, *([title] * weight)]) if title and weight > 0 else text)

    def query(self, text: str) -> SparseVector:
        v = self._model.embed_query(text)
        return SparseVector(tuple(v.indices), tuple(v.values))
