"""The console script leaves without the interpreter's teardown: what a command printed must
still arrive whole through a pipe, and its exit code must still be the command's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "retrieval_server.cli"]
#: Output to a pipe buffered, as it is unless PYTHONUNBUFFERED is set (it is on some machines).
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def test_a_commands_piped_output_and_exit_code_survive_the_short_exit(tmp_path: Path) -> None:
    done = subprocess.run([*CLI, "sample-corpus", str(tmp_path / "corpus")], capture_output=True, text=True, timeout=120, env=BUFFERED)
    assert done.returncode == 0, done.stderr
    written = sorted(str(p) for p in (tmp_path / "corpus").rglob("*") if p.is_file())
    assert written and sorted(done.stdout.splitlines()) == written

    failed = subprocess.run([*CLI, "quantize", str(tmp_path / "missing"), str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                            env=BUFFERED)
    assert failed.returncode == 1
    assert f"error: {tmp_path / 'missing'} has no model.onnx" in failed.stderr


def test_a_closed_stdout_is_not_an_error(tmp_path: Path) -> None:
    done = subprocess.run([*CLI, "sample-corpus", str(tmp_path / "corpus")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=120, env=BUFFERED, preexec_fn=lambda: os.close(1))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "corpus").is_dir()


#: search, its answer a long one (no server needed): more than a pipe holds, so that the command is
#: still writing when its reader goes
LONG_ANSWER = ("import sys\n"
               "from retrieval_server import cli\n"
               "cli._remote = lambda args: [print(f'line {i}') for i in range(200_000)] and 0\n"
               "sys.argv = ['retrieval-server', 'search', 'x']\n"
               "cli.run()\n")

#: ask, its answer streamed in more than a pipe holds (no server needed): rich writes it, and ended
#: the command with exit 1 itself when the pipe closed
LONG_STREAMED_ANSWER = ("import sys\n"
                        "from retrieval.v1 import retrieval_pb2 as pb\n"
                        "from retrieval_server import cli\n"
                        "from retrieval_server.ask import AskSession\n"
                        "class Client:\n"
                        "    def stream_query(self, question, **_):\n"
                        "        for i in range(2000):\n"
                        "            yield pb.StreamQueryResponse(answer_delta=f'sentence {i} of a long answer, ' * 4)\n"
                        "        yield pb.StreamQueryResponse(response=pb.QueryResponse())\n"
                        "    def close(self):\n"
                        "        pass\n"
                        "AskSession._connect = lambda self: Client()\n"
                        "sys.argv = ['retrieval-server', 'ask', 'x']\n"
                        "cli.run()\n")


def _with_reader_gone(command: list[str], read_first: int) -> subprocess.CompletedProcess[str]:
    """``command`` writing to a pipe whose reader reads ``read_first`` bytes (0: none) and then
    closes it, as ``| head`` does; the exit code and stderr are returned."""
    read_end, write_end = os.pipe()
    with subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE, text=True, env=BUFFERED) as child:
        os.close(write_end)
        if read_first:
            assert os.read(read_end, read_first)  # blocks until the command has written
        os.close(read_end)
        _, err = child.communicate(timeout=120)
    return subprocess.CompletedProcess(command, child.returncode, "", err)


def test_a_reader_that_stops_reading_is_no_error(tmp_path: Path) -> None:
    """search --json | head: the closed pipe was "error: [Errno 32] Broken pipe" and exit 1."""
    for answer in (LONG_ANSWER, LONG_STREAMED_ANSWER):
        mid_output = _with_reader_gone([sys.executable, "-c", answer], read_first=10)
        assert (mid_output.returncode, mid_output.stderr) == (0, ""), answer
    # Output small enough to wait in the buffer until the exit's flush, the reader gone before.
    at_exit = _with_reader_gone([*CLI, "sample-corpus", str(tmp_path / "corpus")], read_first=0)
    assert (at_exit.returncode, at_exit.stderr) == (0, "")
    assert (tmp_path / "corpus").is_dir()


def test_a_profiled_command_keeps_the_exit_that_writes_the_profile(tmp_path: Path) -> None:
    profile = tmp_path / "cli.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "retrieval_server.cli", "sample-corpus",
                           str(tmp_path / "corpus")], capture_output=True, text=True, timeout=120, env=BUFFERED)
    assert done.returncode == 0, done.stderr
    assert profile.stat().st_size > 0


#: ingest's report (no server needed): more documents stored than a pipe holds, and one that failed
FAILED_INGEST = ("import sys\n"
                 "from retrieval_server import cli\n"
                 "cli._ingest_remote = lambda args: cli._print_ingest([(f'doc{i}', 1, 1, 'added') for i in range(5000)],\n"
                 "                                                    [('bad.pdf', 'not a readable PDF')])\n"
                 "sys.argv = ['retrieval-server', 'ingest', 'x']\n"
                 "cli.run()\n")


def test_an_ingest_whose_reader_stops_reading_still_reports_its_failures() -> None:
    """ingest | head -1: the closed pipe ended the command with 0, its FAILED lines and summary unwritten."""
    done = _with_reader_gone([sys.executable, "-c", FAILED_INGEST], read_first=10)
    assert done.returncode == 3, done.stderr
    assert "FAILED    bad.pdf: not a readable PDF\n" in done.stderr
    assert "5000 documents indexed, 1 failed\n" in done.stderr
