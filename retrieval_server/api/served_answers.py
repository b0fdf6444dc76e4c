"""Repeated Query answers, served as the bytes already sent, before the workflow runs.

A cache hit through the workflow still costs about three times a bare gRPC call's CPU (the graph,
the cache lookup, the version check, the conversion). Here an exact repeat of a request the
workflow has just answered from the cache is answered with that response's serialized bytes, its
metrics appended: the hit's (what the pass that found the contexts reported), with this request's
duration.

When an entry may be reused:

* the key is a SHA-256 digest of whether the caller reads everything (SUPER_ADMIN) and otherwise
  its principals, and the request as sent (its deterministic serialization: every option, the
  query as typed): kept whole, a request's 1,000 document ids and a caller's 300 groups held
  twenty times the answer's bytes, uncounted. A
  repeat is found before the request is validated or turned into options: only a request that
  was validated, answered from the cache and kept (:meth:`ServedAnswers.remember`) has an entry,
  and the same bytes validate the same way. The key is finer than the cache's (its access
  partition is a function of the principals and the store's content; its query is normalized);
* an entry is made only from a workflow answer that was a verified cache hit (every cited document
  current and readable) degraded by nothing but what describes its contexts (the workflow's
  ``describes_answer``: each hit reports it), to a request that may be answered from the cache
  (``use_cache``, retrieval only), and is tagged with the metadata store's
  :meth:`~MetadataStore.generation` read before that workflow ran;
* it is served only while the generation is unchanged: any commit (an ingest, a delete, a grant
  changed, by this process or another on the same store) makes every entry unusable, so a revoked
  grant, a deleted or replaced document is never served from here. A store that cannot tell its
  generation cheaply (MySQL) gets no entries. The generation is read for every request (SQLite's
  from shared memory: see its store); reading it once per turn of the event loop cost more, as
  the expiry that scheduled made the loop turn once more for each request;
* it lives at most the cache's TTL from when it was made (the generation, not the TTL, is what
  keeps it current).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.api import convert
from retrieval_server.domain import Identity, Mode, QueryOptions, QueryResult, Strategy
from retrieval_server.workflow.nodes import describes_answer

Key = bytes
#: the stage a served answer reports: the cache was checked, and answered
STAGE = "check_cache"


@dataclass(frozen=True, slots=True)
class ServedAnswer:
    #: the response without its metrics, serialized
    body: bytes
    #: what the events say of it (the workflow's result is not kept: its contexts would double
    #: what the body's bound counts)
    strategy: Strategy
    contexts: int
    degraded: tuple[str, ...]
    #: the options of the request it answered (the same bytes give the same options), less its
    #: document ids and caller: the key's, digested, and each serving's own
    options: QueryOptions
    generation: int
    expires_at: float
    #: a response holding only this answer's metrics; :func:`serve` sets the durations of each request
    metrics: pb.QueryResponse


#: fields whose presence is read, where set to True means the same as left out
_TRUE_BY_DEFAULT = ("use_cache", "rerank")


def key_of(identity: Identity, request: pb.QueryRequest) -> Key:
    """Clears those of ``request``'s :data:`_TRUE_BY_DEFAULT` fields that are set to True: a
    request that spells a default out is the same request (it is read the same way)."""
    for name in _TRUE_BY_DEFAULT:
        if request.HasField(name) and getattr(request, name):
            request.ClearField(name)
    # Length-prefixed, so that no caller's principals run on into another's request.
    who = identity.reads_key
    digest = hashlib.sha256(len(who).to_bytes(8, "big"))
    digest.update(who)
    digest.update(request.SerializeToString(deterministic=True))
    return digest.digest()


def may_serve(request: pb.QueryRequest) -> bool:
    """False when the request turns the cache off, so nothing it could be answered with is kept."""
    return request.use_cache or not request.HasField("use_cache")


#: what an entry holds besides its body, metrics and query (its key, the objects holding them, its
#: place in the dict), measured, rounded up
ENTRY_BYTES = 1024


def held_bytes(answer: ServedAnswer) -> int:
    """What ``answer`` holds, as counted against the store's ``max_bytes``."""
    return ENTRY_BYTES + len(answer.body) + answer.metrics.ByteSize() + len(answer.options.query.encode())


class ServedAnswers:
    """At most ``size`` answers holding at most ``max_bytes`` (:func:`held_bytes`), the least
    recently served dropped first. Counted alone, 1,024 answers of 2.6 MiB (a top-100 answer over
    documents at their metadata limits) held 2.6 GiB."""

    def __init__(self, size: int, ttl_s: float, max_bytes: int = 64 * 2**20, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._ttl = ttl_s
        self._max_bytes = max_bytes
        self._bytes = 0
        self._clock = clock
        self._answers: OrderedDict[Key, ServedAnswer] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: Key, generation: int | None) -> ServedAnswer | None:
        answer = self._answers.get(key)
        if answer is None:
            return None
        if generation is None or answer.generation != generation or answer.expires_at <= self._clock():
            self._bytes -= held_bytes(self._answers.pop(key))
            return None
        self._answers.move_to_end(key)
        return answer

    def remember(self, key: Key, generation: int | None, options: QueryOptions, result: QueryResult, response: pb.QueryResponse) -> None:
        """Keep ``result`` (the workflow's answer to ``options``, sent as ``response``) if it may be served again."""
        # Degraded by what describes the contexts alone: the replay reports the same, while what
        # befell this request (the edge's cut to size among it) need not befall the next.
        if (generation is None or self._size <= 0 or not options.use_cache or options.mode is not Mode.RETRIEVAL_ONLY
                or not result.cached or not all(map(describes_answer, result.metrics.degraded)) or result.answer is not None):
            return
        body = pb.QueryResponse()
        body.CopyFrom(response)
        body.ClearField("metrics")
        metrics = convert.metrics_out(result.metrics)
        del metrics.stages[:]
        metrics.stages.add(stage=STAGE, count=len(result.contexts))
        slim = dataclasses.replace(options, document_ids=(), identity=Identity())
        answer = ServedAnswer(body.SerializeToString(), result.metrics.strategy_used, len(result.contexts), tuple(result.metrics.degraded),
                              slim, generation, self._clock() + self._ttl, pb.QueryResponse(metrics=metrics))
        if held_bytes(answer) > self._max_bytes:
            return
        replaced = self._answers.pop(key, None)
        if replaced is not None:
            self._bytes -= held_bytes(replaced)
        self._answers[key] = answer
        self._bytes += held_bytes(answer)
        while len(self._answers) > self._size or self._bytes > self._max_bytes:
            self._bytes -= held_bytes(self._answers.popitem(last=False)[1])


def serve(answer: ServedAnswer, started: float) -> tuple[bytes, float]:
    """The response's bytes with this request's metrics, and the milliseconds they report."""
    took_ms = (time.perf_counter() - started) * 1e3
    # Two fields set on a message kept for the answer: building the three messages anew cost more
    # than serving the rest. Nothing awaits in between, so no other request sees them half set.
    metrics = answer.metrics.metrics
    metrics.total_ms = metrics.stages[0].duration_ms = took_ms
    # Serialized messages concatenate as a merge: the body has no metrics field, so these are the response's.
    return answer.body + answer.metrics.SerializeToString(), took_ms

