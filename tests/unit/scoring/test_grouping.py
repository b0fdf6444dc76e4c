"""The numba grouping kernel agrees with its plain-Python twin."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoring_core import group_by_parent, reference


def _as_groups(g) -> list[tuple[int, float, list[int]]]:
    return [
        (int(p), float(s), [int(c) for c in g.children[g.offsets[i] : g.offsets[i + 1]]])
        for i, (p, s) in enumerate(zip(g.parents, g.parent_scores, strict=True))
    ]


def test_parents_ordered_by_best_child_children_by_score() -> None:
    g = group_by_parent(np.array([2, 0, 2, 1]), np.array([0.5, 0.9, 0.95, 0.1]), 3)
    assert _as_groups(g) == [(2, pytest.approx(0.95), [2, 0]), (0, pytest.approx(0.9), [1]), (1, pytest.approx(0.1), [3])]


def test_ties_break_by_input_position() -> None:
    g = group_by_parent(np.array([1, 0, 1, 0]), np.array([0.5, 0.5, 0.5, 0.5]), 2)
    assert _as_groups(g) == [(1, 0.5, [0, 2]), (0, 0.5, [1, 3])]


def test_empty_input() -> None:
    g = group_by_parent(np.array([], dtype=np.int64), np.array([], dtype=np.float32), 0)
    assert len(g) == 0 and g.offsets.tolist() == [0]


def test_nan_is_rejected_and_inf_ranks_as_an_extreme() -> None:
    with pytest.raises(ValueError, match="NaN"):
        group_by_parent(np.array([0, 1]), np.array([0.1, np.nan]), 2)
    g = group_by_parent(np.array([0, 1, 2]), np.array([0.1, np.inf, -np.inf]), 3)
    assert g.parents.tolist() == [1, 0, 2]


def test_codes_out_of_range_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        group_by_parent(np.array([0, 2]), np.array([0.1, 0.2]), 2)
    with pytest.raises(ValueError, match="differ in length"):
        group_by_parent(np.array([0]), np.array([0.1, 0.2]), 2)


def test_codes_that_are_not_integers_are_rejected_by_kernel_and_twin() -> None:
    # 0.2 and 0.9 were truncated to the one parent 0.
    for codes in ([0.2, 0.9], np.array([0.0, 1.0]), [float("nan"), 0]):
        with pytest.raises(ValueError, match="parent_codes must be integers"):
            group_by_parent(codes, np.array([1.0, 2.0]), 2)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="parent_codes must be integers"):
            reference.group_by_parent(list(codes), [1.0, 2.0])


def test_a_parent_count_that_is_not_an_integer_is_rejected() -> None:
    # 2.5 let code 2 pass the check while the kernel made 2 slots: it wrote out of bounds.
    with pytest.raises(TypeError, match="n_parents must be an integer"):
        group_by_parent(np.array([2, 0, 1]), np.array([1.0, 2.0, 3.0]), 2.5)  # type: ignore[arg-type]
    assert group_by_parent(np.array([2, 0, 1]), np.array([1.0, 2.0, 3.0]), np.int64(3)).parents.tolist() == [1, 0, 2]


def test_a_parent_count_far_beyond_the_rows_costs_no_memory_and_one_past_int64_is_refused() -> None:
    # The kernel made a slot per possible code: 2**40 of them failed with MemoryError, 2**63 with
    # an OverflowError naming nothing.
    codes, s = np.array([2**40 - 1, 7, 2**40 - 1]), np.array([0.1, 0.2, 0.3])
    assert _as_groups(group_by_parent(codes, s, 2**40)) == reference.group_by_parent(codes.tolist(), s.tolist())
    with pytest.raises(ValueError, match=re.escape("n_parents must be at most 2**63 - 1")):
        group_by_parent(np.array([0, 1]), np.array([0.1, 0.2]), 2**63)


scores = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=32)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), scores), max_size=200))))
def test_agrees_with_reference_on_random_input(case: tuple[int, list[tuple[int, float]]]) -> None:
    n_parents, rows = case
    codes = [p for p, _ in rows]
    vals = np.asarray([s for _, s in rows], dtype=np.float32)
    expected = reference.group_by_parent(codes, vals.tolist())
    assert _as_groups(group_by_parent(np.asarray(codes, dtype=np.int64), vals, n_parents)) == expected


def test_agrees_with_reference_at_service_scale() -> None:
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 2_000, size=10_000)
    # Rounded scores force many ties.
    vals = np.round(rng.random(10_000), 2).astype(np.float32)
    expected = reference.group_by_parent(codes.tolist(), vals.tolist())
    assert _as_groups(group_by_parent(codes, vals, 2_000)) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(allow_nan=False)), max_size=60))
def test_float64_scores_rank_as_their_float32_rounding_in_both(rows: list[tuple[int, float]]) -> None:
    codes = [p for p, _ in rows]
    vals = np.asarray([s for _, s in rows], dtype=np.float64)
    with np.errstate(over="ignore"):
        got = _as_groups(group_by_parent(np.asarray(codes, dtype=np.int64), vals, 6))
    assert got == reference.group_by_parent(codes, vals.tolist())
