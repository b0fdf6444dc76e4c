"""Request limits. Every message names the field and the limit that was broken."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval_server.config import Settings
from retrieval_server.domain import InvalidArgument
from retrieval_server.identifiers import MAX_DOCUMENT_ID_CHARS, clean_identifier, trim


def query_text(raw: str, s: Settings, field: str = "query") -> str:
    # Zero-width characters trim like white space: a query of nothing else is empty.
    text = trim(raw)
    if not s.query_min_chars <= len(text) <= s.query_max_chars:
        raise InvalidArgument(
            f"{field} must be {s.query_min_chars} to {s.query_max_chars} characters after trimming (got {len(text)})"
        )
    return text


def top_k(raw: int, default: int, maximum: int, field: str = "top_k") -> int:
    if raw == 0:
        return default
    if not 1 <= raw <= maximum:
        raise InvalidArgument(f"{field} must be between 1 and {maximum} (got {raw}; 0 means {default})")
    return raw


def document_ids(ids: Sequence[str], maximum: int, field: str) -> tuple[str, ...]:
    if len(ids) > maximum:
        raise InvalidArgument(f"{field} may list at most {maximum} ids (got {len(ids)})")
    try:
        return tuple(clean_identifier(i, f"{field}[{n}]", MAX_DOCUMENT_ID_CHARS) for n, i in enumerate(ids))
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
