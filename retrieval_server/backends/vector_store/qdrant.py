"""Production: a Qdrant server through qdrant-client's async client.

The same class serves qdrant-client's local mode (a folder or ':memory:'), which the tests use as
a stand-in for the server's code path since no server binary can run here.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from qdrant_client import AsyncQdrantClient, models

from retrieval_server.backends.vector_store import (
    DENSE,
    INDEXED_FIELDS,
    SPARSE,
    SearchPolicy,
    access_clauses,
    hit_from_payload,
    point_id,
    point_parts,
)
from retrieval_server.domain import PointFilter, SparseVector, Unavailable, VectorHit, VectorPoint

# Local mode says that it ignores payload indexes and search params; the server uses them.
warnings.filterwarnings("ignore", message="Payload indexes have no effect in the local Qdrant")
warnings.filterwarnings("ignore", message="Local mode performs exact")


def _filter(flt: PointFilter) -> models.Filter | None:
    should, must_any = access_clauses(flt)
    must: list = [models.FieldCondition(key=k, match=models.MatchAny(any=v)) for k, v in must_any]
    if should:
        must.append(
            models.Filter(should=[models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in should])
        )
    return models.Filter(must=must) if must else None


def _document(document_id: str) -> models.FieldCondition:
    return models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))


class QdrantVectorStore:
    def __init__(
        self,
        collection: str,
        dim: int,
        *,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        policy: SearchPolicy | None = None,
    ) -> None:
        self._collection = collection
        self._dim = dim
        self.policy = policy or SearchPolicy()
        if url:
            self._client = AsyncQdrantClient(url=url, api_key=api_key, timeout=int(timeout_s))
        elif path == ":memory:":
            self._client = AsyncQdrantClient(location=":memory:")
        else:
            self._client = AsyncQdrantClient(path=path)

    async def open(self) -> None:
        try:
            exists = await self._client.collection_exists(self._collection)
        except Exception as exc:
            raise Unavailable(f"Qdrant is unreachable: {exc}") from exc
        if not exists:
            await self._client.create_collection(
                self._collection,
                vectors_config={DENSE: models.VectorParams(size=self._dim, distance=models.Distance.COSINE)},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            )
            for name in INDEXED_FIELDS:
                await self._client.create_payload_index(self._collection, name, models.PayloadSchemaType.KEYWORD)
        await self._refresh_count()

    async def _refresh_count(self) -> None:
        self.policy.points = await self.count()

    async def close(self) -> None:
        await self._client.close()

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        if not points:
            return
        await self._client.upsert(
            self._collection,
            points=[
                models.PointStruct(
                    id=x.id,
                    vector={DENSE: x.dense, SPARSE: models.SparseVector(indices=x.sparse_indices, values=x.sparse_values)},
                    payload=x.payload,
                )
                for x in map(point_parts, points)
            ],
            wait=True,
        )
        await self._refresh_count()

    async def delete_document(self, document_id: str, keep_version: str | None = None) -> None:
        must_not = (
            [models.FieldCondition(key="version", match=models.MatchValue(value=keep_version))]
            if keep_version
            else None
        )
        await self._client.delete(
            self._collection,
            points_selector=models.FilterSelector(filter=models.Filter(must=[_document(document_id)], must_not=must_not)),
            wait=True,
        )
        await self._refresh_count()

    async def _query(self, query: list[float] | models.SparseVector, using: str, limit: int, flt: PointFilter) -> list[VectorHit]:
        engine_filter = _filter(flt)
        exact = self.policy.exact
        params = models.SearchParams(
            exact=exact,
            hnsw_ef=None if exact else self.policy.hnsw_ef,
            acorn=models.AcornSearchParams(enable=True) if engine_filter is not None else None,
        )
        res = await self._client.query_points(
            self._collection,
            query=query,
            using=using,
            query_filter=engine_filter,
            search_params=params,
            limit=limit,
            with_payload=True,
        )
        return [hit_from_payload(p.payload or {}, p.score) for p in res.points]

    async def search_dense(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[VectorHit]:
        return await self._query(np.asarray(vector, dtype=np.float32).tolist(), DENSE, limit, flt)

    async def search_sparse(self, vector: SparseVector, limit: int, flt: PointFilter) -> list[VectorHit]:
        if not vector.indices:
            return []
        q = models.SparseVector(indices=list(vector.indices), values=list(vector.values))
        return await self._query(q, SPARSE, limit, flt)

    async def get_chunks(self, chunk_ids: Sequence[str]) -> list[VectorHit]:
        if not chunk_ids:
            return []
        records = await self._client.retrieve(self._collection, ids=[point_id(c) for c in chunk_ids], with_payload=True)
        by_id = {r.payload["chunk_id"]: hit_from_payload(r.payload, 0.0) for r in records if r.payload}
        return [by_id[c] for c in chunk_ids if c in by_id]

    async def count(self, document_id: str | None = None, version: str | None = None) -> int:
        must = [models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in (("document_id", document_id), ("version", version)) if v]
        flt = models.Filter(must=must) if must else None
        return (await self._client.count(self._collection, count_filter=flt, exact=True)).count

    async def optimize(self) -> None:
        """The server's own optimizer runs in the background; nothing to do."""

    async def ping(self) -> None:
        await self._client.get_collection(self._collection)
