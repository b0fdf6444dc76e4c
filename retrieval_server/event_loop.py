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
        try:
            import uvloop
        except ImportError:
            raise RuntimeError("RETRIEVAL_EVENT_LOOP=uvloop needs the uvloop package (not made for Windows): "
                               "install it, or set RETRIEVAL_EVENT_LOOP=asyncio") from None
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], kind: EventLoop) -> T:
    """``asyncio.run(main)`` on a loop of ``kind``."""
    try:
        factory = loop_factory(kind)
    except RuntimeError:
        main.close()  # never to run: no "was never awaited" warning on top of the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
