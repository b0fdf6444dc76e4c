"""A model's text, less a last sentence it did not finish."""

from __future__ import annotations

import re

from retrieval_server.backends.llm import Completion

#: where a sentence ends: its stop, closing quotes or brackets, then citations after it ("... fails. [2]")
_SENTENCE_END = r"[.!?][\"'”’)\]]*(?:\s*\[\d+(?:\s*[,;]\s*\d+)*\])*"
_ENDS_A_SENTENCE = re.compile(_SENTENCE_END + r"\s*$")
_SENTENCE_ENDS = re.compile(_SENTENCE_END + r"(?=\s)")


def whole_sentences(text: str) -> tuple[str, bool]:
    """``text`` without the sentence max_tokens (or a closed stream) cut short, and whether there
    was one: only a truncated :class:`Completion` that stops mid-sentence loses anything."""
    if not (isinstance(text, Completion) and text.truncated) or _ENDS_A_SENTENCE.search(text):
        return str(text), False
    ends = [m.end() for m in _SENTENCE_ENDS.finditer(text)]
    return (text[: ends[-1]] if ends else ""), True
