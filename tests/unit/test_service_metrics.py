from __future__ import annotations

from prometheus_client import generate_latest

from retrieval_server.observability.metrics import ServiceMetrics


def test_dropped_events_are_exposed_at_zero_before_the_first_drop() -> None:
    """increase() needs a sample before a burst: a series born at its first drop never alerts."""
    text = generate_latest(ServiceMetrics().registry).decode()
    for reason in ("buffer_full", "shutdown"):
        assert f'retrieval_events_dropped_total{{reason="{reason}"}} 0.0' in text
