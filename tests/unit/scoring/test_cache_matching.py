"""The cosine cache matcher against its plain-Python twin."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring_core import CosineMatcher, reference


def _unit(*v: float) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_threshold_expiry_and_scope() -> None:
    m = CosineMatcher(3, threshold=0.95)
    pub = m.add(_unit(1, 0, 0), expires_at=100)
    alice = m.add(_unit(0, 1, 0), expires_at=100, scope=7)
    soon = m.add(_unit(0, 0, 1), expires_at=5)
    assert m.match(_unit(1, 0.01, 0), now=0)[0] == pub
    assert m.match(_unit(0, 1, 0), now=0, caller_scope=0)[0] == -1  # alice's entry is not public
    assert m.match(_unit(0, 1, 0), now=0, caller_scope=7)[0] == alice
    assert m.match(_unit(0, 1, 0), now=0, caller_scope=8)[0] == -1
    assert m.match(_unit(1, 0.01, 0), now=0, caller_scope=7, include_public=False)[0] == -1  # public row excluded
    assert m.match(_unit(0, 1, 0), now=0, caller_scope=7, include_public=False)[0] == alice
    assert m.match(_unit(0, 0, 1), now=4)[0] == soon
    assert m.match(_unit(0, 0, 1), now=5)[0] == -1  # expired at 5
    assert m.match(_unit(1, 1, 0), now=0)[0] == -1  # cosine 0.71 < 0.95
    assert math.isnan(m.match(np.zeros(3), now=0)[1])


@pytest.mark.parametrize("scope", [1.5, 7.0, "7", 2**63, -(2**63) - 1])
def test_a_scope_that_is_no_int64_integer_is_refused_naming_it_before_a_row_is_taken(scope: object) -> None:
    # A float scope was truncated into another user's (1.5 read as 1, and a lookup's 7.9 saw user
    # 7's rows), "7" parsed; one past int64 raised numpy's OverflowError after the row was taken:
    # in a full matcher the oldest live row was evicted for a vector never stored.
    m = CosineMatcher(2, threshold=0.9, initial_capacity=1, max_entries=1)
    kept = m.add(_unit(1, 0), expires_at=10.0, scope=7)
    with pytest.raises((TypeError, ValueError), match="^scope must"):
        m.add(_unit(0, 1), expires_at=10.0, scope=scope)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError), match="^caller_scope must"):
        m.match(_unit(1, 0), now=0.0, caller_scope=scope)  # type: ignore[arg-type]
    assert len(m) == 1 and m.match(_unit(1, 0), now=0.0, caller_scope=7)[0] == kept
    assert m.match(_unit(1, 0), now=0.0, caller_scope=np.int64(7))[0] == kept  # numpy's integers are integers


def test_growth_reuse_and_eviction_without_rebuilding() -> None:
    m = CosineMatcher(2, initial_capacity=2, max_entries=4)
    rows = [m.add(_unit(1, i / 10), expires_at=10) for i in range(4)]
    assert rows == [0, 1, 2, 3] and m.capacity == 4 and len(m) == 4
    m.remove(1)
    assert m.add(_unit(0, 1), expires_at=10) == 1  # the freed row is reused
    assert m.expire(now=10) == 4 and len(m) == 0
    for i in range(4):
        m.add(_unit(1, i), expires_at=20 + i)
    newest = m.add(_unit(-1, 0), expires_at=50)  # full: the oldest live row is evicted
    assert len(m) == 4 and m.capacity == 4
    assert m.match(_unit(-1, 0), now=0)[0] == newest


def test_a_matcher_emptied_to_a_quarter_shrinks_and_its_rows_move_in_order() -> None:
    m = CosineMatcher(2, initial_capacity=1, max_entries=64)
    rows = [m.add(_unit(1, i / 8), expires_at=10 + i) for i in range(16)]
    assert m.capacity == 16 and m.shrink() == {}  # every row live
    for r in rows[:12]:
        m.remove(r)
    moved = m.shrink()
    assert m.capacity == 8 and len(m) == 4 and moved == {12: 0, 13: 1, 14: 2, 15: 3}
    assert m.match(_unit(1, 15 / 8), now=0)[0] == 3
    # Eviction order is kept: full again, the oldest live row (once 12) goes first.
    more = [m.add(_unit(-1, i / 8), expires_at=50) for i in range(60)]
    assert m.capacity == 64 and len(m) == 64 and m.match(_unit(1, 12 / 8), now=0)[0] == 0
    m.add(_unit(0, -1), expires_at=50)
    assert m.match(_unit(1, 12 / 8), now=0)[0] != 0 and m.match(_unit(1, 13 / 8), now=0)[0] == 1
    assert len(more) == 60


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), max_size=60), st.integers(0, 5))
def test_a_shrunk_matcher_matches_as_before(entries, probe) -> None:  # type: ignore[no-untyped-def]
    m = CosineMatcher(3, initial_capacity=1, max_entries=32)
    direction = [_unit(1, 0, 0), _unit(0, 1, 0), _unit(0, 0, 1), _unit(1, 1, 0), _unit(0, 1, 1), _unit(1, 0, 1)]
    for d, removed in entries:
        row = m.add(direction[d], expires_at=100, scope=d % 2)
        if removed:
            m.remove(row)
    before = [m.match(direction[probe], now=0, caller_scope=s) for s in (0, 1)]
    live_before, capacity = len(m), m.capacity
    moved = m.shrink()
    assert len(m) == live_before and (m.capacity <= max(1, 2 * live_before) or m.capacity == capacity)
    after = [m.match(direction[probe], now=0, caller_scope=s) for s in (0, 1)]
    for (row, score), (row2, score2) in zip(before, after, strict=True):
        assert moved.get(row, row) == row2 and (row == -1 or score == score2)


def test_bad_vectors_are_rejected() -> None:
    m = CosineMatcher(2)
    with pytest.raises(ValueError, match="dims"):
        m.add(np.ones(3), expires_at=1)
    with pytest.raises(ValueError, match="non-zero"):
        m.add(np.zeros(2), expires_at=1)
    with pytest.raises(ValueError, match="finite"):
        m.add(np.array([np.nan, 1.0]), expires_at=1)


@pytest.mark.parametrize("threshold", [float("nan"), 1.5, -0.1, float("inf")])
def test_a_threshold_outside_0_1_is_rejected(threshold: float) -> None:
    # NaN and 1.5 were accepted and then matched nothing, silently turning the cache off.
    with pytest.raises(ValueError, match=r"threshold must lie in \[0, 1\]"):
        CosineMatcher(2, threshold=threshold)
    with pytest.raises(ValueError, match=r"threshold must lie in \[0, 1\]"):
        reference.cache_match([[1.0, 0.0]], [1], [1.0], [0], [1.0, 0.0], 0.0, 0, threshold)


def test_a_threshold_that_is_not_a_number_is_refused_naming_it() -> None:
    # Python's "'<=' not supported between ..." named nothing.
    with pytest.raises(TypeError, match=re.escape("threshold must be a real number, got '0.9'")):
        CosineMatcher(2, threshold="0.9")  # type: ignore[arg-type]
    assert CosineMatcher(2, threshold=np.float32(0.5)).threshold == 0.5  # type: ignore[arg-type]


def test_a_stored_vector_always_matches_itself_at_threshold_1() -> None:
    # Its float32 score is 1 only up to rounding: about 3 in 10 missed their own row.
    vectors = np.random.default_rng(0).normal(size=(1000, 384)).astype(np.float32)
    m = CosineMatcher(384, threshold=1.0, initial_capacity=1000)
    rows = [m.add(v, expires_at=1e9) for v in vectors]
    assert [m.match(v, now=0.0)[0] for v in vectors] == rows


def test_a_score_below_the_threshold_is_never_served() -> None:
    # The threshold was rounded to float32 first: 0.95 became 0.94999998, which scores reached.
    m = CosineMatcher(2, threshold=0.95)
    m.add(np.array([1.0, 0.0]), expires_at=1e9)
    served = []
    for c in np.linspace(0.9499999, 0.9500001, 400):
        row, score = m.match(np.array([c, np.sqrt(1 - c * c)]), now=0.0)
        if row == 0:
            served.append(score)
    assert served and min(served) >= 0.95


def test_nan_times_are_rejected_and_inf_never_expires() -> None:
    # A NaN expiry compared false with every time: the row was never expired nor freed. A NaN now
    # found no row expired, so expired rows were served.
    m = CosineMatcher(2, threshold=0.5)
    with pytest.raises(ValueError, match="expires_at must not be NaN"):
        m.add(_unit(1, 0), expires_at=float("nan"))
    assert len(m) == 0
    m.add(_unit(1, 0), expires_at=5.0)
    for call in (lambda: m.match(_unit(1, 0), now=float("nan")), lambda: m.expire(float("nan"))):
        with pytest.raises(ValueError, match="now must not be NaN"):
            call()
    with pytest.raises(ValueError, match="now must not be NaN"):
        reference.cache_match([[1.0, 0.0]], [1], [5.0], [0], [1.0, 0.0], float("nan"), 0, 0.5)
    with pytest.raises(ValueError, match="expires_at must not be NaN"):
        reference.cache_match([[1.0, 0.0]], [1], [float("nan")], [0], [1.0, 0.0], 0.0, 0, 0.5)
    forever = m.add(_unit(0, 1), expires_at=float("inf"))
    assert m.expire(1e300) == 1 and m.match(_unit(0, 1), now=1e300)[0] == forever


vec = st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0]), min_size=4, max_size=4).filter(any)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(vec, st.floats(0, 20), st.sampled_from([0, 0, 1, 2]), st.booleans()), max_size=40),
    vec, st.floats(0, 20), st.sampled_from([0, 1, 2]), st.floats(0.0, 1.0), st.booleans(),
)
def test_agrees_with_reference(entries, query, now, caller, threshold, include_public) -> None:  # type: ignore[no-untyped-def]
    m = CosineMatcher(4, threshold=threshold, initial_capacity=4)
    for v, exp, scope, removed in entries:
        row = m.add(np.asarray(v), expires_at=exp, scope=scope)
        if removed:
            m.remove(row)
    matrix, live, expires, scope = m.snapshot()
    q = np.asarray(query, dtype=np.float32) / np.linalg.norm(query)
    row, score = m.match(np.asarray(query), now, caller, include_public)
    ref_row, ref_score = reference.cache_match(
        matrix.tolist(), live.tolist(), expires.tolist(), scope.tolist(), q.tolist(), now, caller, threshold, include_public
    )
    # Another row is only acceptable when the twin could have served it: scores equal up to
    # rounding are no licence to serve a removed, expired or another user's row.
    if row not in (-1, ref_row):
        assert live[row] and expires[row] > now and scope[row] in ((0, caller) if include_public else (caller,))
    # float32 vs float64 sums may differ in the last bits right at the threshold, either way.
    if ref_row == -1:
        assert row == -1 or abs(score - threshold) < 1e-5
    elif row == -1:
        assert abs(ref_score - threshold) < 1e-5
    else:
        assert score == pytest.approx(ref_score, abs=1e-5)
        if row != ref_row:  # only an exact tie (up to rounding) may pick another row
            assert abs(float(matrix[row] @ q) - ref_score) < 1e-5


def test_agrees_at_service_scale() -> None:
    rng = np.random.default_rng(5)
    m = CosineMatcher(384, threshold=0.0)
    base = rng.normal(size=(5000, 384)).astype(np.float32)
    for i, v in enumerate(base):
        m.add(v, expires_at=float(i % 50), scope=i % 3)
    q = base[4321] + 0.01 * rng.normal(size=384).astype(np.float32)
    matrix, live, expires, scope = m.snapshot()
    qn = q / np.linalg.norm(q)
    ref = reference.cache_match(matrix.tolist(), live.tolist(), expires.tolist(), scope.tolist(), qn.tolist(), 10.0, 1, 0.0)
    assert m.match(q, now=10.0, caller_scope=1)[0] == ref[0] == 4321


def test_parallel_scan_equals_single_thread_scan() -> None:
    rng = np.random.default_rng(11)
    n = CosineMatcher.PARALLEL_MIN_ROWS * 2 + 7
    vecs = rng.normal(size=(n, 16)).astype(np.float32)
    vecs[n - 3] = vecs[5]  # an exact tie across the two halves: the first row must win
    one, two = CosineMatcher(16, threshold=0.0, initial_capacity=n), CosineMatcher(16, threshold=0.0, initial_capacity=n, threads=2)
    for i, v in enumerate(vecs):
        for m in (one, two):
            m.add(v, expires_at=float(i % 7), scope=i % 3)
    try:
        for q_row, now, caller in [(5, 0.0, 0), (5, 0.0, 2), (n - 1, 3.0, 1), (17, 6.5, 0)]:
            (r1, s1), (r2, s2) = one.match(vecs[q_row], now, caller), two.match(vecs[q_row], now, caller)
            assert r1 == r2 and (s1 == s2 or (math.isnan(s1) and math.isnan(s2)))
        assert two.match(vecs[5], 0.0, 2)[0] == one.match(vecs[5], 0.0, 2)[0] == 5  # rows 5 and n-3: same vector, scope 2
    finally:
        two.close()
