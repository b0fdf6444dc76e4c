"""One behavioural suite for every VectorStore: qdrant-edge and qdrant-client (local mode)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import numpy as np
import pytest

from retrieval_server.backends.executor import BlockingExecutor
import qdrant_edge as qe
from qdrant_client import AsyncQdrantClient, models

from retrieval_server.backends.sparse import TERMS_REVISION
from retrieval_server.backends.vector_store import DENSE, SPARSE, IndexFeatures, SearchPolicy, VectorStore
from retrieval_server.backends.vector_store import edge as edge_module
from retrieval_server.backends.vector_store.edge import EdgeVectorStore
from retrieval_server.domain import (
    Access,
    AccessFilter,
    ChildChunk,
    Document,
    Identity,
    ParentChunk,
    ParentPoint,
    PointFilter,
    Role,
    SparseVector,
    Unavailable,
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
    # Twenty private chunks (and parents) nearer the query than the public one, and a limit of 1:
    # filtered after the engine's cut instead of inside it, the public chunk would never come back.
    rng = np.random.default_rng(8)
    query = _unit(rng.normal(size=DIM))
    crowd = [Document(f"crowd{i}", access=Access.PRIVATE, owner_id="bob") for i in range(20)]
    near = [_unit(query + 0.01 * rng.normal(size=DIM)) for _ in crowd]
    await vector_store.upsert([_point(d, 0, v, terms=(7, 50)) for d, v in zip(crowd, near, strict=True)])
    await vector_store.upsert_parents([_parent(PUBLIC, 0, 0, vecs[0])] + [_parent(d, 0, 0, v) for d, v in zip(crowd, near, strict=True)])
    assert min(float(v @ query) for v in near) > float(vecs[0] @ query)
    keywords = SparseVector((7, 50), (1.0, 1.0))
    assert {h.document_id for h in await vector_store.search_sparse(keywords, 20, ROOT)} >= {c.document_id for c in crowd}
    assert [h.document_id for h in await vector_store.search_dense(query, 1, ANON)] == ["pub"]
    assert [h.document_id for h in await vector_store.search_sparse(keywords, 1, ANON)] == ["pub"]
    assert [h.document_id for h in await vector_store.search_parents(query, 1, ANON)] == ["pub"]
    nearest = await vector_store.nearest_vectors(query, 1, ANON)
    assert len(nearest) == 1 and nearest[0] == pytest.approx(vecs[0], abs=1e-5)
    assert {h.document_id for h in await vector_store.search_dense(query, 3, ALICE)} == {"pub", "priv", "granted"}


async def test_document_filter(vector_store: VectorStore) -> None:
    vecs = await _fill(vector_store)
    hits = await vector_store.search_dense(vecs[0], 10, PointFilter(access=ROOT.access, document_ids=("priv", "other")))
    assert {h.document_id for h in hits} == {"priv", "other"}
    # Both at once: the named documents, and of those only what the caller may read.
    for flt, visible in [(ALICE, {"pub", "priv"}), (ANON, {"pub"})]:
        named = PointFilter(access=flt.access, document_ids=("pub", "priv", "other"))
        assert {h.document_id for h in await vector_store.search_dense(vecs[0], 10, named)} == visible
        assert {h.document_id for h in await vector_store.search_sparse(SparseVector((7,), (1.0,)), 10, named)} == visible


#: a caller at the limit of groups (README: at most 1,000 in ``x-user-groups``)
MANY_GROUPS = PointFilter(access=AccessFilter(readers=("alice", *(f"group:g{j}" for j in range(1_000)))))


async def test_a_caller_of_many_groups_reads_what_any_of_them_opens(vector_store: VectorStore) -> None:
    """Documents granted to a first, a middle and the last of a caller's 1,000 groups, to a group
    it is not in, and to 1,000 users who are not the caller: every search sees what
    ``AccessFilter.allows`` says."""
    rng = np.random.default_rng(6)
    docs = [PUBLIC, PRIVATE, OTHER,
            *(Document(f"g{j}", access=Access.PRIVATE, owner_id="bob", granted_user_ids=(f"group:g{j}",)) for j in (0, 500, 999)),
            Document("outsiders", access=Access.PRIVATE, owner_id="bob", granted_user_ids=("group:elsewhere",)),
            Document("crowded", access=Access.PRIVATE, owner_id="bob", granted_user_ids=tuple(f"user{j}" for j in range(1_000)))]
    vecs = [_unit(rng.normal(size=DIM)) for _ in docs]
    await vector_store.upsert([_point(d, 0, v, terms=(7,)) for d, v in zip(docs, vecs, strict=True)])
    await vector_store.upsert_parents([_parent(d, 0, 0, v) for d, v in zip(docs, vecs, strict=True)])
    visible = {d.document_id for d in docs if MANY_GROUPS.access.allows(d)}
    assert visible == {"pub", "priv", "g0", "g500", "g999"}
    for v in vecs:
        assert {h.document_id for h in await vector_store.search_dense(v, 20, MANY_GROUPS)} == visible
        assert {h.document_id for h in await vector_store.search_parents(v, 20, MANY_GROUPS)} == visible
        assert len(await vector_store.nearest_vectors(v, 20, MANY_GROUPS)) == len(visible)
    assert {h.document_id for h in await vector_store.search_sparse(SparseVector((7,), (1.0,)), 20, MANY_GROUPS)} == visible


@pytest.mark.parametrize("principals", [0, 1, 1_000])
def test_the_access_filter_is_one_clause_for_all_the_callers_principals(principals: int) -> None:
    """Without payload indexes qdrant-edge checks each ``should`` clause against each point's
    readers: one clause per principal held the GIL 13.6 s per search for a caller of 1,000 groups
    over 127 documents of 1,000 grantees. The filter's size must not grow with the principals."""
    from retrieval_server.backends.vector_store import qdrant as qdrant_module

    flt = PointFilter(access=AccessFilter(readers=tuple(f"group:g{j}" for j in range(principals))))
    for built in (edge_module._filter(flt), qdrant_module._filter(flt)):  # noqa: SLF001 - the filters the engines get
        assert built is not None and built.must is None
        assert len(built.should) == (2 if principals else 1)


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


async def test_the_empty_version_is_a_version_to_keep_not_none(vector_store: VectorStore) -> None:
    """A row whose ``content_hash`` is the schema's default ('') has version '': keeping it kept
    nothing (every point of the document went), and counting it counted every version."""
    v = _unit(np.ones(DIM))
    await vector_store.upsert([_point(PUBLIC, i, v, "") for i in range(3)] + [_point(PUBLIC, 0, v, "v2")])
    assert await vector_store.count("pub", "") == 3
    await vector_store.delete_document("pub", keep_version="")
    assert await vector_store.count("pub") == await vector_store.count("pub", "") == 3
    await vector_store.delete_document("pub", keep_version=None)
    assert await vector_store.count("pub") == 0


async def test_a_version_written_over_itself_keeps_only_the_chunks_it_has_now(vector_store: VectorStore) -> None:
    """A document re-ingested under its own version after the chunker changed: the points of the
    chunks the new chunking no longer makes go, children and parents, in the same delete."""
    v = _unit(np.ones(DIM))
    kids = [ChildChunk(f"pub#p{c // 2}c{c}", f"pub#p{c // 2}", "pub", c, c // 2, f"text {c}", 5) for c in range(6)]
    await vector_store.upsert([VectorPoint(k, PUBLIC, v, SparseVector((1,), (1.0,)), "v1") for k in kids])
    await vector_store.upsert_parents([_parent(PUBLIC, p, 2 * p, v) for p in range(3)])
    await vector_store.upsert([_point(PUBLIC, 9, v, "v0")])
    await vector_store.delete_document("pub", keep_version="v1", keep_chunks=["pub#p0c0", "pub#p0c1", "pub#p1c2"])
    assert sorted(h.chunk_id for h in await vector_store.get_chunks([k.chunk_id for k in kids] + ["pub#p0c9"])) == [
        "pub#p0c0", "pub#p0c1", "pub#p1c2"]
    assert await vector_store.count("pub") == await vector_store.count("pub", "v1") == 3
    assert sorted(h.parent_chunk_id for h in await vector_store.search_parents(v, 10, ANON)) == ["pub#p0", "pub#p1"]
    assert await vector_store.count("pub", parents=True) == 2


async def test_empty_store_answers_empty(vector_store: VectorStore) -> None:
    assert await vector_store.search_dense(_unit(np.ones(DIM)), 5, ANON) == []


async def test_a_limit_of_0_answers_nothing_and_a_negative_one_is_refused(
        vector_store: VectorStore, tmp_path: Path, executor: BlockingExecutor) -> None:
    """Alike on both engines: qdrant-edge answered nothing to 0 and an OverflowError to -1, local
    mode a ValueError of its own to both. Alike whatever the search holds too: a keyword search of
    no terms, and a store's without parent vectors, answered nothing to -1."""
    v = _unit(np.ones(DIM))
    await vector_store.upsert([_point(PUBLIC, 0, v)])
    await vector_store.upsert_parents([_parent(PUBLIC, 0, 0, v)])
    legs = [lambda limit: vector_store.search_dense(v, limit, ANON), lambda limit: vector_store.search_sparse(SparseVector((1,), (1.0,)), limit, ANON),
            lambda limit: vector_store.search_parents(v, limit, ANON), lambda limit: vector_store.nearest_vectors(v, limit, ANON)]
    for leg in legs:
        assert len(await leg(1)) == 1
        assert await leg(0) == []
        with pytest.raises(ValueError, match=r"limit is -1: a search's limit must be 0 or more"):
            await leg(-1)
    kind = "edge" if isinstance(vector_store, EdgeVectorStore) else "qdrant-local"
    childless = make_vector_store(kind, tmp_path / "no-parents", executor, features=IndexFeatures(title_field=True))
    await childless.open()
    try:
        for leg in [lambda limit: vector_store.search_sparse(SparseVector((), ()), limit, ANON),
                    lambda limit: childless.search_parents(v, limit, ANON)]:
            assert await leg(1) == []
            with pytest.raises(ValueError, match=r"limit is -1: a search's limit must be 0 or more"):
                await leg(-1)
    finally:
        await childless.close()


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
    await store.refresh_count()
    assert not policy.exact and policy.points == n
    if isinstance(store, EdgeVectorStore):
        # The count adds each point's sparse vector (the inverted index) to the dense vectors in HNSW.
        assert store.shard.info().indexed_vectors_count == 2 * n, "HNSW was not built; the test would prove nothing"
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


@pytest.mark.slow
@pytest.mark.parametrize("always_exact", [False, True])
async def test_the_embedded_engine_builds_no_graph_that_exact_search_would_not_read(
    always_exact: bool, tmp_path: Path, executor: BlockingExecutor
) -> None:
    """qdrant-edge builds HNSW inside optimize() holding the GIL (the whole process stalls): past its
    default threshold, 12k vectors of 384 dimensions used to get a graph that exact scans never read."""
    dim, n = 384, 12_000
    store = make_vector_store("edge", tmp_path, executor, dim=dim, policy=SearchPolicy(always_exact=always_exact))
    await store.open()
    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    for start in range(0, n, 1000):
        await store.upsert([_point(Document(f"d{i % 50}"), i, vecs[i]) for i in range(start, min(start + 1000, n))])
    await store.optimize()
    await store.refresh_count()
    assert isinstance(store, EdgeVectorStore) and store.policy.exact
    # Only each point's sparse vector counts as indexed (the inverted index); with HNSW, 2n.
    assert store.shard.info().indexed_vectors_count == n
    q = vecs[7]
    assert [int(h.chunk_id.rsplit("c", 1)[1]) for h in await store.search_dense(q, 5, ROOT)] == np.argsort(-(vecs @ q), kind="stable")[:5].tolist()
    await store.close()


async def test_nearest_vectors_are_the_readable_childrens_own(vector_store: VectorStore) -> None:
    """Dense feedback reads the stored child vectors of the nearest chunks, nearest first, and only
    of chunks the filter admits; parent points (no child vector) are never among them."""
    vecs = await _fill(vector_store)
    await vector_store.upsert_parents([_parent(OTHER, 0, 0, vecs[0])])
    got = await vector_store.nearest_vectors(vecs[3], 10, ROOT)
    order = np.argsort(-(vecs @ vecs[3]), kind="stable")
    assert len(got) == 4
    for v, i in zip(got, order, strict=True):
        assert v == pytest.approx(vecs[i], abs=1e-5)
    assert [v.tolist() for v in await vector_store.nearest_vectors(vecs[3], 2, ROOT)] == [v.tolist() for v in got[:2]]
    # Only what the caller may read: anonymous callers see the public chunk alone, Alice her three.
    anon = await vector_store.nearest_vectors(vecs[1], 10, ANON)
    assert len(anon) == 1 and anon[0] == pytest.approx(vecs[0], abs=1e-5)
    alice = await vector_store.nearest_vectors(vecs[3], 10, ALICE)
    assert len(alice) == 3 and not any(np.allclose(v, vecs[3], atol=1e-5) for v in alice)
    assert await vector_store.nearest_vectors(vecs[0], 10, PointFilter(access=ROOT.access, document_ids=("missing",))) == []


async def test_get_chunks_by_id(vector_store: VectorStore) -> None:
    await _fill(vector_store)
    got = await vector_store.get_chunks(["other#p0c0", "missing#p0c0", "pub#p0c0"])
    assert [h.chunk_id for h in got] == ["other#p0c0", "pub#p0c0"]
    assert got[0].content == "text other 0" and got[0].parent_chunk_id == "other#p0"
    # A new version is written beside the committed one (never over it) until the old one is deleted.
    vec = _unit(np.ones(DIM))
    await vector_store.upsert([_point(PUBLIC, 0, vec, "v2")])
    assert await vector_store.count("pub", "v1") == 1 and await vector_store.count("pub", "v2") == 1
    assert sorted(h.version for h in await vector_store.get_chunks(["pub#p0c0"])) == ["v1", "v2"]
    await vector_store.delete_document("pub", keep_version="v2")
    assert [h.version for h in await vector_store.get_chunks(["pub#p0c0"])] == ["v2"]
    # A parent point carries its first child's chunk id but is not that chunk.
    await vector_store.upsert_parents([_parent(OTHER, 0, 0, vec)])
    assert [h.chunk_id for h in await vector_store.get_chunks(["other#p0c0"])] == ["other#p0c0"]


def _parent(doc: Document, p: int, first_child: int, vec: np.ndarray, version: str = "v1") -> ParentPoint:
    parent = ParentChunk(f"{doc.document_id}#p{p}", doc.document_id, p, f"parent {doc.document_id} {p}", 50)
    child = ChildChunk(f"{doc.document_id}#p{p}c{first_child}", parent.parent_chunk_id, doc.document_id, first_child, p,
                       f"text {doc.document_id} {first_child}", 5)
    return ParentPoint(parent, child, doc, vec, version)


async def test_parent_vectors_are_a_leg_of_their_own(vector_store: VectorStore) -> None:
    """Parent points answer only parent searches, report their first child, obey access and versions."""
    assert vector_store.features == IndexFeatures(parent_vectors=True, title_field=True)
    rng = np.random.default_rng(5)
    child_vecs = await _fill(vector_store)
    parent_vecs = np.stack([_unit(rng.normal(size=DIM)) for _ in range(4)])
    await vector_store.upsert_parents([_parent(d, 0, 0, v) for d, v in zip([PUBLIC, PRIVATE, GRANTED, OTHER], parent_vecs)])
    hits = await vector_store.search_parents(parent_vecs[2], 10, ROOT)
    assert hits[0].document_id == "granted" and hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert (hits[0].chunk_id, hits[0].parent_chunk_id, hits[0].content) == ("granted#p0c0", "granted#p0", "text granted 0")
    assert {h.document_id for h in await vector_store.search_parents(parent_vecs[2], 10, ANON)} == {"pub"}
    assert {h.document_id for h in await vector_store.search_parents(parent_vecs[2], 10, ALICE)} == {"pub", "priv", "granted"}
    # Child searches never see parent points, and counts are of children unless asked for parents.
    for v in parent_vecs:
        assert len(await vector_store.search_dense(v, 10, ROOT)) == 4
    assert len(await vector_store.search_sparse(SparseVector((7,), (1.0,)), 10, ROOT)) == 4
    assert await vector_store.count() == 4 and await vector_store.count("pub") == 1
    await vector_store.upsert_parents([_parent(PUBLIC, 1, 1, parent_vecs[1])])
    assert await vector_store.count(parents=True) == 5 and await vector_store.count("pub", "v1", parents=True) == 2
    assert await vector_store.count("pub", "v2", parents=True) == 0 and await vector_store.count() == 4
    assert child_vecs.shape == parent_vecs.shape
    # A new version's parents replace the old ones; deleting a document removes its parents.
    await vector_store.upsert_parents([_parent(PUBLIC, 1, 3, parent_vecs[0], "v2")])
    await vector_store.delete_document("pub", keep_version="v2")
    assert [h.chunk_id for h in await vector_store.search_parents(parent_vecs[0], 10, ANON)] == ["pub#p1c3"]
    assert await vector_store.count("pub", parents=True) == await vector_store.count("pub", "v2", parents=True) == 1
    await vector_store.delete_document("pub")
    assert await vector_store.search_parents(parent_vecs[0], 10, ANON) == []


async def test_document_vectors_are_the_first_parents(vector_store: VectorStore) -> None:
    """``first_parents`` narrows a parent search to each document's first window (its document
    vector), with access applied inside the engine; a re-ingested version's first parent replaces
    the old one and deleting the document removes it."""
    rng = np.random.default_rng(9)
    await _fill(vector_store)
    first = np.stack([_unit(rng.normal(size=DIM)) for _ in range(4)])
    later = _unit(rng.normal(size=DIM))
    docs = [PUBLIC, PRIVATE, GRANTED, OTHER]
    await vector_store.upsert_parents([_parent(d, 0, 0, v) for d, v in zip(docs, first)] + [_parent(PUBLIC, 1, 2, later)])
    documents = dataclasses.replace(ROOT, first_parents=True)
    # The later parent is the nearest parent of its own vector, yet no document vector.
    assert (await vector_store.search_parents(later, 1, ROOT))[0].parent_chunk_id == "pub#p1"
    hits = await vector_store.search_parents(later, 10, documents)
    assert sorted(h.parent_chunk_id for h in hits) == ["granted#p0", "other#p0", "priv#p0", "pub#p0"]
    assert hits[0].score < 0.99
    assert {h.document_id for h in await vector_store.search_parents(first[2], 10, dataclasses.replace(ANON, first_parents=True))} == {"pub"}
    alice = dataclasses.replace(ALICE, first_parents=True)
    assert {h.document_id for h in await vector_store.search_parents(first[2], 10, alice)} == {"pub", "priv", "granted"}
    # A new version replaces the document vector; deleting the document removes it.
    await vector_store.upsert_parents([_parent(PUBLIC, 0, 0, later, "v2")])
    await vector_store.delete_document("pub", keep_version="v2")
    top = (await vector_store.search_parents(later, 1, documents))[0]
    assert (top.document_id, top.version) == ("pub", "v2") and top.score == pytest.approx(1.0, abs=1e-4)
    await vector_store.delete_document("pub")
    assert "pub" not in {h.document_id for h in await vector_store.search_parents(later, 10, documents)}


async def test_titled_keyword_vector_is_searched_on_request(vector_store: VectorStore) -> None:
    v = _unit(np.ones(DIM))
    point = dataclasses.replace(_point(PUBLIC, 0, v, terms=(1,)), sparse_titled=SparseVector((1, 9), (1.0, 2.0)))
    await vector_store.upsert([point])
    title_only = SparseVector((9,), (1.0,))
    assert await vector_store.search_sparse(title_only, 5, ANON) == []
    assert [h.chunk_id for h in await vector_store.search_sparse(title_only, 5, ANON, titled=True)] == ["pub#p0c0"]


@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
async def test_equal_scores_come_back_by_chunk_id_whatever_the_limit_and_the_history(kind: str, tmp_path: Path, executor: BlockingExecutor) -> None:
    """Hits of equal score come back by chunk id, then version, on every leg, and a search of k is
    the first k of a search of more. In the engines' own order qdrant-edge's one hit at limit 1 was
    its last at limit 12, a re-ingest of another document reshuffled them, and local mode's order
    changed with a restart: under RRF that order is each tied hit's rank."""
    docs = [Document(f"d{i}") for i in range(12)]
    # Each its own vector, all at one cosine from the query (and to the float: the rest is zeros).
    axes = [np.eye(DIM)[1 + i % (DIM - 1)] * (1 if i < DIM - 1 else -1) for i in range(len(docs))]
    vecs = {f"{d.document_id}#p0c0": _unit(np.eye(DIM)[0] + axis) for d, axis in zip(docs, axes, strict=True)}
    query, keywords = np.eye(DIM, dtype=np.float32)[0], SparseVector((1,), (1.0,))
    by_id = sorted(vecs)  # d0, d1, d10, d11, d2, ...

    async def assert_in_order(store: VectorStore, versions: dict[str, list[str]]) -> None:
        expected = [(c, version) for c in by_id for version in versions.get(c, ["v1"])]
        for k in (1, 3, len(expected)):
            for leg in (store.search_dense(query, k, ROOT), store.search_sparse(keywords, k, ROOT), store.search_parents(query, k, ROOT)):
                assert [(h.chunk_id, h.version) for h in await leg] == expected[:k]
            # Told by their vectors (local mode stores them normalized again, a float or so apart).
            nearest = [min(vecs, key=lambda c: float(np.linalg.norm(vecs[c] - v))) for v in await store.nearest_vectors(query, k, ROOT)]
            assert nearest == [c for c, _ in expected[:k]]

    store = make_vector_store(kind, tmp_path, executor)
    await store.open()
    try:
        await store.upsert([_point(d, 0, vecs[f"{d.document_id}#p0c0"]) for d in docs])
        await store.upsert_parents([_parent(d, 0, 0, vecs[f"{d.document_id}#p0c0"]) for d in docs])
        await assert_in_order(store, {})
        # A re-ingest of d5 half done (both versions held), then done: it moves nothing else.
        await store.upsert([_point(docs[5], 0, vecs["d5#p0c0"], "v2")])
        await store.upsert_parents([_parent(docs[5], 0, 0, vecs["d5#p0c0"], "v2")])
        await assert_in_order(store, {"d5#p0c0": ["v1", "v2"]})
        await store.delete_document("d5", keep_version="v2")
        await store.optimize()
        await assert_in_order(store, {"d5#p0c0": ["v2"]})
    finally:
        await store.close()
    reopened = make_vector_store(kind, tmp_path, executor)
    await reopened.open()
    try:
        await assert_in_order(reopened, {"d5#p0c0": ["v2"]})
    finally:
        await reopened.close()


async def test_keyword_scores_after_re_ingests_are_a_fresh_stores(tmp_path: Path, executor: BlockingExecutor) -> None:
    """A re-ingest writes the new version and deletes the old: in qdrant-edge the deleted points
    counted in BM25's IDF until a vacuum, which its defaults never ran in a small index, so ten
    edits of one document swapped a ranking (and a restart swapped it back). qdrant-edge only:
    qdrant-client's local mode has no optimizer and passed with a server's defaults; what a server
    is asked to vacuum at is test_a_qdrant_collection_vacuums_at_the_embedded_engines_deleted_share's."""
    kind = "edge"
    x, y, filler = 100, 200, 300
    v = _unit(np.ones(DIM))
    # x in two documents, y in three: x is the rarer term, until C's deleted versions count.
    docs = [_point(Document("A"), 0, v, terms=(x, filler)), _point(Document("B"), 0, v, terms=(y, filler)),
            _point(Document("C"), 0, v, terms=(x, filler))]
    docs += [_point(Document(f"n{i}"), 0, v, terms=(y if i < 2 else filler,)) for i in range(20)]
    query = SparseVector((x, y), (1.0, 1.0))

    async def scores(store: VectorStore) -> list[tuple[str, float]]:
        return sorted((h.document_id, round(h.score, 4)) for h in await store.search_sparse(query, 5, ROOT))

    fresh = make_vector_store(kind, tmp_path / "fresh", executor)
    edited = make_vector_store(kind, tmp_path / "edited", executor)
    await fresh.open()
    await edited.open()
    try:
        await fresh.upsert(docs)
        await edited.upsert(docs)
        for k in range(2, 12):
            await edited.upsert([_point(Document("C"), 0, v, version=f"v{k}", terms=(x, filler))])
            await edited.delete_document("C", keep_version=f"v{k}")
        await edited.optimize()
        assert await scores(edited) == await scores(fresh)
    finally:
        await fresh.close()
        await edited.close()


async def test_term_counts_are_document_frequencies(vector_store: VectorStore) -> None:
    await _fill(vector_store)  # terms (7, i) per document
    await vector_store.upsert_parents([_parent(PUBLIC, 0, 0, _unit(np.ones(DIM)))])
    counts = await vector_store.term_counts(1000)
    assert counts.points == 4 and counts.df == {7: 4, 0: 1, 1: 1, 2: 1, 3: 1}
    assert (await vector_store.term_counts(2)).points == 2


async def test_term_counts_read_in_pages_count_each_point_once(vector_store: VectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded engine reads the sample a page at a time (each call holds the GIL): pages that
    end mid-sample, and a sample that ends mid-page, count each child once."""
    monkeypatch.setattr(edge_module, "TERM_PAGE", 3)
    pages: list[int] = []
    if isinstance(vector_store, EdgeVectorStore):
        read_page = EdgeVectorStore._term_page

        def counted(self: EdgeVectorStore, limit: int, offset: object) -> tuple[list[list[int] | None], object]:
            pages.append(limit)
            return read_page(self, limit, offset)

        monkeypatch.setattr(EdgeVectorStore, "_term_page", counted)
    rng = np.random.default_rng(4)
    docs = [PUBLIC, PRIVATE, GRANTED, OTHER]
    await vector_store.upsert([_point(docs[i % 4], i, _unit(rng.normal(size=DIM)), terms=(7, 100 + i % 5)) for i in range(11)])
    counts = await vector_store.term_counts(1000)
    assert counts.points == 11 and counts.df == {7: 11, 100: 3, 101: 2, 102: 2, 103: 2, 104: 2}
    if isinstance(vector_store, EdgeVectorStore):
        assert pages == [3, 3, 3, 3]
        pages.clear()
    sampled = await vector_store.term_counts(5)
    assert sampled.points == 5 and sampled.df[7] == 5 and sum(v for k, v in sampled.df.items() if k != 7) == 5
    assert pages == ([3, 2] if isinstance(vector_store, EdgeVectorStore) else [])


async def test_an_embedded_upsert_is_written_in_pages_and_a_waiting_query_runs_between_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """qdrant-edge holds the GIL for the whole of an upsert: a large write goes to the engine
    ``UPSERT_PAGE`` points per call, each a background job, so a query's engine call waiting for the
    executor's only thread runs after the page in progress, not after the whole write."""
    monkeypatch.setattr(edge_module, "UPSERT_PAGE", 4)
    loop = asyncio.get_running_loop()
    events: list[str] = []
    first_page, query_queued = asyncio.Event(), threading.Event()
    write_page = EdgeVectorStore._upsert_page

    def page(self: EdgeVectorStore, parts: list[object]) -> None:
        events.append(f"page of {len(parts)}")
        if len(events) == 1:
            loop.call_soon_threadsafe(first_page.set)
            # The bound only turns a regression into a failure, not a hang.
            assert query_queued.wait(timeout=300), "no query job was queued while the first page was written"
        write_page(self, parts)  # type: ignore[arg-type]

    monkeypatch.setattr(EdgeVectorStore, "_upsert_page", page)
    executor = BlockingExecutor(1)
    store = EdgeVectorStore(tmp_path / "edge", DIM, executor)
    try:
        await store.open()
        rng = np.random.default_rng(5)
        points = [_point(PUBLIC, i, _unit(rng.normal(size=DIM))) for i in range(10)]
        writing = asyncio.ensure_future(store.upsert(points))
        await first_page.wait()
        query = asyncio.ensure_future(executor.run(events.append, "query"))
        await asyncio.sleep(0)  # one turn of the loop runs the task up to its first await: run() has queued the job
        query_queued.set()
        await asyncio.gather(writing, query)
        assert events == ["page of 4", "query", "page of 4", "page of 2"]
        assert await store.count() == 10
        assert [h.chunk_id for h in await store.search_dense(points[3].dense, 1, ANON)] == ["pub#p0c3"]
    finally:
        await store.close()
        executor.shutdown()


@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
async def test_an_index_from_before_parent_vectors_keeps_working(kind: str, tmp_path: Path, executor: BlockingExecutor) -> None:
    """Written with only ``dense`` and ``bm25``: it opens, serves and takes writes; the new legs are off."""
    if kind == "edge":
        config = qe.EdgeConfig(vectors={DENSE: qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine)},
                               sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)})
        (tmp_path / "edge").mkdir()
        qe.EdgeShard.create(str(tmp_path / "edge"), config).close()
    else:
        client = AsyncQdrantClient(path=str(tmp_path / "qdrant-local"))
        await client.create_collection("chunks", vectors_config={DENSE: models.VectorParams(size=DIM, distance=models.Distance.COSINE)},
                                       sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)})
        await client.close()
    store = make_vector_store(kind, tmp_path, executor)
    await store.open()
    try:
        assert store.features == IndexFeatures(parent_vectors=False, title_field=False, terms=1)
        v = _unit(np.ones(DIM))
        await store.upsert([dataclasses.replace(_point(PUBLIC, 0, v, terms=(4,)), sparse_titled=SparseVector((4, 9), (1.0, 1.0)))])
        await store.upsert_parents([_parent(PUBLIC, 0, 0, v)])
        assert [h.chunk_id for h in await store.search_dense(v, 5, ANON)] == ["pub#p0c0"]
        assert await store.search_parents(v, 5, ANON) == []
        # The titled search falls back to the plain keyword vector.
        assert [h.chunk_id for h in await store.search_sparse(SparseVector((4,), (1.0,)), 5, ANON, titled=True)] == ["pub#p0c0"]
        assert await store.count() == 1
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
async def test_an_index_keeps_the_keyword_terms_revision_it_was_built_with(kind: str, tmp_path: Path, executor: BlockingExecutor) -> None:
    """Its keyword vectors' terms are read as they were made: a new index records the current
    revision, and one of an earlier revision stays of it when reopened (revision 1: from before the record)."""
    for revision in (TERMS_REVISION, 2, 1):
        path = tmp_path / str(revision)
        made = make_vector_store(kind, path, executor, features=IndexFeatures(parent_vectors=True, title_field=True, terms=revision))
        await made.open()
        await made.upsert([_point(PUBLIC, 0, _unit(np.ones(DIM)), terms=(4,))])
        await made.close()
        reopened = make_vector_store(kind, path, executor)
        await reopened.open()
        try:
            assert reopened.features == IndexFeatures(parent_vectors=True, title_field=True, terms=revision)
            assert [h.chunk_id for h in await reopened.search_sparse(SparseVector((4,), (1.0,)), 5, ANON, titled=False)] == ["pub#p0c0"]
        finally:
            await reopened.close()
    assert TERMS_REVISION == 3 and IndexFeatures.of([DENSE], [SPARSE]).terms == 1


@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
async def test_an_index_of_a_newer_terms_revision_is_refused_and_left_as_it_was(kind: str, tmp_path: Path, executor: BlockingExecutor) -> None:
    """Its queries would miss its terms: refused before the engine loads it, which rewrote its config."""
    newer = make_vector_store(kind, tmp_path, executor, features=IndexFeatures(parent_vectors=True, title_field=True, terms=TERMS_REVISION + 1))
    await newer.open()
    await newer.upsert([_point(PUBLIC, 0, _unit(np.ones(DIM)), terms=(4,))])
    await newer.close()
    files = {f: f.read_bytes() for f in tmp_path.rglob("*") if f.is_file() and not f.name.endswith(".lock")}
    store = make_vector_store(kind, tmp_path, executor)
    with pytest.raises(Unavailable, match=rf"keyword terms of revision {TERMS_REVISION + 1}, which this service cannot make "
                                          rf"\(it makes 1 to {TERMS_REVISION}\): serve it with the version that built it"):
        await store.open()
    await store.close()
    assert {f: f.read_bytes() for f in tmp_path.rglob("*") if f.is_file() and not f.name.endswith(".lock")} == files


async def _existing_index(kind: str, path: Path, dense: dict[str, tuple[int, str]], sparse: dict[str, bool],
                          unnamed: tuple[int, str] | None = None) -> None:
    """An index made by the engine itself, not by the service: ``dense`` maps names to size and
    distance, ``sparse`` names to whether they have the IDF modifier."""
    if kind == "edge":
        config = qe.EdgeConfig(vectors={n: qe.EdgeVectorParams(size=size, distance=getattr(qe.Distance, d)) for n, (size, d) in dense.items()},
                               sparse_vectors={n: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf if idf else None) for n, idf in sparse.items()})
        (path / "edge").mkdir()
        qe.EdgeShard.create(str(path / "edge"), config).close()
        return
    client = AsyncQdrantClient(path=str(path / "qdrant-local"))
    vectors = {n: models.VectorParams(size=size, distance=models.Distance(d)) for n, (size, d) in dense.items()}
    await client.create_collection(
        "chunks", vectors_config=models.VectorParams(size=unnamed[0], distance=models.Distance(unnamed[1])) if unnamed else vectors,
        sparse_vectors_config={n: models.SparseVectorParams(modifier=models.Modifier.IDF if idf else None) for n, idf in sparse.items()})
    await client.close()


COSINE = (DIM, "Cosine")
MISMATCHES = {
    "dot distance": ({DENSE: (DIM, "Dot")}, {SPARSE: True}, r"compares 'dense' vectors by Dot distance, but .* \(Cosine distance\)"),
    "euclid distance": ({DENSE: (DIM, "Euclid")}, {SPARSE: True}, r"compares 'dense' vectors by Euclid distance"),
    "no dense vector": ({"embedding": COSINE}, {SPARSE: True}, r"holds no 'dense' vector \(dense vectors: 'embedding'\)"),
    "bm25 without IDF": ({DENSE: COSINE}, {SPARSE: False}, r"holds 'bm25' keyword vectors with modifier none, but BM25 needs the IDF"),
    "no bm25": ({DENSE: COSINE}, {}, r"holds no 'bm25' keyword vector"),
    "parent by dot": ({DENSE: COSINE, "parent": (DIM, "Dot")}, {SPARSE: True}, r"compares 'parent' vectors by Dot distance"),
    "parent of another size": ({DENSE: COSINE, "parent": (DIM + 4, "Cosine")}, {SPARSE: True},
                               rf"holds 'parent' vectors of {DIM + 4} dimensions, but the embedding model makes {DIM}"),
    "titled without IDF": ({DENSE: COSINE}, {SPARSE: True, "bm25_titled": False}, r"holds 'bm25_titled' keyword vectors with modifier none"),
}


@pytest.mark.parametrize("kind", ["edge", "qdrant-local"])
@pytest.mark.parametrize("case", MISMATCHES)
async def test_an_index_of_other_vectors_is_refused_naming_what_it_holds(case: str, kind: str, tmp_path: Path, executor: BlockingExecutor) -> None:
    """Opened, a Dot or Euclid index served scores that fusion and the sufficiency check took for
    cosines, one without IDF weighed every term alike, one without ``dense`` failed every call."""
    dense, sparse, message = MISMATCHES[case]
    await _existing_index(kind, tmp_path, dense, sparse)
    refusal = await _refusal(make_vector_store(kind, tmp_path, executor), message)
    where = f"vector folder {tmp_path / 'edge'}" if kind == "edge" else "collection chunks"
    assert where in refusal and "a new RETRIEVAL_DATA_DIR" in refusal


async def _refusal(store: VectorStore, match: str) -> str:
    """What opening ``store`` is refused with (Unavailable, matching ``match``); the store is closed after."""
    try:
        with pytest.raises(Unavailable, match=match) as refused:
            await store.open()
        return str(refused.value)
    finally:
        await store.close()


async def test_a_collection_of_one_unnamed_vector_is_refused(tmp_path: Path, executor: BlockingExecutor) -> None:
    await _existing_index("qdrant-local", tmp_path, {}, {}, unnamed=(DIM + 4, "Cosine"))
    await _refusal(make_vector_store("qdrant-local", tmp_path, executor), r"holds no 'dense' vector \(dense vectors: one unnamed vector\)")


def _claim_cosine(saved: Path) -> None:
    saved.write_text(saved.read_text().replace('"Dot"', '"Cosine"'))


@pytest.mark.parametrize(("distance", "damage", "refusal"), [
    # The engine compares its config with the segments themselves: a saved config edited (or
    # written by another version) to claim Cosine does not get a Dot index served.
    ("Dot", _claim_cosine, r"does not hold the vectors the service creates .*expected distance Cosine, but got Dot"),
    # A lost edge_config.json made the open create an index over the segments, which the engine
    # refused with a bare Exception and no advice.
    ("Cosine", Path.unlink, r"holds segments but no edge_config.json: use a new RETRIEVAL_DATA_DIR"),
    # Emptied (a disk filled as it was written) or not an object: a JSONDecodeError or an
    # AttributeError from deep in the open, naming no folder.
    ("Cosine", lambda saved: saved.write_text(""), r"holds an edge_config.json that cannot be read \(Expecting value.*\): use a new RETRIEVAL_DATA_DIR"),
    ("Cosine", lambda saved: saved.write_text("[]"), r"holds an edge_config.json that is not a JSON object but list: use a new RETRIEVAL_DATA_DIR"),
], ids=["config-edited", "config-lost", "config-empty", "config-not-an-object"])
async def test_edge_segments_unlike_their_saved_config_are_refused_as_unavailable(
    tmp_path: Path, executor: BlockingExecutor, distance: str, damage: Callable[[Path], object], refusal: str,
) -> None:
    await _existing_index("edge", tmp_path, {DENSE: (DIM, distance)}, {SPARSE: True})
    damage(tmp_path / "edge" / "edge_config.json")
    store = make_vector_store("edge", tmp_path, executor)
    await _refusal(store, rf"the vector folder {re.escape(str(tmp_path / 'edge'))} .*{refusal}")
    # The folder is let go: a new index in its place opens.
    (tmp_path / "edge").rename(tmp_path / "refused")
    await store.open()
    await store.close()


async def test_an_edge_config_the_server_may_not_read_is_no_lost_index(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A folder written by another user (root, served by uid 1000) was reported as a lost index, to
    be replaced by a new RETRIEVAL_DATA_DIR. The denial is injected: the tests may run as root."""
    await _existing_index("edge", tmp_path, {DENSE: (DIM, "Cosine")}, {SPARSE: True})
    read_text = Path.read_text

    def denied(self: Path, encoding: str | None = None, errors: str | None = None) -> str:
        if self.name == "edge_config.json":
            raise PermissionError(13, "Permission denied", str(self))
        return read_text(self, encoding, errors)

    monkeypatch.setattr(Path, "read_text", denied)
    refusal = await _refusal(make_vector_store("edge", tmp_path, executor),
                             rf"cannot read {re.escape(str(tmp_path / 'edge' / 'edge_config.json'))} \(Permission denied\): "
                             "give the server's user read access")
    assert "RETRIEVAL_DATA_DIR" not in refusal


async def test_a_collection_from_before_an_indexed_field_gets_its_index(tmp_path: Path) -> None:
    """Opening a collection made without the payload indexes filtered on now creates the missing
    ones (local mode keeps no payload schema, so each open asks again; a server records them)."""
    from retrieval_server.backends.vector_store import INDEXED_FIELDS, INTEGER_INDEXED_FIELDS
    from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

    client = AsyncQdrantClient(path=str(tmp_path / "qdrant-local"))
    await client.create_collection("chunks", vectors_config={DENSE: models.VectorParams(size=DIM, distance=models.Distance.COSINE)},
                                   sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)})
    await client.close()
    store = QdrantVectorStore("chunks", DIM, path=str(tmp_path / "qdrant-local"))
    created: list[tuple[str, models.PayloadSchemaType]] = []
    create = store._client.create_payload_index  # noqa: SLF001 - recording the real client's calls

    async def recording(collection: str, name: str, schema: models.PayloadSchemaType) -> object:
        created.append((name, schema))
        return await create(collection, name, schema)

    store._client.create_payload_index = recording  # type: ignore[method-assign]  # noqa: SLF001
    await store.open()
    try:
        assert created == [*((n, models.PayloadSchemaType.KEYWORD) for n in INDEXED_FIELDS),
                           *((n, models.PayloadSchemaType.INTEGER) for n in INTEGER_INDEXED_FIELDS)]
        v = _unit(np.ones(DIM))
        await store.upsert([_point(PUBLIC, 0, v)])
        assert [h.chunk_id for h in await store.search_dense(v, 5, ANON)] == ["pub#p0c0"]
    finally:
        await store.close()


async def test_a_qdrant_collection_vacuums_at_the_embedded_engines_deleted_share(tmp_path: Path) -> None:
    """A server left at its defaults (20 % deleted, segments of 1,000 vectors or more) keeps deleted
    chunks in BM25's IDF for good: a new collection is created with ``VACUUM_DELETED_SHARE`` and the
    server's smallest vacuum minimum, and an existing one is set to them. Local mode recomputes IDF
    over the live points and keeps no optimizer settings (it reports the server's defaults), so the
    drift itself cannot be shown here: the test records what the adapter asks the client for."""
    from retrieval_server.backends.vector_store import VACUUM_DELETED_SHARE
    from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

    wanted = models.OptimizersConfigDiff(deleted_threshold=VACUUM_DELETED_SHARE, vacuum_min_vector_number=100)
    asked: list[tuple[str, object]] = []

    def recording(store: QdrantVectorStore, reported: models.OptimizersConfigDiff | None = None) -> QdrantVectorStore:
        client = store._client  # noqa: SLF001 - recording the real client's calls
        create, update, get = client.create_collection, client.update_collection, client.get_collection

        async def created(*args: object, **kwargs: object) -> object:
            asked.append(("create", kwargs.get("optimizers_config")))
            return await create(*args, **kwargs)

        async def updated(*args: object, **kwargs: object) -> object:
            asked.append(("update", kwargs.get("optimizers_config")))
            return await update(*args, **kwargs)

        async def got(*args: object, **kwargs: object) -> models.CollectionInfo:
            info = await get(*args, **kwargs)
            if reported is not None:  # as a server reports a collection already at these values
                info.config.optimizer_config = info.config.optimizer_config.model_copy(update=reported.model_dump(exclude_none=True))
            return info

        client.create_collection, client.update_collection, client.get_collection = created, updated, got  # type: ignore[method-assign]
        return store

    for reported in (None, None, wanted):  # one client at a time: local mode locks its folder
        store = recording(QdrantVectorStore("chunks", DIM, path=str(tmp_path / "qdrant-local")), reported)
        await store.open()
        await store.close()
    # Made with them; found at the server's defaults (what local mode reports), set to them; found at them, left.
    assert asked == [("create", wanted), ("update", wanted)]


async def _opened_read_only_then_writable(path: str, method: str, calls: list[object], caplog: pytest.LogCaptureFixture) -> AsyncIterator[bool]:
    """Open the collection at ``path`` read-only, then writable, with the client's ``method``
    refused as a Qdrant API key that may only read refuses a write (403, each call's arguments
    recorded in ``calls``); yield each way after checking it opened and serves."""
    import httpx
    from qdrant_client.http.exceptions import UnexpectedResponse

    from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

    async def forbidden(*args: object, **kwargs: object) -> object:
        calls.append(args)
        raise UnexpectedResponse(403, "Forbidden", b'{"status":{"error":"Forbidden: Write access denied"}}', httpx.Headers())

    for read_only in (True, False):  # one client at a time: local mode locks its folder
        store = QdrantVectorStore("chunks", DIM, path=path, read_only=read_only)
        setattr(store._client, method, forbidden)  # noqa: SLF001
        with caplog.at_level(logging.WARNING, logger="retrieval_server.backends.vector_store.qdrant"):
            await store.open()
        try:
            assert await store.count() == 0  # opened and serving
        finally:
            await store.close()
        yield read_only


async def test_opening_a_qdrant_collection_sets_its_thresholds_only_when_it_may_and_can(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A read-only server (``RETRIEVAL_READ_ONLY``) writes nothing at open, the thresholds included;
    a server whose write is refused (a Qdrant API key that may only read: 403) still opens, with a
    warning naming the collection and the error, and the server's own thresholds apply."""
    from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

    path = str(tmp_path / "qdrant-local")
    store = QdrantVectorStore("chunks", DIM, path=path)
    await store.open()  # local mode reports the server's defaults, so every later open finds them unset
    await store.close()
    updates: list[object] = []
    async for read_only in _opened_read_only_then_writable(path, "update_collection", updates, caplog):
        assert len(updates) == (0 if read_only else 1)
    assert "collection chunks: could not set its vacuum thresholds" in caplog.text and "Write access denied" in caplog.text


async def test_a_read_only_server_creates_no_qdrant_collection(tmp_path: Path) -> None:
    """It made a missing one at open: a mistyped name was served as an empty index."""
    from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

    store = QdrantVectorStore("chunkz", DIM, path=str(tmp_path / "qdrant-local"), read_only=True)
    try:
        with pytest.raises(Unavailable, match="collection chunkz does not exist.*RETRIEVAL_READ_ONLY"):
            await store.open()
        assert not await store._client.collection_exists("chunkz")  # noqa: SLF001
    finally:
        await store.close()


async def test_opening_a_qdrant_collection_creates_its_payload_indexes_only_when_it_may_and_can(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A read-only server asks for none, and names those lacking; one whose request is refused (a
    Qdrant API key that may only read: 403) still opens, with a warning naming the index and the
    error: it failed its start."""
    from retrieval_server.backends.vector_store import INDEXED_FIELDS
    from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

    path = str(tmp_path / "qdrant-local")
    store = QdrantVectorStore("chunks", DIM, path=path)
    await store.open()  # local mode reports no payload index, so every later open finds them lacking
    await store.close()
    calls: list[object] = []
    async for read_only in _opened_read_only_then_writable(path, "create_payload_index", calls, caplog):
        if read_only:
            assert calls == [] and "lacks the payload indexes document_id, access" in caplog.text
    asked = [args[1] for args in calls]  # (collection, field name)
    assert asked[: len(INDEXED_FIELDS)] == list(INDEXED_FIELDS)
    assert "collection chunks: could not create its payload index document_id" in caplog.text and "Write access denied" in caplog.text


async def test_a_large_qdrant_write_goes_in_requests_a_server_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Qdrant server refuses a request body over its ``max_request_size_mb`` (32 MB by default),
    which one ingest batch sent whole could pass: a write goes in requests of at most
    ``UPSERT_REQUEST_BYTES``, measured here as the REST body the client would send, and every
    point lands."""
    from qdrant_client.http.models import PointsList

    from retrieval_server.backends.vector_store import qdrant as qdrant_module

    monkeypatch.setattr(qdrant_module, "UPSERT_REQUEST_BYTES", 256 * 1024)
    dim, rng = 384, np.random.default_rng(7)
    store = qdrant_module.QdrantVectorStore("chunks", dim, path=":memory:", features=IndexFeatures(title_field=True))
    await store.open()
    sent: list[int] = []
    upsert = store._client.upsert  # noqa: SLF001 - recording the real client's calls

    async def recording(collection: str, points: list[models.PointStruct], **kwargs: object) -> object:
        sent.append(len(PointsList(points=points).model_dump_json(exclude_unset=True).encode()))
        return await upsert(collection, points, **kwargs)

    store._client.upsert = recording  # type: ignore[method-assign]  # noqa: SLF001
    try:
        terms = [tuple(sorted(rng.choice(2**32 - 1, 60, replace=False).tolist())) for _ in range(4)]
        points = [dataclasses.replace(
            VectorPoint(ChildChunk(f"long#p0c{i}", "long#p0", "long", i, 0, "žluťoučký kůň " * 70, 300), Document("long"),
                        _unit(rng.normal(size=dim)), SparseVector(terms[i % 4], tuple(rng.random(60).tolist())), "v1"),
            sparse_titled=SparseVector(terms[i % 4], tuple(rng.random(60).tolist()))) for i in range(100)]
        await store.upsert(points)
        assert len(sent) > 3 and max(sent) <= qdrant_module.UPSERT_REQUEST_BYTES
        assert await store.count("long") == 100
    finally:
        await store.close()


async def test_qdrant_local_mode_computes_on_the_executor_while_the_event_loop_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """qdrant-client's local mode computes in Python on the calling thread, and its async client on
    the event loop: served (``RETRIEVAL_QDRANT_PATH``), a search of 5,000 points held every other
    request for 108 ms. Its calls run on the executor given: while a search computes, another
    coroutine runs."""
    from qdrant_client.local.local_collection import LocalCollection

    from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

    loop, loop_thread = asyncio.get_running_loop(), threading.get_ident()
    computing, released = asyncio.Event(), threading.Event()
    threads: list[str] = []
    query_points = LocalCollection.query_points

    def held(self: LocalCollection, *args: object, **kwargs: object) -> object:
        loop.call_soon_threadsafe(computing.set)
        # On the loop's thread nothing could release it: a failure, not a hang.
        assert threading.get_ident() != loop_thread, "local mode computed on the event loop's thread"
        threads.append(threading.current_thread().name)
        assert released.wait(timeout=300), "the event loop did not go on while the search computed"
        return query_points(self, *args, **kwargs)

    monkeypatch.setattr(LocalCollection, "query_points", held)
    executor = BlockingExecutor(1, "local")
    store = QdrantVectorStore("chunks", DIM, path=str(tmp_path / "qdrant-local"), executor=executor)
    try:
        await store.open()
        v = _unit(np.ones(DIM))
        await store.upsert([_point(PUBLIC, 0, v)])
        search = asyncio.ensure_future(store.search_dense(v, 5, ANON))
        await computing.wait()
        ticked = asyncio.Event()

        async def tick() -> None:
            ticked.set()

        await asyncio.ensure_future(tick())  # a task of its own, which the loop must run
        assert ticked.is_set() and not search.done()
        released.set()
        assert [h.chunk_id for h in await search] == ["pub#p0c0"]
        assert threads == ["local-0"]
    finally:
        released.set()
        await store.close()
        executor.shutdown()


async def test_qdrant_local_mode_runs_one_call_at_a_time_however_often_its_caller_is_cancelled(
        caplog: pytest.LogCaptureFixture) -> None:
    """A caller cancelled while its call ran waited for the thread, and cancelled again there (a
    leg's deadline, then the request's cancellation) let the next call run beside it, on a second
    thread: local mode is not made for threads. Its failure, awaited by nobody, was logged as a
    task exception never retrieved."""
    from retrieval_server.backends.vector_store.qdrant import _OffLoop

    loop = asyncio.get_running_loop()
    first_runs, release = asyncio.Event(), threading.Event()
    calls: list[str] = []

    class Local:
        def search(self, name: str) -> str:
            calls.append(f"{name} starts")
            if name == "first":
                loop.call_soon_threadsafe(first_runs.set)
                assert release.wait(timeout=300)
                calls.append("first ends")
                raise RuntimeError("the engine failed after its caller left")
            return name

    async def tick() -> None:
        pass

    executor = BlockingExecutor(2, "local")  # two threads: the store, not the pool, keeps calls apart
    local = _OffLoop(Local(), executor)  # type: ignore[arg-type]
    try:
        first = asyncio.ensure_future(local.search("first"))
        await first_runs.wait()
        first.cancel()
        await asyncio.ensure_future(tick())  # the first cancellation reaches the caller
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        second = asyncio.ensure_future(local.search("second"))
        # Turns of the loop, not time: the next call, let in, reached the executor within two.
        for _ in range(5):
            await asyncio.ensure_future(tick())
        assert calls == ["first starts"]
        release.set()
        assert await second == "second"
        assert calls == ["first starts", "first ends", "second starts"]
    finally:
        release.set()
        executor.shutdown()
    assert "never retrieved" not in caplog.text


async def test_two_servers_opening_an_empty_qdrant_at_once_both_open() -> None:
    """Workers (RETRIEVAL_PROCESSES) or replicas starting together each found no collection, and
    the second to create it failed its start: the supervisor then stopped them all."""
    from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

    first, second = QdrantVectorStore("chunks", DIM, path=":memory:"), QdrantVectorStore("chunks", DIM, path=":memory:")
    await second._client.close()  # noqa: SLF001
    second._client = first._client  # noqa: SLF001 - one Qdrant, as a server is to every replica
    real, asked, both_asked = first._client.collection_exists, [], asyncio.Event()

    async def both_look_first(name: str) -> bool:
        found = await real(name)
        asked.append(found)
        if len(asked) == 2:
            both_asked.set()
        await both_asked.wait()
        return found

    first._client.collection_exists = both_look_first  # type: ignore[method-assign]  # noqa: SLF001
    try:
        await asyncio.gather(first.open(), second.open())
        assert asked[:2] == [False, False]
        v = _unit(np.ones(DIM))
        await first.upsert([_point(PUBLIC, 0, v)])
        assert [h.chunk_id for h in await second.search_dense(v, 5, ANON)] == ["pub#p0c0"]
    finally:
        await first.close()


async def test_edge_payload_indexes_come_with_the_points_that_need_them(
    tmp_path: Path, executor: BlockingExecutor, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new folder gets its payload indexes when a write brings it to ``PAYLOAD_INDEX_MIN_POINTS``,
    a folder opened past it without them gets them at once, and every filter answers the same
    without them as with them."""
    from retrieval_server.backends.vector_store import INDEXED_FIELDS, INTEGER_INDEXED_FIELDS

    indexed = {*INDEXED_FIELDS, *INTEGER_INDEXED_FIELDS}
    rng = np.random.default_rng(4)
    probes = [_unit(rng.normal(size=DIM)) for _ in range(3)]
    parents = [_parent(d, 0, 0, _unit(rng.normal(size=DIM))) for d in [PUBLIC, PRIVATE, GRANTED, OTHER]]
    filters = [ANON, ALICE, ROOT, PointFilter(access=ALICE.access, document_ids=("priv", "other")),
               PointFilter(access=ROOT.access, first_parents=True)]

    async def answers(store: EdgeVectorStore) -> list[list[str]]:
        out = []
        for f in filters:
            for v in probes:
                out.append([h.chunk_id for h in await store.search_dense(v, 10, f)])
                out.append([h.chunk_id for h in await store.search_parents(v, 10, f)])
            # Every point weighs term 7 alike: a tie, which comes back by chunk id.
            out.append([h.chunk_id for h in await store.search_sparse(SparseVector((7,), (1.0,)), 10, f)])
        return out

    def schema(store: EdgeVectorStore) -> set[str]:
        return set(store.shard.info().payload_schema)

    monkeypatch.setattr(edge_module, "PAYLOAD_INDEX_MIN_POINTS", 8)
    store = EdgeVectorStore(tmp_path / "grown", DIM, executor, features=IndexFeatures(parent_vectors=True, title_field=True))
    await store.open()
    try:
        await _fill(store)  # four points, under the threshold
        assert schema(store) == set()
        await store.upsert_parents(parents)
        assert schema(store) == indexed  # made by the write that brought the folder to eight points
        with_indexes = await answers(store)
        assert all(with_indexes)  # every filter lets something through: the comparisons below compare hits
    finally:
        await store.close()

    # The same points in a folder that never reached the threshold, which is then lowered under them.
    monkeypatch.setattr(edge_module, "PAYLOAD_INDEX_MIN_POINTS", 1_000)
    other = EdgeVectorStore(tmp_path / "small", DIM, executor, features=IndexFeatures(parent_vectors=True, title_field=True))
    await other.open()
    try:
        await _fill(other)
        await other.upsert_parents(parents)
        assert schema(other) == set()
        assert await answers(other) == with_indexes
    finally:
        await other.close()
    monkeypatch.setattr(edge_module, "PAYLOAD_INDEX_MIN_POINTS", 8)
    await other.open()
    try:
        assert schema(other) == indexed
        assert await answers(other) == with_indexes
    finally:
        await other.close()


class _CountingShard:
    """The real shard, counting the engine calls a search makes."""

    def __init__(self, shard: qe.EdgeShard) -> None:
        self._shard = shard
        self.calls: list[tuple[str, int]] = []
        #: per engine call, each request's (vector name, limit, filter) in the order the engine got them
        self.sent: list[list[tuple[str, int, str]]] = []

    def _record(self, kind: str, requests: list[qe.QueryRequest]) -> None:
        self.calls.append((kind, len(requests)))
        self.sent.append([(repr(r.query).rsplit("using=", 1)[1], r.limit, repr(r.filter)) for r in requests])

    def query(self, request: qe.QueryRequest) -> list[qe.ScoredPoint]:
        self._record("query", [request])
        return self._shard.query(request)

    def query_batch(self, batch: qe.QueryBatchRequest) -> list[list[qe.ScoredPoint]]:
        self._record("query_batch", list(batch.queries))
        return self._shard.query_batch(batch)

    def __getattr__(self, name: str) -> object:
        return getattr(self._shard, name)


async def test_edge_searches_asked_for_together_are_one_engine_call(tmp_path: Path, executor: BlockingExecutor) -> None:
    """Searches asked for together (a query's dense legs, concurrent requests') are one engine call, answered as one by one."""
    store = make_vector_store("edge", tmp_path, executor)
    await store.open()
    try:
        vecs = await _fill(store)
        alone = [await store.search_dense(v, 10, ALICE) for v in vecs] + [await store.search_sparse(SparseVector((7,), (1.0,)), 10, ROOT)]
        counting = _CountingShard(store._shard)  # type: ignore[attr-defined]
        store._shard = counting  # type: ignore[attr-defined,assignment]
        together = await asyncio.gather(*(store.search_dense(v, 10, ALICE) for v in vecs), store.search_sparse(SparseVector((7,), (1.0,)), 10, ROOT))
        assert counting.calls == [("query_batch", 5)]
        assert [[(h.chunk_id, round(h.score, 5)) for h in hits] for hits in together] == [
            [(h.chunk_id, round(h.score, 5)) for h in hits] for hits in alone
        ]
    finally:
        await store.close()


async def test_edge_batches_reach_the_engine_with_equal_searches_side_by_side(tmp_path: Path, executor: BlockingExecutor) -> None:
    """Two queries' child and parent searches, asked for interleaved (as concurrent requests ask for
    them), reach the engine grouped by vector, limit and filter, which it answers in one pass per
    group; each caller still gets its own answer."""
    store = make_vector_store("edge", tmp_path, executor)
    await store.open()
    try:
        vecs = await _fill(store)
        rng = np.random.default_rng(9)
        await store.upsert_parents([_parent(d, 0, 0, _unit(rng.normal(size=DIM))) for d in [PUBLIC, PRIVATE, GRANTED, OTHER]])
        asks = [
            lambda: store.search_dense(vecs[0], 10, ALICE),
            lambda: store.search_parents(vecs[0], 10, ALICE),
            lambda: store.search_sparse(SparseVector((7,), (1.0,)), 10, ROOT),
            lambda: store.search_dense(vecs[1], 10, ALICE),
            lambda: store.search_parents(vecs[1], 10, ALICE),
            lambda: store.search_dense(vecs[2], 3, ALICE),
            lambda: store.search_dense(vecs[3], 10, ROOT),
            lambda: store.search_parents(vecs[2], 10, ALICE),
        ]
        alone = [await ask() for ask in asks]
        counting = _CountingShard(store._shard)  # type: ignore[attr-defined]
        store._shard = counting  # type: ignore[attr-defined,assignment]
        together = await asyncio.gather(*(ask() for ask in asks))
        assert counting.calls == [("query_batch", len(asks))]
        groups = [key for key, _ in itertools.groupby(counting.sent[0])]
        assert len(groups) == len(set(groups)) == 5  # dense/ALICE/10, parent/ALICE/10, sparse/ROOT, dense/ALICE/3, dense/ROOT
        assert [[(h.chunk_id, round(h.score, 5)) for h in hits] for hits in together] == [
            [(h.chunk_id, round(h.score, 5)) for h in hits] for hits in alone
        ]
        assert all(together)
    finally:
        await store.close()


async def test_a_damaged_index_served_from_a_copy_is_refused_naming_the_folder_not_the_copy(tmp_path: Path, executor: BlockingExecutor) -> None:
    """Served read-only, the engine opens a private copy, removed once the start fails: its error
    named a segment in that copy, a path gone by the time anyone read it."""
    from retrieval_server.backends.disk import copy_for_reading

    store = make_vector_store("edge", tmp_path, executor)
    await store.open()
    await _fill(store)
    await store.close()
    trackers = list((tmp_path / "edge" / "segments").glob("*/payload_storage/tracker.dat"))
    assert trackers
    for tracker in trackers:
        with tracker.open("r+b") as f:
            f.truncate(3)  # a disk that filled, or a copy cut short
    reading = EdgeVectorStore(tmp_path / "edge", DIM, executor, read_copy=lambda source: copy_for_reading(source, 0))
    refusal = await _refusal(reading, rf"the vector folder {re.escape(str(tmp_path / 'edge'))} cannot be opened \(.*: use a new RETRIEVAL_DATA_DIR")
    assert "retrieval-readonly-" not in refusal and f"{tmp_path / 'edge'}/segments/" in refusal, refusal
