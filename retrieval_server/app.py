"""Composition root: builds the backends from settings and owns their lifecycle."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import scoring_core
from retrieval_server.backends.embedder import OnnxEmbedder, resolve_model
from retrieval_server.backends.executor import BlockingExecutor
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.metadata_store.mysql import MysqlMetadataStore
from retrieval_server.backends.metadata_store.sqlite import SqliteMetadataStore
from retrieval_server.backends.sparse import Bm25Encoder
from retrieval_server.backends.vector_store import SearchPolicy, VectorStore
from retrieval_server.backends.vector_store.edge import EdgeVectorStore
from retrieval_server.backends.vector_store.qdrant import QdrantVectorStore
from retrieval_server.config import Settings
from retrieval_server.domain import DocumentSource, IngestReport, ReadOnly, Unavailable
from retrieval_server.ingest.chunker import Chunker, ChunkSizes
from retrieval_server.ingest.indexer import Indexer
from retrieval_server.observability.metrics import ServiceMetrics
from retrieval_server.backends.cache import CachePolicy, MemoryCache, SemanticCache
from retrieval_server.backends.reranker import FallbackReranker, OnnxReranker, Reranker, TeiReranker
from retrieval_server.domain import Fusion
from retrieval_server.backends.llm import PROVIDERS, ChatModel
from retrieval_server.workflow.adaptive import TermStatistics
from retrieval_server.workflow.analysis import Analyzer, ClassicalAnalyzer, LlmAnalyzer, TechniqueModel, load_glossary
from retrieval_server.workflow.keyword_leg import KeywordOptions
from retrieval_server.workflow.pipeline import QueryPipeline
from retrieval_server.workflow.state import WorkflowDeps, WorkflowSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ComponentStatus:
    name: str
    ok: bool
    detail: str


class Application:
    """Everything a server or a CLI command needs, opened and closed together."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.metrics = ServiceMetrics()
        self.executor = BlockingExecutor(settings.workers)
        # Model runs get their own lanes: each run already uses every intra-op thread, so running
        # more at once than there are lanes only oversubscribes the cores and lowers throughput.
        self.inference = BlockingExecutor(settings.inference_lanes, name="inference")
        files = resolve_model(settings.model_dir)
        self.embedder = OnnxEmbedder(
            files,
            self.inference,
            max_length=settings.max_seq_length,
            batch_size=settings.embed_batch_size,
            threads=settings.embed_threads,
        )
        self.sparse = Bm25Encoder()
        self.vectors = self._vector_store()
        self.metadata = self._metadata_store()
        self.chunker = Chunker(
            str(files.tokenizer_path),
            ChunkSizes(settings.parent_chunk_tokens, settings.child_chunk_tokens, settings.child_overlap_tokens),
        )
        self.indexer = Indexer(
            self.chunker,
            self.embedder,
            self.sparse,
            self.vectors,
            self.metadata,
            batch_children=settings.upsert_batch_size,
            title_weight=settings.title_weight,
        )
        self.reranker = self._reranker()
        self.cache = self._cache()
        self.term_stats = TermStatistics()
        self.chat_models: dict[str, ChatModel] = {}
        self.pipeline = QueryPipeline(
            WorkflowDeps(
                embedder=self.embedder,
                sparse=self.sparse,
                vectors=self.vectors,
                metadata=self.metadata,
                analyzer=self._analyzer(),
                reranker=self.reranker,
                cache=self.cache,
                settings=self.workflow_settings(settings),
                term_stats=self.term_stats,
            ),
            search_text_chars=settings.search_text_chars,
        )
        self._optimize_task: asyncio.Task[None] | None = None
        self._optimize_again = False

    @staticmethod
    def workflow_settings(s: Settings) -> WorkflowSettings:
        return WorkflowSettings(
            child_candidates_per_context=s.child_candidates_per_context,
            fusion=Fusion(s.fusion),
            rrf_k=s.rrf_k,
            semantic_weight=s.semantic_weight,
            keyword_weight=s.keyword_weight,
            metadata_weight=s.metadata_weight,
            score_normalization=s.score_normalization,
            rerank_candidates=s.rerank_candidates,
            rerank_threshold=s.rerank_threshold,
            rerank_fallback=s.rerank_fallback,
            sufficiency_threshold=s.sufficiency_threshold,
            max_iterations=s.max_iterations,
            retry_pool_factor=s.retry_pool_factor,
            analysis_timeout_s=s.analysis_timeout_s,
            analysis_total_timeout_s=s.analysis_total_timeout_s,
            store_retries=s.store_retries,
            store_backoff_s=s.store_backoff_s,
            parent_leg=s.parent_leg,
            keyword=KeywordOptions(
                titled=s.keyword_title_field,
                max_terms=s.query_max_terms,
                prf_docs=s.prf_docs,
                prf_terms=s.prf_terms,
                prf_query_weight=s.prf_query_weight,
            ),
        )

    def _analyzer(self) -> Analyzer:
        """LLM-backed techniques where a provider is configured; classical methods everywhere else."""
        s = self.settings
        classical = ClassicalAnalyzer(load_glossary(s.glossary_path))
        models = {}
        for technique in ("rewrite", "reformulate", "hyde", "decompose"):
            provider = s.technique_provider(technique)
            if provider == "none":
                continue
            if provider not in self.chat_models:
                self.chat_models[provider] = PROVIDERS[provider](
                    getattr(s, f"{provider}_base_url"),
                    getattr(s, f"{provider}_model"),
                    getattr(s, f"{provider}_api_key"),
                    timeout_s=s.llm_timeout_s,
                    max_retries=s.llm_max_retries,
                    backoff_s=s.llm_backoff_s,
                )
            models[technique] = TechniqueModel(self.chat_models[provider], getattr(s, f"llm_{technique}_temperature"))
        return LlmAnalyzer(models, classical) if models else classical

    def _reranker(self) -> Reranker | None:
        """TEI when configured (backed by the local model if there is one), else the local model, else none."""
        s = self.settings
        local = (
            OnnxReranker(s.reranker_model_dir, self.inference, activation=s.rerank_activation, threads=s.embed_threads)
            if s.reranker_model_dir
            else None
        )
        if s.tei_url:
            tei = TeiReranker(s.tei_url, timeout_s=s.tei_timeout_s, max_batch=s.tei_max_batch, raw_scores=s.rerank_activation == "none")
            return FallbackReranker(tei, local) if local else tei
        return local

    def _cache(self) -> SemanticCache | None:
        s = self.settings
        if s.cache_backend == "none":
            return None
        policy = CachePolicy(s.cache_ttl_s, s.cache_similarity, s.cache_max_entries)
        if s.cache_backend == "redis":
            from retrieval_server.backends.redis_cache import RedisCache

            return RedisCache(s.redis_url or "", self.embedder.dim, self.executor, policy)
        return MemoryCache(self.embedder.dim, self.executor, policy)

    def _vector_store(self) -> VectorStore:
        s = self.settings
        policy = SearchPolicy(always_exact=s.exact_search, exact_max_points=s.exact_search_max_points, hnsw_ef=s.hnsw_ef)
        if s.vector_backend == "qdrant":
            return QdrantVectorStore(
                s.qdrant_collection,
                self.embedder.dim,
                url=s.qdrant_url,
                path=s.qdrant_path,
                api_key=s.qdrant_api_key,
                timeout_s=s.qdrant_timeout_s,
                policy=policy,
            )
        return EdgeVectorStore(s.embedded_vectors_dir, self.embedder.dim, self.executor, policy)

    def _metadata_store(self) -> MetadataStore:
        s = self.settings
        if s.mysql_dsn:
            return MysqlMetadataStore(s.mysql_dsn, s.mysql_pool_size)
        return SqliteMetadataStore(s.data_dir / "metadata.sqlite3")

    async def open(self) -> None:
        await self.executor.run(scoring_core.warm_up)
        await self.metadata.open()
        try:
            await self.vectors.open()
        except BaseException:
            await self.metadata.close()
            raise
        await self._check_model()
        await self._refresh_term_stats()

    async def _refresh_term_stats(self) -> None:
        try:
            await self.term_stats.refresh(self.vectors, self.settings.idf_sample_points)
        except Exception:
            # ADAPTIVE then decides without the rare-term share; nothing else depends on it.
            log.exception("reading keyword statistics failed")

    async def _check_model(self) -> None:
        """Vectors from one model are meaningless to another: refuse to mix them."""
        stored = await self.metadata.get_info("embedding_model")
        model = self.embedder.model_id
        if stored not in (None, model) and await self.metadata.count_documents() > 0:
            await self.close()
            raise Unavailable(
                f"the index was built with embedding model {stored}, but {model} is configured; "
                "use the same RETRIEVAL_MODEL_DIR or a new RETRIEVAL_DATA_DIR"
            )
        if stored != model and not self.settings.read_only:
            await self.metadata.set_info("embedding_model", model)

    def _writable(self) -> None:
        if self.settings.read_only:
            why = (
                f"it runs {self.settings.processes} processes over embedded storage, each on a read-only copy"
                if self.settings.processes > 1
                else "RETRIEVAL_READ_ONLY is set"
            )
            raise ReadOnly(f"this server is read-only ({why}); ingest and delete through a single-process server, "
                           "or run the processes against a Qdrant server (RETRIEVAL_QDRANT_URL)")

    async def ingest(self, sources: list[DocumentSource], **kwargs: object) -> IngestReport:
        self._writable()
        report = await self.indexer.ingest(sources, **kwargs)  # type: ignore[arg-type]
        self.metrics.ingested.inc(len(report.documents))
        self.metrics.ingest_errors.inc(len(report.errors))
        if report.documents:
            self.schedule_optimize()
            if self.cache is not None:
                await self.cache.invalidate_documents(d.document_id for d in report.documents if d.replaced)
        return report

    async def delete(self, document_ids: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
        self._writable()
        deleted, missing = await self.indexer.delete(document_ids)
        if self.cache is not None and deleted:
            await self.cache.invalidate_documents(deleted)
        return deleted, missing

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

    async def health(self) -> list[ComponentStatus]:
        out = []
        stores: tuple[tuple[str, VectorStore | MetadataStore], ...] = (
            ("vector_store", self.vectors),
            ("metadata_store", self.metadata),
        )
        for name, store in stores:
            try:
                await asyncio.wait_for(store.ping(), timeout=5)
                out.append(ComponentStatus(name, True, type(store).__name__))
            except Exception as exc:
                out.append(ComponentStatus(name, False, str(exc) or type(exc).__name__))
        if self.cache is not None and hasattr(self.cache, "ping"):
            try:
                await asyncio.wait_for(self.cache.ping(), timeout=5)
                out.append(ComponentStatus("cache", True, type(self.cache).__name__))
            except Exception as exc:
                out.append(ComponentStatus("cache", False, str(exc) or type(exc).__name__))
        out.append(ComponentStatus("embedder", True, self.embedder.model_id))
        out.append(ComponentStatus("reranker", self.reranker is not None, self.reranker.name if self.reranker else "none: fused order"))
        return out

    async def close(self) -> None:
        if self._optimize_task is not None:
            await asyncio.gather(self._optimize_task, return_exceptions=True)
        self.metrics.close()
        closers = [self.vectors.close, self.metadata.close, *(m.close for m in self.chat_models.values())]
        if self.cache is not None:
            closers.append(self.cache.close)
        if isinstance(self.reranker, (TeiReranker, FallbackReranker)):
            tei = self.reranker if isinstance(self.reranker, TeiReranker) else self.reranker.primary
            closers.append(tei.close)  # type: ignore[union-attr]
        for closer in closers:
            try:
                await closer()
            except Exception:
                log.exception("closing a backend failed")
        self.inference.shutdown()
        self.executor.shutdown()
