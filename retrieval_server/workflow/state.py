"""What flows through the query graph, and what its nodes may use."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from retrieval_server.backends.embedder import Embedder
from retrieval_server.backends.metadata_store import MetadataStore
from retrieval_server.backends.sparse import Bm25Encoder
from retrieval_server.backends.vector_store import VectorStore
from retrieval_server.domain import QueryMetrics, QueryOptions, RetrievedContext, Strategy, VectorHit


@dataclass(slots=True)
class QueryState:
    options: QueryOptions
    metrics: QueryMetrics = field(default_factory=QueryMetrics)
    strategy: Strategy = Strategy.SEMANTIC
    query_vector: np.ndarray | None = None
    hits: list[VectorHit] = field(default_factory=list)
    contexts: list[RetrievedContext] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class WorkflowDeps:
    embedder: Embedder
    sparse: Bm25Encoder
    vectors: VectorStore
    metadata: MetadataStore
    child_candidates_per_context: int = 8
