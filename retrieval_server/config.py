"""One validated settings object, read from RETRIEVAL_* environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob of the service. ``Settings()`` reads the environment and validates it."""

    model_config = SettingsConfigDict(env_prefix="RETRIEVAL_", frozen=True, extra="ignore")

    # Server
    host: str = "0.0.0.0"
    port: int = Field(50051, ge=0, le=65535)
    grace_period_s: float = Field(10.0, ge=0, description="SIGTERM: time to finish in-flight calls")
    max_message_mb: int = Field(64, ge=1, le=2048, description="largest request (ingest) in MiB")
    workers: int = Field(2, ge=1, le=64, description="threads for the embedded engines and other blocking work")
    inference_lanes: int = Field(1, ge=1, le=64, description="model runs (embedding, rerank) at once; each uses embed_threads")
    processes: int = Field(
        1, ge=1, le=64, description="server processes sharing the port (SO_REUSEPORT); embedded storage is then served read-only"
    )
    read_only: bool = Field(False, description="refuse IngestDocuments and DeleteDocuments; serve what is stored")
    metrics_enabled: bool = Field(True, description="serve Prometheus metrics over HTTP")
    metrics_port: int = Field(9464, ge=0, le=65535, description="/metrics port (0: any free port); worker i of several processes: port + i")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"

    # Storage
    data_dir: Path = Path("data")
    qdrant_url: str | None = Field(None, description="Qdrant server URL; unset: embedded qdrant-edge")
    vectors_dir: Path | None = Field(None, description="embedded qdrant-edge folder; unset: <data_dir>/vectors")
    qdrant_path: str | None = Field(
        None, description="qdrant-client local mode (a folder or ':memory:') instead of qdrant-edge"
    )
    qdrant_api_key: str | None = None
    qdrant_collection: str = "retrieval_chunks"
    qdrant_timeout_s: float = Field(30.0, gt=0)
    mysql_dsn: str | None = Field(None, description="mysql://user:pass@host:port/db; unset: SQLite")
    mysql_pool_size: int = Field(8, ge=1, le=256)

    # Embedding model
    model_dir: Path | None = Field(None, description="folder with model.onnx (+ tokenizer.json)")
    embed_batch_size: int = Field(32, ge=1, le=1024)
    embed_threads: int | None = Field(None, ge=1, le=256)
    max_seq_length: int = Field(256, ge=8, le=512)

    # Chunking (tokens of the embedding model's tokenizer)
    parent_chunk_tokens: int = Field(384, ge=16, le=8192)
    child_chunk_tokens: int = Field(128, ge=8, le=512)
    child_overlap_tokens: int = Field(32, ge=0)
    upsert_batch_size: int = Field(256, ge=1, le=10_000)
    title_weight: int = Field(
        2, ge=0, le=10, description="BM25F weight of the document title in the titled keyword vector (at ingestion; 0: no title field)"
    )

    # Request limits
    query_min_chars: int = Field(1, ge=1)
    query_max_bytes: int = Field(
        65_536, ge=1, le=4_194_304, description="longest query in UTF-8 bytes; longer input is truncated for the model (max_seq_length)"
    )
    query_max_terms: int = Field(512, ge=1, le=100_000, description="distinct keyword terms of a query searched (the first ones)")
    top_k_default: int = Field(5, ge=1)
    top_k_max: int = Field(100, ge=1, le=10_000)
    search_top_k_default: int = Field(5, ge=1)
    search_top_k_max: int = Field(20, ge=1, le=1000)
    search_text_chars: int = Field(800, ge=1)
    max_documents_per_request: int = Field(1000, ge=1)
    child_candidates_per_context: int = Field(
        8, ge=1, le=100, description="child hits fetched per requested context (small-to-big)"
    )
    exact_search: bool = Field(False, description="always brute-force vector search")
    exact_search_max_points: int = Field(
        200_000, ge=0, description="brute-force search while the collection holds at most this many points (recall 1.0)"
    )
    hnsw_ef: int = Field(512, ge=1, description="HNSW candidate list size for larger collections")

    # Fusion
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: float = Field(10.0, ge=0, description="RRF constant (chosen on the pydoc-long tuning split; see README)")
    semantic_weight: float = Field(0.7, ge=0)
    keyword_weight: float = Field(0.3, ge=0)
    metadata_weight: float = Field(0.3, ge=0, description="weight of the metadata leg in fusion")
    score_normalization: Literal["minmax", "dbsf"] = "minmax"

    # Retrieval techniques (each can be switched off to measure it; see the README's quality table)
    parent_leg: bool = Field(False, description="search the parents' own vectors as another dense leg (multi-granularity)")
    keyword_title_field: bool = Field(True, description="keyword leg over the BM25F vector with the title as a weighted field")
    prf_docs: int = Field(0, ge=0, le=50, description="RM3 pseudo-relevance feedback: top keyword hits used (0: off)")
    prf_terms: int = Field(10, ge=1, le=100, description="RM3: expansion terms added")
    prf_query_weight: float = Field(0.5, ge=0, le=1, description="RM3: weight of the original query against the feedback terms")
    idf_sample_points: int = Field(
        100_000, ge=0, description="child chunks read for the IDF statistics ADAPTIVE uses (0: ADAPTIVE without IDF)"
    )

    # Rerank
    reranker_model_dir: Path | None = Field(None, description="local ONNX cross-encoder (model.onnx + tokenizer.json)")
    tei_url: str | None = Field(None, description="Text Embeddings Inference server for /rerank")
    tei_timeout_s: float = Field(10.0, gt=0)
    tei_max_batch: int = Field(32, ge=1, description="texts per /rerank call (the server's --max-client-batch-size)")
    rerank_candidates: int = Field(50, ge=1, le=1000, description="fused candidates sent to the reranker")
    rerank_threshold: float = 0.3
    rerank_fallback: int = Field(3, ge=1)
    rerank_activation: Literal["none", "sigmoid"] = "sigmoid"

    # Sufficiency loop and sub-queries
    sufficiency_threshold: float = Field(0.6, ge=0, le=1.01)
    max_iterations: int = Field(2, ge=1, le=5, description="retrieval passes before giving up on sufficiency")
    retry_pool_factor: float = Field(2.0, ge=1.0, description="candidate pool growth per retry")

    # Query analysis
    analysis_timeout_s: float = Field(10.0, gt=0, description="per technique")
    analysis_total_timeout_s: float = Field(30.0, gt=0)
    glossary_path: Path | None = Field(None, description="abbreviation glossary: one 'abbr = expansion' per line")
    llm_provider: Literal["none", "openai", "anthropic", "gemini"] = Field("none", description="default model for every technique")
    llm_rewrite_provider: Literal["default", "none", "openai", "anthropic", "gemini"] = "default"
    llm_reformulate_provider: Literal["default", "none", "openai", "anthropic", "gemini"] = "default"
    llm_hyde_provider: Literal["default", "none", "openai", "anthropic", "gemini"] = "default"
    llm_decompose_provider: Literal["default", "none", "openai", "anthropic", "gemini"] = "default"
    llm_rewrite_temperature: float = Field(0.3, ge=0, le=2)
    llm_reformulate_temperature: float = Field(0.7, ge=0, le=2)
    llm_hyde_temperature: float = Field(0.5, ge=0, le=2)
    llm_decompose_temperature: float = Field(0.4, ge=0, le=2)
    llm_timeout_s: float = Field(10.0, gt=0)
    llm_max_retries: int = Field(2, ge=0, le=10)
    llm_backoff_s: float = Field(0.5, ge=0)
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str | None = None
    openai_model: str = "gpt-4o-mini"
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: str | None = None
    anthropic_model: str = "claude-sonnet-4-5"
    gemini_base_url: str = "https://generativelanguage.googleapis.com"
    gemini_api_key: str | None = None
    gemini_model: str = "gemini-2.5-flash-lite"

    # Semantic cache
    cache_backend: Literal["memory", "redis", "none"] = "memory"
    redis_url: str | None = Field(None, description="redis://host:port/db for the shared cache")
    cache_ttl_s: float = Field(3600.0, gt=0)
    cache_similarity: float = Field(0.95, ge=0, le=1)
    cache_max_entries: int = Field(100_000, ge=1)

    # Store errors
    store_retries: int = Field(2, ge=0, le=10, description="retries of a failed store call before degrading")
    store_backoff_s: float = Field(0.05, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.child_chunk_tokens > self.parent_chunk_tokens:
            raise ValueError("child_chunk_tokens must not exceed parent_chunk_tokens")
        if self.child_overlap_tokens >= self.child_chunk_tokens:
            raise ValueError("child_overlap_tokens must be smaller than child_chunk_tokens")
        if self.child_chunk_tokens > self.max_seq_length:
            raise ValueError("child_chunk_tokens must fit in max_seq_length (children are embedded whole)")
        if self.top_k_default > self.top_k_max:
            raise ValueError("top_k_default must not exceed top_k_max")
        if self.search_top_k_default > self.search_top_k_max:
            raise ValueError("search_top_k_default must not exceed search_top_k_max")
        if self.query_min_chars > self.query_max_bytes:
            raise ValueError("query_min_chars must not exceed query_max_bytes")
        if self.qdrant_url and self.qdrant_path:
            raise ValueError("set only one of qdrant_url and qdrant_path")
        if self.processes > 1 and self.qdrant_path:
            raise ValueError("processes > 1 needs the embedded default or qdrant_url: qdrant-client local mode is one process per folder")
        if self.processes > 1 and self.port == 0:
            raise ValueError("processes > 1 needs a fixed port (the processes share it)")
        if self.processes > 1 and self.qdrant_url and self.cache_backend == "memory":
            raise ValueError("processes > 1 with writable shared storage needs cache_backend 'redis' or 'none': "
                             "an in-process cache would miss invalidations made by the other processes")
        if self.mysql_dsn and not self.mysql_dsn.startswith(("mysql://", "mariadb://")):
            raise ValueError("mysql_dsn must start with mysql:// or mariadb://")
        if self.model_dir is not None and not (self.model_dir / "model.onnx").is_file():
            raise ValueError(f"model_dir {self.model_dir} has no model.onnx")
        if self.reranker_model_dir is not None and not (self.reranker_model_dir / "model.onnx").is_file():
            raise ValueError(f"reranker_model_dir {self.reranker_model_dir} has no model.onnx")
        if self.cache_backend == "redis" and not self.redis_url:
            raise ValueError("cache_backend 'redis' needs redis_url")
        if self.glossary_path is not None and not self.glossary_path.is_file():
            raise ValueError(f"glossary_path {self.glossary_path} does not exist")
        return self

    def technique_provider(self, technique: str) -> str:
        """The provider a query-analysis technique uses ('none': classical)."""
        chosen = getattr(self, f"llm_{technique}_provider")
        return self.llm_provider if chosen == "default" else chosen

    @property
    def vector_backend(self) -> Literal["edge", "qdrant"]:
        return "qdrant" if (self.qdrant_url or self.qdrant_path) else "edge"

    @property
    def embedded_vectors_dir(self) -> Path:
        return self.vectors_dir or self.data_dir / "vectors"

    @property
    def shares_writable_storage(self) -> bool:
        """Whether several processes can all write: only with a Qdrant server (the embedded engines lock their folder)."""
        return self.qdrant_url is not None

    @property
    def metadata_backend(self) -> Literal["sqlite", "mysql"]:
        return "mysql" if self.mysql_dsn else "sqlite"


class ConfigError(Exception):
    """An invalid setting, with one line per problem naming the environment variable."""


def load_settings(**overrides: object) -> Settings:
    """Read the environment (plus ``overrides``); raise :class:`ConfigError` on invalid values."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            name = f"RETRIEVAL_{field.upper()}" if err["loc"] else "settings"
            lines.append(f"{name}: {err['msg']}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None
