"""A stop asked for while ``serve`` starts, before its own signal handlers are in place.

Until a process handles SIGTERM it takes the signal's default, which ends it at once; except as
PID 1 (the image's entry point, without an init), where the kernel drops a signal that has no
handler: a SIGTERM in the first second or so of start-up (imports, settings, the model) was lost,
and ``docker stop`` waited out its timeout before killing the server. :func:`catch` is called
first thing; the server and the supervisor ask :func:`requested` once their own handlers are in
place, and stop as soon as they can, as after any stop during start-up.
"""

from __future__ import annotations

import signal
from types import FrameType

_received: list[int] = []


def _remember(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)


def catch() -> None:
    """Remember SIGTERM and SIGINT from now on instead of ending the process (or, as PID 1, losing
    them); a Ctrl-C during start-up is then a clean stop too, not a KeyboardInterrupt traceback."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _remember)


def requested() -> bool:
    """Whether SIGTERM or SIGINT came since :func:`catch`."""
    return bool(_received)
