"""The event loop a server process runs on.

uvloop by default: a served answer that is already known costs the loop thread mostly event-loop
bookkeeping (gRPC's completion callbacks, tasks, futures), which uvloop does in C. Measured beside
the standard loop on the 2-core machine (bench/floor/HISTORY.md, session 22): 153–175 µs of
server CPU per cached Query at c=32 against 179–191 µs. ``asyncio`` stays available for tools
that need the standard loop, and for platforms uvloop is not made for (Windows).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

T = TypeVar("T")

EventLoop = Literal["uvloop", "asyncio"]


def loop_factory(kind: EventLoop) -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a loop of ``kind``; raises RuntimeError, naming the setting, when uvloop is missing."""
    if kind == "uvloop":
        # Imported here, not at the top: the settings module imports this one, and commands that
        # never run a server (ingest, graph export) read the settings too.
        try:
            import uvloop
        except ImportError:
            raise RuntimeError("RETRIEVAL_EVENT_LOOP=uvloop needs the uvloop package (not made for Windows): "
                               "install it, or set RETRIEVAL_EVENT_LOOP=asyncio") from None
        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], kind: EventLoop) -> T:
    """Run ``main`` to the end on a new loop of ``kind``, then close the loop.

    Through ``asyncio.Runner``: ``asyncio.run`` takes a loop factory only from Python 3.12, and the
    project supports 3.11. Unlike ``asyncio.run`` it installs no loop as the thread's current one;
    the service only ever asks for the running loop.
    """
    try:
        factory = loop_factory(kind)
    except RuntimeError:
        main.close()  # never to run: no "was never awaited" warning on top of the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def running() -> str:
    """The kind of the running loop, as the ``serving`` log line reports it."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]
