"""RetrievalCompleted analytics events (reference 001): one per answered Query or Search.

The event is built here, from domain results, with the query kept as text, as a hash, or not
at all (``RETRIEVAL_EVENTS_QUERY``). Handing it to the sink never waits: the publisher buffers
it and sends it in the background (:mod:`retrieval_server.backends.events`).
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

from retrieval_server.domain import Identity, QueryOptions, QueryResult, Strategy

QueryField = Literal["hash", "text", "none"]


@dataclass(frozen=True, slots=True)
class RetrievalCompleted:
    """Schema: retrieval.v1.RetrievalCompleted (protos/retrieval/v1/events.proto), version 1.0."""

    event_id: str
    timestamp: datetime
    method: Literal["query", "search"]
    query: str
    query_sha256: str
    user_id: str
    strategy: Strategy
    top_k: int
    result_count: int
    latency_ms: float
    cache_hit: bool
    degraded: tuple[str, ...]
    trace_id: str


class EventSink(Protocol):
    def publish(self, event: RetrievalCompleted) -> None:
        """Take the event without waiting (drop it, counted, when there is no room)."""
        ...


class Analytics:
    def __init__(self, sink: EventSink | None, query_field: QueryField = "hash", hash_key: str | None = None, *, traced: bool = False) -> None:
        self._sink = sink
        self._query_field = query_field
        self._key = hash_key.encode() if hash_key else None
        self._traced = traced

    @property
    def enabled(self) -> bool:
        return self._sink is not None

    def query_answered(self, options: QueryOptions, result: QueryResult) -> None:
        if self._sink is None:
            return
        m = result.metrics
        self._emit("query", options.query, options.identity, m.strategy_used, options.top_k, len(result.contexts), m.total_ms, result.cached, tuple(m.degraded))

    def query_served(
        self, options: QueryOptions, strategy: Strategy, result_count: int, latency_ms: float, degraded: tuple[str, ...] = (),
    ) -> None:
        """A repeat answered with the bytes already sent (api/served_answers.py): a cache hit,
        degraded by what describes its contexts alone, as the hit it repeats was."""
        if self._sink is None:
            return
        self._emit("query", options.query, options.identity, strategy, options.top_k, result_count, latency_ms, True, degraded)

    def search_answered(self, query: str, top_k: int, identity: Identity, result_count: int, latency_ms: float) -> None:
        if self._sink is None:
            return
        self._emit("search", query, identity, Strategy.SEMANTIC, top_k, result_count, latency_ms, False, ())

    def _emit(
        self, method: Literal["query", "search"], query: str, identity: Identity, strategy: Strategy, top_k: int,
        result_count: int, latency_ms: float, cache_hit: bool, degraded: tuple[str, ...],
    ) -> None:
        assert self._sink is not None
        trace_id = ""
        if self._traced:
            from retrieval_server.observability.tracing import current_trace_id

            trace_id = current_trace_id()
        self._sink.publish(RetrievalCompleted(
            event_id=str(uuid.uuid4()),
            timestamp=datetime.now(UTC),
            method=method,
            query=query if self._query_field == "text" else "",
            query_sha256=self.query_hash(query) if self._query_field == "hash" else "",
            user_id=identity.user_id or "",
            strategy=strategy,
            top_k=top_k,
            result_count=result_count,
            latency_ms=latency_ms,
            cache_hit=cache_hit,
            degraded=degraded,
            trace_id=trace_id,
        ))

    def query_hash(self, query: str) -> str:
        data = query.encode()
        return hmac.new(self._key, data, hashlib.sha256).hexdigest() if self._key else hashlib.sha256(data).hexdigest()
