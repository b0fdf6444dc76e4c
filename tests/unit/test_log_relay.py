"""The supervisor's LogRelay: several writers' lines on one stream, each whole."""

from __future__ import annotations

import io
import os
import queue
import threading
from types import SimpleNamespace

import pytest

from retrieval_server.observability import log_relay
from retrieval_server.observability.log_relay import LogRelay


class _Writes(io.StringIO):
    """A stream that keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)


def test_each_line_of_each_pipe_is_written_whole_beside_the_relays_own() -> None:
    """Two workers' 20 KB lines, larger than a pipe writes at once, and the supervisor's own."""
    out = _Writes()
    relay = LogRelay(out)
    lines = {name: [f"{name} {i} ".ljust(20_000, name[0]) + "\n" for i in range(20)] for name in ("alpha", "beta")}
    writers = []
    for name, text in lines.items():
        read, write = os.pipe()
        relay.follow(read, name)

        def written(fd: int = write, text: list[str] = text) -> None:
            with os.fdopen(fd, "w") as pipe:
                for line in text:
                    pipe.write(line)
                    pipe.flush()

        writers.append(threading.Thread(target=written))
    for writer in writers:
        writer.start()
    relay.write("the supervisor's own line\n")
    for writer in writers:
        writer.join()
    relay.join()
    assert all(w.endswith("\n") for w in out.writes)  # whole lines only
    written = [line for w in out.writes for line in w.splitlines(keepends=True)]
    assert sorted(written) == sorted([*lines["alpha"], *lines["beta"], "the supervisor's own line\n"])
    assert [w for w in written if w.startswith("alpha")] == lines["alpha"]  # each pipe's in its order


def test_a_record_of_several_lines_written_at_once_stays_whole() -> None:
    """A traceback (the text format's records, or one printed before logging is set up) written in
    one write: relayed a line at a time, another worker's lines came in between its lines."""
    out = _Writes()
    relay = LogRelay(out)
    records = {name: [f"{name} record {i}\n" + "".join(f"  {name} frame {j}\n" for j in range(9)) for i in range(200)] for name in ("alpha", "beta")}
    writers = []
    for name, text in records.items():
        read, write = os.pipe()
        relay.follow(read, name)

        def written(fd: int = write, text: list[str] = text) -> None:
            for record in text:
                os.write(fd, record.encode())
            os.close(fd)

        writers.append(threading.Thread(target=written))
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    relay.join()
    for w in out.writes:
        assert len({line.split()[0] for line in w.splitlines()}) == 1, w  # one writer's lines in a write
    assert "".join(w for w in out.writes if w.startswith("alpha")) == "".join(records["alpha"])


def test_a_write_that_fails_loses_its_lines_and_the_relay_goes_on() -> None:
    """A full or non-blocking stderr (EAGAIN), a full disk: the relay ended, closing the worker's
    pipe, and every later line of that worker, audit lines among them, was lost."""
    refused = threading.Event()

    class FailingOnce(_Writes):
        def write(self, text: str) -> int:
            if not refused.is_set():
                refused.set()
                raise BlockingIOError(11, "Resource temporarily unavailable")
            return super().write(text)

    out = FailingOnce()
    relay = LogRelay(out)
    read, write = os.pipe()
    relay.follow(read, "worker")
    os.write(write, b"first\n")
    refused.wait()  # the first line was read, and its write refused
    os.write(write, b"second\n")
    os.close(write)
    relay.join()
    assert out.writes == ["second\n"]


def test_a_line_its_writer_left_unfinished_ends_there() -> None:
    """A worker killed in the middle of a line, or a crash's last words without a line break: the
    next line is not joined to it."""
    out = _Writes()
    relay = LogRelay(out)
    read, write = os.pipe()
    relay.follow(read, "crashed")
    os.write(write, b"Traceback (most recent call last):\nRuntimeError: cut")
    os.close(write)
    relay.join()
    relay.write("next\n")
    assert "".join(out.writes) == "Traceback (most recent call last):\nRuntimeError: cut\nnext\n" and out.writes[-1] == "next\n"


def test_a_pipes_relay_is_held_from_its_lines_read_waiting_behind_anothers_write_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor excuses a worker's silence by the time its own relay was held: one sum for
    every relay let a chatty worker's lines, under a slow reader, excuse a deadlocked one for good.
    A relay waiting for the lock, behind another's stalled write, reads its pipe no more either."""
    wall = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(log_relay, "time", SimpleNamespace(monotonic=lambda: wall.now))
    writing, reading = threading.Event(), threading.Event()
    waiting: queue.Queue[str] = queue.Queue()

    class Stalled(_Writes):
        def write(self, text: str) -> int:
            writing.set()
            reading.wait()
            return super().write(text)

    class Observed:
        """The relay's lock, telling which relay comes to wait for it."""

        def __init__(self) -> None:
            self._lock = threading.Lock()

        def __enter__(self) -> None:
            waiting.put(threading.current_thread().name)
            self._lock.acquire()

        def __exit__(self, *_: object) -> None:
            self._lock.release()

    relay = LogRelay(Stalled())
    relay._lock = Observed()  # type: ignore[assignment]  # noqa: SLF001
    pipes = {name: os.pipe() for name in ("stalled", "behind", "idle")}
    for name, (read, _) in pipes.items():
        relay.follow(read, name)
    os.write(pipes["stalled"][1], b"a line\n")
    writing.wait()
    assert waiting.get() == "log-relay-stalled"
    os.write(pipes["behind"][1], b"another line\n")
    assert waiting.get() == "log-relay-behind"
    wall.now += 5.0
    assert [relay.blocked_s(name) for name in pipes] == [5.0, 5.0, 0.0]
    reading.set()
    for _, write in pipes.values():
        os.close(write)
    relay.join()
    wall.now += 1.0
    assert [relay.blocked_s(name) for name in pipes] == [5.0, 5.0, 0.0]  # none held since
