"""Domain objects. Protobuf stays at the edges (api/ for gRPC; backends/events.py writes the events'
wire format); everything inside speaks these."""

from __future__ import annotations

import enum
import json
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrieval_server.identifiers import GROUP_PREFIX
from retrieval_server.knowledge import Answer, GraphTrace, RouteDecision

if TYPE_CHECKING:  # only annotations: client commands import this module and need no numpy
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
    #: the knowledge-graph leg alone
    GRAPH = "graph"


class Mode(enum.StrEnum):
    RETRIEVAL_ONLY = "retrieval_only"
    GENERATION = "generation"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is asking, as verified by the API (never read from metadata inside the workflow).

    Anonymous callers read public documents only.
    """

    user_id: str | None = None
    role: Role = Role.ANONYMOUS
    #: groups the caller belongs to (from a verified token): grants to ``group:<name>`` are theirs
    groups: tuple[str, ...] = ()
    #: how the identity was established: "headers" (unauthenticated), "jwt", "gateway"
    verified_by: str = "headers"
    #: names a grant or ownership may name for this caller: the user id and ``group:<name>``s
    #: (made once: every request reads them, some several times)
    principals: tuple[str, ...] = field(init=False, repr=False, compare=False)
    #: what the caller reads, as bytes: equal for two identities exactly when both read everything
    #: or both read by the same principals (a user id is free text: one named "all" is no super
    #: admin). Made once, as the principals are: an exact repeat served from memory keys on it.
    reads_key: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.user_id is not None and self.user_id.startswith(GROUP_PREFIX):
            # The API refuses such ids with a status of its own (identifiers.clean_user_id); this
            # keeps any other way of making an identity from reading a group's grants.
            raise ValueError(f"a user id must not start with '{GROUP_PREFIX}' (got {self.user_id!r})")
        principals = {*([self.user_id] if self.user_id else []), *(f"{GROUP_PREFIX}{g}" for g in self.groups)}
        object.__setattr__(self, "principals", tuple(sorted(principals)))
        everything = self.role is Role.SUPER_ADMIN
        object.__setattr__(self, "reads_key", json.dumps([everything, [] if everything else self.principals]).encode())

    @property
    def reads_everything(self) -> bool:
        return self.role is Role.SUPER_ADMIN


#: who writes through the application itself, not through the API (``ingest --local``): the
#: operator holding the data directory, who may replace or delete any document in it
LOCAL_OPERATOR = Identity(role=Role.SUPER_ADMIN, verified_by="local")


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

    @property
    def version(self) -> str:
        """What the document's vector points carry as ``version``: a hit of any other version is stale."""
        return version_of(self.content_hash)


def version_of(content_hash: str) -> str:
    return content_hash[:16]


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
class AccessFilter:
    """The set of documents a caller may read, as every retrieval leg and the cache apply it.

    ``reads_everything`` (SUPER_ADMIN), or public documents plus those listing ``reader_id`` as
    owner or grantee (``None``: public documents only). Two callers with equal filters read the
    same set, which is why the filter, not the caller, names the cache partition.
    """

    reads_everything: bool = False
    #: principals (a user id, ``group:<name>``s) whose owned or granted private documents are readable
    readers: tuple[str, ...] = ()

    @staticmethod
    def for_identity(identity: Identity, reads_private: bool = True) -> AccessFilter:
        """The caller's filter; ``reads_private=False`` (nothing private is readable) narrows it to public."""
        if identity.reads_everything:
            return AccessFilter(reads_everything=True)
        return AccessFilter(readers=identity.principals if reads_private else ())

    @property
    def partition(self) -> str:
        """A stable name for the readable set: ``all``, ``public`` or ``reader:<principals>``."""
        if self.reads_everything:
            return "all"
        return "reader:" + "\x1f".join(self.readers) if self.readers else "public"

    def allows(self, document: Document) -> bool:
        return self.reads_everything or document.access is Access.PUBLIC or bool(set(self.readers) & set(document.readers))


@dataclass(frozen=True, slots=True)
class PointFilter:
    """What a search may see. Applied inside the engine, never after it."""

    access: AccessFilter = AccessFilter()
    document_ids: tuple[str, ...] = ()
    #: only each document's first parent: over the ``parent`` vector, that is the document vector
    first_parents: bool = False


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
    #: the document version the point was written for (see :attr:`Document.version`)
    version: str = ""

    def scored(self, score: float) -> VectorHit:
        """This hit with another score; positional, because fusion rescores hundreds per request
        and ``dataclasses.replace`` costs twice as much."""
        return VectorHit(self.chunk_id, self.parent_chunk_id, self.document_id, self.chunk_index, self.parent_index, self.content,
                         self.page, score, self.version)


#: A hit's chunk at its version, what fusion tells hits apart by: while a replacement is written
#: (or after one that failed), a chunk has a point of each version, and keeping one per chunk id
#: could keep the uncommitted one, which enrich drops, and lose the chunk from the answer. Read in
#: C: these key every hit of every list, and a Python call a hit made fusion twice as slow.
point_of = operator.attrgetter("chunk_id", "version")
#: a hit's parent at its version (see point_of)
parent_point_of = operator.attrgetter("parent_chunk_id", "version")


class Fusion(enum.StrEnum):
    RRF = "rrf"
    WEIGHTED = "weighted"


#: the most a request keeps of its caller's deadline to serialize and send what is ready
#: (see :func:`send_margin`)
SEND_MARGIN_S = 0.05


def send_margin(time_left: float) -> float:
    """What a request keeps of the ``time_left`` its caller's deadline gives, to serialize and send
    what is ready: :data:`SEND_MARGIN_S`, or a quarter of the time left when that is less. A fixed
    50 ms left nothing to a 40 ms deadline, and a 4 ms KEYWORD query was DEADLINE_EXCEEDED."""
    return min(SEND_MARGIN_S, max(time_left, 0.0) / 4)


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
    #: time.monotonic() by which an answer is due (the caller's gRPC deadline less
    #: :func:`send_margin`), or None
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
    #: the cache was asked (check_cache ran): not when ``use_cache`` is false, no cache is
    #: configured, or the GENERATION router answered directly or with its tools alone
    cache_asked: bool = False
    iterations: int = 0
    sufficiency_score: float = 0.0
    rerank_fallback_triggered: bool = False
    degraded: list[str] = field(default_factory=list)
    decomposition_used: bool = False
    strategy_used: Strategy = Strategy.SEMANTIC
    #: GENERATION only: what the router decided
    route: RouteDecision | None = None
    #: entities the query named and the hops the graph leg expanded (None: the leg did not run)
    graph: GraphTrace | None = None
    #: the rewrite the answering pass searched in the caller's words' stead ("" when it searched those)
    rewritten_query: str = ""
    #: the sub-queries whose hits were fused into the answering pass
    sub_queries: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class QueryResult:
    query: str
    contexts: tuple[RetrievedContext, ...]
    metrics: QueryMetrics
    cached: bool = False
    #: when nothing was found: what the caller could try instead
    suggestions: tuple[str, ...] = ()
    #: GENERATION only: the answer, its citations and the tool results it used
    answer: Answer | None = None


class ComponentState(enum.StrEnum):
    OK = "ok"
    #: configured, and not answering: DEGRADED for an optional component, NOT_SERVING for a required one
    FAILING = "failing"
    #: an optional component that is not set up; the service answers without it
    NOT_CONFIGURED = "not_configured"


@dataclass(frozen=True, slots=True)
class ComponentHealth:
    name: str
    state: ComponentState
    #: the service cannot answer without it
    required: bool
    detail: str


@dataclass(frozen=True, slots=True)
class HealthReport:
    components: tuple[ComponentHealth, ...]

    @property
    def serving(self) -> bool:
        return all(c.state is not ComponentState.FAILING for c in self.components if c.required)

    @property
    def degraded(self) -> bool:
        return any(c.state is ComponentState.FAILING for c in self.components)


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

    @property
    def name(self) -> str:
        """The file name its type and default title are read from: the caller's, or, for a document
        sent with an id and no file name, the id as a text file."""
        return self.filename or f"{self.document_id}.txt"


@dataclass(frozen=True, slots=True)
class IngestedDocument:
    document_id: str
    parent_chunks: int
    child_chunks: int
    #: a document with this id was stored before (and replaced, or found unchanged)
    replaced: bool
    #: found stored as it is and left so: nothing an answer citing it holds changed (an ingest
    #: changing only its access, title, grants or metadata writes it, and one changing only its
    #: url or source writes its row without embedding it: neither is this)
    unchanged: bool = False


@dataclass(frozen=True, slots=True)
class IngestFailure:
    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class IngestReport:
    documents: tuple[IngestedDocument, ...]
    errors: tuple[IngestFailure, ...]
    #: errors past the first ``MAX_REPORTED_ERRORS``, counted only
    errors_not_listed: int = 0


class ServiceError(Exception):
    """Base of errors the servicer maps to gRPC status codes."""


class InvalidArgument(ServiceError):
    """Request fields outside their limits; each message names the field and the limit."""

    def __init__(self, message: str, field: str = "", violations: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        #: (field, description) per invalid field, for google.rpc.BadRequest
        self.violations = violations or ((field or message.split(" ", 1)[0], message),)


class NotFound(ServiceError):
    pass


class Unauthenticated(ServiceError):
    """Credentials missing, malformed, expired or forged. ``reason`` is stable (google.rpc.ErrorInfo);
    the message helps the caller and says nothing about keys."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class PermissionDenied(ServiceError):
    """The caller's role may not use this RPC."""

    reason = "ROLE_REQUIRED"


class Unavailable(ServiceError):
    """A backend the request needs is down."""


class WrongModel(Unavailable):
    """This process embeds with another model than the index records (another process recorded
    its own first): vectors of two models in one index would be meaningless to each other."""


class TimedOut(Unavailable):
    """A backend did not answer within its timeout: it is frozen, cut off or overloaded, and asking
    it again at once would only wait as long again."""


class DeadlineExceeded(ServiceError):
    """The caller's deadline left no time to produce any answer."""


class ResourceExhausted(ServiceError):
    """A resource the request needs is used up (free disk space below the floor)."""


class TooManyCalls(ServiceError):
    """The caller's address has as many calls in flight as one may (RETRIEVAL_MAX_CALLS_PER_PEER)."""


class RequestNotRead(ServiceError):
    """A unary call's request message did not arrive within RETRIEVAL_REQUEST_READ_S."""


class StreamStalled(ServiceError):
    """A stream's caller took none of its next message within the stall bound (RETRIEVAL_STREAM_STALL_S)."""


class ReadOnly(ServiceError):
    """This server does not accept writes (read-only mode or replicas of embedded storage)."""
