"""The README's benchmark numbers can be traced in the repository: `bench/results/`, where a run
writes its JSON, is git-ignored, so the rows the README cites are kept in tracked histories, and
the files it links to exist."""

from __future__ import annotations

import re

import pytest

from tests.support.paths import REPO

README = (REPO / "README.md").read_text()


def _table(text: str, header: str) -> list[str]:
    """The rows of the markdown table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


@pytest.mark.parametrize(("history", "header"), [
    ("bench/quality/HISTORY.md", "| system | SciFact | NFCorpus |"),
    ("bench/quality/HISTORY.md", "| run (SciFact, session 18"),
    ("bench/load/HISTORY.md", "| scenario | load | req/s |"),
    ("bench/load/HISTORY.md", "| scenario | concurrency | 1 process req/s |"),
])
def test_every_row_the_readme_cites_is_in_a_tracked_history(history: str, header: str) -> None:
    kept = (REPO / history).read_text().splitlines()
    assert [row for row in _table(README, header) if row not in kept] == []


def test_the_readme_links_to_files_in_the_repository_not_to_results() -> None:
    targets = set(re.findall(r"\]\(((?![a-z]+:)[^)#\s]+)(?:#[^)]*)?\)", README))
    assert targets and [t for t in sorted(targets) if not (REPO / t).exists() or t.startswith("bench/results")] == []
    # A cited number's source is a tracked file, not a run's git-ignored JSON.
    assert not re.search(r"(rows|numbers|cells?) (are )?in `bench/results/|`bench/results/[\w.-]+\.json` holds", README)
