"""RRF and score fusion kernels against their plain-Python twins."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.scoring import numpy_impls
from scoring_core import reference, rrf, score_fusion
from tests.support.refusals import refusal


def _pairs(fused) -> list[tuple[int, float]]:
    return list(zip(fused.ids.tolist(), fused.scores.tolist(), strict=True))


def test_rrf_by_hand() -> None:
    fused = rrf([[1, 2, 3], [3, 1, 4]], k=60)
    assert fused.ids.tolist() == [1, 3, 2, 4]
    assert fused.scores[0] == pytest.approx(1 / 61 + 1 / 62)
    assert fused.scores[1] == pytest.approx(1 / 63 + 1 / 61)


def test_rrf_ranks_start_at_one_and_weights_apply() -> None:
    assert rrf([[7]], k=0).scores.tolist() == [1.0]
    fused = rrf([[1], [2]], k=60, weights=[1.0, 3.0])
    assert fused.ids.tolist() == [2, 1]


def test_rrf_ties_go_to_first_appearance_and_duplicates_count_once() -> None:
    assert rrf([[5, 6], [6, 5]]).ids.tolist() == [5, 6]
    assert rrf([[9, 9, 8]]).scores.tolist() == pytest.approx([1 / 61, 1 / 63])


def test_empty_inputs() -> None:
    assert len(rrf([])) == 0 and len(rrf([[], []])) == 0
    assert len(score_fusion([[]], [[]])) == 0


def test_invalid_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="one entry per list"):
        rrf([[1], [2]], weights=[1.0])
    with pytest.raises(ValueError, match="finite"):
        rrf([[1]], weights=[float("nan")])
    with pytest.raises(ValueError, match="finite"):
        score_fusion([[1, 2]], [[0.1, float("nan")]])
    with pytest.raises(ValueError, match="finite"):
        score_fusion([[1, 2]], [[0.1, float("inf")]])
    with pytest.raises(ValueError, match="one score per id"):
        score_fusion([[1, 2]], [[0.1]])


@pytest.mark.parametrize("ids", [[1.2, 1.7, 2.0], [float("nan"), 3.0], np.array([1.0, 2.0]), np.array(["a", "b"])])
def test_ids_that_are_not_integers_are_refused_by_kernel_and_twin(ids: list[float] | np.ndarray) -> None:
    # A float id column was cast to int64: 1.2 and 1.7 fused into the one id 1, NaN into INT64_MIN.
    lists = [[5, 6], ids]
    scores = [[0.5] * len(x) for x in lists]
    with pytest.raises(ValueError, match=r"lists\[1\] must be integers"):
        rrf(lists)
    with pytest.raises(ValueError, match=r"lists\[1\] must be integers"):
        score_fusion(lists, scores)
    with pytest.raises(ValueError, match="lists must be integers"):
        reference.rrf([list(x) for x in lists])
    with pytest.raises(ValueError, match="lists must be integers"):
        reference.score_fusion([list(x) for x in lists], scores)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 5) | st.floats(0, 5), max_size=6), max_size=3))
def test_kernel_and_twin_refuse_the_same_ids(lists: list[list[float]]) -> None:
    refused = any(isinstance(x, float) for ids in lists for x in ids)
    for fuse in (rrf, reference.rrf):
        if refused:
            with pytest.raises(ValueError, match="must be integers"):
                fuse(lists)  # type: ignore[arg-type]
        else:
            fused = fuse(lists)  # type: ignore[arg-type]
            assert (fused if isinstance(fused, list) else _pairs(fused)) == reference.rrf(lists)  # type: ignore[arg-type]


def test_a_limit_that_is_not_an_integer_is_refused() -> None:
    # 2.5 was truncated to 2.
    with pytest.raises(TypeError, match="limit must be an integer"):
        rrf([[1, 2, 3, 4]], limit=2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="limit must be an integer"):
        score_fusion([[1, 2, 3, 4]], [[4.0, 3.0, 2.0, 1.0]], limit=2.5)  # type: ignore[arg-type]
    assert len(rrf([[1, 2, 3, 4]], limit=np.int64(2))) == 2  # type: ignore[arg-type]


def test_a_limit_past_int64_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=re.escape("limit must be at most 2**63 - 1")):
        rrf([[1, 2]], limit=2**63)
    assert _pairs(rrf([[1, 2]], limit=2**63 - 1)) == reference.rrf([[1, 2]])


def test_scores_that_are_not_numbers_are_refused_like_the_twin() -> None:
    # numpy read the strings as floats and fused them; the twin refused them.
    with pytest.raises(TypeError, match=re.escape("scores[1] must be real numbers")):
        score_fusion([[1, 2], [2, 1]], [[0.1, 0.2], ["0.1", "0.2"]])
    with pytest.raises(TypeError):
        reference.score_fusion([[1, 2], [2, 1]], [[0.1, 0.2], ["0.1", "0.2"]])  # type: ignore[list-item]


@pytest.mark.parametrize("weights", [["1", "3"], np.array(["1", "3"]), [1.0, "3"]])
def test_weights_that_are_not_numbers_are_refused_like_the_twin(weights: list[object] | np.ndarray) -> None:
    # numpy read the strings as floats and weighted by them; the twins refused them.
    lists, scores = [[1, 2], [2, 1]], [[0.5, 0.1], [0.4, 0.2]]
    with pytest.raises(TypeError, match="weights must be real numbers"):
        rrf(lists, weights=weights)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reference.rrf(lists, weights=list(weights))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="weights must be real numbers"):
        score_fusion(lists, scores, weights=weights)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reference.score_fusion(lists, scores, weights=list(weights))  # type: ignore[arg-type]


def test_a_k_that_is_not_a_number_is_refused_naming_it_like_the_twin() -> None:
    # numpy's error ("ufunc 'isfinite' not supported for the input types") named nothing.
    with pytest.raises(TypeError, match=re.escape("k must be a real number, got '60'")):
        rrf([[1, 2]], k="60")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reference.rrf([[1, 2]], k="60")  # type: ignore[arg-type]
    assert _pairs(rrf([[1, 2]], k=np.float32(60))) == reference.rrf([[1, 2]], k=60)


@pytest.mark.parametrize(("method", "scores"), [("minmax", [1e308, -1e308, 0.0]), ("dbsf", [2e154, -2e154, 0.0])])
def test_finite_scores_whose_spread_overflows_are_rejected(method: str, scores: list[float]) -> None:
    # Their normalization was NaN, which the kernel ranked last and its twin first.
    with pytest.raises(ValueError, match="too wide a range"):
        score_fusion([[1, 2, 3]], [scores], method=method)
    with pytest.raises(ValueError, match="too wide a range"):
        reference.score_fusion([[1, 2, 3]], [scores], method=method)


@pytest.mark.parametrize("weights", [[math.inf, 1.0], [math.nan, 1.0]])
def test_weights_that_are_not_finite_are_refused_by_kernel_and_twin(weights: list[float]) -> None:
    # The twin raised OverflowError for inf, which the kernel refuses as a ValueError.
    lists, scores = [[1, 2], [2, 1]], [[0.5, 0.1], [0.4, 0.2]]
    for fuse in (rrf, reference.rrf):
        with pytest.raises(ValueError, match="weights must be finite"):
            fuse(lists, weights=weights)
    for fuse in (score_fusion, reference.score_fusion):
        with pytest.raises(ValueError, match="weights must be finite"):
            fuse(lists, scores, weights=weights)


@pytest.mark.parametrize("k", [math.inf, math.nan])
def test_a_k_that_is_not_finite_is_refused_by_kernel_and_twin(k: float) -> None:
    for fuse in (rrf, reference.rrf):
        with pytest.raises(ValueError, match="k must be finite"):
            fuse([[1, 2], [2, 1]], k=k)


def test_a_sum_past_float64s_range_is_inf_and_ranked_first_by_kernel_and_twin() -> None:
    # Once an id's sum overflowed, its rounding error was inf - inf: it scored NaN and was ranked
    # last, and the twin raised OverflowError rounding it.
    lists, weights = [[1, 2]] * 3, [1e308] * 3
    by_rank, by_score = reference.rrf(lists, k=0, weights=weights), reference.score_fusion(lists, [[1.0, 0.0]] * 3, weights)
    for twin, fused in ((by_rank, rrf(lists, k=0, weights=weights)), (by_score, score_fusion(lists, [[1.0, 0.0]] * 3, weights))):
        assert _pairs(fused) == twin
        assert fused.ids.tolist() == [1, 2] and fused.scores[0] == math.inf and not np.isnan(fused.scores).any()
    assert _pairs(rrf(lists, k=0, weights=weights, limit=1)) == by_rank[:1]
    # The benchmarks' numpy baseline sums as the kernels do.
    ids, scores = numpy_impls.score_fusion([np.array(x) for x in lists], [np.array([1.0, 0.0])] * 3, weights, "minmax")
    assert list(zip(ids.tolist(), scores.tolist(), strict=True)) == by_score


def test_weighted_minmax_semantic_keyword() -> None:
    fused = score_fusion([[1, 2, 3], [3, 1]], [[0.9, 0.5, 0.1], [10.0, 2.0]], weights=[0.7, 0.3])
    assert _pairs(fused) == [(1, pytest.approx(0.7)), (2, pytest.approx(0.35)), (3, pytest.approx(0.3))]


def test_degenerate_lists_normalize_to_half() -> None:
    assert score_fusion([[4]], [[3.0]], method="dbsf").scores.tolist() == [0.5]
    assert score_fusion([[4, 5]], [[2.0, 2.0]], method="minmax").scores.tolist() == [0.5, 0.5]


def test_dbsf_list_of_equal_scores_normalizes_to_half() -> None:
    # 0.1 + 0.1 + 0.1 is not 0.3 in floating point: the mean is off by an ulp, which left a
    # standard deviation of ~1e-17 and normalized the list to 0.375 instead of 0.5.
    assert score_fusion([[1, 2, 3]], [[0.1, 0.1, 0.1]], method="dbsf").scores.tolist() == [0.5, 0.5, 0.5]
    assert reference.score_fusion([[1, 2, 3]], [[0.1, 0.1, 0.1]], method="dbsf") == [(1, 0.5), (2, 0.5), (3, 0.5)]
    # The ranking it changed: the constant leg's hits (0.5) belong above the other leg's 0.382.
    fused = score_fusion([[1, 2, 3], [4, 5]], [[0.1, 0.1, 0.1], [1.0, 0.0]], method="dbsf")
    assert fused.ids.tolist() == [4, 1, 2, 3, 5]


@settings(max_examples=200, deadline=None)
@given(st.floats(-1e6, 1e6, allow_subnormal=False), st.integers(1, 40))
def test_dbsf_constant_list_is_half_for_any_value(value: float, n: int) -> None:
    fused = score_fusion([list(range(n))], [[value] * n], method="dbsf")
    assert fused.scores.tolist() == [0.5] * n
    assert [s for _, s in reference.score_fusion([list(range(n))], [[value] * n], method="dbsf")] == [0.5] * n


def test_uint64_ids_come_back_as_given() -> None:
    # Qdrant point ids and content_hashes() are uint64: half of them have the top bit set.
    a = np.array([2**63 + 5, 7, 2**64 - 1], dtype=np.uint64)
    b = np.array([7, 2**64 - 1], dtype=np.uint64)
    lists = [a.tolist(), b.tolist()]
    fused = rrf([a, b])
    assert fused.ids.dtype == np.uint64
    assert _pairs(fused) == reference.rrf(lists)
    fused = score_fusion([a, b], [[0.9, 0.5, 0.1], [2.0, 1.0]], limit=2)
    assert fused.ids.dtype == np.uint64
    assert _pairs(fused) == reference.score_fusion(lists, [[0.9, 0.5, 0.1], [2.0, 1.0]])[:2]


def _outcome(fuse: Callable[[], list[tuple[int, float]]]) -> tuple[str, list[tuple[int, float]] | None]:
    try:
        return "ok", fuse()
    except ValueError:
        return "ValueError", None


# Python ints about both ends of the int64 and uint64 ranges, as qdrant-client and tolist() give them.
wide_id = st.integers(2**63 - 2, 2**63 + 1) | st.integers(2**64 - 2, 2**64 + 1) | st.integers(0, 3) | st.integers(-(2**63) - 1, -(2**63) + 1) | st.just(-1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(wide_id, max_size=6), max_size=3), st.data())
def test_python_int_ids_near_2_63_and_2_64_agree_with_the_twin(lists: list[list[int]], data: st.DataObject) -> None:
    # Ids from 2**63 up raised OverflowError, naming nothing, where the twin fused them.
    scores = [data.draw(st.lists(st.floats(-5, 5), min_size=len(l), max_size=len(l))) for l in lists]
    assert _outcome(lambda: _pairs(rrf(lists))) == _outcome(lambda: reference.rrf(lists))
    assert _outcome(lambda: _pairs(score_fusion(lists, scores))) == _outcome(lambda: reference.score_fusion(lists, scores))


def test_ids_beyond_uint64_or_colliding_with_negative_ones_are_refused() -> None:
    assert _pairs(rrf([[2**63 + 5, 7]])) == reference.rrf([[2**63 + 5, 7]])
    assert rrf([[2**63 + 5, 7]]).ids.dtype == np.uint64 and rrf([[7], [2**64 - 1]]).ids.tolist() == [7, 2**64 - 1]
    with pytest.raises(ValueError, match=r"lists\[0\] must fit in int64, or in uint64 when none is negative"):
        rrf([[2**64, 1]])
    with pytest.raises(ValueError, match=r"lists\[1\] must fit in int64, or in uint64"):
        rrf([[1], [2**64 - 1, -1]])  # the same 64 bits
    with pytest.raises(ValueError, match="ids from 2\\*\\*63 up with negative ids"):
        rrf([np.array([2**64 - 1], dtype=np.uint64), np.array([-1])])


def test_lists_given_as_one_2d_array() -> None:
    # `if not lists` raised numpy's "truth value of an array is ambiguous".
    ranked = np.array([[1, 2, 3], [3, 2, 1]])
    assert _pairs(rrf(ranked)) == reference.rrf(ranked.tolist())  # type: ignore[arg-type]
    scores = np.array([[0.9, 0.5, 0.1], [0.8, 0.4, 0.2]])
    assert _pairs(score_fusion(ranked, scores)) == reference.score_fusion(ranked.tolist(), scores.tolist())  # type: ignore[arg-type]
    assert rrf(np.array([[4, 5]])).ids.tolist() == [4, 5]  # type: ignore[arg-type]


ids = st.integers(0, 30)
ranked = st.lists(ids, max_size=25)


# A k far below a rank's ulp (2e-313), or a weight as far below another's (a subnormal one, or
# 4.9e-36 beside 1.2 and 3.3), shifts an exact sum below the kernel's precision (about 2**-104 of
# it), which the twin's exact sum sees when the sum lies at a rounding midpoint.
rrf_k = st.just(0.0) | st.floats(1e-6, 100)


@settings(max_examples=300, deadline=None)
@given(st.lists(ranked, max_size=5), rrf_k, st.data())
def test_rrf_agrees_with_reference(lists: list[list[int]], k: float, data: st.DataObject) -> None:
    weights = data.draw(st.none() | st.lists(st.just(0.0) | st.floats(1e-6, 5), min_size=len(lists), max_size=len(lists)))
    assert _pairs(rrf(lists, k=k, weights=weights)) == reference.rrf(lists, k=k, weights=weights)


@settings(max_examples=300, deadline=None)
@given(st.lists(ranked, max_size=4), st.sampled_from(["minmax", "dbsf"]), st.data())
def test_score_fusion_agrees_with_reference(lists: list[list[int]], method: str, data: st.DataObject) -> None:
    # Rounded scores make ties and equal extremes common.
    scores = [data.draw(st.lists(st.floats(-50, 50).map(lambda x: round(x, 1)), min_size=len(l), max_size=len(l))) for l in lists]
    weights = data.draw(st.none() | st.lists(st.just(0.0) | st.floats(1e-6, 2), min_size=len(lists), max_size=len(lists)))
    assert _pairs(score_fusion(lists, scores, weights, method)) == reference.score_fusion(lists, scores, weights, method)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.lists(ranked, max_size=5), st.integers(0, 40), st.sampled_from(["rrf", "minmax", "dbsf"]), st.data())
def test_limit_is_a_prefix_of_the_full_ranking(lists: list[list[int]], limit: int, how: str, data: st.DataObject) -> None:
    if how == "rrf":
        full, top = rrf(lists), rrf(lists, limit=limit)
    else:
        scores = [data.draw(st.lists(st.floats(-5, 5).map(lambda x: round(x, 1)), min_size=len(l), max_size=len(l))) for l in lists]
        full, top = score_fusion(lists, scores, method=how), score_fusion(lists, scores, method=how, limit=limit)  # type: ignore[arg-type]
    assert _pairs(top) == _pairs(full)[:limit]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 12), max_size=30), min_size=3, max_size=5), st.sampled_from([0, 1, 10, 60]), st.data())
def test_rrf_ties_go_to_first_appearance_for_equal_exact_sums(lists: list[list[int]], k: int, data: st.DataObject) -> None:
    # With three lists or more, float64 sums of equal exact sums (ranks 1, 2, 3 in three lists;
    # 1/63 + 1/84 = 2/72) came out an ulp apart, and the rounding decided their order.
    weights = data.draw(st.none() | st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.0]), min_size=len(lists), max_size=len(lists)))
    w = [Fraction(x) for x in weights] if weights is not None else [Fraction(1)] * len(lists)
    exact: dict[int, Fraction] = {}
    for weight, ranked in zip(w, lists, strict=True):
        seen: set[int] = set()
        for rank, doc in enumerate(ranked, start=1):
            if doc not in seen:  # a repeat inside one list counts once, at its first rank
                seen.add(doc)
                exact[doc] = exact.get(doc, Fraction(0)) + weight / (k + rank)
    first = list(dict.fromkeys(doc for ranked in lists for doc in ranked))
    expected = sorted(exact, key=lambda doc: (-exact[doc], first.index(doc)))
    fused = rrf(lists, k=k, weights=weights)
    assert fused.ids.tolist() == [doc for doc, _ in reference.rrf(lists, k=k, weights=weights)] == expected
    assert fused.scores.tolist() == [float(exact[doc]) for doc in expected]  # rounded once


@pytest.mark.parametrize("n_lists, size", [(4, 1_000), (4, 10_000)])
def test_rrf_agrees_at_service_scale(n_lists: int, size: int) -> None:
    rng = np.random.default_rng(size)
    lists = [rng.permutation(size * 2)[:size] for _ in range(n_lists)]
    assert _pairs(rrf(lists)) == reference.rrf([l.tolist() for l in lists])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([1.0, -2.5, 0.0, -0.0]), min_size=1, max_size=6), st.integers(0, 200), st.data())
def test_the_float64_sort_settles_long_runs_of_equal_float32_keys(bases: list[float], run: int, data: st.DataObject) -> None:
    """Fused scores that differ only below float32's precision: the order is stable and descending
    on the exact values whatever the run's length (a long run was settled by insertion, in
    quadratic time; now by a merge sort past INSERTION_RUN)."""
    from scoring_core._sort import argsort_desc_f64

    offsets = data.draw(st.lists(st.integers(0, 3), min_size=run, max_size=run))
    x = np.array([b + o * 1e-12 for b in bases for o in offsets] + bases, dtype=np.float64)
    x = x[np.random.default_rng(data.draw(st.integers(0, 2**32))).permutation(len(x))]
    assert argsort_desc_f64(x).tolist() == np.argsort(-(x + 0.0), kind="stable").tolist()


def test_a_sum_past_float64s_negative_range_is_minus_inf_and_ranked_last_by_kernel_and_twin() -> None:
    # The twin rounded every overflow to +inf: a far outlier's DBSF score (below 0) weighted past
    # float64's range was -inf and last in the kernel but +inf and first in the twin.
    ids, scores = list(range(100)), [1.0] * 99 + [0.0]
    fused = score_fusion([ids, ids], [scores, scores], weights=[1e308, 1e308], method="dbsf")
    twin = reference.score_fusion([ids, ids], [scores, scores], weights=[1e308, 1e308], method="dbsf")
    assert fused.ids.tolist()[-1] == 99 and fused.scores[-1] == -math.inf
    assert _pairs(fused) == twin


real = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(["1", None])
#: one weight per list, or one too many, or none given
weights_for = lambda n: st.none() | st.lists(real.filter(lambda w: w is not None), min_size=n, max_size=n + 1)  # noqa: E731


@settings(max_examples=300, deadline=None)
@given(st.lists(ranked, max_size=3).flatmap(lambda lists: st.tuples(st.just(lists), weights_for(len(lists)))), real)
def test_rrf_and_its_twin_refuse_alike(lists_weights: tuple[list[list[int]], list[object] | None], k: object) -> None:
    # The twin divided by zero for k = -1, ranked by negative terms for another negative k or
    # weight, and never looked at k's sign: rrf raises ValueError for each.
    lists, weights = lists_weights
    assert refusal(lambda: rrf(lists, k=k, weights=weights)) is refusal(lambda: reference.rrf(lists, k=k, weights=weights))  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.tuples(ids, st.floats(-10, 10) | st.sampled_from([math.nan, math.inf])), max_size=6), max_size=3).flatmap(
        lambda lists: st.tuples(st.just(lists), weights_for(len(lists)))
    ),
    st.sampled_from(["minmax", "dbsf", "bogus", "MinMax"]),
)
def test_score_fusion_and_its_twin_refuse_alike(lists_weights: tuple[list[list[tuple[int, float]]], list[object] | None], method: str) -> None:
    # The twin fused any method but "minmax" as DBSF, and negative weights, where score_fusion raises.
    pairs, weights = lists_weights
    lists = [[doc for doc, _ in p] for p in pairs]
    scores = [[s for _, s in p] for p in pairs]
    kernel = refusal(lambda: score_fusion(lists, scores, weights=weights, method=method))  # type: ignore[arg-type]
    assert kernel is refusal(lambda: reference.score_fusion(lists, scores, weights=weights, method=method))  # type: ignore[arg-type]


def test_the_twins_refuse_what_the_kernels_refuse_with_the_same_error() -> None:
    lists, scores = [[1, 2], [2, 1]], [[0.5, 0.1], [0.4, 0.2]]
    for fuse in (rrf, reference.rrf):
        with pytest.raises(ValueError, match="k must be finite and >= 0"):
            fuse([[1]], k=-1)
        with pytest.raises(ValueError, match="weights must be finite and non-negative"):
            fuse([[1]], weights=[-1.0])
    for fuse in (score_fusion, reference.score_fusion):
        with pytest.raises(ValueError, match="method must be 'minmax' or 'dbsf'"):
            fuse(lists, scores, method="bogus")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="weights must be finite and non-negative"):
            fuse(lists, scores, weights=[1.0, -1.0])
