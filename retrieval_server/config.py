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
    workers: int = Field(2, ge=1, le=64, description="threads for model inference and embedded engines")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"

    # Storage
    data_dir: Path = Path("data")
    qdrant_url: str | None = Field(None, description="Qdrant server URL; unset: embedded qdrant-edge")
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

    # Request limits
    query_min_chars: int = Field(1, ge=1)
    query_max_chars: int = Field(4096, ge=1, le=1_000_000)
    top_k_default: int = Field(5, ge=1)
    top_k_max: int = Field(100, ge=1, le=10_000)
    search_top_k_default: int = Field(5, ge=1)
    search_top_k_max: int = Field(20, ge=1, le=1000)
    search_text_chars: int = Field(800, ge=1)
    max_documents_per_request: int = Field(1000, ge=1)
    child_candidates_per_context: int = Field(
        8, ge=1, le=100, description="child hits fetched per requested context (small-to-big)"
    )
    exact_search: bool = Field(False, description="brute-force vector search (recall 1.0, slower)")

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
        if self.query_min_chars > self.query_max_chars:
            raise ValueError("query_min_chars must not exceed query_max_chars")
        if self.qdrant_url and self.qdrant_path:
            raise ValueError("set only one of qdrant_url and qdrant_path")
        if self.mysql_dsn and not self.mysql_dsn.startswith(("mysql://", "mariadb://")):
            raise ValueError("mysql_dsn must start with mysql:// or mariadb://")
        if self.model_dir is not None and not (self.model_dir / "model.onnx").is_file():
            raise ValueError(f"model_dir {self.model_dir} has no model.onnx")
        return self

    @property
    def vector_backend(self) -> Literal["edge", "qdrant"]:
        return "qdrant" if (self.qdrant_url or self.qdrant_path) else "edge"

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
