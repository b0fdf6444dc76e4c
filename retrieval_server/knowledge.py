"""Domain objects of the knowledge graph, the router, the tools and generated answers.

The graph is learned per document at ingestion (:class:`DocumentGraph`) and read back
aggregated over the documents a caller may read (:class:`GraphEntity`, :class:`GraphEdge`).
"""

from __future__ import annotations

import enum
import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class EntityType(enum.StrEnum):
    SERVICE = "SERVICE"
    PROJECT = "PROJECT"
    PERSON = "PERSON"
    ORGANIZATION = "ORGANIZATION"
    IDENTIFIER = "IDENTIFIER"
    CONCEPT = "CONCEPT"


class RelationType(enum.StrEnum):
    DEPENDS_ON = "DEPENDS_ON"
    USES = "USES"
    CALLS = "CALLS"
    EXTENDS = "EXTENDS"
    IMPLEMENTS = "IMPLEMENTS"
    PART_OF = "PART_OF"
    MAINTAINS = "MAINTAINS"
    CO_OCCURS = "CO_OCCURS"


#: Weight one sentence adds to a relation. A stated relation counts fully; four sentences that
#: merely name two entities together count as much as one that states how they relate.
RELATION_WEIGHTS: Mapping[RelationType, float] = {r: (0.25 if r is RelationType.CO_OCCURS else 1.0) for r in RelationType}

#: Relations whose source needs its target to work ("X uses Y": X depends on Y).
DEPENDENCY_RELATIONS = frozenset({RelationType.DEPENDS_ON, RelationType.USES, RelationType.CALLS})


_TYPE_WORDS = {"PEOPLE": EntityType.PERSON, "TEAM": EntityType.ORGANIZATION, "COMPONENT": EntityType.SERVICE, "SYSTEM": EntityType.SERVICE}


def entity_type_named(word: str) -> EntityType | None:
    """The type a word names: "services" -> SERVICE, "people" -> PERSON; None when it names none."""
    w = word.strip().upper()
    for candidate in (w, w[:-1] if w.endswith("S") else w):
        if candidate in EntityType.__members__:
            return EntityType(candidate)
        if candidate in _TYPE_WORDS:
            return _TYPE_WORDS[candidate]
    return None


#: The longest entity key: the MySQL store indexes keys as VARCHAR(191), the most characters of
#: utf8mb4 an index takes (767 bytes).
MAX_KEY_CHARS = 191
#: the characters of a longer name's key kept before its digest
_KEY_PREFIX_CHARS = 150


def entity_key(name: str) -> str:
    """The identity of an entity name: case-folded letters and digits ("Auth Service" = "AuthService"),
    composed first (NFC), so that "Zu\u0308rich" is "zürich" as its composed spelling is, not "zurich".

    A key longer than :data:`MAX_KEY_CHARS` is its first characters and a digest of the whole, the
    same at ingestion and in a question: such a name's entity and its edges were left out of the
    store without a word, and cut alone two long names alike at the start would be one."""
    key = "".join(ch for ch in unicodedata.normalize("NFC", name).casefold() if ch.isalnum())
    if len(key) <= MAX_KEY_CHARS:
        return key
    return key[:_KEY_PREFIX_CHARS] + hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


# --- learned at ingestion, per document ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    key: str
    name: str
    entity_type: EntityType
    #: occurrences in the document (counted over its parent chunks, which do not overlap)
    mentions: int
    #: child chunks that mention it (the units the graph leg returns)
    chunk_ids: tuple[str, ...]
    #: how often each of those chunks names it (same order; empty: once each)
    chunk_mentions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ExtractedRelation:
    source: str
    target: str
    relation: RelationType
    weight: float
    #: one sentence that states it, for inspection
    evidence: str = ""


@dataclass(frozen=True, slots=True)
class DocumentGraph:
    entities: tuple[ExtractedEntity, ...] = ()
    relations: tuple[ExtractedRelation, ...] = ()
    #: which extractor produced it: "classical", "llm:<model>", or "llm:<model>+classical" after a fallback
    extractor: str = "classical"
    #: a chunk fell back because the model did not answer (down, timed out, its breaker open): the
    #: next extraction may give another graph. Not when the model answered and its answer was
    #: refused (no valid graph for the text): the next would get that answer again.
    provisional: bool = False


# --- read back, over the documents a caller may read ---------------------------------------------


@dataclass(frozen=True, slots=True)
class GraphEntity:
    key: str
    name: str
    entity_type: EntityType
    mentions: int
    #: readable documents that mention it
    document_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EntityLabel:
    """An entity as a query's matches show it: its name and type as :class:`GraphEntity` gives them,
    and every name the readable documents give it."""

    name: str
    entity_type: EntityType
    #: whether a query named it exactly is decided by these: the names of documents the caller
    #: cannot read must not show through
    spellings: frozenset[str]


@dataclass(frozen=True, slots=True)
class GraphEdge:
    source: str
    target: str
    relation: RelationType
    #: summed over the readable documents that state it
    weight: float
    document_ids: tuple[str, ...] = ()


class MatchKind(enum.StrEnum):
    EXACT = "exact"
    CASE_FOLDED = "case_folded"
    FUZZY = "fuzzy"


@dataclass(frozen=True, slots=True)
class EntityMatch:
    """A known entity named in the query."""

    key: str
    name: str
    entity_type: EntityType
    #: the query text that named it
    text: str
    kind: MatchKind
    #: 1.0 for exact and case-folded matches, the similarity (0..1) for fuzzy ones
    score: float


@dataclass(frozen=True, slots=True)
class GraphHop:
    hop: int
    penalty: float
    #: entity names reached at this hop (at most the configured fan-out)
    entities: tuple[str, ...]
    #: chunks this hop added to the leg
    chunks: int


@dataclass(frozen=True, slots=True)
class GraphTrace:
    matches: tuple[EntityMatch, ...] = ()
    hops: tuple[GraphHop, ...] = ()
    #: the graph's version read before its matches were (see KnowledgeGraph.version)
    graph_version: str | None = None


# --- router, tools, answers ----------------------------------------------------------------------


class Route(enum.StrEnum):
    RETRIEVE = "retrieve"
    TOOL = "tool"
    DIRECT_ANSWER = "direct_answer"


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RouteDecision:
    route: Route
    tool_calls: tuple[ToolCall, ...] = ()
    reason: str = ""
    #: "rules" or "llm:<model>"
    decided_by: str = "rules"


@dataclass(frozen=True, slots=True)
class ToolResult:
    name: str
    arguments: Mapping[str, Any]
    success: bool
    #: JSON-serializable, tool-specific
    result: Any = None
    error: str = ""
    #: one sentence an answer can use as it is
    summary: str = ""
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class AnswerSentence:
    text: str
    #: 1-based positions in the returned contexts
    citations: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Citation:
    #: the [n] marker: position (from 1) of the cited context in the response
    marker: int
    parent_chunk_id: str
    document_id: str
    title: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    text: str
    sentences: tuple[AnswerSentence, ...]
    citations: tuple[Citation, ...]
    route: Route
    #: no LLM wrote it: its sentences are copied from the contexts or the tool results
    extractive: bool
    #: False when the contexts did not support an answer (the text then says so)
    supported: bool
    #: "extractive" or the model that wrote it
    model: str
    tool_results: tuple[ToolResult, ...] = ()
