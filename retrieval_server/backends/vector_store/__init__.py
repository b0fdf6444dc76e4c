"""Vector store interface: one child chunk per point, with a dense and a BM25 sparse vector.

Multi-granularity: each parent chunk also gets a point of its own carrying only the ``parent``
dense vector (the parent embedded whole, title first), so a search over ``parent`` sees whole
sections and short documents while ``dense`` and ``bm25`` searches see children only (a point
without a named vector is never returned by a search over it). Child points also carry
``bm25_titled``, the BM25F-style keyword vector with the document title as a weighted field.
An index built before these existed keeps working without them (see :class:`IndexFeatures`), and
one whose keyword terms are of an older revision keeps them (``bm25_terms_<revision>``).

Implementations: :mod:`.edge` (qdrant-edge, embedded) and :mod:`.qdrant` (qdrant-client:
a Qdrant server, or its local mode). Both build payloads and read hits through this module, so
the stored shape is the same whichever engine holds it.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from retrieval_server.backends.sparse import TERMS_REVISION, check_terms
from retrieval_server.domain import ChildChunk, Document, ParentPoint, PointFilter, SparseVector, Unavailable, VectorHit, VectorPoint

DENSE = "dense"
SPARSE = "bm25"
#: a parent chunk's own dense vector (only on parent points)
PARENT = "parent"
#: BM25F-style keyword vector: chunk text plus the title as a weighted field (only on child points)
SPARSE_TITLED = "bm25_titled"
#: a keyword vector that no point carries, named for the terms revision (``sparse.TERMS_REVISION``)
#: the index's keyword vectors hold: the schema is what both engines keep with an index, and the
#: terms must be read with it (an index without one holds revision 1, from before the record)
TERMS_PREFIX = "bm25_terms_"
#: Keyword payload indexes: what every filter touches (``chunk_id``: :meth:`VectorStore.get_chunks`).
INDEXED_FIELDS = ("document_id", "access", "readers", "version", "chunk_id")
#: Integer payload index: the document leg's ``parent_index = 0`` filter
INTEGER_INDEXED_FIELDS = ("parent_index",)
#: the share of a segment's points deleted (documents deleted, or replaced by a re-ingest) past
#: which the engine vacuums it (qdrant-edge in :meth:`EdgeVectorStore.optimize`, a Qdrant server in
#: its own optimizer: ``qdrant.OPTIMIZERS``). Until then the deleted points count in the engine's
#: BM25 statistics: at a deleted share d, a term with no deleted postings has its IDF raised by
#: about log(1 / (1 - d)) (0.05 at 5 %), and the deleted chunks' own terms lose more (a document
#: re-ingested ten times in a small index swapped a keyword ranking, and a restart swapped it
#: back). Qdrant's default (20 %, and never in a segment under 1,000 points) left that for as long
#: as the index lived. A vacuum rewrites the segment (qdrant-edge: 0.17 s for 12,000 points of 384
#: dimensions here, holding the GIL): at 5 % that is 0.3 ms per deleted point, two to four times
#: what writing the point cost, and an ingest of new documents deletes nothing and never pays it.
VACUUM_DELETED_SHARE = 0.05
_POINT_NAMESPACE = uuid.UUID("6f1c2f51-5b8e-4f0e-9a43-7d0f0b7c2a10")


@dataclass(frozen=True, slots=True)
class IndexFeatures:
    """What an index holds: a new one what the settings ask for (parent vectors only with the
    parent leg on: embedding every parent costs a third more ingestion), an existing one what it
    was created with. A leg whose vectors the index lacks is off, and writes omit them, until the
    documents are re-ingested into a fresh folder or collection."""

    parent_vectors: bool = False
    title_field: bool = True
    #: the revision of the keyword vectors' terms: queries are encoded the way the index was
    terms: int = TERMS_REVISION

    @classmethod
    def of(cls, dense_names: Sequence[str], sparse_names: Sequence[str]) -> IndexFeatures:
        revisions = [int(n[len(TERMS_PREFIX):]) for n in sparse_names if n.startswith(TERMS_PREFIX) and n[len(TERMS_PREFIX):].isdigit()]
        return cls(parent_vectors=PARENT in dense_names, title_field=SPARSE_TITLED in sparse_names, terms=max(revisions, default=1))

    def sparse_names(self) -> list[str]:
        """The keyword vectors an index of these features is created with."""
        return [SPARSE, *([SPARSE_TITLED] if self.title_field else []), *([f"{TERMS_PREFIX}{self.terms}"] if self.terms > 1 else [])]

    def lacking(self, wanted: IndexFeatures) -> list[str]:
        """What ``wanted`` asks for that this index does not hold."""
        return [name for name, have, want in (("parent vectors", self.parent_vectors, wanted.parent_vectors),
                                              ("the title field", self.title_field, wanted.title_field)) if want and not have]


#: what an index the service cannot serve needs instead
NEW_INDEX = "a new RETRIEVAL_DATA_DIR (or RETRIEVAL_QDRANT_COLLECTION) for the service to create its index in"


def check_size(where: str, name: str, stored: int | None, dim: int) -> None:
    """An index's vectors have one size: a model of another cannot search or extend it."""
    if stored is not None and stored != dim:
        raise Unavailable(f"{where} holds {name!r} vectors of {stored} dimensions, but the embedding model makes {dim}: use the "
                          f"model it was built with (RETRIEVAL_MODEL_DIR, RETRIEVAL_MODEL) or {NEW_INDEX}")


def check_schema(where: str, dense: Mapping[str, tuple[int | None, str | None]], sparse: Mapping[str, str | None], dim: int) -> None:
    """An existing index's vectors as its engine reports them (``dense``: name to size and distance;
    ``sparse``: name to modifier) must be the ones this service creates: a dense score is taken
    for a cosine (``max_cosine`` fusion, the sufficiency check), BM25 without the engine's IDF
    weighs every term alike, and every write and search names its vector (an index without
    ``dense`` opened, then failed each call). Checked before anything is written to the index (the
    embedded engine rewrites its config as it loads it): an index refused is left as it was."""
    if DENSE not in dense:
        held = ", ".join(repr(n) if n else "one unnamed vector" for n in dense) or "none"
        raise Unavailable(f"{where} holds no {DENSE!r} vector (dense vectors: {held}), but the service writes and searches "
                          f"{DENSE!r}: use {NEW_INDEX}")
    for name in (DENSE, PARENT):
        if name in dense:
            size, distance = dense[name]
            if (distance or "").lower() != "cosine":
                raise Unavailable(f"{where} compares {name!r} vectors by {distance} distance, but the service reads their "
                                  f"scores as cosines (Cosine distance): use {NEW_INDEX}")
            check_size(where, name, size, dim)
    if SPARSE not in sparse:
        raise Unavailable(f"{where} holds no {SPARSE!r} keyword vector, but the service writes and searches {SPARSE!r}: use {NEW_INDEX}")
    for name in (SPARSE, SPARSE_TITLED):
        if name in sparse and (sparse[name] or "").lower() != "idf":
            raise Unavailable(f"{where} holds {name!r} keyword vectors with modifier {sparse[name] or 'none'}, but BM25 needs the "
                              f"IDF modifier: use {NEW_INDEX}")
    check_terms(where, IndexFeatures.of(list(dense), list(sparse)).terms)


def legacy_index_message(lacking: Sequence[str]) -> str:
    return (f"the vector index was built without {' and '.join(lacking)}: those legs are off; "
            "re-ingest into a fresh data directory (or collection) to enable them")


@dataclass(frozen=True, slots=True)
class TermCounts:
    """Document frequencies of BM25 term ids over ``points`` child chunks (a sample on large indexes)."""

    points: int
    df: dict[int, int]


class VectorStore(Protocol):
    #: what the opened index holds (valid after :meth:`open`)
    features: IndexFeatures

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def upsert(self, points: Sequence[VectorPoint]) -> None: ...

    async def delete_document(self, document_id: str, keep_version: str | None = None, keep_chunks: Collection[str] | None = None) -> None:
        """Remove the document's points; with ``keep_version``, only those of other versions, and with
        ``keep_chunks`` as well, those of that version whose chunk id is not one of them. A parent
        point carries its first child's chunk id, so it stays when that child does. Only None keeps
        nothing: ``""`` is a version (of a row whose ``content_hash`` is the schema's default)."""
        ...

    async def sync(self) -> None:
        """Make the writes and deletes so far survive a power loss. A writer calls it before clearing
        the pending writes they belong to: cleared first, a power loss could take a delete back (the
        points, text and all, of a deleted document) with nothing left to say it must be redone."""
        ...

    async def refresh_count(self) -> None:
        """Count the children again for the search policy (``SearchPolicy.points``). Writes leave
        the count as it was: the writer refreshes it once its writes are done (an ingest after
        each batch), because an exact count reads every child (2 ms at 20,000, holding the GIL),
        and twice per document it came to an estimated 4 % of a 5,000-document ingest."""
        ...

    async def search_dense(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[VectorHit]:
        """The ``limit`` child chunks nearest to ``vector`` that ``flt`` admits, in :func:`ranked`'s
        order, as every search answers. A limit of 0 is answered with no hits, and a negative one
        refused (ValueError), by every search of both engines."""
        ...

    async def nearest_vectors(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[np.ndarray]:
        """The ``dense`` vectors of the ``limit`` child chunks nearest to ``vector`` that ``flt``
        admits, nearest first (dense pseudo-relevance feedback reads them)."""
        ...

    async def search_sparse(self, vector: SparseVector, limit: int, flt: PointFilter, *, titled: bool = False) -> list[VectorHit]:
        """BM25 over the chunks' text; ``titled``: over the text with the title as a weighted field
        (needs ``features.title_field``)."""
        ...

    async def upsert_parents(self, points: Sequence[ParentPoint]) -> None:
        """Write parent points (needs ``features.parent_vectors``); ids are per parent chunk and version."""
        ...

    async def search_parents(self, vector: np.ndarray, limit: int, flt: PointFilter) -> list[VectorHit]:
        """Nearest parents; each hit is reported as the parent's first child with the parent's score.
        With ``flt.first_parents``, nearest documents: a first parent's vector embeds the title and
        the document's first model window, which is what a whole-document (MTEB-style) embedding is."""
        ...

    async def term_counts(self, max_points: int) -> TermCounts:
        """Document frequencies of the keyword terms over at most ``max_points`` child chunks."""
        ...

    async def get_chunks(self, chunk_ids: Sequence[str]) -> list[VectorHit]:
        """The stored chunks with these ids (score 0), in the order given; unknown ids are skipped.
        While a document is being replaced a chunk id can have a point of each version: both come
        back (readers check versions)."""
        ...

    async def count(self, document_id: str | None = None, version: str | None = None, *, parents: bool = False) -> int:
        """Child chunks stored (or with ``parents``, parent points): all, of one document, of one version
        of it (None: any; ``""`` is a version)."""
        ...

    async def optimize(self) -> None:
        """Build indexes for what was written; call off the request path."""
        ...

    async def ping(self) -> None:
        """Raise if the store cannot answer."""
        ...


@dataclass(slots=True)
class SearchPolicy:
    """Exact search while the collection is small enough (a scan is then cheaper than HNSW and has
    recall 1.0); HNSW with a wide candidate list beyond. Measured on 12k x 384: exact 1.7 ms per query,
    HNSW recall@10 0.55 at the engine's default ef, 0.96 at ef 512."""

    always_exact: bool = False
    exact_max_points: int = 200_000
    hnsw_ef: int = 512
    #: children in the collection, counted after writes (never on the query path)
    points: int = 0

    @property
    def exact(self) -> bool:
        return self.always_exact or self.points <= self.exact_max_points


def point_id(chunk_id: str, version: str) -> str:
    """The UUID of a chunk's point in one version of its document (Qdrant ids must be UUIDs or integers).

    Per version, so that writing a new version never overwrites the committed one's points: until
    the new rows commit, the committed version stays whole (for readers, and for recovery, which
    deletes the uncommitted version's points after a failure or a kill).
    """
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{chunk_id}@{version}"))


def parent_point_id(parent_chunk_id: str, version: str) -> str:
    """Parent chunk ids (``doc#p0``) never equal child ids (``doc#p0c0``), so the ids cannot collide."""
    return point_id(parent_chunk_id, version)


@dataclass(frozen=True, slots=True)
class PointParts:
    """A point in engine-neutral pieces; each adapter wraps them in its engine's types."""

    id: str
    dense: dict[str, list[float]]
    sparse: dict[str, tuple[list[int], list[float]]]
    payload: dict[str, Any]


def point_parts(point: VectorPoint, features: IndexFeatures) -> PointParts:
    sparse = {SPARSE: (list(point.sparse.indices), list(point.sparse.values))}
    if features.title_field and point.sparse_titled is not None:
        sparse[SPARSE_TITLED] = (list(point.sparse_titled.indices), list(point.sparse_titled.values))
    return PointParts(
        id=point_id(point.child.chunk_id, point.version),
        dense={DENSE: np.asarray(point.dense, dtype=np.float32).tolist()},
        sparse=sparse,
        payload=_payload(point.child, point.document, point.version),
    )


def parent_parts(point: ParentPoint) -> PointParts:
    return PointParts(
        id=parent_point_id(point.parent.parent_chunk_id, point.version),
        dense={PARENT: np.asarray(point.dense, dtype=np.float32).tolist()},
        sparse={},
        payload={**_payload(point.child, point.document, point.version), "kind": "parent"},
    )


def _payload(c: ChildChunk, d: Document, version: str) -> dict[str, Any]:
    return {
        "chunk_id": c.chunk_id,
        "parent_chunk_id": c.parent_chunk_id,
        "document_id": c.document_id,
        "chunk_index": c.chunk_index,
        "parent_index": c.parent_index,
        "content": c.content,
        "page": c.page,
        "access": d.access.value,
        "readers": list(d.readers),
        "version": version,
    }


def hit_from_payload(payload: dict[str, Any], score: float) -> VectorHit:
    return VectorHit(
        chunk_id=payload["chunk_id"],
        parent_chunk_id=payload["parent_chunk_id"],
        document_id=payload["document_id"],
        chunk_index=int(payload["chunk_index"]),
        parent_index=int(payload["parent_index"]),
        content=payload["content"],
        page=int(payload.get("page", 0)),
        score=float(score),
        version=str(payload.get("version", "")),
    )


#: hits asked of the engine beyond a search's limit. An engine cuts hits of equal score at the limit
#: in an order of its own (qdrant-edge's changed with the limit and with a re-ingest of another
#: document, local mode's with a restart), so it is asked for a few more and :func:`ranked` makes
#: the cut: a search of k is then the first k of a search of K > k unless more hits than this tie
#: at the limit. On 5,000 points of 384 dimensions here, 16 more cost qdrant-edge 0.11 to 0.19 ms
#: a search (dense and keyword, limits 10 to 100, on 0.5 to 2.1 ms) and local mode nothing its
#: noise showed (150 to 250 ms a search).
TIE_MARGIN = 16
#: the payload fields :func:`ranked` orders by: what a search that reads no payload asks for
RANK_FIELDS = ["chunk_id", "version"]


def engine_limit(limit: int) -> int:
    """How many hits to ask the engine for, for a search of ``limit`` hits; 0 for none, which the
    adapters answer with no hits without asking (local mode refused a limit of 0, qdrant-edge
    answered none, and a negative one was an OverflowError in qdrant-edge)."""
    if limit < 0:
        raise ValueError(f"limit is {limit}: a search's limit must be 0 or more")
    return limit + TIE_MARGIN if limit else 0


class ScoredPoint(Protocol):
    """An engine's search result (qdrant-edge's and qdrant-client's alike)."""

    @property
    def score(self) -> float: ...

    @property
    def payload(self) -> Mapping[str, Any] | None: ...


_Scored = TypeVar("_Scored", bound=ScoredPoint)


def ranked(points: Iterable[_Scored], limit: int) -> list[_Scored]:
    """The first ``limit`` of ``points`` by score, descending, then chunk id and version (a document
    being replaced has a point of each version; a parent point carries its first child's chunk id,
    which no other parent of its version has): one order of the hits themselves, the same on both
    engines and whatever the limit or the index's history. Fusion keeps equal scores in order of
    first appearance (scoring_core.fusion), and under RRF that order is each tied hit's rank."""

    def key(p: _Scored) -> tuple[float, str, str]:
        payload = p.payload or {}
        return -p.score, str(payload.get("chunk_id", "")), str(payload.get("version", ""))

    return sorted(points, key=key)[:limit]


def hits_in_order(chunk_ids: Sequence[str], payloads: Sequence[dict[str, Any]]) -> list[VectorHit]:
    """The points of :meth:`VectorStore.get_chunks` as hits (score 0), in the order of ``chunk_ids``."""
    found: dict[str, list[VectorHit]] = {}
    for payload in payloads:
        found.setdefault(payload["chunk_id"], []).append(hit_from_payload(payload, 0.0))
    return [hit for c in chunk_ids for hit in found.get(c, ())]


def access_clauses(flt: PointFilter) -> tuple[list[tuple[str, list[str]]], list[tuple[str, list[str] | list[int]]]]:
    """The filter as engine-neutral clauses, each a field and the values of which it must hold one.

    Returns ``(should, must_any)``: at least one ``should`` clause must hold (empty: no access
    restriction), and every ``must_any`` clause. The caller's principals are one clause, not one
    each: without payload indexes the engine checks every ``should`` clause against every point's
    readers, and a caller of 1,000 groups over documents of 1,000 grantees held the GIL for 13.6 s
    per search that way (about 20 ms as one clause).
    """
    should: list[tuple[str, list[str]]] = []
    if not flt.access.reads_everything:
        should.append(("access", ["public"]))
        if flt.access.readers:
            should.append(("readers", list(flt.access.readers)))
    must_any: list[tuple[str, list[str] | list[int]]] = []
    if flt.document_ids:
        must_any.append(("document_id", list(flt.document_ids)))
    if flt.first_parents:
        must_any.append(("parent_index", [0]))
    return should, must_any


class TermCounter:
    """Document frequencies accumulated over the pages of a scroll of child points, up to ``max_points``."""

    PAGE = 1024

    def __init__(self, max_points: int) -> None:
        self.max_points, self.seen = max_points, 0
        self.df: dict[int, int] = {}

    @property
    def wanted(self) -> int:
        """How many points the next page should ask for; 0 when done."""
        return max(0, min(self.PAGE, self.max_points - self.seen))

    def add(self, term_ids: Sequence[Sequence[int] | None]) -> None:
        """One page: each point's sparse term ids (None for a point without the vector)."""
        for indices in term_ids:
            for t in indices or ():
                self.df[t] = self.df.get(t, 0) + 1
        self.seen += len(term_ids)

    def result(self) -> TermCounts:
        return TermCounts(self.seen, self.df)
