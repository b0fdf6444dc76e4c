"""Child processes a test starts and must not leave behind."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T", str, bytes)


@contextmanager
def reaped(proc: subprocess.Popen[T]) -> Iterator[subprocess.Popen[T]]:
    """``proc``; on the way out, killed and waited for if it still runs (a test that failed
    before stopping its server leaves no process holding a port or a data folder)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
