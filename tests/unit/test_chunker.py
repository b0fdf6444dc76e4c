from __future__ import annotations

from typing import Any

import pytest

from retrieval_server.backends.embedder import BUNDLED_TOKENIZER
from retrieval_server.ingest.chunker import Chunker, ChunkSizes


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(str(BUNDLED_TOKENIZER), ChunkSizes(parent_tokens=60, child_tokens=24, child_overlap_tokens=12))


def _text(n: int) -> str:
    return " ".join(f"Sentence {i} is about topic {i % 7}." for i in range(n))


def test_parents_and_children_respect_token_limits(chunker: Chunker) -> None:
    parents, children = chunker.chunk("doc", [(0, _text(40))])
    assert len(parents) > 1 and len(children) > len(parents)
    assert all(p.tokens <= 60 for p in parents)
    assert all(c.tokens <= 24 for c in children)
    tok = chunker._tok
    # Counted tokens are the tokenizer's own count of the text (within sentence-join slack).
    for c in children:
        assert abs(len(tok.encode(c.content, add_special_tokens=False).ids) - c.tokens) <= 2


def test_children_stay_inside_their_parent_and_overlap(chunker: Chunker) -> None:
    parents, children = chunker.chunk("doc", [(0, _text(40))])
    by_id = {p.parent_chunk_id: p for p in parents}
    for c in children:
        assert c.content.split(" Sentence")[0] in by_id[c.parent_chunk_id].content
    same_parent = [c for c in children if c.parent_chunk_id == parents[0].parent_chunk_id]
    first_sentences = [c.content.split(".")[0] for c in same_parent]
    # With overlap, consecutive windows share a sentence.
    assert any(same_parent[i + 1].content.startswith(first_sentences[i + 1]) and first_sentences[i + 1] in same_parent[i].content for i in range(len(same_parent) - 1))


def test_no_child_is_only_the_overlap_of_the_one_before(chunker: Chunker) -> None:
    """Short sentences then one that does not fit beside their overlap: the next window held the
    overlap alone, a copy of the previous child's tail, embedded and searched twice."""
    from hypothesis import given, settings, strategies as st

    sentences = st.sampled_from(["Short one.", "A few more words here.", "This sentence is a good deal longer than the short ones are.",
                                 " ".join(f"item{i}" for i in range(10)) + ".", "Tiny."])

    @settings(max_examples=200, deadline=None)
    @given(st.lists(sentences, min_size=2, max_size=30))
    def distinct(parts: list[str]) -> None:
        # Numbered, so that a sentence said twice is not found in a child that holds its first saying.
        _, children = chunker.chunk("doc", [(0, " ".join(f"N{i} {p}" for i, p in enumerate(parts)))])
        for a, b in zip(children, children[1:]):
            if a.parent_chunk_id == b.parent_chunk_id:
                assert b.content not in a.content, (a.content, b.content)

    distinct()


def test_ids_are_stable_and_ordered(chunker: Chunker) -> None:
    a = chunker.chunk("doc", [(0, _text(30))])
    b = chunker.chunk("doc", [(0, _text(30))])
    assert a == b
    parents, children = a
    assert [p.chunk_index for p in parents] == list(range(len(parents)))
    assert [c.chunk_index for c in children] == list(range(len(children)))


def test_long_sentence_is_cut_at_token_boundaries(chunker: Chunker) -> None:
    words = " ".join(f"word{i}" for i in range(200))
    _, children = chunker.chunk("doc", [(0, words)])
    assert len(children) > 3 and all(c.tokens <= 24 for c in children)


def test_parents_do_not_cross_pages(chunker: Chunker) -> None:
    parents, children = chunker.chunk("doc", [(1, _text(3)), (2, _text(3))])
    assert [p.page for p in parents] == [1, 2]
    assert {c.page for c in children} == {1, 2}


def test_blank_text_gives_nothing(chunker: Chunker) -> None:
    assert chunker.chunk("doc", [(0, "  \n\n ")]) == ([], [])


@pytest.mark.parametrize(
    "text",
    [
        # Devanagari vowel signs and Arabic vowel marks are combining marks (Mn) the tokenizer strips
        # (BERT's strip_accents): no token's offsets cover them. Hindi ends sentences with '।', which
        # is no sentence end here, so a paragraph is one long sentence cut at token boundaries.
        "भारत एक विशाल देश है जिसमें अनेक भाषाएँ बोली जाती हैं और यहाँ की संस्कृति बहुत पुरानी है। " * 30,
        "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ الْحَمْدُ لِلَّهِ رَبِّ الْعَالَمِينَ " * 30,
        ("e\u0301" * 50 + " ") * 30,  # decomposed accents (NFD text, as some PDFs and macOS give it)
    ],
    ids=["hindi", "arabic-vowelled", "decomposed-accents"],
)
def test_a_long_sentence_cut_at_token_boundaries_loses_no_character(chunker: Chunker, text: str) -> None:
    parents, children = chunker.chunk("doc", [(0, text)])
    assert len(parents) > 1
    assert "".join("".join(p.content for p in parents).split()) == "".join(text.split())
    # Children cover their parent: each child's characters are the parent's, in order, none dropped.
    for parent in parents:
        kids = [c for c in children if c.parent_chunk_id == parent.parent_chunk_id]
        first, last = kids[0].content, kids[-1].content
        assert "".join(parent.content.split()).startswith("".join(first.split()))
        assert "".join(parent.content.split()).endswith("".join(last.split()))


def test_closing_quotes_and_brackets_stay_with_their_sentence(chunker: Chunker) -> None:
    """They were cut from every sentence's end: a child read 'He said "Stop the deploy. Then (see
    the runbook. we rolled back.'"""
    text = 'He said "Stop the deploy." Then (see the runbook.) we rolled back. She asked "why?" [Done.]'
    parents, children = chunker.chunk("doc", [(0, text)])
    assert [p.content for p in parents] == [text] and all(c.content in text for c in children)
    assert children[0].content.startswith('He said "Stop the deploy." Then (see the runbook.) we')


def test_sentences_end_at_stops_that_take_no_space() -> None:
    """A Chinese or Japanese paragraph was one sentence: 。！？ end one without a space after them."""
    from retrieval_server.ingest.chunker import split_sentences

    assert split_sentences("AuthSvc 负责登录。它把数据存储在 LedgerDB 中！是吗？好") == ["AuthSvc 负责登录。", "它把数据存储在 LedgerDB 中！", "是吗？", "好"]
    assert split_sentences("彼は「止まれ。」次です。") == ["彼は「止まれ。」", "次です。"]
    assert split_sentences("Pi is 3.14 here. He said \"Stop.\" Then left!") == ["Pi is 3.14 here.", "He said \"Stop.\"", "Then left!"]


def test_the_chunks_of_any_text_hold_every_character_in_order(chunker: Chunker) -> None:
    """Parents, in order, are the text without its white space, for text of sentence ends,
    closers, blank lines, long words and marks in any mix."""
    from hypothesis import given, settings, strategies as st

    words = st.sampled_from(["alpha", "Beta.", "gamma!", '"quote."', "(see", "it.)", "[x?]", "\n\n", "x" * 120, "y" * 3_000, " " * 300, "e\u0301", "日本語の文", "🙂"])

    @settings(max_examples=150, deadline=None)
    @given(st.lists(words, min_size=1, max_size=80))
    def holds(parts: list[str]) -> None:
        text = " ".join(parts)
        parents, children = chunker.chunk("doc", [(0, text)])
        assert "".join("".join(p.content for p in parents).split()) == "".join(text.split())
        assert all(len(c.content) <= chunker.sizes.child_tokens * 100 for c in children)

    holds()


def test_a_childs_text_is_its_parents(chunker: Chunker) -> None:
    """A child is cited as evidence inside its parent: joined with a space, a child of Chinese text
    read '岩石。 第1段' where its parent read '岩石。第1段' (none of 14 was in its parent). White space
    between two sentences is one space in a child, as it always was (a title a blank line above its
    text): the child is then its parent's text with each run of white space one space."""
    from hypothesis import given, settings, strategies as st

    sentences = st.sampled_from(["Glaciers carve valleys.", "Is it slow?", "冰川缓慢移动并侵蚀岩石。", "它把数据存储在 LedgerDB 中！",
                                 "彼は「止まれ。」", "AuthSvc 负责登录。", "Pi is 3.14 here.", "word " * 30, "長" * 40])

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.tuples(sentences, st.sampled_from(["", " ", " ", "\n\n", "  \n"])), min_size=1, max_size=60))
    def inside(parts: list[tuple[str, str]]) -> None:
        text = "".join(s + gap for s, gap in parts)
        parents, children = chunker.chunk("doc", [(0, text)])
        by_id = {p.parent_chunk_id: p.content for p in parents}
        for c in children:
            if all(gap in ("", " ") for _, gap in parts):
                assert c.content in by_id[c.parent_chunk_id]
            assert " ".join(c.content.split()) in " ".join(by_id[c.parent_chunk_id].split())

    inside()


@pytest.mark.parametrize("text", [
    "0123456789abcdef" * 20_000, "word " + "9f" * 50_000 + " end.", "\u0301" * 6_000, "a" + " " * 9_000 + "b.",
    ("ab" * 6_000 + ". ") * 40,  # sentences of one long word each: two tokens apiece, uncut
    "a." + " " * 9_000 + "b.",  # white space between sentences
])
def test_a_chunk_holds_at_most_its_tokens_in_characters(chunker: Chunker, text: str) -> None:
    """A word over WordPiece's 100 characters is one [UNK] token: a 3.2 MB hex dump was one child
    of 7 tokens, and every answer citing it 9.6 MB. A token counts once per 100 characters it runs
    to the next (so do characters the tokenizer drops, and runs of white space)."""
    from retrieval_server.ingest.chunker import MAX_TOKEN_CHARS

    sizes = chunker.sizes
    parents, children = chunker.chunk("doc", [(0, text)])
    assert "".join("".join(p.content for p in parents).split()) == "".join(text.split())
    assert max(len(c.content) for c in children) <= sizes.child_tokens * MAX_TOKEN_CHARS
    assert max(len(p.content) for p in parents) <= sizes.parent_tokens * MAX_TOKEN_CHARS
    assert all(c.tokens <= sizes.child_tokens for c in children) and all(p.tokens <= sizes.parent_tokens for p in parents)
    assert all(c.content for c in children) and all(p.content for p in parents)  # no chunk of white space alone


class _Recording:
    """The chunker's tokenizer, recording the texts of each batch it is given."""

    def __init__(self, tok: Any) -> None:
        self._tok, self.batches = tok, []  # type: list[list[str]]

    def encode_batch(self, texts: list[str], **kw: Any) -> Any:
        self.batches.append(texts)
        return self._tok.encode_batch(texts, **kw)

    def encode(self, text: str, **kw: Any) -> Any:
        return self._tok.encode(text, **kw)


def test_text_is_tokenized_in_bounded_pieces_and_chunked_the_same(chunker: Chunker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokenized whole, 16 MiB of text without a full stop took 4.7 GB: a long sentence is cut at
    white space first (WordPiece splits there anyway), and the sentences go in bounded batches."""
    from retrieval_server.ingest import chunker as module

    sentences = _text(300)
    long_sentence = " ".join(f"word{i}" for i in range(3000))
    whole = chunker.chunk("doc", [(0, sentences)])
    monkeypatch.setattr(module, "SENTENCE_PIECE_CHARS", 1_000)
    monkeypatch.setattr(module, "ENCODE_CHARS", 4_000)
    recording = _Recording(chunker._tok)
    monkeypatch.setattr(chunker, "_tok", recording)
    assert chunker.chunk("doc", [(0, sentences)]) == whole
    assert len(recording.batches) > 1 and all(sum(map(len, b)) <= 4_000 for b in recording.batches)
    recording.batches.clear()
    parents, children = chunker.chunk("doc", [(0, long_sentence)])
    pieces = [t for b in recording.batches for t in b]
    assert len(pieces) > 1 and max(map(len, pieces)) <= 1_000
    assert all(t[-1].isspace() for t in pieces[:-1]) and "".join(pieces) == long_sentence  # cut after white space, nothing lost
    assert "".join("".join(p.content for p in parents).split()) == "".join(long_sentence.split())
    assert all(c.tokens <= chunker.sizes.child_tokens for c in children)


@pytest.mark.parametrize("text", ["\u200b\u200b\u200b", "\u200e\u200f\u2060\ufeff", "\x00\x00 \x00", " \u200b\n\u00ad "])
def test_text_of_invisible_characters_alone_makes_no_chunk(chunker: Chunker, text: str) -> None:
    """Zero-width spaces, marks, BOMs or NULs tokenize to nothing: a chunk of them was embedded
    from an empty input and topped searches it had nothing to do with."""
    assert chunker.chunk("doc", [(0, text)]) == ([], [])
    parents, children = chunker.chunk("doc", [(0, text + " Visible words." + text)])
    assert len(parents) == len(children) == 1 and "Visible words." in children[0].content


def test_a_child_and_the_title_it_leads_with_fit_in_what_the_model_reads() -> None:
    """With RETRIEVAL_CHILD_TITLE, a 1,000-character title pushed the last sentences of each
    128-token child past the model's 256 tokens: no search found them."""
    from retrieval_server.ingest.indexer import children_title, embedded_texts

    chunker = Chunker(str(BUNDLED_TOKENIZER), ChunkSizes())
    title = " ".join(f"Annual infrastructure report volume {i}" for i in range(40))[:1_000]
    parents, children = chunker.chunk("d", [(0, _text(200))])
    kid_title = children_title(chunker, title, 256)
    assert title.startswith(kid_title) and chunker.count(kid_title) == 256 - 2 - 128
    kids, _ = embedded_texts(title, parents, children, child_title=True, parent_vectors=False, children_title=kid_title)
    assert all(k.endswith(c.content) and chunker.count(k) <= 256 - 2 for k, c in zip(kids, children))
    assert children_title(chunker, "Short title", 256) == "Short title"
