"""Repeated Query answers, served as the bytes already sent, before the workflow runs.

A cache hit through the workflow still costs about three times a bare gRPC call's CPU (the graph,
the cache lookup, the version check, the conversion). Here an exact repeat of a request the
workflow has just answered from the cache is answered with that response's serialized bytes, its
metrics (this request's own) appended.

When an entry may be reused:

* the key is whether the caller reads everything (SUPER_ADMIN) and otherwise its principals, the cache configuration of the
  request (:func:`cache_config`) and the query as sent: finer than the cache's key (its access
  partition is a function of the principals and the store's content);
* an entry is made only from a workflow answer that was a verified cache hit (every cited document
  current and readable) with nothing degraded, and is tagged with the metadata store's
  :meth:`~MetadataStore.generation` read before that workflow ran;
* it is served only while the generation is unchanged: any commit (an ingest, a delete, a grant
  changed, by this process or another on the same store) makes every entry unusable, so a revoked
  grant, a deleted or replaced document is never served from here. A store that cannot tell its
  generation cheaply (MySQL) gets no entries;
* it lives at most the cache's TTL from when it was made (the generation, not the TTL, is what
  keeps it current).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.api import convert
from retrieval_server.domain import Mode, QueryMetrics, QueryOptions, QueryResult, StageMetric
from retrieval_server.workflow.nodes import cache_config

Key = tuple[tuple[bool, tuple[str, ...]], str, str]
#: the stage a served answer reports: the cache was checked, and answered
STAGE = "check_cache"


@dataclass(frozen=True, slots=True)
class ServedAnswer:
    #: the response without its metrics, serialized
    body: bytes
    #: what the workflow returned (its contexts, strategy), for this request's metrics and events
    result: QueryResult
    generation: int
    expires_at: float


def key_of(options: QueryOptions) -> Key | None:
    """None for requests that are never served from here (no cache, or an answer to generate)."""
    if not options.use_cache or options.mode is not Mode.RETRIEVAL_ONLY:
        return None
    identity = options.identity
    # The flag and the principals both: a user id is free text, and one named "all" is no super admin.
    who = (identity.reads_everything, () if identity.reads_everything else identity.principals)
    return who, cache_config(options), options.query


class ServedAnswers:
    """At most ``size`` answers, the least recently served dropped first."""

    def __init__(self, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._ttl = ttl_s
        self._clock = clock
        self._answers: OrderedDict[Key, ServedAnswer] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: Key, generation: int | None) -> ServedAnswer | None:
        answer = self._answers.get(key)
        if answer is None:
            return None
        if generation is None or answer.generation != generation or answer.expires_at <= self._clock():
            del self._answers[key]
            return None
        self._answers.move_to_end(key)
        return answer

    def remember(self, key: Key, generation: int | None, result: QueryResult, response: pb.QueryResponse) -> None:
        """Keep ``result`` (the workflow's answer, sent as ``response``) if it may be served again."""
        if generation is None or self._size <= 0 or not result.cached or result.metrics.degraded or result.answer is not None:
            return
        body = pb.QueryResponse()
        body.CopyFrom(response)
        body.ClearField("metrics")
        self._answers[key] = ServedAnswer(body.SerializeToString(), result, generation, self._clock() + self._ttl)
        self._answers.move_to_end(key)
        if len(self._answers) > self._size:
            self._answers.popitem(last=False)


def serve(answer: ServedAnswer, started: float) -> tuple[bytes, QueryResult]:
    """The response's bytes with this request's metrics, and the result they report."""
    cached = answer.result
    took_ms = (time.perf_counter() - started) * 1e3
    metrics = QueryMetrics(
        total_ms=took_ms, stages=[StageMetric(STAGE, took_ms, len(cached.contexts))], cache_hit=True,
        strategy_used=cached.metrics.strategy_used,
    )
    # Serialized messages concatenate as a merge: the body has no metrics field, so these are the response's.
    tail = pb.QueryResponse(metrics=convert.metrics_out(metrics)).SerializeToString()
    return answer.body + tail, QueryResult(cached.query, cached.contexts, metrics, cached=True, suggestions=cached.suggestions)
