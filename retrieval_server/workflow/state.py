"""What flows through the query graph, and what its nodes may use."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from retrieval_server.backends.cache import SemanticCache
from retrieval_server.backends.embedder import Embedder
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.reranker import Reranker
from retrieval_server.backends.sparse import Bm25Encoder
from retrieval_server.workflow.adaptive import AdaptivePolicy, LegWeights, TermStatistics
from retrieval_server.workflow.keyword_leg import KeywordOptions
from retrieval_server.workflow.dense_feedback import DenseFeedback
from retrieval_server.backends.vector_store import VectorStore
from retrieval_server.domain import Fusion, PointFilter, QueryMetrics, QueryOptions, RetrievedContext, StageMetric, Strategy, VectorHit
from retrieval_server.knowledge import Answer, EntityMatch, GraphTrace, RouteDecision, ToolResult
from retrieval_server.observability.log_limit import LogLimit
from retrieval_server.workflow.analysis import Analysis, Analyzer
from retrieval_server.workflow.knowledge_graph import KnowledgeGraph

if TYPE_CHECKING:
    from retrieval_server.workflow.assistant import Assistant

#: What a streaming caller is told as the request runs: each finished stage, then answer text.
StreamEvent = StageMetric | str
EventSink = Callable[[StreamEvent], None]


@dataclass(frozen=True, slots=True)
class WorkflowSettings:
    child_candidates_per_context: int = 8
    fusion: Fusion = Fusion.RRF
    rrf_k: float = 10.0
    semantic_weight: float = 0.7
    keyword_weight: float = 0.3
    metadata_weight: float = 0.3
    #: the metadata search keeps stop words among its terms
    metadata_stopwords: bool = False
    score_normalization: str = "minmax"
    #: what the legs' ranks are fused for (see workflow.rank_fusion)
    fusion_unit: Literal["auto", "chunk", "parent"] = "chunk"
    #: tokens in a child chunk: a query longer than this is fused per parent under ``auto``
    child_chunk_tokens: int = 128
    #: tokens the embedding model reads of a text, [CLS] and [SEP] among them (MAX_SEQ_LENGTH)
    model_tokens: int = 256
    #: a query longer than a child is also searched window by window (workflow.query_windows)
    long_query_windows: bool = True
    #: at most this many windows of a query (its first ones) are embedded and searched
    query_max_windows: int = 8
    rerank_candidates: int = 50
    #: 0: no time budget for reranking (see Settings.rerank_budget_ms)
    rerank_budget_ms: float = 0.0
    rerank_threshold: float = 0.3
    rerank_fallback: int = 3
    #: "none": the reranker's scores are raw logits (see Settings.rerank_activation)
    rerank_activation: Literal["none", "sigmoid"] = "sigmoid"
    sufficiency_threshold: float = 0.6
    max_iterations: int = 2
    retry_pool_factor: float = 2.0
    analysis_timeout_s: float = 10.0
    analysis_total_timeout_s: float = 30.0
    store_retries: int = 2
    store_backoff_s: float = 0.05
    #: see Settings.deadline_reserve_ms
    deadline_reserve_ms: float = 50.0
    #: the graph leg joins HYBRID and ADAPTIVE when the query names known entities
    graph_expansion: bool = True
    graph_hop_penalties: tuple[float, ...] = (1.0, 0.77, 0.63)
    graph_max_chunks_per_hop: int = 20
    graph_max_neighbors: int = 25
    graph_weight: float = 0.7
    tool_timeout_s: float = 5.0
    #: the router's model call, whole (an HTTP client's own timeout bounds each read only)
    router_timeout_s: float = 10.0
    answer_max_sentences: int = 3
    answer_min_similarity: float = 0.3
    answer_max_tokens: int = 512
    answer_timeout_s: float = 60.0
    #: search the parents' own vectors (multi-granularity) when the index has them
    parent_leg: bool = True
    #: search the documents' first windows (first parents' vectors) when the index has them
    document_leg: bool = False
    #: how the same-vector dense legs combine: "max_cosine" (CombMAX, one leg) or "rrf" (legs sharing the dense weight)
    dense_fusion: Literal["max_cosine", "rrf"] = "max_cosine"
    #: query words at which the document leg and the finer dense legs weigh the same
    document_crossover_words: float = 25.0
    #: share of a document's next-best fused chunks added to each of its chunks (0: off)
    document_evidence: float = 0.0
    keyword: KeywordOptions = KeywordOptions()
    dense_feedback: DenseFeedback = DenseFeedback()
    adaptive: AdaptivePolicy = AdaptivePolicy()


@dataclass(frozen=True, slots=True)
class WorkflowDeps:
    embedder: Embedder
    sparse: Bm25Encoder
    vectors: VectorStore
    metadata: MetadataStore
    analyzer: Analyzer
    reranker: Reranker | None = None
    cache: SemanticCache | None = None
    settings: WorkflowSettings = WorkflowSettings()
    #: None: no knowledge graph (the graph leg and the graph tools report it)
    graph: KnowledgeGraph | None = None
    #: router, tools and answer writer for GENERATION requests (None: rules, the tools, extractive answers)
    assistant: Assistant | None = None
    #: the index's keyword statistics (ADAPTIVE's rare-term share); None: not kept
    term_stats: TermStatistics | None = None
    #: a text's child-sized windows, cut as the indexer cuts documents (None: long queries are not windowed)
    query_windows: Callable[[str], list[str]] | None = None
    #: a text's tokens as the embedding model counts them, without [CLS] and [SEP] (None: the
    #: semantic cache matches a query longer than ``model_tokens`` characters exactly only)
    count_tokens: Callable[[str], int] | None = None
    #: the failures no breaker logs (the store legs', the local reranker's, a model call's),
    #: at most one line per component and error kind a minute
    log_limit: LogLimit = field(default_factory=LogLimit)


@dataclass(frozen=True, slots=True)
class ScoredPass:
    """A retrieval pass check_sufficiency scored, with what the response reports of it."""

    sufficiency: float
    contexts: list[RetrievedContext]
    #: its fused candidates and its relevance signal (QueryState's): the sub-queries' pass builds on them
    fused: list[VectorHit]
    relevance: dict[str, float]
    #: what it ran as (a failed embedding turns its pass to KEYWORD)
    strategy: Strategy
    #: its graph leg's trace, which also pins a cached answer to the graph's version
    graph: GraphTrace | None
    #: no candidate reached its rerank threshold, so the best RERANK_FALLBACK were kept
    rerank_fell_back: bool
    #: the sub-queries' hits were fused into its candidates
    decomposed: bool
    #: what it searched in the caller's words' stead: analysis's rewrite (None: their words), and
    #: the sub-queries whose hits it fused
    rewritten: str | None
    sub_queries: tuple[str, ...]


@dataclass(slots=True)
class QueryState:
    options: QueryOptions
    metrics: QueryMetrics = field(default_factory=QueryMetrics)
    #: the strategy running now (ADAPTIVE runs as HYBRID with weighed legs; a failed embedding turns its pass to KEYWORD)
    strategy: Strategy = Strategy.SEMANTIC
    iteration: int = 0
    pool: int = 0
    rerank_threshold: float = 0.3
    #: the dense legs' query vector: the rewritten query's once retrieve has run
    query_vector: np.ndarray | None = None
    #: the text ``query_vector`` is the vector of (the caller's query, or a pass's rewrite of it)
    query_vector_text: str | None = None
    #: the caller's query's own vector (check_cache's), which the cache keys its answer by
    cache_vector: np.ndarray | None = None
    #: check_cache's embedding of the caller's query, still running when the cache's time ran out:
    #: retrieve awaits it rather than embed the query again (None: none such)
    query_embedding: asyncio.Future[np.ndarray] | None = None
    #: the model reads all of the caller's query (None: not counted yet); else the cache matches it exactly only
    query_in_one_vector: bool | None = None
    analysis: Analysis = field(default_factory=Analysis)
    variant_vectors: list[np.ndarray] = field(default_factory=list)
    #: what retrieve embeds for the dense legs: the (rewritten) query unless its vector is known, then the variants,
    #: then the query's windows
    embed_texts: list[str] = field(default_factory=list)
    #: child-sized windows of a long query at the end of ``embed_texts``, each searched as a dense leg (workflow.query_windows)
    windows: int = 0
    #: the (rewritten) query is longer than a child chunk (workflow.query_windows.cut); looked at only
    #: when its windows are searched or FUSION_UNIT is auto, and False otherwise
    long_query: bool = False
    #: what the caller may read, set once per request before the cache is consulted
    point_filter: PointFilter = field(default_factory=PointFilter)
    legs: dict[str, list[VectorHit]] = field(default_factory=dict)
    #: ADAPTIVE's weighing of the legs (1, 1 for every other strategy)
    leg_weights: LegWeights = field(default_factory=LegWeights)
    #: chunk id -> best dense cosine in this pass, the relevance signal when nothing reranked
    dense_relevance: dict[str, float] = field(default_factory=dict)
    fused: list[VectorHit] = field(default_factory=list)
    reranked: list[VectorHit] = field(default_factory=list)
    rerank_applied: bool = False
    #: the last rerank that scored kept its fallback (read only with ``rerank_applied``)
    rerank_fell_back: bool = False
    contexts: list[RetrievedContext] = field(default_factory=list)
    sufficiency: float = 0.0
    #: the pass the request answers with: the last, unless it lost a leg or a stage (its dense legs
    #: cut at the deadline, say) and found less than an earlier one (None: no pass scored yet)
    best: ScoredPass | None = None
    #: the tags the running pass reported, those an earlier pass reported already too (the
    #: metrics hold each once): whether this pass lost a leg or a stage decides which pass answers
    pass_degraded: set[str] = field(default_factory=set)
    sub_queries_done: bool = False
    #: the sub-queries found something, which was fused into this pass's candidates
    decomposed: bool = False
    #: enrich found hits of documents replaced since they were searched (search them again, once:
    #: ``searched_again``), or copies of one text filled the pool (search a wider one: nodes._wider_pool)
    search_again: bool = False
    searched_again: bool = False
    #: the dense legs' vectors of the last retrieve, in their order (searched again, they are reused)
    pass_vectors: list[np.ndarray] | None = None
    cache_hit: bool = False
    suggestions: list[str] = field(default_factory=list)
    #: known entities the query names (None: not looked up yet)
    entity_matches: list[EntityMatch] | None = None
    #: the graph's version read before they were looked up: a graph trace naming them is as old
    entity_matches_version: str | None = None
    route: RouteDecision | None = None
    tool_results: list[ToolResult] = field(default_factory=list)
    answer: Answer | None = None
    #: a streaming caller's sink (None: not streaming)
    events: EventSink | None = None
    #: what ``options.deadline`` is measured on (the pipeline's clock)
    clock: Callable[[], float] = time.monotonic

    def time_left(self) -> float | None:
        """Seconds until the request's deadline (None: no deadline; negative: past it)."""
        deadline = self.options.deadline
        return None if deadline is None else deadline - self.clock()

    def own_query_vector(self) -> np.ndarray | None:
        """The vector of the caller's query itself, when one is in hand: the cache's, or the dense
        legs' when no rewrite changed the text they searched (then it is a rewrite's)."""
        if self.cache_vector is not None:
            return self.cache_vector
        return self.query_vector if self.query_vector_text == self.options.query else None

    def degrade(self, tag: str) -> None:
        """Report what the answer lacks, once per kind."""
        self.pass_degraded.add(tag)
        if tag not in self.metrics.degraded:
            self.metrics.degraded.append(tag)
