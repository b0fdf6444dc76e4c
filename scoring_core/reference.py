"""Plain-Python twins of the numba kernels: the tests' oracle, and the benchmarks' baseline.

Each function computes the same result as its kernel, written for clarity rather than speed.
Like the kernels, the ones that rank scores rank their float32 rounding (see
:func:`scoring_core._validate.as_scores`). Those of top_k, threshold_with_fallback, near_duplicates,
rrf and score_fusion refuse the arguments their wrappers refuse, with the same exception type, in
the same order: an oracle that ran what its kernel refuses (a negative k, an unknown method)
checked nothing there.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import operator
from array import array
from collections.abc import Iterable, Sequence
from fractions import Fraction

from scoring_core._validate import as_count, as_real


def group_by_parent(
    parent_codes: Sequence[int], scores: Sequence[float]
) -> list[tuple[int, float, list[int]]]:
    """Return ``[(parent, best_score, [child indices best first]), ...]`` best parent first."""
    scores = _as_float32(scores)
    _check_integers(parent_codes, "parent_codes")
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parent_codes):
        children.setdefault(p, []).append(i)
    groups = []
    for p, kids in children.items():
        kids.sort(key=lambda i: (-scores[i], i))
        groups.append((p, float(scores[kids[0]]), kids))
    # Ties between parents go to the one whose best child came first in the input.
    groups.sort(key=lambda g: (-g[1], g[2][0]))
    return groups


def _as_float32(scores: Sequence[float]) -> list[float]:
    """The scores rounded to float32 (to nearest, as numpy does); NaN raises."""
    rounded = list(array("f", scores))
    if any(math.isnan(s) for s in rounded):
        raise ValueError("scores contains NaN")
    return rounded


def _check_integers(values: Iterable[int], name: str) -> None:
    """Refuse what the kernels refuse (:func:`scoring_core._validate.as_integers`): a float id,
    even 2.0, or NaN; ids that fit neither int64 nor uint64 (-1 and 2**64 - 1 are the same bits)."""
    values = list(values)
    for v in values:
        try:
            operator.index(v)
        except TypeError:
            raise ValueError(f"{name} must be integers, got {v!r}") from None
    if values and not (-(2**63) <= min(values) and max(values) < 2**63 or 0 <= min(values) and max(values) < 2**64):
        raise ValueError(f"{name} must fit in int64, or in uint64 when none is negative")


def _count(value: int, name: str) -> int:
    """A count as :func:`scoring_core.top_k` takes it: a negative one sliced off the last items."""
    n = as_count(value, name)
    if n < 0:
        raise ValueError(f"{name} must be >= 0")
    return n


def _weights(weights: Sequence[float] | None, n: int) -> list[Fraction]:
    """Each list's weight, exactly; refused as by :func:`scoring_core.rrf`: a string (which Fraction
    would parse) with TypeError, and a count other than ``n``, NaN, inf (Fraction's OverflowError
    named nothing) or a negative weight (which ranks an id lower for being found) with ValueError."""
    if weights is None:
        return [Fraction(1)] * n
    if not all(isinstance(x, numbers.Real) for x in weights):
        raise TypeError(f"weights must be real numbers, got {weights!r}")
    if len(weights) != n:
        raise ValueError(f"weights must have one entry per list ({n}), got {len(weights)}")
    if not all(math.isfinite(x) and x >= 0 for x in weights):
        raise ValueError("weights must be finite and non-negative")
    return [Fraction(float(x)) for x in weights]


def rrf(lists: Sequence[Sequence[int]], k: float = 60.0, weights: Sequence[float] | None = None) -> list[tuple[int, float]]:
    """``[(id, score), ...]`` best first; the way LangChain's EnsembleRetriever fuses."""
    k = as_real(k, "k")
    if not (math.isfinite(k) and k >= 0):  # -1 divided by zero at rank 1
        raise ValueError("k must be finite and >= 0")
    _check_integers([doc for ranked in lists for doc in ranked], "lists")
    w = _weights(weights, len(lists))
    exact_k = Fraction(k)
    fused: dict[int, Fraction] = {}
    for weight, ranked in zip(w, lists, strict=True):
        seen: set[int] = set()
        for rank, doc in enumerate(ranked, start=1):
            if doc in seen:
                continue
            seen.add(doc)
            fused[doc] = fused.get(doc, Fraction(0)) + weight / (exact_k + rank)
    return _ranked(fused)


def _rounded(total: Fraction) -> float:
    """``total`` rounded to float64, inf of its sign past its range, as the kernels' sums overflow
    (float() raises OverflowError there)."""
    try:
        return float(total)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def _ranked(fused: dict[int, Fraction]) -> list[tuple[int, float]]:
    """Each id's exact sum rounded once, as the kernels round it: in float64 sums, mathematically
    equal ones came out an ulp apart, and first appearance no longer decided their ties."""
    # sorted() is stable: equal scores keep first-appearance order.
    return sorted(((doc, _rounded(total)) for doc, total in fused.items()), key=lambda kv: -kv[1])


def _normalize(scores: list[float], method: str) -> list[float]:
    if not scores:
        return []
    if method == "minmax":
        lo, hi = min(scores), max(scores)
    elif all(s == scores[0] for s in scores):  # no spread, whatever rounding the mean takes
        lo = hi = scores[0]
    else:
        mean = 0.0
        for s in scores:
            mean += s
        mean /= len(scores)
        var = 0.0
        for s in scores:
            var += (s - mean) * (s - mean)
        std = math.sqrt(var / (len(scores) - 1))
        lo, hi = mean - 3.0 * std, mean + 3.0 * std
    if not math.isfinite(hi - lo):
        raise ValueError("scores span too wide a range to normalize")
    return [0.5 if hi == lo else (s - lo) / (hi - lo) for s in scores]


def score_fusion(
    lists: Sequence[Sequence[int]],
    scores: Sequence[Sequence[float]],
    weights: Sequence[float] | None = None,
    method: str = "minmax",
) -> list[tuple[int, float]]:
    """Weighted sum of per-list normalized scores, best first."""
    if len(lists) != len(scores):
        raise ValueError("lists and scores must have the same number of lists")
    if method not in ("minmax", "dbsf"):  # anything else was normalized as DBSF
        raise ValueError("method must be 'minmax' or 'dbsf'")
    _check_integers([doc for ids in lists for doc in ids], "lists")
    if not all(isinstance(s, numbers.Real) for raw in scores for s in raw):
        raise TypeError("scores must be real numbers")
    if any(len(ids) != len(raw) for ids, raw in zip(lists, scores, strict=True)):
        raise ValueError("each list needs one score per id")
    if not all(math.isfinite(s) for raw in scores for s in raw):
        raise ValueError("scores must be finite")
    w = _weights(weights, len(lists))
    fused: dict[int, Fraction] = {}
    for weight, ids, raw in zip(w, lists, scores, strict=True):
        seen: set[int] = set()
        for doc, norm in zip(ids, _normalize([float(s) for s in raw], method), strict=True):
            if doc in seen:
                continue
            seen.add(doc)
            fused[doc] = fused.get(doc, Fraction(0)) + weight * Fraction(norm)
    return _ranked(fused)


def dedup_by_key(keys: Sequence[int], scores: Sequence[float]) -> list[int]:
    """Index of the best candidate per key, best first."""
    scores = _as_float32(scores)
    _check_integers(keys, "keys")
    best: dict[int, int] = {}
    for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)):
        best.setdefault(keys[i], i)
    return sorted(best.values(), key=lambda i: (-scores[i], i))


def content_hashes(texts: Sequence[str]) -> list[int]:
    """Each text's words, casefolded, one space apart: the first 8 bytes of their BLAKE2b digest."""
    return [int.from_bytes(hashlib.blake2b(" ".join(t.split()).casefold().encode(), digest_size=8).digest(), "little") for t in texts]


def near_duplicates(embeddings: Sequence[Sequence[float]], scores: Sequence[float], threshold: float = 0.85) -> list[int]:
    """Greedy in score order: drop a candidate whose cosine to a kept one reaches ``threshold``.

    The cosines are those of the embeddings' float32 rounding, which is what the kernel compares
    (a float64 cosine within that rounding of the threshold may fall on the other side)."""
    scores = _as_float32(scores)
    embeddings = [array("f", e) for e in embeddings]
    if len(embeddings) != len(scores) or len({len(e) for e in embeddings}) > 1:
        raise ValueError(f"embeddings must be [n, d] with n = len(scores) = {len(scores)}")
    if not all(math.isfinite(x) for e in embeddings for x in e):
        raise ValueError("embeddings must be finite")
    threshold = as_real(threshold, "threshold")
    if not -1.0 <= threshold <= 1.0:  # 2 kept every candidate, NaN too
        raise ValueError("threshold must lie in [-1, 1]")

    def dot(a: Sequence[float], b: Sequence[float]) -> float:
        acc = 0.0
        for x, y in zip(a, b, strict=True):
            acc += float(x) * float(y)
        return acc

    norms = [math.sqrt(dot(e, e)) for e in embeddings]
    kept: list[int] = []
    for c in sorted(range(len(scores)), key=lambda i: (-scores[i], i)):
        if not any(
            norms[c] * norms[k] > 0 and dot(embeddings[c], embeddings[k]) / (norms[c] * norms[k]) >= threshold
            for k in kept
        ):
            kept.append(c)
    return kept


def top_k(scores: Sequence[float], k: int) -> list[int]:
    k = _count(k, "k")
    scores = _as_float32(scores)
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


def threshold_with_fallback(scores: Sequence[float], threshold: float = 0.3, fallback: int = 3) -> tuple[list[int], bool]:
    """The float32 scores are compared with the threshold as given, not with its rounding."""
    scores = _as_float32(scores)
    threshold = as_real(threshold, "threshold")
    if math.isnan(threshold):  # nothing passes it: every call fell back
        raise ValueError("threshold must not be NaN")
    fallback = _count(fallback, "fallback")  # as the kernel does, whether or not the fallback is needed
    kept = [i for i in sorted(range(len(scores)), key=lambda i: (-scores[i], i)) if scores[i] >= threshold]
    if kept or not scores:
        return kept, False
    return top_k(scores, fallback), True


def cache_match(
    matrix: Sequence[Sequence[float]],
    live: Sequence[int],
    expires_at: Sequence[float],
    scope: Sequence[int],
    query: Sequence[float],
    now: float,
    caller: int,
    threshold: float,
    include_public: bool = True,
) -> tuple[int, float]:
    """Best live, unexpired row in the caller's scope (plus public = 0 rows) with cosine >= threshold.

    A threshold closer to 1 than :func:`scoring_core.cache_matching.self_match_rounding` is taken
    as 1 minus that, as :class:`~scoring_core.CosineMatcher` takes it: a stored vector matches itself.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1], got {threshold}")
    if math.isnan(now):
        raise ValueError("now must not be NaN")
    if any(math.isnan(e) for e in expires_at):
        raise ValueError("expires_at must not be NaN (inf never expires)")
    threshold = min(threshold, 1.0 - (2 * len(query) + 4) * 2.0**-24)
    best, best_score = -1, -math.inf
    visible = (0, caller) if include_public else (caller,)
    for i, row in enumerate(matrix):
        if not live[i] or expires_at[i] <= now or scope[i] not in visible:
            continue
        s = sum(float(a) * float(b) for a, b in zip(row, query, strict=True))
        if s > best_score:
            best, best_score = i, s
    return (best, best_score) if best >= 0 and best_score >= threshold else (-1, math.nan)


def fuzzy_candidates(names: Sequence[str], query: str, threshold: float) -> list[int]:
    """The names that pass :class:`scoring_core.name_filter.NameFilter`'s two bounds, one by one."""
    if not 0.0 <= threshold <= 100.0:
        raise ValueError(f"threshold must lie in [0, 100], got {threshold}")

    def bigrams(text: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for i in range(len(text) - 1):
            counts[text[i : i + 2]] = counts.get(text[i : i + 2], 0) + 1
        return counts

    wanted = bigrams(query)
    out = []
    for i, name in enumerate(names):
        held = bigrams(name)
        shared = sum(min(c, held.get(b, 0)) for b, c in wanted.items())
        most = math.floor((1.0 - threshold / 100.0) * (len(query) + len(name)) + 1e-6)
        if abs(len(query) - len(name)) <= most and shared >= max(len(query), len(name)) - 1 - 2 * most:
            out.append(i)
    return out
