"""Every bench report names the code that made it: the commit, and whether the checkout differed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.provenance import provenance


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_the_commit_and_whether_the_checkout_differs_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No repository above tmp_path answers for the folders below it.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-qm", "one")
    assert provenance(repo) == {"commit": _git(repo, "rev-parse", "HEAD"), "dirty": False}
    (repo / "a.py").write_text("x = 2\n")
    assert provenance(repo) == {"commit": _git(repo, "rev-parse", "HEAD"), "dirty": True}
    (repo / "a.py").write_text("x = 1\n")
    (repo / "b.py").write_text("")  # a module not yet committed ran too
    assert provenance(repo)["dirty"] is True

    # Not a repository, or no git at all: unknown, not a guess.
    (tmp_path / "plain").mkdir()
    assert provenance(tmp_path / "plain") == {"commit": None, "dirty": None}
    monkeypatch.setenv("PATH", str(tmp_path / "plain"))
    assert provenance(repo) == {"commit": None, "dirty": None}
