"""Several processes' log lines on one stream, each line whole.

Workers that shared the supervisor's stderr interleaved their lines when the reader fell behind: a
write to a full pipe is atomic only up to PIPE_BUF (4 KiB), and an audit line listing 100 ids is
about 28 KB, so two workers' lines were cut into each other (176 of 240 not JSON). Each worker
now writes to a pipe of its own, which :class:`LogRelay` reads and writes with the supervisor's
own lines, whole lines in one write at a time.

A reader of the supervisor's stderr that stalls (Docker's blocking log mode over a slow driver)
holds the relay in its write, and every worker on its next log line once its pipe is full, as it
holds a single server: no line is dropped (audit lines are among them). :meth:`LogRelay.blocked_s`
tells the supervisor how long each worker's relay was held, so that it takes no worker waiting on
its log for hung, and only that worker: one sum for all let a chatty worker's lines, under a slow
reader, excuse a silent one's hang for good.
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
        # Per name followed: the seconds its relays were held in finished puts, how many are held
        # now, and the sum of when those began; one value, so that another thread reads all three
        # of one moment. Kept after the pipe ends: a worker started again under the name goes on
        # from it, as the supervisor counts from what it read before (a value going back would
        # take a worker for longer silent than it was). A restarted worker's relay can overlap the
        # last one's, which finishes its lines: hence a count.
        self._held: dict[str, tuple[float, int, float]] = {}
        self._held_lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._out.write(text)
            self._out.flush()
        return len(text)

    def blocked_s(self, name: str) -> float:
        """Seconds so far that the relays of the pipes followed as ``name`` were held with a line to
        write, waiting for another's write or in their own, the time under way included
        (time.monotonic): the time the worker writing to the pipe may have waited on it."""
        done, holding, began = self._held.get(name, (0.0, 0, 0.0))
        return done + holding * time.monotonic() - began

    def flush(self) -> None:
        """Nothing is held: each write is flushed."""

    def follow(self, fd: int, name: str) -> None:
        """Relay what is written to the pipe ``fd`` (a worker's stderr, whatever writes it: its log
        lines, a traceback printed before its logging was set up) until its end; the pipe is closed
        then. A thread that cannot be started is a resource refused, as a process that cannot be
        (EAGAIN): OSError, which the supervisor retries later."""
        self._relays = [relay for relay in self._relays if relay.is_alive()]
        relay = threading.Thread(target=self._relay, args=(fd, name), name=f"log-relay-{name}", daemon=True)
        try:
            relay.start()
        except RuntimeError as exc:
            os.close(fd)
            raise OSError(errno.EAGAIN, f"no thread to relay {name}'s log: {exc}") from exc
        self._relays.append(relay)

    def _relay(self, fd: int, name: str) -> None:
        # What a read returns up to its last line end, in one write: a record of several lines (a
        # traceback, the text format's) stays whole, as a writer's one write to a shared pipe was;
        # the rest waits for its line's end, up to _MOST_HELD (a longer line is written in parts).
        held = bytearray()
        with open(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(_READ):
                held += chunk
                end = held.rfind(b"\n") + 1 or (len(held) if len(held) >= _MOST_HELD else 0)
                if end:
                    self._put(bytes(held[:end]), name)
                    del held[:end]
        if held:
            # A worker killed in the middle of a line leaves it without its end: the next line
            # must not be joined to it.
            self._put(bytes(held) + b"\n", name)

    def _put(self, data: bytes, name: str) -> None:
        # Held from the line's being read, not from the write's start: a relay waiting for the
        # lock, behind another's stalled write, reads its pipe no more either.
        began = time.monotonic()
        with self._held_lock:
            done, holding, began_sum = self._held.get(name, (0.0, 0, 0.0))
            self._held[name] = (done, holding + 1, began_sum + began)
        try:
            self.write(data.decode("utf-8", "replace"))
        except (OSError, ValueError):
            # Lost, as a log handler loses a record it cannot write; the relay goes on: ending here
            # closed the worker's pipe, and every later line of it (audit lines too) was lost.
            pass
        finally:
            with self._held_lock:
                done, holding, began_sum = self._held[name]
                # Back to 0 exactly when none is held, not the rounding of many subtractions.
                self._held[name] = (done + time.monotonic() - began, holding - 1, began_sum - began if holding > 1 else 0.0)

    def join(self) -> None:
        """Wait until every pipe followed has ended (every writer has closed it, or exited): what
        the workers wrote last, as they stopped, is written before the supervisor exits."""
        for relay in self._relays:
            relay.join()
