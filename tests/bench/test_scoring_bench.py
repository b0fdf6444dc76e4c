"""bench.scoring's fuzzy-name rows: the filtered look-ups must give what scoring every name gives."""

from __future__ import annotations

import numpy as np
import pytest

from bench.scoring import names


def test_the_name_rows_compare_equal_answers() -> None:
    rows = names.name_cases((300, 2_000), grams=6)
    assert [(r.names, r.grams) for r in rows] == [(300, 6), (2_000, 6)]
    assert all(r.filtered_ms > 0 and r.all_names_ms > 0 and r.python_filter_ms > 0 for r in rows)


def test_a_filter_that_drops_a_match_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(names.NameFilter, "candidates", lambda self, query, threshold: np.zeros(0, dtype=np.int64))
    with pytest.raises(AssertionError, match="differ"):
        names.name_cases((300,), grams=6)
