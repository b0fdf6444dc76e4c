"""The pieces of the retrieval techniques that are pure functions: RM3, dense (Rocchio) feedback,
ADAPTIVE's features and weights, the parent leg's mapping onto children, the dense granularities'
cosine fusion, and the long-query set builder."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.quality.longset import build
from bench.quality.tune import CosineFusion, cosine_fused
from retrieval_server.backends import sparse
from retrieval_server.backends.sparse import TERMS_REVISION, Bm25Encoder, revised_terms
from retrieval_server.backends.vector_store import TermCounts
from retrieval_server.domain import SparseVector, Unavailable, VectorHit
from retrieval_server.workflow.adaptive import AdaptivePolicy, QueryFeatures, TermStatistics, leg_weights, query_features, word_count
from retrieval_server.workflow.keyword_leg import query_vector, rm3
from retrieval_server.workflow.dense_feedback import rocchio
from retrieval_server.workflow.dense_fusion import fold_granularities, max_cosine
from retrieval_server.workflow.document_evidence import rescore
from retrieval_server.workflow.parent_leg import as_children, dense_shares

BM25 = Bm25Encoder()


def test_rm3_mixes_the_query_with_the_feedback_model() -> None:
    q = SparseVector((1, 2), (1.0, 1.0))
    docs = [(SparseVector((2, 3, 4), (1.0, 2.0, 1.0)), 3.0), (SparseVector((3, 5), (1.0, 1.0)), 1.0)]
    v = rm3(q, docs, terms=2, query_weight=0.5)
    out = dict(zip(v.indices, v.values, strict=True))
    # p(t|R): 3 -> 0.75*0.5 + 0.25*0.5 = 0.5; 2 and 4 -> 0.1875; 5 -> 0.125. Top 2: 3, then 2 (id breaks the tie).
    assert out == pytest.approx({1: 0.25, 2: 0.25 + 0.5 * 0.1875 / 0.6875, 3: 0.5 * 0.5 / 0.6875})
    assert sum(out.values()) == pytest.approx(1.0)
    assert rm3(q, [], 10, 0.5) == q and rm3(q, [(SparseVector((3,), (1.0,)), 0.0)], 10, 0.5) == q


def test_long_queries_are_bounded_to_their_first_terms() -> None:
    text = " ".join(f"word{i}x" for i in range(2000))
    assert len(BM25.query(text).indices) == 2000
    bounded = query_vector(BM25, text, 512)
    first = BM25.query(" ".join(f"word{i}x" for i in range(512)))
    assert bounded == first and len(bounded.indices) == 512


class CountingEncoder(Bm25Encoder):
    """BM25 that counts the texts it encodes as queries."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded: list[str] = []

    def query(self, text: str) -> SparseVector:
        self.encoded.append(text)
        return super().query(text)


def test_a_bounded_query_reads_a_long_word_only_up_to_its_bound() -> None:
    """Every run of a word without white space was encoded alone, past the bound too: a 64 KiB
    word held the event loop ten times as long as encoding the whole query."""
    runs = ["".join(p) for p in itertools.product("bcfghjkmnp", repeat=4)][:3_000]  # no vowel: no stemming, no stop word
    text = "-".join(runs)
    counting = CountingEncoder()
    assert query_vector(counting, text, 8) == BM25.query(" ".join(runs[:8]))
    # The whole query, the word, and its first eight runs.
    assert counting.encoded == [text, text, *runs[:8]]


def test_a_bounded_query_keeps_the_terms_it_starts_with() -> None:
    """The encoder lists term ids sorted by id (a hash of the term), not by position in the text:
    the bound keeps the query's first distinct terms, as QUERY_MAX_TERMS says, whatever their ids."""
    question = "glacier retreat"
    text = question + " " + " ".join(f"filler{i}q" for i in range(50))
    assert query_vector(BM25, text, 2) == BM25.query(question)
    # Repeats, stopwords and punctuation do not count as terms; a word split by '_' or '-' is two.
    assert query_vector(BM25, "The glacier, the GLACIER; of retreat! ice_sheet", 3) == BM25.query("glacier retreat ice")
    assert query_vector(BM25, "IL-10 DNA binding", 2) == BM25.query("IL 10")
    # A code's joined term comes after its parts.
    assert query_vector(BM25, "IL-10 DNA binding", 3) == BM25.query("IL-10")
    assert query_vector(BM25, "only these two", 5) == BM25.query("only these two")
    # Words the tokenizer keeps whole where \w would cut them (Devanagari's vowel signs and viramas
    # are combining marks): the first words' terms, not none of them.
    hindi = ["किताबें", "पुस्तकालय", "विद्यालय", "शिक्षिका"]
    signs = "\u093f\u0940\u0941\u0947\u094b\u0948"
    filler = [chr(0x915 + i % 36) + signs[i % 6] + chr(0x915 + i // 36 % 36) + signs[i // 216 % 6] for i in range(1_500)]
    long = query_vector(BM25, " ".join(hindi + filler), 512)
    assert set(BM25.query(" ".join(hindi)).indices) <= set(long.indices) and len(long.indices) == 512
    # A word whose runs' terms other words of the query have: its own term was left out.
    first = "कतब"[0] + "\u093f" + "त" + "\u093e" + "ब"
    runs = ["क", "त", "ब"]
    many = query_vector(BM25, " ".join([first, *filler, *runs]), 512)
    assert set(BM25.query(first).indices) <= set(many.indices)


def test_titled_document_repeats_the_title_as_a_weighted_field() -> None:
    assert BM25.titled_document("some body text", "Zephyr", 2) == BM25.document("some body text Zephyr Zephyr")
    assert BM25.titled_document("some body text", "Zephyr", 0) == BM25.document("some body text")
    assert BM25.titled_document("some body text", "", 3) == BM25.document("some body text")


def _finds(encoder: Bm25Encoder, query: str, document: str) -> bool:
    terms = set(encoder.query(query).indices)
    return bool(terms) and terms <= set(encoder.document(document).indices)


@pytest.mark.parametrize(("query", "document"), [
    ("東京", "東京タワーは東京にある電波塔です。"), ("電波塔", "東京タワーは東京にある電波塔です。"),
    ("机器学习", "我喜欢机器学习和自然语言处理。"), ("自然语言处理", "我喜欢机器学习和自然语言处理。"),
    ("cafe", "Le café au lait"), ("Zurich", "servi à Zürich"), ("naive resume", "naïve résumé"),
])
def test_revised_terms_find_words_inside_unspaced_scripts_and_without_accents(query: str, document: str) -> None:
    """Revision 2: Han and kana runs as overlapping bigrams, accents folded; revision 1 missed each."""
    assert BM25.terms == TERMS_REVISION == 3
    assert _finds(BM25, query, document) and _finds(Bm25Encoder(terms=2), query, document)
    assert not _finds(Bm25Encoder(terms=1), query, document)


def test_unspaced_runs_become_overlapping_bigrams_and_a_lone_character_a_unigram() -> None:
    assert revised_terms("東京タワー、猫。Tokyo").split() == ["東京", "京タ", "タワ", "ワー", "、", "猫", "。Tokyo"]
    assert revised_terms("서울에 갑니다") == "서울에 갑니다"  # Hangul: Korean spaces its words


def test_revised_terms_keep_c_sharp_c_plus_plus_f_sharp_and_c_apart() -> None:
    terms = {name: BM25.query(name).indices for name in ("C#", "C++", "F#", "C", "F", "csharp")}
    assert len({terms[n] for n in ("C#", "C++", "F#", "C", "F")}) == 5
    # Only as whole tokens: "abc#" or "C++17" are what the tokenizer makes of them.
    assert BM25.query("abc#") == BM25.query("abc") and BM25.query("C++17") == BM25.query("C 17")
    assert terms["C#"] == terms["csharp"] and BM25.query("c#") == BM25.query("C#")
    assert _finds(BM25, "C#", "written in c# on .NET") and not _finds(BM25, "C#", "written in C++ or C")
    assert _finds(Bm25Encoder(terms=1), "C#", "written in C++ or C")


def test_revised_terms_keep_a_code_with_a_digit_as_one_more_term() -> None:
    """Revision 3: a code's parts alone are a bag of digit groups, which other codes hold too."""
    assert revised_terms("Host 192.168.1.10 refused.") == "Host 192.168.1.10 192q168q1q10 refused."
    assert revised_terms("Python 3.11, TKT-4471 at 12:30") == "Python 3.11 3q11, TKT-4471 TKTq4471 at 12:30 12q30"
    for a, b in [("192.168.1.10", "192.168.10.1"), ("Python 3.11", "Python 11.3"), ("2024-01-02", "2024-02-01")]:
        assert _finds(BM25, a, a) and not _finds(BM25, a, b), a
        # Revision 2 as it was: the parts only, so either finds the other.
        assert _finds(Bm25Encoder(terms=2), a, b) and revised_terms(a, 2) == a
    # Separators are notation: a date written with slashes finds the same date with dashes.
    assert _finds(BM25, "2024/01/02", "on 2024-01-02") and not _finds(BM25, "2024/01/02", "on 2024-02-01")
    # Words without a digit stay their parts, as does a trailing full stop; "_" ends a code, as it ends a token.
    assert revised_terms("state-of-the-art e-mail and/or http://example.com") == "state-of-the-art e-mail and/or http://example.com"
    assert revised_terms("in 3.11.") == "in 3.11 3q11." and revised_terms("parse_v2.0") == "parse_v2.0 v2q0"
    # After the bigrams: Han around a code is no part of it.
    assert revised_terms("第3.1節").split() == ["第", "3.1", "3q1", "節"]


def test_a_code_is_looked_for_only_where_a_run_starts() -> None:
    """Tried at every character of a run, the pattern read the rest of the run from each: a 64 KiB
    word without a separator took 125 s of the event loop (revision 2: 10 ms)."""
    text = "v2.0 TKT-4471 " + "a" * 50
    assert [p for p in range(len(text)) if sparse._JOINED_RUNS.match(text, p)] == [0, 5]


#: revision 3's code pattern as first written (unanchored, backtracking): what it found is what a code is
_UNANCHORED_RUNS = re.compile(r"[^\W_]+(?:[./:-][^\W_]+)+")


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab7Z_.-/: \u00e9\u0301東\u00ad", max_size=40))
def test_a_code_found_where_runs_start_is_the_code_the_unanchored_pattern_found(text: str) -> None:
    assert sparse._JOINED_RUNS.sub(sparse._with_joined_term, text) == _UNANCHORED_RUNS.sub(sparse._with_joined_term, text)


@pytest.mark.parametrize("hint", ["\u00ad", "\u200b", "\u2060", "\ufeff"])
def test_revised_terms_delete_what_only_hints_where_a_word_may_break(hint: str) -> None:
    """Revision 3: a soft hyphen (HTML's &shy;), a zero-width space, a word joiner or a BOM inside a
    word split it in two terms, which the word asked for did not match."""
    document = f"Interoperability is co{hint}ordinated by the Donau{hint}dampf{hint}schiff company."
    for query in ("coordinated", "Donaudampfschiff", f"co{hint}ordinated"):
        assert _finds(BM25, query, document), query
    assert not _finds(Bm25Encoder(terms=2), "coordinated", document)  # revision 2 as it was
    # The joiners choose how letters join (Persian, Indic scripts), and stay.
    assert revised_terms(f"می\u200cخواهم co{hint}ordinated") == "می\u200cخواهم coordinated"


def test_an_index_of_the_first_terms_revision_is_encoded_as_the_engine_tokenizes() -> None:
    old, engine = Bm25Encoder(terms=1), qe.Bm25(qe.Bm25Config(avg_len=128.0))
    for text in ("東京タワーは東京にある電波塔です。", "Le café à Zürich", "C# and C++"):
        assert old.query(text).indices == tuple(engine.embed_query(text).indices)
        assert old.document(text).indices == tuple(engine.embed_document(text).indices)
    with pytest.raises(Unavailable, match="keyword terms of revision 4"):
        Bm25Encoder(terms=4)


def test_adaptive_features_are_shares_that_hold_on_long_queries() -> None:
    policy = AdaptivePolicy()
    short = query_features("IL-10 DNA", BM25, None, policy)
    assert short.identifier_share == 1.0
    long = query_features("IL-10 " + "the patients improved markedly after the treatment " * 25, BM25, None, policy)
    assert long.tokens == 176 and long.identifier_share == pytest.approx(1 / 176)
    # Codes and acronyms of any script; a word that only opens with a capital is neither.
    assert query_features("ÖBB β1 Fahrplan", BM25, None, policy).identifier_share == pytest.approx(2 / 3)
    # A query written in capitals as a sentence is, in any language, is shouted: its capitals name
    # nothing (0.83 of the English one's words were acronyms, and, told by an English stop word, all
    # of the German one's), its codes still do; a capitalised stop word among lower case is an
    # acronym ("NO", nitric oxide), and so is each word of a short query in capitals. A sentence
    # holds a stop word of some language: without one, the words are a list of acronyms (told by
    # the shape alone, "AWS IAM SSO SAML" named nothing). One stop word among short words is an
    # acronym spelling one ("EU", "OS", "AI", and "SAP" and "FI" are both Catalan's): those lists
    # named nothing either. Two English stop words make a sentence, however short its words: read
    # by the share of stop words, "HOW TO FIX SLOW WIFI" was a list of acronyms. English's, not
    # the engine's whole Hinglish list, which holds "AP", "SE", "INC", "LTD", "EDU", "COM" too; but
    # its English words ("WONT", "STILL"), or those sentences were acronyms again.
    for shouting in ("HOW DO I RESET MY PASSWORD", "WIE SETZE ICH MEIN PASSWORT ZURÜCK", "COMMENT RÉINITIALISER MON MOT DE PASSE",
                     "I AM AT HOME", "HOW TO FIX SLOW WIFI", "CANT OPEN PDF FILES ON MAC", "MY WIFI DROPS EVERY HOUR",
                     "RESET MFA FOR NEW USER", "WONT OPEN PDF FILES ON MAC", "VPN WONT LOAD ON MAC", "WIFI STILL DROPS AT NIGHT"):
        assert query_features(shouting, BM25, None, policy).identifier_share == 0.0, shouting
    for acronyms in ("AWS IAM SSO SAML", "JWT OIDC SAML SCIM LDAP", "TCP UDP QUIC HTTP", "NGINX SSL TLS SNI ERROR",
                     "GDPR EU DPA SCC", "AWS IAM OS SSO", "CPU GPU TPU AI", "SAP ERP HR FI CO", "HIPAA PHI BAA IT",
                     "AWS VPC AP SE NAT GW", "ACME INC LTD GMBH AG", "EDU COM ORG NET GOV"):
        assert query_features(acronyms, BM25, None, policy).identifier_share == 1.0, acronyms
    assert query_features("WHY DOES ERROR E1234 APPEAR", BM25, None, policy).identifier_share == pytest.approx(1 / 5)
    assert query_features("WARUM ERSCHEINT DER FEHLER E1234", BM25, None, policy).identifier_share == pytest.approx(1 / 5)
    assert query_features("NAC destabilizes NO", BM25, None, policy).identifier_share == pytest.approx(2 / 3)
    assert query_features("RRF DPR BM25", BM25, None, policy).identifier_share == 1.0
    quoted = query_features('find "exact phrase here" now', BM25, None, policy)
    assert quoted.quoted_share == pytest.approx(3 / 5)
    # The quotes a phone or a word processor types, guillemets and CJK brackets quote as well.
    for marks in ("“”", "«»", "„“", "「」"):
        typed = query_features(f"find {marks[0]}exact phrase here{marks[1]} now", BM25, None, policy)
        assert typed.quoted_share == pytest.approx(3 / 5), marks
        # Unclosed opening marks quote nothing, and are read once each (their search ran to the
        # end of the query from each: 18 s on the event loop for 64 KiB of "« ").
        assert query_features(f"{marks[0]} " * 20_000, BM25, None, policy).quoted_share == 0.0
    # snake_case, an underscore inside word characters; not at an end, not beside a stop (which the
    # old pattern read in time quadratic in the word: 12 s for this one at 64 KB).
    snake = ["snake_case", "__init", "a_" * 4_000 + "a.b", "_a", "a_"]
    assert [query_features(w, BM25, None, policy).identifier_share for w in snake] == [1.0, 1.0, 0.0, 0.0, 0.0]
    # Han and kana, written without spaces, are a word a character: a Japanese sentence with a
    # year in it was one word and a code, its whole share an identifier's.
    japanese = query_features("2024年の東京オリンピックの結果はどうでしたか", BM25, None, policy)
    assert (japanese.tokens, japanese.identifier_share) == (21, 0.0)
    assert query_features("エラーE1234の原因", BM25, None, policy).identifier_share == pytest.approx(1 / 7)
    assert word_count("東京オリンピックの結果はどうでしたか") == 18


def test_rare_share_uses_the_index_statistics() -> None:
    common, rare = BM25.query("protein").indices[0], BM25.query("zeolite").indices[0]
    stats = TermStatistics(TermCounts(10_000, {common: 5_000, rare: 3}))
    f = query_features("protein zeolite unknownterm", BM25, stats, AdaptivePolicy())
    assert f.rare_share == 0.5  # of the two terms the index knows, one is rare


def test_leg_weights_balance_keyword_against_dense_and_zero_is_hybrid() -> None:
    f = QueryFeatures(tokens=3, rare_share=0.0, identifier_share=1.0, quoted_share=0.0)
    hybrid = AdaptivePolicy(rare_gain=0.0, identifier_gain=0.0, quoted_gain=0.0)
    assert (leg_weights(f, hybrid).dense, leg_weights(f, hybrid).keyword) == (1.0, 1.0)
    # The shipped policy leans an all-identifier query towards keywords.
    assert leg_weights(f, AdaptivePolicy()).keyword > 1.0 > leg_weights(f, AdaptivePolicy()).dense
    w = leg_weights(f, AdaptivePolicy(identifier_gain=1.0))
    assert w.keyword == pytest.approx(math.exp(0.5)) and w.dense * w.keyword == pytest.approx(1.0)
    capped = leg_weights(f, AdaptivePolicy(identifier_gain=100.0))
    assert capped.keyword / capped.dense == pytest.approx(4.0)


def _hit(chunk: str, score: float = 0.0) -> VectorHit:
    doc, rest = chunk.split("#")
    return VectorHit(chunk, f"{doc}#{rest.split('c')[0]}", doc, 0, 0, chunk, 0, score)


def test_parent_hits_become_the_child_the_other_legs_ranked_best() -> None:
    parents = [_hit("a#p0c0", 0.9), _hit("b#p1c4", 0.8)]
    legs = {"dense:0": [_hit("x#p0c0"), _hit("a#p0c2"), _hit("a#p0c1")], "keyword:0": [_hit("a#p0c1")]}
    out = as_children(parents, legs)
    # a#p0: ranked first by the keyword leg (rank 0) -> c1; b#p1 is in no other leg -> its first child.
    assert [(h.chunk_id, h.score) for h in out] == [("a#p0c1", 0.9), ("b#p1c4", 0.8)]


def test_dense_shares_sum_to_one_and_favour_documents_as_queries_grow() -> None:
    assert dense_shares({"dense"}, 5, 100) == {"dense": 1.0}
    assert dense_shares({"dense", "parent"}, 500, 100) == {"dense": 0.5, "parent": 0.5}
    short, long = dense_shares({"dense", "document"}, 10, 100), dense_shares({"dense", "document"}, 300, 100)
    assert short == pytest.approx({"dense": 100 / 110, "document": 10 / 110})
    assert long == pytest.approx({"dense": 0.25, "document": 0.75})
    three = dense_shares({"dense", "parent", "document"}, 100, 100)
    assert three == pytest.approx({"dense": 0.25, "parent": 0.25, "document": 0.5})
    assert dense_shares({"dense", "document"}, 7, 0) == {"dense": 0.5, "document": 0.5}
    for words in (0, 1, 50, 10_000):
        assert sum(dense_shares({"dense", "parent", "document"}, words, 60).values()) == pytest.approx(1.0)


def test_max_cosine_lets_the_granularity_that_matches_best_win() -> None:
    # A sentence query: its child scores far above any whole document.
    sentence = max_cosine([[_hit("a#p0c3", 0.86), _hit("b#p0c0", 0.62)], [_hit("b#p0c0", 0.70), _hit("a#p0c0", 0.55)]])
    assert [(h.chunk_id, h.score) for h in sentence] == [("a#p0c3", 0.86), ("b#p0c0", 0.70), ("a#p0c0", 0.55)]
    # A long query: the document vector of b beats a's best passage, though b has no child hit near the top.
    long = max_cosine([[_hit("a#p0c1", 0.58), _hit("a#p0c2", 0.51)], [_hit("b#p0c0", 0.66), _hit("a#p0c0", 0.49)]])
    assert [h.document_id for h in long][:2] == ["b", "a"] and long[0].score == 0.66
    assert max_cosine([]) == [] and max_cosine([[], []]) == []


@given(st.lists(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 2), st.integers(0, 3),
                                   st.floats(-1.0, 1.0, allow_nan=False)), max_size=12), max_size=3))
def test_max_cosine_ranks_each_document_by_its_best_cosine_at_any_granularity(raw: list[list[tuple[str, int, int, float]]]) -> None:
    lists = [[_hit(f"{d}#p{p}c{c}", s) for d, p, c, s in hits] for hits in raw]
    out = max_cosine(lists)
    # Plain definition: every chunk once, with its best score over the lists, best first.
    expected: dict[str, float] = {}
    for hits in lists:
        for h in hits:
            expected[h.chunk_id] = max(expected.get(h.chunk_id, -math.inf), h.score)
    assert {h.chunk_id: h.score for h in out} == expected and len(out) == len(expected)
    assert all(x.score >= y.score for x, y in zip(out, out[1:]))
    # Hence a document's best chunk is its best cosine at any granularity (CombMAX).
    best_of: dict[str, float] = {}
    for h in (h for hits in lists for h in hits):
        best_of[h.document_id] = max(best_of.get(h.document_id, -math.inf), h.score)
    first: dict[str, float] = {}
    for h in out:
        first.setdefault(h.document_id, h.score)
    assert first == best_of


def test_tuners_cosine_sum_counts_a_missing_granularity_at_its_legs_lowest_cosine() -> None:
    legs = {"dense:0": [_hit("a#p0c1", 0.8), _hit("a#p0c2", 0.7), _hit("b#p0c3", 0.5)], "document:0": [_hit("b#p0c0", 0.6), _hit("c#p0c0", 0.4)],
            "keyword:0": [_hit("c#p0c2", 30.0)]}
    total = {h.document_id: h.score for h in cosine_fused(legs, CosineFusion({"dense": 0.0, "document": 0.0}, "sum"))}
    # a: 0.8 + the document leg's floor 0.4; b: 0.5 + 0.6; c: the child leg's floor 0.5 + 0.4; the keyword leg is not dense.
    assert total == pytest.approx({"a": 1.2, "b": 1.1, "c": 0.9})
    mnz = {h.document_id: h.score for h in cosine_fused(legs, CosineFusion({"dense": 0.0, "document": 0.0}, "mnz"))}
    assert mnz == pytest.approx({"a": 1.2, "b": 2.2, "c": 0.9})
    shifted = cosine_fused(legs, CosineFusion({"dense": 0.0, "document": 0.3}))
    assert [(h.chunk_id, h.score) for h in shifted][:2] == [("b#p0c0", pytest.approx(0.9)), ("a#p0c1", 0.8)]


def test_fold_granularities_merges_only_the_legs_of_the_querys_own_vector() -> None:
    child, parent, document = [_hit("a#p0c1", 0.6)], [_hit("a#p0c1", 0.7)], [_hit("b#p0c0", 0.65)]
    keyword, variant, feedback = [_hit("c#p0c0", 12.0)], [_hit("d#p0c0", 0.9)], [_hit("e#p0c0", 0.95)]
    legs = [("dense:0", child), ("dense:1", variant), ("parent:0", parent), ("document:0", document), ("keyword:0", keyword),
            ("feedback:0", feedback)]
    folded = fold_granularities(legs)
    assert [leg for leg, _ in folded] == ["dense:0", "dense:1", "keyword:0", "feedback:0"]
    assert [(h.chunk_id, h.score) for h in folded[0][1]] == [("a#p0c1", 0.7), ("b#p0c0", 0.65)]
    assert folded[1][1] is variant and folded[3][1] is feedback  # other vectors' cosines stay legs of their own
    alone = [("dense:0", child), ("keyword:0", keyword)]
    assert fold_granularities(alone) == alone
    # Without the child leg (failed), the coarser legs still fold into the one dense leg.
    assert [leg for leg, _ in fold_granularities([("parent:0", parent), ("document:0", document)])] == ["dense:0"]


def test_document_evidence_adds_a_share_of_the_next_two_chunks() -> None:
    fused = [_hit("a#p0c0", 1.0), _hit("b#p0c0", 0.9), _hit("b#p0c1", 0.5), _hit("b#p1c2", 0.4), _hit("b#p1c3", 0.3), _hit("c#p0c0", 0.2)]
    out = rescore(fused, 0.25)
    scores = {h.chunk_id: h.score for h in out}
    assert scores["b#p0c0"] == pytest.approx(0.9 + 0.25 * (0.5 + 0.4))  # best + share of the next two
    assert scores["b#p0c1"] == pytest.approx(0.5 + 0.25 * (0.9 + 0.4))
    assert scores["b#p1c3"] == pytest.approx(0.3 + 0.25 * (0.9 + 0.5))  # beyond the top three: the best two others
    assert scores["a#p0c0"] == 1.0 and scores["c#p0c0"] == 0.2  # a lone chunk keeps its score
    assert [h.chunk_id for h in out][:2] == ["b#p0c0", "a#p0c0"]
    assert [h.chunk_id for h in out if h.document_id == "b"] == ["b#p0c0", "b#p0c1", "b#p1c2", "b#p1c3"]  # own order kept
    assert rescore(fused, 0.0) is fused


def test_sentence_tuning_split_asks_for_a_documents_last_sentence(tmp_path: Path) -> None:
    from bench.quality.titles import build as build_titles

    rows = [{"_id": "a", "title": "Alpha study", "text": "First finding here. Second finding here. We conclude that alpha matters a great deal."},
            {"_id": "b", "title": "Beta", "text": "Only one sentence in this abstract of beta."}]
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert build_titles(tmp_path / "ds", tmp_path / "out", 10, "sentence") == 1  # b: too few sentences to leave its opening out
    assert [json.loads(line) for line in (tmp_path / "out" / "queries.jsonl").read_text().splitlines()] == [
        {"_id": "s:a", "text": "We conclude that alpha matters a great deal."}]
    assert (tmp_path / "out" / "qrels" / "tune.tsv").read_text().splitlines()[1:] == ["s:a\ta\t1"]


def test_long_query_set_cuts_sections_into_query_and_document(tmp_path: Path) -> None:
    src = tmp_path / "src" / "library"
    src.mkdir(parents=True)
    para = "This paragraph explains the module in enough plain words to count as prose for the set. " * 3
    long_section = "\n\n".join(f"Part {i}. {para}" for i in range(8))
    (src / "demo.rst.txt").write_text(
        f"Demo module\n===========\n\n{long_section}\n\nShort one\n---------\n\n{para}\n\n.. note::\n   skipped\n"
    )
    counts = build(tmp_path / "src", tmp_path / "out")
    corpus = [json.loads(line) for line in (tmp_path / "out" / "corpus.jsonl").read_text().splitlines()]
    queries = {q["_id"]: q["text"] for q in map(json.loads, (tmp_path / "out" / "queries.jsonl").read_text().splitlines())}
    assert counts["documents"] == 2 == len(corpus)
    qrels = (tmp_path / "out" / "qrels" / "test.tsv").read_text().splitlines()[1:] + (
        tmp_path / "out" / "qrels" / "tune.tsv").read_text().splitlines()[1:]
    assert [line.split("\t")[1] for line in qrels if line.startswith("q:")] == ["library/demo#0"]
    doc = next(d for d in corpus if d["_id"] == "library/demo#0")
    assert doc["title"] == "Demo module" and queries["q:library/demo#0"] not in doc["text"]
    assert len(queries["q:library/demo#0"].split()) + len(doc["text"].split()) == len(long_section.split())
    assert "skipped" not in json.dumps(corpus)


def test_dense_feedback_halves_the_childrens_share_and_stands_in_for_them() -> None:
    assert dense_shares({"dense", "feedback"}, 5, 100) == {"dense": 0.5, "feedback": 0.5}
    mixed = dense_shares({"dense", "feedback", "parent", "document"}, 100, 100)
    assert mixed == pytest.approx({"document": 0.5, "parent": 0.25, "dense": 0.125, "feedback": 0.125})
    # The children's leg failed: the feedback search takes its place instead of dividing by nothing.
    assert dense_shares({"feedback", "parent"}, 5, 100) == {"feedback": 0.5, "parent": 0.5}


def test_rocchio_moves_the_query_towards_the_feedback_centroid() -> None:
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    fb = [np.array([0.0, 1.0, 0.0], dtype=np.float32), np.array([0.0, 0.0, 1.0], dtype=np.float32)]
    moved = rocchio(q, fb, 0.5)
    # (0.5 * q + 0.5 * centroid / |centroid|) renormalized.
    expected = np.array([0.5, 0.5 / math.sqrt(2), 0.5 / math.sqrt(2)])
    assert moved == pytest.approx(expected / np.linalg.norm(expected), abs=1e-6)
    assert rocchio(2 * q, fb, 0.0) == pytest.approx(q)
    assert rocchio(q, [], 0.6) == pytest.approx(q)
    assert rocchio(q, fb, 1.0) == pytest.approx(np.array([0.0, 1.0, 1.0]) / math.sqrt(2), abs=1e-6)
    # Feedback exactly opposite the query cancels it: the query stands rather than a zero vector.
    assert rocchio(q, [-q], 0.5) == pytest.approx(q)


_vectors = st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=4, max_size=4).filter(lambda v: np.linalg.norm(v) > 0.1)


@settings(max_examples=200, deadline=None)
@given(_vectors, st.lists(_vectors, min_size=1, max_size=5), st.floats(0, 1), st.floats(0, 1))
def test_rocchio_is_a_unit_vector_that_gets_closer_to_the_feedback_as_its_weight_grows(
    q: list[float], fb: list[list[float]], w1: float, w2: float
) -> None:
    query, feedback = np.asarray(q, dtype=np.float32), [np.asarray(v, dtype=np.float32) for v in fb]
    centroid = np.mean(np.stack(feedback), axis=0)
    if np.linalg.norm(centroid) < 0.1:
        return
    lo, hi = sorted((w1, w2))
    a, b = rocchio(query, feedback, lo), rocchio(query, feedback, hi)
    assert float(np.linalg.norm(a)) == pytest.approx(1.0, abs=1e-4) and float(np.linalg.norm(b)) == pytest.approx(1.0, abs=1e-4)
    c = centroid / np.linalg.norm(centroid)
    assert float(b @ c) >= float(a @ c) - 1e-4
