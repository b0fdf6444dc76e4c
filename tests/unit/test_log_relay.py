"""The supervisor's LogRelay: several writers' lines on one stream, each whole."""

from __future__ import annotations

import io
import os
import threading

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
    assert sorted(out.writes) == sorted([*lines["alpha"], *lines["beta"], "the supervisor's own line\n"])
    assert [w for w in out.writes if w.startswith("alpha")] == lines["alpha"]  # each pipe's in its order


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
    assert out.writes == ["Traceback (most recent call last):\n", "RuntimeError: cut\n", "next\n"]
