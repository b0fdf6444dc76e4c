"""Sentences of the returned contexts, the material of extractive answers and summaries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval_server.domain import RetrievedContext
from retrieval_server.ingest.graph_extraction import sentences_of


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str
    #: the context it comes from: its position (from 1) in the response, the [n] that cites it
    context: int
    #: order inside that context
    position: int


def sentences_of_contexts(contexts: Sequence[RetrievedContext], limit: int = 80, min_words: int = 4) -> list[Sentence]:
    """Sentences of every context, best context first, at most ``limit`` (bounded cost for ranking)."""
    out: list[Sentence] = []
    for i, c in enumerate(contexts, 1):
        for j, text in enumerate(sentences_of(c.parent.content)):
            if len(text.split()) >= min_words and not text.lstrip().startswith("#"):
                out.append(Sentence(text, i, j))
                if len(out) >= limit:
                    return out
    return out

