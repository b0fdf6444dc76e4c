"""The supervisor's rules that need no worker process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from retrieval_server.stale_runs import remove_stale_runs
from retrieval_server.supervisor import SCRATCH_PREFIX, restart_delay


def test_a_restart_that_keeps_failing_is_tried_again_less_and_less_often_up_to_a_minute() -> None:
    assert [restart_delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert restart_delay(10_000) == 60  # no overflow after days of failures


def test_the_workers_folders_of_supervisors_that_are_gone_are_removed(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead, own, alive = (tmp_path / f"retrieval-workers-{pid}-x1y2" for pid in (gone.pid, os.getpid(), os.getppid()))
    for folder in (dead, own, alive):
        (folder / "0").mkdir(parents=True)
    # A container restarted gives the new supervisor the old one's pid: its own pid, in a folder
    # it has not made yet, is a dead supervisor's too.
    kept = [
        alive,
        tmp_path / "retrieval-workers-xa9q08cz",  # no pid in its name
        tmp_path / f"retrieval-workers-{gone.pid}-file",  # not a folder
        tmp_path / f"retrieval-workers-{gone.pid}-link",  # nor a link to one
        tmp_path / "retrieval-metrics-0-x",
    ]
    kept[1].mkdir()
    kept[2].write_text("")
    kept[3].symlink_to(alive)
    kept[4].mkdir()
    assert sorted(remove_stale_runs(tmp_path, SCRATCH_PREFIX)) == sorted([dead, own])
    assert sorted(tmp_path.iterdir()) == sorted(kept)
