"""Identifiers and text as every entry point cleans them, so that what is stored can be found again.

A document id ingested as " a " used to be stored with its spaces while delete stripped them, so
the document could never be deleted. Every entry point (ingest, JSONL rows, delete, filters, owners,
grants, caller identities) now goes through :func:`clean_identifier`.
"""

from __future__ import annotations

import unicodedata

MAX_DOCUMENT_ID_CHARS = 200
MAX_USER_ID_CHARS = 255


def _invisible(ch: str) -> bool:
    # White space, and format characters such as zero-width spaces and joiners (category Cf).
    return ch.isspace() or unicodedata.category(ch) == "Cf"


def trim(text: str) -> str:
    """NFC, without leading or trailing white space or zero-width characters."""
    text = unicodedata.normalize("NFC", text)
    start, end = 0, len(text)
    while start < end and _invisible(text[start]):
        start += 1
    while end > start and _invisible(text[end - 1]):
        end -= 1
    return text[start:end]


def clean_identifier(raw: str, field: str, max_chars: int) -> str:
    """The identifier trimmed (see :func:`trim`); ValueError naming ``field`` when it is empty, too
    long, or holds control characters."""
    value = trim(raw)
    if not 1 <= len(value) <= max_chars:
        raise ValueError(f"{field} must be 1 to {max_chars} characters after trimming (got {len(value)})")
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise ValueError(f"{field} must not contain control characters")
    return value
