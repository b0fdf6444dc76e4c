"""The event loop a server process runs on.

uvloop by default: a served answer that is already known costs the loop thread mostly event-loop
bookkeeping (gRPC's completion callbacks, tasks, futures), which uvloop does in C. Measured beside
the standard loop on the 2-core machine (README, performance): about 15 µs less CPU per cached
Query at c=32. ``asyncio`` stays available for debugging tools that need the standard loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")

EventLoop = Literal["uvloop", "asyncio"]


def loop_factory(kind: EventLoop) -> Callable[[], asyncio.AbstractEventLoop]:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], kind: EventLoop) -> T:
    """``asyncio.run(main)`` on a loop of ``kind``."""
    with asyncio.Runner(loop_factory=loop_factory(kind)) as runner:
        return runner.run(main)
