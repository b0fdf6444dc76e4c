"""Sentences of the returned contexts, the material of extractive answers and summaries."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval_server.domain import RetrievedContext
from retrieval_server.ingest.graph_extraction import sentences_of
from retrieval_server.workflow.adaptive import UNSPACED

#: the punctuation of Han and kana text (、。「」, full-width ！？（）), which is no word of its own
_UNSPACED_MARKS = re.compile(r"[\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]")


#: a document's own reference markers ("benchmarks [2].", "[3, 4]"): copied into an answer, they
#: read as citations of its contexts, of another one or of none
_BRACKETED_NUMBERS = re.compile(r"\[(\s*\d+(?:\s*[,;]\s*\d+)*\s*)\]")


def _words(text: str) -> int:
    # Counted by split(), a Japanese sentence was one word, never a candidate.
    return len(UNSPACED.findall(text)) + len(_UNSPACED_MARKS.sub(" ", UNSPACED.sub(" ", text)).split())


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str
    #: the context it comes from: its position (from 1) in the response, the [n] that cites it
    context: int
    #: order inside that context
    position: int


def sentences_of_contexts(contexts: Sequence[RetrievedContext], limit: int = 80, min_words: int = 4) -> list[Sentence]:
    """Sentences of every context, best context first, at most ``limit`` (bounded cost for ranking),
    their bracketed numbers in parentheses: an answer's brackets are its citations."""
    out: list[Sentence] = []
    for i, c in enumerate(contexts, 1):
        for j, text in enumerate(sentences_of(c.parent.content)):
            if _words(text) >= min_words and not text.lstrip().startswith("#"):
                out.append(Sentence(_BRACKETED_NUMBERS.sub(r"(\1)", text), i, j))
                if len(out) >= limit:
                    return out
    return out

