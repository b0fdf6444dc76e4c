"""numba kernels resolved at their first call instead of at import.

``@nb.njit(signature, cache=True)`` compiles (or loads from numba's cache) when the module is
imported, and importing numba alone takes about half a second: every process that imports
scoring_core paid for all kernels, even one that calls none (``retrieval-server ingest --local``).
:func:`kernel` takes the same signatures as strings and makes the dispatcher on the first call,
importing numba then; the server still loads every kernel before it serves
(:func:`scoring_core.warm_up`).

A kernel may call another kernel: when it is resolved, the kernels it names are resolved first
and it is compiled against their dispatchers, as it would have been at import.

numba's cache only saves compile time: an entry it cannot read or write (cut short by a kill or a
full disk) is removed, and the kernel compiled without the cache, rather than failing every start;
so is a kernel for whose cache numba finds no writable folder (a read-only file system).
"""

from __future__ import annotations

import glob
import logging
import pickle
import threading
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: every kernel made, in the order their modules define them, so a kernel's callees before it:
#: what :func:`scoring_core.warm_up` loads
KERNELS: list[Kernel] = []
#: what numba raises for a cache entry it cannot read (truncated, emptied) or write (a full volume)
_CACHE_ERRORS = (OSError, EOFError, pickle.PickleError, ValueError)
#: in the RuntimeError numba raises when no folder it tries for the cache is writable (it probes
#: each by creating a file, so a read-only NUMBA_CACHE_DIR fails even when it holds every entry);
#: matched by message since numba raises RuntimeError for other failures too, which must not pass
_NO_CACHE_FOLDER = "no locator available"


class Kernel:
    """A kernel function; calling it runs its numba dispatcher, made on first use."""

    def __init__(self, fn: Callable[..., Any], signatures: str | Sequence[str], options: dict[str, Any]) -> None:
        KERNELS.append(self)
        self.py_func = fn
        self._signatures = [signatures] if isinstance(signatures, str) else list(signatures)
        self._options = options
        self._dispatcher: Any = None
        self._lock = threading.Lock()
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__

    def dispatcher(self) -> Any:
        """The numba dispatcher, its signatures compiled or loaded from the cache."""
        if self._dispatcher is None:
            with self._lock:
                if self._dispatcher is None:
                    self._dispatcher = self._resolve()
        return self._dispatcher

    def _resolve(self) -> Any:
        import numba

        fn = self.py_func
        callees = {name: value.dispatcher() for name in fn.__code__.co_names if isinstance(value := fn.__globals__.get(name), Kernel)}
        if callees:
            # The same code (so the same cache entry) with the callees' dispatchers as its globals.
            fn = types.FunctionType(fn.__code__, {**fn.__globals__, **callees}, fn.__name__, fn.__defaults__, fn.__closure__)
            fn.__qualname__ = self.py_func.__qualname__
        try:
            return numba.njit(self._signatures, cache=True, **self._options)(fn)
        except RuntimeError as exc:
            if _NO_CACHE_FOLDER not in str(exc):
                raise
            log.warning(
                "no folder for numba's cache of the kernel %s is writable (%s), so it is compiled without the cache "
                "(NUMBA_CACHE_DIR sets where the cache is kept)",
                self.__qualname__, exc,
            )
            return numba.njit(self._signatures, **self._options)(fn)
        except _CACHE_ERRORS as exc:
            folder, removed, kept = _drop_cache_entry(fn)
            log.warning(
                "numba's cache entry for the kernel %s in %s cannot be used (%s: %s), so it is compiled without the cache; "
                "removed %s%s (NUMBA_CACHE_DIR sets where the cache is kept)",
                self.__qualname__, folder, type(exc).__name__, exc, ", ".join(removed) or "nothing",
                f"; could not remove {', '.join(kept)}" if kept else "",
            )
            return numba.njit(self._signatures, **self._options)(fn)

    def __call__(self, *args: Any) -> Any:
        return self.dispatcher()(*args)


def _drop_cache_entry(fn: Callable[..., Any]) -> tuple[Path | str, list[str], list[str]]:
    """Remove the cache files of ``fn`` (its index and data files), which every later start would
    otherwise fail to read again: the cache folder, the files removed and those that could not be."""
    from numba.core.caching import CompileResultCacheImpl

    try:
        impl = CompileResultCacheImpl(fn)
    except RuntimeError:  # the folder has become unwritable since: numba no longer places the cache anywhere
        return "numba's cache folder", [], []
    folder = Path(impl.locator.get_cache_path())
    removed: list[str] = []
    kept: list[str] = []
    for path in sorted(folder.glob(f"{glob.escape(impl.filename_base)}.*")):
        try:
            path.unlink(missing_ok=True)
        except OSError:
            kept.append(path.name)
        else:
            removed.append(path.name)
    return folder, removed, kept


def kernel(signatures: str | Sequence[str], **options: Any) -> Callable[[Callable[..., Any]], Kernel]:
    """``@nb.njit(signatures, cache=True, **options)``, with signatures in numba's string form
    (``"int64[::1](float32[::1])"``), made at the first call."""
    return lambda fn: Kernel(fn, signatures, options)
