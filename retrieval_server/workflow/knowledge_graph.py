"""The knowledge graph as the workflow uses it: entities named in a query, and access-filtered reads.

Matching a query against the known names costs a bounded amount whatever the graph's size:
word n-grams of the query (at most ``max_ngram_words`` words) are looked up by key (exact and
case-folded matches), and at most ``max_fuzzy_ngrams`` of them are compared with rapidfuzz
against every name that can reach the threshold (fuzzy matches, on the executor; scoring_core's
:class:`NameFilter` rules out the others by length and shared bigrams). Candidates are then kept
only if a document the caller may read knows them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from rapidfuzz import fuzz, process

from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.domain import AccessFilter
from retrieval_server.knowledge import EntityMatch, GraphEdge, GraphEntity, MatchKind, RelationType, entity_key
from retrieval_server.stopwords import STOPWORDS
from scoring_core import NameFilter

if TYPE_CHECKING:
    import networkx as nx

# Letters and digits of any script, as ingestion finds names (``ingest.entities``).
_WORD = re.compile(r"[^\W_][\w\-.']*[^\W_]|[^\W_]")


#: Fuzzy matches of one n-gram sent on to the access check, best first. Names the caller cannot
#: read are among them (the check comes after), so more than the few that can be kept: readable
#: ones must not be crowded out. Bounded all the same: names that differ by a digit or two can be
#: thousands above the threshold.
FUZZY_PER_GRAM = 10


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
    ) -> None:
        self.store = store
        self._executor = executor
        self._threshold = fuzzy_threshold
        self._max_words = max_ngram_words
        self._max_fuzzy = max_fuzzy_ngrams
        self._names = _Names(None, (), frozenset(), NameFilter([]), frozenset())
        self._loading = asyncio.Lock()

    async def _index(self) -> _Names:
        """The known names, reloaded when an ingest (in any process) changed the graph."""
        version = await self.store.graph_version()
        if version == self._names.version:
            return self._names
        async with self._loading:
            if version != self._names.version:
                keys = tuple(await self.store.graph_keys())
                # Built off the event loop: 11-14 ms for SciFact's 15,645 names.
                fuzzy = await self._executor.run(NameFilter, keys)
                stated = frozenset(await self.store.graph_stated_keys())
                self._names = _Names(version, keys, frozenset(keys), fuzzy, stated)
        return self._names

    async def match(self, query: str, access: AccessFilter, document_ids: Sequence[str] = ()) -> list[EntityMatch]:
        """Known entities the query names, longest and surest first, without overlaps."""
        index = await self._index()
        if not index.keys:
            return []
        words = [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(query)]
        exact: list[_Candidate] = []
        fuzzy_grams: list[tuple[int, int, int, str, str]] = []
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
                if key in index.known:
                    if n == 1 and len(key) < 3 and not any(c.isupper() for c in text):
                        continue  # "ai", "db" in lower case: too likely an ordinary word
                    # EXACT or CASE_FOLDED, as the names the caller may read decide (below).
                    exact.append(_Candidate(start, end, n, key, MatchKind.EXACT, 1.0, text))
                elif len(key) >= 5 and len(fuzzy_grams) < self._max_fuzzy:
                    fuzzy_grams.append((start, end, n, key, text))
        fuzzy: list[_Candidate] = []
        if fuzzy_grams:
            found = await self._executor.run(self._fuzzy, fuzzy_grams, index)
            fuzzy = [c for per in found for c in per]
        candidates = sorted(exact + fuzzy, key=lambda c: (c.kind is MatchKind.FUZZY, -c.words, -c.score, c.start))
        visible = await self.store.graph_labels({c.key for c in candidates}, access, document_ids)
        taken: list[tuple[int, int]] = []
        out: list[EntityMatch] = []
        for c in candidates:
            label = visible.get(c.key)
            if label is None or any(c.start < b and a < c.end for a, b in taken) or any(m.key == c.key for m in out):
                continue
            taken.append((c.start, c.end))
            kind = MatchKind.CASE_FOLDED if c.kind is MatchKind.EXACT and c.text not in label.spellings else c.kind
            out.append(EntityMatch(c.key, label.name, label.entity_type, c.text, kind, c.score))
        return out

    def _fuzzy(self, grams: list[tuple[int, int, int, str, str]], index: _Names) -> list[list[_Candidate]]:
        """The best names (ties: the earlier name) at or above the threshold, for each n-gram.

        Only the names that can reach the threshold are scored (by rapidfuzz, in C++): on SciFact's
        15,645 names the filter leaves a few dozen per n-gram, and a query's fuzzy look-ups cost
        0.24 ms of CPU (0.66 with the filter's earlier numpy version; 3.5-4.5 ms on a slower machine
        for scoring every name in one ``cdist`` call); the filter's kernel releases the GIL."""
        out = []
        for start, end, n, key, text in grams:
            ids = index.fuzzy.candidates(key, self._threshold)
            if not len(ids):
                out.append([])
                continue
            row = process.cdist([key], [index.keys[i] for i in ids.tolist()], scorer=fuzz.ratio, score_cutoff=self._threshold, workers=1)[0]
            above = np.flatnonzero(row >= self._threshold)
            best = above[np.argsort(-row[above], kind="stable")[:FUZZY_PER_GRAM]].tolist()
            out.append([_Candidate(start, end, n, index.keys[ids[p]], MatchKind.FUZZY, float(row[p]) / 100.0, text) for p in best])
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

        entities = await self.entities(None, access, document_ids)
        edges = await self.edges(None, access, document_ids)
        g = nx.MultiDiGraph()
        for e in entities.values():
            g.add_node(e.key, name=e.name, entity_type=e.entity_type.value, mentions=e.mentions, documents=",".join(e.document_ids))
        for edge in edges:
            g.add_edge(edge.source, edge.target, key=edge.relation.value, relation=edge.relation.value, weight=edge.weight,
                       documents=",".join(edge.document_ids))
        return g
