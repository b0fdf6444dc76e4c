from __future__ import annotations

import sys

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from retrieval_server.observability.metrics import SERVICE, ServiceMetrics


def test_dropped_events_are_exposed_at_zero_before_the_first_drop() -> None:
    """increase() needs a sample before a burst: a series born at its first drop never alerts."""
    text = generate_latest(ServiceMetrics().registry).decode()
    for reason in ("buffer_full", "shutdown"):
        assert f'retrieval_events_dropped_total{{reason="{reason}"}} 0.0' in text


def test_the_event_buffer_is_bounded_by_what_its_events_weigh_too() -> None:
    """10,000 events of a 64 KiB query text (RETRIEVAL_EVENTS_QUERY=text) held 630 MiB while the
    broker was down: the buffer takes what fits in its bytes as well as its count, and drops the rest."""
    import asyncio
    from datetime import datetime, timezone

    from retrieval_server.backends.events import RabbitMqPublisher
    from retrieval_server.domain import Strategy
    from retrieval_server.observability.analytics import RetrievalCompleted

    def event(i: int) -> RetrievalCompleted:
        return RetrievalCompleted(str(i), datetime.now(timezone.utc), "query", "q" * 65_536, "", "", Strategy.HYBRID, 5, 5, 1.0,
                                  False, (), "")

    async def fill() -> tuple[int, str]:
        metrics = ServiceMetrics()
        publisher = RabbitMqPublisher("amqp://127.0.0.1:1/", "x", "r", metrics, buffer=10_000, buffer_bytes=10 * 2**20)
        for i in range(1_000):  # never started: nothing is sent
            publisher.publish(event(i))
        return publisher.pending, generate_latest(metrics.registry).decode()

    pending, text = asyncio.run(fill())
    assert pending == 10 * 2**20 // (65_536 + 256)  # 159 events of 64 KiB fit in 10 MiB
    assert f'retrieval_events_dropped_total{{reason="buffer_full"}} {1_000 - pending}.0' in text


def test_the_event_buffer_weighs_the_bytes_its_texts_hold_and_the_warning_names_the_limit_hit(caplog: pytest.LogCaptureFixture) -> None:
    """The weight was the texts' length: queries of 4-byte characters (or one among ASCII, which
    Python then stores at 4 bytes a character) held 4 times RETRIEVAL_EVENTS_BUFFER_MB, and the
    warning named the event count, 10000, when the bytes had stopped 127 events."""
    import asyncio
    from datetime import datetime, timezone

    from retrieval_server.backends.events import RabbitMqPublisher
    from retrieval_server.domain import Strategy
    from retrieval_server.observability.analytics import RetrievalCompleted

    budget = 4 * 2**20

    def fill(query: str, buffer: int) -> int:
        async def run() -> int:
            publisher = RabbitMqPublisher("amqp://127.0.0.1:1/", "x", "r", ServiceMetrics(), buffer=buffer, buffer_bytes=budget)
            for i in range(200):  # never started: nothing is sent
                publisher.publish(RetrievalCompleted(str(i), datetime.now(timezone.utc), "query", (query + " ")[:-1], "", "u",
                                                     Strategy.HYBRID, 5, 5, 1.0, False, (), ""))
            return publisher.pending

        return asyncio.run(run())

    for query in ("\U0001F600" * 16_384, "q" * 65_535 + "\U0001F600", "q" * 65_536):
        caplog.clear()
        pending = fill(query, buffer=10_000)
        assert 0 < pending < 200
        assert pending * sys.getsizeof(query) <= budget
        assert "analytics buffer full (4 MiB of events, RETRIEVAL_EVENTS_BUFFER_MB)" in caplog.text
    caplog.clear()
    assert fill("q", buffer=50) == 50
    assert "analytics buffer full (50 events, RETRIEVAL_EVENTS_BUFFER)" in caplog.text


def _median(registry: CollectorRegistry, family: str, **labels: str) -> float:
    """histogram_quantile(0.5, ...) as Prometheus computes it: linear within the bucket the rank falls in."""
    buckets = sorted(
        (float(s.labels["le"]), s.value)
        for f in text_string_to_metric_families(generate_latest(registry).decode())
        for s in f.samples
        if s.name == family + "_bucket" and labels.items() <= s.labels.items()
    )
    rank = buckets[-1][1] / 2
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    raise AssertionError("no bucket holds the median")


def test_sub_millisecond_latencies_are_resolved() -> None:
    """With buckets from 1 ms, a cached answer's 30 µs read as 0.5 ms: every quantile under 1 ms did."""
    metrics = ServiceMetrics()
    for _ in range(10):
        metrics.observe_served("served", 0.03)
        metrics.grpc.handling.labels("unary", SERVICE, "Query").observe(30e-6)
    for family, labels in (("retrieval_stage_duration_seconds", {"stage": "served"}),
                           ("grpc_server_handling_seconds", {"grpc_method": "Query"}),
                           ("retrieval_request_duration_seconds", {"method": "Query"})):
        assert 25e-6 <= _median(metrics.registry, family, **labels) <= 50e-6, family


def test_a_served_answer_counts_what_degraded_it_as_the_hit_it_repeats() -> None:
    """A served repeat counts the degradations its hit counted (no reranker, say): else the share of
    answers degraded by them would fall as more answers are served."""
    metrics = ServiceMetrics()
    metrics.observe_query([("check_cache", 1.0)], "hit", ["rerank:unavailable", "analysis:hyde:skipped: needs an LLM"])
    metrics.observe_served("served", 0.03, ("rerank:unavailable", "analysis:hyde:skipped: needs an LLM"))
    text = generate_latest(metrics.registry).decode()
    for kind in ("rerank:unavailable", "analysis:hyde"):
        assert f'retrieval_degradations_total{{kind="{kind}"}} 2.0' in text, text
