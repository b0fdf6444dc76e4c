"""A model's text, less a last sentence it did not finish."""

from __future__ import annotations

import re

from retrieval_server.backends.llm import CHARS_PER_TOKEN, Completion
from retrieval_server.ingest.chunker import STOP_ALONE

#: after a stop: closing quotes or brackets, then citations ("... fails. [2]")
_CLOSE = r"[\"'”’)\]」』）]*(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])*"
# STOP_ALONE: without it, a Japanese answer cut short lost every sentence, none seen to end.
_ENDS_A_SENTENCE = re.compile(rf"(?:[.!?]|{STOP_ALONE}){_CLOSE}\s*$")
_SENTENCE_ENDS = re.compile(rf"[.!?]{_CLOSE}(?=\s)|{STOP_ALONE}{_CLOSE}")


def within_budget(text: str, max_tokens: int) -> tuple[str, bool]:
    """``text``, cut (as a truncated :class:`Completion`) when it runs past what ``max_tokens``
    can hold (see :data:`CHARS_PER_TOKEN`), and whether it was."""
    budget = max_tokens * CHARS_PER_TOKEN
    return (text, False) if len(text) <= budget else (Completion.of(text[:budget], True), True)


def whole_sentences(text: str) -> tuple[str, bool]:
    """``text`` without the sentence max_tokens (or a closed stream) cut short, and whether there
    was one: only a truncated :class:`Completion` that stops mid-sentence loses anything."""
    if not (isinstance(text, Completion) and text.truncated) or _ENDS_A_SENTENCE.search(text):
        return str(text), False
    ends = [m.end() for m in _SENTENCE_ENDS.finditer(text)]
    return (text[: ends[-1]] if ends else ""), True
