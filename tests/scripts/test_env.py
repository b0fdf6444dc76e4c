"""scripts/_env.sh: the virtual environment demo.sh and test.sh install into."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO


@pytest.mark.slow
def test_a_venv_left_without_pip_by_a_failed_run_is_made_again(tmp_path: Path) -> None:
    """Debian's python3 without python3-venv makes .venv/bin/python, then fails at ensurepip: the next
    run, python3-venv installed, reused that .venv and every pip install failed ("No module named pip")."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "_env.sh", tmp_path / "scripts" / "_env.sh")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / ".venv"], check=True)
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(["bash", "-c", 'source scripts/_env.sh && make_venv && "$VENV_PY" -m pip --version'],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / ".venv").resolve().as_posix() in result.stdout  # the new venv's pip, not another one
