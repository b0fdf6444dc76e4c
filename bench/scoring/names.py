"""Fuzzy name look-ups: scoring_core's NameFilter, then rapidfuzz on what it leaves, against
rapidfuzz scoring every name in one ``cdist`` call (the graph leg's way before the filter), on the
same synthetic names and n-grams; the plain-Python twin of the filter for scale."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
from rapidfuzz import fuzz, process

from bench.scoring.timing import measure
from scoring_core import reference as ref
from scoring_core.name_filter import NameFilter

THRESHOLD = 88.0
_SYLLABLES = ["in", "ter", "leu", "kin", "pro", "te", "ase", "cell", "re", "cep", "tor", "fac", "dna", "gen", "ome", "lyt", "ic", "al", "vi", "ta", "min", "6", "2"]


@dataclass
class NameRow:
    names: int
    grams: int
    filtered_ms: float
    all_names_ms: float
    python_filter_ms: float

    @property
    def vs_all_names(self) -> float:
        return self.all_names_ms / self.filtered_ms


def _word(rng: random.Random, parts: int) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(parts))


def _typo(rng: random.Random, word: str) -> str:
    i = rng.randrange(len(word))
    return word[:i] + word[i + 1 :] if rng.random() < 0.5 else word[:i] + rng.choice("aeiou") + word[i:]


def _best(keys: list[str], scores: list[np.ndarray], ids: list[np.ndarray]) -> list[list[tuple[str, float]]]:
    out = []
    for row, at in zip(scores, ids, strict=True):
        above = np.flatnonzero(row >= THRESHOLD)
        out.append([(keys[at[i]], float(row[i])) for i in above[np.argsort(-row[above], kind="stable")[:3]]])
    return out


def name_cases(sizes: tuple[int, ...] = (1_000, 15_000, 100_000), grams: int = 20) -> list[NameRow]:
    rows = []
    for size in sizes:
        rng = random.Random(size)
        keys = list(dict.fromkeys(_word(rng, rng.randint(1, 6)) for _ in range(size * 2)))[:size]
        wanted = [_typo(rng, rng.choice(keys)) if i % 2 else _word(rng, rng.randint(2, 5)) for i in range(grams)]
        index = NameFilter(keys)
        every = np.arange(len(keys))

        def filtered() -> list[list[tuple[str, float]]]:
            ids = [index.candidates(g, THRESHOLD) for g in wanted]
            scores = [process.cdist([g], [keys[i] for i in at.tolist()], scorer=fuzz.ratio, score_cutoff=THRESHOLD, workers=1)[0]
                      for g, at in zip(wanted, ids, strict=True)]
            return _best(keys, scores, ids)

        def all_names() -> list[list[tuple[str, float]]]:
            scores = process.cdist(wanted, keys, scorer=fuzz.ratio, score_cutoff=THRESHOLD, workers=1)
            return _best(keys, list(scores), [every] * len(wanted))

        if filtered() != all_names():
            raise AssertionError(f"{size} names: the filtered look-ups differ from scoring every name")
        python_ms = measure(lambda: [ref.fuzzy_candidates(keys, g, THRESHOLD) for g in wanted[:2]], min_time=0.3, max_reps=3, min_reps=1)
        rows.append(NameRow(len(keys), grams, measure(filtered) * 1e3, measure(all_names) * 1e3, python_ms * 1e3 * grams / 2))
    return rows
