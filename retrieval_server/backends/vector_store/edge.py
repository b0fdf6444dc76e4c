"""The embedded default: Qdrant's engine in-process (qdrant-edge), one shard in a folder.

qdrant-edge is synchronous and has no background optimizer: every call runs on the bounded
executor, writes are serialized, and :meth:`optimize` (indexing, and the vacuum of deleted
points) runs in the background after each ingest and delete, never from a query.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from retrieval_server.backends.coalescer import Coalescer
from retrieval_server.backends.executor import BlockingExecutor, Priority
from retrieval_server.backends.vector_store import folder_use
from retrieval_server.backends.vector_store import (
    DENSE,
    INDEXED_FIELDS,
    INTEGER_INDEXED_FIELDS,
    NEW_INDEX,
    PARENT,
    RANK_FIELDS,
    SPARSE,
    SPARSE_TITLED,
    VACUUM_DELETED_SHARE,
    IndexFeatures,
    PointParts,
    SearchPolicy,
    TermCounter,
    TermCounts,
    access_clauses,
    check_schema,
    engine_limit,
    hit_from_payload,
    hits_in_order,
    legacy_index_message,
    parent_parts,
    point_parts,
    ranked,
)
from retrieval_server.domain import ParentPoint, PointFilter, SparseVector, Unavailable, VectorHit, VectorPoint

log = logging.getLogger(__name__)
#: counts child chunks only: parent points carry no ``dense`` vector
_CHILDREN = qe.HasVectorCondition(DENSE)
_PARENTS = qe.HasVectorCondition(PARENT)
#: points per engine call when reading the keyword statistics (about 5 ms of GIL each)
TERM_PAGE = 256
#: points per engine call when writing: the engine holds the GIL for the whole of an upsert, 0.07 to
#: 0.16 ms per point of 384 dimensions with two keyword vectors here (256 points: 24 to 60 ms), so
#: a page stays near the interpreter's own switch interval (5 ms) between two chances for a query
UPSERT_PAGE = 32
#: points from which the shard has payload indexes on the fields the filters use. Without them a
#: filtered exact scan reads each point's payload, 2 to 4 us per point of a few readers here (0.2 to
#: 0.5 ms at this size, 2 to 4 ms at 1,000 points), and more the more readers a point lists: 127
#: documents of 1,000 grantees each took about 20 ms, whatever the caller's principals, because
#: they are one clause (see access_clauses: one clause each took 13.6 s for a caller of 1,000
#: groups); with the indexes it costs what an unfiltered scan does. Creating them
#: is about 40 ms of syncs, and every flush after syncs their files too: a new folder used to pay
#: 70 to 120 ms of an `ingest --local` of two documents for indexes no search of 18 points needs.
PAYLOAD_INDEX_MIN_POINTS = 128
#: points a segment needs before it is vacuumed: a handful, so that a near-empty segment is not
#: rewritten for each point deleted from it (the engine's 1,000 kept every small index unvacuumed)
VACUUM_MIN_POINTS = 8


def saved_features(path: Path) -> IndexFeatures:
    """What the shard in ``path`` (which exists) was created with, from its saved config."""
    return _features(_saved_config(path, path))


def _saved_config(path: Path, folder: Path) -> dict[str, Any]:
    """The config saved in ``path``, a copy of ``folder`` when serving read-only (errors name ``folder``)."""
    try:
        saved = json.loads((path / "edge_config.json").read_text())
    except OSError as exc:
        # The file may be whole (a folder written by another user): the index is not lost.
        raise Unavailable(f"cannot read {folder}/edge_config.json ({exc.strerror or exc}): give the server's user read access") from exc
    except ValueError as exc:
        # Without it what the segments hold is unknown, as when it is lost (see _open_held).
        raise Unavailable(f"the vector folder {folder} holds an edge_config.json that cannot be read ({exc}): use {NEW_INDEX}") from exc
    if not isinstance(saved, dict):
        raise Unavailable(f"the vector folder {folder} holds an edge_config.json that is not a JSON object but "
                          f"{type(saved).__name__}: use {NEW_INDEX}")
    return saved


def _features(saved: dict[str, Any]) -> IndexFeatures:
    return IndexFeatures.of(list(saved.get("vectors") or {}), list(saved.get("sparse_vectors") or {}))


def _check_schema(where: str, saved: dict[str, Any], dim: int) -> None:
    dense = {n: (v.get("size"), v.get("distance")) for n, v in (saved.get("vectors") or {}).items()}
    check_schema(where, dense, {n: v.get("modifier") for n, v in (saved.get("sparse_vectors") or {}).items()}, dim)


@dataclass(frozen=True, slots=True)
class _Search:
    """One search of a batch: the engine request, what the engine must see equal to scan once for
    several, and how many hits the caller asked for (fewer than the request's)."""

    group: tuple[str, int, PointFilter]
    request: qe.QueryRequest
    limit: int


def grouped_order(groups: Sequence[Hashable]) -> list[int]:
    """The positions of a batch with equal groups next to each other, groups in order of first appearance.

    The engine answers a run of consecutive requests with equal parameters (vector name, limit,
    filter) in one pass over the vectors, and starts a new pass wherever the next request differs:
    two queries' child and parent searches interleaved (child, parent, child, parent) took 7.6 ms
    on SciFact's index where the same four grouped took 5.1."""
    positions: dict[Hashable, list[int]] = {}
    for i, group in enumerate(groups):
        positions.setdefault(group, []).append(i)
    return [i for same in positions.values() for i in same]


def _filter(flt: PointFilter) -> qe.Filter | None:
    should, must_any = access_clauses(flt)
    if not should and not must_any:
        return None
    # One level: the same points as the access clauses nested in a must, but the engine checks the
    # flat form for less per point (an exact scan of SciFact's children and parents, public filter:
    # +0.5 ms flat against +1.2 ms nested, on 3.2 ms unfiltered).
    return qe.Filter(must=[qe.FieldCondition(key=k, match=qe.MatchAny(any=v)) for k, v in must_any] or None,
                     should=[qe.FieldCondition(key=k, match=qe.MatchAny(any=v)) for k, v in should] or None)


class EdgeVectorStore:
    """qdrant-edge in ``path``; with ``read_copy``, in the copy of ``path`` that it returns (the engine
    writes while it loads, so read-only serving opens a private copy and removes it at close)."""

    def __init__(
        self,
        path: Path,
        dim: int,
        executor: BlockingExecutor,
        policy: SearchPolicy | None = None,
        read_copy: Callable[[Path], Path] | None = None,
        features: IndexFeatures = IndexFeatures(),
    ) -> None:
        self._path = path
        self._read_copy = read_copy
        self._copy: Path | None = None
        #: the descriptor holding the folder's lock (see folder_use)
        self._use: int | None = None
        self._dim = dim
        self._executor = executor
        self.policy = policy or SearchPolicy()
        self._shard: qe.EdgeShard | None = None
        self._write_lock = asyncio.Lock()
        self._fields_indexed = False
        # One batch at a time: the engine holds the GIL for a whole call, so two batches at once
        # never overlap; they only split what one would have shared (a run of equal searches is
        # one pass). HYBRID at c=32 served 13 % more requests/s with one grouped batch at a time
        # than with two batches sent as asked.
        self._searches: Coalescer[_Search, list[VectorHit]] = Coalescer(self._run_batch, slots=1)
        #: what a new index is created with; an existing one reports what it holds
        self._wanted = self.features = features

    def _config(self) -> qe.EdgeConfig:
        dense = {DENSE: qe.EdgeVectorParams(size=self._dim, distance=qe.Distance.Cosine)}
        sparse = {name: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf) for name in self.features.sparse_names()}
        if self.features.parent_vectors:
            dense[PARENT] = qe.EdgeVectorParams(size=self._dim, distance=qe.Distance.Cosine)
        optimizers = qe.EdgeOptimizersConfig(indexing_threshold=self._indexing_threshold_kb(), deleted_threshold=VACUUM_DELETED_SHARE,
                                             vacuum_min_vector_number=VACUUM_MIN_POINTS)
        return qe.EdgeConfig(vectors=dense, sparse_vectors=sparse, optimizers=optimizers)

    def _indexing_threshold_kb(self) -> int:
        """The vector storage (KiB, per vector name) past which a segment gets an HNSW graph.

        The engine builds the graph inside ``optimize()`` and holds the GIL the whole time: 44 s for
        12,000 vectors of 384 dimensions on this machine, during which the process answered nothing.
        Under the engine's default threshold (about 6,600 such vectors) every index of a few thousand
        documents paid that after each ingest, for a graph no search reads: up to
        ``exact_max_points`` every search is an exact scan. So a segment is indexed only once it alone
        holds more vectors than the policy scans exactly; never when every search is exact (0 means
        never to the engine)."""
        if self.policy.always_exact:
            return 0
        return max(1, -(-self.policy.exact_max_points * self._dim * 4 // 1024))

    def _open(self) -> qe.EdgeShard:
        self._use = folder_use.hold(self._path, reading=self._read_copy is not None)
        try:
            return self._open_held()
        except BaseException:
            self._let_go()
            raise

    def _let_go(self) -> None:
        if self._use is not None:
            os.close(self._use)
            self._use = None

    def _open_held(self) -> qe.EdgeShard:
        if self._read_copy is not None:
            self._copy = self._read_copy(self._path)
        path = self._copy or self._path
        path.mkdir(parents=True, exist_ok=True)
        config_file = path / "edge_config.json"
        try:
            if config_file.exists():
                # The engine refuses a config whose vectors differ from the stored ones: open an
                # older index with the vectors it has, and say so when they are not the service's.
                saved = _saved_config(path, self._path)
                _check_schema(f"the vector folder {self._path}", saved, self._dim)
                self.features = _features(saved)
                if lacking := self.features.lacking(self._wanted):
                    log.warning("%s: %s", self._path, legacy_index_message(lacking))
                shard = qe.EdgeShard.load(str(path), self._config())
            else:
                shard = qe.EdgeShard.create(str(path), self._config())
        except Exception as exc:  # the engine raises a bare Exception
            if "WouldBlock" in str(exc):
                raise Unavailable(
                    f"vector folder {self._path} is open in another process "
                    "(qdrant-edge allows one process per folder)"
                ) from exc
            if "incompatible" in str(exc):
                # Segments that differ from the saved config the check above read (it was edited).
                raise Unavailable(f"the vector folder {self._path} does not hold the vectors the service creates ({exc}): "
                                  f"use {NEW_INDEX}") from exc
            if "already contains segment data" in str(exc):
                # The saved config was lost: what the segments hold is unknown, so neither opened nor created over.
                raise Unavailable(f"the vector folder {self._path} holds segments but no edge_config.json: use {NEW_INDEX}") from exc
            if self._copy is not None:
                # The engine names the private copy (a damaged segment, say), which is removed once
                # the start fails: the folder to look at, or replace, is the one copied.
                raise Unavailable(f"the vector folder {self._path} cannot be opened ({str(exc).replace(str(self._copy), str(self._path))}): "
                                  f"use {NEW_INDEX}") from exc
            raise
        self._index_fields_if_due(shard)
        return shard

    def _index_fields_if_due(self, shard: qe.EdgeShard) -> None:
        """The payload indexes the filters use, once the shard holds :data:`PAYLOAD_INDEX_MIN_POINTS`."""
        if self._fields_indexed:
            return
        info = shard.info()
        if info.points_count < PAYLOAD_INDEX_MIN_POINTS:
            return
        have = set(info.payload_schema)
        for name in INDEXED_FIELDS:
            if name not in have:
                shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        for name in INTEGER_INDEXED_FIELDS:
            if name not in have:
                shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Integer))
        self._fields_indexed = True

    @property
    def shard(self) -> qe.EdgeShard:
        if self._shard is None:
            raise Unavailable("vector store is not open")
        return self._shard

    async def open(self) -> None:
        job = asyncio.ensure_future(self._executor.run(self._open))
        try:
            self._shard = await asyncio.shield(job)
        except asyncio.CancelledError:
            # A stop while starting: the job goes on on its thread, and what it opens (the shard, a
            # read-only copy of the folder) is closed once it ends, not left open or on disk.
            with contextlib.suppress(Exception):
                self._shard = await job
            await self.close()
            raise
        await self.refresh_count()

    async def refresh_count(self) -> None:
        # A writer's work, not a query's (the engine counts every child, holding the GIL).
        self.policy.points = await self._count([_CHILDREN], Priority.BACKGROUND)

    async def close(self) -> None:
        if self._shard is not None:
            shard, self._shard = self._shard, None
            async with self._write_lock:
                try:
                    await self._executor.run(shard.flush)  # close flushes too, but cannot report a failure
                finally:
                    await self._executor.run(shard.close)
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None
        self._let_go()

    def _upsert_page(self, parts: Sequence[PointParts]) -> None:
        op = qe.UpdateOperation.upsert_points(
            [
                qe.Point(
                    id=x.id,
                    vector={**x.dense, **{n: qe.SparseVector(indices=i, values=v) for n, (i, v) in x.sparse.items()}},
                    payload=x.payload,
                )
                for x in parts
            ]
        )
        self.shard.update(op)

    async def _write(self, parts: list[PointParts]) -> None:
        # Each page its own background job: a query's engine call waiting in the executor runs
        # between two pages instead of after the whole write (nothing in Python moves during one).
        async with self._write_lock:
            for start in range(0, len(parts), UPSERT_PAGE):
                await self._executor.run(self._upsert_page, parts[start : start + UPSERT_PAGE], priority=Priority.BACKGROUND)
            if not self._fields_indexed:
                await self._executor.run(self._index_fields_if_due, self.shard, priority=Priority.BACKGROUND)

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        await self._write([point_parts(p, self.features) for p in points])

    async def upsert_parents(self, points: Sequence[ParentPoint]) -> None:
        if points and self.features.parent_vectors:
            await self._write([parent_parts(p) for p in points])

    async def delete_document(self, document_id: str, keep_version: str | None = None, keep_chunks: Collection[str] | None = None) -> None:
        must_not: list[qe.Filter] | None = None
        if keep_version is not None:
            kept = [qe.FieldCondition(key="version", match=qe.MatchValue(keep_version))]
            if keep_chunks is not None:
                kept.append(qe.FieldCondition(key="chunk_id", match=qe.MatchAny(any=list(keep_chunks))))
            must_not = [qe.Filter(must=kept)]
        flt = qe.Filter(must=[qe.FieldCondition(key="document_id", match=qe.MatchValue(document_id))], must_not=must_not)
        async with self._write_lock:
            await self._executor.run(self.shard.update, qe.UpdateOperation.delete_points_by_filter(flt), priority=Priority.BACKGROUND)

    async def sync(self) -> None:
        # The engine writes its WAL and segments through memory maps and syncs them only in flush.
        async with self._write_lock:
            await self._executor.run(self.shard.flush, priority=Priority.BACKGROUND)

    def _request(self, query: qe.Query, limit: int, flt: PointFilter, with_vector: list[str] | None = None) -> qe.QueryRequest:
        engine_filter = _filter(flt)
        exact = self.policy.exact
        params = qe.SearchParams(
            exact=exact,
            hnsw_ef=None if exact else self.policy.hnsw_ef,
            # ACORN keeps filtered HNSW search from losing recall when the filter is selective.
            acorn=qe.AcornSearchParams(enable=True) if engine_filter is not None else None,
        )
        return qe.QueryRequest(limit=engine_limit(limit), query=query, filter=engine_filter, params=params,
                               with_payload=RANK_FIELDS if with_vector else True, with_vector=with_vector)

    def _query_batch(self, searches: list[_Search]) -> list[list[VectorHit]]:
        order = grouped_order([s.group for s in searches])
        requests = [searches[i].request for i in order]
        results = self.shard.query_batch(qe.QueryBatchRequest(requests)) if len(requests) > 1 else [self.shard.query(requests[0])]
        answers: list[list[VectorHit]] = [[] for _ in searches]
        for i, points in zip(order, results, strict=True):
            answers[i] = [hit_from_payload(p.payload or {}, p.score) for p in ranked(points, searches[i].limit)]
        return answers

    async def _run_batch(self, searches: list[_Search]) -> list[list[VectorHit]]:
        return await self._executor.run(self._query_batch, searches)

    async def _search(self, query: qe.Query, using: str, limit: int, flt: PointFilter) -> list[VectorHit]:
        if not engine_limit(limit):
            return []
        # Searches asked for together (a query's dense legs; other requests' under load) reach the engine as one batch.
        return await self._searches.submit(_Search((using, limit, flt), self._request(query, limit, flt), limit))

    async def search_dense(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[VectorHit]:
        q = qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=DENSE)
        return await self._search(q, DENSE, limit, flt)

    async def nearest_vectors(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[np.ndarray]:
        q = qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=DENSE)
        if not engine_limit(limit):
            return []
        points = ranked(await self._executor.run(self.shard.query, self._request(q, limit, flt, with_vector=[DENSE])), limit)
        return [np.asarray(p.vector[DENSE], dtype=np.float32) for p in points if p.vector and DENSE in p.vector]

    async def search_sparse(self, vector: SparseVector, limit: int, flt: PointFilter, *, titled: bool = False) -> list[VectorHit]:
        # The limit first: a negative one is refused whatever the query holds.
        if not engine_limit(limit) or not vector.indices:
            return []
        using = SPARSE_TITLED if titled and self.features.title_field else SPARSE
        q = qe.Query.Nearest(qe.SparseVector(indices=list(vector.indices), values=list(vector.values)), using=using)
        return await self._search(q, using, limit, flt)

    async def search_parents(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[VectorHit]:
        if not engine_limit(limit) or not self.features.parent_vectors:
            return []
        q = qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=PARENT)
        return await self._search(q, PARENT, limit, flt)

    def _term_page(self, limit: int, offset: object) -> tuple[list[list[int] | None], object]:
        records, offset = self.shard.scroll(
            qe.ScrollRequest(limit=limit, offset=offset, with_vector=[SPARSE], with_payload=False, filter=qe.Filter(must=[_CHILDREN]))
        )
        return [getattr((r.vector or {}).get(SPARSE), "indices", None) for r in records], offset

    async def term_counts(self, max_points: int) -> TermCounts:
        # Read in pages, each its own background job: the engine holds the GIL for a whole call
        # (about 20 ms per 1,000 points here), and one call over the whole sample (up to
        # IDF_SAMPLE_POINTS, 100,000) stalled every query for seconds after each ingest.
        counter, offset = TermCounter(max_points), None
        while counter.wanted:
            terms, offset = await self._executor.run(self._term_page, min(counter.wanted, TERM_PAGE), offset, priority=Priority.BACKGROUND)
            counter.add(terms)
            if offset is None or not terms:
                break
        return counter.result()

    async def get_chunks(self, chunk_ids: Sequence[str]) -> list[VectorHit]:
        if not chunk_ids:
            return []
        flt = qe.Filter(must=[_CHILDREN, qe.FieldCondition(key="chunk_id", match=qe.MatchAny(any=list(chunk_ids)))])

        def read() -> list[dict]:
            payloads: list[dict] = []
            offset = None
            while True:
                records, offset = self.shard.scroll(
                    qe.ScrollRequest(limit=2 * len(chunk_ids), offset=offset, filter=flt, with_payload=True, with_vector=False)
                )
                payloads += [r.payload for r in records if r.payload]
                if offset is None or not records:
                    return payloads

        return hits_in_order(chunk_ids, await self._executor.run(read))

    async def count(self, document_id: str | None = None, version: str | None = None, *, parents: bool = False) -> int:
        must: list = [_PARENTS if parents else _CHILDREN]
        must += [qe.FieldCondition(key=k, match=qe.MatchValue(v)) for k, v in (("document_id", document_id), ("version", version)) if v is not None]
        return await self._count(must, Priority.QUERY)

    async def _count(self, must: list, priority: Priority) -> int:
        return await self._executor.run(self.shard.count, qe.CountRequest(filter=qe.Filter(must=must), exact=True), priority=priority)

    async def optimize(self) -> None:
        async with self._write_lock:
            await self._executor.run(self.shard.optimize, priority=Priority.BACKGROUND)

    async def ping(self) -> None:
        await self._executor.run(self.shard.info)
