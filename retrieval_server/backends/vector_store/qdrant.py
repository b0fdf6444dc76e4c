"""Production: a Qdrant server through qdrant-client's async client.

The same class serves qdrant-client's local mode (a folder or ':memory:'), which the tests use as
a stand-in for the server's code path since no server binary can run here. Local mode computes
in Python on the calling thread, so its calls run on the blocking executor (:class:`_OffLoop`).
"""

from __future__ import annotations

import json
import logging
import ssl
import warnings
from collections.abc import Awaitable, Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import AsyncQdrantClient, QdrantClient, models

from retrieval_server.backends.executor import BlockingExecutor, JobLock
from retrieval_server.backends.vector_store import (
    DENSE,
    INDEXED_FIELDS,
    INTEGER_INDEXED_FIELDS,
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
_CHILDREN = models.HasVectorCondition(has_vector=DENSE)
_PARENTS = models.HasVectorCondition(has_vector=PARENT)

#: The vacuum thresholds a collection is created with, and an existing one is set to (a server's
#: own defaults, 20 % of a segment of at least 1,000 vectors, kept deleted chunks in BM25's IDF as
#: VACUUM_DELETED_SHARE explains). The server refuses a minimum under 100 vectors, so a segment
#: smaller than that is never vacuumed. A server's ``optimizers_overwrite`` setting overrides both.
OPTIMIZERS = models.OptimizersConfigDiff(deleted_threshold=VACUUM_DELETED_SHARE, vacuum_min_vector_number=100)

#: the most one write request may hold (estimated by :func:`_request_bytes`): a Qdrant server refuses
#: a body over its ``service.max_request_size_mb`` (32 MB by default), and one ingest batch of
#: children of 384 dimensions with 1,000-character texts sent whole came to 12.5 MiB at 1,024 (the
#: default RETRIEVAL_UPSERT_BATCH_SIZE) and 30.6 MiB at 2,500, which the setting allows and more
UPSERT_REQUEST_BYTES = 8 * 2**20


def _request_bytes(x: PointParts) -> int:
    """Over what the point adds to a REST body: a float as JSON takes up to 24 characters with its
    comma, a term id 12, and ``json.dumps`` escapes non-ASCII text into more bytes than UTF-8 takes."""
    floats = sum(len(v) for v in x.dense.values()) + sum(len(values) for _, values in x.sparse.values())
    term_ids = sum(len(indices) for indices, _ in x.sparse.values())
    return 24 * floats + 12 * term_ids + len(json.dumps(x.payload)) + 256


def _requests(parts: Sequence[PointParts]) -> list[list[PointParts]]:
    """``parts`` in runs of at most :data:`UPSERT_REQUEST_BYTES` (a larger point goes alone)."""
    runs: list[list[PointParts]] = [[]]
    size = 0
    for x in parts:
        bytes_ = _request_bytes(x)
        if runs[-1] and size + bytes_ > UPSERT_REQUEST_BYTES:
            runs.append([])
            size = 0
        runs[-1].append(x)
        size += bytes_
    return runs


# Local mode says that it ignores payload indexes and search params; the server uses them.
warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
warnings.filterwarnings("ignore", message="Local mode performs exact")


def _filter(flt: PointFilter) -> models.Filter | None:
    should, must_any = access_clauses(flt)
    if not should and not must_any:
        return None
    # One level, as the embedded engine's filter (edge._filter): the same points, fewer checks per point.
    return models.Filter(must=[models.FieldCondition(key=k, match=models.MatchAny(any=v)) for k, v in must_any] or None,
                         should=[models.FieldCondition(key=k, match=models.MatchAny(any=v)) for k, v in should] or None)


def _document(document_id: str) -> models.FieldCondition:
    return models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))


def _certificate_refused(exc: BaseException) -> bool:
    """Whether ``exc`` comes of a server certificate that did not verify (qdrant-client wraps httpx's
    error, which wraps ssl's)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ssl.SSLCertVerificationError):
        cause = cause.__cause__ or cause.__context__
    return cause is not None


class _OffLoop:
    """qdrant-client's local mode with the async client's calls, each run on ``executor`` (a thread
    of its own when none is given, stopped at :meth:`close`), one at a time. Local mode computes in
    Python on the calling thread, and its async client on the event loop: a search of 5,000 points
    took 108 ms, and every other request waited as long (a stall of 536 ms over five). One at a
    time because it is not made for threads (its points are plain Python containers); nothing is
    lost, as on the loop only one call ran at once too. A caller that gives up (a leg past its
    deadline) leaves at once, and the next call starts when the thread is done with its call
    (:class:`JobLock`): waiting for the thread itself, a caller cancelled again (the request's
    cancellation after the leg's) let the next call run beside it, and a failure nobody awaited
    was logged as never retrieved."""

    def __init__(self, client: QdrantClient, executor: BlockingExecutor | None) -> None:
        self._client, self._lock = client, JobLock()
        self._own_executor = executor is None
        self._executor = executor or BlockingExecutor(1, "qdrant-local")

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            async with self._lock:
                return await self._lock.run(self._executor, method, *args, **kwargs)

        return call

    async def close(self) -> None:
        try:
            async with self._lock:
                await self._lock.run(self._executor, self._client.close)
        finally:
            if self._own_executor:
                self._executor.shutdown()


class QdrantVectorStore:
    """``executor``: what runs local mode's calls (``path``); unset, a thread of the store's own."""

    def __init__(
        self,
        collection: str,
        dim: int,
        *,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        ca: Path | None = None,
        timeout_s: int = 30,
        policy: SearchPolicy | None = None,
        features: IndexFeatures = IndexFeatures(),
        read_only: bool = False,
        executor: BlockingExecutor | None = None,
    ) -> None:
        self._collection = collection
        self._dim = dim
        self._read_only = read_only
        self.policy = policy or SearchPolicy()
        #: what a new collection is created with; an existing one reports what it holds
        self._wanted = self.features = features
        if url:
            # A cluster's Qdrant is certified by a private CA (cert-manager's, Qdrant's own) that the
            # system's CAs lack; `verify` reaches httpx (no gRPC here: prefer_grpc is not set).
            # Its version probe is a request of its own, made without `verify`: against that CA it
            # could only warn that the server's version cannot be read.
            verify = {"verify": ssl.create_default_context(cafile=ca)} if ca else {}
            self._client: AsyncQdrantClient | _OffLoop = AsyncQdrantClient(
                url=url, api_key=api_key, timeout=timeout_s, check_compatibility=ca is None, **verify)
        else:
            # Its SQLite file is then used from the executor's threads, one call at a time (_OffLoop).
            local = QdrantClient(location=":memory:") if path == ":memory:" else QdrantClient(path=path, force_disable_check_same_thread=True)
            self._client = _OffLoop(local, executor)

    async def _created(self) -> bool:
        """Whether this call made the collection; False when another did since it was looked for
        (workers and replicas starting at once on an empty Qdrant: the server refuses the second)."""
        dense = models.VectorParams(size=self._dim, distance=models.Distance.COSINE)
        sparse = models.SparseVectorParams(modifier=models.Modifier.IDF)
        try:
            await self._client.create_collection(
                self._collection,
                vectors_config={DENSE: dense, **({PARENT: dense} if self.features.parent_vectors else {})},
                sparse_vectors_config=dict.fromkeys(self.features.sparse_names(), sparse),
                optimizers_config=OPTIMIZERS,
            )
        except Exception:
            if not await self._client.collection_exists(self._collection):
                raise
            return False
        return True

    async def open(self) -> None:
        try:
            exists = await self._client.collection_exists(self._collection)
        except Exception as exc:
            hint = ": if a private CA signed its certificate, name that CA in RETRIEVAL_QDRANT_CA" if _certificate_refused(exc) else ""
            raise Unavailable(f"Qdrant is unreachable: {exc}{hint}") from exc
        if not exists and self._read_only:
            # Creating it would be a write, and a mistyped name would be served as an empty index.
            raise Unavailable(f"the Qdrant collection {self._collection} does not exist, and a read-only server "
                              "(RETRIEVAL_READ_ONLY=true) does not create it: check its name, or ingest through a "
                              "server of this data started without RETRIEVAL_READ_ONLY")
        created = not exists and await self._created()
        if created:
            indexed: set[str] = set()
        else:
            info = await self._client.get_collection(self._collection)
            params = info.config.params
            # One unnamed vector is reported bare, under the name "" here.
            vectors = params.vectors if isinstance(params.vectors, dict) else {"": params.vectors} if params.vectors else {}
            sparse = params.sparse_vectors or {}
            check_schema(f"the collection {self._collection}", {n: (v.size, v.distance.value) for n, v in vectors.items()},
                         {n: v.modifier.value if v.modifier else None for n, v in sparse.items()}, self._dim)
            self.features = IndexFeatures.of(list(vectors), list(sparse))
            if lacking := self.features.lacking(self._wanted):
                log.warning("collection %s: %s", self._collection, legacy_index_message(lacking))
            indexed = set(info.payload_schema or {})
            # A collection made before the thresholds were set, or by another client.
            held = info.config.optimizer_config
            if not self._read_only and (held.deleted_threshold, held.vacuum_min_vector_number) != (
                    OPTIMIZERS.deleted_threshold, OPTIMIZERS.vacuum_min_vector_number):
                await self._set_vacuum_thresholds()
        # A collection made by an older version lacks the indexes of fields filtered on since.
        missing = {name: models.PayloadSchemaType.KEYWORD for name in INDEXED_FIELDS if name not in indexed}
        missing |= {name: models.PayloadSchemaType.INTEGER for name in INTEGER_INDEXED_FIELDS if name not in indexed}
        if missing and self._read_only:
            log.warning("collection %s: lacks the payload indexes %s, which a read-only server does not create: "
                        "filters on them scan the collection", self._collection, ", ".join(missing))
        elif missing:
            await self._create_payload_indexes(missing)
        await self.refresh_count()

    async def _create_payload_indexes(self, missing: dict[str, models.PayloadSchemaType]) -> None:
        # Best effort, as the vacuum thresholds: without an index a filter scans the collection,
        # slower but the same answer, which is no reason to refuse to serve (a read-only key: 403).
        for name, schema in missing.items():
            try:
                await self._client.create_payload_index(self._collection, name, schema)
            except Exception as exc:
                log.warning("collection %s: could not create its payload index %s, so filters on it scan the collection: %s",
                            self._collection, name, " ".join(str(exc).split()))

    async def _set_vacuum_thresholds(self) -> None:
        # Best effort: the thresholds only tune when deleted chunks leave BM25's IDF, which is no
        # reason to refuse to serve (an API key that may only read is answered 403).
        try:
            await self._client.update_collection(self._collection, optimizers_config=OPTIMIZERS)
        except Exception as exc:  # qdrant-client's text puts the server's answer on lines of its own
            log.warning("collection %s: could not set its vacuum thresholds, so the Qdrant server's own apply: %s",
                        self._collection, " ".join(str(exc).split()))

    async def refresh_count(self) -> None:
        self.policy.points = await self.count()

    async def close(self) -> None:
        await self._client.close()

    async def _write(self, parts: list[PointParts]) -> None:
        # A write cut short leaves some of its points: a new version's are removed by the
        # reconciliation that follows any failed store (points are per version, never overwritten).
        for run in _requests(parts):
            await self._client.upsert(
                self._collection,
                points=[
                    models.PointStruct(
                        id=x.id,
                        vector={**x.dense, **{n: models.SparseVector(indices=i, values=v) for n, (i, v) in x.sparse.items()}},
                        payload=x.payload,
                    )
                    for x in run
                ],
                wait=True,
            )

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        await self._write([point_parts(p, self.features) for p in points])

    async def upsert_parents(self, points: Sequence[ParentPoint]) -> None:
        if points and self.features.parent_vectors:
            await self._write([parent_parts(p) for p in points])

    async def delete_document(self, document_id: str, keep_version: str | None = None, keep_chunks: Collection[str] | None = None) -> None:
        must_not: list[models.Filter] | None = None
        if keep_version is not None:
            kept = [models.FieldCondition(key="version", match=models.MatchValue(value=keep_version))]
            if keep_chunks is not None:
                kept.append(models.FieldCondition(key="chunk_id", match=models.MatchAny(any=list(keep_chunks))))
            must_not = [models.Filter(must=kept)]
        await self._client.delete(
            self._collection,
            points_selector=models.FilterSelector(filter=models.Filter(must=[_document(document_id)], must_not=must_not)),
            wait=True,
        )

    async def sync(self) -> None:
        """Nothing to do: every write and delete waits (``wait=True``) for the server to have logged and
        applied it before it returns (local mode commits each point to its SQLite file first); the
        server's WAL is its own to keep, and the client has no call to flush it."""

    def _params(self, engine_filter: models.Filter | None) -> models.SearchParams:
        exact = self.policy.exact
        return models.SearchParams(
            exact=exact,
            hnsw_ef=None if exact else self.policy.hnsw_ef,
            acorn=models.AcornSearchParams(enable=True) if engine_filter is not None else None,
        )

    async def _query(self, query: list[float] | models.SparseVector, using: str, limit: int, flt: PointFilter) -> list[VectorHit]:
        if not (asked := engine_limit(limit)):
            return []
        engine_filter = _filter(flt)
        res = await self._client.query_points(
            self._collection,
            query=query,
            using=using,
            query_filter=engine_filter,
            search_params=self._params(engine_filter),
            limit=asked,
            with_payload=True,
        )
        return [hit_from_payload(p.payload or {}, p.score) for p in ranked(res.points, limit)]

    async def search_dense(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[VectorHit]:
        return await self._query(np.asarray(vector, dtype=np.float32).tolist(), DENSE, limit, flt)

    async def nearest_vectors(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[np.ndarray]:
        if not (asked := engine_limit(limit)):
            return []
        engine_filter = _filter(flt)
        res = await self._client.query_points(
            self._collection, query=np.asarray(vector, dtype=np.float32).tolist(), using=DENSE, query_filter=engine_filter,
            search_params=self._params(engine_filter), limit=asked, with_payload=RANK_FIELDS, with_vectors=[DENSE],
        )
        points = ranked(res.points, limit)
        return [np.asarray(p.vector[DENSE], dtype=np.float32) for p in points if isinstance(p.vector, dict) and DENSE in p.vector]

    async def search_sparse(self, vector: SparseVector, limit: int, flt: PointFilter, *, titled: bool = False) -> list[VectorHit]:
        # The limit first: a negative one is refused whatever the query holds.
        if not engine_limit(limit) or not vector.indices:
            return []
        q = models.SparseVector(indices=list(vector.indices), values=list(vector.values))
        return await self._query(q, SPARSE_TITLED if titled and self.features.title_field else SPARSE, limit, flt)

    async def search_parents(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[VectorHit]:
        if not engine_limit(limit) or not self.features.parent_vectors:
            return []
        return await self._query(np.asarray(vector, dtype=np.float32).tolist(), PARENT, limit, flt)

    async def term_counts(self, max_points: int) -> TermCounts:
        counter, offset = TermCounter(max_points), None
        while counter.wanted:
            records, offset = await self._client.scroll(
                self._collection, scroll_filter=models.Filter(must=[_CHILDREN]), limit=counter.wanted,
                offset=offset, with_payload=False, with_vectors=[SPARSE],
            )
            counter.add([getattr(r.vector.get(SPARSE), "indices", None) if isinstance(r.vector, dict) else None for r in records])
            if offset is None or not records:
                break
        return counter.result()

    async def get_chunks(self, chunk_ids: Sequence[str]) -> list[VectorHit]:
        if not chunk_ids:
            return []
        flt = models.Filter(must=[_CHILDREN, models.FieldCondition(key="chunk_id", match=models.MatchAny(any=list(chunk_ids)))])
        payloads: list[dict] = []
        offset = None
        while True:
            records, offset = await self._client.scroll(
                self._collection, scroll_filter=flt, limit=2 * len(chunk_ids), offset=offset, with_payload=True, with_vectors=False
            )
            payloads += [r.payload for r in records if r.payload]
            if offset is None or not records:
                return hits_in_order(chunk_ids, payloads)

    async def count(self, document_id: str | None = None, version: str | None = None, *, parents: bool = False) -> int:
        must = [_PARENTS if parents else _CHILDREN]
        must += [models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in (("document_id", document_id), ("version", version)) if v is not None]
        flt = models.Filter(must=must)
        return (await self._client.count(self._collection, count_filter=flt, exact=True)).count

    async def optimize(self) -> None:
        """The server's own optimizer runs in the background (vacuuming by :data:`OPTIMIZERS`); nothing to do."""

    async def ping(self) -> None:
        await self._client.get_collection(self._collection)
