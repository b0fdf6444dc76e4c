"""How the encoders cut and pad their batches: in order of token count, each padded to its longest."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring_core.encoders import by_token_count, padded


@dataclass(frozen=True)
class _Enc:
    """What the helpers read of a tokenizers Encoding."""

    ids: list[int]
    type_ids: list[int]


def _enc(n: int, first: int = 1) -> _Enc:
    return _Enc(list(range(first, first + n)), [0] * (n // 2) + [1] * (n - n // 2))


@given(st.lists(st.integers(1, 300), max_size=100), st.integers(1, 40), st.sampled_from([0.0, 0.25, 1.0, float("inf")]))
def test_batches_are_the_texts_in_order_of_token_count(lengths: list[int], batch_size: int, max_padding: float) -> None:
    batches = by_token_count([_enc(n) for n in lengths], batch_size, max_padding)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)
    assert all(0 < len(b) <= batch_size for b in batches)
    sizes = [[lengths[i] for i in b] for b in batches]
    for b in sizes:  # padded to its longest, a batch pads at most max_padding of its own tokens
        assert len(b) * max(b) <= (1 + max_padding) * sum(b)
    for b, following in zip(sizes, sizes[1:]):  # and ends only when full or when the next text would pad more
        assert len(b) == batch_size or (len(b) + 1) * following[0] > (1 + max_padding) * (sum(b) + following[0])


def test_without_a_padding_bound_batches_are_full() -> None:
    lengths = [256, 110, 256, 120, 130, 256]
    assert [len(b) for b in by_token_count([_enc(n) for n in lengths], 4, float("inf"))] == [4, 2]


def test_a_jump_in_length_starts_a_new_batch() -> None:
    """Children of about 128 tokens and parents of 256, as one document's texts: two runs."""
    lengths = [256, 110, 256, 120, 130, 256]
    batches = by_token_count([_enc(n) for n in lengths], 32)
    assert [sorted(lengths[i] for i in b) for b in batches] == [[110, 120, 130], [256, 256, 256]]


@given(st.lists(st.integers(1, 50), min_size=1, max_size=20), st.integers(0, 5))
def test_rows_are_padded_to_the_longest(lengths: list[int], pad: int) -> None:
    encodings = [_enc(n, first=10) for n in lengths]
    ids, mask, types = padded(encodings, pad)
    width = max(lengths)
    assert ids.shape == mask.shape == types.shape == (len(lengths), width) and ids.dtype == np.int64
    for row, (e, n) in enumerate(zip(encodings, lengths, strict=True)):
        assert ids[row].tolist() == e.ids + [pad] * (width - n)
        assert mask[row].tolist() == [1] * n + [0] * (width - n)
        assert types[row].tolist() == e.type_ids + [0] * (width - n)


def test_a_batch_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        by_token_count([_enc(3)], 0)
