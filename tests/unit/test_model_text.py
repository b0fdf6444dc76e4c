"""A model's answer cut short by max_tokens loses its unfinished last sentence, in any script."""

from __future__ import annotations

import pytest

from retrieval_server.backends.llm import Completion
from retrieval_server.workflow.model_text import whole_sentences


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("The tower is in Minato [1]. It is 333 m tall [1]. Osaka", "The tower is in Minato [1]. It is 333 m tall [1]."),
        ("東京タワーは港区にあります[1]。高さは333メートルです[1]。大阪", "東京タワーは港区にあります[1]。高さは333メートルです[1]。"),
        ("本当ですか？「はい」と答えた。しかし", "本当ですか？「はい」と答えた。"),
        ("दिल्ली भारत की राजधानी है [1]। यहाँ बहुत", "दिल्ली भारत की राजधानी है [1]।"),
        ("هل هذا صحيح؟ نعم هو", "هل هذا صحيح؟"),
        ("no stop at all", ""),
    ],
)
def test_only_the_unfinished_sentence_is_dropped(text: str, kept: str) -> None:
    # Only ".!?" ended a sentence: a Japanese or Hindi answer cut short lost every sentence.
    assert whole_sentences(Completion.of(text, True)) == (kept, True)


@pytest.mark.parametrize("text", ["東京タワーは港区にあります[1]。", "दिल्ली भारत की राजधानी है।", "It fails. [2]"])
def test_a_text_cut_at_a_sentence_end_keeps_everything(text: str) -> None:
    assert whole_sentences(Completion.of(text, True)) == (text, False)
    assert whole_sentences(Completion.of(text + " and", False)) == (text + " and", False)  # not cut: kept whole
