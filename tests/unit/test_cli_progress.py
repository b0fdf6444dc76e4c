"""The ingest commands' progress bar: shown to someone watching a terminal, and otherwise not
even imported (tqdm is about 15 ms of a scripted ingest's start)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from retrieval_server import cli


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_bar_advance(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with cli._progress(False, total=5, unit="file", mininterval=0) as advance:  # noqa: SLF001
        advance(2)
        advance(3)
    assert "5/5" in terminal.getvalue() and "file" in terminal.getvalue()


@pytest.mark.parametrize("quiet, terminal", [(True, True), (False, False)])
def test_no_bar_for_a_script_or_quiet(monkeypatch: pytest.MonkeyPatch, quiet: bool, terminal: bool) -> None:
    stream = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    with cli._progress(quiet, total=5, unit="file") as advance:  # noqa: SLF001
        advance(5)
    assert stream.getvalue() == ""


def test_without_a_bar_tqdm_is_not_imported() -> None:
    script = ("import sys\nfrom retrieval_server import cli\n"
              "with cli._progress(True, unit='doc') as advance:\n    advance(1)\n"
              "print('tqdm' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
