"""A loopback port where nothing answers, for a dependency that is configured but absent."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refused_port() -> Iterator[int]:
    """A port held bound but never listening: every connection to it is refused, and no server the
    test starts later (nor the kernel's choice for ``port=0``) can take it while the block runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])
