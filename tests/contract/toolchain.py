"""The contract's tools: buf and the Go / Node toolchains that scripts/test.sh installs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO

NODE_DIR = REPO / "clients" / "node"
GO_DIR = REPO / "clients" / "go"
BUF = NODE_DIR / "node_modules" / ".bin" / "buf"
OFFLINE_GO = GO_DIR / "offline-go"


def need(path_or_command: str | Path, install: str) -> str:
    """A tool the tests cannot do without: a missing one fails (scripts/test.sh installs it), never skips."""
    if isinstance(path_or_command, Path):
        found = str(path_or_command) if path_or_command.exists() else None
    else:
        found = shutil.which(path_or_command)
    if not found:
        pytest.fail(f"{path_or_command} is not installed; scripts/test.sh installs it ({install})")
    return found


def buf(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    exe = need(BUF, "npm install --prefix clients/node")
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
