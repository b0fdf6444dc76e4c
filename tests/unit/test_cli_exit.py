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
    assert written and sorted(done.stdout.split()) == written

    failed = subprocess.run([*CLI, "quantize", str(tmp_path / "missing"), str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                            env=BUFFERED)
    assert failed.returncode == 1
    assert failed.stderr.strip() == f"error: {tmp_path / 'missing'} has no model.onnx"
