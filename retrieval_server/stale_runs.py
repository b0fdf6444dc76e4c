"""The temporary folders of processes that were killed (supervisors, read-only servers), which nobody else removes."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
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


_swept: set[tuple[str, str]] = set()
_sweeping = threading.Lock()


def own_folder(prefix: str) -> Path:
    """A new folder ``<prefix><pid>-...`` of this process in the temporary directory, for what only
    it may use (a private copy of the index). The first time a process makes one of ``prefix``
    there, the folders of that prefix whose process is gone are removed first: a server that is
    killed removes nothing, and each restart of one that keeps being killed left a copy as large
    as the index. Later calls sweep nothing, as this process's own folders are then its live ones.
    """
    folder = tempfile.gettempdir()
    with _sweeping:
        if (folder, prefix) not in _swept:
            remove_stale_runs(Path(folder), prefix)
            _swept.add((folder, prefix))
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=folder))
