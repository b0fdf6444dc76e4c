"""BM25 sparse vectors, tokenized by Qdrant's own BM25 (English stemming and stopwords).

Documents carry term frequencies with BM25 length normalization; queries carry unit weights.
IDF is applied by the engine (the sparse vector is declared with the IDF modifier), so the
statistics follow the collection without re-indexing; deleted points count in them until the
engine vacuums their segment (see ``vector_store.VACUUM_DELETED_SHARE``).

The title as a weighted field (BM25F, Robertson et al. 2004, with one length normalization over
the weighted fields): a term's frequency is ``tf(text) + w * tf(title)`` and the length is
``len(text) + w * len(title)`` before saturation, which is exactly BM25 over the text followed by
the title repeated ``w`` times.

Terms (:data:`TERMS_REVISION`). Revision 1 is the engine's tokenizer as it is: words between
non-letters, so a run of Han and kana, written without spaces, was one term that no query of a
word inside it matched; accents kept ("cafe" missed "café"); and "C#", "C++" and "C" all the term
"c". Revision 2 splits each such run into overlapping character bigrams (a lone character stays a
unigram: Lucene's CJK bigram filter), folds accents to ASCII, and makes C#, C++ and F# terms of
their own, the same for documents and queries. Hangul is not split: Korean puts spaces between
words, which the tokenizer keeps. Revision 3 also keeps a code of word runs joined by ``.``,
``-``, ``/`` or ``:`` that holds a digit (an IP address, a version, a date, a ticket id) as one
more term next to its parts: its parts alone are a bag of digit groups, so "192.168.1.10" matched
"192.168.10.1" as well as itself. It first deletes soft hyphens, zero-width spaces, word joiners
and BOMs (:func:`~retrieval_server.identifiers.without_break_hints`), which split a word where
they stood. An index records the revision its vectors were built with
(``IndexFeatures.terms``) and the encoder follows it (:meth:`Bm25Encoder.use`): the terms of
another revision would miss the index's own.
"""

from __future__ import annotations

import functools
import re

import qdrant_edge as qe

from retrieval_server.domain import SparseVector, Unavailable
from retrieval_server.identifiers import UNSPACED_CHAR, without_break_hints

#: what a new index's keyword terms are (see the module's docstring)
TERMS_REVISION = 3
#: Han and kana, in runs
_UNSPACED_RUN = re.compile(f"{UNSPACED_CHAR}+")
#: languages whose names the tokenizer cuts to "c" or "f", as whole tokens
_LANGUAGES = re.compile(r"(?<![\w+#])(c\+\+|c#|f#)(?![\w+#])", re.IGNORECASE)
_LANGUAGE_TERMS = {"c++": "cplusplus", "c#": "csharp", "f#": "fsharp"}
#: what joins the runs of a code ("192.168.1.10", "2024-01-02", "12:30", "TKT/4471")
_SEPARATOR = re.compile("[./:-]")
#: runs of letters and digits joined by single separators (the tokenizer splits at "_" as well).
#: A match starts only at a run's first character, and the runs are possessive: unanchored, each
#: character of a word with no separator started a scan of the rest of it (a 64 KiB word: 125 s on
#: the event loop, for one query); the codes found are the same.
_JOINED_RUNS = re.compile(rf"(?<![^\W_])[^\W_]++(?:{_SEPARATOR.pattern}[^\W_]++)+")
#: what a code's separators become in its joined term: one letter the tokenizer keeps inside a
#: word, the same for each, so "2024-01-02" finds "2024/01/02"; "q" as no word puts it between digits
_JOINER = "q"


def bigrams(run: str) -> str:
    """A run of unspaced characters as its overlapping bigrams, between spaces; one character alone."""
    return " " + " ".join(run[i:i + 2] for i in range(max(len(run) - 1, 1))) + " "


def _with_joined_term(code: re.Match[str]) -> str:
    # Only codes with a digit: joining hyphenated words ("state-of-the-art") would add a term to
    # ordinary prose, whose parts already say what it means.
    text = code.group()
    if not any(ch.isdigit() for ch in text):
        return text
    return f"{text} {_SEPARATOR.sub(_JOINER, text)}"


def revised_terms(text: str, revision: int = TERMS_REVISION) -> str:
    """``text`` as revision ``revision`` (2 or later) hands it to the tokenizer (the accents are the engine's to fold)."""
    if revision >= 3:
        text = without_break_hints(text)
    text = _UNSPACED_RUN.sub(lambda m: bigrams(m.group()), text)
    text = _LANGUAGES.sub(lambda m: f" {_LANGUAGE_TERMS[m.group().lower()]} ", text)
    # After the bigrams, which put spaces around Han and kana: a code ends where they begin.
    return _JOINED_RUNS.sub(_with_joined_term, text) if revision >= 3 else text


def check_terms(where: str, terms: int) -> None:
    """An index's keyword terms must be of a revision this service makes: another's queries would
    miss the index's own terms (one from a newer version is served by that version)."""
    if not 1 <= terms <= TERMS_REVISION:
        raise Unavailable(f"{where} holds keyword terms of revision {terms}, which this service cannot make (it makes "
                          f"1 to {TERMS_REVISION}): serve it with the version that built it")


#: English words the engine's English list leaves out, as a shouted question uses them ("CANT OPEN
#: PDF FILES ON MAC", "VPN WONT LOAD ON MAC", "WIFI STILL DROPS AT NIGHT"): its Hinglish list (Hindi
#: in Latin letters beside English) holds them, but also what acronyms spell ("AP", "SE", "INC",
#: "LTD", "EDU", "COM"), and with all of it lists of those read as sentences. Taken from that list
#: by a rule: its entries that are English function words (pronouns, determiners and quantifiers,
#: prepositions, conjunctions, auxiliaries and modals, and their contractions typed without the
#: apostrophe: "wont", "thats") or adverbs, written out (not "etc", "viz", "thru", "tho": abbreviations and clipped
#: forms), and of four letters or more: shorter ones spell acronyms, domains and file types as
#: often as words ("AP", "SE", "DE", "EX", "GO", "OK", "COM", "EDU", "INC", "LTD", "PER", "SUB",
#: "TAB", "LOG"), and the engine's English list holds the short function words already. Not its
#: nouns, verbs, adjectives, numbers or interjections ("people", "know", "good", "seven", "okay"),
#: but "new", which shouted requests use as they do these ("RESET MFA FOR NEW USER")
_MORE_ENGLISH = frozenset(
    """
    according accordingly across actually afterwards aint almost alone along already also although
    always among amongst another anybody anyhow anyone anything anyway anyways anywhere apart arent
    around aside behind beside besides beyond cannot cant certainly clearly could couldnt didnt
    doesnt dont downwards either else elsewhere enough even ever every everybody everyone everything
    everywhere exactly except forth furthermore hadnt hardly hasnt havent hence hereafter hereby
    herein hereupon hither hopefully howbeit however inasmuch insofar inward isnt lately later least
    less lest like little mainly many maybe meanwhile merely might mightnt moreover mostly much must
    mustnt namely near nearly need neednt needs neither never nevertheless next nobody none normally
    nothing nowhere obviously often ones onto others otherwise ought outside overall perhaps please
    plus quite rather really reasonably regarding regardless secondly seriously several shall shant
    shouldnt since somebody somehow someone something sometime sometimes somewhat somewhere soon
    still thats thence thereafter thereby therefore therein theres thereupon thoroughly though
    throughout thus together toward towards truly twice unless unto upon usually wasnt well werent
    whatever whence whenever whereafter whereas whereby wherein whereupon wherever whether whoever
    whose within without wont would wouldnt new""".split()
)


@functools.cache
def _without_stop_words(english: bool) -> qe.Bm25:
    """The engine's tokenizer, leaving out the stop words of every language it has a list of, or
    of English only (its list and :data:`_MORE_ENGLISH`)."""
    if english:
        return qe.Bm25(qe.Bm25Config(stopwords=qe.StopwordsSet(languages={qe.Language.English}, custom=set(_MORE_ENGLISH))))
    languages = {v for v in vars(qe.Language).values() if isinstance(v, qe.Language)}
    return qe.Bm25(qe.Bm25Config(stopwords=qe.StopwordsSet(languages=languages)))


def any_languages_stop_word(word: str) -> bool:
    """Whether ``word`` is on the engine's stop-word list of any language ("ICH", "MON", "DE",
    "HOW"; case aside): the keyword terms leave out only English ones, these tell a sentence."""
    return not _without_stop_words(False).embed_query(word).indices


def english_stop_word(word: str) -> bool:
    """Whether ``word`` is on the engine's stop-word list of English or :data:`_MORE_ENGLISH`
    ("MY", "EVERY", "CANT"; case aside), not only another language's ("EU", "OS", "AI", "INC")."""
    return not _without_stop_words(True).embed_query(word).indices


class Bm25Encoder:
    def __init__(self, avg_len: float = 128.0, terms: int = TERMS_REVISION) -> None:
        self._avg_len = avg_len
        self.use(terms)

    def use(self, terms: int) -> None:
        """Encode as an index of terms revision ``terms`` was built (before any text is encoded)."""
        check_terms("the vector index", terms)
        self.terms = terms
        self._model = qe.Bm25(qe.Bm25Config(avg_len=self._avg_len, ascii_folding=terms >= 2 or None))

    def _prepared(self, text: str) -> str:
        return revised_terms(text, self.terms) if self.terms >= 2 else text

    def document(self, text: str) -> SparseVector:
        v = self._model.embed_document(self._prepared(text))
        return SparseVector(tuple(v.indices), tuple(v.values))

    def titled_document(self, text: str, title: str, weight: int) -> SparseVector:
        """BM25F: the title as a field of weight ``weight`` (an integer, so the repetition is exact)."""
        return self.document(" ".join([text, *([title] * weight)]) if title and weight > 0 else text)

    def query(self, text: str) -> SparseVector:
        v = self._model.embed_query(self._prepared(text))
        return SparseVector(tuple(v.indices), tuple(v.values))
