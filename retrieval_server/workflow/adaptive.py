"""ADAPTIVE: the hybrid legs, weighed by what the query looks like instead of dropping one.

Features hold up on long and short queries because they are shares, not presences: one acronym
in a 200-word question is a small share of its tokens.

- ``tokens``: words in the query, each Han or kana character one;
- ``rare_share``: of the query's keyword terms that the index knows, the share that are rare by
  the index's own statistics (in at most ``RARE_DF`` of the chunks sampled);
- ``identifier_share``: tokens that look like codes (letters with digits, ALL-CAPS, snake_case;
  ALL-CAPS not in a query :func:`_shouted`, written all in capitals as a sentence is);
- ``quoted_share``: tokens inside double quotes.

The decision is a keyword-vs-dense balance: ``z`` = ``RARE_GAIN * (rare_share - RARE_CENTER) +
IDENTIFIER_GAIN * identifier_share + QUOTED_GAIN * quoted_share``, clamped to ``±MAX_LOG_RATIO``;
the keyword leg's RRF weight is ``exp(z / 2)`` and the dense legs' ``exp(-z / 2)``. ``z = 0`` is
exactly HYBRID. The constants were chosen on the tuning set of ``bench.quality.tune`` (pseudo
queries, never a test split); see the README's quality section.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from retrieval_server.backends.sparse import Bm25Encoder, any_languages_stop_word, english_stop_word
from retrieval_server.backends.vector_store import TermCounts, VectorStore
from retrieval_server.identifiers import UNSPACED_CHAR
from retrieval_server.stopwords import STOPWORDS

#: Han and kana, written without spaces between words: each counts as a word (the tokenizer makes a
#: Han character one token). Here rather than with the answers' sentences, which count words so too:
#: ingestion reads this module, and no other of the query workflow.
UNSPACED = re.compile(UNSPACED_CHAR)
#: a Han or kana character, each a word of its own, or a run of other word characters, dots and
#: hyphens that no such character ends: read as one run, a Japanese sentence holding a year
#: ("2024年の東京…") was one word, and a code
_WORD = re.compile(rf"{UNSPACED.pattern}|(?:(?!{UNSPACED.pattern})\w)(?:(?!{UNSPACED.pattern})[\w.-])*")
# A letter (any script) and a digit together ("IL-10", "β1"); snake_case is read from the
# characters (see _identifier).
_CODE = re.compile(r"^(?=.*\d)(?=.*[^\W\d_])[\w.-]{2,}$")
_WORD_CHARS = re.compile(r"\w+")
_WORDLIKE = re.compile(r"[\w-]+")
#: a phrase in quotes: ASCII's, the typographic ones a phone or a word processor types, guillemets,
#: and CJK corner brackets (each pair closed by its own mark). No body holds its opening mark: from
#: each unclosed one the search ran to the end of the query, quadratic (18 s for 64 KiB of "« ").
_QUOTED = re.compile(r'"([^"]+)"|“([^“”]+)”|„([^„“”]+)[“”]|«([^«»]+)»|「([^「」]+)」|『([^『』]+)』')


def _quoted(text: str) -> list[str]:
    """The phrases quoted in ``text``, in order, their white space made single spaces."""
    return [phrase for m in _QUOTED.finditer(text) if (phrase := " ".join(m.group(m.lastindex or 0).split()))]

# bench.quality.tune on the pydoc-long tuning split (150 long queries, 150 titles) preferred a
# rare-term gain of -2 (nDCG@10 0.851 against HYBRID's 0.840), but that did not carry over to
# SciFact (0.695 against HYBRID's 0.722), and the biomedical tuning split (SciFact titles) was
# too easy to tell (1.0 everywhere): a gain one domain supports and no other confirms is not
# adopted, so it is 0. The identifier and quoted gains moved the tuning score by at most 0.001
# (few codes, no quotes there); they are set by principle: an exact-match intent leans on keywords.
RARE_DF = 0.001
RARE_CENTER = 0.5
RARE_GAIN = 0.0
IDENTIFIER_GAIN = 1.0
QUOTED_GAIN = 1.0
MAX_LOG_RATIO = math.log(4.0)


@dataclass(slots=True)
class TermStatistics:
    """Document frequencies of keyword terms, refreshed off the request path after writes."""

    counts: TermCounts | None = None

    async def refresh(self, vectors: VectorStore, max_points: int) -> None:
        self.counts = await vectors.term_counts(max_points) if max_points > 0 else None


@dataclass(frozen=True, slots=True)
class QueryFeatures:
    tokens: int
    rare_share: float
    identifier_share: float
    quoted_share: float


@dataclass(frozen=True, slots=True)
class AdaptivePolicy:
    rare_df: float = RARE_DF
    rare_center: float = RARE_CENTER
    rare_gain: float = RARE_GAIN
    identifier_gain: float = IDENTIFIER_GAIN
    quoted_gain: float = QUOTED_GAIN
    max_log_ratio: float = MAX_LOG_RATIO


@dataclass(frozen=True, slots=True)
class LegWeights:
    """RRF weight multipliers per leg kind (``dense`` covers the parent leg too)."""

    dense: float = 1.0
    keyword: float = 1.0
    features: QueryFeatures | None = field(default=None, compare=False)


def word_count(query: str) -> int:
    """Words in the query, as ADAPTIVE and the dense granularities' shares count them."""
    return len(_WORD.findall(query))


def words(text: str) -> list[str]:
    """The words of ``text`` as ADAPTIVE reads them, without the stops and hyphens at their ends."""
    return [w.strip(".-") for w in _WORD.findall(text)]


def iter_words(text: str) -> Iterator[str]:
    """:func:`words`, read one at a time: a caller after the first of some kind reads no further."""
    return (m.group().strip(".-") for m in _WORD.finditer(text))


def _code(word: str) -> bool:
    """Letters with digits ("IL-10", "β1"), or snake_case."""
    # snake_case: an underscore inside a word of word characters only. As ^\w+_\w+$, a word
    # such as "a_a_..._a.b" took quadratic time (the engine tried every underscore): 12 s at 64 KB.
    return _CODE.match(word) is not None or ("_" in word[1:-1] and _WORD_CHARS.fullmatch(word) is not None)


def _identifier(word: str) -> bool:
    """A code, or a word that opens with two capitals of any script ("DNA", "ÖBB"): re has no class
    for capitals beyond ASCII, so those are read from the characters."""
    if _code(word):
        return True
    return len(word) >= 2 and word[0].isupper() and word[1].isupper() and _WORDLIKE.fullmatch(word) is not None


def names_one_thing(word: str) -> bool:
    """An identifier (as :func:`_identifier` reads them) or a word holding a digit ("3.11", "2024",
    "20231187"): what a query asks for to the letter."""
    return _identifier(word) or any(ch.isdigit() for ch in word)


def identifier_words(query: str) -> frozenset[str]:
    """The words of ``query`` that name one thing exactly (:func:`names_one_thing`), in lower
    case. A sentence embedding hardly tells two of them apart (cosine 0.97 between "error code
    E1234" and "error code E1235"), so two queries asking for different ones are different
    questions however close their vectors are."""
    return frozenset(w.lower() for w in words(query) if names_one_thing(w))


#: numbers written out: a number is one however it is written, and a sentence embedding tells
#: them apart no better than codes ("quarterly revenue q one" and "... q two": cosine 0.97; "phase
#: one rollout plan" and "phase two ...": 0.95). Only the semantic cache reads them as identifiers:
#: added to :func:`identifier_words`, a rewrite sharing only "one" with the query would be taken
#: in any language, and every rewrite leaving out a "first" would have it added back.
NUMBER_WORDS = frozenset({
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    "hundred", "hundreds", "thousand", "thousands", "million", "millions", "billion", "billions",
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
})
#: words that turn a question into its opposite: "is the vpn allowed for contractors" and "... not
#: allowed ..." are 0.98 apart. "cannot" and the n't contractions are read as "not", and so is a
#: compound opening with "non" or "not"; one opening with "no" ("no-mfa") as "no".
NEGATIONS = frozenset({"not", "no", "never", "without", "nor", "none"})
# "n't" as the word reader cannot see it: it cuts "isn't" at the apostrophe, ASCII or typographic.
_CONTRACTED_NOT = re.compile(r"(?<=\w)n['’]t\b", re.IGNORECASE)
#: the n't contractions typed without their apostrophe, as often as not in a query: "why isnt the
#: cache invalidated on delete" is at 0.99 of "why is the cache ...". "wont" and "cant" are words of
#: their own too, rare beside the contractions.
_UNMARKED_NOTS = frozenset({
    "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "havent", "hasnt", "hadnt",
    "cant", "couldnt", "wouldnt", "shouldnt", "wont", "mustnt", "neednt", "aint",
})
_NEGATING_PARTS = {"no": "no", "non": "not", "not": "not"}


def _names_a_number(word: str) -> bool:
    """A number written out, alone or in a compound ("twenty-one", "twenty-first")."""
    return any(part in NUMBER_WORDS for part in word.lower().split("-"))


def _cache_identifier_words(query: str) -> frozenset[str]:
    """:func:`identifier_words` and the numbers written out (:data:`NUMBER_WORDS`), in lower case."""
    return frozenset(w.lower() for w in words(query) if names_one_thing(w) or _names_a_number(w))


def name_the_same_identifiers(a: str, b: str) -> bool:
    """Whether each query's identifiers (:func:`identifier_words`, and the numbers written out) are
    among the other's words, case aside: what a similarity match of the semantic cache must hold
    to. Not the two sets compared: an acronym is read as one in capitals only, so "is TLS enabled"
    names "tls" and "is tls enabled?" names nothing, though they ask the same."""
    ids_a, ids_b = _cache_identifier_words(a), _cache_identifier_words(b)
    return ids_a <= _lower_words(b) and ids_b <= _lower_words(a)


def _negation(word: str) -> str | None:
    """The negation ``word`` reads as (:data:`NEGATIONS`), in lower case, or None. A compound's
    first part is read as :func:`_names_a_number` reads its parts: "no-mfa" negates as "no mfa" does."""
    word = word.lower()
    if word in NEGATIONS:
        return word
    if word == "cannot" or word in _UNMARKED_NOTS:
        return "not"
    first, hyphen, _ = word.partition("-")
    return _NEGATING_PARTS.get(first) if hyphen else None


def negations(query: str) -> Counter[str]:
    """The negation words of ``query`` (:func:`_negation`) and how often each occurs, in lower
    case, "cannot", "isn't" and "isnt" as "not"."""
    return Counter(n for w in words(_CONTRACTED_NOT.sub(" not", query)) if (n := _negation(w)) is not None)


def negate_alike(a: str, b: str) -> bool:
    """Whether two queries hold the same negation words as often each (:func:`negations`): a
    similarity match of the semantic cache must, as "allowed" and "not allowed" ask opposite
    things. Counted, not merely present: as sets, "allowed for non-admin users" and "not allowed for
    non-admin users" both held "not" (0.976 apart)."""
    return negations(a) == negations(b)


def _lower_words(query: str) -> frozenset[str]:
    return frozenset(w.lower() for w in words(query))


#: a URL, without the marks after it that end a sentence or an aside; the query's analysis cuts
#: never inside one. It starts only where no character of its scheme precedes: tried from every
#: character of a long word, the search ran quadratic.
URL = r"(?<![\w+.-])[A-Za-z][\w+.-]*://\S*[^\s.,;:!?)\]\"'»”]"
#: a URL or an e-mail address, which the word pattern reads as pieces ("billing", "acme.io"). An
#: address too starts only where no character of its own pattern precedes.
ADDRESS = re.compile(rf"{URL}|(?<![\w+.-])[\w+.-]+@[\w-]+(?:\.[\w-]+)+")


def missing_exact_terms(query: str, text: str) -> list[str]:
    """What the query asks for to the letter and ``text`` leaves out, each once in order: its
    URLs and e-mail addresses, its words that name one thing (:func:`names_one_thing`: codes,
    acronyms, numbers and versions) as written, then its quoted phrases (in ASCII quotes, whichever
    the query used). A phrase counts as kept when ``text`` quotes it in any of those marks. Case is
    ignored."""
    folded = text.casefold()
    addresses = [a for a in ADDRESS.findall(query) if a.casefold() not in folded]
    # The words of an address are its own: kept or added back whole, not as pieces ("v2", "acme.io").
    written = {w.casefold() for w in words(text)}
    quoted = {phrase.casefold() for phrase in _quoted(text)}
    identifiers = [w for w in words(ADDRESS.sub(" ", query)) if names_one_thing(w) and w.casefold() not in written]
    phrases = [f'"{phrase}"' for phrase in _quoted(query) if phrase.casefold() not in quoted]
    return list(dict.fromkeys(addresses + identifiers + phrases))


#: a query without a lower-case letter is shouted with at least this many words, as many in
#: capitals but one (codes aside), and stop words among them (see _shouted): "RRF" and "RRF DPR
#: BM25" name things, "I AM AT HOME" nothing; shorter, it is read as acronyms ("WHAT IS RRF" too)
SHOUTED_WORDS = 4
#: an acronym has at most this many letters ("NGINX", "HTTPS"): a longer word in capitals is a word
#: of a sentence ("ERSCHEINT", "PASSWORD")
ACRONYM_LETTERS = 5


def _shouted(query: str, tokens: list[str]) -> bool:
    """Whether ``query`` (its :func:`words` ``tokens``) is written all in capitals, as a sentence
    is ("HOW DO I RESET MY PASSWORD", "WIE SETZE ICH MEIN PASSWORT ZURÜCK"): its capitals name
    nothing, and read as acronyms they leaned it on keywords (every word of the German one). Told
    by its shape and a stop word of any language (:data:`STOPWORDS`, or one of the keyword
    engine's lists): by an English stop word alone, no other language's was shouted; by the shape
    alone, a list of acronyms was ("AWS IAM SSO SAML" leaned on keywords no more). Two English
    stop words (:data:`STOPWORDS`, or :func:`english_stop_word`) make a sentence; a stop word
    of another language only is rather an acronym ("EU", "OS", "AI", "FI": 23 of 63 common acronyms
    spell one in some language, and "GDPR EU DPA SCC", "SAP ERP HR FI CO" were shouted), as is
    one English one ("IT"): else a stop word makes a sentence beside a word longer than an acronym
    (:data:`ACRONYM_LETTERS`), or stop words must be half the words. Read so, a short English
    sentence, "HOW TO FIX SLOW WIFI", "MY WIFI DROPS EVERY HOUR", was a list of acronyms. Its codes
    still name things; a stop word in capitals among lower case is an acronym ("NO", nitric oxide)."""
    if any(ch.islower() for ch in query) or len(tokens) < SHOUTED_WORDS:
        return False
    plain = [w for w in tokens if not _code(w)]
    if sum(1 for w in plain if w.isupper()) < SHOUTED_WORDS - 1:
        return False
    stop = [w for w in plain if w.casefold() in STOPWORDS or any_languages_stop_word(w)]
    if not stop:
        return False
    english = sum(1 for w in stop if w.casefold() in STOPWORDS or english_stop_word(w))
    return english >= 2 or 2 * len(stop) >= len(plain) or any(len(w) > ACRONYM_LETTERS for w in plain if w not in stop)


def query_features(query: str, sparse: Bm25Encoder, stats: TermStatistics | None, policy: AdaptivePolicy) -> QueryFeatures:
    tokens = words(query)
    n = max(len(tokens), 1)
    named = _code if _shouted(query, tokens) else _identifier
    identifiers = sum(1 for w in tokens if named(w))
    quoted = sum(word_count(phrase) for phrase in _quoted(query))
    rare = 0.0
    counts = stats.counts if stats is not None else None
    if counts is not None and counts.points > 0:
        known = [counts.df[t] for t in set(sparse.query(query).indices) if t in counts.df]
        if known:
            rare = sum(1 for df in known if df <= policy.rare_df * counts.points) / len(known)
    return QueryFeatures(len(tokens), rare, identifiers / n, min(quoted / n, 1.0))


def leg_weights(features: QueryFeatures, policy: AdaptivePolicy) -> LegWeights:
    z = (
        policy.rare_gain * (features.rare_share - policy.rare_center)
        + policy.identifier_gain * features.identifier_share
        + policy.quoted_gain * features.quoted_share
    )
    z = max(-policy.max_log_ratio, min(policy.max_log_ratio, z))
    return LegWeights(dense=math.exp(-z / 2), keyword=math.exp(z / 2), features=features)
