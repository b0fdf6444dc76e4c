"""Dedup and selection kernels against their plain-Python twins."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from bench.scoring import numpy_impls
from scoring_core import content_hashes, dedup_by_key, near_duplicates, reference, threshold_with_fallback, top_k
from tests.support.refusals import refusal

score = st.floats(-10, 10, width=32).map(lambda x: round(x, 1))
#: keys that share their low 32 bits and differ above them, as 64-bit content hashes may: a kernel
#: comparing 32 bits of a key kept one of them
high_bits = st.builds(lambda lo, hi: lo | (hi << 32), st.integers(0, 15), st.integers(-4, 4))
#: small keys, often repeated; keys with high bits set; anything int64 holds
key = st.integers(0, 15) | high_bits | st.integers(-(2**63), 2**63 - 1)


def test_dedup_by_id_keeps_the_best_score() -> None:
    keys = np.array([5, 3, 5, 3, 7])
    assert dedup_by_key(keys, np.array([0.1, 0.9, 0.8, 0.9, 0.2])).tolist() == [1, 2, 4]


def test_keys_equal_in_their_low_32_bits_are_distinct() -> None:
    keys = np.array([7 + (i << 32) for i in range(-4, 5)] * 2, dtype=np.int64)
    s = np.linspace(1.0, 0.1, len(keys)).astype(np.float32)
    assert dedup_by_key(keys, s).tolist() == reference.dedup_by_key(keys.tolist(), s.tolist()) == list(range(9))


def test_dedup_by_content_hash() -> None:
    texts = ["Hello  World", "hello world", "other", "HELLO\nworld"]
    kept = dedup_by_key(content_hashes(texts), np.array([0.2, 0.9, 0.5, 0.1]))
    assert kept.tolist() == [1, 2]


#: ASCII text with every character str.split() splits at, mixed case, and beside it non-ASCII text
#: whose casefolding or white space (U+00A0, U+2028) only Python's normalization knows
ascii_text = st.text(st.sampled_from("aZb Q\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f.-"), max_size=40)
any_text = ascii_text | st.text(st.sampled_from("aA ß SS\u00a0\u2028\u212a k\u0130i"), max_size=20) | st.text(max_size=20)


@given(st.lists(any_text, max_size=12))
def test_content_hashes_match_the_reference(texts: list[str]) -> None:
    assert content_hashes(texts).tolist() == reference.content_hashes(texts)


def test_content_hashes_of_ascii_copies_that_differ_in_case_and_white_space() -> None:
    """The kernel's ASCII normalization: leading, trailing and inner runs of every separator
    str.split() knows (the C0 separators \x1c-\x1f among them) are one space or none."""
    keys = content_hashes(["Tides  RISE\x1ctwice", "\x1f tides rise\n\ttwice\x0b", "tides rise twice", "tides risetwice", "", " \x1d "])
    assert keys[0] == keys[1] == keys[2] != keys[3] and keys[4] == keys[5] != keys[2]


def test_content_hashes_of_every_code_point_match_the_reference() -> None:
    """Each character alone and between two letters: the kernel's table of white space and its
    reading of UTF-8 agree with str.split and casefold on all of Unicode (surrogates aside, which
    neither can encode)."""
    chars = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    texts = chars + [f"a{c}B" for c in chars]
    assert content_hashes(texts).tolist() == reference.content_hashes(texts)
    with pytest.raises(UnicodeEncodeError):
        content_hashes(["a\ud800"])


@pytest.mark.parametrize("texts", [["a", ""], ["", "a"], ["a", "", "b "], ["", " A\x1fb", "", "", "c  d", ""], [""], []])
def test_the_benchmarks_numpy_content_hashes_take_empty_texts_anywhere(texts: list[str]) -> None:
    """The numpy baseline the kernel is timed against; an empty text last made it index past its bytes."""
    assert numpy_impls.content_hashes(texts).tolist() == reference.content_hashes(texts)


def test_near_duplicates_greedy_in_score_order() -> None:
    e = np.array([[1, 0], [0.99, 0.1], [0, 1], [0.0, 0.0]], dtype=np.float32)
    assert near_duplicates(e, np.array([0.5, 0.9, 0.1, 0.05])).tolist() == [1, 2, 3]
    assert near_duplicates(e, np.array([0.5, 0.9, 0.1, 0.05]), threshold=0.999).tolist() == [1, 0, 2, 3]


def test_selection_by_hand() -> None:
    s = np.array([0.1, 0.5, 0.5, 0.9, -1.0])
    assert top_k(s, 3).tolist() == [3, 1, 2]
    assert top_k(s, 0).tolist() == [] and top_k(s, 99).tolist() == [3, 1, 2, 0, 4]
    assert threshold_with_fallback(np.array([0.1, 0.5, 0.4]), 0.3, 3)[0].tolist() == [1, 2]
    idx, fell_back = threshold_with_fallback(np.array([0.1, 0.2, 0.05, 0.15]), 0.3, 3)
    assert (idx.tolist(), fell_back) == ([1, 3, 0], True)
    assert threshold_with_fallback(np.array([]))[0].tolist() == []


def test_nan_rejected_inf_ranked() -> None:
    for fn in (lambda s: top_k(s, 2), threshold_with_fallback, lambda s: dedup_by_key(np.arange(len(s)), s)):
        with pytest.raises(ValueError, match="NaN"):
            fn(np.array([0.1, np.nan]))
    assert top_k(np.array([0.1, np.inf, -np.inf]), 3).tolist() == [1, 0, 2]


def test_negative_fallback_is_rejected_at_the_boundary() -> None:
    # It crashed inside the kernel ("negative dimensions not allowed"), and only when the
    # fallback was needed; the twin silently dropped the last candidate (a [:-1] slice).
    for s in (np.array([0.1, 0.2]), np.array([0.5, 0.2])):
        with pytest.raises(ValueError, match="fallback must be >= 0"):
            threshold_with_fallback(s, 0.3, -1)
        with pytest.raises(ValueError, match="fallback must be >= 0"):
            reference.threshold_with_fallback(s.tolist(), 0.3, -1)


@pytest.mark.parametrize("keys", [[0.1, 0.9], [float("nan"), 1.0], np.array([1.0, 2.0])])
def test_keys_that_are_not_integers_are_refused_by_kernel_and_twin(keys: list[float] | np.ndarray) -> None:
    # They were truncated to int64: 0.1 and 0.9 became one key 0 and one of the two was dropped.
    with pytest.raises(ValueError, match="keys must be integers"):
        dedup_by_key(keys, np.array([0.5, 0.4]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keys must be integers"):
        reference.dedup_by_key(list(keys), [0.5, 0.4])


def test_counts_that_are_not_integers_are_refused_by_kernel_and_twin() -> None:
    # k = 2.7 was truncated to 2; a fallback of 1.5 only failed in the twin, and only when needed.
    s = np.array([0.3, 0.9, 0.1])
    with pytest.raises(TypeError, match="k must be an integer"):
        top_k(s, 2.7)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reference.top_k(s.tolist(), 2.7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fallback must be an integer"):
        threshold_with_fallback(s, 0.3, 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reference.threshold_with_fallback(s.tolist(), 0.3, 1.5)  # type: ignore[arg-type]
    assert top_k(s, np.int64(2)).tolist() == reference.top_k(s.tolist(), np.int64(2)) == [1, 0]  # type: ignore[arg-type]


def test_counts_past_int64_are_refused_naming_the_count() -> None:
    # numba's OverflowError ("int too big to convert") named neither the argument nor the limit.
    s = np.array([0.3, 0.9, 0.1])
    with pytest.raises(ValueError, match=re.escape("k must be at most 2**63 - 1")):
        top_k(s, 2**63)
    with pytest.raises(ValueError, match=re.escape("fallback must be at most 2**63 - 1")):
        threshold_with_fallback(s, 5.0, 2**63)
    assert top_k(s, 2**63 - 1).tolist() == [1, 0, 2]
    assert threshold_with_fallback(s, 5.0, 2**63 - 1)[0].tolist() == [1, 0, 2]


def test_a_threshold_that_is_not_a_number_is_refused_naming_it_like_the_twin() -> None:
    # numpy's error ("ufunc 'isnan' not supported for the input types") named nothing.
    s = np.array([0.3, 0.9, 0.1])
    with pytest.raises(TypeError, match=re.escape("threshold must be a real number, got '0.3'")):
        threshold_with_fallback(s, "0.3")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reference.threshold_with_fallback(s.tolist(), "0.3")  # type: ignore[arg-type]
    assert threshold_with_fallback(s, np.float32(0.3))[0].tolist() == reference.threshold_with_fallback(s.tolist(), 0.3)[0] == [1, 0]


def test_a_near_duplicate_threshold_that_is_not_a_number_is_refused_naming_it() -> None:
    # Python's "'<=' not supported between ..." named nothing.
    e, s = np.eye(2), np.array([0.5, 0.4])
    with pytest.raises(TypeError, match=re.escape("threshold must be a real number, got '0.9'")):
        near_duplicates(e, s, "0.9")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reference.near_duplicates(e.tolist(), s.tolist(), "0.9")  # type: ignore[arg-type]
    assert near_duplicates(e, s, np.float32(0.9)).tolist() == reference.near_duplicates(e.tolist(), s.tolist(), 0.9) == [0, 1]


@pytest.mark.parametrize("scores", [["0.3", "0.9"], np.array(["0.3", "0.9"]), [0.3, "0.9"]])
def test_scores_that_are_not_numbers_are_refused_by_kernel_and_twin(scores: list[object] | np.ndarray) -> None:
    # numpy read the string "0.9" as 0.9; the twins refused it.
    with pytest.raises(TypeError, match="scores must be real numbers"):
        top_k(scores, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reference.top_k(list(scores), 1)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(key | st.floats(0, 5), score), max_size=20))
def test_kernel_and_twin_refuse_the_same_keys(rows: list[tuple[float, float]]) -> None:
    keys = [k for k, _ in rows]
    s = [v for _, v in rows]
    if any(isinstance(k, float) for k in keys):
        for dedup in (dedup_by_key, reference.dedup_by_key):
            with pytest.raises(ValueError, match="keys must be integers"):
                dedup(keys, np.asarray(s, dtype=np.float32))  # type: ignore[arg-type]
    else:
        assert dedup_by_key(keys, np.asarray(s, dtype=np.float32)).tolist() == reference.dedup_by_key(keys, s)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(2**63 - 2, 2**63 + 1) | st.integers(2**64 - 2, 2**64 + 1) | st.integers(-2, 2) | high_bits, score), max_size=12))
def test_python_int_keys_near_2_63_and_2_64_agree_with_the_twin(rows: list[tuple[int, float]]) -> None:
    # Keys from 2**63 up raised OverflowError, naming nothing, where the twin deduplicated them.
    keys = [k for k, _ in rows]
    s = [v for _, v in rows]
    fits = not keys or (-(2**63) <= min(keys) and max(keys) < 2**63) or (0 <= min(keys) and max(keys) < 2**64)
    if fits:
        assert dedup_by_key(keys, np.asarray(s)).tolist() == reference.dedup_by_key(keys, s)  # type: ignore[arg-type]
    else:
        for dedup in (dedup_by_key, reference.dedup_by_key):
            with pytest.raises(ValueError, match="keys must fit in int64, or in uint64 when none is negative"):
                dedup(keys, s)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(key, score), max_size=120))
def test_dedup_agrees(rows: list[tuple[int, float]]) -> None:
    keys = [k for k, _ in rows]
    s = np.asarray([v for _, v in rows], dtype=np.float32)
    assert dedup_by_key(np.asarray(keys, dtype=np.int64), s).tolist() == reference.dedup_by_key(keys, s.tolist())


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30).flatmap(lambda n: st.tuples(
    arrays(np.float32, (n, 6), elements=st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0])),
    arrays(np.float32, (n,), elements=score),
)), st.floats(0.5, 1.0))
def test_near_duplicates_agree(case: tuple[np.ndarray, np.ndarray], threshold: float) -> None:
    emb, s = case
    assert near_duplicates(emb, s, threshold).tolist() == reference.near_duplicates(emb.tolist(), s.tolist(), threshold)


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 12).flatmap(lambda n: st.tuples(
    arrays(np.float64, (n, 6), elements=st.floats(-1, 1, allow_subnormal=False)),
    arrays(np.float32, (n,), elements=score),
)))
def test_near_duplicates_agree_on_float64_embeddings_at_the_threshold(case: tuple[np.ndarray, np.ndarray]) -> None:
    # The kernel compares the float32 rounding of the embeddings, the twin compared them in float64:
    # at a threshold within that rounding of a cosine (here, exactly the float64 cosine of rows 0
    # and 1) the two disagreed.
    emb, s = case
    norms = np.linalg.norm(emb[:2], axis=1)
    assume(norms.all())
    threshold = float(np.clip(emb[0] @ emb[1] / (norms[0] * norms[1]), -1.0, 1.0))
    assert near_duplicates(emb, s, threshold).tolist() == reference.near_duplicates(emb.tolist(), s.tolist(), threshold)


@settings(max_examples=300, deadline=None)
@given(st.lists(score | st.sampled_from([float("inf"), float("-inf")]), max_size=200), st.integers(0, 50))
def test_top_k_agrees(values: list[float], k: int) -> None:
    s = np.asarray(values, dtype=np.float32)
    assert top_k(s, k).tolist() == reference.top_k(s.tolist(), k)


def test_top_k_orders_what_it_keeps_in_k_log_k_comparisons(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fusion asks the heap for up to a quarter of its ids (rrf's ``limit``), and ``top_k`` for any
    k: the kept scores were put in order by insertion, k**2 / 2 comparisons when they come in
    ascending order (top_k of 30,000 of 100,000 scores took 350 ms, a sort of them all 3 ms)."""
    from scoring_core import _jit, selection

    # The kernel's own code, run by Python with its callees, so that its comparisons can be counted.
    for name, value in vars(selection).items():
        if isinstance(value, _jit.Kernel):
            monkeypatch.setattr(selection, name, value.py_func)
    compared = 0
    worse = selection._worse

    def counted(s1: float, i1: int, s2: float, i2: int) -> bool:
        nonlocal compared
        compared += 1
        return worse(s1, i1, s2, i2)

    monkeypatch.setattr(selection, "_worse", counted)
    n = 1_000
    ascending = np.arange(n, dtype=np.float32)
    assert selection._top_k_kernel(ascending, n).tolist() == list(range(n - 1, -1, -1))
    assert compared < 4 * n * np.log2(n)


@settings(max_examples=300, deadline=None)
@given(st.lists(score, max_size=60), st.floats(-10, 10, width=32), st.integers(0, 5))
def test_threshold_with_fallback_agrees(values: list[float], threshold: float, fallback: int) -> None:
    s = np.asarray(values, dtype=np.float32)
    idx, fell = threshold_with_fallback(s, threshold, fallback)
    assert (idx.tolist(), fell) == reference.threshold_with_fallback(s.tolist(), threshold, fallback)


def test_selection_at_service_scale() -> None:
    s = np.round(np.random.default_rng(0).random(10_000), 3).astype(np.float32)
    assert top_k(s, 100).tolist() == reference.top_k(s.tolist(), 100)
    assert dedup_by_key(np.arange(10_000) % 977, s).tolist() == reference.dedup_by_key((np.arange(10_000) % 977).tolist(), s.tolist())


wide = st.floats(allow_nan=False)  # float64: beyond float32's range and closer than it can tell apart


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), wide), max_size=60), st.integers(0, 8), wide)
def test_float64_scores_rank_as_their_float32_rounding_in_kernel_and_twin(rows: list[tuple[int, float]], k: int, threshold: float) -> None:
    keys = [key for key, _ in rows]
    values = [v for _, v in rows]
    s = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        assert top_k(s, k).tolist() == reference.top_k(values, k)
        assert dedup_by_key(np.asarray(keys, dtype=np.int64), s).tolist() == reference.dedup_by_key(keys, values)
        idx, fell = threshold_with_fallback(s, threshold, 2)
    assert (idx.tolist(), fell) == reference.threshold_with_fallback(values, threshold, 2)


def test_a_score_below_the_threshold_is_not_kept_by_its_float32_rounding() -> None:
    # float32(0.30000001788) rounds down to the score's own float32 value: compared there, the
    # score below the threshold was kept.
    below, threshold = np.float32(0.30000001192), 0.30000001788
    assert float(below) < threshold and np.float32(threshold) == below
    idx, fell = threshold_with_fallback(np.array([below]), threshold, 0)
    assert (idx.tolist(), fell) == ([], True)
    assert reference.threshold_with_fallback([float(below)], threshold, 0) == ([], True)


count = st.integers(-3, 8) | st.sampled_from([2**63 - 1, 2**63]) | st.floats(-2, 8) | st.sampled_from(["2", None])
real = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(["0.3", None])


@settings(max_examples=300, deadline=None)
@given(st.lists(score | st.just(float("nan")), max_size=8), count)
def test_top_k_and_its_twin_refuse_alike(values: list[float], k: object) -> None:
    # The twin returned [2, 1] for k = -1 (a [:-1] slice) and any k past int64, where top_k raises.
    assert refusal(lambda: top_k(np.array(values, dtype=np.float64), k)) is refusal(lambda: reference.top_k(values, k))  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(score | st.just(float("nan")), max_size=8), real, count)
def test_threshold_with_fallback_and_its_twin_refuse_alike(values: list[float], threshold: object, fallback: object) -> None:
    # The twin took a NaN threshold (nothing passes it: the fallback) and a fallback past int64.
    kernel = refusal(lambda: threshold_with_fallback(np.array(values, dtype=np.float64), threshold, fallback))  # type: ignore[arg-type]
    assert kernel is refusal(lambda: reference.threshold_with_fallback(values, threshold, fallback))  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 4).flatmap(lambda n: st.tuples(
    st.lists(st.lists(score, min_size=2, max_size=2), min_size=n, max_size=n),
    st.lists(score | st.just(float("nan")), min_size=n, max_size=n),
)), real)
def test_near_duplicates_and_its_twin_refuse_alike(rows: tuple[list[list[float]], list[float]], threshold: object) -> None:
    # The twin took a threshold outside [-1, 1] (2 kept every candidate) and a NaN one.
    embeddings, values = rows
    e = np.array(embeddings, dtype=np.float64).reshape(len(embeddings), 2)
    kernel = refusal(lambda: near_duplicates(e, np.array(values, dtype=np.float64), threshold))  # type: ignore[arg-type]
    assert kernel is refusal(lambda: reference.near_duplicates(embeddings, values, threshold))  # type: ignore[arg-type]
