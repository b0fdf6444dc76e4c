"""RetrievalCompleted events: what the privacy setting lets through, and the wire form."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from google.protobuf import json_format

from retrieval.v1 import events_pb2
from retrieval.v1 import retrieval_pb2 as pb
from retrieval_server.backends.events import to_amqp, to_message
from retrieval_server.domain import Identity, QueryMetrics, QueryOptions, QueryResult, Strategy
from retrieval_server.observability.analytics import Analytics, RetrievalCompleted


class Sink:
    def __init__(self) -> None:
        self.events: list[RetrievalCompleted] = []

    def publish(self, event: RetrievalCompleted) -> None:
        self.events.append(event)


def _answer(field: str, key: str | None = None) -> RetrievalCompleted:
    sink = Sink()
    metrics = QueryMetrics(total_ms=12.5, strategy_used=Strategy.HYBRID, degraded=["rerank:unavailable"])
    options = QueryOptions(query="salary review", top_k=4, strategy=Strategy.ADAPTIVE, identity=Identity("bob"))
    Analytics(sink, field, key).query_answered(options, QueryResult("salary review", (), metrics, cached=True))  # type: ignore[arg-type]
    [event] = sink.events
    return event


@pytest.mark.parametrize(("field", "key", "text", "digest"), [
    ("hash", None, "", hashlib.sha256(b"salary review").hexdigest()),
    ("hash", "k3y", "", hmac.new(b"k3y", b"salary review", hashlib.sha256).hexdigest()),
    ("text", None, "salary review", ""),
    ("none", None, "", ""),
])
def test_the_privacy_setting_decides_how_the_query_travels(field: str, key: str | None, text: str, digest: str) -> None:
    event = _answer(field, key)
    assert (event.query, event.query_sha256) == (text, digest)


def test_the_event_carries_what_the_answer_was() -> None:
    event = _answer("hash")
    assert (event.method, event.user_id, event.strategy, event.top_k, event.result_count) == ("query", "bob", Strategy.HYBRID, 4, 0)
    assert event.cache_hit and event.latency_ms == 12.5 and event.degraded == ("rerank:unavailable",)
    message = to_message(event)
    assert message.strategy == pb.STRATEGY_HYBRID and message.method == events_pb2.RETRIEVAL_METHOD_QUERY
    parsed = json_format.Parse(to_amqp(event).body, events_pb2.RetrievalCompleted())
    assert parsed == message and parsed.timestamp.ToDatetime().timestamp() == pytest.approx(event.timestamp.timestamp(), abs=1e-6)
    # Every field is in the JSON, an empty one too (the hashed query's text is ""): a consumer never meets a missing key.
    body = json.loads(to_amqp(event).body)
    assert set(body) == {f.json_name for f in events_pb2.RetrievalCompleted.DESCRIPTOR.fields} and body["query"] == ""


def test_a_served_repeat_is_reported_as_the_cache_hit_it_is() -> None:
    sink = Sink()
    options = QueryOptions(query="salary review", top_k=4, strategy=Strategy.ADAPTIVE, identity=Identity("bob"))
    Analytics(sink, "text", None).query_served(options, Strategy.HYBRID, 3, 0.25, ("rerank:unavailable",))  # type: ignore[arg-type]
    [event] = sink.events
    assert (event.method, event.query, event.user_id, event.strategy, event.top_k, event.result_count) == ("query", "salary review", "bob", Strategy.HYBRID, 4, 3)
    # Degraded as the hit it repeats was: by what describes its contexts (here, no reranker).
    assert event.cache_hit and event.latency_ms == 0.25 and event.degraded == ("rerank:unavailable",)


def test_no_sink_means_no_event_is_built() -> None:
    analytics = Analytics(None)
    assert not analytics.enabled
    analytics.search_answered("q", 5, Identity(), 0, 1.0)  # nothing to publish to: returns at once


@pytest.mark.parametrize("strategy", list(Strategy))
def test_an_event_can_be_made_for_every_strategy(strategy: Strategy) -> None:
    """A GRAPH answer's event had no strategy to travel as: it failed to serialize, was put back at
    the head of the buffer for ever, and the buffer filled behind it."""
    import dataclasses

    message = to_message(dataclasses.replace(_answer("hash"), strategy=strategy))
    assert pb.Strategy.Name(message.strategy) == f"STRATEGY_{strategy.name}"
