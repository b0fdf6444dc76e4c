"""Request limits. Every message names the field and the limit that was broken."""

from __future__ import annotations

from collections.abc import Sequence

from retrieval_server.config import Settings
from retrieval_server.domain import InvalidArgument


def query_text(raw: str, s: Settings, field: str = "query") -> str:
    """Long text is accepted up to ``query_max_bytes`` (UTF-8); the model reads its first
    ``max_seq_length`` tokens and keyword search its first ``query_max_terms`` distinct terms."""
    text = raw.strip()
    if len(text) < s.query_min_chars:
        raise InvalidArgument(f"{field} must be at least {s.query_min_chars} characters after trimming (got {len(text)})")
    size = len(text.encode("utf-8"))
    if size > s.query_max_bytes:
        raise InvalidArgument(f"{field} must be at most {s.query_max_bytes} bytes in UTF-8 after trimming (got {size})")
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
    cleaned = tuple(i.strip() for i in ids)
    if any(not i for i in cleaned):
        raise InvalidArgument(f"{field} must not contain empty ids")
    return cleaned
