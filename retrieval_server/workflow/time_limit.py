"""How long one model call may take: the operator's limit on it, or the request's deadline."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limit:
    """``seconds`` for the call; ``by_deadline`` when the request's deadline set them rather than
    the operator's limit. A call cut by the operator's limit is the provider's failure (its breaker
    counts it); one cut by the deadline is the caller's budget and counts neither way."""

    seconds: float
    by_deadline: bool

    @staticmethod
    def of(operator_s: float, time_left: float | None, share: float = 1.0) -> Limit:
        """The shorter of ``operator_s`` and ``share`` of the ``time_left`` (None: no deadline)."""
        if time_left is None or operator_s <= time_left * share:
            return Limit(operator_s, False)
        return Limit(max(0.0, time_left * share), True)
