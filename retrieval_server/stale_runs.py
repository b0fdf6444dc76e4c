"""The temporary folders of supervisors that were killed, which nobody else removes."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def remove_stale_runs(folder: Path, prefix: str) -> list[Path]:
    """Remove from ``folder`` the folders named ``<prefix><pid>-...`` of supervisors that were
    killed (SIGKILL, the OOM killer): in Kubernetes /tmp is a small memory volume that outlives a
    container's restarts. Returns those removed.

    A folder is stale when it is this user's, a folder (not a link to one), and the pid in its
    name is not alive, or is this process's own: a container restarted gives the new supervisor
    the pid of the old one (pid 1, as the image's entry point), and this one has not made its
    folder yet. (So a temporary directory is not to be shared between pid namespaces, where
    another supervisor's pid means nothing here.)
    """
    removed = []
    for path in folder.glob(f"{prefix}*-*"):
        pid = path.name.removeprefix(prefix).partition("-")[0]
        try:
            info = path.lstat()
        except OSError:
            continue
        if not pid.isdigit() or int(pid) <= 0 or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            continue
        if int(pid) == os.getpid() or not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
