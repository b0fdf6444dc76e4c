"""Composition root: builds the backends from settings and owns their lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from pathlib import Path
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import cached_property
from typing import TYPE_CHECKING

import scoring_core
from retrieval_server import model_loading
from retrieval_server.backends import model_choice
from retrieval_server.backends.disk import MIB, DiskSpace, copy_for_reading, estimated_bytes, opening_bytes
from retrieval_server.backends.embedder import BUNDLED_TOKENIZER, OnnxEmbedder
from retrieval_server.backends.executor import BACKGROUND_NICE, BlockingExecutor
from retrieval_server.backends.file_digest import cached_sha256, sha256_hex
from retrieval_server.backends.metadata_store import EMBEDDING_MODEL, MetadataStore
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.backends.minilm_fp32 import INSTALL, default_cache_dir
from retrieval_server.backends.sparse import TERMS_REVISION, Bm25Encoder
from retrieval_server.backends.vector_store import IndexFeatures, SearchPolicy, VectorStore
from retrieval_server.backends.vector_store.edge import EdgeVectorStore
from retrieval_server.config import Settings, answer_fingerprint
from retrieval_server.domain import (
    LOCAL_OPERATOR,
    AccessFilter,
    ComponentHealth,
    ComponentState,
    DocumentSource,
    HealthReport,
    Identity,
    IngestedDocument,
    IngestReport,
    ReadOnly,
    ResourceExhausted,
    Unavailable,
)
from retrieval_server.ingest.chunker import Chunker, ChunkSizes
from retrieval_server.ingest.graph_extraction import ClassicalGraphExtractor, GraphExtractor, LlmGraphExtractor
from retrieval_server.ingest.indexer import Indexer, sweep_abandoned_writes, to_the_end
from retrieval_server.observability.analytics import Analytics
from retrieval_server.observability.metrics import ServiceMetrics
from retrieval_server.observability.tracing import Tracing
from retrieval_server.backends.cache import CachePolicy, CacheUnavailable, GuardedCache, MemoryCache, SemanticCache
from retrieval_server.backends.circuit_breaker import CircuitBreaker
from retrieval_server.backends.reranker import FallbackReranker, MeasuredReranker, OnnxReranker, Reranker, TeiReranker
from retrieval_server.domain import Fusion
from retrieval_server.backends.llm import PROVIDERS, ChatModel
from retrieval_server.workflow.adaptive import TermStatistics
from retrieval_server.workflow.analysis import load_glossary

if TYPE_CHECKING:
    # The query workflow is imported when the pipeline is built (Application.pipeline).
    from retrieval_server.backends.events import RabbitMqPublisher
    from retrieval_server.backends.redis_cache import RedisCache
    from retrieval_server.observability.log_limit import LogLimit
    from retrieval_server.workflow.analysis import Analyzer
    from retrieval_server.workflow.assistant import Assistant
    from retrieval_server.workflow.knowledge_graph import KnowledgeGraph
    from retrieval_server.workflow.pipeline import QueryPipeline
    from retrieval_server.workflow.state import WorkflowSettings

log = logging.getLogger(__name__)

#: seconds a Health probe of a store or the cache waits for its ping, when the caller allows that long
_PING_TIMEOUT_S = 5.0
#: the most a Health call keeps of its caller's deadline, after its probes' bound, to send the
#: report. Wider than a query's :data:`~retrieval_server.domain.SEND_MARGIN_S`: a probe needs no
#: 50 ms precision, and on a loaded machine 50 ms to wake from the bound and send was too little,
#: the caller got DEADLINE_EXCEEDED instead of the report saying which store does not answer.
_HEALTH_SEND_MARGIN_S = 1.0
#: whether an identity provider's signing keys are held, and why none are or what failed
#: (:meth:`retrieval_server.api.tokens.JwksUrl.health`), fetching them within the seconds given
#: when none are
SigningKeys = Callable[[float], Awaitable[tuple[bool, str | None]]]
#: index_info key: whether the index embeds its children with their titles (contextual children)
CHILD_TITLE_INFO = "child_title"


def _health_send_margin(time_left_s: float) -> float:
    return min(_HEALTH_SEND_MARGIN_S, max(time_left_s, 0.0) / 4)


def metadata_store_for(s: Settings) -> MetadataStore:
    """MySQL/MariaDB when a DSN is set, else SQLite in the data directory (not opened yet)."""
    if s.mysql_dsn:
        from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore  # asyncmy only when configured

        return MysqlMetadataStore(s.mysql_dsn, s.mysql_pool_size, read_only=s.read_only, timeout_s=s.mysql_timeout_s)
    return SqliteMetadataStore(s.data_dir / "metadata.sqlite3", read_only=s.read_only)


class Application:
    """Everything a server or a CLI command needs, opened and closed together."""

    def __init__(self, settings: Settings, tracing: Tracing | None = None, *, model: model_loading.ModelLoading | None = None) -> None:
        """``model``: the configured model's session, already being made (``model_loading.start``); else started here."""
        self.settings = settings
        # First, so that the session is made while everything else is built and opened.
        model = model or model_loading.start(settings)
        self.metrics = ServiceMetrics()
        self.tracing = tracing or Tracing.from_settings(settings.traces_exporter)
        traced = self.tracing.wrap
        self.executor = BlockingExecutor(settings.workers)
        # Ingestion's parsing, chunking and graph extraction on a thread of their own: a job cannot be
        # interrupted, and on the shared pool two files slow to read (a PDF whose pages share one
        # large content stream) held both threads while queries' engine calls waited behind them.
        self.ingest_work = BlockingExecutor(1, name="ingest")
        # Model runs get their own lanes: each run already uses every intra-op thread, so running
        # more at once than there are lanes only oversubscribes the cores and lowers throughput.
        self.inference = BlockingExecutor(settings.inference_lanes, name="inference")
        # Ingestion's model runs while queries come: one more lane, its session on one thread, at the
        # lowest scheduling priority, so that a query's model run keeps the core they share.
        self.inference_beside = BlockingExecutor(1, name="inference-beside", nice=BACKGROUND_NICE)
        # Without a model folder the index says which MiniLM build embeds it: chosen in open().
        files = model.files if model else None
        self.model_choice: model_choice.ModelChoice | None = None
        # The tracer copies these per call, so the span names the model open() binds.
        self._embedder_attributes = {"retrieval.model": files.model_id if files else ""}
        self.embedder = traced(OnnxEmbedder(
            files,
            self.inference,
            max_length=settings.max_seq_length,
            batch_size=settings.embed_batch_size,
            threads=settings.embed_threads,
            beside=self.inference_beside,
            loading=model.encoder if model else None,
        ), "embedder", self._embedder_attributes)
        self.sparse = Bm25Encoder()
        self.disk = DiskSpace.of(self._embedded_paths(), settings.min_free_disk_mb)
        self.vectors = traced(self._vector_store(), "vector_store", {"db.system.name": "qdrant"})
        self.metadata = traced(self._metadata_store(), "metadata_store", {"db.system.name": settings.metadata_backend})
        with model_loading.naming_the_setting(settings):
            self.chunker = Chunker(
                str(files.tokenizer_path if files else BUNDLED_TOKENIZER),
                ChunkSizes(settings.parent_chunk_tokens, settings.child_chunk_tokens, settings.child_overlap_tokens),
            )
        self.chat_models: dict[str, ChatModel] = {}
        #: the circuit breakers of the optional dependencies, by Health component: an open one
        #: (the dependency kept failing) is what Health reports, without calling the dependency
        self._breakers: dict[str, list[tuple[str, CircuitBreaker]]] = {}
        self.indexer = Indexer(
            self.chunker, self.embedder, self.sparse, self.vectors, self.metadata, self.ingest_work,
            batch_children=settings.upsert_batch_size, embed_piece=settings.embed_batch_size,
            max_document_bytes=settings.max_document_bytes, disk=self.disk, graph=self._graph_extractor(),
            glossary=self._glossary_digest(), title_weight=settings.title_weight, query_jobs=self.inference.query_jobs,
            child_title=settings.child_title, model_tokens=settings.max_seq_length,
        )
        self.reranker = self._reranker()
        self._redis_cache: RedisCache | None = None
        self.cache = traced(self._cache(), "cache", {"db.system.name": "redis" if settings.cache_backend == "redis" else "memory"})
        self.term_stats = TermStatistics()
        self.events = self._events() if settings.events_url else None
        self.analytics = Analytics(self.events, settings.events_query, settings.events_hash_key, traced=self.tracing.enabled)
        self._optimize_task: asyncio.Task[None] | None = None
        self._sweep_task: asyncio.Task[None] | None = None
        self._cleanup_task: asyncio.Task[None] | None = None
        self._optimize_again = False
        #: why each store's last health probe failed, as logged: said when it changes, not at every probe
        self._health_problems: dict[str, str] = {}
        #: set by the server whose tokens are verified with a JWKS URL's keys: Health's ``auth``
        #: component asks it (the settings alone said OK with no key to verify a token with)
        self.signing_keys: SigningKeys | None = None
        #: one future per ingest or delete in progress, done when it ends (close waits for them)
        self._writes: set[asyncio.Future[None]] = set()
        #: set when open() fails or is cancelled: the kernels' warm-up ends before its next kernel,
        #: rather than keep the stop (which waits for the job) through all of a first compile
        self._stop_warming = threading.Event()
        self._closed = False

    @cached_property
    def graph(self) -> KnowledgeGraph:
        from retrieval_server.workflow.knowledge_graph import KnowledgeGraph

        return KnowledgeGraph(self.metadata, self.executor, fuzzy_threshold=self.settings.graph_fuzzy_threshold, max_matches=self.settings.graph_max_neighbors)

    @cached_property
    def pipeline(self) -> QueryPipeline:
        """The query workflow, built when first asked for: a server builds it before it opens the
        application (``server.start_server``), and a command that only ingests never imports it
        (about 22 ms)."""
        from retrieval_server.observability.log_limit import LogLimit
        from retrieval_server.workflow.pipeline import QueryPipeline
        from retrieval_server.workflow.state import WorkflowDeps

        log_limit = LogLimit()
        return QueryPipeline(
            WorkflowDeps(
                embedder=self.embedder,
                sparse=self.sparse,
                vectors=self.vectors,
                metadata=self.metadata,
                analyzer=self._analyzer(),
                reranker=self.reranker,
                cache=self.cache,
                settings=self.workflow_settings(self.settings),
                graph=self.graph,
                assistant=self._assistant(log_limit),
                log_limit=log_limit,
                term_stats=self.term_stats,
                query_windows=self.chunker.child_texts,
                count_tokens=self.chunker.count,
            ),
            search_text_chars=self.settings.search_text_chars,
            observer=self.tracing.stage_observer(),
        )

    @staticmethod
    def workflow_settings(s: Settings) -> WorkflowSettings:
        from retrieval_server.workflow.dense_feedback import DenseFeedback
        from retrieval_server.workflow.keyword_leg import KeywordOptions
        from retrieval_server.workflow.state import WorkflowSettings

        return WorkflowSettings(
            child_candidates_per_context=s.child_candidates_per_context,
            fusion=Fusion(s.fusion),
            rrf_k=s.rrf_k,
            semantic_weight=s.semantic_weight,
            keyword_weight=s.keyword_weight,
            metadata_weight=s.metadata_weight,
            score_normalization=s.score_normalization,
            fusion_unit=s.fusion_unit,
            child_chunk_tokens=s.child_chunk_tokens,
            model_tokens=s.max_seq_length,
            long_query_windows=s.long_query_windows,
            query_max_windows=s.query_max_windows,
            rerank_candidates=s.rerank_candidates,
            rerank_budget_ms=s.rerank_budget_ms,
            rerank_threshold=s.rerank_threshold,
            rerank_fallback=s.rerank_fallback,
            rerank_activation=s.rerank_activation,
            sufficiency_threshold=s.sufficiency_threshold,
            max_iterations=s.max_iterations,
            retry_pool_factor=s.retry_pool_factor,
            analysis_timeout_s=s.analysis_timeout_s,
            analysis_total_timeout_s=s.analysis_total_timeout_s,
            store_retries=s.store_retries,
            store_backoff_s=s.store_backoff_s,
            deadline_reserve_ms=s.deadline_reserve_ms,
            graph_expansion=s.graph_expansion,
            graph_hop_penalties=tuple(s.graph_hop_penalties),
            graph_max_chunks_per_hop=s.graph_max_chunks_per_hop,
            graph_max_neighbors=s.graph_max_neighbors,
            graph_weight=s.graph_weight,
            tool_timeout_s=s.tool_timeout_s,
            router_timeout_s=s.llm_timeout_s,
            answer_max_sentences=s.answer_max_sentences,
            answer_min_similarity=s.answer_min_similarity,
            answer_max_tokens=s.answer_max_tokens,
            answer_timeout_s=s.answer_timeout_s,
            parent_leg=s.parent_leg,
            document_leg=s.document_leg,
            dense_fusion=s.dense_fusion,
            document_crossover_words=s.document_crossover_words,
            document_evidence=s.document_evidence,
            metadata_stopwords=s.metadata_stopwords,
            keyword=KeywordOptions(
                titled=s.keyword_title_field,
                max_terms=s.query_max_terms,
                prf_docs=s.prf_docs,
                prf_terms=s.prf_terms,
                prf_query_weight=s.prf_query_weight,
            ),
            dense_feedback=DenseFeedback(docs=s.dense_prf_docs, weight=s.dense_prf_weight),
        )

    def _chat(self, technique: str) -> ChatModel | None:
        """The chat model a technique uses (one client per provider), or None."""
        s = self.settings
        provider = s.technique_provider(technique)
        if provider == "none":
            return None
        if provider not in self.chat_models:
            self.chat_models[provider] = PROVIDERS[provider](
                getattr(s, f"{provider}_base_url"),
                getattr(s, f"{provider}_model"),
                getattr(s, f"{provider}_api_key"),
                timeout_s=s.llm_timeout_s,
                max_retries=s.llm_max_retries,
                backoff_s=s.llm_backoff_s,
                breaker=self._breaker("llm", provider),
            )
        model: ChatModel = self.tracing.wrap(
            self.chat_models[provider], "llm", {"gen_ai.system": provider, "gen_ai.request.model": getattr(s, f"{provider}_model")}
        )
        return model

    def _graph_extractor(self) -> GraphExtractor | None:
        s = self.settings
        if not s.graph_enabled:
            return None
        classical = ClassicalGraphExtractor(load_glossary(s.glossary_path), self.ingest_work)
        model = self._chat("graph")
        return LlmGraphExtractor(model, classical, temperature=s.llm_graph_temperature) if model else classical

    def _assistant(self, log_limit: LogLimit) -> Assistant:
        from retrieval_server.workflow.assistant import Assistant
        from retrieval_server.workflow.routing import LlmRouter, Router, RuleRouter
        from retrieval_server.workflow.tools import TOOLS

        s = self.settings
        tools = dict(TOOLS)
        router_model = self._chat("router")
        router: Router = LlmRouter(router_model, tools, RuleRouter(), s.llm_router_temperature, log_limit) if router_model else RuleRouter()
        return Assistant(router, tools, self._chat("answer"), s.llm_answer_temperature)

    def _analyzer(self) -> Analyzer:
        """LLM-backed techniques where a provider is configured; classical methods everywhere else."""
        from retrieval_server.workflow.analysis import ClassicalAnalyzer, LlmAnalyzer, TechniqueModel

        s = self.settings
        classical = ClassicalAnalyzer(load_glossary(s.glossary_path))
        models = {}
        for technique in ("rewrite", "reformulate", "hyde", "decompose"):
            model = self._chat(technique)
            if model is not None:
                models[technique] = TechniqueModel(model, getattr(s, f"llm_{technique}_temperature"))
        return LlmAnalyzer(models, classical, query_max_bytes=s.query_max_bytes) if models else classical

    def _breaker(self, component: str | None = None, name: str = "") -> CircuitBreaker:
        """A breaker; one of a Health ``component`` (with its ``name``) is reported by :meth:`_tripped`."""
        breaker = CircuitBreaker(self.settings.breaker_failures, self.settings.breaker_cooldown_s,
                                 name=f"{component or 'cache'} ({name})" if name else component or "cache")
        if component is not None:
            self._breakers.setdefault(component, []).append((name, breaker))
        return breaker

    def _tripped(self, component: str) -> ComponentHealth | None:
        """The component as FAILING while one of its breakers is open, else None."""
        tripped = [name for name, breaker in self._breakers.get(component, ()) if breaker.is_open]
        if not tripped:
            return None
        return ComponentHealth(component, ComponentState.FAILING, False,
                               f"{', '.join(tripped)}: circuit open after repeated failures (answers degrade without it)")

    def _reranker(self) -> Reranker | None:
        """TEI when configured (backed by the local model if there is one), else the local model, else none."""
        s = self.settings
        local = (
            OnnxReranker(s.reranker_model_dir, self.inference, activation=s.rerank_activation, threads=s.embed_threads,
                         max_tokens=s.rerank_max_tokens)
            if s.reranker_model_dir
            else None
        )
        reranker: Reranker | None = local
        if s.tei_url:
            tei = TeiReranker(s.tei_url, timeout_s=s.tei_timeout_s, max_batch=s.tei_max_batch, raw_scores=s.rerank_activation == "none",
                              breaker=self._breaker("reranker", "tei"))
            reranker = FallbackReranker(tei, local) if local else tei
        # Traced inside: a span is a call to the model, not a pair served from memory.
        return MeasuredReranker(self.tracing.wrap(reranker, "reranker"), s.rerank_pair_cache) if reranker is not None else None

    def _events(self) -> RabbitMqPublisher:
        # Imported here: aio-pika is only needed when events are configured.
        from retrieval_server.backends.events import RabbitMqPublisher

        s = self.settings
        return RabbitMqPublisher(s.events_url, s.events_exchange, s.events_routing_key, self.metrics,
                                 buffer=s.events_buffer, buffer_bytes=s.events_buffer_mb * 2**20, publish_timeout_s=s.events_publish_timeout_s)

    def _cache(self) -> SemanticCache | None:
        s = self.settings
        if s.cache_backend == "none":
            return None
        policy = CachePolicy(s.cache_ttl_s, s.cache_similarity, s.cache_max_entries, s.cache_max_mb * 2**20)
        if s.cache_backend == "redis":
            from retrieval_server.backends.redis_cache import RedisCache

            redis = RedisCache(s.redis_url or "", self.embedder.dim, policy, prefix=self._redis_prefix(), timeout_s=s.cache_timeout_s)
            self._redis_cache = redis
            # Health probes the cache itself: its breaker is not what Health reports.
            return GuardedCache(redis, self._breaker(), s.cache_timeout_s)
        return MemoryCache(self.embedder.dim, policy)

    def _redis_prefix(self) -> str:
        """The Redis keys' namespace: what shapes answers. Without a model folder it holds no model
        until ``_choose_model`` binds one, which renames the cache's keys: int8 and fp32 indexes
        shared one namespace, and each was served the other's answers."""
        return f"{self.settings.redis_key_prefix}:{answer_fingerprint(self.settings, *self._answer_files())}"

    def _answer_files(self) -> tuple[str, str, str]:
        """The digests of the files that shape answers besides the settings: the embedding model's,
        the local reranker's and the glossary's (a path says nothing of what is in it); '' for none."""
        s = self.settings
        cache_dir = s.model_cache_dir or default_cache_dir()
        reranker = cached_sha256(s.reranker_model_dir / "model.onnx", cache_dir) if s.reranker_model_dir else ""
        return self.embedder.model_id, reranker, self._glossary_digest()

    def _glossary_digest(self) -> str:
        """The glossary's SHA-256 (a path says nothing of what is in it); '' for none."""
        return sha256_hex(self.settings.glossary_path) if self.settings.glossary_path else ""

    def _vector_store(self) -> VectorStore:
        s = self.settings
        policy = SearchPolicy(always_exact=s.exact_search, exact_max_points=s.exact_search_max_points, hnsw_ef=s.hnsw_ef)
        features = IndexFeatures(parent_vectors=s.parent_leg or s.document_leg, title_field=True)
        if s.vector_backend == "qdrant":
            # Imported here: qdrant-client takes seconds to import, which the embedded default never needs.
            from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore

            return QdrantVectorStore(
                s.qdrant_collection,
                self.embedder.dim,
                url=s.qdrant_url,
                path=s.qdrant_path,
                api_key=s.qdrant_api_key,
                ca=s.qdrant_ca,
                timeout_s=s.qdrant_timeout_s,
                policy=policy,
                features=features,
                read_only=s.read_only,
                executor=self.executor,
            )
        read_copy = (lambda source: copy_for_reading(source, s.min_free_disk_mb)) if s.read_only else None
        return EdgeVectorStore(s.embedded_vectors_dir, self.embedder.dim, self.executor, policy, read_copy=read_copy, features=features)

    def _metadata_store(self) -> MetadataStore:
        return metadata_store_for(self.settings)

    def _embedded_paths(self) -> list[Path]:
        """Where the embedded stores write (a MySQL or Qdrant server keeps its data elsewhere)."""
        s = self.settings
        paths = [] if s.mysql_dsn else [s.data_dir]
        if s.vector_backend == "edge":
            paths.append(s.embedded_vectors_dir)
        elif s.qdrant_path and s.qdrant_path != ":memory:":
            paths.append(Path(s.qdrant_path))
        return paths

    def _preflight(self) -> None:
        """Refuse to start on storage the engines would fail on: a read-only folder (which used to
        hang start-up) or a full volume (which makes the vector engine die of SIGBUS)."""
        if self.settings.read_only:
            return
        for path in self.disk.paths:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise Unavailable(f"cannot create the data folder {path}: {exc.strerror or exc}") from None
            if not os.access(path, os.W_OK):
                raise Unavailable(
                    f"the data folder {path} is not writable; serve it with RETRIEVAL_READ_ONLY=true, or fix its permissions"
                )
        s = self.settings
        self.disk.check(opening_bytes(s.embedded_vectors_dir) if s.vector_backend == "edge" else 0, "opening the vector index")

    async def open(self, *, warm_kernels: bool = True) -> None:
        """Open every backend; on any failure close what was opened (no thread may keep the process alive).

        ``warm_kernels`` loads scoring_core's kernels now, so that the first query does not; a
        command that only ingests calls none of them and skips that.
        """
        started: list[asyncio.Future[None]] = []
        try:
            self._preflight()
            # The stores open, a model folder's session is taken once made (on its own thread) and
            # scoring_core's kernels load at once: each waits on something else (writes and syncs,
            # the session, numba's cache). Choosing a MiniLM build waits for all of them: it may
            # time both builds, which must not share the cores with the rest.
            started += [asyncio.ensure_future(self.metadata.open()), asyncio.ensure_future(self.vectors.open())]
            if self.settings.model_dir is not None:
                started.append(asyncio.ensure_future(self.embedder.bind_loading()))
            if warm_kernels:
                started.append(asyncio.ensure_future(self.executor.run(scoring_core.warm_up, self._stop_warming)))
            # Not gather: its cancellation would cancel them, and a store abandoned on its thread stays open.
            await asyncio.wait(started, return_when=asyncio.FIRST_EXCEPTION)
            for task in started:
                if task.done():
                    task.result()  # the first failure, if any (the others are awaited before closing)
            self._bind_terms()
            if self.settings.model_dir is None:
                await self._choose_model()
            await self._check_model()
            if warm_kernels:
                # A server's first HYBRID query must not load it (a command that only ingests may never need it).
                await self.inference.run(self.embedder.load_narrow)
            await self._bind_child_title()
            if not self.settings.read_only:
                # One writer per embedded folder: whatever it left pending was interrupted. With shared
                # storage another process may be mid-write, so only intents older than the lease.
                lease = self.settings.write_lease_s if self.settings.shares_writable_storage else 0.0
                await self.indexer.recover(min_age_s=lease)
                self._cleanup_task = asyncio.create_task(self.indexer.retry_failed_cleanups())
                if self.settings.shares_writable_storage and lease > 0:
                    # A process killed mid-write and restarted at once skipped its own intents (they
                    # were younger than the lease): they are reconciled once the lease has passed.
                    self._sweep_task = asyncio.create_task(sweep_abandoned_writes(self.indexer, lease))
            if self.events is not None:
                await self.events.start()
        except BaseException as exc:
            chosen = await self._failed_opening(started, exc)
            if chosen is exc:
                raise
            raise chosen from exc
        await self._refresh_term_stats()

    async def _refresh_term_stats(self) -> None:
        try:
            await self.term_stats.refresh(self.vectors, self.settings.idf_sample_points)
        except Exception:
            # ADAPTIVE then decides without the rare-term share; nothing else depends on it.
            log.exception("reading keyword statistics failed")

    async def _failed_opening(self, started: list[asyncio.Future[None]], exc: BaseException) -> BaseException:
        """Close once everything started has ended; what to raise: ``exc``, or a wrong remembered
        model size, which explains the rest (a vector store refusing that size, say)."""
        self._stop_warming.set()
        if isinstance(exc, asyncio.CancelledError):
            # A stop while starting: what is still opening is given up, or a store that does not
            # answer would hold the stop for its whole timeout. A store opening on a thread lets
            # that job end and closes what it made (EdgeVectorStore.open).
            for task in started:
                task.cancel()
        try:
            results = await asyncio.shield(asyncio.gather(*started, return_exceptions=True))
        finally:
            await self.close()
        others = [r for r in results if isinstance(r, Exception) and r is not exc]
        for other in others:
            log.error("opening also failed: %s", other, exc_info=other)
        return next((r for r in others if isinstance(r, model_loading.WrongSize)), exc)

    async def _choose_model(self) -> None:
        """Bind the embedder to the index's MiniLM build (model_choice); a model folder's is bound in open()."""
        s = self.settings
        recorded = await self._recorded_choice()
        selected = await self._select(recorded)
        model_id = selected.files.model_id
        if recorded is None and not s.read_only and await self.metadata.add_info(EMBEDDING_MODEL, model_id) != model_id:
            # Another process starting on this new index recorded its model first (a pod's workers
            # take int8 unmeasured while an `ingest --local` beside them measures): that one is the
            # index's, and this process takes it as its next start would.
            selected = await self._select(await self._recorded_choice())
        self.embedder.use(selected.files, selected.encoder)
        self._embedder_attributes["retrieval.model"] = selected.files.model_id
        if self._redis_cache is not None:
            self._redis_cache.rename(self._redis_prefix())
        self.model_choice = selected.choice
        timings = selected.choice.timings
        log.info("embedding model %s: %s", selected.files.model_id, selected.choice.describe(), extra={
            "model": selected.choice.model.value, "how": selected.choice.how.value, "model_id": selected.files.model_id,
            "int8_ms": timings.int8_ms if timings else None, "fp32_ms": timings.fp32_ms if timings else None,
            "fp32_over_int8": round(timings.fp32_over_int8, 3) if timings else None,
        })

    async def _recorded_choice(self) -> model_choice.ModelChoice | None:
        """The MiniLM build the index records, if any; refused when it records another model."""
        stored = await self.metadata.get_info(EMBEDDING_MODEL)
        recorded = model_choice.recorded_choice(await self.metadata.get_info(model_choice.INFO_KEY), stored)
        if recorded is None and stored is not None:
            # Not a build this installation has: do not build or time any only to refuse afterwards.
            raise Unavailable(
                f"the index was built with embedding model {stored}, which is neither installed MiniLM build: set the "
                f"RETRIEVAL_MODEL_DIR it was built with (or, for an fp32 index, {INSTALL}), or use a new RETRIEVAL_DATA_DIR"
            )
        return recorded

    async def _select(self, recorded: model_choice.ModelChoice | None) -> model_choice.Selected:
        s = self.settings
        return await self.inference.run(
            model_choice.select, s.model, recorded, read_only=s.read_only, cache_dir=s.model_cache_dir or default_cache_dir(),
            load=self.embedder.load, several_processes=s.processes > 1, threads=s.embed_threads,
        )

    async def _check_model(self) -> None:
        """Vectors from one model are meaningless to another: an index keeps the first model recorded
        in it, even before it holds documents (whoever recorded it may be embedding them right now),
        and refuses to start with any other. Each write checks it again (Indexer._store)."""
        model = self.embedder.model_id
        if self.settings.read_only:
            stored = await self.metadata.get_info(EMBEDDING_MODEL)
        else:
            stored = await self.metadata.add_info(EMBEDDING_MODEL, model)
        if stored not in (None, model):
            raise Unavailable(
                f"the index was built with embedding model {stored}, but {model} is configured; "
                "use the same RETRIEVAL_MODEL_DIR and RETRIEVAL_MODEL, or a new RETRIEVAL_DATA_DIR"
            )
        choice = self.model_choice
        if not self.settings.read_only and choice is not None and choice.how is not model_choice.How.RECORDED:
            # Only once the model is the index's: how another model was chosen would describe nothing.
            await self.metadata.add_info(model_choice.INFO_KEY, choice.to_json())

    def _bind_terms(self) -> None:
        """Keyword terms as the vector index was built with them: another revision's would miss its own."""
        terms = self.vectors.features.terms
        if terms < TERMS_REVISION:  # a newer one was refused when the store opened (check_schema)
            log.warning("the vector index holds keyword terms of revision %d, which it keeps (revision %d, the current one, "
                        "applies to a new data directory or collection: README, 'Keyword terms')", terms, TERMS_REVISION)
        self.sparse.use(terms)

    async def _bind_child_title(self) -> None:
        """Contextual children are decided when an index gets its first documents, and the index
        records it: documents ingested later are embedded the same way whatever ``CHILD_TITLE`` says
        then, since titled and untitled children ranked against each other would favour one kind.
        An index from before the record was kept holds what ``CHILD_TITLE`` set then: off unless set."""
        s = self.settings
        recorded = await self.metadata.get_info(CHILD_TITLE_INFO)
        if await self.metadata.count_documents() == 0:
            built = s.child_title
        elif recorded is not None:
            built = recorded == "true"
        else:
            built = s.child_title if "child_title" in s.model_fields_set else False
        if built != s.child_title:
            log.warning("the index holds children embedded with RETRIEVAL_CHILD_TITLE=%s, which it keeps; =%s applies to a new "
                        "data directory (or collection)", str(built).lower(), str(s.child_title).lower())
        self.indexer.child_title = built
        if recorded != str(built).lower() and not s.read_only:
            await self.metadata.set_info(CHILD_TITLE_INFO, str(built).lower())

    def _writable(self) -> None:
        s = self.settings
        if not s.read_only:
            return
        if s.processes > 1 and not s.shares_writable_storage:  # the supervisor made its workers read-only
            raise ReadOnly(f"this server is read-only (it runs {s.processes} processes over embedded storage, each on a read-only copy); "
                           "ingest and delete through a single-process server, or run the processes against a Qdrant server "
                           "(RETRIEVAL_QDRANT_URL)")
        # The operator's choice: the advice above (one process, a Qdrant server) changed nothing for it.
        raise ReadOnly("this server is read-only (RETRIEVAL_READ_ONLY=true): it serves what is stored and writes nothing; "
                       "ingest and delete through a server of this data started without RETRIEVAL_READ_ONLY")

    @contextlib.asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        """An ingest or delete in progress, which :meth:`close` lets end before it closes the stores."""
        if self._closed:
            raise Unavailable("the server is shutting down")
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._writes.add(done)
        try:
            yield
        finally:
            self._writes.discard(done)
            done.set_result(None)

    async def ingest(
        self, sources: list[DocumentSource], *, writer: Identity = LOCAL_OPERATOR, stored: list[IngestedDocument] | None = None,
        **kwargs: object,
    ) -> IngestReport:
        """``writer``: the caller, who may replace only stored documents it may read (SUPER_ADMIN: any).
        ``stored`` gets each document as it commits: a caller cut short (its deadline, a cancel) gets
        no report, yet can tell what was stored (the audit line)."""
        self._writable()
        try:
            self.disk.check(sum(estimated_bytes(len(s.content)) for s in sources))
        except ResourceExhausted:
            # Counted as a batch refused during the ingest is: RESOURCE_EXHAUSTED is no code of the
            # error-ratio alert (callers cause it too), and below the floor every ingest ends here.
            self.metrics.ingest_errors.inc(len(sources))
            raise
        # The write's follow-ups (optimize, cache invalidation) run inside it too: close() waits for
        # them, rather than closing the stores they use.
        async with self._writing():
            stored = [] if stored is None else stored
            try:
                report = await self.indexer.ingest(sources, writer=AccessFilter.for_identity(writer), stored=stored, **kwargs)  # type: ignore[arg-type]
            finally:
                # Also for an ingest its caller's deadline or cancel cut: what it committed before
                # is stored, and a cached answer citing a replaced version would be served on.
                await to_the_end(self._ingested(stored))
            self.metrics.ingest_errors.inc(len(report.errors) + report.errors_not_listed)
        return report

    async def _ingested(self, documents: list[IngestedDocument]) -> None:
        # Not the unchanged: a periodic re-sync of a corpus counted every document of it as stored
        # again, and emptied the cache (every replica's, with Redis).
        written = [d for d in documents if not d.unchanged]
        self.metrics.ingested.inc(len(written))
        if documents:
            self.schedule_optimize()
            await self._invalidate([d.document_id for d in written if d.replaced])

    async def delete(
        self, document_ids: list[str] | tuple[str, ...], *, writer: Identity = LOCAL_OPERATOR, deleted: list[str] | None = None
    ) -> tuple[list[str], list[str]]:
        """The ids deleted, and those not found: missing, or stored where ``writer`` may not read them.
        ``deleted`` gets each id as it is deleted, for a caller cut short (as ``stored`` for :meth:`ingest`)."""
        self._writable()
        async with self._writing():
            deleted = [] if deleted is None else deleted
            try:
                _, missing = await self.indexer.delete(document_ids, writer=AccessFilter.for_identity(writer), deleted=deleted)
            finally:
                # Also for a delete its caller's deadline or cancel cut, as for an ingest.
                await to_the_end(self._deleted(deleted))
        return deleted, missing

    async def _deleted(self, document_ids: list[str]) -> None:
        if document_ids and self._room_to_vacuum():
            # The embedded engine vacuums deleted points only in optimize(): until then they count in BM25's IDF.
            self.schedule_optimize()
        await self._invalidate(document_ids)

    def _room_to_vacuum(self) -> bool:
        """Whether the disk floor lets a delete's vacuum run. Deletes go on below it (they write tens
        of KiB), but the vacuum writes the live points of the segment anew and leaves the index
        larger (43 MiB more for an index of 100 MiB): on a full volume, the SIGBUS the floor keeps away.
        Skipped, it is done after the next write that has the room."""
        try:
            self.disk.check()
        except ResourceExhausted as exc:
            log.warning("deleted points are vacuumed after the next write with room for it: %s", exc)
            return False
        return True

    async def _invalidate(self, document_ids: list[str]) -> None:
        """Drop cached answers citing these documents. Best effort: the write has committed, and a
        hit is checked against the stored versions anyway, so a cache that is down loses nothing."""
        if self.cache is None or not document_ids:
            return
        try:
            await self.cache.invalidate_documents(document_ids)
        except CacheUnavailable as exc:
            log.warning("cache invalidation skipped: %s", exc)

    def schedule_optimize(self) -> None:
        """Index what was written, in the background, one optimization at a time."""
        if self._optimize_task is not None and not self._optimize_task.done():
            self._optimize_again = True
            return
        self._optimize_task = asyncio.create_task(self._optimize_loop())

    async def _optimize_loop(self) -> None:
        while True:
            self._optimize_again = False
            try:
                await self.vectors.optimize()
            except Exception:
                log.exception("vector index optimization failed")
            await self._refresh_term_stats()
            if not self._optimize_again:
                return

    async def wait_for_optimize(self) -> None:
        if self._optimize_task is not None:
            await self._optimize_task

    async def health(self, time_left_s: float | None = None) -> HealthReport:
        """The components' states. ``time_left_s``: the time the caller's deadline leaves (None:
        no deadline); a probe gets at most that, less the time to send the answer (a quarter of
        it, at most :data:`_HEALTH_SEND_MARGIN_S`), and one that has not answered by then is
        FAILING: the answer is the report, which a frozen store's 5 s ping turned into
        DEADLINE_EXCEEDED for any caller allowing less."""
        ping_s = _PING_TIMEOUT_S if time_left_s is None else min(_PING_TIMEOUT_S, max(0.0, time_left_s - _health_send_margin(time_left_s)))
        by_deadline = ping_s < _PING_TIMEOUT_S

        async def probe(name: str, ping: Callable[[], Awaitable[None]], detail: str, required: bool) -> ComponentHealth:
            bound = asyncio.timeout(ping_s)
            try:
                async with bound:
                    await ping()
            except Exception as exc:
                # Told by the bound, not by the exception's type: a ping's own timeout (the
                # cache's CACHE_TIMEOUT_S) is a TimeoutError too, and says something of the store.
                if by_deadline and bound.expired():
                    # The caller's budget ran out, which says nothing of the store: not logged.
                    return ComponentHealth(name, ComponentState.FAILING, required, "no answer within the call's deadline")
                # Health answers callers without credentials: a driver's message (a host, a user)
                # goes to the log, the caller reads its kind.
                problem = str(exc) or type(exc).__name__
                if self._health_problems.get(name) != problem:
                    log.warning("health: %s is failing: %s", name, problem)
                    self._health_problems[name] = problem
                return ComponentHealth(name, ComponentState.FAILING, required, f"{type(exc).__name__} (the server's log says more)")
            self._health_problems.pop(name, None)
            return ComponentHealth(name, ComponentState.OK, required, detail)

        def optional(name: str, component: object, detail: str) -> ComponentHealth:
            if component is None:
                return ComponentHealth(name, ComponentState.NOT_CONFIGURED, False, detail)
            return ComponentHealth(name, ComponentState.OK, False, getattr(component, "name", type(component).__name__))

        async def no_cache() -> ComponentHealth:
            return optional("cache", None, "off (RETRIEVAL_CACHE_BACKEND=none)")

        # At once: each ping may take its whole timeout when a store hangs, and the readiness
        # status (server._follow_health) should turn within one of them, not their sum.
        vectors, metadata, cache, auth = await asyncio.gather(
            probe("vector_store", self.vectors.ping, self.vectors.__class__.__name__, True),
            probe("metadata_store", self.metadata.ping, self.metadata.__class__.__name__, True),
            probe("cache", self.cache.ping, getattr(self.cache, "inner", self.cache).__class__.__name__, False) if self.cache is not None else no_cache(),
            self._auth_health(ping_s),
        )
        components = [
            vectors,
            self._disk_health(),
            metadata,
            ComponentHealth("embedder", ComponentState.OK, True,
                            f"{self.embedder.model_id} ({self.model_choice.describe()})" if self.model_choice else self.embedder.model_id),
            cache,
            self._tripped("reranker")
            or optional("reranker", self.reranker, "not configured: fused order (set RETRIEVAL_RERANKER_MODEL_DIR or RETRIEVAL_TEI_URL)"),
            auth,
            self._tripped("llm") or ComponentHealth(
                "llm",
                ComponentState.OK if self.chat_models else ComponentState.NOT_CONFIGURED,
                False,
                ", ".join(m.name for m in self.chat_models.values()) or "not configured: classical query analysis (set RETRIEVAL_LLM_PROVIDER)",
            ),
        ]
        return HealthReport(tuple(components))

    async def _auth_health(self, within_s: float) -> ComponentHealth:
        """How callers are identified; with a JWKS URL, whether its keys are held (fetched within
        ``within_s`` when none are: :attr:`signing_keys`). Without them no call but Health is served
        (jwt mode answers none without a token, anonymous reads of public documents included), so
        the component is required: FAILING turns the service NOT_SERVING, and its readiness too."""
        s = self.settings
        transport = "mutual TLS" if s.tls_client_ca else "TLS" if s.tls else "plaintext"
        if s.auth_mode == "none":
            return ComponentHealth("auth", ComponentState.NOT_CONFIGURED, False,
                                   f"identity is NOT authenticated: x-user-id/x-user-role/x-user-groups are believed as sent (RETRIEVAL_AUTH_MODE=none, {transport})")
        detail = (f"bearer tokens ({', '.join(s.accepted_jwt_algorithms)})" if s.auth_mode == "jwt"
                  else f"identity headers from {len(s.gateway_peers)} allowed gateway peer(s)")
        if self.signing_keys is None:
            return ComponentHealth("auth", ComponentState.OK, False, f"{s.auth_mode}: {detail}, {transport}")
        held, why = await self.signing_keys(within_s)
        if not held:
            return ComponentHealth("auth", ComponentState.FAILING, True, f"{s.auth_mode}: {why}, {transport}")
        return ComponentHealth("auth", ComponentState.OK, True, f"{s.auth_mode}: {detail}, {transport}" + (f"; {why}" if why else ""))

    def _disk_health(self) -> ComponentHealth:
        low = self.disk.shortest()
        if low is None:
            return ComponentHealth("disk", ComponentState.NOT_CONFIGURED, False, "no embedded store: the servers watch their own disks")
        if self.settings.read_only:
            return ComponentHealth("disk", ComponentState.OK, False, "read-only: nothing is written")
        # Health answers callers without credentials: the volume's path (a user's home, a mount's
        # name) goes to the log, the caller reads the numbers.
        detail = f"{low[1] // MIB} MiB free (floor {self.disk.floor_bytes // MIB} MiB)"
        try:
            self.disk.check()
        except ResourceExhausted as exc:
            # Said when a volume falls below the floor, not at every probe as its free space moves.
            if self._health_problems.get("disk") != str(low[0]):
                log.warning("health: disk is failing: %s", exc)
                self._health_problems["disk"] = str(low[0])
            return ComponentHealth("disk", ComponentState.FAILING, False, f"ingestion refused: {detail}")
        self._health_problems.pop("disk", None)
        return ComponentHealth("disk", ComponentState.OK, False, detail)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # A server's stop cancels the calls still running when its grace period ends, and a cancelled
        # write finishes the document it is at (Indexer): closing the stores under it would leave that
        # document half-written, its pending write and new points waiting for the next start.
        if self._writes:
            await asyncio.wait(list(self._writes))
        if self._optimize_task is not None:
            await asyncio.gather(self._optimize_task, return_exceptions=True)
        for task in (self._sweep_task, self._cleanup_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if "graph" in self.__dict__:  # built (cached_property) for the queries, whose names' loads read the stores
            await self.graph.close()
        # Off the event loop: shutting the endpoint down waits for its loop's next poll (0.5 s).
        await asyncio.to_thread(self.metrics.close)
        closers = [self.vectors.close, self.metadata.close, *(m.close for m in self.chat_models.values())]
        if self.cache is not None:
            closers.append(self.cache.close)
        reranker = getattr(self.reranker, "inner", self.reranker)
        if isinstance(reranker, (TeiReranker, FallbackReranker)):
            tei = reranker if isinstance(reranker, TeiReranker) else reranker.primary
            closers.append(tei.close)  # type: ignore[union-attr]
        for closer in closers:
            try:
                await closer()
            except Exception:
                log.exception("closing a backend failed")
        if self.events is not None:
            await self.events.close(self.settings.events_publish_timeout_s)
        self.inference.shutdown()
        self.inference_beside.shutdown()
        self.ingest_work.shutdown()
        self.executor.shutdown()
        self.tracing.shutdown()
