"""numba kernels resolved at their first call instead of at import.

``@nb.njit(signature, cache=True)`` compiles (or loads from numba's cache) when the module is
imported, and importing numba alone takes about half a second: every process that imports
scoring_core paid for all kernels, even one that calls none (``retrieval-server ingest --local``).
:func:`kernel` takes the same signatures as strings and makes the dispatcher on the first call,
importing numba then; the server still loads every kernel before it serves
(:func:`scoring_core.warm_up`).

A kernel may call another kernel: when it is resolved, the kernels it names are resolved first
and it is compiled against their dispatchers, as it would have been at import. Their code is
compiled into it, while numba checks a cache entry against its own function's source file alone,
and as that file is at the first call, which may be minutes after the code was imported (a test
session) and the file changed since: so a kernel's entry is named for the sources of itself and
its callees as they were imported (:meth:`Kernel.source_digest`), and a kernel changed in place (a
checkout updated, an editable install) is compiled anew into every kernel calling it, whose
entries made with the old code are removed.

numba's cache only saves compile time: an entry it cannot read or write (cut short by a kill or a
full disk) is removed, and the kernel compiled without the cache, rather than failing every start;
so is a kernel for whose cache numba finds no writable folder (a read-only file system).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import inspect
import logging
import pickle
import re
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
        # Read now, with the code just imported from it: the file may hold other code by the first call.
        self._source = _file_digest(fn)
        self._digest: str | None = None
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

    def _callees(self) -> dict[str, Kernel]:
        fn = self.py_func
        return {name: value for name in fn.__code__.co_names if isinstance(value := fn.__globals__.get(name), Kernel)}

    def source_digest(self) -> str:
        """A digest of the source files of this kernel and of the kernels it calls, transitively,
        as they were imported: what its compiled code depends on."""
        if self._digest is None:
            callees = sorted(k.source_digest() for k in self._callees().values())
            self._digest = hashlib.sha256(b"\0".join([self._source, *(c.encode() for c in callees)])).hexdigest()[:16]
        return self._digest

    def _resolve(self) -> Any:
        import numba

        fn = self.py_func
        # The same code with the callees' dispatchers as its globals, its cache entry named for the
        # sources it was imported from (see the module's docstring).
        dispatchers = {name: k.dispatcher() for name, k in self._callees().items()}
        fn = types.FunctionType(fn.__code__, {**fn.__globals__, **dispatchers}, fn.__name__, fn.__defaults__, fn.__closure__)
        fn.__qualname__ = f"{self.py_func.__qualname__}.{self.source_digest()}"
        try:
            dispatcher = numba.njit(self._signatures, cache=True, **self._options)(fn)
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
        _drop_other_versions(fn, self.py_func.__qualname__)
        return dispatcher

    def __call__(self, *args: Any) -> Any:
        return self.dispatcher()(*args)


def _file_digest(fn: Callable[..., Any]) -> bytes:
    """The SHA-256 of ``fn``'s source file; empty without one (numba caches nothing then)."""
    path = inspect.getsourcefile(fn)
    try:
        return hashlib.sha256(Path(path).read_bytes()).digest() if path else b""
    except OSError:
        return b""


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


def _drop_other_versions(fn: Callable[..., Any], qualname: str) -> None:
    """Remove this Python's cache files of ``qualname`` made from other code than ``fn``'s (named for
    another digest of its sources, or for none: before entries were named for them)."""
    from numba.core.caching import CompileResultCacheImpl

    try:
        impl = CompileResultCacheImpl(fn)
    except RuntimeError:
        return
    module = Path(inspect.getfile(fn)).stem
    # Only this Python's: numba ends a name with the Python it was made by (".py311"), and another
    # interpreter sharing the folder would compile anew, every start, what this one removed.
    python = impl.filename_base[impl.filename_base.rindex(".py") :]
    other = re.compile(rf"{re.escape(module)}\.{re.escape(qualname)}(\.[0-9a-f]{{16}})?-\d+{re.escape(python)}\.")
    for path in Path(impl.locator.get_cache_path()).glob(f"{glob.escape(module)}.{glob.escape(qualname)}*"):
        if other.match(path.name) and not path.name.startswith(f"{impl.filename_base}."):
            with contextlib.suppress(OSError):  # only space is lost
                path.unlink(missing_ok=True)


def kernel(signatures: str | Sequence[str], **options: Any) -> Callable[[Callable[..., Any]], Kernel]:
    """``@nb.njit(signatures, cache=True, **options)``, with signatures in numba's string form
    (``"int64[::1](float32[::1])"``), made at the first call."""
    return lambda fn: Kernel(fn, signatures, options)
