"""The knowledge graph as the workflow uses it: entities named in a query, and access-filtered reads.

Matching a query against the known names costs a bounded amount whatever the graph's size:
word n-grams of the query (at most ``max_ngram_words`` words) are looked up by key (exact and
case-folded matches), and at most ``max_fuzzy_ngrams`` of them are compared with rapidfuzz
against every name that can reach the threshold (fuzzy matches, on the executor; scoring_core's
:class:`NameFilter` rules out the others by length and shared bigrams). Candidates are then kept
only if a document the caller may read knows them, and at most ``max_matches`` (the graph leg's
first hop, as ``GRAPH_MAX_NEIGHBORS`` bounds the others).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from rapidfuzz import fuzz, process

from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.domain import AccessFilter, Document
from retrieval_server.ingest.entities import acronym_singular, name_tokens
from retrieval_server.knowledge import EntityLabel, EntityMatch, GraphEdge, GraphEntity, MatchKind, RelationType, entity_key
from retrieval_server.stopwords import STOPWORDS
from retrieval_server.workflow.abandon import read_outcome
from scoring_core import NameFilter

if TYPE_CHECKING:
    import networkx as nx

#: Fuzzy matches of one n-gram sent to the access check at a time, best first. Names the caller
#: cannot read are among them (the check comes after): a round that finds none readable checks the
#: next ones, up to FUZZY_ROUNDS, so that unreadable names near a readable one neither crowd it out
#: nor show, by its absence, that they exist. Bounded all the same: names that differ by a digit or
#: two can be thousands above the threshold.
FUZZY_PER_GRAM = 10
FUZZY_ROUNDS = 10
#: A question of more words has its n-grams made on the executor: a 64 KB one's took half a second,
#: which on the event loop would hold every other request.
_INLINE_WORDS = 256


@dataclass(frozen=True, slots=True)
class _Names:
    version: str | None
    keys: tuple[str, ...]
    known: frozenset[str]
    #: the keys' bigram postings, for the fuzzy look-ups
    fuzzy: NameFilter
    #: the keys at either end of a stated relation in some document (readable or not)
    stated: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Gram:
    """Words of the query that may name an entity."""

    start: int
    end: int
    words: int
    key: str
    text: str
    #: a stored name's key, readable by the caller or not
    known: bool


@dataclass(frozen=True, slots=True)
class _Candidate:
    start: int
    end: int
    words: int
    key: str
    kind: MatchKind
    score: float
    text: str


class KnowledgeGraph:
    def __init__(
        self,
        store: MetadataStore,
        executor: BlockingExecutor,
        *,
        fuzzy_threshold: float = 88.0,
        max_ngram_words: int = 4,
        max_fuzzy_ngrams: int = 64,
        max_matches: int = 25,
    ) -> None:
        self.store = store
        self._executor = executor
        self._threshold = fuzzy_threshold
        self._max_words = max_ngram_words
        self._max_fuzzy = max_fuzzy_ngrams
        self._max_matches = max_matches
        self._names = _Names(None, (), frozenset(), NameFilter([]), frozenset())
        self._loading = asyncio.Lock()
        #: the names' loads (:meth:`_index`) until each ends, those of queries that gave up among them
        self._loads: set[asyncio.Task[None]] = set()

    async def version(self) -> str | None:
        """Changes whenever an ingest or a delete (in any process) changes the graph."""
        return await self.store.graph_version()

    async def _index(self) -> _Names:
        """The known names, reloaded when an ingest (in any process) changed the graph.

        The load runs on a task of its own, which the query awaits shielded: run in the query, it
        was cancelled with it (its deadline, the leg's cut-off), and the next query began it again;
        while each one's time ran out first (a large graph, short deadlines), the graph leg matched
        against the names before the write, or none at all."""
        version = await self.store.graph_version()
        if version == self._names.version:
            return self._names
        load = asyncio.ensure_future(self._load())
        self._loads.add(load)
        load.add_done_callback(self._loaded)
        await asyncio.shield(load)
        return self._names

    def _loaded(self, load: asyncio.Task[None]) -> None:
        self._loads.discard(load)
        read_outcome(load)  # its failure is its queries' to report, and they may be gone

    async def close(self) -> None:
        """End the names' loads that no query awaits any more, before the stores they read close: a
        server's stop cancels its queries, and their loads went on reading stores closed under them."""
        loads = list(self._loads)
        for load in loads:
            load.cancel()
        if loads:
            await asyncio.wait(loads)

    async def _load(self) -> None:
        async with self._loading:
            # The version read now, not the one its query saw: the loads of queries that gave up
            # wait here in turn, and an ingest changes the version with every document, so loading
            # each one's own made a whole load for every query during it, where one serves them all.
            version = await self.store.graph_version()
            if version != self._names.version:
                keys = tuple(await self.store.graph_keys())
                # Built off the event loop: 11-14 ms for SciFact's 15,645 names.
                fuzzy = await self._executor.run(NameFilter, keys)
                stated = frozenset(await self.store.graph_stated_keys())
                self._names = _Names(version, keys, frozenset(keys), fuzzy, stated)

    async def match(self, query: str, access: AccessFilter, document_ids: Sequence[str] = ()) -> list[EntityMatch]:
        """Known entities the query names, longest and surest first, without overlaps, at most
        ``max_matches``. What the caller cannot read changes nothing: a word that is exactly an
        unreadable name is looked up fuzzily as an unknown word is, and fuzzy look-ups pass over
        unreadable names to readable ones."""
        index = await self._index()
        if not index.keys:
            return []
        words = name_tokens(query)
        grams = await self._executor.run(self._grams, query, words, index) if len(words) > _INLINE_WORDS else self._grams(query, words, index)
        known = {g.key for g in grams if g.known}
        labels = dict(await self.store.graph_labels(known, access, document_ids)) if known else {}
        candidates = [_Candidate(g.start, g.end, g.words, g.key, MatchKind.EXACT, 1.0, g.text) for g in grams if g.key in labels]
        unmatched = [g for g in grams if g.key not in labels and len(g.key) >= 5][: self._max_fuzzy]
        if unmatched:
            candidates += await self._readable_fuzzy(unmatched, index, access, document_ids, labels, known)
        candidates.sort(key=lambda c: (c.kind is MatchKind.FUZZY, -c.words, -c.score, c.start))
        taken = bytearray(len(query))  # the characters a match has taken
        keys: set[str] = set()
        out: list[EntityMatch] = []
        for c in candidates:
            if c.key in keys or 1 in taken[c.start : c.end]:
                continue
            taken[c.start : c.end] = b"\x01" * (c.end - c.start)
            keys.add(c.key)
            label = labels[c.key]
            kind = MatchKind.CASE_FOLDED if c.kind is MatchKind.EXACT and c.text not in label.spellings else c.kind
            out.append(EntityMatch(c.key, label.name, label.entity_type, c.text, kind, c.score))
            if len(out) >= self._max_matches:
                break
        return out

    def _grams(self, query: str, words: list[tuple[int, int, str]], index: _Names) -> list[_Gram]:
        """The query's runs of up to ``max_ngram_words`` words that may name an entity: a known name's
        key, or one long enough for a fuzzy look-up."""
        out: list[_Gram] = []
        for i in range(len(words)):
            for n in range(1, self._max_words + 1):
                if i + n > len(words):
                    break
                start, end = words[i][0], words[i + n - 1][1]
                text = query[start:end]
                key = entity_key(text)
                first, last = words[i][2].lower(), words[i + n - 1][2].lower()
                if not key or first in STOPWORDS or last in STOPWORDS:
                    continue
                if n == 1 and (singular := acronym_singular(text)) != text:
                    key = entity_key(singular)  # "APIs" names what ingestion keeps as "API", always
                if key in index.known:
                    if n == 1 and len(key) < 3 and not any(c.isupper() for c in text):
                        continue  # "ai", "db" in lower case: too likely an ordinary word
                    out.append(_Gram(start, end, n, key, text, True))
                elif len(key) >= 5:
                    out.append(_Gram(start, end, n, key, text, False))
        return out

    async def _readable_fuzzy(
        self, grams: list[_Gram], index: _Names, access: AccessFilter, document_ids: Sequence[str], labels: dict[str, EntityLabel],
        asked: set[str],
    ) -> list[_Candidate]:
        """Each n-gram's best readable names at or above the threshold, by rounds of FUZZY_PER_GRAM;
        ``labels`` gains theirs. ``asked``: the keys whose labels were read already (an unreadable
        exact name comes back first among its own fuzzy matches: it is not asked for again)."""
        ranked = await self._executor.run(self._fuzzy, grams, index)
        found: list[_Candidate] = []
        checked = set(asked)
        pending = set(range(len(ranked)))
        for r in range(FUZZY_ROUNDS):
            batch = {i: ranked[i][r * FUZZY_PER_GRAM : (r + 1) * FUZZY_PER_GRAM] for i in pending}
            batch = {i: cs for i, cs in batch.items() if cs}
            if not batch:
                break
            keys = {c.key for cs in batch.values() for c in cs} - checked
            if keys:
                labels.update(await self.store.graph_labels(keys, access, document_ids))
                checked |= keys
            for i, cs in batch.items():
                readable = [c for c in cs if c.key in labels]
                if readable:
                    found += readable
                    pending.discard(i)
        return found

    def _fuzzy(self, grams: list[_Gram], index: _Names) -> list[list[_Candidate]]:
        """The names at or above the threshold (ties: the earlier name) for each n-gram, best first,
        as many as the access check's rounds may ask for.

        Only the names that can reach the threshold are scored (by rapidfuzz, in C++): on SciFact's
        15,645 names the filter leaves a few dozen per n-gram, and a query's fuzzy look-ups cost
        0.24 ms of CPU (0.66 with the filter's earlier numpy version; 3.5-4.5 ms on a slower machine
        for scoring every name in one ``cdist`` call); the filter's kernel releases the GIL."""
        out = []
        for g in grams:
            ids = index.fuzzy.candidates(g.key, self._threshold)
            if not len(ids):
                out.append([])
                continue
            row = process.cdist([g.key], [index.keys[i] for i in ids.tolist()], scorer=fuzz.ratio, score_cutoff=self._threshold, workers=1)[0]
            above = np.flatnonzero(row >= self._threshold)
            best = above[np.argsort(-row[above], kind="stable")[: FUZZY_PER_GRAM * FUZZY_ROUNDS]].tolist()
            out.append([_Candidate(g.start, g.end, g.words, index.keys[ids[p]], MatchKind.FUZZY, float(row[p]) / 100.0, g.text) for p in best])
        return out

    async def resolve(self, name: str, access: AccessFilter, document_ids: Sequence[str] = ()) -> GraphEntity | None:
        """The readable entity a tool argument names: by key, else the best match inside the text."""
        key = entity_key(name)
        found = (await self.store.graph_entities([key], access, document_ids)).get(key) if key else None
        if found is not None:
            return found
        matches = await self.match(name, access, document_ids)
        if not matches:
            return None
        return (await self.store.graph_entities([matches[0].key], access, document_ids)).get(matches[0].key)

    async def entities(self, keys: Iterable[str] | None, access: AccessFilter, document_ids: Sequence[str] = ()) -> dict[str, GraphEntity]:
        return await self.store.graph_entities(keys, access, document_ids)

    async def names(self, keys: Iterable[str], access: AccessFilter, document_ids: Sequence[str] = ()) -> dict[str, str]:
        """The name each of these entities goes by in the documents ``access`` may read."""
        return {key: label.name for key, label in (await self.store.graph_labels(keys, access, document_ids)).items()}

    async def edges(
        self,
        keys: Iterable[str] | None,
        access: AccessFilter,
        document_ids: Sequence[str] = (),
        relations: Iterable[RelationType] | None = None,
    ) -> list[GraphEdge]:
        return await self.store.graph_edges(keys, access, document_ids, relations)

    async def entities_and_edges(
        self, keys: Iterable[str] | None, access: AccessFilter, document_ids: Sequence[str] = ()
    ) -> tuple[dict[str, GraphEntity], list[GraphEdge]]:
        """The edges touching ``keys`` (``None``: all) and the entities at their ends (and ``keys``'),
        in one snapshot of the store: every end of an edge is an entity read."""
        return await self.store.graph_entities_and_edges(keys, access, document_ids)

    async def entity_facts(
        self, key: str, access: AccessFilter, document_ids: Sequence[str] = (), listed: int = 0
    ) -> tuple[dict[str, GraphEntity], list[GraphEdge], dict[str, Document]]:
        """The entity, its edges, the entities at their ends, and the first ``listed`` readable
        documents naming it, in one snapshot of the store."""
        return await self.store.graph_entity_facts(key, access, document_ids, listed)

    async def edge_weights(self, keys: Iterable[str], access: AccessFilter, document_ids: Sequence[str] = ()) -> list[tuple[str, str, float]]:
        """``(source, target, weight)`` of each relation touching ``keys``, summed over the readable documents."""
        return await self.store.graph_edge_weights(keys, access, document_ids)

    async def related(
        self, keys: Iterable[str], access: AccessFilter, document_ids: Sequence[str] = (), relations: Iterable[RelationType] | None = None,
    ) -> set[str]:
        """Which of ``keys`` have a readable edge (of these relations).

        Asked for stated relations, only keys that have one in some document need the
        access-filtered read: usually none of a query's (a few dozen of SciFact's 15,645 keys)."""
        wanted = None if relations is None else set(relations)
        if wanted is not None and RelationType.CO_OCCURS not in wanted:
            stated = (await self._index()).stated
            keys = [k for k in keys if k in stated]
            if not keys:
                return set()
        return await self.store.graph_endpoints(keys, access, document_ids, wanted)

    async def chunks(
        self, keys: Iterable[str], access: AccessFilter, document_ids: Sequence[str] = (), per_entity: int = 50
    ) -> dict[str, list[tuple[str, int]]]:
        return await self.store.graph_chunks(keys, access, document_ids, per_entity)

    async def to_networkx(self, access: AccessFilter, document_ids: Sequence[str] = ()) -> nx.MultiDiGraph:
        """What ``access`` may see, as a networkx graph (one edge per relation type)."""
        import networkx as nx  # a few tenths of a second to import, for an export only

        entities, edges = await self.entities_and_edges(None, access, document_ids)
        g = nx.MultiDiGraph()
        for e in entities.values():
            g.add_node(_xml_text(e.key), name=_xml_text(e.name), entity_type=e.entity_type.value, mentions=e.mentions,
                       documents=_id_list(e.document_ids))
        for edge in edges:
            g.add_edge(_xml_text(edge.source), _xml_text(edge.target), key=edge.relation.value, relation=edge.relation.value,
                       weight=edge.weight, documents=_id_list(edge.document_ids))
        return g


#: what XML 1.0, and so GraphML, cannot hold: C0 controls but tab and line ends, surrogates, U+FFFE
#: and U+FFFF. An id or a name of a document's text may hold U+FFFE, and one such made every export fail.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _id_list(document_ids: Iterable[str]) -> str:
    """Document ids as a JSON array, escaped to ASCII: an id may hold a comma (joined by commas, one
    read as two) or a character XML cannot, and a reader must get each id back as stored."""
    return json.dumps(list(document_ids))
