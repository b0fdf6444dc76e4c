"""Which rows of a full-text ranking cut by score and rowid are sure of their place in the order by
score and document id."""

from __future__ import annotations

from retrieval_server.backends.metadata_store.sqlite import TIE_ROOM, exact_prefix


def test_the_sure_prefix_stops_before_the_score_the_fetch_was_cut_in() -> None:
    assert TIE_ROOM == 2  # the cases below fetch twice what they want
    fetched = [("a", 3.0), ("b", 2.0), ("c", 1.0), ("d", 1.0)]
    assert exact_prefix(fetched, 2) == ([("a", 3.0), ("b", 2.0)], False)
    assert exact_prefix(fetched[:3], 2) == (fetched[:3], True)  # fewer than fetched: every match is there
    assert exact_prefix([("a", 1.0), ("b", 1.0)], 1) == ([], False)
