"""Python's cyclic garbage collector during a command's start-up.

Start-up builds objects that live as long as the process: some 90,000 of them (module
dictionaries, classes, the settings' and protobuf's schemas). While they are built the collector
runs about 130 times and traverses them again and again: 25-30 ms of the imports of ``ingest
--local``, for garbage that a single collection at the end of start-up puts at some 600 objects.
So a command runs its start-up without collecting (:func:`defer_collection`), then moves what
start-up built to the collector's permanent generation and collects again from there
(:func:`settle`): the later collections of a server, long-lived ones included, no longer traverse
the start-up objects. CPython's documentation recommends the same sequence (``gc.freeze``) for
servers that fork; the few hundred start-up cycles it keeps are the price.
"""

from __future__ import annotations

import gc


def defer_collection() -> None:
    """No cyclic collection until :func:`settle` (reference counting still frees most objects)."""
    gc.disable()


def settle() -> None:
    """Start-up is over: what exists now lives on, and collection resumes for what comes next.

    Nothing to do where collection was not deferred: a command run in-process (``cli.main``
    from a test or a script) leaves its caller's collector as it was.
    """
    if gc.isenabled():
        return
    gc.freeze()
    gc.enable()
