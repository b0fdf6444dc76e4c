"""The semantic cache in Redis, shared by every worker process and replica.

Keys (all expire with the entry's TTL):

* ``rc:e:{id}``: the entry as JSON (configuration, scope, query, strategy, cited documents,
  contexts, and what the response said of the pass that found them: its ``report``)
* ``rc:v:{id}``: the query embedding, float32 bytes
* ``rc:x:{config}:{scope}:{query hash}``: exact-match index, the entry id; for a query a
  similarity match answered, the id of the entry that did and the similarity (``"{id} {score}"``),
  expiring with that entry, so that the query's repeats are exact hits
* ``rc:s:{config}:{scope}``: sorted set of the ids of the entries with a vector by expiry time,
  for the similarity scan
* ``rc:a:{config}:{scope}``: sorted set of every entry id by expiry time, for the partition's bound
* ``rc:d:{document}``: sorted set of the entries citing a document by expiry time, for
  invalidation: each as the JSON array ``[id, config, scope, query hash]``, all that removing it
  takes, so that an invalidation reads no entry (the entries citing a popular document once took
  longer to read than the timeout). A store drops the members that have expired: kept, they made
  the set of a document cited every few seconds grow for as long as it was cited

``scope`` is the integer code of the access partition (:func:`partition_code`). The prefix given
is followed by the entries' format (:data:`ENTRY_FORMAT`), so that servers of two versions sharing
one Redis in a rolling upgrade whose entries cannot be read alike keep apart; versions of one
format (and one answer fingerprint in the prefix) share entries, each reading what it knows.

A partition holds at most ``max_entries`` entries: storing one more removes the oldest. A value
that cannot be read (a vector of the wrong size, JSON another build wrote) is a miss, and is
removed; it must not fail lookups, whose failures open the cache's circuit breaker for every
partition.

Each process mirrors the vectors of the partitions it is asked about in a local CosineMatcher, so
the cosine scan stays local and fast while Redis stays the source of truth; it runs on the event
loop, or for a large mirror on a thread of the cache's own, never on the model threads. A lookup
loads what was stored since the last one (the entries that expire after the newest it holds, less
:data:`SYNC_SKEW_S`); an entry removed meanwhile (invalidated, trimmed) is forgotten when a match
finds it gone, and every :data:`FULL_SYNC_S` the whole partition is read again, a page at a time.
Read whole on every lookup, a partition of 20,000 entries took 0.2 s a lookup, past the cache's
timeout, and 100,000 held the event loop 0.18 s at a time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import logging

import numpy as np
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.asyncio.retry import Retry

from retrieval_server.backends.cache import (
    INLINE_SCAN_ROWS, CachedAnswer, CachePolicy, PassReport, matchable_vector, partition_code, query_key,
)
from retrieval_server.backends.executor import BlockingExecutor, JobLock
from retrieval_server.domain import Access, ChildEvidence, Document, ParentChunk, RetrievedContext, Strategy
from retrieval_server.knowledge import EntityMatch, EntityType, GraphHop, GraphTrace, MatchKind
from scoring_core import CosineMatcher

log = logging.getLogger(__name__)

#: the layout of the entries' JSON and keys: bumped whenever it changes (a field of Document, say;
#: 2: the members of a document's set name each entry's keys; 3: a document's set is sorted by
#: expiry, which a server of format 2, adding to it as to a plain set, would fail on; every entry
#: is in its partition's rc:a set; 4: ``graph_version`` is set whenever the ``report``'s graph
#: trace names anything, where format 3 set it only for a followed relation, and served an entry
#: naming an entity of a document deleted or made private since without checking the graph).
#: Entries of another format are under other keys: never read, they expire with their TTL
ENTRY_FORMAT = 4
#: what reading an entry written by something else can raise
_UNREADABLE = (ValueError, KeyError, TypeError, AttributeError)
#: how much older than the newest entry a mirror holds a new one may look (an entry's score is
#: its writer's clock plus the TTL: processes' clocks, and stores in flight, differ by this much)
SYNC_SKEW_S = 1.0
#: how often a mirror reads its whole partition again, dropping entries gone from it
FULL_SYNC_S = 60.0
#: entries read per call when a partition is read whole (the event loop parses each reply)
SYNC_PAGE = 2000
#: members of a document's set an invalidation reads and removes per round trip
INVALIDATE_PAGE = 2000
#: documents whose sets an invalidation reads per round trip
INVALIDATE_KEYS = 500


def _context_to_json(c: RetrievedContext) -> dict[str, Any]:
    doc = dataclasses.asdict(c.document)
    doc["access"] = c.document.access.value
    return {
        "parent": dataclasses.asdict(c.parent),
        "document": doc,
        "score": c.score,
        "children": [dataclasses.asdict(ch) for ch in c.children],
    }


def _context_from_json(d: dict[str, Any]) -> RetrievedContext:
    doc = dict(d["document"])
    doc["access"] = Access(doc["access"])
    doc["granted_user_ids"] = tuple(doc["granted_user_ids"])
    return RetrievedContext(
        parent=ParentChunk(**d["parent"]),
        document=Document(**doc),
        score=float(d["score"]),
        children=tuple(ChildEvidence(**ch) for ch in d["children"]),
    )


def _report_from_json(d: dict[str, Any]) -> PassReport:
    graph = d["graph"]
    if graph is not None:
        graph = GraphTrace(
            tuple(EntityMatch(m["key"], m["name"], EntityType(m["entity_type"]), m["text"], MatchKind(m["kind"]), float(m["score"]))
                  for m in graph["matches"]),
            tuple(GraphHop(int(h["hop"]), float(h["penalty"]), tuple(h["entities"]), int(h["chunks"])) for h in graph["hops"]),
            graph["graph_version"],
        )
    return PassReport(
        float(d["sufficiency_score"]), bool(d["rerank_fallback_triggered"]), bool(d["decomposition_used"]),
        str(d["rewritten_query"]), tuple(d["sub_queries"]), graph, tuple(d["degraded"]),
    )


@dataclass
class _Mirror:
    matcher: CosineMatcher
    row_of: dict[str, int] = field(default_factory=dict)
    id_of: dict[int, str] = field(default_factory=dict)
    #: entry id -> when it expires (epoch seconds, its score in the sorted set)
    expires_at: dict[str, float] = field(default_factory=dict)
    #: when its last row expires: past it, the mirror is dropped without a lookup of its partition
    until: float = 0.0
    #: the latest expiry among its entries: newer entries are what a lookup loads
    newest: float = float("-inf")
    #: when the whole partition is read again
    full_sync_at: float = 0.0

    def forget(self, entry_id: str) -> None:
        row = self.row_of.pop(entry_id, None)
        if row is not None:
            self.id_of.pop(row, None)
            self.matcher.remove(row)
            if 4 * len(self.row_of) <= self.matcher.capacity:
                # A partition that once held many entries must not keep their memory for its last few.
                owners = [(new, self.id_of.pop(old, None)) for old, new in self.matcher.shrink().items()]
                for new, moved in owners:
                    if moved is not None:
                        self.id_of[new], self.row_of[moved] = moved, new
        self.expires_at.pop(entry_id, None)


class RedisCache:
    def __init__(
        self,
        url: str,
        dim: int,
        policy: CachePolicy = CachePolicy(),
        clock: Callable[[], float] = time.time,
        prefix: str = "rc",
        timeout_s: float = 0.25,
    ) -> None:
        # Fail fast and let the caller's circuit breaker decide. The one retry is for a pooled
        # connection that a Redis restart closed: it reconnects at once instead of failing the call.
        self._redis = aioredis.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)), retry_on_timeout=False,
        )
        self._dim = dim
        # Not the model threads' executor: queued behind embeddings and reranks under load, the
        # scan ran into the cache's timeout, and a healthy Redis's breaker opened on it.
        self._scanner = BlockingExecutor(1, "cache-match")
        self._ttl = policy.ttl_s
        self._similarity = policy.similarity
        self._max = policy.max_entries
        self._clock = clock
        self._p = f"{prefix}:f{ENTRY_FORMAT}"
        self._mirrors: dict[tuple[str, int], _Mirror] = {}
        #: the whole-partition reads under way, each on a task of its own (see _sync)
        self._full_reads: dict[tuple[str, int], asyncio.Task[dict[str, float]]] = {}
        self._next_sweep = clock() + self._ttl
        # Held by a scan on self._scanner until it ends, should its lookup be cut meanwhile.
        self._lock = JobLock()

    def rename(self, prefix: str) -> None:
        """Key entries under ``prefix`` from now on. Before the first call: what the old prefix
        keyed is neither moved nor forgotten by the mirrors."""
        self._p = f"{prefix}:f{ENTRY_FORMAT}"

    def _k(self, kind: str, *parts: object) -> str:
        return ":".join([self._p, kind, *map(str, parts)])

    def _exact_key(self, config: str, scope: int, query: str) -> str:
        return self._k("x", config, scope, query_key(query))

    async def _answer(self, entry_id: str, similarity: float, config: str, scope: int) -> CachedAnswer | None:
        return await self._decode(entry_id, await self._redis.get(self._k("e", entry_id)), similarity, config, scope)

    async def _decode(self, entry_id: str, raw: bytes | None, similarity: float, config: str, scope: int) -> CachedAnswer | None:
        """The entry's answer; None when it is gone, or cannot be read (then it goes: from Redis,
        and from this process's mirror, which would match it again and again)."""
        if not raw:
            # Invalidated or trimmed since this process mirrored it: not matched again.
            await self._forget(config, scope, entry_id)
            return None
        try:
            entry = json.loads(raw)
            contexts = tuple(_context_from_json(c) for c in entry["contexts"])
            report = _report_from_json(entry["report"])
            return CachedAnswer(contexts, Strategy(entry["strategy"]), similarity, entry.get("graph_version"), entry["query"], report)
        except _UNREADABLE as exc:
            log.warning("an unreadable cache entry is removed: %s", exc, extra={"entry": entry_id})
            pipe = self._redis.pipeline(transaction=True)
            pipe.delete(self._k("e", entry_id), self._k("v", entry_id))
            pipe.zrem(self._k("s", config, scope), entry_id)
            pipe.zrem(self._k("a", config, scope), entry_id)
            await pipe.execute()
            await self._forget(config, scope, entry_id)
            return None

    async def _forget(self, config: str, scope: int, *entry_ids: str) -> None:
        async with self._lock:
            mirror = self._mirrors.get((config, scope))
            if mirror is not None:
                for entry_id in entry_ids:
                    mirror.forget(entry_id)

    async def lookup(self, query: str, vector: np.ndarray | None, config: str, partition: str) -> CachedAnswer | None:
        scope = partition_code(partition)
        exact_key = self._exact_key(config, scope, query)
        indexed = await self._redis.get(exact_key)
        if indexed:
            # An alias of an invalidated entry is left to expire: its entry is gone, so it misses.
            try:
                entry_id, _, similarity = indexed.decode().partition(" ")
                found_as = float(similarity) if similarity else 1.0
            except _UNREADABLE as exc:
                # A miss, and removed, as an unreadable entry is: raised, it failed every repeat of
                # the query, each one counted against the breaker, until the key expired.
                log.warning("an unreadable exact-match key is removed: %s", exc)
                await self._redis.delete(exact_key)
            else:
                answer = await self._answer(entry_id, found_as, config, scope)
                if answer is not None:
                    return answer
        if vector is None:
            return None
        async with self._lock:
            self._sweep()
            mirror = await self._sync(config, scope)
            if mirror is None:
                return None
            row, score = await self._scan(mirror, vector)
            found = mirror.id_of.get(row) if row >= 0 else None
            expires_at = mirror.expires_at.get(found) if found is not None else None
        if found is None or expires_at is None:
            return None
        # The alias is written in the same round trip as the entry is read: should the entry be
        # gone by then, the alias points at nothing and misses until it expires with it.
        pipe = self._redis.pipeline(transaction=False)
        pipe.get(self._k("e", found))
        pipe.set(exact_key, f"{found} {float(score)!r}", pxat=max(1, int(expires_at * 1000)))
        raw, aliased = await pipe.execute(raise_on_error=False)
        if isinstance(raw, Exception):
            raise raw
        if isinstance(aliased, Exception):
            # A Redis full under noeviction refuses the write, not the read: the hit is served, and
            # the query's repeats are matched by their vector again.
            log.debug("a similarity match's alias was not written: %s", aliased)
        return await self._decode(found, raw, score, config, scope)

    async def _scan(self, mirror: _Mirror, vector: np.ndarray) -> tuple[int, float]:
        # Called under the lock: a sync shrinking the mirror meanwhile renumbers its rows, and the
        # row found would name another entry. Held until the thread's scan ends, should the lookup
        # be cancelled (the cache's timeout): a sync or a forget then would change the matcher it reads.
        if len(mirror.row_of) < INLINE_SCAN_ROWS:
            return mirror.matcher.match(vector, self._clock(), 0)
        return await self._lock.run(self._scanner, mirror.matcher.match, vector, self._clock(), 0)

    def _sweep(self) -> None:
        """Once per TTL, drop the mirrors whose entries have all expired: a partition that is not
        asked about again (a reader gone, a one-off option set) would otherwise keep its mirror."""
        now = self._clock()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._ttl
        for key in [k for k, m in self._mirrors.items() if m.until <= now]:
            self._mirrors.pop(key).matcher.close()
            if (reading := self._full_reads.pop(key, None)) is not None:
                reading.cancel()
        # Reads a cut first lookup left, of partitions not asked about since: their results (or errors) go.
        for key in [k for k, r in self._full_reads.items() if r.done() and k not in self._mirrors]:
            self._full_reads.pop(key).cancel()

    async def _sync(self, config: str, scope: int) -> _Mirror | None:
        """Bring the local mirror of a partition up to date with Redis; None when it has no entries.

        Partitions are open-ended (one per reader and configuration): one with no live entries
        keeps no mirror, or every reader ever asked about would hold one for the process's life.
        """
        key, ids_key = (config, scope), self._k("s", config, scope)
        now = self._clock()
        mirror = self._mirrors.get(key)
        reading = self._full_reads.get(key)
        if reading is not None and reading.done() and (reading.cancelled() or reading.exception() is not None):
            # An earlier lookup's read that failed: its error is not this lookup's, and it reads again.
            del self._full_reads[key]
            reading = None
        if reading is None and (mirror is None or now >= mirror.full_sync_at):
            # On a task of its own: a lookup cut by the cache's timeout leaves it reading, and a later
            # lookup takes what it read (a large partition takes longer than a lookup may). With a
            # mirror in hand, lookups go on reading what is new until it is done.
            reading = self._full_reads[key] = asyncio.ensure_future(self._newest_entries(ids_key, now))
        if reading is not None and (mirror is None or reading.done()):
            try:
                whole = await asyncio.shield(reading)
            finally:
                if reading.done():
                    self._full_reads.pop(key, None)
            if whole:
                mirror = mirror or self._new_mirror(key)
                # Below what the read returned: expired or trimmed. A removal within its range (an
                # invalidation) is forgotten when a match finds the entry gone.
                lowest = min(whole.values())
                for gone in [i for i, exp in mirror.expires_at.items() if i not in whole and exp < lowest]:
                    mirror.forget(gone)
                await self._add(mirror, ids_key, whole, now)
                mirror.full_sync_at = now + FULL_SYNC_S
        if mirror is None:
            return None
        # What was stored since the last read (after a whole read, since it began).
        pipe = self._redis.pipeline(transaction=False)
        pipe.zcount(ids_key, now, "+inf")
        pipe.zrangebyscore(ids_key, max(now, mirror.newest - SYNC_SKEW_S), "+inf", start=0, num=self._max, withscores=True)
        count, newer = await pipe.execute()
        if not count:
            del self._mirrors[key]
            mirror.matcher.close()
            return None
        await self._add(mirror, ids_key, {m.decode(): exp for m, exp in newer}, now)
        return mirror if mirror.row_of else None

    def _new_mirror(self, key: tuple[str, int]) -> _Mirror:
        # Grown by doubling as rows come: a partition with one entry holds one row, not hundreds.
        mirror = self._mirrors[key] = _Mirror(CosineMatcher(self._dim, self._similarity, initial_capacity=1, max_entries=self._max))
        return mirror

    async def _add(self, mirror: _Mirror, ids_key: str, live: dict[str, float], now: float) -> None:
        """The entries of ``live`` the mirror lacks, oldest first: a full matcher evicts the row it
        took longest ago, which is then the entry that expires first, as Redis trims a partition."""
        new = sorted((i for i in live if i not in mirror.row_of), key=live.__getitem__)
        blobs = await self._redis.mget([self._k("v", i) for i in new]) if new else []
        unusable = []
        for entry_id, blob in zip(new, blobs, strict=True):
            if blob is None:
                continue  # removed since it was listed (invalidated, trimmed): its vector went with it
            try:
                row = mirror.matcher.add(np.frombuffer(blob, dtype=np.float32), expires_at=live[entry_id], scope=0)
            except ValueError as exc:
                # Loaded again on every lookup otherwise: only its exact key finds it now.
                log.warning("a cache entry's vector cannot be matched: %s", exc, extra={"entry": entry_id})
                unusable.append(entry_id)
                continue
            evicted = mirror.id_of.get(row)
            if evicted is not None:
                mirror.row_of.pop(evicted, None)
                mirror.expires_at.pop(evicted, None)
            mirror.row_of[entry_id], mirror.id_of[row] = row, entry_id
            mirror.expires_at[entry_id] = live[entry_id]
            mirror.until = max(mirror.until, live[entry_id])
        # Only now that they are matched: moved before reading their vectors, a lookup cut there left
        # them out of this mirror until its next whole read. A writer whose clock runs ahead, or
        # whose TTL is longer, must not move the read past everyone else's entries.
        mirror.newest = min(max([mirror.newest, *live.values()]), now + self._ttl + SYNC_SKEW_S)
        if unusable:
            await self._redis.zrem(ids_key, *unusable)

    async def _newest_entries(self, ids_key: str, now: float) -> dict[str, float]:
        """The partition's newest ``max_entries`` live entries and when each expires (an entry's score
        is when it expires: a store trims the rest, and a mirror loading more would evict, and load
        again, the overflow on every lookup), read a page at a time."""
        live: dict[str, float] = {}
        while len(live) < self._max:
            page = await self._redis.zrevrangebyscore(ids_key, "+inf", now, start=len(live),
                                                      num=min(SYNC_PAGE, self._max - len(live)), withscores=True)
            live.update((m.decode(), exp) for m, exp in page)
            if len(page) < SYNC_PAGE:
                break
        return live

    async def store(self, query: str, vector: np.ndarray | None, config: str, partition: str, answer: CachedAnswer) -> None:
        now = self._clock()
        scope = partition_code(partition)
        entry_id = uuid.uuid4().hex
        ttl_ms = max(1, int(self._ttl * 1000))  # as the memory cache and the sorted set's scores keep it, not whole seconds
        docs = sorted({c.document.document_id for c in answer.contexts})
        entry = {
            "config": config, "scope": scope, "query": query, "strategy": answer.strategy.value,
            "documents": docs, "contexts": [_context_to_json(c) for c in answer.contexts], "graph_version": answer.graph_version,
            "report": dataclasses.asdict(answer.report),
        }
        matched = matchable_vector(vector, self._dim)
        blob = matched.tobytes() if matched is not None else None
        all_key, ids_key = self._k("a", config, scope), self._k("s", config, scope)
        citing = json.dumps([entry_id, config, scope, query_key(query)])
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(self._k("e", entry_id), json.dumps(entry), px=ttl_ms)
        pipe.set(self._exact_key(config, scope, query), entry_id, px=ttl_ms)
        if blob is not None:
            pipe.set(self._k("v", entry_id), blob, px=ttl_ms)
        # Every entry counts against the partition's bound (counted by its vectors alone, one of
        # max_entries 10 kept 300 answers stored without one); mirrors read only those they can match.
        for key in (all_key, ids_key) if blob is not None else (all_key,):
            pipe.zadd(key, {entry_id: now + self._ttl})
            pipe.zremrangebyscore(key, "-inf", now)
            pipe.pexpire(key, ttl_ms)
        for d in docs:
            pipe.zadd(self._k("d", d), {citing: now + self._ttl})
            pipe.zremrangebyscore(self._k("d", d), "-inf", now)
            pipe.pexpire(self._k("d", d), ttl_ms)
        pipe.zcard(all_key)
        try:
            done = await pipe.execute()
        except OutOfMemoryError as exc:
            # Full under noeviction: the answer is not stored (the transaction wrote nothing). A
            # failure would count against the breaker, which then refused the reads Redis still serves.
            log.warning("an answer was not cached: %s", exc)
            return
        if done[-1] > self._max:
            await self._trim(config, scope, done[-1] - self._max)

    async def _trim(self, config: str, scope: int, excess: int) -> None:
        """Remove a partition's ``excess`` oldest entries (their exact keys then point at nothing).

        Their documents' sets keep them until they expire, as an entry Redis evicts stays there:
        finding those sets would take reading each entry's JSON, and a set so holds no more than the
        entries citing its document stored within one TTL, which an invalidation removes a page at
        a time.
        """
        all_key = self._k("a", config, scope)
        oldest = [i.decode() for i in await self._redis.zrange(all_key, 0, excess - 1)]
        if oldest:
            pipe = self._redis.pipeline(transaction=True)
            pipe.zrem(all_key, *oldest)
            pipe.zrem(self._k("s", config, scope), *oldest)
            pipe.delete(*(self._k(kind, i) for i in oldest for kind in ("e", "v")))
            await pipe.execute()

    async def invalidate_documents(self, document_ids: Iterable[str]) -> int:
        removed = 0
        pending = list(dict.fromkeys(self._k("d", d) for d in document_ids))
        while pending:
            full = []
            for start in range(0, len(pending), INVALIDATE_KEYS):
                # The documents' sets read together, not one round trip each: a delete of 1,000
                # documents took longer than the cache's timeout, and the tail was never reached.
                # The members expired (by more than the writers' clocks may differ) go first,
                # unread: Redis removed their entries.
                chunk = pending[start:start + INVALIDATE_KEYS]
                pipe = self._redis.pipeline(transaction=False)
                for doc_key in chunk:
                    pipe.zremrangebyscore(doc_key, "-inf", self._clock() - SYNC_SKEW_S)
                    pipe.zrange(doc_key, 0, INVALIDATE_PAGE - 1)
                pages = [(k, c) for k, c in zip(chunk, (await pipe.execute())[1::2], strict=True) if c]
                # Removed a page's worth at a time, each for good: sets too large for one call's
                # timeout are finished by the next calls instead of failing whole every time.
                batch: dict[str, list[bytes]] = {}
                size = 0
                for doc_key, citing in pages:
                    if batch and size + len(citing) > INVALIDATE_PAGE:
                        removed += await self._remove_citing(batch)
                        batch, size = {}, 0
                    batch[doc_key], size = citing, size + len(citing)
                if batch:
                    removed += await self._remove_citing(batch)
                full += [k for k, c in pages if len(c) == INVALIDATE_PAGE]
            pending = full
        return removed

    async def _remove_citing(self, pages: dict[str, list[bytes]]) -> int:
        """Remove the entries of these members of documents' sets, and them from their sets; return
        how many entries there were (one another document's page removed, or Redis expired, is not one)."""
        entries: dict[str, None] = {}
        keys: list[str] = []
        by_partition: dict[tuple[str, int], list[str]] = {}
        for citing in pages.values():
            for member in citing:
                try:
                    entry_id, config, scope, query_hash = json.loads(member)
                    scope = int(scope)
                except _UNREADABLE:
                    continue  # not of this format: it goes with the page
                if self._k("e", entry_id) in entries:
                    continue  # citing two of the documents
                entries[self._k("e", entry_id)] = None
                keys += (self._k("v", entry_id), self._k("x", config, scope, query_hash))
                by_partition.setdefault((config, scope), []).append(entry_id)
        # Unlinked, the answers' memory (MBs) is freed on a thread of Redis's own.
        pipe = self._redis.pipeline(transaction=True)
        if entries:
            pipe.unlink(*entries)
            pipe.unlink(*keys)
        for (config, scope), entry_ids in by_partition.items():
            pipe.zrem(self._k("s", config, scope), *entry_ids)
            pipe.zrem(self._k("a", config, scope), *entry_ids)
        for doc_key, citing in pages.items():
            pipe.zrem(doc_key, *citing)
        done = await pipe.execute()
        for (config, scope), entry_ids in by_partition.items():  # other processes forget them when a match finds them gone
            await self._forget(config, scope, *entry_ids)
        return done[0] if entries else 0

    async def ping(self) -> None:
        await self._redis.ping()

    async def close(self) -> None:
        for reading in self._full_reads.values():
            reading.cancel()
        await asyncio.gather(*self._full_reads.values(), return_exceptions=True)
        for m in self._mirrors.values():
            m.matcher.close()
        self._scanner.shutdown()
        await self._redis.aclose()
