"""Sentences of the returned contexts, the material of extractive answers and summaries."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval_server.domain import RetrievedContext
from retrieval_server.ingest.chunker import CLOSERS, STOP_ALONE
from retrieval_server.ingest.graph_extraction import sentences_with_headings
from retrieval_server.ingest.markdown import ATX_HEADING
from retrieval_server.workflow.adaptive import UNSPACED

#: the punctuation of Han and kana text (、。「」, full-width ！？（）), which is no word of its own
_UNSPACED_MARKS = re.compile(r"[\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]")

#: a statement's end (a full stop in Latin, Han or Devanagari script), closing quotes and brackets
#: after it: a heading line ending in ! or ? is a title ("## Why use gRPC?", "## Warning: never
#: share the key!"), which answers nothing
_STATEMENT_END = re.compile(rf"[.。।॥]{CLOSERS}$")

_MARKERS = r"(?:\[\d{1,4}(?:\s*[,;]\s*\d{1,4})*\])+"
#: a run of markers ("[1]", "[1][3]", "[1, 3]") of at most four digits, as no answer has more
#: contexts (a longer number overflowed int() into INTERNAL). After a space or a stop, anywhere;
#: right after a word or a closing parenthesis ("Chen[1].") only at the end of a sentence, and not
#: [0]: "argv[0]" and "rows[1][2] first" index something, and were cut from the text and cited.
#: A sentence's end is a CJK stop too ("负责登录[1]。"): a Chinese answer cited nothing, and fell back.
#: A match starts where a run of white space does (or at a marker right after a word): from every
#: place inside a run, \s* took the rest of it again, quadratic (6 s on the event loop for 8,000
#: spaces in a model's answer).
CITATION = re.compile(rf"(?<!\s)\s*(?:(?<![\w\])]){_MARKERS}|(?<=[\w)])(?!\[0+\])(?={_MARKERS}(?:[.!?]|{STOP_ALONE}|\s*$)){_MARKERS})")


def uncited(text: str) -> str:
    """A document's own reference markers ("benchmarks [2].", "full [7]."), in parentheses: copied
    into an answer they read as citations of its contexts, of another one or of none. Only what an
    answer's citations are read from: "argv[0]" is copied as written."""
    return CITATION.sub(lambda m: m.group(0).replace("[", "(").replace("]", ")"), text)


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
        for j, (text, in_heading) in enumerate(sentences_with_headings(c.parent.content)):
            # A heading states nothing: whole ("## How do I rotate the key?", a "# comment" in fenced
            # code, and "# of failed logins rose." in a .txt with it), or its title once its number's
            # stop cut it ("Create a new branch for the release" of "## 2. Create ..."). A statement
            # after a heading's first sentence on its line is one; "#5 is the step ..." is no heading.
            if _words(text) >= min_words and not ATX_HEADING.fullmatch(text) and not (in_heading and not _STATEMENT_END.search(text)):
                out.append(Sentence(uncited(text), i, j))
                if len(out) >= limit:
                    return out
    return out

