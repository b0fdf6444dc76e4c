"""Identifiers and text as every entry point cleans them, so that what is stored can be found again.

A document id ingested as " a " used to be stored with its spaces while delete stripped them, so
the document could never be deleted. Every entry point (ingest, JSONL rows, delete, filters, owners,
grants, caller identities) now goes through :func:`clean_identifier`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping

import numpy as np

#: a Han or kana character: scripts written without spaces between words, so that each character
#: is read as a word (ADAPTIVE's count, the metadata leg's terms) and runs of them are cut into
#: bigrams for the keyword leg. One class for all three, or the same text read three ways.
UNSPACED_CHAR = "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"

MAX_DOCUMENT_ID_CHARS = 200
MAX_USER_ID_CHARS = 255
#: Limits of what a document says about itself. Every context of an answer carries them back
#: (up to 100 a Query), so an unbounded field could make every answer citing the document larger
#: than a client (4 MiB by default in gRPC) or the server (MAX_MESSAGE_MB) accepts. A URL of 8,192
#: characters is what HTTP asks every implementation to handle (RFC 9110, 4.1).
MAX_TITLE_CHARS = 1_024
MAX_URL_CHARS = 8_192
MAX_SOURCE_CHARS = 1_024
MAX_FILENAME_CHARS = 1_024
MAX_METADATA_BYTES = 16_384
#: users granted one document: every chunk of it carries its readers, and every query citing it
#: reads them; more readers than this are a group's (``group:<name>``)
MAX_GRANTEES = 1_000
#: groups a caller's token may name: every read lists the caller's principals, and a few thousand
#: made statements the stores refuse (an identity provider with more sends an overage claim)
MAX_GROUPS = 1_000
#: how a grant names a group; a user id never starts with it, or a user named ``group:x`` would
#: read what is granted to the group ``x``
GROUP_PREFIX = "group:"


def _invisible(ch: str) -> bool:
    # White space, and format characters such as zero-width spaces and joiners (category Cf).
    return ch.isspace() or unicodedata.category(ch) == "Cf"


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds a character that is neither white space nor a format or control
    character: zero-width spaces, BOMs or NULs alone tokenize to nothing, and a chunk of them,
    embedded from an empty input, topped searches it has nothing to do with."""
    return any(not (ch.isspace() or unicodedata.category(ch) in ("Cf", "Cc")) for ch in text)


#: format characters that only say where a word may or may not break (soft hyphen, zero-width
#: space, word joiner, and the BOM as a zero-width no-break space): invisible, yet the keyword and
#: metadata tokenizers cut a word at each, so "co&shy;ordinated" was "co" and "ordinated". The
#: zero-width joiner and non-joiner stay: they change how letters join (Persian, Indic scripts, emoji).
_BREAK_HINTS = dict.fromkeys(map(ord, "\u00ad\u200b\u2060\ufeff"))


def without_break_hints(text: str) -> str:
    """``text`` without the characters of :data:`_BREAK_HINTS`, as the words it shows are searched."""
    return text.translate(_BREAK_HINTS)


#: the longest run of combining marks text may hold (UAX #15's stream-safe bound): NFC puts a run
#: in order by insertion, in time quadratic in its length (a 160 KB run held the event loop 5 s);
#: no language stacks more than a handful on one letter
MAX_COMBINING_RUN = 30
#: how much longer than its limit text may come before trimming (white space around it)
RAW_SLACK = 4
#: the characters of combining class 0 that decompose into combining marks only (Tibetan vowel
#: signs, each two marks): NFC orders their marks as it orders a run of them
_TWO_MARKS = frozenset("\u0f73\u0f75\u0f81")


#: UAX #15's mark that ends a run of combining marks without changing how the text reads
COMBINING_GRAPHEME_JOINER = "\u034f"


@functools.cache
def _marks() -> np.ndarray:
    """How many combining marks each code point is in NFD (0 for a starter): one for most marks,
    two for those that decompose into two (U+0344, the Tibetan vowel signs), so that a text and its
    NFC count alike. The fixed table of this Python's Unicode database, built once (0.2 s)."""
    table = np.zeros(0x110000, dtype=np.uint8)
    for c in range(0x300, 0x110000):
        ch = chr(c)
        if unicodedata.combining(ch) or unicodedata.decomposition(ch):
            marks = unicodedata.normalize("NFD", ch)
            if all(unicodedata.combining(m) for m in marks):
                table[c] = len(marks)
    return table


def stream_safe(text: str) -> str:
    """``text`` with a combining grapheme joiner after every :data:`MAX_COMBINING_RUN` combining
    marks in a row (UAX #15's Stream-Safe Text Format), so that normalizing it takes linear time;
    counted as in NFD, so that its NFC needs none more.

    For a document's text, which may hold what it likes: NFC puts a run of marks in order by
    insertion, and 160 KB of two alternating marks took 7.7 s in an ingest's thread, holding the
    GIL, while 16 MiB would have taken hours. Runs are found with numpy over the code points: a
    copy of four bytes and one of a byte per character, and masks of a byte."""
    if text.isascii():
        return text
    marks = _marks()[np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)]
    inside = np.zeros(len(marks) + 2, dtype=bool)
    np.not_equal(marks, 0, out=inside[1:-1])
    if not inside.any():
        return text
    edges = np.flatnonzero(inside[1:] != inside[:-1])
    # A run of fewer code points than this (each at most two marks) cannot be over the bound.
    shortest = MAX_COMBINING_RUN // 2 + 1
    runs = [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= shortest]
    if not runs:
        return text
    pieces, done = [], 0
    for start, end in runs:
        count = 0
        for i, weight in enumerate(marks[start:end].tolist(), start):
            count += weight
            if count > MAX_COMBINING_RUN:
                pieces.append(text[done:i])
                pieces.append(COMBINING_GRAPHEME_JOINER)
                done, count = i, weight
    pieces.append(text[done:])
    return "".join(pieces)


#: UTF-16 surrogates: in a str, never a pair, so never text
_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (which UTF-8, so protobuf, refuses) as U+FFFD; ``text``
    itself, whatever its str subclass, when it has none."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def composed(value: str) -> str:
    """A document's text as it is stored: NFC, as queries are ("Zürich" typed by a caller is one
    code point where a file, a PDF's extraction or a macOS name, may spell it "u" and a combining
    mark, which no keyword, name or title match would equate). A lone surrogate becomes U+FFFD: a
    PDF's ToUnicode map may name one (pypdf decodes it as it is), which the tokenizer, the stores
    and UTF-8 all refuse, each with its own exception, failing the whole request rather than one
    character. Made stream-safe first (:func:`stream_safe`): a document's runs of combining marks
    are its own, and normalizing a long one takes quadratic time."""
    return unicodedata.normalize("NFC", stream_safe(without_surrogates(value)))


def one_line(text: str) -> str:
    """``text``'s words with one space between them: a title is shown on one line, and padding or
    line breaks around or inside it were kept in every result."""
    return " ".join(text.split())


def cut_utf8(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8, an ellipsis where it was cut (what a response
    may carry of a caller's text: a status message, an ingest error's source). Below 3 bytes the
    ellipsis does not fit and is left out: the cut must keep the limit, which a response's size
    depends on."""
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= limit:
        return encoded.decode("utf-8")
    if limit < len("…".encode()):
        return encoded[: max(limit, 0)].decode("utf-8", "ignore")
    return encoded[: limit - 3].decode("utf-8", "ignore") + "…"


def composed_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """``metadata`` as it is stored, keys and values :func:`composed`. ValueError when two keys are
    one once composed ("Zu\u0308rich" and "Zürich")."""
    return metadata_each(metadata, composed, "once composed (NFC)")


def metadata_each(metadata: Mapping[str, str], clean: Callable[[str], str], cleaned: str) -> dict[str, str]:
    """``metadata``'s keys and values ``clean``-ed. ValueError when two keys are one once cleaned
    (``cleaned`` says how, for its message): one value would be dropped without a word."""
    out = {clean(k): clean(v) for k, v in metadata.items()}
    if len(out) < len(metadata):
        same = sorted(k for k in metadata if k != clean(k))
        raise ValueError(f"metadata keys {same[:3]} are other keys {cleaned}: send each key once")
    return out


def trim(text: str, field: str = "text", max_chars: int | None = None, unit: str = "characters") -> str:
    """NFC, without leading or trailing white space or zero-width characters.

    ValueError naming ``field`` when the text, without the white space around it, is longer than
    :data:`RAW_SLACK` times ``max_chars`` (the limit it is held to after trimming) or holds a run
    of more than :data:`MAX_COMBINING_RUN` combining marks: both are checked first, in linear
    time, so that neither normalizing nor trimming can take long. ``unit``: what the limit counts,
    as its message says (a query's is bytes of UTF-8, never fewer than its characters)."""
    text = text.strip()  # C's speed for the common padding; zero-width characters go below
    if max_chars is not None and len(text) > RAW_SLACK * max_chars:
        raise ValueError(f"{field} must be at most {max_chars} {unit} after trimming (got {len(text)} characters before)")
    if not text.isascii():
        run = 0
        for ch in text:
            run = run + 1 if unicodedata.combining(ch) else run + 2 if ch in _TWO_MARKS else 0
            if run > MAX_COMBINING_RUN:
                raise ValueError(f"{field} must not hold more than {MAX_COMBINING_RUN} combining marks in a row")
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
    value = trim(raw, field, max_chars)
    if not 1 <= len(value) <= max_chars:
        raise ValueError(f"{field} must be 1 to {max_chars} characters after trimming (got {len(value)})")
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise ValueError(f"{field} must not contain control characters")
    _check_unicode(value, field)
    return value


def _check_unicode(value: str, field: str) -> None:
    """ValueError naming ``field`` when ``value`` holds a lone surrogate: what Python makes of a
    file name that is not UTF-8, which the stores refuse with an error of their own that failed
    the whole ingest (gRPC carries only UTF-8, so only a command's or a library's call has one)."""
    if _SURROGATE.search(value):
        raise ValueError(f"{field} must be Unicode text (it holds a lone surrogate, as a file name that is not UTF-8 does)")


def clean_user_id(raw: str, field: str) -> str:
    """A caller's user id as :func:`clean_identifier` cleans it; ValueError naming ``field`` also when
    it starts with :data:`GROUP_PREFIX`."""
    value = clean_identifier(raw, field, MAX_USER_ID_CHARS)
    if value.startswith(GROUP_PREFIX):
        raise ValueError(f"{field} must not start with '{GROUP_PREFIX}': grants name groups that way")
    return value


def exact_identity(raw: str, field: str, max_chars: int = MAX_USER_ID_CHARS, user: bool = True) -> str:
    """A caller's user id (or, ``user=False``, group) taken as sent: ValueError naming ``field``
    when it is invalid or not what :func:`clean_user_id` makes of it. An identity provider tells
    "alice" from "alice\u200b" and " hr ": trimmed, either read the other's documents. Ids that
    arrive with documents are trimmed instead, so that an admin's typing finds them again."""
    value = clean_user_id(raw, field) if user else clean_identifier(raw, field, max_chars)
    if value != raw:
        raise ValueError(f"{field} must be sent as it is stored: in NFC, without white space or invisible characters around it (got {raw[:40]!r})")
    return value


def clean_grantee(raw: str, field: str) -> str:
    """A grantee as :func:`clean_identifier` cleans it, a group's name after :data:`GROUP_PREFIX`
    trimmed too; ValueError naming ``field`` when it is invalid or names a group of no name. A
    caller's groups arrive exact, never with white space around them: a grant to "group: hr" was
    stored as sent, and no member of hr ever read the document."""
    value = _group_trimmed(clean_identifier(raw, field, MAX_USER_ID_CHARS))
    most = MAX_USER_ID_CHARS - len(GROUP_PREFIX)
    if value.startswith(GROUP_PREFIX) and not 1 <= (got := len(value) - len(GROUP_PREFIX)) <= most:
        raise ValueError(f"{field} must name a group after '{GROUP_PREFIX}' of 1 to {most} characters after trimming (got {got})")
    return value


def _group_trimmed(grantee: str) -> str:
    """``grantee`` (trimmed) with the name of the group it grants, if any, trimmed as well."""
    return GROUP_PREFIX + trim(grantee[len(GROUP_PREFIX):]) if grantee.startswith(GROUP_PREFIX) else grantee


def check_grantees(user_ids: Iterable[str]) -> None:
    """ValueError naming the field and its limit when more than :data:`MAX_GRANTEES` distinct users
    (as :func:`clean_grantee` trims them: "group: hr" is "group:hr") are granted one document."""
    count = len({_group_trimmed(trim(u, "granted_user_ids", MAX_USER_ID_CHARS)) for u in user_ids})
    if count > MAX_GRANTEES:
        raise ValueError(f"granted_user_ids must hold at most {MAX_GRANTEES} users (got {count}): grant more through a group (group:<name>)")


#: the limit of each field a document describes itself with, in characters
DESCRIPTIVE_LIMITS = {"title": MAX_TITLE_CHARS, "url": MAX_URL_CHARS, "source": MAX_SOURCE_CHARS}


def check_descriptive_field(name: str, value: str) -> None:
    """ValueError starting with ``name`` (a key of :data:`DESCRIPTIVE_LIMITS`) when ``value`` is over
    its limit or not Unicode text."""
    limit = DESCRIPTIVE_LIMITS[name]
    if len(value) > limit:
        raise ValueError(f"{name} must be at most {limit} characters (got {len(value)})")
    _check_unicode(value, name)


def check_metadata(metadata: Mapping[str, str]) -> None:
    """ValueError starting with ``metadata`` when its keys and values are over their limit or not Unicode text."""
    for key, value in metadata.items():
        _check_unicode(key + value, "metadata")
    size = sum(len(k.encode("utf-8", "surrogatepass")) + len(v.encode("utf-8", "surrogatepass")) for k, v in metadata.items())
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"metadata must be at most {MAX_METADATA_BYTES} bytes of UTF-8 in its keys and values (got {size})")


def check_descriptive_fields(title: str, url: str, source: str, metadata: Mapping[str, str]) -> None:
    """ValueError naming the first field over its limit, and the limit (the message starts with the
    field's name, so that a caller can prefix where the document stands)."""
    for name, value in (("title", title), ("url", url), ("source", source)):
        check_descriptive_field(name, value)
    check_metadata(metadata)
