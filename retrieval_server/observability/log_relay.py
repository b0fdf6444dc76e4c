"""Several processes' log lines on one stream, each line whole.

Workers that shared the supervisor's stderr interleaved their lines when the reader fell behind: a
write to a full pipe is atomic only up to PIPE_BUF (4 KiB), and an audit line listing 100 ids is
about 28 KB, so two workers' lines were cut into each other (176 of 240 not JSON). Each worker
now writes to a pipe of its own, which :class:`LogRelay` reads a line at a time and writes with
the supervisor's own lines, one write at a time.
"""

from __future__ import annotations

import threading
from typing import TextIO


class LogRelay:
    """A text stream (``write``, ``flush``) over ``out`` whose every write is whole: the supervisor's
    log handler writes through it, and :meth:`follow` relays a worker's pipe through it, line by line."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()
        self._relays: list[threading.Thread] = []

    def write(self, text: str) -> int:
        with self._lock:
            self._out.write(text)
            self._out.flush()
        return len(text)

    def flush(self) -> None:
        """Nothing is held: each write is flushed."""

    def follow(self, fd: int, name: str) -> None:
        """Relay what is written to the pipe ``fd`` (a worker's stderr, whatever writes it: its log
        lines, a traceback printed before its logging was set up), each line whole, until its
        end; the pipe is closed then."""
        self._relays = [relay for relay in self._relays if relay.is_alive()]
        relay = threading.Thread(target=self._relay, args=(fd,), name=f"log-relay-{name}", daemon=True)
        relay.start()
        self._relays.append(relay)

    def _relay(self, fd: int) -> None:
        with open(fd, "rb") as pipe:
            for line in pipe:
                # A worker killed in the middle of a line leaves it without its end: the next line
                # must not be joined to it.
                text = line.decode("utf-8", "replace")
                self.write(text if text.endswith("\n") else text + "\n")

    def join(self) -> None:
        """Wait until every pipe followed has ended (every writer has closed it, or exited): what
        the workers wrote last, as they stopped, is written before the supervisor exits."""
        for relay in self._relays:
            relay.join()
