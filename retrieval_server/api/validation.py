"""Request limits. Every message names the field and the limit that was broken."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from retrieval_server.config import Settings
from retrieval_server.domain import InvalidArgument
from retrieval_server.identifiers import MAX_DOCUMENT_ID_CHARS, clean_identifier, has_visible_text, trim

T = TypeVar("T")


def query_text(raw: str, s: Settings, field: str = "query") -> str:
    """Long text is accepted up to ``query_max_bytes`` (UTF-8); the model reads its first
    ``max_seq_length`` tokens and keyword search its first ``query_max_terms`` distinct terms."""
    # Zero-width characters trim like white space: a query of nothing else is empty.
    try:
        text = trim(raw, field, s.query_max_bytes, "bytes in UTF-8")  # no more characters than bytes
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None
    if len(text) < s.query_min_chars:
        raise InvalidArgument(f"{field} must be at least {s.query_min_chars} characters after trimming (got {len(text)})")
    # Control characters are not trimmed (one may sit between words) but alone they tokenize to
    # nothing: "\x00" was answered with whatever documents its empty embedding came nearest to.
    if not has_visible_text(text):
        raise InvalidArgument(f"{field} must hold at least 1 visible character after trimming (got {len(text)}: white space, control and format characters only)")
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
    try:
        return tuple(clean_identifier(i, f"{field}[{n}]", MAX_DOCUMENT_ID_CHARS) for n, i in enumerate(ids))
    except ValueError as exc:
        raise InvalidArgument(str(exc)) from None


#: violations the message names (the BadRequest lists more: see :mod:`retrieval_server.api.errors`)
MESSAGE_VIOLATIONS = 3


class Violations:
    """Every invalid field of a request, reported together (one google.rpc.BadRequest violation each)."""

    def __init__(self) -> None:
        self._found: list[tuple[str, str]] = []

    def check(self, validate: Callable[..., T], *args: Any) -> T | None:
        """``validate(*args)``, or None with its violation recorded."""
        try:
            return validate(*args)
        except InvalidArgument as exc:
            self._found.extend(exc.violations)
            return None

    def add(self, field: str, description: str) -> None:
        self._found.append((field, description))

    def raise_if_any(self) -> None:
        if self._found:
            shown = "; ".join(d for _, d in self._found[:MESSAGE_VIOLATIONS])
            more = len(self._found) - MESSAGE_VIOLATIONS
            raise InvalidArgument(shown + (f"; and {more} more" if more > 0 else ""), violations=tuple(self._found))
