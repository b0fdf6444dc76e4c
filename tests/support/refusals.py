"""What a call refuses, for comparing a scoring_core kernel with its plain-Python twin."""

from __future__ import annotations

from collections.abc import Callable


def refusal(call: Callable[[], object]) -> type[Exception] | None:
    """The type of the exception ``call`` raises, or None when it returns."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the type is what is compared
        return type(exc)
    return None
