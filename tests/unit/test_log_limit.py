"""At most one log line per key and interval, on an injected clock."""

from __future__ import annotations

from retrieval_server.observability.log_limit import LogLimit
from tests.support.clock import Clock


def test_a_key_is_due_once_per_interval_and_keys_apart() -> None:
    clock = Clock()
    limit = LogLimit(every_s=60.0, clock=clock)
    assert limit.due(("metadata", "Unavailable"))
    assert not limit.due(("metadata", "Unavailable"))
    assert limit.due(("metadata", "RuntimeError")) and limit.due(("graph", "Unavailable"))
    clock.now = 59.9
    assert not limit.due(("metadata", "Unavailable"))
    clock.now = 60.0
    assert limit.due(("metadata", "Unavailable"))
    assert not limit.due(("metadata", "Unavailable"))
