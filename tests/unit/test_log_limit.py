"""At most one log line per key and interval, on an injected clock."""

from __future__ import annotations

import logging

import pytest

from retrieval_server.backends.circuit_breaker import CircuitBreaker
from retrieval_server.backends.llm import LlmError, log_failure
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


def test_a_model_call_refused_by_its_open_breaker_is_debug_and_leaves_the_line_to_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    """The breaker logs its opening: its refusals, of the same kind as the failures it counts, must
    not be the caller's one line a minute, which the model's own failure is then not given."""
    logger, limit, breaker = logging.getLogger("test.llm"), LogLimit(clock=Clock()), CircuitBreaker(failure_threshold=1, clock=Clock())
    breaker.record_failure(LlmError("HTTP 503"))
    with pytest.raises(LlmError) as refused:
        with breaker.calling(lambda: LlmError("llm: circuit open after repeated failures")):
            pass
    with caplog.at_level(logging.DEBUG, logger="test.llm"):
        log_failure(logger, limit, "answer generation", refused.value, "answering extractively")
        log_failure(logger, limit, "answer generation", LlmError("HTTP 503"), "answering extractively")
        log_failure(logger, limit, "answer generation", LlmError("HTTP 503"), "answering extractively")
    mine = [r for r in caplog.records if r.name == "test.llm"]
    assert all(r.pathname == __file__ for r in mine)  # the caller's line, not log_failure's
    assert [(r.levelno, r.getMessage().split(";")[0]) for r in mine] == [
        (logging.DEBUG, "answer generation failed: LlmError: llm: circuit open after repeated failures"),
        (logging.WARNING, "answer generation failed: LlmError: HTTP 503"),
        (logging.DEBUG, "answer generation failed: LlmError: HTTP 503"),
    ]
