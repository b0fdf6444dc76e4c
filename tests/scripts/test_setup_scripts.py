"""scripts/: the virtual environment demo.sh and test.sh install into, and demo.sh's start."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO


def _scripts_copy(root: Path) -> Path:
    """The scripts in a repository of their own, so that a .venv they make is not this one's."""
    shutil.copytree(REPO / "scripts", root / "scripts")
    return root / "scripts"


@pytest.mark.slow
def test_a_venv_left_without_pip_by_a_failed_run_is_made_again(tmp_path: Path) -> None:
    """Debian's python3 without python3-venv makes .venv/bin/python, then fails at ensurepip: the next
    run, python3-venv installed, reused that .venv and every pip install failed ("No module named pip")."""
    _scripts_copy(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / ".venv"], check=True)
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(["bash", "-c", 'source scripts/_env.sh && make_venv && "$VENV_PY" -m pip --version'],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / ".venv").resolve().as_posix() in result.stdout  # the new venv's pip, not another one


def test_demo_refuses_a_port_already_in_use(tmp_path: Path) -> None:
    """Another server on the demo's port answered its health probe and its queries, and the demo exited 0."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**os.environ, "PYTHON": sys.executable, "RETRIEVAL_PORT": str(port), "DEMO_EXIT": "1"}
        result = subprocess.run(["bash", _scripts_copy(tmp_path) / "demo.sh"], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert f"localhost:{port} is already in use" in result.stderr
    assert "installing" not in result.stderr  # refused before installing anything
