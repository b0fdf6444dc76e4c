"""Work a request no longer waits for: cancelled, and its outcome read when it comes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


def abandon(futures: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel each future (None: nothing started). Each outcome is read when it comes (the work
    may still end with an exception), or asyncio would log an ERROR for every exception nobody read."""
    for future in futures:
        if future is not None:
            future.cancel()
            future.add_done_callback(read_outcome)


def read_outcome(future: asyncio.Future[Any]) -> None:
    """The outcome of work nobody may await any more, read, so that asyncio logs no error for it."""
    if not future.cancelled():
        future.exception()
