from __future__ import annotations

from prometheus_client import generate_latest

from retrieval_server.observability.metrics import ServiceMetrics


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
