"""Query graph nodes. Each reads the state, does one thing, and returns the fields it changed.

Metrics are the request's running log: nodes append what they degraded to ``metrics.degraded``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from retrieval_server.backends.circuit_breaker import refused_by_breaker
from retrieval_server.backends.reranker import ScoringRate, TeiError, scores_reporting
from retrieval_server.backends.cache import CachedAnswer, CacheUnavailable, PassReport, normalize_query
from retrieval_server.domain import (
    AccessFilter,
    ChildEvidence,
    Document,
    Fusion,
    ParentChunk,
    PointFilter,
    QueryMetrics,
    QueryOptions,
    RetrievedContext,
    SparseVector,
    Strategy,
    TimedOut,
    Unavailable,
    VectorHit,
    version_of,
)
from retrieval_server.workflow import dense_feedback, dense_fusion, document_evidence, keyword_leg, leg_cutoff, parent_leg, query_windows, rank_fusion
from retrieval_server.workflow.adaptive import leg_weights, name_the_same_identifiers, negate_alike, query_features, word_count
from retrieval_server.workflow.parent_leg import DENSE_GRANULARITIES
from retrieval_server.workflow.abandon import abandon
from retrieval_server.workflow.analysis import analyze
from retrieval_server.workflow.graph import PARTIAL_RESULTS
from retrieval_server.workflow.graph_expansion import graph_leg, uses_graph
from retrieval_server.workflow.state import QueryState, ScoredPass, WorkflowDeps
from scoring_core import content_hashes, group_by_parent

log = logging.getLogger(__name__)
T = TypeVar("T")

#: hits Query and Search fetch per result asked for, at most: past that many copies of fewer texts
#: they answer with fewer than top_k results (each wider pool is another search of the engine)
HITS_PER_RESULT = 50
#: how much wider each search past copies of one text is
_WIDER_POOL = 4
#: parents enrich reads at least when it reads again (doubling each time)
_PARENTS_READ_AGAIN = 8

def cache_config(o: QueryOptions) -> str:
    """What makes two requests answerable by the same cached result."""
    fusion = o.fusion.value if o.fusion else ""
    # JSON, not a join: a document id may hold any separator (["x,y"] is not ["x", "y"]). A digest
    # of it: a filter holds up to 1,000 ids (200 KB), and every entry and Redis key carries this.
    documents = hashlib.sha256(json.dumps(sorted(o.document_ids)).encode()).hexdigest()[:32] if o.document_ids else ""
    return f"{o.strategy.value}|{o.top_k}|{o.mode.value}|{fusion}|{int(o.rerank)}|{documents}"


def _uses_dense(strategy: Strategy) -> bool:
    return strategy in (Strategy.SEMANTIC, Strategy.HYBRID)


async def _with_retries(deps: WorkflowDeps, what: str, call: Callable[[], Awaitable[T]]) -> T:
    """A store call, retried with exponential backoff; the last error propagates. A call that
    timed out is not retried: the store let its whole timeout pass, and a retry would wait as long
    again (three times ``MYSQL_TIMEOUT_S`` per call against a frozen server)."""
    s = deps.settings
    for attempt in range(s.store_retries + 1):
        try:
            return await call()
        except TimedOut:
            raise
        except Exception as exc:
            if attempt == s.store_retries:
                raise
            # Every request's, while a store is down: the last failure is logged where it lands.
            log.debug("%s failed (attempt %d); retrying: %s", what, attempt + 1, exc)
            await asyncio.sleep(s.store_backoff_s * 2**attempt)
    raise AssertionError("unreachable")


async def build_access_filter(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    """What the caller may read: the filter every leg (dense, keyword, metadata, sub-queries) applies
    and the name of the cache partition, so an answer is cached for exactly the set it was computed on.

    A user who can read nothing private gets the public filter (and shares the public partition).
    """
    identity = state.options.identity
    reads_private = True
    if identity.principals and not identity.reads_everything:
        reads_private = await _with_retries(deps, "access", lambda: deps.metadata.reads_private(identity))
    access = AccessFilter.for_identity(identity, reads_private)
    # The strategy the request runs, reported as such when no pass gets to say (a GENERATION
    # request answered without retrieval, a deadline before the first pass).
    strategy = _runs_as(state.options.strategy)
    state.metrics.strategy_used = strategy
    return {"point_filter": PointFilter(access=access, document_ids=state.options.document_ids), "strategy": strategy}


def _runs_as(strategy: Strategy) -> Strategy:
    # ADAPTIVE runs every hybrid leg and weighs them by the query's form (workflow/adaptive.py).
    return Strategy.HYBRID if strategy is Strategy.ADAPTIVE else strategy


async def check_cache(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    if not state.options.use_cache or deps.cache is None:
        return {}
    state.metrics.cache_asked = True
    o = state.options
    config, partition = cache_config(state.options), state.point_filter.access.partition
    cache_until = _cache_until(state)
    vector: np.ndarray | None = None
    embedding: asyncio.Future[np.ndarray] | None = None
    try:
        # A repeated question is answered before the model runs: the embedding is most of a cache hit's cost.
        answer = await _cache_call(cache_until, deps.cache.lookup(o.query, None, config, partition))
        if answer is None and not _matched_by_vector(state, deps):
            return {}  # retrieve embeds it, if its legs need a vector
        if answer is None:
            # A task of its own, waited for within the cache's time only: with every model lane busy
            # the wait is given up like a lookup's, and the job goes on for retrieve to await.
            embedding = asyncio.ensure_future(deps.embedder.embed([o.query]))
            try:
                vector = (await _cache_call(cache_until, asyncio.shield(embedding)))[0]
            except _CacheTimeLeft:
                raise
            except Exception:
                log.warning("query embedding failed in check_cache", exc_info=True)
            answer = await _cache_call(cache_until, deps.cache.lookup(o.query, vector, config, partition)) if vector is not None else None
        if answer is not None and not _answers(answer, o):
            # A miss, without looking further: the best match asks for other identifiers. (Found by
            # the text, it is the cache's note of an earlier such match, which a lookup by the vector
            # would find first again.)
            answer = None
        current = answer is not None and await _cache_call(cache_until, _still_current(answer, state, deps))
    except CacheUnavailable as exc:
        # Every request's while Redis is down: its breaker logs when it opens and closes.
        log.debug("cache unavailable: %s", exc)
        state.degrade("cache:unavailable")
        return _own_vector(o.query, vector)
    except _CacheTimeLeft:
        state.degrade("deadline:cache_skipped")
        # Cut while the model ran: the search awaits that job rather than embed the query again.
        pending = {"query_embedding": embedding} if vector is None and embedding is not None else {}
        return {**_own_vector(o.query, vector), **pending}
    except BaseException:
        abandon([embedding])  # cancelled: a job still queued is not run for nobody
        raise
    if answer is None or not current:
        return _own_vector(o.query, vector)
    state.metrics.cache_hit = True
    state.metrics.strategy_used = answer.strategy
    _report_again(state, answer)
    return {**_own_vector(o.query, vector), "contexts": list(answer.contexts), "cache_hit": True, "strategy": answer.strategy}


def _report_again(state: QueryState, answer: CachedAnswer) -> None:
    """What the response said of the pass that found the contexts served. Answered for another
    text, only what describes the contexts: the rewrite, the sub-queries and the graph leg's trace
    are that query's search, in its caller's words. Another text in its case too, though the exact
    key sets case aside: the rewrite expands an acronym in capitals only, and "contact us" was
    told it had been searched as "contact us (United States)" because "contact US" had."""
    r, m = answer.report, state.metrics
    m.sufficiency_score, m.rerank_fallback_triggered = r.sufficiency_score, r.rerank_fallback_triggered
    for tag in r.degraded:
        state.degrade(tag)
    if answer.query.split() == state.options.query.split():
        m.decomposition_used, m.rewritten_query, m.sub_queries, m.graph = r.decomposition_used, r.rewritten_query, list(r.sub_queries), r.graph


def _matched_by_vector(state: QueryState, deps: WorkflowDeps) -> bool:
    """Whether the cache may answer the request with the answer to a similar query. Not KEYWORD's:
    it is what callers send for exact names and codes, which a cosine of 0.97 ("error code E1234",
    "error code E1235") does not tell apart. Nor a query longer than the model reads: matched by a
    vector of its first tokens, it would be served the answer to another that opens the same way."""
    return state.options.strategy is not Strategy.KEYWORD and _vector_holds_all_of(state, deps)


def _answers(answer: CachedAnswer, options: QueryOptions) -> bool:
    """Whether a cached answer answers this query: stored for the same normalized text, or, found by
    similarity, for one naming the same identifiers (:func:`name_the_same_identifiers`) and negating
    alike (:func:`negate_alike`). The strategy is checked too: a KEYWORD query's text may find a
    server's note of a similarity match made before KEYWORD matched exactly only."""
    if normalize_query(answer.query) == normalize_query(options.query):
        return True
    return (options.strategy is not Strategy.KEYWORD and name_the_same_identifiers(answer.query, options.query)
            and negate_alike(answer.query, options.query))


def _vector_holds_all_of(state: QueryState, deps: WorkflowDeps) -> bool:
    """Whether the model reads all of the query (it reads the first ``model_tokens``): when it does
    not, two queries that differ past that point have the same vector. Counted once a request."""
    if state.query_in_one_vector is None:
        state.query_in_one_vector = _read_whole(state.options.query, deps)
    return state.query_in_one_vector


#: English averages four to five characters a token
_CHARS_PER_TOKEN_AT_MOST = 16


def _read_whole(query: str, deps: WorkflowDeps) -> bool:
    """Counted in tokens: no count of characters tells (a Hangul syllable is two or three tokens,
    as are some Indic vowel signs), on prefixes growing fourfold, so that a long query is known
    long from its first thousand characters. Conservative: a query of more than
    :data:`_CHARS_PER_TOKEN_AT_MOST` characters a token counts as longer (it would take runs no
    question has, long words or white space, and their tokenizing takes time), and a word cut at a
    prefix's end may count a token more."""
    room = deps.settings.model_tokens - 2
    if query.isascii() and len(query) <= room:
        return True  # an ASCII character is at most one token
    if deps.count_tokens is None or len(query) > room * _CHARS_PER_TOKEN_AT_MOST:
        return False
    size = 4 * room
    while deps.count_tokens(query[:size]) <= room:
        if size >= len(query):
            return True
        size *= 4
    return False


def _own_vector(query: str, vector: np.ndarray | None) -> dict[str, Any]:
    return {"query_vector": vector, "query_vector_text": query, "cache_vector": vector}


class _CacheTimeLeft(Exception):
    """The cache took the time a request's deadline leaves it."""


def _cache_until(state: QueryState) -> float | None:
    """When, on the event loop's clock, the cache's calls are given up: like analysis, the cache
    gets at most half the time left, as a slow one must not take the time a search needs (or,
    storing, the time to send the answer)."""
    left = state.time_left()
    return None if left is None else asyncio.get_running_loop().time() + max(0.0, left / 2)


async def _cache_call(until: float | None, call: Awaitable[T]) -> T:
    if until is None:
        return await call
    timeout = asyncio.timeout_at(until)
    try:
        async with timeout:
            return await call
    except TimeoutError:
        if not timeout.expired():
            raise  # the cache's own
        raise _CacheTimeLeft() from None


async def _still_current(answer: CachedAnswer, state: QueryState, deps: WorkflowDeps) -> bool:
    """Every cited document is still stored at the version the answer was built from, and readable.

    This makes a deleted or replaced document unservable even when the invalidation never reached
    the cache (Redis down, another process's cache): the metadata store is the source of truth.
    """
    # Each context's document, not one per id: an answer holding two versions of a document passed
    # as long as its last context was of the stored one.
    trace = answer.report.graph
    if answer.graph_version is None and trace is not None and (trace.matches or trace.hops):
        # A trace naming what the graph held with no version to check it by: the release before
        # stored one only when a relation was followed, and its entries name entities of
        # documents deleted or made private since as readily as any other.
        return False
    if answer.graph_version is not None and deps.graph is not None and await deps.graph.version() != answer.graph_version:
        # The entities its trace names and the relations it followed may have come from documents
        # deleted or made private since, which it does not cite; answered again, it is stored
        # again (the graph changes only on writes).
        return False
    cited = [c.document for c in answer.contexts]
    versions = await _with_retries(deps, "cache versions", lambda: deps.metadata.document_versions(list({d.document_id for d in cited})))
    access = state.point_filter.access
    stale = list({d.document_id for d in cited if versions.get(d.document_id) != d.content_hash or not access.allows(d)})
    if not stale:
        return True
    try:
        await deps.cache.invalidate_documents(stale)  # type: ignore[union-attr]
    except CacheUnavailable as exc:
        log.warning("could not drop stale cache entries: %s", exc)
    return False


async def analyze_query(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    s, o = deps.settings, state.options
    iteration = state.iteration + 1
    # Every pass runs as asked: a failed embedding turned its own pass to KEYWORD, and a retry
    # asks the model again.
    strategy = _runs_as(o.strategy)
    if iteration == 1:
        pool = o.top_k * s.child_candidates_per_context
        threshold = s.rerank_threshold
    else:
        # A retry widens: a larger pool and a relaxed threshold.
        pool = int(state.pool * s.retry_pool_factor)
        threshold = state.rerank_threshold / 2 if state.rerank_threshold > 0 else state.rerank_threshold - 0.5
    feedback = [c.parent.content for c in state.contexts[:5]]
    analysis = await analyze(
        deps.analyzer, o.query, feedback, timeout_s=s.analysis_timeout_s, total_timeout_s=s.analysis_total_timeout_s,
        time_left_s=state.time_left(), log_limit=deps.log_limit,
    )
    # Every pass's: a technique may fail only on a retry, whose search then went without it (and
    # the answer must not be cached). A drop the first pass reported is reported once.
    for technique, why in analysis.dropped.items():
        state.degrade(f"analysis:{technique}:{why}")
    update: dict[str, Any] = {
        "iteration": iteration,
        "strategy": strategy,
        "pool": pool,
        "rerank_threshold": threshold,
        "analysis": analysis,
        "variant_vectors": [],
    }
    if o.strategy is Strategy.ADAPTIVE and iteration == 1:
        update["leg_weights"] = leg_weights(query_features(o.query, deps.sparse, deps.term_stats, s.adaptive), s.adaptive)
    main = analysis.rewritten or o.query
    searched = s.long_query_windows and _uses_dense(strategy)
    # Tokenizing the query on the event loop only when its windows are searched or fusion asks
    # whether it is long.
    windows = query_windows.cut(main, deps) if searched or s.fusion_unit == "auto" else []
    update["long_query"] = bool(windows)
    if _uses_dense(strategy):
        # Only what a dense leg will search for is embedded, and not here: retrieve embeds it while
        # the keyword, metadata and graph legs, which need no vector, already run.
        extra = [*analysis.reformulations, *([analysis.hyde] if analysis.hyde else [])]
        windows = windows if searched else []
        update["embed_texts"] = ([] if _known_vector(state, main) else [main]) + extra + windows
        update["windows"] = len(windows)
    else:
        update["embed_texts"], update["windows"] = [], 0
    return update


async def _query_vectors(state: QueryState, deps: WorkflowDeps, *, beside_work: bool = False) -> list[np.ndarray] | None:
    """The dense legs' vectors: the (rewritten) query's, then its variants', then its windows'; None when the model failed."""
    # One call: the encoder runs texts of similar length together (scoring_core.encoders.by_token_count),
    # so a window (at most a child's tokens) is not padded to a whole query of up to the model's 256.
    # A retry may have nothing new to embed: a model job for no texts would still take a lane and,
    # as a query's, stop an ingestion piece running there.
    if state.search_again and state.pass_vectors is not None:
        return state.pass_vectors  # the same search once more: the same vectors
    main = state.analysis.rewritten or state.options.query
    pending = _pending_vector(state, main)
    try:
        if pending is not None:
            # Shielded: given up at the legs' cut-off, this wait ends, not the job, which a retry's
            # dense legs await again (the request's end abandons it).
            own, vectors = await asyncio.gather(asyncio.shield(pending), _embedded(deps, state.embed_texts, beside_work))
            return [own[0], *vectors]
        vectors = await _embedded(deps, state.embed_texts, beside_work)
    except Exception:
        log.warning("query embedding failed; falling back to keyword search", exc_info=True)
        return None
    return [state.query_vector, *vectors] if _in_hand(state, main) else vectors


async def _embedded(deps: WorkflowDeps, texts: list[str], beside_work: bool) -> list[np.ndarray]:
    return list(await deps.embedder.embed(texts, beside_work=beside_work)) if texts else []


def _known_vector(state: QueryState, main: str) -> bool:
    """Whether the vector of ``main``, the text this pass searches, is in hand or on its way."""
    return _in_hand(state, main) or _pending_vector(state, main) is not None


def _in_hand(state: QueryState, main: str) -> bool:
    """Whether the vector in hand is of ``main``: a retry whose rewrite contributed nothing (cut
    for the deadline, failed) searched the previous rewrite's vector as the query's own."""
    return state.query_vector is not None and state.query_vector_text == main


def _pending_vector(state: QueryState, main: str) -> asyncio.Future[np.ndarray] | None:
    """check_cache's embedding of the caller's query, when ``main`` is that query and no vector of
    it is in hand: the cache gave up waiting for the job (every model lane busy), which goes on.
    A job that failed is no vector on its way: the pass that met its failure searched by keyword,
    and a retry asks the model again."""
    pending = state.query_embedding
    if pending is None or main != state.options.query or _in_hand(state, main):
        return None
    if pending.done() and (pending.cancelled() or pending.exception() is not None):
        return None
    return pending


async def retrieve(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    """Every leg at once: the query's embedding and the dense legs after it run beside the keyword,
    metadata and graph legs, so the slowest chain, not the sum of them, is what a query waits for.
    With a deadline, legs still running at its cut-off are abandoned (workflow.leg_cutoff)."""
    o, strategy, flt, pool = state.options, state.strategy, state.point_filter, state.pool
    text = state.analysis.rewritten or o.query
    dense = _uses_dense(strategy) and (state.query_vector is not None or state.query_embedding is not None or bool(state.embed_texts))
    # HYBRID's keyword and full-text searches take a core while the query is embedded: the
    # embedding then runs on one thread instead of waiting for a thread that shares their core.
    embedding = asyncio.ensure_future(_query_vectors(state, deps, beside_work=strategy is Strategy.HYBRID)) if dense else None
    jobs: dict[str, Callable[[], Awaitable[list[VectorHit]]]] = {}
    if embedding is not None:
        variants = len(state.analysis.reformulations) + (1 if state.analysis.hyde else 0)
        for i in range(1 + variants):
            jobs[f"dense:{i}"] = lambda i=i: _after_embedding(embedding, i, lambda v: deps.vectors.search_dense(v, pool, flt))
        for j in range(state.windows):
            jobs[f"{query_windows.KIND}:{j}"] = lambda i=1 + variants + j: _after_embedding(
                embedding, i, lambda v: deps.vectors.search_dense(v, pool, flt)
            )
        if deps.settings.parent_leg and deps.vectors.features.parent_vectors:
            jobs["parent:0"] = lambda: _after_embedding(embedding, 0, lambda v: deps.vectors.search_parents(v, pool, flt))
        if deps.settings.document_leg and deps.vectors.features.parent_vectors:
            first = dataclasses.replace(flt, first_parents=True)
            jobs["document:0"] = lambda: _after_embedding(embedding, 0, lambda v: deps.vectors.search_parents(v, pool, first))
        if deps.settings.dense_feedback.docs > 0:
            feedback = deps.settings.dense_feedback
            jobs["feedback:0"] = lambda: _after_embedding(embedding, 0, lambda v: dense_feedback.search(deps.vectors, v, pool, flt, feedback))
    keyword = strategy in (Strategy.KEYWORD, Strategy.HYBRID) or (not jobs and strategy is not Strategy.GRAPH)
    if keyword:
        jobs.update(_keyword_jobs(state, deps, text))
    # The metadata search runs alongside the vector legs; only mapping its documents to chunks waits for them.
    metadata_search = (
        asyncio.ensure_future(
            _with_retries(deps, "metadata", lambda: deps.metadata.search_documents(
                o.query, max(3, o.top_k // 2), flt.access, o.document_ids, keep_stopwords=deps.settings.metadata_stopwords
            ))
        )
        # As asked, not as this pass runs: it needs no vector, so a failed embedding keeps it.
        if _runs_as(o.strategy) is Strategy.HYBRID
        else None
    )
    graph_search = asyncio.ensure_future(graph_leg(state, deps)) if uses_graph(state, deps) else None
    cutoff = leg_cutoff.when(state.time_left(), state.clock(), deps.settings.deadline_reserve_ms)
    started = _start(deps, jobs)
    try:
        searches = {name: f for name, f in (("metadata", metadata_search), ("graph", graph_search)) if f is not None}
        abandoned = await _settle(state, {**started, **searches}, cutoff)
        legs = _finished(state, deps, started, abandoned)
        update: dict[str, Any] = {}
        # Not done: the dense legs were given up at the cut-off while it ran, which is no failure.
        embedded = embedding is not None and embedding.done()
        vectors = embedding.result() if embedding is not None and embedded else None
        if embedded and vectors is None:
            # An embedding failure degrades to keyword search instead of failing the request.
            state.degrade("dense:embedding_failed")
            legs = {leg: hits for leg, hits in legs.items() if leg.split(":")[0] not in (*DENSE_GRANULARITIES, query_windows.KIND)}
            if not keyword:
                fallback = _start(deps, _keyword_jobs(state, deps, text))
                started.update(fallback)
                legs.update(_finished(state, deps, fallback, await _settle(state, fallback, cutoff)))
            # The legs that need no vector (metadata, graph) are kept: a HYBRID query only the
            # metadata leg could answer came back empty, its suggestions naming the document.
            update["strategy"] = Strategy.KEYWORD
        elif vectors is not None:
            update["query_vector"], update["variant_vectors"] = vectors[0], vectors[1 : len(vectors) - state.windows]
            update["query_vector_text"] = text
            update["pass_vectors"] = vectors
        children = {k: v for k, v in legs.items() if k not in ("parent:0", "document:0")}
        for coarse in ("parent:0", "document:0"):
            if coarse in legs:
                legs[coarse] = parent_leg.as_children(legs[coarse], children)
        if metadata_search is not None and "metadata" not in abandoned:
            try:
                legs["metadata"] = await _metadata_leg(_outcome(metadata_search), deps, legs)
            except Exception as error:
                _leg_failed(deps, "metadata", error)
                state.degrade("metadata:store_error")
        # This pass's trace only: a leg that failed or was abandoned leaves none, where an earlier
        # pass's would be reported (and pin a cached answer) as this pass's.
        state.metrics.graph = None
        graph_update = _collect_graph(graph_search, state, deps, legs) if graph_search is not None and "graph" not in abandoned else {}
        # Each pass's own: it is measured against the text it searched, and an earlier pass's
        # cosines with a rewrite must not score the caller's words. A wider pool or a search
        # once more is the same pass.
        relevance = dict(state.dense_relevance) if state.search_again else {}
        for leg, hits in legs.items():
            if leg.startswith("dense:"):
                _record_cosines(relevance, hits)
        return {**update, "legs": legs, "dense_relevance": relevance, **graph_update}
    finally:
        # A request cancelled (its caller gone, its deadline passed) or failed while its legs ran:
        # the legs started beside them are not left spending the model and the stores on nobody.
        abandon([embedding, metadata_search, graph_search, *started.values()])


def _record_cosines(relevance: dict[str, float], hits: Sequence[VectorHit]) -> None:
    for h in hits:
        relevance[h.chunk_id] = max(relevance.get(h.chunk_id, -1.0), h.score)


async def _after_embedding(
    embedding: asyncio.Future[list[np.ndarray] | None], i: int, search: Callable[[np.ndarray], Awaitable[list[VectorHit]]]
) -> list[VectorHit]:
    # Shielded: one leg's cancellation must not cancel the embedding every dense leg waits for.
    vectors = await asyncio.shield(embedding)
    return [] if vectors is None else await search(vectors[i])


def _keyword_jobs(state: QueryState, deps: WorkflowDeps, text: str) -> dict[str, Callable[[], Awaitable[list[VectorHit]]]]:
    kw, pool, flt = deps.settings.keyword, state.pool, state.point_filter
    # Encoded here once, for the search and for the check.
    main = keyword_leg.query_vector(deps.sparse, text, kw.max_terms)
    if not main.indices:
        # Stop words only ("to be or not to be", "The Who"), which BM25 does not index: the leg
        # finds nothing, and the caller is told why.
        state.degrade("keyword:no_terms")
    variants: list[str | SparseVector] = [main, *state.analysis.reformulations]
    return {
        f"keyword:{i}": lambda q=variant: keyword_leg.search(deps.vectors, deps.sparse, q, pool, flt, kw)
        for i, variant in enumerate(variants)
    }


def _start(deps: WorkflowDeps, jobs: dict[str, Callable[[], Awaitable[list[VectorHit]]]]) -> dict[str, asyncio.Future[list[VectorHit]]]:
    return {leg: asyncio.ensure_future(_with_retries(deps, leg, job)) for leg, job in jobs.items()}


async def _settle(state: QueryState, futures: dict[str, asyncio.Future[Any]], cutoff: float | None) -> set[str]:
    """Every leg ends, or, past the request's cut-off, those that found something have: the rest
    are abandoned, reported, and named in the set returned. Every other future is then done."""
    abandoned = await leg_cutoff.settle(futures, cutoff, state.clock, _found)
    for kind in dict.fromkeys(leg.split(":")[0] for leg in abandoned):
        state.degrade(f"deadline:{kind}_skipped")
    return set(abandoned)


def _found(result: list[VectorHit] | tuple[list[VectorHit], Any, Any]) -> bool:
    # The graph leg's result is (hits, entity matches, trace).
    return bool(result[0] if isinstance(result, tuple) else result)


def _outcome(future: asyncio.Future[T]) -> T:
    """A finished leg's result. Cancelled by anything but the cut-off, it failed like any store call."""
    if future.cancelled():
        raise RuntimeError("the leg was cancelled")
    return future.result()


def _finished(state: QueryState, deps: WorkflowDeps, started: dict[str, asyncio.Future[list[VectorHit]]], abandoned: set[str]) -> dict[str, list[VectorHit]]:
    legs: dict[str, list[VectorHit]] = {}
    for leg, task in started.items():
        if leg in abandoned:
            continue
        try:
            legs[leg] = _outcome(task)
        except Exception as error:
            _leg_failed(deps, leg, error)
            state.degrade(f"{leg.split(':')[0]}:store_error")
    return legs


def _leg_failed(deps: WorkflowDeps, leg: str, error: Exception) -> None:
    """Log a store leg's failure: a store unavailable without its traceback (its message says
    why), any other error with it; each leg and error kind at most once per ``LogLimit.every_s``
    (every request's legs fail while a store is down; the responses' degraded tags say so each
    time), the others at DEBUG."""
    kind = type(error).__name__
    if not deps.log_limit.due((leg.split(":")[0], kind)):
        log.debug("retrieval leg %s failed: %s: %s", leg, kind, error)
    elif isinstance(error, Unavailable):
        log.warning("retrieval leg %s failed: %s (logged once per %.0f s per leg and error kind)", leg, error, deps.log_limit.every_s)
    else:
        log.error("retrieval leg %s failed (logged once per %.0f s per leg and error kind)", leg, deps.log_limit.every_s, exc_info=error)


def _collect_graph(search: asyncio.Future[Any], state: QueryState, deps: WorkflowDeps, legs: dict[str, list[VectorHit]]) -> dict[str, Any]:
    """The graph leg's hits join the legs; a graph failure drops the leg and is reported."""
    try:
        hits, matches, trace = _outcome(search)
    except Exception as error:
        _leg_failed(deps, "graph", error)
        state.degrade("graph:store_error")
        return {}
    if hits:
        legs["graph"] = hits
    state.metrics.graph = trace
    return {"entity_matches": matches, "entity_matches_version": trace.graph_version}


async def _metadata_leg(docs: list[tuple[str, float]], deps: WorkflowDeps, legs: dict[str, list[VectorHit]]) -> list[VectorHit]:
    """Documents whose title or metadata matched, each as its best-scored retrieved chunk (or its
    first), one of each version found. While a document is replaced its chunks have a point of
    each version, and only enrich knows which is committed: one picked here could be the
    uncommitted one, which enrich drops, and the document would be missing from the answer."""
    best: dict[tuple[str, str], VectorHit] = {}
    for hits in legs.values():
        for h in hits:
            key = (h.document_id, h.version)
            if key not in best or h.score > best[key].score:
                best[key] = h
    found: dict[str, list[VectorHit]] = {}
    for h in best.values():
        found.setdefault(h.document_id, []).append(h)
    missing = [f"{d}#p0c0" for d, _ in docs if d not in found]
    for h in await deps.vectors.get_chunks(missing) if missing else []:
        found.setdefault(h.document_id, []).append(h)
    return [hit.scored(score) for doc_id, score in docs for hit in found.get(doc_id, ())]


def _leg_weight(leg: str, state: QueryState, deps: WorkflowDeps, fusion: Fusion, dense_shares: dict[str, float]) -> float:
    s, w = deps.settings, state.leg_weights
    kind = leg.split(":")[0]
    # Children, parents and documents are granularities of one dense signal: they share its weight
    # (parent_leg.dense_shares). ADAPTIVE's balance multiplies on top.
    dense = kind in DENSE_GRANULARITIES
    adaptive = w.dense * dense_shares[kind] if dense else {"keyword": w.keyword}.get(kind, 1.0)
    # Under RRF the metadata and graph legs count relative to the strongest vector leg.
    relative = {"metadata": s.metadata_weight, "graph": s.graph_weight}
    if fusion is Fusion.RRF:
        return relative[kind] / max(s.semantic_weight, s.keyword_weight, 1e-9) if kind in relative else adaptive
    return adaptive * (s.semantic_weight if dense else {"keyword": s.keyword_weight, **relative}[kind])


async def fuse(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    fusion = state.options.fusion or deps.settings.fusion
    legs = [(leg, hits) for leg, hits in state.legs.items() if hits]
    if deps.settings.dense_fusion == "max_cosine":
        legs = dense_fusion.fold_granularities(legs)
    legs = query_windows.fold(legs, deps.settings, state.pool)
    # The whole pool survives fusion: top_k parents need up to pool child hits; rerank takes its own cut.
    if len(legs) == 1:
        # One list: fusion would only rescale; the leg's own scores (cosine, BM25) mean more to callers.
        return {"fused": legs[0][1][: state.pool]}
    granularities = {leg.split(":")[0] for leg, _ in legs} & set(DENSE_GRANULARITIES)
    shares = parent_leg.dense_shares(granularities, word_count(state.analysis.rewritten or state.options.query), deps.settings.document_crossover_words)
    by_parent = rank_fusion.fuses_by_parent(state.long_query, deps.settings)
    fused = rank_fusion.fuse_lists(
        [hits for _, hits in legs], [_leg_weight(leg, state, deps, fusion, shares) for leg, _ in legs], deps.settings, fusion, state.pool,
        by_parent=by_parent,
    )
    if not by_parent:
        # Fused per parent, a parent's children share its score: adding a sibling's score would count
        # the same evidence twice.
        fused = document_evidence.rescore(fused, deps.settings.document_evidence)
    return {"fused": fused}


async def rerank(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    if not state.fused:
        return {"reranked": [], "rerank_applied": False}
    if not state.options.rerank:
        return {"reranked": state.fused, "rerank_applied": False}
    if deps.reranker is None:
        state.degrade("rerank:unavailable")
        return {"reranked": state.fused, "rerank_applied": False}
    within = _time_for_rerank(state, deps)
    limit = _rerank_limit(state, deps, within)
    if limit is None:
        return {"reranked": state.fused, "rerank_applied": False}
    candidates = state.fused[:limit]
    texts = [c.content for c in candidates]
    query = state.analysis.rewritten or state.options.query
    # The measured rate may promise what a slow or frozen server does not keep: the time left is
    # also a bound on the call itself.
    bound = asyncio.timeout(within)
    try:
        async with bound:
            scores, degraded = await scores_reporting(deps.reranker, query, texts)
            if degraded:
                state.degrade(degraded)
    except Exception as error:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the request is being cancelled: a reranker that turned that into an error must not hide it
        # Each request's, while TEI is down or frozen: its breaker logs when it opens and closes.
        if bound.expired():
            log.debug("reranking had not answered within its %.0f ms of the time left; keeping the fused order", (within or 0) * 1e3)
            state.degrade("deadline:rerank_skipped")
        else:
            if isinstance(error, TeiError):
                log.debug("reranking failed; keeping the fused order: %s", error, exc_info=not refused_by_breaker(error))
            elif deps.log_limit.due(("rerank", type(error).__name__)):
                # The local model's, which no breaker speaks for: it may fail every call (a broken export).
                log.error("reranking failed; keeping the fused order (logged once per %.0f s per error kind)", deps.log_limit.every_s, exc_info=True)
            else:
                log.debug("reranking failed; keeping the fused order: %s: %s", type(error).__name__, error)
            state.degrade("rerank:failed")
        return {"reranked": state.fused, "rerank_applied": False}
    # When none passes, every candidate goes on best first: RERANK_FALLBACK counts contexts, which
    # only enrich tells apart (the best three hits are often siblings, one context, or copies of one
    # section, which enrich makes one), so enrich stops at that many (_context_count).
    # Ranked in float64, not in the kernels' float32 (threshold_with_fallback): the sigmoid of every
    # logit above ~17 is 1.0 in float32, and those candidates kept the fused order, not the reranker's.
    exact = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-exact, kind="stable")
    kept = order[exact[order] >= state.rerank_threshold]
    fell_back = not kept.size
    if fell_back:
        kept = order
    return {"reranked": [candidates[i].scored(float(scores[i])) for i in kept], "rerank_applied": True, "rerank_fell_back": fell_back}


def _answer_worth(hits: Sequence[VectorHit], top_k: int) -> int:
    """How many of the first ``hits`` hold ``top_k`` parents of distinct texts (all of them, when
    fewer do), as enrich counts contexts. A parent is told by its first hit's text: copies of one
    section have the same children. Two sections sharing a child's text count as one here, which
    only has more candidates scored."""
    parents: set[str] = set()
    texts: set[int] = set()
    for i, (hit, text) in enumerate(zip(hits, content_hashes([h.content for h in hits]).tolist())):
        if hit.parent_chunk_id not in parents:
            parents.add(hit.parent_chunk_id)
            texts.add(text)
            if len(texts) == top_k:
                return i + 1
    return len(hits)


def _rerank_limit(state: QueryState, deps: WorkflowDeps, within: float | None) -> int | None:
    """RERANK_CANDIDATES, or fewer when the time budget holds fewer at the model's measured rate;
    never fewer than the hits that hold top_k parents of distinct texts (an answer's worth is always scored). The request's
    deadline is a budget too (``within`` seconds, :func:`_time_for_rerank`), one that does not
    stretch: when none is left, or it holds fewer than top_k, nothing is reranked (None) and the
    fused order stands, which beats no answer."""
    if within is not None and within <= 0:
        state.degrade("deadline:rerank_skipped")
        return None
    # At least an answer's worth: a top_k past RERANK_CANDIDATES (or parents of several hits each)
    # was cut to the parents of RERANK_CANDIDATES hits, 50 contexts for a top_k of 60.
    least = _answer_worth(state.fused, state.options.top_k)
    limit, budget = max(least, min(deps.settings.rerank_candidates, len(state.fused))), deps.settings.rerank_budget_ms
    rate: ScoringRate | None = getattr(deps.reranker, "rate", None)
    if rate is None:
        return limit
    fits = None if within is None else rate.pairs_within(within * 1e3)
    if fits is not None and fits < limit:
        if fits < least:
            state.degrade("deadline:rerank_skipped")
            return None
        state.degrade("deadline:rerank_capped")
        limit = fits
    fits = rate.pairs_within(budget) if budget > 0 else None
    if fits is None or max(fits, least) >= limit:
        return limit
    state.degrade("rerank:budget")
    return max(fits, least)


def _time_for_rerank(state: QueryState, deps: WorkflowDeps) -> float | None:
    """Seconds reranking may take: half the time left, and no more than leaves enrichment half the
    deadline reserve (None: no deadline; ≤ 0: none). Like analysis, reranking only improves an
    answer; a frozen reranker must not take the time its answer needs."""
    left = state.time_left()
    return None if left is None else min(left / 2, left - deps.settings.deadline_reserve_ms / 2e3)


async def enrich(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    """Small-to-big: child hits under their parents; the top_k parents and their documents fetched
    in one batch each.

    Only hits of each document's committed version count: a point written for a version whose rows
    are not (yet, or any more) committed is never shown. The documents fetched for the top_k
    parents carry their versions, so these are checked first: when every hit of those parents is
    current, dropping stale hits elsewhere could only lower other parents (a parent scores its best
    child), so the answer is the same and the versions of the whole candidate pool (hundreds of
    documents at top_k 100) need not be read. Otherwise they are, and every stale hit is dropped
    before grouping. Rows read grow with top_k, not with the pool (top_k x 8 hits), and with the
    copies of one text, which are read past in batches of 8, 16, 32, ... parents.

    Each document is checked against the caller's filter as read here: the graph and metadata
    legs choose chunks under the filter but read them by id, so a document made private between
    the two reads comes back as its new, current version.
    """
    if not state.reranked:
        return {"contexts": [], "search_again": False}
    top_k, fell_back = _context_count(state, deps), state.rerank_applied and state.rerank_fell_back
    access = state.point_filter.access
    found = await _contexts(state.reranked, top_k, access, deps, stale_aborts=True, fell_back=fell_back)
    if found is not None:
        return {"contexts": found[0], **_wider_pool(state, top_k, *found)}
    stored = await _with_retries(
        deps, "documents", lambda: deps.metadata.document_versions(list({h.document_id for h in state.reranked}))
    )
    versions = {d: version_of(content_hash) for d, content_hash in stored.items()}
    current = [h for h in state.reranked if h.document_id in versions and h.version == versions[h.document_id]]
    found = await _contexts(current, top_k, access, deps, stale_aborts=False, fell_back=fell_back) if current else None
    contexts, copies = found or ([], False)
    if replaced_since_searched(state.reranked, versions) and not state.searched_again:
        return {"contexts": contexts, "search_again": True, "searched_again": True}
    return {"contexts": contexts, **_wider_pool(state, top_k, contexts, copies)}


def _wider_pool(state: QueryState, wanted: int, contexts: list[RetrievedContext], copies: bool) -> dict[str, Any]:
    """Searched again with a wider pool when copies of one text left fewer than ``wanted`` contexts
    and the legs had more (the pool was filled), as Search does, up to :data:`HITS_PER_RESULT` hits a
    context. Only when every candidate reached enrich: fewer that the reranker's threshold left
    would be as few among the next candidates. Not after the sub-queries, whose hits a search of
    the main query alone would drop."""
    cap = state.options.top_k * HITS_PER_RESULT
    if not copies or len(contexts) >= wanted or state.sub_queries_done or state.pool >= cap:
        return {"search_again": False}
    if len(state.fused) < state.pool or len(state.reranked) < len(state.fused):
        return {"search_again": False}
    return {"search_again": True, "pool": min(state.pool * _WIDER_POOL, cap)}


def _context_count(state: QueryState, deps: WorkflowDeps) -> int:
    """top_k, or RERANK_FALLBACK when fewer and no reranked candidate reached the threshold."""
    if state.rerank_applied and state.rerank_fell_back:
        return min(state.options.top_k, deps.settings.rerank_fallback)
    return state.options.top_k


def replaced_since_searched(hits: Sequence[VectorHit], versions: dict[str, str]) -> bool:
    """Whether a document is stored at a version none of its hits is of: replaced since the search,
    its new version never searched, it would be missing from the answer. (A document with a hit of
    its stored version as well is in the answer: the other hits are a write's in flight, or points
    a failed write left, which another search would find again.)"""
    stale = {h.document_id for h in hits if h.document_id in versions and h.version != versions[h.document_id]}
    return bool(stale - {h.document_id for h in hits if h.version == versions.get(h.document_id)})


async def _contexts(
    hits: list[VectorHit], top_k: int, access: AccessFilter, deps: WorkflowDeps, *, stale_aborts: bool, fell_back: bool = False
) -> tuple[list[RetrievedContext], bool] | None:
    """The best ``top_k`` parents of ``hits`` with their documents, of those ``access`` may read, and
    whether a copy was skipped. A parent whose hits are not all of its document's stored version:
    None when ``stale_aborts``, else skipped (replaced between the reads). A parent with the text of
    one already taken (case and white space aside) is skipped: the best of identical sections
    stands for all. ``fell_back``: ``hits`` are reranked candidates best first, none of which
    reached the threshold, and a context's evidence is its hits ranked up to the last context's
    best, where the fallback's count was reached."""
    codes: dict[str, int] = {}
    parent_codes = np.fromiter((codes.setdefault(h.parent_chunk_id, len(codes)) for h in hits), dtype=np.int64, count=len(hits))
    parent_ids = list(codes)
    grouped = group_by_parent(parent_codes, np.fromiter((h.score for h in hits), dtype=np.float32, count=len(hits)), len(parent_ids))
    ranked = [parent_ids[p] for p in grouped.parents.tolist()]
    offsets, children = grouped.offsets.tolist(), grouped.children.tolist()
    contexts: list[tuple[int, ParentChunk, Document]] = []
    # Each document at the version its first read found: a replacement committed between two
    # batches would otherwise put both versions in one answer (and the old one in the cache).
    versions: dict[str, str] = {}
    # Among readable, current parents only: a twin the caller may not read must not take its
    # readable twins' place. Ten documents holding one page would otherwise fill top_k with it.
    taken: set[int] = set()
    copies = False
    start, floor = 0, 0
    while len(contexts) < top_k and start < len(ranked):
        # A parent can vanish between the reads (its document replaced or deleted) or be a copy of
        # one taken: then the next ones are fetched, at least twice as many each time, so that a run
        # of copies costs a few round trips, not one a parent.
        wanted = ranked[start : start + max(top_k - len(contexts), floor)]
        floor = max(_PARENTS_READ_AGAIN, 2 * floor)
        # One snapshot: a replacement committed between two reads would pair one version's parent
        # text with the other's document (its version and its access).
        parents, documents = await _with_retries(deps, "parents", lambda: deps.metadata.get_parents_and_documents(wanted))
        texts = dict(zip(parents, content_hashes([p.content for p in parents.values()]).tolist()))
        for rank, pid in enumerate(wanted, start=start):
            parent = parents.get(pid)
            document = documents.get(parent.document_id) if parent is not None else None
            if parent is None or document is None or not access.allows(document):
                continue  # deleted, or no longer readable: none of its hits count
            kids = [hits[i] for i in children[offsets[rank] : offsets[rank + 1]]]
            version = document.version
            if any(h.version != version for h in kids) or versions.setdefault(document.document_id, version) != version:
                if stale_aborts:
                    return None
                continue
            if texts[pid] in taken:
                copies = True
                continue
            taken.add(texts[pid])
            contexts.append((rank, parent, document))
            if len(contexts) == top_k:
                break  # a read past copies holds more parents than are missing
        start += len(wanted)
    # The fallback's answer ends where its count was reached: a context's hits ranked past that
    # point are no part of what kept it (rerank cut them there until copies were told apart here).
    last = max((children[offsets[rank]] for rank, _, _ in contexts), default=0) if fell_back else len(hits)
    return [
        RetrievedContext(
            parent, document, float(grouped.parent_scores[rank]),
            tuple(ChildEvidence(hits[i].chunk_id, hits[i].content, hits[i].score) for i in children[offsets[rank] : offsets[rank + 1]] if i <= last),
        )
        for rank, parent, document in contexts
    ], copies


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -60 else 0.0


def sufficiency_score(state: QueryState, rerank_activation: str = "sigmoid") -> float:
    """0.3 × how many contexts (of top_k), 0.4 × mean relevance in [0, 1], 0.3 × document diversity.

    Reranked, relevance is the reranker's probability: its score, or with ``rerank_activation``
    "none" (raw logits) the score's sigmoid. Told apart by the setting, not by each score's range:
    a logit of 0.2 read as a probability would count for less than one of -0.2."""
    contexts = state.contexts[: state.options.top_k]
    if not contexts:
        return 0.0
    count = min(1.0, len(contexts) / state.options.top_k)
    if state.rerank_applied:
        raw = rerank_activation == "none"
        rel = [_sigmoid(c.score) if raw else min(1.0, max(0.0, c.score)) for c in contexts]
    else:
        rel = [
            min(1.0, max(0.0, max((state.dense_relevance.get(ch.chunk_id, 0.5) for ch in c.children), default=0.5)))
            for c in contexts
        ]
    diversity = len({c.document.document_id for c in contexts}) / len(contexts)
    return 0.3 * count + 0.4 * (sum(rel) / len(rel)) + 0.3 * diversity


async def check_sufficiency(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    score = sufficiency_score(state, deps.settings.rerank_activation)
    state.metrics.iterations = state.iteration
    best = state.best
    # The later pass answers: it searched a wider pool, or the caller's own words where an earlier
    # pass searched a rewrite (each pass's relevance is measured against the text it searched, so
    # an off-topic rewrite's hits score high). Unless it lost a leg or a stage on its way (the
    # deadline, a failure) and found less than an earlier pass did.
    # Nor does a pass that found nothing replace one that found something: the caller gets an
    # empty answer only when every pass had one.
    lost = any(_failed(tag) for tag in state.pass_degraded)
    if best is None or ((not lost or score >= best.sufficiency) and (state.contexts or not best.contexts)):
        best = _this_pass(state, score)
    state.metrics.sufficiency_score = best.sufficiency
    return {"sufficiency": score, "best": best, "pass_degraded": set()}


def _this_pass(state: QueryState, sufficiency: float) -> ScoredPass:
    # A pass that did not rerank did not fall back, whatever an earlier pass's rerank did.
    fell_back = state.rerank_applied and state.rerank_fell_back
    subs = tuple(state.analysis.sub_queries) if state.decomposed else ()
    return ScoredPass(
        sufficiency, state.contexts, state.fused, state.dense_relevance, state.strategy, state.metrics.graph, fell_back,
        state.decomposed, state.analysis.rewritten, subs,
    )


async def execute_sub_queries(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    """Every sub-query searched in parallel, its lists fused by RRF into one, which is fused by RRF
    with the main results: the best pass's, reranked against the text it searched and reported as
    it ran. The last pass may have lost a leg and found less than an earlier one, and the
    sub-queries' pass, which lost nothing of its own, would answer below that."""
    base = state.best or _this_pass(state, state.sufficiency)
    subs = state.analysis.sub_queries
    per = max(3, state.options.top_k // len(subs))
    flt = state.point_filter
    # Each search with whether it is a dense one, whose cosines count as relevance.
    jobs: list[tuple[bool, Callable[[], Awaitable[list[VectorHit]]]]] = []
    vectors: Sequence[np.ndarray] = []
    # As asked: the model may answer now though the main search's embedding failed.
    strategy = _runs_as(state.options.strategy)
    if _uses_dense(strategy):
        try:
            vectors = await deps.embedder.embed(subs)
        except Exception:
            log.warning("sub-query embedding failed; keyword search only", exc_info=True)
            state.degrade("dense:embedding_failed")
    for i, sub in enumerate(subs):
        if len(vectors):
            jobs.append((True, lambda v=vectors[i]: deps.vectors.search_dense(v, per, flt)))
        if strategy in (Strategy.KEYWORD, Strategy.HYBRID) or not len(vectors):
            # As the keyword leg searches (its term limit, the title field, RM3 when on): a part
            # only a title matches found nothing.
            jobs.append((False, lambda q=sub: keyword_leg.search(deps.vectors, deps.sparse, q, per, flt, deps.settings.keyword)))
    results = await asyncio.gather(*(_with_retries(deps, "sub-query", j) for _, j in jobs), return_exceptions=True)
    lists = [r for r in results if not isinstance(r, BaseException) and r]
    if any(isinstance(r, BaseException) for r in results):
        state.degrade("sub_queries:store_error")
    # Without a reranker their pass is scored by cosines: a context a sub-query found counts its
    # cosine with that sub-query.
    relevance = dict(base.relevance)
    for (dense, _), r in zip(jobs, results):
        if dense and not isinstance(r, BaseException):
            _record_cosines(relevance, r)
    if lists:
        # Flattened and deduplicated by rank, not by raw score: cosines (at most 1) and BM25 scores
        # (5-20) are on scales no comparison of the two means anything on. The sub-queries' list
        # then weighs as much as the main results, however many parts the query had.
        sub_hits = rank_fusion.fuse_lists(lists, [1.0] * len(lists), deps.settings, Fusion.RRF, state.pool)
        fused = rank_fusion.fuse_lists([base.fused, sub_hits], [1.0, 1.0], deps.settings, Fusion.RRF, state.pool)
    else:
        fused = base.fused
    state.metrics.graph = base.graph
    return {
        "fused": fused, "sub_queries_done": True, "decomposed": bool(lists), "dense_relevance": relevance, "strategy": base.strategy,
        "analysis": dataclasses.replace(state.analysis, rewritten=base.rewritten),
    }


async def select(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    # The best pass answers, reported as it ran. None scored (the deadline came first): what the
    # state holds is all there is, scored and counted here as check_sufficiency would have (the
    # deadline cut the search again that enrich asked for, copies having filled the pool: its
    # contexts were answered with iterations and a sufficiency of 0).
    best = state.best
    if best is None:
        best = _this_pass(state, sufficiency_score(state, deps.settings.rerank_activation))
        if best.contexts:
            state.metrics.iterations, state.metrics.sufficiency_score = state.iteration, best.sufficiency
    state.contexts, state.strategy, state.metrics.graph = best.contexts, best.strategy, best.graph
    state.metrics.rerank_fallback_triggered, state.metrics.decomposition_used = best.rerank_fell_back, best.decomposed
    state.metrics.rewritten_query, state.metrics.sub_queries = best.rewritten or "", list(best.sub_queries)
    state.metrics.strategy_used = state.strategy
    contexts = state.contexts[: state.options.top_k]
    suggestions: list[str] = []
    # Past the deadline an empty answer is DEADLINE_EXCEEDED: nothing would carry the suggestions.
    if not contexts and not state.cache_hit and PARTIAL_RESULTS not in state.metrics.degraded:
        suggestions = await _suggestions(state, deps)
    return {"contexts": contexts, "suggestions": suggestions}


async def _suggestions(state: QueryState, deps: WorkflowDeps) -> list[str]:
    """After expansion and relaxed thresholds found nothing: documents the caller may mean, then tips."""
    out: list[str] = []
    # Within the time left (the deadline already keeps the time to send the answer): an empty
    # answer with the hints below beats DEADLINE_EXCEEDED behind a slow full-text search.
    bound = asyncio.timeout(state.time_left())
    try:
        async with bound:
            found = await deps.metadata.search_documents(
                state.options.query, 3, state.point_filter.access, keep_stopwords=deps.settings.metadata_stopwords
            )
            documents = await deps.metadata.get_documents([doc_id for doc_id, _ in found])
        for doc_id, _ in found:
            # Read again after the search: a document made private in between is no longer the
            # caller's to hear of, title or id.
            doc = documents.get(doc_id)
            if doc is not None and state.point_filter.access.allows(doc):
                out.append(f"related document: {doc.title or doc_id}")
    except Exception:
        if bound.expired():
            state.degrade("deadline:suggestions_skipped")
        else:
            log.warning("suggestions: metadata search failed", exc_info=True)
    if state.options.document_ids:
        out.append("remove the document filter")
    if len(state.options.query.split()) > 6:
        out.append("use fewer, more specific words")
    if state.strategy is Strategy.GRAPH and not state.entity_matches:
        out.append("the GRAPH strategy needs a service, project, person or term the documents name; try HYBRID")
    out.append("try the KEYWORD strategy for exact names and codes" if state.strategy is not Strategy.KEYWORD else "try the SEMANTIC strategy for a described concept")
    return out


#: what only a failure leaves in a degradation tag: a leg's ``store_error``, a failed embedding or
#: rerank (``rerank:tei_failed_used_local`` too), an analysis technique that timed out, failed or
#: fell back (``analysis:rewrite:llm_failed_used_classical``), whatever the deadline cut (``deadline:*``).
#: The server's configuration (no reranker, HyDE without an LLM) leaves none.
_FAILURE_MARKS = ("failed", "timeout", "store_error", "deadline:")
#: cuts that the machine's load decides, though the configuration asks for them: the rerank budget
#: caps candidates at the reranker's measured rate, queueing included, so an answer cut under a
#: load spike, cached, was served for the TTL after the load had gone
_LOAD_CUTS = ("rerank:budget",)
#: GENERATION's stages around the cache: they shape the request's answer, never the contexts cached
_NOT_CACHED_STAGES = ("router:", "tool:", "answer:")


def _failed(tag: str) -> bool:
    """Whether a failure or the deadline cut a leg or a stage of the pass: such a pass replaces an
    earlier one only when it scores no lower (check_sufficiency). Not a cut the load decided
    (:data:`_LOAD_CUTS`): the rerank budget asks for it."""
    return not tag.startswith(_NOT_CACHED_STAGES) and any(mark in tag for mark in _FAILURE_MARKS)


def _transient(tag: str) -> bool:
    """Whether a passing failure or load shaped the contexts: asked again once it has passed, the
    request retrieves anew instead of being served them for the cache's TTL."""
    return _failed(tag) or tag in _LOAD_CUTS


def describes_answer(tag: str) -> bool:
    """Whether a degradation tag describes the contexts, whoever is served them (no reranker, a
    query of stop words, an analysis technique the server cannot run): a cached answer keeps it,
    and each hit reports it again. Not a passing failure or load (whose answer is not cached), nor
    what the stages around the cache, the cache itself, or the response's cut to size did to one
    request."""
    return not tag.startswith((*_NOT_CACHED_STAGES, "cache:", "response:")) and not _transient(tag)


def _graph_version_used(state: QueryState) -> str | None:
    """The graph's version, when the answer's graph trace names what the graph held: its matches
    and hops, reported again with each hit, and the contexts its relations brought in may come from
    documents the answer does not cite, which a delete or a changed grant leaves unreadable."""
    trace = state.metrics.graph
    return trace.graph_version if trace is not None and (trace.matches or trace.hops) else None


def _report(m: QueryMetrics) -> PassReport:
    """What select reported of the answering pass, for its hits to report again."""
    return PassReport(
        m.sufficiency_score, m.rerank_fallback_triggered, m.decomposition_used, m.rewritten_query, tuple(m.sub_queries), m.graph,
        tuple(tag for tag in m.degraded if describes_answer(tag)),
    )


async def update_cache(state: QueryState, deps: WorkflowDeps) -> dict[str, Any]:
    if deps.cache is None or not state.options.use_cache or state.cache_hit or not state.contexts:
        return {}
    if any(_transient(tag) for tag in state.metrics.degraded):
        return {}  # a partial or failure-shaped answer must not be served to the next callers
    if "cache:unavailable" in state.metrics.degraded:
        return {}  # its lookup failed: waiting on it again would add its timeout to this answer
    access = state.point_filter.access
    if not all(access.allows(c.document) for c in state.contexts):
        # Cannot happen while every leg applies the filter; if it ever does, never spread it further.
        log.error("an answer cites a document outside its access filter; not cached")
        return {}
    # Keyed by the caller's query, by its text and its own vector: the query_vector retrieve used
    # is the rewritten query's when analysis rewrote it, which a later caller's query is never
    # compared with. Without a vector of its own (an embedding failed), with one of its first
    # tokens only, or for KEYWORD (see _matched_by_vector), the entry matches exactly only.
    vector = state.own_query_vector() if _matched_by_vector(state, deps) else None
    # Within the lookups' bound: the answer is ready, and a slow store (Redis's writes paused for
    # a failover) must not turn it into DEADLINE_EXCEEDED.
    try:
        await _cache_call(_cache_until(state), deps.cache.store(
            state.options.query, vector, cache_config(state.options), access.partition,
            CachedAnswer(tuple(state.contexts), state.strategy, graph_version=_graph_version_used(state), report=_report(state.metrics)),
        ))
    except CacheUnavailable as exc:
        log.debug("cache unavailable: %s", exc)  # as check_cache's
        state.degrade("cache:unavailable")
    except _CacheTimeLeft:
        state.degrade("deadline:cache_store_skipped")
    return {}
