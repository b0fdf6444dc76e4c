"""The code a benchmark ran: the commit, and whether the checkout differed from it."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def provenance(root: Path = REPO) -> dict[str, str | bool | None]:
    """``{"commit", "dirty"}`` of the checkout at ``root``, merged into every report so that a number
    can be traced to the code that made it; both null where git or the repository is absent (an
    installed copy, a tarball), rather than a guess. Untracked files count as dirty: a module not yet
    committed changes what ran as much as an edited one."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": bool(status.strip())}
