"""The supervisor's rules that need no worker process."""

from __future__ import annotations

from retrieval_server.supervisor import restart_delay


def test_a_restart_that_keeps_failing_is_tried_again_less_and_less_often_up_to_a_minute() -> None:
    assert [restart_delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert restart_delay(10_000) == 60  # no overflow after days of failures
