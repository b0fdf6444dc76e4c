"""The fuzzy-name filter: the same names as its plain-Python twin, and never one fewer than rapidfuzz keeps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import fuzz, process

from scoring_core import reference
from scoring_core.name_filter import NameFilter

# A small alphabet makes near matches (the case the bounds must not cut) common.
text = st.text(alphabet="abcdé1", max_size=14)
names = st.lists(text, max_size=40)
threshold = st.floats(0, 100)


@settings(max_examples=300, deadline=None)
@given(names, text, threshold)
def test_the_filter_agrees_with_its_twin(listed: list[str], query: str, t: float) -> None:
    assert NameFilter(listed).candidates(query, t).tolist() == reference.fuzzy_candidates(listed, query, t)


@st.composite
def edited(draw: st.DrawFn, query: str) -> str:
    """``query`` after a few random insertions and deletions: the near matches the bounds must keep."""
    out = list(query)
    for _ in range(draw(st.integers(0, 4))):
        if out and draw(st.booleans()):
            del out[draw(st.integers(0, len(out) - 1))]
        else:
            out.insert(draw(st.integers(0, len(out))), draw(st.sampled_from("abcdé1")))
    return "".join(out)


@settings(max_examples=500, deadline=None)
@given(st.data(), text, threshold)
def test_every_name_rapidfuzz_keeps_is_a_candidate(data: st.DataObject, query: str, t: float) -> None:
    listed = data.draw(st.lists(st.one_of(text, edited(query)), max_size=40))
    kept = {i for i, name in enumerate(listed) if fuzz.ratio(query, name, score_cutoff=t) >= t}
    assert kept <= set(NameFilter(listed).candidates(query, t).tolist())


def test_it_drops_the_names_that_cannot_match_and_keeps_the_near_ones() -> None:
    listed = ["interleukin", "interleukins", "interleukin6", "insulin", "il6", "kinase", "nterleukin", ""]
    got = NameFilter(listed).candidates("interleukin", 88.0).tolist()
    assert got == [0, 1, 2, 6]
    scores = process.cdist(["interleukin"], listed, scorer=fuzz.ratio)[0]
    assert {i for i, s in enumerate(scores) if s >= 88.0} <= set(got)
    assert {3, 4, 5, 7}.isdisjoint(got)  # another word, a short acronym, a different length, nothing


@pytest.mark.parametrize(("threshold", "longer", "shorter"), [(70.0, 13, 7), (80.0, 6, 4), (90.0, 11, 9), (95.0, 21, 19)])
def test_a_pair_exactly_on_the_threshold_is_kept(threshold: float, longer: int, shorter: int) -> None:
    """A prefix pair whose ratio is the threshold itself (2 x shorter / (longer + shorter)): the
    distance bound must not round it away, whichever side is the query."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    a, b = letters[:longer], letters[:shorter]
    assert fuzz.ratio(a, b, score_cutoff=threshold) >= threshold  # rapidfuzz keeps it
    assert NameFilter([b]).candidates(a, threshold).tolist() == [0]
    assert NameFilter([a]).candidates(b, threshold).tolist() == [0]


@pytest.mark.parametrize("t", [1e-10, 1e-13, 1e-14, 1e-15, 5e-324])
def test_a_tiny_positive_threshold_keeps_what_rapidfuzz_keeps(t: float) -> None:
    # With 1e-14 and a long query the longest length worth a look overflowed int64: no name was kept.
    listed = ["a" * 600 + "b", "ab", "a", "b" * 900]
    query = "a" * 600
    kept = {i for i, name in enumerate(listed) if fuzz.ratio(query, name, score_cutoff=t) >= t}
    got = NameFilter(listed).candidates(query, t).tolist()
    assert kept <= set(got) and kept == {0, 1, 2}
    assert got == reference.fuzzy_candidates(listed, query, t)


def test_no_names_and_short_queries() -> None:
    assert NameFilter([]).candidates("anything", 88.0).tolist() == []
    assert NameFilter(["a", "ab", "abc"]).candidates("a", 50.0).tolist() == reference.fuzzy_candidates(["a", "ab", "abc"], "a", 50.0)
    assert NameFilter(["x"]).candidates("", 100.0).tolist() == []
    assert NameFilter([""]).candidates("", 100.0).tolist() == [0]
    assert np.issubdtype(NameFilter(["ab"]).candidates("ab", 88.0).dtype, np.integer)
    assert NameFilter(["ab\ud800c", "abc"]).candidates("abc", 60.0).tolist() == [0, 1]  # a lone surrogate is a character too


@pytest.mark.parametrize("t", [-1.0, float("-inf"), -1e300, 100.5, 200.0, float("nan")])
def test_a_threshold_outside_the_ratio_scale_is_rejected(t: float) -> None:
    # -inf and -1e300 found no names (an undefined float-to-int conversion) where rapidfuzz keeps
    # every one; 200 divided by zero.
    for candidates in (NameFilter(["abc", "abd"]).candidates, lambda q, t: reference.fuzzy_candidates(["abc", "abd"], q, t)):
        with pytest.raises(ValueError, match=r"threshold must lie in \[0, 100\]"):
            candidates("abc", t)
