"""A command on a volume of its own: a small tmpfs in a private mount namespace (unshare -m).

Lets tests reproduce what only a real filesystem shows (a read-only volume, a full one) without
touching the host: the mount exists only for the command and its children, and disappears with
them. The test reaches the volume through ``/proc/<pid>/root``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


def _unshare() -> list[str]:
    binary = shutil.which("unshare")
    if binary is None:
        pytest.fail("unshare (util-linux) is missing")
    return [binary, "-m"] if os.geteuid() == 0 else [binary, "-m", "--map-root-user"]


def require_private_mounts(tmp_path: Path) -> None:
    probe = tmp_path / "mount-probe"
    probe.mkdir(exist_ok=True)
    r = subprocess.run([*_unshare(), "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {probe}"], capture_output=True, text=True)
    if r.returncode != 0:
        msg = f"cannot mount a private tmpfs here ({r.stderr.strip()}); these tests need mount namespaces"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


@dataclass(frozen=True, slots=True)
class Volume:
    mountpoint: Path
    size_mb: int
    #: copied onto the volume before the command starts
    seed: Path | None = None
    read_only: bool = False

    def command(self, argv: list[str]) -> list[str]:
        m = shlex.quote(str(self.mountpoint))
        script = [f"mkdir -p {m}", f"mount -t tmpfs -o size={self.size_mb}m tmpfs {m}"]
        if self.seed is not None:
            script.append(f"cp -a {shlex.quote(str(self.seed))}/. {m}/")
        if self.read_only:
            script.append(f"mount -o remount,ro {m}")
        script.append('exec "$@"')
        return [*_unshare(), "sh", "-c", " && ".join(script), "sh", *argv]

    def seen_from(self, pid: int) -> Path:
        """The volume as the process ``pid`` (inside the namespace) sees it."""
        return Path(f"/proc/{pid}/root") / self.mountpoint.relative_to("/")


def fill(path: Path, leave_bytes: int) -> Path:
    """Write a file that leaves ``leave_bytes`` free on the volume of ``path``."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    filler = path / "filler"
    with filler.open("wb") as f:
        remaining = max(0, free - leave_bytes)
        block = b"\0" * (1 << 20)
        while remaining > 0:
            remaining -= f.write(block[: min(len(block), remaining)])
    return filler
