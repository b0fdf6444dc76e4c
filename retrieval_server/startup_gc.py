"""Python's cyclic garbage collector during a command's start-up.

Start-up builds objects that live as long as the process: about 90,000 of them once ``ingest
--local`` has opened its application, 260,000 once a server is ready (module dictionaries,
classes, the settings' and protobuf's schemas). While they are built the collector runs again and
again over them: about 130 times, 25-30 ms, in the imports of ``ingest --local``, for garbage
that one collection at the end of start-up puts at 600-750 objects (about 1,500 in a server).
So a command runs its start-up without collecting (:func:`defer_collection`), then moves what
start-up built to the collector's permanent generation and collects again from there
(:func:`settle`): the later collections of a server, long-lived ones included, no longer traverse
the start-up objects. That garbage stays, the price of not collecting it: a full collection at a
server's start would cost more (95 ms) than the memory it frees. CPython's documentation gives the
same sequence for servers that fork their workers; ours spawn them, and each defers and settles
on its own.
"""

from __future__ import annotations

import gc


def defer_collection() -> None:
    """No cyclic collection until :func:`settle` (reference counting still frees most objects)."""
    gc.disable()


def settle() -> None:
    """Start-up is over: what exists now lives on, and collection resumes for what comes next.

    Nothing to do while collection is on: a command run in-process (``cli.main`` from a test or a
    script) leaves a collecting caller's collector as it was.
    """
    if gc.isenabled():
        return
    gc.freeze()
    gc.enable()
