"""The in-process floor: the embedding and engine calls a request makes, made directly.

No gRPC, no workflow graph, no asyncio, no graph leg: scoring_core's encoders, qdrant-edge's
shard and a sqlite3 connection on the same index, with the same arguments the service uses with
its default settings (the same access filter, keyword vector, limits, SQL). Each call is timed
alone, and a whole request's calls are also made for real: a Search's one after another, a
HYBRID query's in each of a few schedules (its legs on threads, as the service overlaps them, or
in turn). What a request cannot go below on this machine; the service's ratio to it is its own
overhead.

The vector folder is opened by one process at a time, so this runs while no server holds it.
"""

from __future__ import annotations

import sqlite3
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TypeVar

import numpy as np
import qdrant_edge as qe

from bench.floor.rerank_pairs import Calls
from retrieval_server.backends.embedder import resolve_model
from retrieval_server.backends.metadata_store.sql import in_chunks
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore, exact_answer
from retrieval_server.backends.sparse import Bm25Encoder
from retrieval_server.backends.vector_store import DENSE, PARENT, SPARSE, SPARSE_TITLED
from retrieval_server.backends.vector_store.edge import _filter, saved_features
from retrieval_server.domain import AccessFilter, Identity, PointFilter
from scoring_core.encoders import BiEncoder, CrossEncoder

T = TypeVar("T")

#: queries the cross-encoder's floor is measured on (the first ones), and the only ones the rerank cell asks
RERANK_QUERIES = 10
#: the anonymous caller's filter: public documents (the benchmark's requests carry no identity)
PUBLIC = PointFilter(access=AccessFilter.for_identity(Identity()))


def _median_ms(fn: Callable[[T], object], items: Sequence[T]) -> float:
    times = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        times.append((time.perf_counter() - t0) * 1e3)
    return round(statistics.median(times), 3)


@dataclass(slots=True)
class InProcessFloor:
    """Median milliseconds per call over the same queries."""

    threads: int
    embed_ms: float = 0.0
    dense_ms: dict[int, float] = field(default_factory=dict)
    #: a query's dense searches as the service asks for them (one engine batch): the children's,
    #: and the parents' where the index holds parent vectors (the parent leg is on by default)
    dense_legs_ms: dict[int, float] = field(default_factory=dict)
    sparse_ms: dict[int, float] = field(default_factory=dict)
    fts_ms: float = 0.0
    #: documents (+ grants) of ``limit`` dense hits, the Search fetch
    documents_ms: dict[int, float] = field(default_factory=dict)
    #: the rows `enrich` reads, by top_k: the top_k parents and their documents (and grants)
    enrich_fetch_ms: dict[int, float] = field(default_factory=dict)
    enrich_rows: dict[int, float] = field(default_factory=dict)
    rerank_ms: float = 0.0
    rerank_pairs: int = 0

    #: the top_k of the requests made for real (the smallest measured)
    made_top_k: int = 0
    #: a Search's calls made one after another (the embedding on every core), median ms
    search_made_ms: float = 0.0
    #: a HYBRID query's calls made for real, by schedule (see :data:`SCHEDULES`): median ms of the
    #: whole request, and of its retrieval (from the start until every leg is back)
    hybrid_made_ms: dict[str, float] = field(default_factory=dict)
    retrieve_made_ms: dict[str, float] = field(default_factory=dict)

    def search(self, top_k: int) -> float:
        return self.embed_ms + self.dense_ms[top_k * 3] + self.documents_ms[top_k * 3]

    def hybrid(self, top_k: int, pool: int) -> float:
        """Each call alone: the embedding, then the legs side by side (the slowest counts), then the
        rows of the answer. No request can be that fast on a machine whose cores the legs share."""
        return self.embed_ms + max(self.dense_legs_ms[pool], self.sparse_ms[pool], self.fts_ms) + self.enrich_fetch_ms[top_k]

    def hybrid_made(self) -> tuple[str, float]:
        """The fastest schedule of a HYBRID query's calls made for real, and its median ms."""
        return min(self.hybrid_made_ms.items(), key=lambda kv: kv[1])

    def serial(self, pool: int) -> float:
        """``retrieve`` with nothing overlapped: the embedding, then each leg in turn."""
        return self.embed_ms + self.dense_legs_ms[pool] + self.sparse_ms[pool] + self.fts_ms

    def slowest_chain(self, pool: int) -> float:
        """``retrieve`` with everything overlapped: the embedding then the dense search, beside each other leg."""
        return max(self.embed_ms + self.dense_legs_ms[pool], self.sparse_ms[pool], self.fts_ms)

    #: requests/s of each scenario's direct calls made back to back on ``threads`` threads at once
    #: (single-threaded model runs): what this machine's cores allow, measured, shared as they are
    capacity_rps: dict[str, float] = field(default_factory=dict)


def mean_of(before: InProcessFloor, after: InProcessFloor) -> InProcessFloor:
    """Each number the mean of two measurements of the same floor, taken before and after the cells
    held to it: a host whose load drifts between them (a shared machine's does, by 10-40 % within
    minutes) then moves the floor and the cells alike, to first order, instead of only the cells."""
    values: dict[str, object] = {}
    for f in fields(InProcessFloor):
        a, b = getattr(before, f.name), getattr(after, f.name)
        if isinstance(a, dict):
            values[f.name] = {k: round((a[k] + b[k]) / 2, 3) for k in a if k in b}
        elif isinstance(a, float):
            values[f.name] = round((a + b) / 2, 3)
        elif a != b:  # counts and settings: the same in both, or the two are not of the same floor
            raise ValueError(f"{f.name} differs between the two measurements: {a} and {b}")
        else:
            values[f.name] = a
    return InProcessFloor(**values)  # type: ignore[arg-type]


#: How a HYBRID query's calls can be made: the service's way, and the two it could take instead.
SCHEDULES = {
    "legs beside the embedding": "keyword and full-text on threads while the query is embedded on one thread, then dense",
    "embedding first": "the query embedded on every core, then dense, keyword and full-text at once",
    "one after another": "the query embedded on every core, then dense, keyword and full-text in turn",
}


def _throughput(call: Callable[[str], object], queries: list[str], threads: int) -> float:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(call, queries[:threads]))  # every thread's connection and session warm
        t0 = time.perf_counter()
        list(pool.map(call, queries))
        return round(len(queries) / (time.perf_counter() - t0), 1)


class DirectCalls:
    """A request's embedding, engine and SQL calls, made directly on an index folder, with the
    arguments the service uses under its default settings, or with ``parent_leg`` and
    ``title_field`` (RETRIEVAL_PARENT_LEG, RETRIEVAL_KEYWORD_TITLE_FIELD) as the server is given
    them. One process may hold the folder."""

    def __init__(self, index_dir: Path, model_dir: Path | None, threads: int, *, parent_leg: bool = True, title_field: bool = True) -> None:
        self.files = resolve_model(model_dir)
        self.threads = threads
        #: the query embedded on every core, and on one (the service's while other legs run)
        self.encoder = BiEncoder(self.files.model_path, self.files.tokenizer_path, threads=threads)
        self.single = BiEncoder(self.files.model_path, self.files.tokenizer_path, threads=1)
        self.encoder.encode(["warm up"])
        self.single.encode(["warm up"])
        self._shard = qe.EdgeShard.load(str(index_dir / "vectors"))
        self._uri = f"{(index_dir / 'metadata.sqlite3').absolute().as_uri()}?mode=ro"
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._filter = _filter(PUBLIC)
        exact = int(self._shard.info().points_count) <= 200_000
        self._params = qe.SearchParams(exact=exact, acorn=qe.AcornSearchParams(enable=True) if self._filter else None)
        # The keyword leg's vector: the titled one (BM25F) where the index holds it and the setting asks for it, as the
        # service searches, and its terms as the index was built with them; the parents' vectors likewise.
        features = saved_features(index_dir / "vectors")
        self._sparse = Bm25Encoder(terms=features.terms)
        self._keyword_vector = SPARSE_TITLED if features.title_field and title_field else SPARSE
        self._granularities = (DENSE, PARENT) if features.parent_vectors and parent_leg else (DENSE,)
        self._store = SqliteMetadataStore(index_dir / "metadata.sqlite3")
        self._legs = ThreadPoolExecutor(2, thread_name_prefix="leg")
        self._schedules: dict[int, dict[str, Callable[[str], list[qe.ScoredPoint]]]] = {}

    def close(self) -> None:
        self._legs.shutdown()
        for c in self._connections:
            c.close()
        self._shard.close()

    def __enter__(self) -> DirectCalls:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _conn(self) -> sqlite3.Connection:
        """One connection per thread, as the service's readers: a shared one would serialize the threads."""
        c = getattr(self._local, "db", None)
        if c is None:
            c = self._local.db = sqlite3.connect(self._uri, uri=True, check_same_thread=False)
            self._connections.append(c)
        return c

    def _request(self, vector: np.ndarray, limit: int, using: str) -> qe.QueryRequest:
        v = np.asarray(vector, dtype=np.float32).tolist()
        return qe.QueryRequest(limit=limit, query=qe.Query.Nearest(v, using=using), filter=self._filter, params=self._params, with_payload=True)

    def nearest(self, vector: np.ndarray, limit: int) -> list[qe.ScoredPoint]:
        return self._shard.query(self._request(vector, limit, DENSE))

    def dense_legs(self, vector: np.ndarray, limit: int) -> list[qe.ScoredPoint]:
        """A query's dense searches in one engine batch, as the service's coalescer sends them; the children's hits."""
        if len(self._granularities) == 1:
            return self.nearest(vector, limit)
        return self._shard.query_batch(qe.QueryBatchRequest([self._request(vector, limit, using) for using in self._granularities]))[0]

    def keyword(self, q: str, limit: int) -> list[qe.ScoredPoint]:
        s = self._sparse.query(q)
        if not s.indices:
            return []
        query = qe.Query.Nearest(qe.SparseVector(indices=list(s.indices), values=list(s.values)), using=self._keyword_vector)
        return self._shard.query(qe.QueryRequest(limit=limit, query=query, filter=self._filter, params=self._params, with_payload=True))

    def fts(self, q: str) -> list[tuple[object, ...]]:
        """The store's statements: the best matches by score with whether they are readable, and
        the plain statement when those do not settle the answer."""
        statement = self._store.ranked_search_statement(q, 3, PUBLIC.access)
        if statement is None:
            return []
        answer = exact_answer(self._conn().execute(*statement).fetchall(), 3)
        if answer is not None:
            return list(answer)
        plain = self._store.search_statement(q, 3, PUBLIC.access)
        return self._conn().execute(*plain).fetchall() if plain else []

    def rows(self, table: str, key: str, ids: list[str]) -> int:
        n = 0
        for part in in_chunks(ids):
            n += len(self._conn().execute(f"SELECT * FROM {table} WHERE {key} IN ({','.join('?' * len(part))})", part).fetchall())
        return n

    def documents(self, hits: list[qe.ScoredPoint]) -> int:
        ids = list(dict.fromkeys(str(h.payload["document_id"]) for h in hits))
        return self.rows("documents", "document_id", ids) + self.rows("grants", "document_id", ids)

    @staticmethod
    def enrich_ids(hits: list[qe.ScoredPoint], top_k: int) -> tuple[list[str], list[str]]:
        """The top_k parents of ``hits`` and their documents."""
        parents = list(dict.fromkeys(str(h.payload["parent_chunk_id"]) for h in hits))[:top_k]
        return parents, list(dict.fromkeys(p.rsplit("#", 1)[0] for p in parents))

    def enrich_rows(self, parents: list[str], docs: list[str]) -> int:
        """What enrich reads when every hit is current: those parents and their documents."""
        return (self.rows("parent_chunks", "parent_chunk_id", parents) + self.rows("documents", "document_id", docs)
                + self.rows("grants", "document_id", docs))

    def enrich(self, hits: list[qe.ScoredPoint], top_k: int) -> int:
        return self.enrich_rows(*self.enrich_ids(hits, top_k))

    def search_made(self, q: str, top_k: int) -> None:
        """A Search made for real: the query embedded on every core, its nearest children, their documents."""
        self.documents(self.nearest(self.encoder.encode([q])[0], top_k * 3))

    def schedules(self, pool: int) -> dict[str, Callable[[str], list[qe.ScoredPoint]]]:
        """A HYBRID query's retrieval made for real in each of :data:`SCHEDULES`; each returns the dense hits."""

        def legs_around(q: str, embed_first: bool) -> list[qe.ScoredPoint]:
            """Keyword and full-text on the threads, dense here: started before the embedding
            (which then runs on one thread) or after it (on every core)."""
            if embed_first:
                vector = self.encoder.encode([q])[0]
            side = [self._legs.submit(self.keyword, q, pool), self._legs.submit(self.fts, q)]
            if not embed_first:
                vector = self.single.encode([q])[0]
            hits = self.dense_legs(vector, pool)
            for f in side:
                f.result()
            return hits

        def one_after_another(q: str) -> list[qe.ScoredPoint]:
            hits = self.dense_legs(self.encoder.encode([q])[0], pool)
            self.keyword(q, pool)
            self.fts(q)
            return hits

        return dict(zip(SCHEDULES, (lambda q: legs_around(q, embed_first=False), lambda q: legs_around(q, embed_first=True), one_after_another),
                        strict=True))

    def hybrid_made(self, q: str, schedule: str, top_k: int, pool: int) -> tuple[float, float]:
        """One HYBRID query made for real in one of :data:`SCHEDULES`: ``(whole ms, retrieval ms)``,
        the whole including the rows `enrich` reads.

        A service answers each query once, so each query is made once per schedule here and never
        right after itself: made after the same query in another schedule, a schedule ran 6-11 %
        faster on the caches that run had warmed (session 31, beside the service's requests)."""
        schedules = self._schedules.get(pool)
        if schedules is None:
            schedules = self._schedules[pool] = self.schedules(pool)
        t0 = time.perf_counter()
        hits = schedules[schedule](q)
        t1 = time.perf_counter()
        self.enrich(hits, top_k)
        return (time.perf_counter() - t0) * 1e3, (t1 - t0) * 1e3


def measure(
    index_dir: Path, model_dir: Path | None, queries: list[str], *, top_ks: tuple[int, ...], candidates_per_context: int,
    threads: int, reranker_dir: Path | None = None, rerank_calls: Sequence[Calls] = (), parent_leg: bool = True, title_field: bool = True,
) -> InProcessFloor:
    """``rerank_calls``: per query, the (query, passages) the service's rerank stage scores
    (:func:`bench.floor.rerank_pairs.collect`), timed here on the raw cross-encoder. ``parent_leg``,
    ``title_field``: as :class:`DirectCalls`."""
    floor = InProcessFloor(threads=threads)
    with DirectCalls(index_dir, model_dir, threads, parent_leg=parent_leg, title_field=title_field) as d:
        vectors = {q: d.encoder.encode([q])[0] for q in queries}
        floor.embed_ms = _median_ms(lambda q: d.encoder.encode([q]), queries)

        def dense(q: str, limit: int) -> list[qe.ScoredPoint]:
            return d.nearest(vectors[q], limit)

        limits = sorted({k * 3 for k in top_ks} | {k * candidates_per_context for k in top_ks})
        for limit in limits:
            floor.dense_ms[limit] = _median_ms(lambda q: dense(q, limit), queries)
            floor.dense_legs_ms[limit] = _median_ms(lambda q: d.dense_legs(vectors[q], limit), queries)
            floor.sparse_ms[limit] = _median_ms(lambda q: d.keyword(q, limit), queries)
            hits = {q: dense(q, limit) for q in queries}
            floor.documents_ms[limit] = _median_ms(lambda q: d.documents(hits[q]), queries)
        floor.fts_ms = _median_ms(d.fts, queries)
        for k in top_ks:
            # Only the reads are timed: enrich finds the ids in its hits, whose payloads the legs
            # converted. Reading them from the engine's payloads here (800 of them at top_k 100)
            # was about half of this floor.
            wanted = {q: d.enrich_ids(dense(q, k * candidates_per_context), k) for q in queries}
            floor.enrich_fetch_ms[k] = _median_ms(lambda q: d.enrich_rows(*wanted[q]), queries)
            floor.enrich_rows[k] = statistics.mean(d.enrich_rows(*wanted[q]) for q in queries)
        if reranker_dir is not None and rerank_calls:
            tokenizer = reranker_dir / "tokenizer.json"
            cross = CrossEncoder(reranker_dir / "model.onnx", tokenizer if tokenizer.is_file() else d.files.tokenizer_path, threads=threads)
            cross.score("warm up", ["warm up"])
            # A cross-encoder run costs a large part of a second here: a few queries give its median.
            floor.rerank_ms = _median_ms(lambda calls: [cross.score(q, passages) for q, passages in calls], rerank_calls)
            floor.rerank_pairs = round(statistics.mean(sum(len(p) for _, p in calls) for calls in rerank_calls))

        search_top_k = hybrid_top_k = min(top_ks)
        pool = hybrid_top_k * candidates_per_context

        # What the cores allow: each request's direct calls back to back, on as many threads as cores.
        def search_request(q: str) -> None:
            d.single.encode([q])
            d.documents(dense(q, search_top_k * 3))

        def hybrid_request(q: str) -> None:
            d.single.encode([q])
            hits = d.dense_legs(vectors[q], pool)
            d.keyword(q, pool)
            d.fts(q)
            d.enrich(hits, hybrid_top_k)

        floor.capacity_rps = {name: _throughput(call, queries, threads) for name, call in (("search", search_request), ("query-hybrid", hybrid_request))}

        # Whole requests made for real: the embedding's vector is the one searched.
        floor.made_top_k = hybrid_top_k
        floor.search_made_ms = _median_ms(lambda q: d.search_made(q, search_top_k), queries)
        for q in queries[:2]:  # every leg thread's connection open
            for name in SCHEDULES:
                d.hybrid_made(q, name, hybrid_top_k, pool)
        # Every query once per schedule: three passes over the queries, the schedule rotating from
        # query to query, so that no query is made right after itself and the host's drift falls
        # on every schedule alike.
        names = list(SCHEDULES)
        made: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for turn in range(len(names)):
            for i, q in enumerate(queries):
                name = names[(i + turn) % len(names)]
                made[name].append(d.hybrid_made(q, name, hybrid_top_k, pool))
        floor.hybrid_made_ms, floor.retrieve_made_ms = schedule_medians(made)
    return floor


def schedule_medians(made: dict[str, list[tuple[float, float]]]) -> tuple[dict[str, float], dict[str, float]]:
    """Per schedule, the median ms of the whole requests and of their retrieval (schedules made at least once)."""
    whole = {name: round(statistics.median(w for w, _ in m), 3) for name, m in made.items() if m}
    retrieval = {name: round(statistics.median(r for _, r in m), 3) for name, m in made.items() if m}
    return whole, retrieval
