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


def test_a_profiled_command_keeps_the_exit_that_writes_the_profile(tmp_path: Path) -> None:
    profile = tmp_path / "cli.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "retrieval_server.cli", "sample-corpus",
                           str(tmp_path / "corpus")], capture_output=True, text=True, timeout=120, env=BUFFERED)
    assert done.returncode == 0, done.stderr
    assert profile.stat().st_size > 0
