"""Several processes' log lines on one stream, each line whole.

Workers that shared the supervisor's stderr interleaved their lines when the reader fell behind: a
write to a full pipe is atomic only up to PIPE_BUF (4 KiB), and an audit line listing 100 ids is
about 28 KB, so two workers' lines were cut into each other (176 of 240 not JSON). Each worker
now writes to a pipe of its own, which :class:`LogRelay` reads and writes with the supervisor's
own lines, whole lines in one write at a time.
"""

from __future__ import annotations

import errno
import os
import threading
from typing import TextIO

#: bytes asked of a worker's pipe at a time, and held at most waiting for a line's end
_READ = 65536
_MOST_HELD = 1 << 20


class LogRelay:
    """A text stream (``write``, ``flush``) over ``out`` whose every write is whole: the supervisor's
    log handler writes through it, and :meth:`follow` relays a worker's pipe through it, whole lines
    at a time."""

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
        lines, a traceback printed before its logging was set up) until its end; the pipe is closed
        then. A thread that cannot be started is a resource refused, as a process that cannot be
        (EAGAIN): OSError, which the supervisor retries later."""
        self._relays = [relay for relay in self._relays if relay.is_alive()]
        relay = threading.Thread(target=self._relay, args=(fd,), name=f"log-relay-{name}", daemon=True)
        try:
            relay.start()
        except RuntimeError as exc:
            os.close(fd)
            raise OSError(errno.EAGAIN, f"no thread to relay {name}'s log: {exc}") from exc
        self._relays.append(relay)

    def _relay(self, fd: int) -> None:
        # What a read returns up to its last line end, in one write: a record of several lines (a
        # traceback, the text format's) stays whole, as a writer's one write to a shared pipe was;
        # the rest waits for its line's end, up to _MOST_HELD (a longer line is written in parts).
        held = bytearray()
        with open(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(_READ):
                held += chunk
                end = held.rfind(b"\n") + 1 or (len(held) if len(held) >= _MOST_HELD else 0)
                if end:
                    self._put(bytes(held[:end]))
                    del held[:end]
        if held:
            # A worker killed in the middle of a line leaves it without its end: the next line
            # must not be joined to it.
            self._put(bytes(held) + b"\n")

    def _put(self, data: bytes) -> None:
        try:
            self.write(data.decode("utf-8", "replace"))
        except (OSError, ValueError):
            # Lost, as a log handler loses a record it cannot write; the relay goes on: ending here
            # closed the worker's pipe, and every later line of it (audit lines too) was lost.
            pass

    def join(self) -> None:
        """Wait until every pipe followed has ended (every writer has closed it, or exited): what
        the workers wrote last, as they stopped, is written before the supervisor exits."""
        for relay in self._relays:
            relay.join()
