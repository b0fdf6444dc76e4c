"""One validated settings object, read from RETRIEVAL_* environment variables."""

from __future__ import annotations

import difflib
import errno
import hashlib
import ipaddress
import json
import os
import re
import socket
import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from retrieval_server.backends.http_body import without_userinfo
from retrieval_server.event_loop import EventLoop
from retrieval_server.request_limits import SEARCH_TOP_K_LIMIT, TOP_K_LIMIT

if TYPE_CHECKING:
    from retrieval_server.api.tokens import KeySet


#: the URL settings and the schemes each takes
URL_SCHEMES = {
    "jwt_jwks_url": ("http", "https"), "tei_url": ("http", "https"), "qdrant_url": ("http", "https"),
    "openai_base_url": ("http", "https"), "anthropic_base_url": ("http", "https"), "gemini_base_url": ("http", "https"),
    "events_url": ("amqp", "amqps"), "mysql_dsn": ("mysql", "mariadb"), "redis_url": ("redis", "rediss", "unix"),
}


def url_problem(value: str, schemes: tuple[str, ...]) -> str | None:
    """Why ``value`` is not a URL of one of ``schemes`` naming a host (a socket's path, for unix);
    None when it is one. Checked at start-up: a malformed one failed each call that used it."""
    # The parser's own message is never passed on: it quotes the part it failed on, which for a
    # password holding / ? or # is a piece of the password ("Port could not be cast to integer
    # value as 'Zk3'"), and misleads as much, the URL ending at that character.
    try:
        parts = urlsplit(value)
    except ValueError:
        return "is not a URL (an unclosed '[' around its host, or characters in it that are not a host name's)"
    try:
        parts.port  # noqa: B018 - raises on a port that is no number, or out of range
    except ValueError:
        return ("is not a URL: the ':' after its host is not followed by a port number (0 to 65535); "
                "percent-encode any / ? # @ : in its user name or password")
    if parts.scheme not in schemes:
        return f"must start with {' or '.join(f'{s}://' for s in schemes)}"
    if parts.scheme != "unix" and "@" not in parts.netloc and "@" in value.partition("//")[2]:
        # user:83/kQx9@db parses as the host "user" on port 83: a password whose digits come before
        # its '/' passed the port check and sent the server to a host named after the user.
        return ("is not a URL: an '@' comes after a '/', '?' or '#' that ended its host; "
                "percent-encode any / ? # @ : in its user name or password")
    if not (parts.path if parts.scheme == "unix" else parts.hostname):
        return "names no host"
    return None


#: what Qdrant refuses in a collection name
QDRANT_NAME_FORBIDDEN = ("<", ">", ":", '"', "/", "\\", "|", "?", "*", "\0", "\x1f")


#: the longest duration a setting takes (a few take less): no wait means anything past it
DAY_S = 86_400


def _file_in_the_way(path: Path) -> Path | None:
    """What keeps ``path`` from being a folder: a file there or at a folder on the way to it. None
    when it is a folder or can be made one (or cannot be looked at: opening it says why)."""
    for where in (path, *path.parents):
        try:
            if where.exists():
                return None if where.is_dir() else where
        except OSError:
            return None
    return None


#: what a request may carry besides its largest document or its query (ids, title, URL, metadata,
#: grantees, filters): max_document_bytes and query_max_bytes must each fit in max_message_mb with it
MESSAGE_ROOM_BYTES = 1024 * 1024


class Settings(BaseSettings):
    """Every knob of the service. ``Settings()`` reads the environment and validates it."""

    # No setting means anything by inf or nan, and the code cannot take them: a grace period of inf
    # (or of 1e10 s) would crash the supervisor's shutdown (Process.join), a Redis TTL of inf every
    # cache write, and a rerank threshold of nan would keep no score; so they are out of range. Nor
    # do huge finite values, which crashed the same way at run time (a Redis TTL of 1e16 s, a retry
    # pool factor of 1e300, an HNSW ef of 2**64): every number has an upper bound, and a C int's
    # where one is passed on (gRPC's message sizes).
    model_config = SettingsConfigDict(env_prefix="RETRIEVAL_", frozen=True, extra="ignore", allow_inf_nan=False)

    # Server
    host: str = Field(
        "127.0.0.1", min_length=1, description="listen address; default: loopback with auth_mode 'none', all interfaces otherwise"
    )
    port: int = Field(50051, ge=0, le=65535)
    grace_period_s: float = Field(10.0, ge=0, le=86_400, description="SIGTERM: time to finish in-flight calls (at most a day)")
    # At least 2: of 1 MiB, MESSAGE_ROOM_BYTES leaves no byte for a document or a query.
    max_message_mb: int = Field(64, ge=2, le=2047, description="largest request (ingest) in MiB")
    max_response_bytes: int = Field(
        4 * 1024 * 1024 - 64 * 1024, ge=65_536, le=2**31 - 1,
        description="largest Query or Search answer: its last contexts or results go past it (gRPC clients read 4 MiB by default)",
    )
    max_concurrent_calls: int = Field(
        1000, ge=1, le=1_000_000,
        description="calls in progress at once in a process, on every connection (streams and grpc.health.v1 included); one more is "
        "answered RESOURCE_EXHAUSTED at once",
    )
    max_calls_per_peer: int = Field(
        250, ge=1, le=1_000_000,
        description="calls in progress at once from one peer address (every connection of it together); one more is answered "
        "RESOURCE_EXHAUSTED naming this setting. Behind a proxy every caller shares its address: raise it to max_concurrent_calls there",
    )
    request_read_s: float = Field(
        10.0, gt=0, le=3600,
        description="how long a unary call's request message may take to arrive once the call opened; one later is answered "
        "DEADLINE_EXCEEDED",
    )
    stream_stall_s: float = Field(
        60.0, gt=0, le=3600, description="how long a StreamQuery message may wait for its reader to take it before the stream is given up",
    )
    workers: int = Field(2, ge=1, le=64, description="threads for the embedded engines and other blocking work")
    inference_lanes: int = Field(1, ge=1, le=64, description="model runs (embedding, rerank) at once; each uses embed_threads")
    processes: int = Field(
        1, ge=1, le=64, description="server processes sharing the port (SO_REUSEPORT); embedded storage is then served read-only"
    )
    worker_heartbeat_s: float = Field(
        5.0, ge=0.1, le=3600,
        description="with several processes: how often each worker's event loop reports to the supervisor, which kills and restarts "
        "a worker silent for 6 times as long (hung)",
    )
    worker_start_timeout_s: float = Field(
        600.0, ge=1, le=DAY_S,
        description="with several processes: how long a restarted worker may take to report serving before it is killed and "
        "started again later (a start that hangs sent no heartbeat to miss)",
    )
    read_only: bool = Field(False, description="refuse IngestDocuments and DeleteDocuments; serve what is stored")
    metrics_enabled: bool = Field(True, description="serve Prometheus metrics over HTTP")
    health_port: int | None = Field(
        None, ge=1, le=65535, description="also serve grpc.health.v1 alone, plaintext, on this port (probes when the main port needs TLS)"
    )
    health_interval_s: float = Field(
        5.0, gt=0, le=3600, description="how often grpc.health.v1's RetrievalService status is brought in line with the required components (the stores; a JWKS URL's keys)"
    )
    metrics_port: int = Field(9464, ge=0, le=65535, description="/metrics port (0: any free port); with several processes the supervisor serves all of them here")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    event_loop: EventLoop = Field("uvloop", description="a server process's event loop: uvloop, or the standard library's asyncio")

    metrics_host: str | None = Field(None, description="/metrics listen address; unset: the gRPC listen address")
    metrics_tls: bool = Field(False, description="serve /metrics over HTTPS with the gRPC port's certificate (and client CA)")

    # Transport security and caller identity (README, Authentication)
    tls_cert: Path | None = Field(None, description="PEM certificate chain for the gRPC port; set with tls_key to serve TLS")
    tls_key: Path | None = Field(None, description="PEM private key of tls_cert")
    tls_client_ca: Path | None = Field(None, description="PEM CA bundle: clients must present a certificate it signed (mutual TLS)")
    auth_mode: Literal["none", "jwt", "gateway"] = Field(
        "none", description="none: x-user-id/x-user-role/x-user-groups headers trusted (development, loopback only); jwt: verified bearer tokens; "
        "gateway: headers trusted from allow-listed mutual-TLS peers only"
    )
    allow_unauthenticated_remote: bool = Field(
        False, description="auth_mode 'none' on a non-loopback address (anyone who reaches the port can claim any role)"
    )
    jwt_secret: str | None = Field(None, min_length=32, repr=False, description="HS256/384/512 shared secret (at least 32 characters)")
    jwt_jwks_file: Path | None = Field(None, description="JWKS JSON file with the public keys (RS*, PS*, ES*, EdDSA)")
    jwt_jwks_url: str | None = Field(None, description="JWKS URL (http or https), fetched, cached, refreshed on an unknown kid")
    jwt_jwks_allow_http: bool = Field(
        False, description="jwt_jwks_url may be http:// on a host that is not loopback (anyone on the path can swap the keys)"
    )
    jwt_issuer: str | None = Field(None, description="required 'iss' claim")
    jwt_audience: str | None = Field(None, description="required 'aud' claim")
    jwt_algorithms: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="accepted signing algorithms, comma-separated; unset: HS256 with a secret, RS256,ES256,EdDSA with keys"
    )
    jwt_user_claim: str = Field("sub", min_length=1, description="claim (or dotted path) holding the user id")
    jwt_role_claim: str = Field("role", min_length=1, description="claim or dotted path (e.g. realm_access.roles) holding the role(s)")
    jwt_role_map: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict, description="IdP role name to SUPER_ADMIN/ADMIN/USER, comma-separated pairs name=ROLE"
    )
    jwt_groups_claim: str | None = Field(None, description="claim (or dotted path) holding groups; documents granted to group:<name> become readable")
    jwt_leeway_s: float = Field(30.0, ge=0, le=600, description="clock skew allowed on exp and nbf")
    jwt_jwks_cache_s: float = Field(300.0, gt=0, le=DAY_S, description="how long fetched JWKS keys are used before the next fetch")
    jwt_jwks_min_refresh_s: float = Field(30.0, ge=0, le=DAY_S, description="an unknown kid refetches the JWKS at most this often")
    gateway_peers: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="gateway mode: certificate names (SAN DNS/URI or CN) of the peers whose identity headers are trusted, comma-separated"
    )

    # Traces and analytics events (README, Operations)
    traces_exporter: Literal["none", "otlp", "console"] = Field(
        "none", description="none: tracing off; otlp: OpenTelemetry over OTLP/gRPC, configured by the OTEL_* variables; console: spans on stdout"
    )
    events_url: str | None = Field(None, description="amqp:// or amqps:// URL of RabbitMQ for RetrievalCompleted events; unset: no events")
    events_exchange: str = Field("retrieval.events", min_length=1, max_length=255, description="topic exchange (declared durable)")
    events_routing_key: str = Field("retrieval.completed", min_length=1, max_length=255)
    events_buffer: int = Field(10_000, ge=1, le=1_000_000, description="events held while the broker is slow or down, per worker process; beyond: dropped, counted")
    events_buffer_mb: int = Field(64, ge=1, le=65_536, description="what those events may weigh in memory, in MiB per worker process (their query texts, mostly)")
    events_query: Literal["hash", "text", "none"] = Field("hash", description="how the query travels in events: SHA-256 hash, text, or not at all")
    events_hash_key: str | None = Field(None, repr=False, description="key for HMAC-SHA-256 query hashes (unset: plain SHA-256)")
    events_publish_timeout_s: float = Field(5.0, gt=0, le=300, description="broker confirm timeout; also the flush time at shutdown")

    # Storage
    data_dir: Path = Path("data")
    qdrant_url: str | None = Field(None, description="Qdrant server URL; unset: embedded qdrant-edge")
    vectors_dir: Path | None = Field(None, description="embedded qdrant-edge folder; unset: <data_dir>/vectors")
    qdrant_path: str | None = Field(
        None, description="qdrant-client local mode (a folder or ':memory:') instead of qdrant-edge: a stand-in for tests, "
                          "computed in Python (over 100 ms a search at 5,000 points)"
    )
    qdrant_api_key: str | None = Field(None, repr=False)
    qdrant_ca: Path | None = Field(
        None, description="PEM CA bundle that verifies an https qdrant_url's certificate (a cluster's private CA); unset: the system's CAs"
    )
    qdrant_collection: str = Field("retrieval_chunks", max_length=255, description="Qdrant collection name (none of < > : \" / \\ | ? *)")
    # Whole seconds: qdrant-client takes an int (0.5 became 0, and every call failed).
    qdrant_timeout_s: int = Field(30, ge=1, le=3600, description="Qdrant request timeout, in whole seconds")
    mysql_dsn: str | None = Field(None, description="mysql://user:pass@host:port/db, ?ssl_ca=/path/ca.pem for TLS; unset: SQLite")
    mysql_pool_size: int = Field(8, ge=1, le=256)
    mysql_timeout_s: float = Field(10.0, gt=0, le=3600, description="MySQL connect, read and pool-wait timeout: a server that stops answering, or a pool with every connection busy, fails the call")
    min_free_disk_mb: int = Field(
        128, ge=0, le=2**30, description="embedded stores: refuse writes (and start-up) while the volume has less free space"
    )

    # Embedding model
    model_dir: Path | None = Field(None, description="folder with model.onnx (+ tokenizer.json)")
    model: Literal["auto", "int8", "fp32"] = Field(
        "auto", description="all-MiniLM-L6-v2 build for a new index (ignored when model_dir is set); auto: the faster on this CPU, measured"
    )
    model_cache_dir: Path | None = Field(None, description="where the fp32 model is built on first use, and model files' digests are remembered; unset: the user cache folder")
    embed_batch_size: int = Field(32, ge=1, le=1024)
    embed_threads: int | None = Field(None, ge=1, le=256)
    max_seq_length: int = Field(256, ge=8, le=512)

    # Chunking (tokens of the embedding model's tokenizer)
    parent_chunk_tokens: int = Field(384, ge=16, le=8192)
    child_chunk_tokens: int = Field(128, ge=8, le=512)
    child_overlap_tokens: int = Field(32, ge=0)
    upsert_batch_size: int = Field(1024, ge=1, le=10_000)
    title_weight: int = Field(
        2, ge=0, le=10, description="BM25F weight of the document title in the titled keyword vector (at ingestion; 0: no title field)"
    )

    # Request limits
    query_min_chars: int = Field(1, ge=1)
    query_max_bytes: int = Field(
        65_536, ge=1, le=4_194_304, description="longest query in UTF-8 bytes; longer input is truncated for the model (max_seq_length)"
    )
    query_max_terms: int = Field(512, ge=1, le=100_000, description="distinct keyword terms of a query searched (the first ones)")
    query_max_windows: int = Field(
        8, ge=1, le=64, description="child-sized windows of a long query embedded and searched (the first ones): bounds what one query costs"
    )
    top_k_default: int = Field(5, ge=1)
    top_k_max: int = Field(100, ge=1, le=TOP_K_LIMIT)
    search_top_k_default: int = Field(5, ge=1)
    search_top_k_max: int = Field(20, ge=1, le=SEARCH_TOP_K_LIMIT)
    search_text_chars: int = Field(800, ge=1, le=1_000_000)
    max_documents_per_request: int = Field(1000, ge=1, le=1_000_000)
    # At most what the largest max_message_mb holds beside MESSAGE_ROOM_BYTES: a larger one fits in none.
    max_document_bytes: int = Field(
        16 * 1024 * 1024, ge=1, le=2047 * 1024 * 1024 - MESSAGE_ROOM_BYTES, description="largest file (raw bytes) one ingest input may carry; larger: INVALID_ARGUMENT"
    )
    child_candidates_per_context: int = Field(
        8, ge=1, le=100, description="child hits fetched per requested context (small-to-big)"
    )
    exact_search: bool = Field(False, description="always brute-force vector search")
    exact_search_max_points: int = Field(
        200_000, ge=0, le=10**9, description="brute-force search while the collection holds at most this many points (recall 1.0)"
    )
    hnsw_ef: int = Field(512, ge=1, le=100_000, description="HNSW candidate list size for larger collections")

    # Fusion
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: float = Field(10.0, ge=0, le=1e6, description="RRF constant (chosen on the pydoc-long tuning split; see README)")
    semantic_weight: float = Field(0.7, ge=0, le=1e6)
    keyword_weight: float = Field(0.3, ge=0, le=1e6)
    metadata_weight: float = Field(0.3, ge=0, le=1e6, description="weight of the metadata leg in fusion")
    score_normalization: Literal["minmax", "dbsf"] = "minmax"
    long_query_windows: bool = Field(
        True,
        description="a query longer than a child chunk is also cut into child-sized windows, each searched "
        "as a dense leg and fused per parent with the whole query's search",
    )
    fusion_unit: Literal["auto", "chunk", "parent"] = Field(
        "chunk",
        description="what the legs' ranks are fused for: chunk, parent (each leg ranks a parent by its best child), "
        "or auto, per parent for a query longer than a child chunk and per chunk otherwise",
    )

    # Retrieval techniques (each can be switched off to measure it; see the README's quality table)
    parent_leg: bool = Field(True, description="index the parents' own vectors and search them as another dense leg (multi-granularity); decided when an index is created: an index built without them keeps the leg off, and off, a new index embeds no parent (about a third less embedding)")
    document_leg: bool = Field(False, description="search each document's first window (its first parent's vector: title and the first 256 tokens) as another dense leg; needs parent vectors, which an index built with this on holds")
    dense_fusion: Literal["max_cosine", "rrf"] = Field(
        "max_cosine",
        description="how the dense granularities searched (children, and parents or documents when their legs are on) combine: "
        "max_cosine, each chunk's best cosine at any granularity (one leg), or rrf, legs of their own sharing the dense weight",
    )
    document_crossover_words: float = Field(25.0, ge=0, le=10_000, description="with the document leg and DENSE_FUSION=rrf: a query of n words gives it n / (n + this) of the dense weight, the finer legs the rest (0: half)")
    document_evidence: float = Field(0.0, ge=0, le=1, description="after fusion, each chunk gains this share of the fused scores of its document's next two best chunks (0: off)")
    child_title: bool = Field(False, description="embed each child chunk with its document title in front (contextual chunks; the returned text is unchanged); applies to documents ingested from then on")
    keyword_title_field: bool = Field(True, description="keyword leg over the BM25F vector with the title as a weighted field")
    metadata_stopwords: bool = Field(False, description="metadata search keeps stop words among its terms: a few thousandths of nDCG@10 on the tuning splits for several times the full-text search's CPU (see README)")
    prf_docs: int = Field(0, ge=0, le=50, description="RM3 pseudo-relevance feedback: top keyword hits used (0: off)")
    prf_terms: int = Field(10, ge=1, le=100, description="RM3: expansion terms added")
    prf_query_weight: float = Field(0.5, ge=0, le=1, description="RM3: weight of the original query against the feedback terms")
    dense_prf_docs: int = Field(0, ge=0, le=20, description="dense pseudo-relevance feedback (Rocchio): nearest child chunks whose centroid moves the query vector for a second dense search, fused with the others (0: off)")
    dense_prf_weight: float = Field(0.6, ge=0, le=1, description="dense feedback: the centroid's share of the moved query vector")
    idf_sample_points: int = Field(
        100_000, ge=0, le=10**9, description="child chunks read for the IDF statistics ADAPTIVE uses (0: ADAPTIVE without IDF)"
    )

    # Rerank
    reranker_model_dir: Path | None = Field(None, description="local ONNX cross-encoder (model.onnx + tokenizer.json)")
    tei_url: str | None = Field(None, description="Text Embeddings Inference server for /rerank")
    tei_timeout_s: float = Field(10.0, gt=0, le=3600)
    tei_max_batch: int = Field(32, ge=1, le=100_000, description="texts per /rerank call (the server's --max-client-batch-size)")
    rerank_candidates: int = Field(50, ge=1, le=1000, description="fused candidates sent to the reranker")
    rerank_max_tokens: int = Field(
        512, ge=16, le=8192,
        description="local cross-encoder: tokens per (query, passage) pair, the passage truncated to fit (the query to half); "
        "at most the model's own limit (512 for ms-marco MiniLM); TEI truncates at its --max-input-length",
    )
    # Raw logits of a cross-encoder lie within about ±15; with the sigmoid the scores are 0 to 1 (_consistent).
    rerank_threshold: float = Field(0.3, ge=-1000, le=1000, description="keep reranked scores at least this high (0 to 1 with the sigmoid)")
    rerank_fallback: int = Field(
        3, ge=1, le=1000, description="when no reranked score reaches the threshold: the best hits, until they cover this many contexts"
    )
    rerank_activation: Literal["none", "sigmoid"] = "sigmoid"
    rerank_budget_ms: float = Field(
        0.0, ge=0, le=600_000,
        description="a request's time for reranking: candidates are capped at what fits at the model's measured rate (never below top_k); 0: no cap",
    )
    rerank_pair_cache: int = Field(10_000, ge=0, le=10_000_000, description="(query, text) scores remembered, so a repeated pair is not scored again; 0: off")

    # Sufficiency loop and sub-queries
    sufficiency_threshold: float = Field(0.6, ge=0, le=1.01)
    max_iterations: int = Field(2, ge=1, le=5, description="retrieval passes before giving up on sufficiency")
    retry_pool_factor: float = Field(2.0, ge=1.0, le=100, description="candidate pool growth per retry")

    # Query analysis
    analysis_timeout_s: float = Field(10.0, gt=0, le=3600, description="per technique")
    analysis_total_timeout_s: float = Field(30.0, gt=0, le=3600)
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
    llm_timeout_s: float = Field(10.0, gt=0, le=3600)
    llm_max_retries: int = Field(2, ge=0, le=10)
    llm_backoff_s: float = Field(0.5, ge=0, le=60)
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str | None = Field(None, repr=False)
    openai_model: str = "gpt-4o-mini"
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: str | None = Field(None, repr=False)
    anthropic_model: str = "claude-sonnet-4-5"
    gemini_base_url: str = "https://generativelanguage.googleapis.com"
    gemini_api_key: str | None = Field(None, repr=False)
    gemini_model: str = "gemini-2.5-flash-lite"

    # Knowledge graph (entities and relations learned at ingestion; the graph leg at query time)
    graph_enabled: bool = Field(True, description="extract entities and relations when documents are ingested")
    graph_expansion: bool = Field(True, description="add the graph leg to HYBRID and ADAPTIVE when the query names known entities")
    graph_hop_penalties: Annotated[tuple[float, ...], NoDecode] = Field(
        (1.0, 0.77, 0.63), min_length=1, max_length=4, description="score factor of each hop (JSON list); hops = its length - 1"
    )
    graph_max_chunks_per_hop: int = Field(20, ge=1, le=1000, description="chunks each hop may add to the graph leg")
    graph_max_neighbors: int = Field(25, ge=1, le=1000, description="entities each hop expands to, and entities a query's matches seed it with")
    graph_fuzzy_threshold: float = Field(88.0, ge=50, le=100, description="rapidfuzz ratio (50-100) for a fuzzy entity match")
    graph_weight: float = Field(0.7, ge=0, le=1e6, description="weight of the graph leg in fusion")
    llm_graph_provider: Literal["default", "none", "openai", "anthropic", "gemini"] = "default"
    llm_graph_temperature: float = Field(0.0, ge=0, le=2)

    # Router, tools and answers (Mode GENERATION)
    llm_router_provider: Literal["default", "none", "openai", "anthropic", "gemini"] = "default"
    llm_router_temperature: float = Field(0.0, ge=0, le=2)
    llm_answer_provider: Literal["default", "none", "openai", "anthropic", "gemini"] = "default"
    llm_answer_temperature: float = Field(0.2, ge=0, le=2)
    tool_timeout_s: float = Field(5.0, gt=0, le=3600, description="per tool call")
    answer_max_sentences: int = Field(3, ge=1, le=20, description="sentences in an extractive answer")
    answer_min_similarity: float = Field(
        0.3, ge=-1, le=1, description="cosine a sentence needs to support an extractive answer (without a cross-encoder)"
    )
    answer_max_tokens: int = Field(512, ge=16, le=8192, description="longest generated answer")
    answer_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="longest a model may take to write an answer (the request's deadline may cut it sooner); then extractive"
    )

    # Semantic cache
    cache_backend: Literal["memory", "redis", "none"] = "memory"
    redis_url: str | None = Field(None, description="redis://host:port/db for the shared cache")
    cache_ttl_s: float = Field(3600.0, gt=0, le=30 * DAY_S)
    cache_similarity: float = Field(0.95, ge=0, le=1)
    cache_max_entries: int = Field(100_000, ge=1, le=10**8)
    cache_max_mb: int = Field(256, ge=1, le=1_048_576, description="in-memory cache: the text its answers hold, in MiB of characters")
    cache_served_answers: int = Field(
        1024, ge=0, le=1_000_000,
        description="exact repeats answered with the bytes already sent, before the workflow (per process; 0: off)",
    )
    cache_served_answers_mb: int = Field(64, ge=1, le=1_048_576, description="the bytes those answers hold, in MiB (per process)")
    cache_timeout_s: float = Field(0.25, gt=0, le=60, description="Redis cache: longest wait per call before the cache is skipped")
    redis_key_prefix: str = Field("rc", min_length=1, max_length=64, description="Redis cache: key prefix (one per index); keys go under <prefix>:<a digest of the answer-shaping settings>")

    write_lease_s: float = Field(
        600.0, ge=0, le=DAY_S, description="shared storage: a pending write older than this is abandoned and recovered, at start-up and every half lease"
    )

    # Optional dependencies (Redis cache, TEI, LLM): each has its own circuit breaker
    breaker_failures: int = Field(3, ge=1, le=10_000, description="consecutive failures of an optional dependency that open its circuit breaker")
    breaker_cooldown_s: float = Field(5.0, ge=0, le=DAY_S, description="open-circuit time before one trial call to the dependency")

    # Store errors
    store_retries: int = Field(2, ge=0, le=10, description="retries of a failed store call before degrading")
    store_backoff_s: float = Field(0.05, ge=0, le=60)

    # Deadlines
    deadline_reserve_ms: float = Field(
        50.0, ge=0, le=60_000,
        description="time a request with a deadline keeps for what follows retrieval: legs still running at the deadline "
        "less this (or less half the time left, if that is less) are abandoned; reranking leaves enrichment at least half of it",
    )

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # repr() and str() are what a log line or a traceback shows of the settings: the secrets
        # are left out (repr=False), and so are the user and password a URL may hold.
        for name, value in super().__repr_args__():
            yield name, without_userinfo(value) if name in URL_SCHEMES and isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _listen_where_safe(cls, data: Any) -> Any:
        # Without authentication the default is loopback; with it, every interface. Only when unset:
        # an empty RETRIEVAL_HOST (a template that rendered to nothing) is refused by _not_empty, it
        # was taken as unset, and with jwt the server listened on every interface.
        if isinstance(data, dict) and data.get("host") is None:
            data = {**data, "host": "127.0.0.1" if str(data.get("auth_mode") or "none") == "none" else "0.0.0.0"}
        return data

    @field_validator("host", "metrics_host", mode="after")
    @classmethod
    def _bare_address(cls, value: str | None) -> str | None:
        # "[::1]" as "::1": sockets take the bare address, and gRPC's target is made of it by
        # listen_address (the bracketed form failed in one, the bare form in the other).
        return value[1:-1] if value and value.startswith("[") and value.endswith("]") else value

    @field_validator(
        "jwt_issuer", "jwt_audience", "jwt_groups_claim", "events_hash_key", "qdrant_api_key", "qdrant_collection",
        "openai_model", "anthropic_model", "gemini_model", "openai_base_url", "anthropic_base_url", "gemini_base_url",
        "tls_cert", "tls_key", "tls_client_ca", "qdrant_ca", "jwt_jwks_file", "data_dir", "vectors_dir", "model_dir", "model_cache_dir",
        "reranker_model_dir", "glossary_path", "host", mode="before",
    )
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        # An empty value (a secret or a template that rendered to nothing) was taken as one: an
        # issuer or audience of "" refused every token as lacking the claim, a hash key of "" hashed
        # without a key, an API key of "" was sent, and a model or collection of "" failed each call.
        # A path of "" is Path("."), so before the conversion: the data went to the working
        # directory, and a missing file was reported as '.'.
        if value == "":
            raise ValueError("is empty: set a value, or leave the variable unset")
        return value

    @field_validator(
        "qdrant_url", "tei_url", "events_url", "redis_url", "mysql_dsn", "jwt_jwks_url", "qdrant_path", "metrics_host",
        "openai_api_key", "anthropic_api_key", "gemini_api_key", mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        # An optional URL, path or key set to nothing means none (README): kept as "", it passed
        # truth tests as unset but not `is None` ones, so two processes over embedded storage took
        # an empty RETRIEVAL_QDRANT_URL for a shared server and both opened the folder for writing.
        return None if value == "" else value

    @field_validator("qdrant_collection", mode="after")
    @classmethod
    def _qdrant_name(cls, value: str) -> str:
        # Qdrant refuses these in a collection name (its validate_collection_name): found at start-up
        # rather than when the collection is first created.
        if bad := [c for c in QDRANT_NAME_FORBIDDEN if c in value]:
            raise ValueError(f"{value!r} holds {', '.join(map(repr, bad))}: a Qdrant collection name may hold none of "
                             "< > : \" / \\ | ? * \\0 \\x1f")
        return value

    @field_validator("jwt_algorithms", "gateway_peers", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return tuple(x.strip() for x in value.split(",") if x.strip()) if isinstance(value, str) else value

    @field_validator("graph_hop_penalties", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        # Decoded here, not by the settings source: its JSON error is a SettingsError that escapes
        # load_settings as a traceback, where a ValueError is reported naming the variable.
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError(f"expected a JSON list of numbers such as [1.0, 0.77, 0.63], got '{value}'") from None

    @field_validator("jwt_role_map", mode="before")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        out = {}
        for pair in filter(None, (x.strip() for x in value.split(","))):
            name, sep, role = pair.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"expected name=ROLE pairs, got '{pair}'")
            name, role = name.strip(), role.strip().upper()
            # The last one won without a word: which role the name had depended on the order.
            if out.setdefault(name, role) != role:
                raise ValueError(f"'{name}' is mapped to both {out[name]} and {role}: map each name once")
        return out

    # Defined last, so run first of the validators before parsing (they run in the reverse order):
    # the lists' own see a value already checked.
    @field_validator("*", mode="before")
    @classmethod
    def _unpadded(cls, value: Any) -> Any:
        # White space around a value is no part of it, but was taken as part: an issuer with the
        # newline of the file a secret was made from started the server, which then refused every
        # token as from another issuer; a folder of " " was a folder named so. A number took it
        # (the parser strips it) and a choice or yes/no was refused as no choice ("Input should be
        # none, jwt or gateway" for "jwt\n"): the same value, told apart by its type alone.
        if not isinstance(value, str) or value == value.strip():
            return value
        if not value.strip():
            raise ValueError("is only white space: set a value, or leave the variable unset")
        raise ValueError("has leading or trailing white space (a file's newline?): remove it")

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.child_chunk_tokens > self.parent_chunk_tokens:
            raise ValueError("child_chunk_tokens must not exceed parent_chunk_tokens")
        if self.child_overlap_tokens >= self.child_chunk_tokens:
            raise ValueError("child_overlap_tokens must be smaller than child_chunk_tokens")
        # [CLS] and [SEP] are two of the tokens the model reads: a child of max_seq_length tokens
        # lost its last two words from its vector.
        if self.child_chunk_tokens > self.max_seq_length - 2:
            raise ValueError(f"child_chunk_tokens ({self.child_chunk_tokens}) must be at most max_seq_length - 2 "
                             f"({self.max_seq_length - 2}): the model reads max_seq_length tokens, [CLS] and [SEP] among "
                             "them, and children are embedded whole")
        if self.top_k_default > self.top_k_max:
            raise ValueError("top_k_default must not exceed top_k_max")
        if self.search_top_k_default > self.search_top_k_max:
            raise ValueError("search_top_k_default must not exceed search_top_k_max")
        if self.query_min_chars > self.query_max_bytes:
            raise ValueError("query_min_chars must not exceed query_max_bytes")
        # A document or query over its own limit but within max_message_mb is refused INVALID_ARGUMENT
        # naming the limit; one over max_message_mb is refused by gRPC itself (RESOURCE_EXHAUSTED,
        # "Received message larger than max"). So the field's limit plus the rest of its request
        # (id, title, metadata, grantees, filters: MESSAGE_ROOM_BYTES) must fit in one message.
        message_bytes = self.max_message_mb * 1024 * 1024
        for name in ("max_document_bytes", "query_max_bytes"):
            limit = getattr(self, name)
            if limit > message_bytes - MESSAGE_ROOM_BYTES:
                raise ValueError(
                    f"{name} ({limit}) does not fit in max_message_mb ({self.max_message_mb} MiB) with the 1 MiB the rest "
                    f"of its request may take, so gRPC would refuse it as RESOURCE_EXHAUSTED before the limit is checked: "
                    f"raise max_message_mb to at least {-(-(limit + MESSAGE_ROOM_BYTES) // (1024 * 1024))} or lower "
                    f"{name} to at most {message_bytes - MESSAGE_ROOM_BYTES}")
        if self.rerank_activation == "sigmoid" and not 0 <= self.rerank_threshold <= 1:
            raise ValueError(f"rerank_threshold {self.rerank_threshold} is no probability: with rerank_activation 'sigmoid' "
                             "scores lie in [0, 1], so must the threshold (-1000 to 1000 with 'none', raw logits)")
        if self.semantic_weight == 0 and self.keyword_weight == 0:
            # Under RRF the metadata and graph legs are weighed relative to the stronger of the two:
            # with both 0 they outweighed the vector legs by 1e9, and callers got scores of 1e7.
            raise ValueError("semantic_weight and keyword_weight are both 0: set one above 0 (the metadata and graph legs' RRF "
                             "weights are relative to the larger)")
        if self.qdrant_url and self.qdrant_path:
            raise ValueError("set only one of qdrant_url and qdrant_path")
        # An empty QDRANT_URL reads as unset: rendered so beside its key, the embedded store served
        # instead, each replica an index of its own, and the key was ignored.
        if self.qdrant_api_key is not None and not self.qdrant_url:
            raise ValueError("qdrant_api_key is set but qdrant_url is not, and only a Qdrant server reads it: "
                             "set RETRIEVAL_QDRANT_URL, or unset RETRIEVAL_QDRANT_API_KEY")
        if self.processes > 1 and self.qdrant_path:
            raise ValueError("processes > 1 needs the embedded default or qdrant_url: qdrant-client local mode is one process per folder")
        if self.processes > 1 and self.port == 0:
            raise ValueError("processes > 1 needs a fixed port (the processes share it)")
        # Found here rather than at bind time, where it read as "address already in use" without
        # naming the setting (and, with several processes, without naming the health port at all).
        if self.health_port is not None and self.health_port == self.port:
            raise ValueError(f"port and health_port are both {self.port}: the health service needs a port of its own")
        if self.metrics_enabled and self.metrics_port and self.metrics_port == self.port and _overlap(self.metrics_host or self.host, self.host):
            raise ValueError(f"port and metrics_port are both {self.port}: /metrics needs a port of its own, or a metrics_host other than RETRIEVAL_HOST")
        # The health service listens on the gRPC host, so /metrics on the same number blocks it as
        # it would the main port: at start-up, after the model had loaded, naming no setting.
        if (self.metrics_enabled and self.health_port is not None and self.metrics_port == self.health_port
                and _overlap(self.metrics_host or self.host, self.host)):
            raise ValueError(f"health_port and metrics_port are both {self.health_port}: /metrics needs a port of its own, "
                             "or a metrics_host other than RETRIEVAL_HOST")
        if self.processes > 1 and self.qdrant_url and self.cache_backend == "memory":
            raise ValueError("processes > 1 with writable shared storage needs cache_backend 'redis' or 'none': "
                             "an in-process cache would miss invalidations made by the other processes")
        for name, schemes in URL_SCHEMES.items():
            if (value := getattr(self, name)) and (problem := url_problem(value, schemes)):
                raise ValueError(f"{name} {problem}")
        # Ignored, the key let an operator take events to be sent (an empty EVENTS_URL reads as
        # unset) and their queries to travel as keyed hashes.
        if self.events_hash_key is not None and not self.events_url:
            raise ValueError("events_hash_key is set but events_url is not: no event is sent to hash a query in; "
                             "set RETRIEVAL_EVENTS_URL, or unset RETRIEVAL_EVENTS_HASH_KEY")
        if self.events_hash_key is not None and self.events_query != "hash":
            raise ValueError(f"events_hash_key is set but events_query is '{self.events_query}', which hashes no query: "
                             "set RETRIEVAL_EVENTS_QUERY=hash, or unset RETRIEVAL_EVENTS_HASH_KEY")
        if self.mysql_dsn:
            # Parsed here as the store parses it: a query parameter it does not know, or a CA file
            # that is no PEM, is named at start-up. Imported here: only a MySQL deployment needs it.
            from retrieval_server.backends.metadata_store.mysql import parse_dsn

            parse_dsn(self.mysql_dsn)
        # redis-py takes a path that is no number for database 0, without a word (and "/1/2" for
        # 12). Not quoted: a URL may hold a password.
        if (self.redis_url and (parts := urlsplit(self.redis_url)).scheme in ("redis", "rediss")
                and not re.fullmatch(r"/?[0-9]*", parts.path)):
            raise ValueError("redis_url's path must be a database number or nothing (database 0): redis://host:port/0")
        # Found here, not when the folder is first opened or made: "[Errno 20] Not a directory" or
        # "[Errno 17] File exists" from deep in the start-up, naming no setting.
        for name in ("data_dir", "vectors_dir", "model_cache_dir", "qdrant_path"):
            if (folder := getattr(self, name)) is not None and folder != ":memory:" and (file := _file_in_the_way(Path(folder))):
                raise ValueError(f"{name} '{folder}' is a file, not a folder" if file == Path(folder)
                                 else f"{name} '{folder}' cannot be a folder: '{file}' is a file")
        if self.model_dir is not None and not (self.model_dir / "model.onnx").is_file():
            raise ValueError(f"model_dir '{self.model_dir}' has no model.onnx")
        if self.reranker_model_dir is not None and not (self.reranker_model_dir / "model.onnx").is_file():
            raise ValueError(f"reranker_model_dir '{self.reranker_model_dir}' has no model.onnx")
        if self.cache_backend == "redis" and not self.redis_url:
            raise ValueError("cache_backend 'redis' needs redis_url")
        # Ignored, it left each replica a private cache that missed the others' invalidations, with
        # no word: an operator who set the URL took the cache to be shared. Not with 'none', which
        # caches nothing to miss them with, and which a tool measuring without a cache sets over a
        # deployment's environment.
        if self.cache_backend == "memory" and self.redis_url:
            raise ValueError("redis_url is set but cache_backend is 'memory', which ignores it: "
                             "set RETRIEVAL_CACHE_BACKEND=redis, or unset RETRIEVAL_REDIS_URL")
        if any(not 0 < p <= 1 for p in self.graph_hop_penalties) or list(self.graph_hop_penalties) != sorted(self.graph_hop_penalties, reverse=True):
            raise ValueError("graph_hop_penalties must lie in (0, 1] and must not grow with the hop")
        if self.glossary_path is not None and not self.glossary_path.is_file():
            raise ValueError(f"glossary_path '{self.glossary_path}' does not exist")
        if self.glossary_path is not None:
            try:
                self.glossary_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"glossary_path '{self.glossary_path}' cannot be read as UTF-8 text: {exc}") from None
        self._check_security()
        return self

    def _check_security(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        for name in ("tls_cert", "tls_key", "tls_client_ca", "qdrant_ca", "jwt_jwks_file"):
            path = getattr(self, name)
            if path is None:
                continue
            # A key written 0600 by another user (a secret mounted with the host's mode) read as
            # "not a PEM certificate chain"; one in a folder this user may not enter, as a traceback.
            unreadable = f"{name} '{path}' cannot be read by this process (uid {os.getuid()}): check its owner and mode"
            try:
                if not path.is_file():
                    raise ValueError(f"{name} '{path}' is not a file")
            except PermissionError:
                raise ValueError(unreadable) from None
            if not os.access(path, os.R_OK):
                raise ValueError(unreadable)
        jwks: KeySet = ()
        if self.jwt_jwks_file is not None:
            # Parsed here as the server parses it: a file that is no JWKS failed the start-up later
            # with the parser's error alone ("serve failed: JSONDecodeError"), naming no setting.
            from retrieval_server.api.tokens import read_jwks

            try:
                jwks = read_jwks(self.jwt_jwks_file)
            except (OSError, ValueError) as exc:
                raise ValueError(f"jwt_jwks_file '{self.jwt_jwks_file}' cannot be read as a JWKS: {exc}") from None
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("tls_client_ca needs tls_cert and tls_key (mutual TLS is TLS first)")
        # Loaded once here, so that a file that is not PEM, or a key of another certificate, is
        # named at start-up (later it read as a port that could not be bound).
        if self.tls_cert is not None and self.tls_key is not None:
            if problem := certificate_pair_problem(self.tls_cert, self.tls_key):
                raise ValueError(f"tls_cert and tls_key are not a PEM certificate chain and its private key: {problem}")
            if self.tls_client_ca is not None:
                try:
                    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(cafile=self.tls_client_ca)
                except (ssl.SSLError, OSError) as exc:
                    raise ValueError(f"tls_client_ca '{self.tls_client_ca}' holds no PEM certificate: {exc}") from None
        if self.qdrant_ca is not None:
            if urlsplit(self.qdrant_url or "").scheme.lower() != "https":
                raise ValueError("qdrant_ca needs an https:// qdrant_url: it verifies that server's certificate")
            try:
                ssl.create_default_context(cafile=self.qdrant_ca)
            except (ssl.SSLError, OSError) as exc:
                raise ValueError(f"qdrant_ca '{self.qdrant_ca}' holds no PEM certificate: {exc}") from None
        if self.metrics_tls and self.tls_cert is None:
            raise ValueError("metrics_tls needs tls_cert and tls_key")
        unknown_roles = {r for r in self.jwt_role_map.values() if r not in ("SUPER_ADMIN", "ADMIN", "USER")}
        if unknown_roles:
            raise ValueError(f"jwt_role_map maps to unknown roles {sorted(unknown_roles)}: use SUPER_ADMIN, ADMIN or USER")
        # A setting of another mode was ignored, with no word but the log's usual warning in mode
        # 'none': a JWT secret or issuer left there (the default mode outside the image) had the
        # headers believed by an operator who took tokens to be checked.
        other_modes = [name for name in sorted(self.model_fields_set) if getattr(self, name) not in (None, (), {})
                       and ((name.startswith("jwt_") and self.auth_mode != "jwt") or (name == "gateway_peers" and self.auth_mode != "gateway"))]
        if other_modes:
            one = len(other_modes) == 1
            raise ValueError(f"{', '.join(other_modes)} {'is' if one else 'are'} set but auth_mode is '{self.auth_mode}', which ignores "
                             f"{'it' if one else 'them'} (RETRIEVAL_JWT_* are read in mode 'jwt', gateway_peers in mode 'gateway'): "
                             f"choose that mode, or leave {'it' if one else 'them'} unset")
        if self.auth_mode == "none":
            if not self.allow_unauthenticated_remote and not is_loopback(self.host):
                raise ValueError(
                    f"host '{self.host}' is not a loopback address, and auth_mode 'none' trusts whatever identity a caller claims: "
                    "set RETRIEVAL_AUTH_MODE=jwt or gateway, or RETRIEVAL_ALLOW_UNAUTHENTICATED_REMOTE=true"
                )
        elif self.auth_mode == "jwt":
            sources = [s for s in ("jwt_secret", "jwt_jwks_file", "jwt_jwks_url") if getattr(self, s)]
            if len(sources) != 1:
                raise ValueError("auth_mode 'jwt' needs exactly one of jwt_secret, jwt_jwks_file, jwt_jwks_url")
            symmetric = self.jwt_secret is not None
            for alg in self.accepted_jwt_algorithms:
                if alg not in JWT_ALGORITHMS:
                    raise ValueError(f"jwt_algorithms: unknown or unsafe algorithm '{alg}' (accepted: {', '.join(JWT_ALGORITHMS)})")
                # A secret verifies HMAC only and keys verify signatures only: no algorithm confusion.
                if alg.startswith("HS") != symmetric:
                    raise ValueError(f"jwt_algorithms: {alg} cannot be verified with {'a shared secret' if symmetric else 'public keys'}")
            # Accepted, such a file refused every token (TOKEN_ALGORITHM); a JWKS URL is fetched later.
            if self.jwt_jwks_file is not None:
                from retrieval_server.api.tokens import unfit_for

                if kinds := unfit_for(jwks, self.accepted_jwt_algorithms):
                    raise ValueError(f"jwt_jwks_file '{self.jwt_jwks_file}' holds no key for an algorithm of jwt_algorithms "
                                     f"({', '.join(self.accepted_jwt_algorithms)}): its keys are {kinds}, so every token would be "
                                     "refused: set RETRIEVAL_JWT_ALGORITHMS to its keys' algorithms, or add a key for one of those")
            url = urlsplit(self.jwt_jwks_url or "")
            # Keys fetched in clear text are keys anyone on the network path may replace with their
            # own, and then sign any token: only loopback (a local sidecar) needs no say-so.
            if url.scheme == "http" and not self.jwt_jwks_allow_http and not is_loopback(url.hostname or ""):
                raise ValueError(f"jwt_jwks_url '{without_userinfo(self.jwt_jwks_url or '')}' is http:// on a host that is not loopback: "
                                 "anyone on the network path can replace its keys and sign tokens; use https://, "
                                 "or set RETRIEVAL_JWT_JWKS_ALLOW_HTTP=true")
        else:
            if self.tls_client_ca is None or not self.gateway_peers:
                raise ValueError("auth_mode 'gateway' needs mutual TLS (tls_cert, tls_key, tls_client_ca) and gateway_peers")

    @property
    def accepted_jwt_algorithms(self) -> tuple[str, ...]:
        if self.jwt_algorithms:
            return self.jwt_algorithms
        return ("HS256",) if self.jwt_secret else ("RS256", "ES256", "EdDSA")

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    def technique_provider(self, technique: str) -> str:
        """The provider a technique (rewrite, reformulate, hyde, decompose, graph, router, answer) uses ('none': classical)."""
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


#: Settings that say how and where the server runs, not what it answers: they may differ between
#: the workers and replicas sharing one Redis cache (paths, addresses, credentials, limits on time,
#: size and resources) without splitting it. So may those used only around the cache, never in
#: what it holds (the contexts): GENERATION's router, tools and written answer are decided for each
#: request, after the cache is read. Every other setting names the cache's namespace
#: (:func:`answer_fingerprint`), so a new setting is taken to shape answers until listed here.
DEPLOYMENT_SETTINGS = frozenset({
    "host", "port", "grace_period_s", "max_message_mb", "max_response_bytes", "max_concurrent_calls", "max_calls_per_peer", "request_read_s", "stream_stall_s", "workers", "inference_lanes", "processes", "worker_heartbeat_s", "worker_start_timeout_s", "read_only",
    "metrics_enabled", "health_port", "health_interval_s", "metrics_port", "log_level", "log_format", "event_loop", "metrics_host",
    "metrics_tls", "tls_cert", "tls_key", "tls_client_ca", "auth_mode", "allow_unauthenticated_remote",
    "jwt_secret", "jwt_jwks_file", "jwt_jwks_url", "jwt_issuer", "jwt_audience", "jwt_algorithms", "jwt_user_claim",
    "jwt_role_claim", "jwt_role_map", "jwt_groups_claim", "jwt_leeway_s", "jwt_jwks_cache_s", "jwt_jwks_min_refresh_s",
    "jwt_jwks_allow_http", "gateway_peers", "traces_exporter", "events_url", "events_exchange", "events_routing_key", "events_buffer", "events_buffer_mb",
    "events_query", "events_hash_key", "events_publish_timeout_s", "data_dir", "qdrant_url", "vectors_dir",
    "qdrant_path", "qdrant_api_key", "qdrant_ca", "qdrant_collection", "qdrant_timeout_s", "mysql_dsn", "mysql_pool_size",
    "mysql_timeout_s", "min_free_disk_mb", "model_dir", "model", "model_cache_dir", "embed_batch_size",
    "embed_threads", "upsert_batch_size", "query_min_chars", "top_k_default", "top_k_max", "search_top_k_default",
    "search_top_k_max", "search_text_chars", "max_documents_per_request", "max_document_bytes",
    "reranker_model_dir", "tei_timeout_s", "tei_max_batch", "rerank_pair_cache", "analysis_timeout_s",
    "analysis_total_timeout_s", "glossary_path", "llm_timeout_s", "llm_max_retries", "llm_backoff_s",
    "openai_base_url", "openai_api_key", "anthropic_base_url", "anthropic_api_key", "gemini_base_url",
    "gemini_api_key", "tool_timeout_s", "cache_backend", "redis_url", "cache_ttl_s", "cache_max_entries",
    "cache_max_mb", "cache_served_answers", "cache_served_answers_mb", "cache_timeout_s", "redis_key_prefix", "write_lease_s", "breaker_failures",
    "breaker_cooldown_s", "store_retries", "store_backoff_s", "deadline_reserve_ms",
    "llm_router_provider", "llm_router_temperature", "llm_answer_provider", "llm_answer_temperature",
    "answer_max_sentences", "answer_min_similarity", "answer_max_tokens", "answer_timeout_s",
})


def answer_fingerprint(settings: Settings, *files: str) -> str:
    """A short digest of what shapes an answer: the files it depends on (``files``: the embedding
    model's, the local reranker's and the glossary's digests, wherever they are) and every setting
    not in :data:`DEPLOYMENT_SETTINGS`. A Redis cache outlives a restart and is shared by replicas:
    keyed by this, an answer computed under other fusion parameters, legs, models or glossary is
    never served, and a changed configuration starts with an empty cache."""
    shaping = {k: v for k, v in settings.model_dump(mode="json").items() if k not in DEPLOYMENT_SETTINGS}
    return hashlib.sha256(json.dumps([list(files), shaping], sort_keys=True).encode()).hexdigest()[:12]


#: Signing algorithms a token may use ('none' is never one of them).
JWT_ALGORITHMS = ("HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


def listen_address(host: str, port: int) -> str:
    """``host:port`` as gRPC and messages write it: an IPv6 address in brackets ("[::1]:50051")."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


#: why a listening socket cannot take one of a name's addresses that this host does not have (::1
#: without IPv6): gRPC skips such an address and binds the others
ADDRESS_NOT_HERE = frozenset({errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT})


def listen_sockaddrs(host: str, port: int) -> list[tuple[socket.AddressFamily, tuple[Any, ...]]]:
    """Every address gRPC listens on for ``host:port`` (families and socket addresses): all that
    the name resolves to, and for ``localhost`` both loopback addresses, which gRPC's resolver
    gives it whatever /etc/hosts says."""
    found = [(family, address) for family, _, _, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)]
    if host.lower() == "localhost":
        found += [(socket.AF_INET, ("127.0.0.1", port)), (socket.AF_INET6, ("::1", port, 0, 0))]
    unique: dict[tuple[socket.AddressFamily, str], tuple[socket.AddressFamily, tuple[Any, ...]]] = {}
    for family, address in found:
        unique.setdefault((family, address[0]), (family, address))
    return list(unique.values())


def bind_error(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on as gRPC binds it (SO_REUSEADDR), or None if it can.

    Every address of the name is tried: gRPC serves when any one of them binds, so a second server
    on a name of several addresses (``localhost``), one of them another server's, served beside it,
    the kernel sharing their clients out between two indexes. An address this host does not have
    is skipped, as gRPC skips it, unless no address is left.
    """
    try:
        addresses = listen_sockaddrs(host, port)
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    missing = "the address could not be bound"
    bound = False
    for family, address in addresses:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
            bound = True
        except OSError as exc:
            if exc.errno not in ADDRESS_NOT_HERE:
                return (exc.strerror or str(exc)).lower()
            missing = (exc.strerror or str(exc)).lower()
    return None if bound else missing


def _addresses(host: str) -> set[str]:
    """The addresses a listener on ``host`` takes, as far as known without a name lookup (which
    settings do not wait on): ``localhost`` is both loopback addresses, as gRPC binds it."""
    if host.lower() == "localhost":
        return {"127.0.0.1", "::1"}
    try:
        return {str(ipaddress.ip_address(host.strip("[]")))}
    except ValueError:
        return {host.lower()}


def _overlap(a: str, b: str) -> bool:
    """Whether listening on one host blocks the same port on the other: an address in common
    (``localhost`` and 127.0.0.1 share one), or a wildcard one (0.0.0.0, ::), which takes the port
    on every interface."""
    ours, theirs = _addresses(a), _addresses(b)
    if ours & theirs:
        return True
    for address in ours | theirs:
        try:
            if ipaddress.ip_address(address).is_unspecified:
                return True
        except ValueError:
            pass
    return False


def refuse_passphrase() -> bytes:
    """The ``password`` of ``load_cert_chain``: a key with a passphrase is refused. Without one,
    OpenSSL asked for it on the terminal, and the start-up (or a rotation, under the lock every
    handshake takes) waited there; with no terminal it failed as "[Errno 22] Invalid argument"."""
    raise ValueError("the private key is encrypted (has a passphrase): gRPC cannot use it; write it unencrypted, "
                     "e.g. openssl pkey -in key.pem -out key-plain.pem")


def certificate_pair_problem(cert: Path, key: Path) -> str | None:
    """Why ``cert`` and ``key`` are not a PEM certificate chain and its private key (a file that is
    not PEM, a key of another certificate, an encrypted key), loaded as a TLS server loads them; None
    when they are. Checked at start-up and before a rotated pair is served (grpc kept the old one, silently)."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key, password=refuse_passphrase)
    except (ssl.SSLError, OSError, ValueError) as exc:
        return str(exc)
    return None


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":  # host names are case-insensitive, as the resolver reads them
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ConfigError(Exception):
    """An invalid setting, with one line per problem naming the environment variable."""


#: RETRIEVAL_* variables that are no setting: the command line's (the server it calls, its token)
#: and the test suite's (the shared data, a client test's server)
NOT_SETTINGS = frozenset({"RETRIEVAL_SERVER", "RETRIEVAL_TOKEN", "RETRIEVAL_SHARED_DIR", "RETRIEVAL_TEST_TARGET"})
#: what Kubernetes service links (and Docker links) set for a Service named retrieval: its address
#: (deploy/k8s turns them off; RETRIEVAL_PORT=tcp://... among them is refused as the port it is not)
_SERVICE_LINK = re.compile(r"RETRIEVAL_(SERVICE_(HOST|PORT(_\w+)?)|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)")


#: variables of settings since renamed: the new name, and what to know of it. Named before any
#: spelling is guessed: the closest to RETRIEVAL_QUERY_MAX_CHARS is RETRIEVAL_QUERY_MIN_CHARS, and
#: following that hint refused every short query.
RENAMED_SETTINGS: dict[str, tuple[str, str]] = {
    "RETRIEVAL_QUERY_MAX_CHARS": ("RETRIEVAL_QUERY_MAX_BYTES", "a length in UTF-8 bytes, not characters"),
    "RETRIEVAL_CACHE_BREAKER_FAILURES": ("RETRIEVAL_BREAKER_FAILURES", "for the breaker of each optional dependency: the Redis cache, TEI, each LLM provider"),
    "RETRIEVAL_CACHE_BREAKER_COOLDOWN_S": ("RETRIEVAL_BREAKER_COOLDOWN_S", "for the breaker of each optional dependency: the Redis cache, TEI, each LLM provider"),
}


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """The RETRIEVAL_* variables of ``environ`` that name no setting, each with what it was renamed
    to or else the closest one: a misspelt one was ignored without a word (a typo in
    RETRIEVAL_JWT_AUDIENCE turned the audience check off)."""
    settings = sorted(f"RETRIEVAL_{name.upper()}" for name in Settings.model_fields)
    lines = []
    for name in sorted(environ):
        upper = name.upper()  # read case-insensitively, as the settings are
        if (upper.startswith("RETRIEVAL_") and upper not in NOT_SETTINGS and not _SERVICE_LINK.fullmatch(upper)
                and upper.removeprefix("RETRIEVAL_").lower() not in Settings.model_fields):
            if upper in RENAMED_SETTINGS:
                renamed, note = RENAMED_SETTINGS[upper]
                lines.append(f"{name}: renamed to {renamed} ({note})")
                continue
            close = difflib.get_close_matches(upper, settings, n=1)
            lines.append(f"{name}: no such setting" + (f" (did you mean {close[0]}?)" if close else ""))
    return lines


def duplicate_variables(environ: Mapping[str, str]) -> list[str]:
    """The variables of ``environ`` that set one setting between them, spelt in other cases: the
    settings read names case-insensitively, so one of them won without a word, which one depending
    on the environment's order (RETRIEVAL_JWT_AUDIENCE=a and retrieval_jwt_audience=b)."""
    names: dict[str, list[str]] = {}
    for name in sorted(environ):
        upper = name.upper()
        if upper.startswith("RETRIEVAL_") and upper.removeprefix("RETRIEVAL_").lower() in Settings.model_fields:
            names.setdefault(upper, []).append(name)
    return [f"{', '.join(spelt[:-1])} and {spelt[-1]} set the same setting: keep one" for spelt in names.values() if len(spelt) > 1]


def load_settings(**overrides: object) -> Settings:
    """Read the environment (plus ``overrides``); raise :class:`ConfigError` on invalid values, on
    a RETRIEVAL_* variable that names no setting, and on two that name one."""
    if problems := unknown_variables(os.environ) + duplicate_variables(os.environ):
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            message = err["msg"].removeprefix("Value error, ")
            if err["loc"]:
                lines.append(f"RETRIEVAL_{'.'.join(str(p) for p in err['loc']).upper()}: {message}")
            else:
                lines.append(_named(message))  # settings that conflict: each by its variable
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None


def _named(message: str) -> str:
    """A check of several settings, its fields written as the variables that set them: the snake-case
    names, and the one it starts with ("host '0.0.0.0' is not ..."); not a value (quoted), nor inside
    a path or a file name."""

    def variable(m: re.Match[str]) -> str:
        word = m.group(0)
        if word.startswith("'") or word not in Settings.model_fields or not ("_" in word or m.start() == 0):
            return word
        return f"RETRIEVAL_{word.upper()}"

    return re.sub(r"'[^']*'|(?<![\w/.\-])[a-z][a-z0-9_]*(?![\w/.\-])", variable, message)
