"""A document's knowledge graph: entities with their mentions and chunks, and typed weighted relations.

Two extractors produce the same :class:`DocumentGraph`:

* :class:`ClassicalGraphExtractor`: names by shape and context (:mod:`.entities`), relations by
  phrase and sentence co-occurrence (:mod:`.relations`). No model, runs on the executor.
* :class:`LlmGraphExtractor`: asks a chat model for JSON per parent chunk, validates it (known
  types, names that occur in the text), and falls back to the classical extractor for a chunk
  whose answer fails or does not validate.

Mentions are counted over parent chunks (they do not overlap); an entity's chunks are the child
chunks (the searched units) whose text contains one of its names.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import BaseModel, Field, ValidationError, field_validator

from retrieval_server.backends.executor import BlockingExecutor, Priority
from retrieval_server.backends.llm import ChatModel, LlmRefused
from retrieval_server.domain import ChildChunk, ParentChunk
from retrieval_server.ingest.chunker import split_sentences
from retrieval_server.ingest.entities import CUE, HONORIFIC_ABBREVIATIONS, Mention, MentionFinder, is_honorific
from retrieval_server.ingest.markdown import headings
from retrieval_server.ingest.relations import SentenceRelation, co_occurrences, relations_in_sentence
from retrieval_server.knowledge import (
    RELATION_WEIGHTS,
    DocumentGraph,
    EntityType,
    ExtractedEntity,
    ExtractedRelation,
    RelationType,
    entity_key,
)

log = logging.getLogger(__name__)

# A list item, a quote, a table row or a line opening with "#" starts a sentence, and so does the
# line after a blank one: the chunker ends none at a line break. Only a heading line ends one
# at its own end (sentences_of): "#include" runs on to the next stop.
_LINE_BREAK = re.compile(r"\n\s*(?=[#*\-•>|]|\d+[.)]\s)|\n\s*\n")
# A sentence the chunker ends at an honorific's full stop goes on: split there, "Mr. Smith maintains
# X" made a person "Mr" who maintains X, one entity joining every document with a "Mr." in it. The
# chunker's sentences stay as they are: chunks are part of the index.
_AFTER_HONORIFIC = re.compile(rf"(?<![\w.])(?:{'|'.join(HONORIFIC_ABBREVIATIONS)})\.$")
_EVIDENCE_CHARS = 300
#: An entity's spellings looked for in its chunks, the most used first: each is counted in every
#: child of every parent that names it, and one name written 10,000 ways ("a_bc", "ab_c", ...) made
#: a 379 KiB document's graph take 6.4 s, four times as long for each doubling.
_FORMS_COUNTED = 8


def sentences_of(text: str) -> list[str]:
    # A heading line (outside fenced code) ends a sentence: the chunker ends none at a line break,
    # and "# Numbat facts\nThe Numbat eats termites." was one sentence, which related the heading's
    # names to the sentence's and which extractive answers skipped as a heading. Its stops end
    # sentences too: without the file's type, "# of logins rose. AuthService locks ..." in a .txt
    # or a comment of several sentences reads as a heading, and was one sentence.
    return [sentence for sentence, _ in sentences_with_headings(text)]


def sentences_with_headings(text: str) -> list[tuple[str, bool]]:
    """The sentences of :func:`sentences_of`, each with whether it comes from a heading line."""
    out: list[tuple[str, bool]] = []
    start = 0
    for heading in headings(text):
        out.extend((s, False) for s in _sentences_of_block(text[start : heading.start]))
        out.extend((s, True) for s in _sentences_of_block(text[heading.start : heading.end]))
        start = heading.end
    out.extend((s, False) for s in _sentences_of_block(text[start:]))
    return out


def _sentences_of_block(text: str) -> list[str]:
    out: list[str] = []
    parts: list[str] = []
    for sentence in split_sentences(text):
        parts.append(sentence)
        if _AFTER_HONORIFIC.search(sentence):
            continue
        out.extend(" ".join(part.split()) for part in _LINE_BREAK.split(" ".join(parts)) if part.strip())
        parts = []
    if parts:
        out.extend(" ".join(part.split()) for part in _LINE_BREAK.split(" ".join(parts)) if part.strip())
    return out


#: The classical rules' revision (the LLM extractor falls back to them); a document's fingerprint
#: names the one that last changed its graph (:func:`rules_revision_for`): re-ingesting a document
#: whose names the rules now read differently extracts it again instead of skipping it as unchanged.
#: 2: names in any script, compounds around an acronym. 3: a chunk's mentions counted in whole
#: words. 4: a negated subject ("Neither X nor Y uses Z") states nothing.
#: 5: sentences end at 。！？ without a space after them. 6: only a negation right ahead of the subject
#: negates it ("There is no doubt that X calls Y" states that X calls Y again). 7: a name the text
#: splits with a line break or other white space is linked to the chunks that name it. 8: a
#: sentence's first 12 names are distinct names, every mention of them read, a pair stated once.
#: 9: the openers that are names (the document uses them inside a sentence too) are related in
#: the sentences they open, in a second pass once the document's names are known; a title-case
#: honorific abbreviation's full stop ("Dr.", "Mr.", never "MS.") ends no sentence; an honorific
#: as written ("Dr", "Sir") is no name, in capitals it is an acronym like any other ("MS", "DR",
#: "SIR"); a name with a hyphen or an apostrophe is one name ("Jean-Pierre", "O'Brien"), an
#: apostrophe joining only after a capital (an elision, "l'API", "d'AuthService", "dall'ENI",
#: stays apart from the name after it); a key over MAX_KEY_CHARS is kept, bounded. 10: an ATX
#: heading line outside fenced code ends a sentence, the line under it no longer part of it.
RULES_REVISION = 10


def rules_revision_for(text: str) -> int:
    """The revision of the rules that last changed the graph of ``text`` (a parent chunk's), which
    its document's fingerprint names in place of :data:`RULES_REVISION`: revision 10 changes the
    graph of a text with a heading line only, and named in every fingerprint it embedded every
    document again on its next ingest (and, with the LLM extractor, sent it through the model),
    its graph the same. A revision that changes some graphs returns itself for the texts it
    changes, ahead of the older ones; one that changes every graph is what the last line returns."""
    if any(headings(text)):
        return 10
    return 9


class GraphExtractor(Protocol):
    name: str

    async def extract(self, parents: Sequence[ParentChunk], children: Sequence[ChildChunk]) -> DocumentGraph: ...


@dataclass(slots=True)
class _SentenceFacts:
    sentence: str
    mentions: list[Mention]
    openers: list[Mention] = field(default_factory=list)
    #: None: the classical rules read them in :func:`assemble`, once the document's names are known
    #: (an opener is a name only if the document uses it inside a sentence too)
    relations: list[SentenceRelation] | None = None


def assemble(
    parents: Sequence[ParentChunk],
    children: Sequence[ChildChunk],
    facts: Mapping[str, list[_SentenceFacts]],
    extractor: str,
) -> DocumentGraph:
    """Aggregate per-sentence facts of every parent into the document's graph."""
    inside = {m.key for per in facts.values() for f in per for m in f.mentions}
    surfaces: dict[str, Counter[str]] = defaultdict(Counter)
    forms: dict[str, Counter[str]] = defaultdict(Counter)
    votes: dict[str, Counter[EntityType]] = defaultdict(Counter)
    in_parent: dict[str, set[str]] = defaultdict(set)
    relations: dict[tuple[str, str, RelationType], list[float | str]] = {}
    for parent_id, per in facts.items():
        for f in per:
            # A capitalized word that opens a sentence is a name only if the document uses it inside one too.
            names = sorted([*f.mentions, *(o for o in f.openers if o.key in inside)], key=lambda m: m.start)
            # A model may answer an honorific as a name too. By its surface, not its key: "MS" is an acronym.
            names = [m for m in names if not is_honorific(m.surface)]
            for m in names:
                surfaces[m.key][m.canonical or m.surface] += 1
                forms[m.key][m.surface.lower()] += 1
                votes[m.key][m.entity_type] += m.vote
                in_parent[m.key].add(parent_id)
            # Read with the sentence's openers that are names: read before they were known, "Kafka
            # depends on ZooKeeper." related nothing although Kafka was an entity.
            for r in f.relations if f.relations is not None else relations_in_sentence(f.sentence, names):
                slot = relations.setdefault((r.source, r.target, r.relation), [0.0, f.sentence[:_EVIDENCE_CHARS]])
                slot[0] = float(slot[0]) + RELATION_WEIGHTS[r.relation]
    children_of: dict[str, list[ChildChunk]] = defaultdict(list)
    for c in children:
        children_of[c.parent_chunk_id].append(c)
    # White space collapsed as sentences_of collapses it, where the names were found: "Maria\nLopez"
    # (a wrapped line, a no-break space, two spaces) is the name "Maria Lopez", which the raw text
    # does not contain, and the entity was linked to no chunk.
    lowered = {c.chunk_id: " ".join(c.content.split()).lower() for c in children}
    order = {p.parent_chunk_id: p.chunk_index for p in parents}
    entities = []
    for key, names in surfaces.items():
        # Whole words, as names are found: counted as substrings, "api" was in "rapid" and "capital",
        # and a chunk naming it once outranked one naming it three times.
        counted = [re.compile(rf"(?<!\w){re.escape(form)}(?!\w)") for form, _ in forms[key].most_common(_FORMS_COUNTED)]
        counts = [
            (c.chunk_id, sum(len(form.findall(lowered[c.chunk_id])) for form in counted))
            for pid in sorted(in_parent[key], key=lambda p: order.get(p, 0))
            for c in children_of[pid]
        ]
        counts = [(c, n) for c, n in counts if n]
        entity_type = max(votes[key].items(), key=lambda kv: (kv[1], kv[0] != EntityType.CONCEPT))[0]
        name = max(names.items(), key=lambda kv: (kv[1], len(kv[0]), kv[0]))[0]
        entities.append(
            ExtractedEntity(key, name, entity_type, sum(names.values()), tuple(c for c, _ in counts), tuple(n for _, n in counts))
        )
    known = set(surfaces)
    edges = tuple(
        ExtractedRelation(s, t, rel, float(w), str(ev))
        for (s, t, rel), (w, ev) in sorted(relations.items())
        if s in known and t in known
    )
    entities.sort(key=lambda e: e.key)
    return DocumentGraph(tuple(entities), edges, extractor)


class ClassicalGraphExtractor:
    """No model: shapes, cues, a glossary and relation phrases."""

    name = "classical"

    def __init__(self, glossary: Mapping[str, str] | None = None, executor: BlockingExecutor | None = None) -> None:
        self._finder = MentionFinder(glossary)
        self._executor = executor

    def parent_facts(self, parent: ParentChunk) -> list[_SentenceFacts]:
        """The names of each sentence; :func:`assemble` reads their relations, the document's names known."""
        return [_SentenceFacts(sentence, *self._finder.find(sentence)) for sentence in sentences_of(parent.content)]

    def extract_now(self, parents: Sequence[ParentChunk], children: Sequence[ChildChunk]) -> DocumentGraph:
        return assemble(parents, children, {p.parent_chunk_id: self.parent_facts(p) for p in parents}, self.name)

    async def extract(self, parents: Sequence[ParentChunk], children: Sequence[ChildChunk]) -> DocumentGraph:
        if self._executor is None:
            return self.extract_now(parents, children)
        return await self._executor.run(self.extract_now, parents, children, priority=Priority.BACKGROUND)


# --- LLM extraction -----------------------------------------------------------------------------

_SYSTEM = "You extract a knowledge graph from technical documents. Answer with one JSON object and nothing else."
_PROMPT = """Extract the named entities and the relations between them stated in the text.
Entity types: {entity_types}.
Relation types: {relation_types} (source -> target: "A depends on B" is A DEPENDS_ON B; "B is used by A" is A USES B;
"P maintains A" is P MAINTAINS A; "A is part of B" is A PART_OF B).
Use names exactly as written in the text. Only relations the text states.
JSON: {{"entities": [{{"name": "...", "type": "..."}}], "relations": [{{"source": "...", "target": "...", "type": "..."}}]}}

Text:
{text}"""
_TYPED_RELATIONS = [r.value for r in RelationType if r is not RelationType.CO_OCCURS]


class _LlmEntity(BaseModel):
    name: str = Field(min_length=1, max_length=120)
    type: EntityType

    @field_validator("type", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v


class _LlmRelation(BaseModel):
    source: str = Field(min_length=1, max_length=120)
    target: str = Field(min_length=1, max_length=120)
    type: Literal[tuple(_TYPED_RELATIONS)]  # type: ignore[valid-type]

    @field_validator("type", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v


class _LlmGraph(BaseModel):
    entities: list[_LlmEntity] = Field(max_length=200)
    relations: list[_LlmRelation] = Field(default_factory=list, max_length=400)


class ExtractionRejected(Exception):
    """The model's answer was not a valid graph for the text."""


def parse_llm_graph(answer: str, text: str) -> _LlmGraph:
    """The model's JSON, validated: known types, and only names that occur in ``text``."""
    start, end = answer.find("{"), answer.rfind("}")
    if start < 0 or end <= start:
        raise ExtractionRejected("no JSON object in the answer")
    try:
        graph = _LlmGraph.model_validate(json.loads(answer[start : end + 1]))
    except (ValueError, ValidationError) as exc:
        raise ExtractionRejected(f"invalid graph JSON: {exc}") from exc
    lowered = text.lower()
    entities = [e for e in graph.entities if e.name.strip().lower() in lowered]
    names = {e.name.strip().lower() for e in entities}
    relations = [r for r in graph.relations if r.source.strip().lower() in names and r.target.strip().lower() in names]
    if graph.entities and not entities:
        raise ExtractionRejected("none of the entities occurs in the text")
    return _LlmGraph(entities=entities, relations=relations)


#: where a chunk's facts come from: the model's answer; the classical rules, the model's answer
#: refused (no valid graph for the text); or the rules, the model not answering
_Source = Literal["model", "refused", "unanswered"]


class LlmGraphExtractor:
    """JSON extraction by a chat model per parent chunk; the classical extractor where it fails."""

    def __init__(self, model: ChatModel, fallback: ClassicalGraphExtractor, *, temperature: float = 0.0, concurrency: int = 4) -> None:
        self._model = model
        self._fallback = fallback
        self._temperature = temperature
        self._slots = asyncio.Semaphore(concurrency)
        self.name = f"llm:{model.name}"

    async def _parent(self, parent: ParentChunk) -> tuple[list[_SentenceFacts], _Source]:
        """The parent's facts, and where they come from."""
        try:
            async with self._slots:
                answer = await self._model.complete(
                    _SYSTEM,
                    _PROMPT.format(
                        entity_types=", ".join(t.value for t in EntityType),
                        relation_types=", ".join(_TYPED_RELATIONS),
                        text=parent.content,
                    ),
                    temperature=self._temperature,
                    max_tokens=1024,
                )
        except LlmRefused as exc:
            # The model refused this chunk's content (too long for it, a filter): it will again.
            log.warning("the model refused the graph of %s (%s); using the classical extractor", parent.parent_chunk_id, exc)
            return self._fallback.parent_facts(parent), "refused"
        except Exception as exc:
            log.warning("LLM graph extraction failed for %s (%s); using the classical extractor", parent.parent_chunk_id, exc)
            return self._fallback.parent_facts(parent), "unanswered"
        try:
            facts = _facts_from_llm(parse_llm_graph(answer, parent.content), parent.content)
        except Exception as exc:
            log.warning("the model's graph of %s was refused (%s); using the classical extractor", parent.parent_chunk_id, exc)
            return self._fallback.parent_facts(parent), "refused"
        return facts, "model"

    async def extract(self, parents: Sequence[ParentChunk], children: Sequence[ChildChunk]) -> DocumentGraph:
        results = await asyncio.gather(*(self._parent(p) for p in parents))
        sources = {source for _, source in results}
        name = self.name if sources <= {"model"} else f"{self.name}+classical"
        graph = assemble(parents, children, {p.parent_chunk_id: facts for p, (facts, _) in zip(parents, results, strict=True)}, name)
        return dataclasses.replace(graph, provisional="unanswered" in sources)


def _facts_from_llm(graph: _LlmGraph, text: str) -> list[_SentenceFacts]:
    """Locate the model's names in the sentences; its typed relations go to the sentence naming both
    ends (or the first that names either), co-occurrence fills in the rest among each sentence's
    first names, as the classical rules do."""
    types = {e.name.strip(): e.type for e in graph.entities}
    if not types:
        return []
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(re.escape(n) for n in sorted(types, key=len, reverse=True)) + r")(?!\w)", re.I)
    canonical = {n.lower(): n for n in types}

    def named(found: str) -> str:
        # The pattern's case-insensitive match and str.lower() disagree on a few letters (a dotted
        # capital I, a long s): then the name is the one whose own pattern matches.
        return canonical.get(found.lower()) or next(n for n in types if re.fullmatch(re.escape(n), found, re.I))

    out: list[_SentenceFacts] = []
    for sentence in sentences_of(text):
        mentions = [
            Mention(m.start(), m.end(), m.group(0), entity_key(name), types[name], CUE)
            for m in pattern.finditer(sentence)
            for name in (named(m.group(0)),)
        ]
        out.append(_SentenceFacts(sentence, [m for m in mentions if m.key], relations=[]))
    stated: dict[int, list[SentenceRelation]] = defaultdict(list)
    for r in graph.relations:
        s, t = entity_key(r.source), entity_key(r.target)
        if s == t:
            continue
        both = [i for i, f in enumerate(out) if {s, t} <= {m.key for m in f.mentions}]
        either = both or [i for i, f in enumerate(out) if {s, t} & {m.key for m in f.mentions}]
        if either:
            stated[either[0]].append(SentenceRelation(s, t, RelationType(r.type)))
    for i, f in enumerate(out):
        f.relations = stated[i] + co_occurrences([m.key for m in f.mentions], stated[i])
    return out
