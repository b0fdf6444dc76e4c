"""Semantic cache: an answer for a repeated (or near-identical) question, without retrieval.

Lookup is an exact match on the normalized query first, then cosine similarity over cached query
embeddings (scoring_core's CosineMatcher). Entries are partitioned:

* by configuration (strategy, top_k, filters, mode): one matcher each, so a hit always answers
  the same kind of request;
* by scope: 0 is public, any other value one user. The public partition holds answers built for
  callers who can read only public documents (so they cite only public documents) and serves
  only such callers: a user who may read a private document has a different corpus, and a public
  answer would hide their documents from them. Everyone else reads and writes their own partition.

Entries expire after a TTL and are dropped when a document they cite is deleted or re-ingested.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.domain import Identity, RetrievedContext
from scoring_core import CosineMatcher

PUBLIC = 0


def normalize_query(query: str) -> str:
    return " ".join(query.casefold().split())


def user_scope(identity: Identity) -> int:
    """A stable non-zero scope for a user; 0 (public only) for anonymous callers."""
    if not identity.user_id:
        return PUBLIC
    code = int.from_bytes(hashlib.blake2b(identity.user_id.encode(), digest_size=8).digest(), "little") >> 1
    return code or 1


def answer_scope(identity: Identity, contexts: Iterable[RetrievedContext], reads_private: bool) -> int:
    """Public when the caller sees only public documents (so does the answer); else the caller's own."""
    if not reads_private and all(c.document.access.value == "public" for c in contexts):
        return PUBLIC
    return user_scope(identity) or PUBLIC


@dataclass(frozen=True, slots=True)
class CachePolicy:
    ttl_s: float = 3600.0
    similarity: float = 0.95
    max_entries: int = 100_000


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    contexts: tuple[RetrievedContext, ...]
    similarity: float  # 1.0 for an exact match


class SemanticCache(Protocol):
    async def lookup(
        self, query: str, vector: np.ndarray | None, config: str, identity: Identity, reads_private: bool
    ) -> CachedAnswer | None: ...

    async def store(
        self, query: str, vector: np.ndarray | None, config: str, identity: Identity, reads_private: bool,
        contexts: tuple[RetrievedContext, ...],
    ) -> None: ...

    async def invalidate_documents(self, document_ids: Iterable[str]) -> int:
        """Drop every entry citing one of these documents; return how many."""
        ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class _Entry:
    config: str
    scope: int
    query: str
    row: int
    contexts: tuple[RetrievedContext, ...]
    expires_at: float
    documents: frozenset[str]


class MemoryCache:
    """The embedded default: entries in this process."""

    def __init__(
        self, dim: int, executor: BlockingExecutor, policy: CachePolicy = CachePolicy(), clock: Callable[[], float] = time.time
    ) -> None:
        self._dim = dim
        self._executor = executor
        self._ttl = policy.ttl_s
        self._similarity = policy.similarity
        self._max = policy.max_entries
        self._clock = clock
        self._matchers: dict[str, CosineMatcher] = {}
        self._row_owner: dict[tuple[str, int], int] = {}
        self._entries: dict[int, _Entry] = {}
        self._exact: dict[tuple[str, int, str], int] = {}
        self._by_document: dict[str, set[int]] = {}
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def _drop(self, entry_id: int, release_row: bool = True) -> None:
        e = self._entries.pop(entry_id, None)
        if e is None:
            return
        if e.row >= 0 and self._row_owner.get((e.config, e.row)) == entry_id:
            del self._row_owner[(e.config, e.row)]
            if release_row:
                self._matchers[e.config].remove(e.row)
        if self._exact.get((e.config, e.scope, e.query)) == entry_id:
            del self._exact[(e.config, e.scope, e.query)]
        for d in e.documents:
            ids = self._by_document.get(d)
            if ids is not None:
                ids.discard(entry_id)
                if not ids:
                    del self._by_document[d]

    async def lookup(
        self, query: str, vector: np.ndarray | None, config: str, identity: Identity, reads_private: bool
    ) -> CachedAnswer | None:
        now = self._clock()
        norm = normalize_query(query)
        scope = user_scope(identity) if reads_private else PUBLIC
        async with self._lock:
            entry_id = self._exact.get((config, scope, norm))
            if entry_id is not None:
                e = self._entries[entry_id]
                if e.expires_at > now:
                    return CachedAnswer(e.contexts, 1.0)
                self._drop(entry_id)
            matcher = self._matchers.get(config)
            if vector is None or matcher is None:
                return None
            # Only the caller's own partition: public rows for public-only callers, private ones otherwise.
            row, score = await self._executor.run(matcher.match, vector, now, scope, False)
            if row < 0:
                return None
            entry_id = self._row_owner.get((config, row))
            e = self._entries.get(entry_id) if entry_id is not None else None
            return CachedAnswer(e.contexts, score) if e is not None else None

    async def store(
        self, query: str, vector: np.ndarray | None, config: str, identity: Identity, reads_private: bool,
        contexts: tuple[RetrievedContext, ...],
    ) -> None:
        now = self._clock()
        scope = answer_scope(identity, contexts, reads_private)
        norm = normalize_query(query)
        async with self._lock:
            old = self._exact.get((config, scope, norm))
            if old is not None:
                self._drop(old)
            matcher = self._matchers.get(config)
            if matcher is None:
                matcher = self._matchers[config] = CosineMatcher(self._dim, self._similarity, initial_capacity=256, max_entries=self._max)
            row = -1
            if vector is not None:
                row = matcher.add(vector, expires_at=now + self._ttl, scope=scope)
                evicted = self._row_owner.get((config, row))
                if evicted is not None:  # the matcher evicted that entry's row and reused it
                    self._drop(evicted, release_row=False)
            entry_id = next(self._ids)
            docs = frozenset(c.document.document_id for c in contexts)
            self._entries[entry_id] = _Entry(config, scope, norm, row, contexts, now + self._ttl, docs)
            if row >= 0:
                self._row_owner[(config, row)] = entry_id
            self._exact[(config, scope, norm)] = entry_id
            for d in docs:
                self._by_document.setdefault(d, set()).add(entry_id)
            if len(self._entries) > self._max:
                self._expire(now)

    def _expire(self, now: float) -> None:
        for entry_id in [i for i, e in self._entries.items() if e.expires_at <= now]:
            self._drop(entry_id)

    async def invalidate_documents(self, document_ids: Iterable[str]) -> int:
        async with self._lock:
            doomed = set().union(*(self._by_document.get(d, set()) for d in document_ids))
            for entry_id in doomed:
                self._drop(entry_id)
            return len(doomed)

    async def close(self) -> None:
        for m in self._matchers.values():
            m.close()
