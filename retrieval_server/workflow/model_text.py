"""A model's text, less a last sentence it did not finish."""

from __future__ import annotations

import re

from retrieval_server.backends.llm import Completion
from retrieval_server.ingest.chunker import STOP_ALONE

#: after a stop: closing quotes or brackets, then citations ("... fails. [2]")
_CLOSE = r"[\"'”’)\]」』）]*(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])*"
# STOP_ALONE: without it, a Japanese answer cut short lost every sentence, none seen to end.
_ENDS_A_SENTENCE = re.compile(rf"(?:[.!?]|{STOP_ALONE}){_CLOSE}\s*$")
_SENTENCE_ENDS = re.compile(rf"[.!?]{_CLOSE}(?=\s)|{STOP_ALONE}{_CLOSE}")


def whole_sentences(text: str) -> tuple[str, bool]:
    """``text`` without the sentence max_tokens (or a closed stream) cut short, and whether there
    was one: only a truncated :class:`Completion` that stops mid-sentence loses anything."""
    if not (isinstance(text, Completion) and text.truncated) or _ENDS_A_SENTENCE.search(text):
        return str(text), False
    ends = [m.end() for m in _SENTENCE_ENDS.finditer(text)]
    return (text[: ends[-1]] if ends else ""), True
