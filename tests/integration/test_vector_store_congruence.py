"""One behavioural suite for every VectorStore: qdrant-edge and qdrant-client (local mode)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.backends.vector_store import SearchPolicy, VectorStore
from retrieval_server.backends.vector_store.edge import EdgeVectorStore
from retrieval_server.domain import (
    Access,
    AccessFilter,
    ChildChunk,
    Document,
    Identity,
    PointFilter,
    Role,
    SparseVector,
    VectorPoint,
)
from tests.integration.conftest import DIM, make_vector_store

ANON = PointFilter()
ALICE = PointFilter(access=AccessFilter.for_identity(Identity("alice", Role.USER)))
ROOT = PointFilter(access=AccessFilter.for_identity(Identity("root", Role.SUPER_ADMIN)))


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _point(doc: Document, i: int, vec: np.ndarray, version: str = "v1", terms: tuple[int, ...] = (1,)) -> VectorPoint:
    child = ChildChunk(f"{doc.document_id}#p0c{i}", f"{doc.document_id}#p0", doc.document_id, i, 0, f"text {doc.document_id} {i}", 5)
    return VectorPoint(child, doc, vec, SparseVector(terms, tuple(1.0 for _ in terms)), version)


PUBLIC = Document("pub")
PRIVATE = Document("priv", access=Access.PRIVATE, owner_id="alice")
GRANTED = Document("granted", access=Access.PRIVATE, owner_id="bob", granted_user_ids=("alice",))
OTHER = Document("other", access=Access.PRIVATE, owner_id="bob")


async def _fill(store: VectorStore) -> np.ndarray:
    rng = np.random.default_rng(1)
    vecs = np.stack([_unit(rng.normal(size=DIM)) for _ in range(4)])
    await store.upsert([_point(d, 0, v, terms=(7, i)) for i, (d, v) in enumerate(zip([PUBLIC, PRIVATE, GRANTED, OTHER], vecs))])
    return vecs


async def test_dense_search_ranks_by_cosine(vector_store: VectorStore) -> None:
    vecs = await _fill(vector_store)
    hits = await vector_store.search_dense(vecs[3], 10, ROOT)
    assert hits[0].document_id == "other" and hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].parent_chunk_id == "other#p0" and hits[0].content == "text other 0"


async def test_access_filter_is_applied_inside_the_search(vector_store: VectorStore) -> None:
    vecs = await _fill(vector_store)
    for flt, visible in [(ANON, {"pub"}), (ALICE, {"pub", "priv", "granted"}), (ROOT, {"pub", "priv", "granted", "other"})]:
        for v in vecs:
            assert {h.document_id for h in await vector_store.search_dense(v, 10, flt)} == visible
        assert {h.document_id for h in await vector_store.search_sparse(SparseVector((7,), (1.0,)), 10, flt)} == visible


async def test_document_filter(vector_store: VectorStore) -> None:
    vecs = await _fill(vector_store)
    hits = await vector_store.search_dense(vecs[0], 10, PointFilter(access=ROOT.access, document_ids=("priv", "other")))
    assert {h.document_id for h in hits} == {"priv", "other"}


async def test_sparse_search_matches_terms(vector_store: VectorStore) -> None:
    await _fill(vector_store)
    hits = await vector_store.search_sparse(SparseVector((2,), (1.0,)), 10, ROOT)
    assert [h.document_id for h in hits] == ["granted"]
    assert await vector_store.search_sparse(SparseVector((), ()), 10, ROOT) == []


async def test_upsert_is_idempotent_and_versions_replace(vector_store: VectorStore) -> None:
    v = _unit(np.ones(DIM))
    await vector_store.upsert([_point(PUBLIC, i, v, "v1") for i in range(3)])
    await vector_store.upsert([_point(PUBLIC, i, v, "v1") for i in range(3)])
    assert await vector_store.count("pub") == 3
    # Re-ingest with fewer chunks: new version written, then every other version removed.
    await vector_store.upsert([_point(PUBLIC, 0, v, "v2")])
    await vector_store.delete_document("pub", keep_version="v2")
    assert await vector_store.count("pub") == 1
    await vector_store.delete_document("pub")
    assert await vector_store.count() == 0


async def test_empty_store_answers_empty(vector_store: VectorStore) -> None:
    assert await vector_store.search_dense(_unit(np.ones(DIM)), 5, ANON) == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
async def test_filtered_search_matches_exact_search(kind: str, tmp_path: Path, executor: BlockingExecutor) -> None:
    """After the HNSW index is built, neither a selective filter nor no filter may lose recall."""
    # 384 dims x 12k points is past the engine's indexing threshold, so HNSW really is built.
    dim, n = 384, 12_000
    # exact_max_points=0: HNSW even at this size, so the filtered path really runs on the graph.
    policy = SearchPolicy(exact_max_points=0)
    store = make_vector_store(kind, tmp_path, executor, dim=dim, policy=policy)
    await store.open()
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    docs = [Document(f"d{i % 200}") for i in range(200)]
    for start in range(0, n, 1000):
        await store.upsert([_point(docs[i % 200], i, vecs[i]) for i in range(start, min(start + 1000, n))])
    await store.optimize()
    assert not policy.exact and policy.points == n
    if isinstance(store, EdgeVectorStore):
        assert store.shard.info().indexed_vectors_count > 0, "HNSW was not built; the test would prove nothing"
    wanted = tuple(f"d{i}" for i in range(0, 200, 40))  # 5 of 200 documents: 2.5% of the points
    allowed = np.array([i for i in range(n) if f"d{i % 200}" in wanted])
    for q in rng.normal(size=(10, dim)).astype(np.float32):
        q /= np.linalg.norm(q)
        exact = allowed[np.argsort(-(vecs[allowed] @ q), kind="stable")[:10]]
        hits = await store.search_dense(q, 10, PointFilter(access=ROOT.access, document_ids=wanted))
        assert [int(h.chunk_id.rsplit("c", 1)[1]) for h in hits] == exact.tolist()
        # Unfiltered, the default policy scans exactly at this size (HNSW recall on random vectors is
        # far from 1.0 even at ef 512; see SearchPolicy).
        policy.exact_max_points = SearchPolicy().exact_max_points
        everything = np.argsort(-(vecs @ q), kind="stable")[:10]
        unfiltered = await store.search_dense(q, 10, ROOT)
        assert [int(h.chunk_id.rsplit("c", 1)[1]) for h in unfiltered] == everything.tolist()
        policy.exact_max_points = 0
    await store.close()


async def test_get_chunks_by_id(vector_store: VectorStore) -> None:
    await _fill(vector_store)
    got = await vector_store.get_chunks(["other#p0c0", "missing#p0c0", "pub#p0c0"])
    assert [h.chunk_id for h in got] == ["other#p0c0", "pub#p0c0"]
    assert got[0].content == "text other 0" and got[0].parent_chunk_id == "other#p0"
