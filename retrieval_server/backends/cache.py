"""Semantic cache: an answer for a repeated (or near-identical) question, without retrieval.

Lookup is an exact match on the normalized query first, then cosine similarity over cached query
embeddings (scoring_core's CosineMatcher). A query answered by similarity is remembered under its
own text, pointing at the entry that answered it, for as long as that entry lives: its repeats are
exact hits, and the workflow embeds a query only on a lookup by text that misses. Without that, a
paraphrase that a similar entry answers is never stored itself, so every repeat of it paid an
embedding (on SciFact, a fifth of the queries are answered by an earlier, similar one). An answer
carries the query it was stored for: the workflow serves one found by similarity only to a query
naming the same identifiers (a cosine does not tell "E1234" from "E1235"; see check_cache).
Entries are partitioned:

* by configuration (strategy, top_k, filters, mode, ...): a hit always answers the same kind of
  request;
* by the caller's access filter (:attr:`AccessFilter.partition`): an answer is computed with one
  filter and served only to callers holding the same filter, that is, reading the same set of
  documents. A SUPER_ADMIN (``all``), a user with private documents (``reader:<id>``) and the
  public (``public``, also users who can read nothing private) never share entries, whatever the
  user id or the role says.

Entries expire after a TTL and are dropped when a document they cite is deleted or re-ingested.
That invalidation is an optimization: the workflow also checks, on every hit, that each cited
document is still stored at the version the answer was built from, so an invalidation that never
reached the cache (Redis down) cannot serve a deleted or replaced document.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from retrieval_server.backends.circuit_breaker import CircuitBreaker
from retrieval_server.backends.executor import BlockingExecutor, JobLock
from retrieval_server.domain import RetrievedContext, Strategy
from retrieval_server.knowledge import GraphTrace
from scoring_core import CosineMatcher
from scoring_core.cache_matching import matchable

PUBLIC_PARTITION = "public"
#: a configuration or a partition with fewer vectors is scanned on the event loop (2,000 rows of
#: 384 dims: 0.06 ms, less than handing it to a thread); a larger one on the cache's own thread
INLINE_SCAN_ROWS = 2000
T = TypeVar("T")


def normalize_query(query: str) -> str:
    """Case and spacing set aside. Lower case, not casefold: casefold makes "Straße" "strasse",
    which the keyword leg and the full-text search tell apart, and one would get the other's answer."""
    return " ".join(query.lower().split())


def query_key(query: str) -> str:
    """The exact-match key of a query: a digest of its normalized text (up to 64 KiB), so that
    every entry and alias costs the same whatever the query's length."""
    return hashlib.sha256(normalize_query(query).encode()).hexdigest()[:32]


def partition_code(partition: str) -> int:
    """The partition as the matcher's integer scope: 0 for the public one, a stable hash otherwise."""
    if partition == PUBLIC_PARTITION:
        return 0
    code = int.from_bytes(hashlib.blake2b(partition.encode(), digest_size=8).digest(), "little") >> 1
    return code or 1


def matchable_vector(vector: np.ndarray | None, dim: int) -> np.ndarray | None:
    """The vector as float32, or None when no lookup could match it (another size, zero, not
    finite): its answer is stored without it, found by its text only, rather than failing the
    request that would store it."""
    if vector is None:
        return None
    try:
        return matchable(vector, dim)[0]
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class CachePolicy:
    ttl_s: float = 3600.0
    similarity: float = 0.95
    max_entries: int = 100_000
    #: in memory: the text its entries hold, as counted by :func:`answer_chars`, and their queries
    max_chars: int = 256 * 2**20


def answer_chars(contexts: Iterable[RetrievedContext]) -> int:
    """The characters an answer holds (its texts and what its documents say of themselves), with
    a few hundred for each object around them: its size in memory, near enough to bound it. A
    top-100 answer over documents at their metadata limits holds megabytes, and 100,000 entries
    counted one each could hold more memory than the machine has."""
    total = 0
    for c in contexts:
        d = c.document
        total += 512 + len(c.parent.content) + sum(256 + len(e.content) for e in c.children)
        total += len(d.document_id) + len(d.title) + len(d.url) + len(d.source) + len(d.owner_id)
        total += sum(len(k) + len(v) for k, v in d.metadata.items()) + sum(len(u) for u in d.granted_user_ids)
    return total


@dataclass(frozen=True, slots=True)
class PassReport:
    """What the response said of the pass that found an answer (QueryMetrics' fields of the same
    names): a hit reports it again, as it serves that pass's contexts. The defaults are what an
    entry stored without it (by an earlier version) reports: the metrics of no pass."""

    sufficiency_score: float = 0.0
    rerank_fallback_triggered: bool = False
    decomposition_used: bool = False
    rewritten_query: str = ""
    sub_queries: tuple[str, ...] = ()
    graph: GraphTrace | None = None
    #: the degradations that describe the contexts, whoever is served them (the workflow's
    #: describes_answer): not those of the request that found them (the cache, the deadline)
    degraded: tuple[str, ...] = ()


def report_chars(report: PassReport) -> int:
    """The characters a report holds, counted as :func:`answer_chars` counts an answer's (the
    empty one, shared by the answers that have no other, as none)."""
    total = len(report.rewritten_query) + sum(len(q) for q in report.sub_queries) + sum(len(t) for t in report.degraded)
    if report.graph is not None:
        total += sum(128 + len(m.key) + len(m.name) + len(m.text) for m in report.graph.matches)
        total += sum(64 + sum(len(e) for e in h.entities) for h in report.graph.hops)
    return total


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    contexts: tuple[RetrievedContext, ...]
    #: the strategy that produced the answer (ADAPTIVE resolves to the one it chose)
    strategy: Strategy
    #: 1.0 for an exact match
    similarity: float = 1.0
    #: the knowledge graph's version when its graph trace names entities (reported again with the
    #: answer) or its relations brought contexts in: their documents need not be among the
    #: contexts, so only an unchanged graph keeps the answer current
    graph_version: str | None = None
    #: the query it was stored for, as sent (the cache sets it): a similarity match is served only
    #: to a query asking for the same identifiers (see the workflow's check_cache)
    query: str = ""
    report: PassReport = PassReport()


class SemanticCache(Protocol):
    async def lookup(self, query: str, vector: np.ndarray | None, config: str, partition: str) -> CachedAnswer | None: ...

    async def store(self, query: str, vector: np.ndarray | None, config: str, partition: str, answer: CachedAnswer) -> None: ...

    async def invalidate_documents(self, document_ids: Iterable[str]) -> int:
        """Drop every entry citing one of these documents; return how many."""
        ...

    async def ping(self) -> None: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Entry:
    config: str
    scope: int
    query: str
    row: int
    answer: CachedAnswer
    expires_at: float
    documents: frozenset[str]
    #: the exact keys of the other queries a similarity match answered with this entry
    aliases: list[tuple[str, int, str]] = field(default_factory=list)
    #: :func:`answer_chars` of its answer
    chars: int = 0


class MemoryCache:
    """The embedded default: entries in this process."""

    def __init__(self, dim: int, policy: CachePolicy = CachePolicy(), clock: Callable[[], float] = time.time) -> None:
        self._dim = dim
        # Not the shared blocking executor: queued there behind vector searches, a scan held the
        # lock, and every lookup, an exact repeat too, waited for them. Made when a configuration
        # first holds INLINE_SCAN_ROWS vectors: most caches never scan off the event loop.
        self._scanner: BlockingExecutor | None = None
        self._ttl = policy.ttl_s
        self._similarity = policy.similarity
        self._max = policy.max_entries
        self._max_chars = policy.max_chars
        self._chars = 0
        self._clock = clock
        self._matchers: dict[str, CosineMatcher] = {}
        #: entries per configuration: its matcher is freed with its last entry
        self._per_config: dict[str, int] = {}
        self._row_owner: dict[tuple[str, int], int] = {}
        self._entries: dict[int, _Entry] = {}
        self._exact: dict[tuple[str, int, str], int] = {}
        #: a query answered by similarity -> (the entry that answered it, the similarity)
        self._aliases: dict[tuple[str, int, str], tuple[int, float]] = {}
        self._by_document: dict[str, set[int]] = {}
        self._ids = itertools.count(1)
        # Held by a scan on the cache's thread until it ends, should its lookup be cut meanwhile.
        self._lock = JobLock()

    def __len__(self) -> int:
        return len(self._entries)

    def _drop(self, entry_id: int, release_row: bool = True) -> None:
        e = self._entries.pop(entry_id, None)
        if e is None:
            return
        self._chars -= e.chars
        if e.row >= 0 and self._row_owner.get((e.config, e.row)) == entry_id:
            del self._row_owner[(e.config, e.row)]
            if release_row:
                self._matchers[e.config].remove(e.row)
        left = self._per_config[e.config] - 1
        if left:
            self._per_config[e.config] = left
            if release_row and 4 * left <= self._matchers[e.config].capacity:
                # Not while a store is placing its row (release_row=False): it is not registered yet.
                self._rows_moved(e.config, self._matchers[e.config].shrink())
        else:
            # Configurations are open-ended (every document filter is one): an empty one keeps nothing.
            del self._per_config[e.config]
            self._matchers.pop(e.config).close()
        if self._exact.get((e.config, e.scope, e.query)) == entry_id:
            del self._exact[(e.config, e.scope, e.query)]
        for key in e.aliases:
            if self._aliases.get(key, (0, 0.0))[0] == entry_id:
                del self._aliases[key]
        for d in e.documents:
            ids = self._by_document.get(d)
            if ids is not None:
                ids.discard(entry_id)
                if not ids:
                    del self._by_document[d]

    def _rows_moved(self, config: str, moved: dict[int, int]) -> None:
        owners = [(new, self._row_owner.pop((config, old), None)) for old, new in moved.items()]
        for new, entry_id in owners:
            if entry_id is not None:
                self._row_owner[(config, new)] = entry_id
                self._entries[entry_id].row = new

    async def lookup(self, query: str, vector: np.ndarray | None, config: str, partition: str) -> CachedAnswer | None:
        now = self._clock()
        scope = partition_code(partition)
        key = (config, scope, query_key(query))
        # Read without the lock, which guards the matchers while a scan runs on the cache's thread:
        # the dicts change only on the event loop, and nothing is awaited before they are read, so
        # an exact repeat never waits behind another query's scan.
        entry_id, similarity = self._exact.get(key), None
        if entry_id is None:
            entry_id, similarity = self._aliases.get(key, (None, None))
        if entry_id is not None:
            # Present: an entry's exact key and aliases are dropped with it.
            e = self._entries[entry_id]
            if e.expires_at > now:
                return e.answer if similarity is None else dataclasses.replace(e.answer, similarity=similarity)
        elif vector is None or config not in self._matchers:
            return None
        async with self._lock:
            if entry_id is not None:
                # Expired. Entry ids are never reused: dropped meanwhile, it is not another's.
                self._drop(entry_id)
            matcher = self._matchers.get(config)
            if vector is None or matcher is None:
                return None
            # The caller's partition only: include_public=False, so even the public rows serve only the public.
            if self._per_config[config] < INLINE_SCAN_ROWS:
                row, score = matcher.match(vector, now, scope, False)
            else:
                if self._scanner is None:
                    self._scanner = BlockingExecutor(1, "cache-match")
                row, score = await self._lock.run(self._scanner, matcher.match, vector, now, scope, False)
            if row < 0:
                return None
            entry_id = self._row_owner.get((config, row))
            e = self._entries.get(entry_id) if entry_id is not None else None
            if e is None or e.scope != scope:
                return None
            if len(self._aliases) < self._max:
                self._aliases[key] = (entry_id, score)
                e.aliases.append(key)
            return dataclasses.replace(e.answer, similarity=score)

    async def store(self, query: str, vector: np.ndarray | None, config: str, partition: str, answer: CachedAnswer) -> None:
        now = self._clock()
        scope = partition_code(partition)
        norm = query_key(query)
        vector = matchable_vector(vector, self._dim)
        answer = dataclasses.replace(answer, query=query)
        chars = answer_chars(answer.contexts) + report_chars(answer.report) + len(query)
        async with self._lock:
            old = self._exact.get((config, scope, norm))
            if old is not None:
                self._drop(old)
            self._aliases.pop((config, scope, norm), None)  # its own answer now
            if chars > self._max_chars:
                return  # it would push out every other entry, and then itself
            matcher = self._matchers.get(config)
            if matcher is None:
                # Grown by doubling as rows come: a configuration asked about once holds one row, not hundreds.
                matcher = self._matchers[config] = CosineMatcher(self._dim, self._similarity, initial_capacity=1, max_entries=self._max)
            # Registered before its row is added, so that the row the matcher evicts for it (possibly
            # its configuration's last other entry) cannot free the matcher it is added to.
            entry_id = next(self._ids)
            docs = frozenset(c.document.document_id for c in answer.contexts)
            entry = self._entries[entry_id] = _Entry(config, scope, norm, -1, answer, now + self._ttl, docs, chars=chars)
            self._chars += chars
            self._per_config[config] = self._per_config.get(config, 0) + 1
            self._exact[(config, scope, norm)] = entry_id
            for d in docs:
                self._by_document.setdefault(d, set()).add(entry_id)
            if vector is not None:
                try:
                    row = matcher.add(vector, expires_at=now + self._ttl, scope=scope)
                except BaseException:
                    self._drop(entry_id)
                    raise
                evicted = self._row_owner.get((config, row))
                if evicted is not None:  # the matcher evicted that entry's row and reused it
                    self._drop(evicted, release_row=False)
                entry.row = row
                self._row_owner[(config, row)] = entry_id
            self._evict(now)

    def _evict(self, now: float) -> None:
        """Drop expired entries, then the oldest beyond ``max_entries`` or ``max_chars``, across all configurations.

        Every entry lives the same TTL, so insertion order (the dict's) is expiry order: the
        oldest entries are both the first to expire and the ones to evict.
        """
        while self._entries:
            oldest = next(iter(self._entries))
            if len(self._entries) <= self._max and self._chars <= self._max_chars and self._entries[oldest].expires_at > now:
                break
            self._drop(oldest)

    async def invalidate_documents(self, document_ids: Iterable[str]) -> int:
        async with self._lock:
            doomed = set().union(*(self._by_document.get(d, set()) for d in document_ids))
            for entry_id in doomed:
                self._drop(entry_id)
            return len(doomed)

    async def ping(self) -> None:
        """Always reachable: it lives in this process."""

    async def close(self) -> None:
        for m in self._matchers.values():
            m.close()
        if self._scanner is not None:
            self._scanner.shutdown()


class CacheUnavailable(Exception):
    """The cache could not answer in time, or its circuit breaker is open: treat as a miss."""


class GuardedCache:
    """Any cache behind a timeout and a circuit breaker: a slow or dead cache is skipped, never waited on.

    Every failure surfaces as :class:`CacheUnavailable`, which the workflow reports as
    ``cache:unavailable`` and answers without the cache.
    """

    def __init__(self, inner: SemanticCache, breaker: CircuitBreaker, timeout_s: float) -> None:
        self.inner = inner
        self.breaker = breaker
        self._timeout = timeout_s

    async def _call(self, what: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        try:
            with self.breaker.calling(lambda: CacheUnavailable(f"{what}: circuit open")):
                return await asyncio.wait_for(fn(*args), self._timeout)
        except CacheUnavailable:
            raise
        except Exception as exc:
            raise CacheUnavailable(f"{what}: {type(exc).__name__}: {exc}") from exc

    async def lookup(self, query: str, vector: np.ndarray | None, config: str, partition: str) -> CachedAnswer | None:
        return await self._call("lookup", self.inner.lookup, query, vector, config, partition)

    async def store(self, query: str, vector: np.ndarray | None, config: str, partition: str, answer: CachedAnswer) -> None:
        await self._call("store", self.inner.store, query, vector, config, partition, answer)

    async def invalidate_documents(self, document_ids: Iterable[str]) -> int:
        return await self._call("invalidate", self.inner.invalidate_documents, list(document_ids))

    async def ping(self) -> None:
        # Health probes the cache directly: a half-open trial should not be spent on them.
        await asyncio.wait_for(self.inner.ping(), self._timeout)

    async def close(self) -> None:
        await self.inner.close()
