"""Several processes' log lines on one stream, each line whole.

Workers that shared the supervisor's stderr interleaved their lines when the reader fell behind: a
write to a full pipe is atomic only up to PIPE_BUF (4 KiB), and an audit line listing 100 ids is
about 28 KB, so two workers' lines were cut into each other (176 of 240 not JSON). Each worker
now writes to a pipe of its own, which :class:`LogRelay` reads and writes with the supervisor's
own lines, whole lines in one write at a time.

A reader of the supervisor's stderr that stalls (Docker's blocking log mode over a slow driver)
holds the relay in its write, and every worker on its next log line once its pipe is full, as it
holds a single server: no line is dropped (audit lines are among them). :meth:`LogRelay.blocked_s`
tells the supervisor how long, so that it takes no worker waiting on its log for hung.
"""

from __future__ import annotations

import errno
import os
import threading
import time
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
        # The seconds spent in finished writes, and when the write under way began: one value, so
        # that another thread reads both of one moment.
        self._writes: tuple[float, float | None] = (0.0, None)

    def write(self, text: str) -> int:
        with self._lock:
            done, _ = self._writes
            began = time.monotonic()
            self._writes = (done, began)
            try:
                self._out.write(text)
                self._out.flush()
            finally:
                self._writes = (done + time.monotonic() - began, None)
        return len(text)

    def blocked_s(self) -> float:
        """Seconds spent so far writing to ``out``, the write under way included (time.monotonic)."""
        done, began = self._writes
        return done if began is None else done + time.monotonic() - began

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
