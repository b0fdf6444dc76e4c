"""Domain objects. Protobuf stays at the edge (api/); everything inside speaks these."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np


class Access(enum.StrEnum):
    PUBLIC = "public"
    PRIVATE = "private"


class Role(enum.StrEnum):
    SUPER_ADMIN = "SUPER_ADMIN"
    ADMIN = "ADMIN"
    USER = "USER"
    ANONYMOUS = "ANONYMOUS"


class Strategy(enum.StrEnum):
    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"
    ADAPTIVE = "adaptive"


class Mode(enum.StrEnum):
    RETRIEVAL_ONLY = "retrieval_only"
    GENERATION = "generation"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is asking. Anonymous callers read public documents only."""

    user_id: str | None = None
    role: Role = Role.ANONYMOUS

    @property
    def reads_everything(self) -> bool:
        return self.role is Role.SUPER_ADMIN


@dataclass(frozen=True, slots=True)
class Document:
    document_id: str
    title: str = ""
    url: str = ""
    source: str = ""
    access: Access = Access.PUBLIC
    owner_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    granted_user_ids: tuple[str, ...] = ()
    content_hash: str = ""

    @property
    def readers(self) -> tuple[str, ...]:
        """Users besides the public who may read it: owner and grantees."""
        return tuple(sorted({u for u in (self.owner_id, *self.granted_user_ids) if u}))


@dataclass(frozen=True, slots=True)
class ParentChunk:
    """The unit returned to callers: a section of a document."""

    parent_chunk_id: str
    document_id: str
    chunk_index: int
    content: str
    tokens: int
    page: int = 0


@dataclass(frozen=True, slots=True)
class ChildChunk:
    """The unit that is embedded and searched: a sentence window inside a parent."""

    chunk_id: str
    parent_chunk_id: str
    document_id: str
    chunk_index: int
    parent_index: int
    content: str
    tokens: int
    page: int = 0


@dataclass(frozen=True, slots=True)
class SparseVector:
    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class VectorPoint:
    """One child chunk as the vector store holds it."""

    child: ChildChunk
    document: Document
    dense: np.ndarray
    sparse: SparseVector
    version: str
    #: BM25F-style keyword vector: the chunk's text with the document title as a weighted field
    #: (None: the index was built without it)
    sparse_titled: SparseVector | None = None


@dataclass(frozen=True, slots=True)
class ParentPoint:
    """A parent chunk's own dense vector (multi-granularity retrieval), stored beside its children.

    ``child`` is the parent's first child: a hit on the parent is reported through it, so that it
    fuses with the child legs and reaches callers as evidence like any child hit.
    """

    parent: ParentChunk
    child: ChildChunk
    document: Document
    dense: np.ndarray
    version: str


@dataclass(frozen=True, slots=True)
class PointFilter:
    """What a search may see. Applied inside the engine, never after it."""

    identity: Identity = Identity()
    document_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class VectorHit:
    chunk_id: str
    parent_chunk_id: str
    document_id: str
    chunk_index: int
    parent_index: int
    content: str
    page: int
    score: float


class Fusion(enum.StrEnum):
    RRF = "rrf"
    WEIGHTED = "weighted"


@dataclass(frozen=True, slots=True)
class QueryOptions:
    query: str
    top_k: int
    strategy: Strategy = Strategy.SEMANTIC
    mode: Mode = Mode.RETRIEVAL_ONLY
    use_cache: bool = True
    document_ids: tuple[str, ...] = ()
    identity: Identity = Identity()
    #: None: the server's configured fusion
    fusion: Fusion | None = None
    #: False: keep the fused order even when a reranker is configured
    rerank: bool = True
    #: time.monotonic() by which an answer is due (the caller's gRPC deadline), or None
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class ChildEvidence:
    chunk_id: str
    content: str
    score: float


@dataclass(frozen=True, slots=True)
class RetrievedContext:
    parent: ParentChunk
    document: Document
    score: float
    children: tuple[ChildEvidence, ...]


@dataclass(frozen=True, slots=True)
class StageMetric:
    stage: str
    duration_ms: float
    count: int


@dataclass(slots=True)
class QueryMetrics:
    total_ms: float = 0.0
    stages: list[StageMetric] = field(default_factory=list)
    cache_hit: bool = False
    iterations: int = 0
    sufficiency_score: float = 0.0
    rerank_fallback_triggered: bool = False
    degraded: list[str] = field(default_factory=list)
    decomposition_used: bool = False
    strategy_used: Strategy = Strategy.SEMANTIC


@dataclass(frozen=True, slots=True)
class QueryResult:
    query: str
    contexts: tuple[RetrievedContext, ...]
    metrics: QueryMetrics
    cached: bool = False
    #: when nothing was found: what the caller could try instead
    suggestions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SearchResult:
    text: str
    document_id: str
    chunk_index: int
    title: str
    page: int
    url: str
    score: float


@dataclass(frozen=True, slots=True)
class DocumentSource:
    """A document to ingest: raw bytes plus what the caller says about them."""

    filename: str
    content: bytes
    document_id: str = ""
    title: str = ""
    url: str = ""
    source: str = ""
    access: Access = Access.PUBLIC
    owner_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    granted_user_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IngestedDocument:
    document_id: str
    parent_chunks: int
    child_chunks: int
    replaced: bool


@dataclass(frozen=True, slots=True)
class IngestFailure:
    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class IngestReport:
    documents: tuple[IngestedDocument, ...]
    errors: tuple[IngestFailure, ...]


class ServiceError(Exception):
    """Base of errors the servicer maps to gRPC status codes."""


class InvalidArgument(ServiceError):
    """A request field outside its limits; the message names the field and the limit."""


class NotFound(ServiceError):
    pass


class PermissionDenied(ServiceError):
    """The caller's role may not use this RPC."""


class Unavailable(ServiceError):
    """A backend the request needs is down."""


class ReadOnly(ServiceError):
    """This server does not accept writes (read-only mode or replicas of embedded storage)."""
