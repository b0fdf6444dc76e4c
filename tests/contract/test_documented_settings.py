"""Where callers read the settings, they are the server's: the contract's comments (its "Limits"
convention; stubs in other languages carry them to callers, who cannot read the server's code)
and the README's configuration table. Every RETRIEVAL_* they name is a setting, every default
they quote is the setting's default, and the table lists every setting; every `Message.field`
the comments name is a field of the contract."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import annotated_types
import pytest

from retrieval_server.config import DAY_S, Settings
from tests.support.paths import REPO

README = REPO / "README.md"
PROTOS = sorted((REPO / "protos").rglob("*.proto"))
#: A setting named in a comment, with what follows it in parentheses when anything does.
NAMED = re.compile(r"\bRETRIEVAL_([A-Z0-9_]*[A-Z0-9])(_\*)?(?: \(([^)]*)\))?")


def _comments(proto: Path) -> list[tuple[int, str]]:
    return [(n, line.split("//", 1)[1]) for n, line in enumerate(proto.read_text().splitlines(), 1) if "//" in line]


def _proto_identifiers() -> set[str]:
    """The enum values the contract defines (RETRIEVAL_METHOD_QUERY is one, not a setting)."""
    names: set[str] = set()
    for proto in PROTOS:
        names.update(re.findall(r"^\s*([A-Z][A-Z0-9_]*) = \d+;", proto.read_text(), flags=re.MULTILINE))
    return names


def test_a_field_a_comment_names_is_a_field_of_the_contract() -> None:
    """A comment's `Message.field` is what a caller looks up: events.proto sent them to
    QueryMetrics.degraded, a message the contract does not have (it is Metrics)."""
    from retrieval.v1 import events_pb2, retrieval_pb2

    messages = {**retrieval_pb2.DESCRIPTOR.message_types_by_name, **events_pb2.DESCRIPTOR.message_types_by_name}
    named = [(f"{proto.name}:{n}", m.group(1), m.group(2)) for proto in PROTOS for n, comment in _comments(proto)
             for m in re.finditer(r"\b([A-Z][A-Za-z0-9]*)\.([a-z][a-z0-9_]*)\b", comment)]
    assert len(named) >= 20  # the convention is in use: a change of it would make this vacuous
    unknown = [(where, f"{message}.{field}") for where, message, field in named
               if message not in messages or field not in messages[message].fields_by_name]
    assert unknown == []


def _quoted_default(text: str) -> str:
    """The value a comment quotes: the first word in the parentheses, without backticks, digit
    group commas or a unit ("3,600 s" -> "3600", "`rrf` by default" -> "rrf")."""
    return text.strip().split(" ")[0].rstrip(",").strip("`").replace(",", "")


def _mentions() -> list[tuple[str, str, str | None, bool]]:
    identifiers = _proto_identifiers()
    found = []
    for proto in PROTOS:
        for n, comment in _comments(proto):
            for m in NAMED.finditer(comment):
                name = m.group(1)
                if f"RETRIEVAL_{name}" in identifiers:
                    continue
                found.append((f"{proto.name}:{n}", name.lower(), m.group(3), m.group(2) is not None))
    return found


def test_the_contract_names_settings_with_defaults() -> None:
    """The checks below have something to check: a rename of the convention would make them vacuous."""
    mentions = _mentions()
    assert len(mentions) >= 30
    assert sum(quoted is not None for _, _, quoted, _ in mentions) >= 15


@pytest.mark.parametrize(("where", "name", "quoted", "prefix"), _mentions(), ids=lambda v: v if isinstance(v, str) else None)
def test_a_named_setting_exists_and_a_quoted_default_is_its_default(where: str, name: str, quoted: str | None, prefix: bool) -> None:
    fields = Settings.model_fields
    if prefix:  # RETRIEVAL_JWT_*: a family of settings
        assert any(f.startswith(f"{name}_") for f in fields), f"{where}: no setting starts with RETRIEVAL_{name.upper()}_"
        return
    assert name in fields, f"{where}: RETRIEVAL_{name.upper()} is not a setting"
    if quoted is None or not re.match(r"^`?[\w.,]", quoted):
        return
    default = fields[name].default
    assert _is_written_as(default, _quoted_default(quoted)), f"{where}: RETRIEVAL_{name.upper()} defaults to {default!r}, the comment says {quoted!r}"


@pytest.mark.parametrize(("comment", "value"), [("3,600 s", "3600"), ("`rrf` by default", "rrf"), ("`minmax`, or `dbsf`", "minmax"),
                                                ("1,000", "1000"), ("64 MiB", "64"), ("0.95", "0.95")])
def test_quoted_defaults_are_read_as_written(comment: str, value: str) -> None:
    assert _quoted_default(comment) == value


def _expanded(name: str) -> list[str]:
    """`A_{X,Y}_{B,C}`: every combination."""
    braces = re.search(r"\{([^}]*)\}", name)
    if braces is None:
        return [name]
    return [e for x in braces.group(1).split(",") for e in _expanded(name[: braces.start()] + x + name[braces.end():])]


def _table_names(cell: str, fields: Iterable[str]) -> list[str]:
    """The settings a table row names: `RETRIEVAL_A_B`, then `_C` (RETRIEVAL_A_C, or the longest
    prefix of the first name that makes a setting) and `RETRIEVAL_{X,Y}_{Z,W}` (all four)."""
    known, names = set(fields), []
    for raw in re.findall(r"`([^`]+)`", cell):
        for part in _expanded(raw):
            if part.startswith("RETRIEVAL_"):
                names.append(part[len("RETRIEVAL_"):].lower())
                continue
            words = names[0].split("_")
            candidates = ["_".join(words[:i]) + part.lower() for i in range(len(words), -1, -1)]
            names.append(next((c.lstrip("_") for c in candidates if c.lstrip("_") in known), candidates[0]))
    return names


def _rows() -> list[tuple[list[str], str, str]]:
    """The configuration table's rows: the settings each names, their defaults, their description.
    Cells are split at a bare `|` only: `\\|` is one inside a cell (QDRANT_COLLECTION's characters)."""
    fields = Settings.model_fields
    return [(_table_names(cells[0], fields), cells[1], cells[2]) for line in README.read_text().splitlines() if line.startswith("| `RETRIEVAL_")
            for cells in [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]]]


def _table() -> list[tuple[list[str], str]]:
    return [(names, default) for names, default, _ in _rows()]


def _is_written_as(default: object, value: str) -> bool:
    """Whether ``value`` is how the docs write ``default``: numbers by value (`10` is 10.0), flags in
    lower case, tuples as lists of floats, enums by their value."""
    if isinstance(default, int | float) and not isinstance(default, bool):
        return float(value) == float(default)
    if isinstance(default, tuple | list):
        return value == "[" + ", ".join(str(float(v)) for v in default) + "]"
    if isinstance(default, bool):
        return value == str(default).lower()
    return value == str(getattr(default, "value", default))


def _quoted_values(names: list[str], documented: str) -> list[str] | None:
    """One quoted value per setting (`10`, `30`), else None: "unset" and prose are read by people."""
    values = re.findall(r"`([^`]*)`", documented)
    plain = re.fullmatch(r"`[^`]*`(, `[^`]*`)*( \(.*\))?", documented)
    return values if plain and len(values) == len(names) else None


def test_the_readme_table_lists_every_setting() -> None:
    table = _table()
    assert sum(_quoted_values(names, documented) is not None for names, documented in table) >= 80  # what the next test checks
    listed = {name for names, _ in table for name in names}
    assert sorted(listed - set(Settings.model_fields)) == [], "the README's table names settings that do not exist"
    assert sorted(set(Settings.model_fields) - listed) == [], "settings missing from the README's configuration table"


@pytest.mark.parametrize(("names", "documented"), _table(), ids=lambda v: v[0] if isinstance(v, list) else None)
def test_a_readme_row_gives_each_setting_its_default(names: list[str], documented: str) -> None:
    for name, value in zip(names, _quoted_values(names, documented) or [], strict=False):
        default = Settings.model_fields[name].default
        assert _is_written_as(default, value), f"RETRIEVAL_{name.upper()} defaults to {default!r}, the README says {value!r}"


def _upper_bound(name: str) -> float | None:
    return next((m.le for m in Settings.model_fields[name].metadata if isinstance(m, annotated_types.Le)), None)


def test_the_table_splits_rows_at_bare_bars_only() -> None:
    collection = next(description for names, _, description in _rows() if names == ["qdrant_collection"])
    assert collection.endswith("none of `< > : \" / \\ \\| ? *` (Qdrant refuses them)")


def test_a_duration_bounded_otherwise_than_by_a_day_says_so_in_its_row() -> None:
    """The README says every duration is at most a day unless its row says otherwise: LLM_TIMEOUT_S
    (3,600), EVENTS_PUBLISH_TIMEOUT_S (300) and a dozen more were bounded lower, their rows silent,
    and an operator learnt the limit from the error at start-up."""
    rows = _rows()
    durations = [name for name in Settings.model_fields if name.endswith(("_s", "_ms"))]
    assert len(durations) >= 20  # the suffixes are the convention: a rename of it would make this vacuous
    unstated = []
    for name in durations:
        bound = _upper_bound(name)
        assert bound is not None, f"RETRIEVAL_{name.upper()} has no upper bound"
        if bound == (DAY_S if name.endswith("_s") else DAY_S * 1000):
            continue
        description = next(description for names, _, description in rows if name in names)
        number = int(bound) if float(bound).is_integer() else bound
        if not any(re.search(rf"\b(at most|to) {re.escape(written)}\b(?![,.]\d)", description) for written in (f"{number}", f"{number:,}")):
            unstated.append(f"RETRIEVAL_{name.upper()} (at most {number:,})")
    assert unstated == [], "README rows that do not state their setting's bound"
