"""Whether files changed since they were last read: their modification times and sizes.

A certificate rotated in place (the gRPC port's, and /metrics's over HTTPS) is read again when
its stamps differ from the ones it was read with.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def file_stamps(paths: Iterable[Path]) -> tuple[tuple[int, int], ...]:
    """Each file's (mtime in ns, size); raises OSError for one that cannot be read."""
    return tuple((s.st_mtime_ns, s.st_size) for s in (p.stat() for p in paths))
