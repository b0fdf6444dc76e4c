"""Query analysis: rewrite, reformulation, HyDE and decomposition, run concurrently.

Each technique has its own timeout and all share a total one; a technique that fails, times out
or does not apply is dropped and reported, never failing the request. With an LLM configured the
techniques ask it (see :mod:`retrieval_server.backends.llm`); without one, classical methods run.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import json
import logging
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from retrieval_server.backends.llm import ChatModel, Completion, LlmError, log_failure, waited_for
from retrieval_server.observability.log_limit import LogLimit
from retrieval_server.workflow.abandon import abandon
from retrieval_server.workflow.adaptive import ADDRESS, URL, identifier_words, iter_words, missing_exact_terms, names_one_thing, words
from retrieval_server.workflow.model_text import CHARS_PER_TOKEN
from retrieval_server.stopwords import STOPWORDS

log = logging.getLogger(__name__)

#: where Unicode places combining marks: the first two planes and plane 14's variation selectors
#: (planes 2 and 3 hold ideographs only); reading all 17 planes took 0.1 s, these a third of it
_MARK_PLANES = (range(0x20000), range(0xE0000, 0xE1000))


@functools.cache
def _word() -> re.Pattern[str]:
    """A letter of any script, then letters, digits, hyphens or combining marks ("β-amyloid",
    "Sjögren", "सरकार"): a word cut in two ("Sj", "gren"; "सरक" without its vowel sign) could be
    fed back as a term no document uses. re's \\w has no combining marks; their class is read from
    unicodedata once, at the first feedback, not at every import."""
    marks = [c for plane in _MARK_PLANES for c in plane if unicodedata.category(chr(c)).startswith("M")]
    ranges, first = [], 0
    for i in range(1, len(marks) + 1):
        if i == len(marks) or marks[i] != marks[i - 1] + 1:
            ranges.append(f"{re.escape(chr(marks[first]))}-{re.escape(chr(marks[i - 1]))}")
            first = i
    return re.compile(rf"[^\W\d_](?:[^\W_]|-|[{''.join(ranges)}])+")


#: a sentence's end: "?" and ";" before white space and anything after it ("? 2) How ...", "?
#: ¿Dónde ...", '? "Remote access" ...'), or directly before a word of two letters, an opening
#: "¿", "¡", bracket or quote ("rank fusion?How does ...") or at the end; not directly before a
#: digit or a lone letter, as code and numbers write them ("p-value?0.05", "x = 1;y = 2"), while a
#: ternary's spaced "?" is left to :func:`_looks_like_code`. Also full-width (Chinese, Japanese)
#: and Arabic ("؟", "؛") ones, the ideographic full stop "。" (no capital follows it: those
#: scripts have none), and a full stop
_BREAK = re.compile(r"[?;](?:\s+(?=\S)|(?=[¿¡(\[\"'“«]|[^\W\d_]{2})|\s*$)|[？；؟؛。]\s*|\.\s+")
#: A bare "also" or "plus" (the group ``adverb``) is mostly an adverb inside a sentence ("the logs
#: also show 502 errors"): it cuts only after a pause, a comma or a dash (the group ``pause``: "...
#: API key - also can it ..."), or before a question word. "AND" in capitals (the group
#: ``operator``) is mostly SQL's or a search's operator, joining conditions of one question: it
#: cuts only before a word opening a question, as a query in capitals or one stressing its second
#: question writes it ("... POLICY AND HOW DO I CANCEL ...", "... metformin AND is there ..."). See
#: _clauses.
_CLAUSES = re.compile(r"(?P<pause>,| [-–—])? \b(?:[Aa]nd also|[Aa]s well as|[Aa]nd|(?P<operator>AND)|(?P<adverb>[Aa]lso|[Pp]lus))\b ")
#: what code holds and prose hardly does: comparisons, assignments, braces, "*", "&&" and "||"
_OPERATOR = re.compile(r"[=<>{}*]|&&|\|\|")
#: a query this share of whose words (two at least; a URL's aside) hold an operator is code, unless
#: prose runs between them (see _looks_like_code), and only "?" before a question of its own ends a
#: question in it: "x = 1; y = 2; z = x + y" was three sub-queries
CODE_SHARE = 1 / 8
#: the most prose words in a row between two operators of code ("a > b", "'open' AND total > 100"):
#: with more, the operators are prose's ("set TOP_K=20 and what does TOP_K_MAX=100 do")
CODE_PROSE_WORDS = 2
#: a word of prose: letters, perhaps joined by an apostrophe or a hyphen, its marks aside; not in
#: capitals ("I" aside), which are rather a keyword of code ("AND", "WHERE")
_PROSE_WORD = re.compile(r"[\"'“(]*([^\W\d_]+(?:['’-][^\W\d_]+)*)[.,;:!?\"'”)]*")
#: in code, a "?" ends a question only at the end or before white space and a word that opens a
#: question (the group ``opener``): a ternary's "?" is followed by an operand ("a > b ? a : b").
#: The operand is read whole, and not as a call: read up to its first "_" or "(", "? is_valid(x)"
#: or "? has(x)" opened a question "is" or "has". Possessive, so that a call is not read again
#: shorter ("can" of "cans(x)"). A contraction's apostrophe ends the word, as a hyphen's compound
#: does not: read with its "'s", "What's" was no opener, and "What is 3 * 4? What's 5 * 6?" one
#: question.
_ASKED = re.compile(r"\?(?:\s+(?P<opener>[^\W\d_]++)(?![\w(-])|\s*$)")
_URL = re.compile(URL)
#: what no cut falls inside: a URL ("?limit=100", not the "?" or full stop after it), a quoted
#: phrase ("salt and pepper"), and parentheses and brackets, which hold code ("for (i = 0; i < n;
#: i++)") or an aside
_QUOTES = r'"[^"]*"|“[^“”]*”|„[^„“”]*[“”]|«[^«»]*»|「[^「」]*」|『[^『』]*』'
_WHOLE = re.compile(rf"{URL}|{_QUOTES}|\([^()]*\)|\[[^\[\]]*\]|\{{[^{{}}]*\}}")
_QUOTED = re.compile(_QUOTES)
#: a short abbreviation that a full stop ends inside a sentence: initials ("U.S", "e.g", "J") or a
#: title ("Dr. Smith"); looked for in the few characters before the stop
_ABBREVIATION = re.compile(r"(?<![\w.])(?:(?P<letter>[^\W\d_])|(?:[^\W\d_]\.)+[^\W\d_]|dr|mrs?|ms|prof|st|vs|etc)$", re.I)
#: a clause opening with one negates the one before ("lung cancer and not about mice"), asks nothing of its own
_NEGATIONS = frozenset({"not", "no", "without", "nor"})
#: a clause opening with one asks a question of its own, however short the one before
_QUESTION_WORDS = frozenset({"how", "what", "why", "when", "where", "which", "who", "whom", "whose"})
#: what opens a question after a "?" in code or after "AND": a question word, or a verb opening a
#: yes-no question ("... tags do? Are they deprecated?")
_QUESTION_OPENERS = _QUESTION_WORDS | {
    "is", "are", "was", "were", "do", "does", "did", "can", "could", "should", "would", "will", "has", "have", "may"}
#: the openers no common acronym spells: in capitals they open a question in any query ("How do I
#: rotate the API key AND HOW much does it cost?"), where "WHO", "CAN", "IS", "DO" open one only in
#: a query in capitals (see _clauses)
_NO_ACRONYM_OPENERS = frozenset({"how", "what", "why", "when", "where", "which", "whom", "whose"})
_FIRST_WORD = re.compile(r"[\w'’-]+")
#: a cue that the query compares: an "and" after it joins the things compared ("the difference
#: between TCP congestion control and UDP flow control"), not two questions
_COMPARISON = re.compile(r"\b(?:between|compar(?:e[ds]?|ing|ison)|vs|versus)\b", re.I)
#: a list's comma, an "and" after it ending the list ("numpy, pandas and scipy"); not one in a number ("1,000")
_LIST_COMMA = re.compile(r",\s")
#: the most words between a comma and an "and" that end a list: a list's item is a name or a short
#: phrase, and a clause after a comma ("After upgrading to Python 3.12, pip fails to install numpy
#: and conda ...") is no list's
_LIST_ITEM_WORDS = 3


def _inside(spans: Sequence[tuple[int, int]], at: int) -> bool:
    """Whether ``at`` falls inside one of ``spans`` (in order, apart)."""
    i = bisect.bisect_right(spans, (at, math.inf)) - 1
    return i >= 0 and spans[i][0] < at < spans[i][1]


def _sentences(text: str, code: bool) -> list[tuple[int, int]]:
    """Where ``text`` is cut: after "?" and ";" as :data:`_BREAK` reads them, and after a full
    stop that a capital of any script follows ("… in 2019. Ötzi …") and that ends no abbreviation
    ("Dr. Smith", "the U.S. Army"); never inside a URL, quotes or brackets. re has no class for
    capitals beyond ASCII, so the capital is checked on the character itself. In ``code`` (see
    :func:`_looks_like_code`) only after a "?" that a question's opening word follows
    (:data:`_ASKED`): "What is 3 * 4? What is 5 * 6?" is two questions."""
    whole = [m.span() for m in _WHOLE.finditer(text)]
    if code:
        asked = []
        for m in _ASKED.finditer(text):
            opener = m.group("opener")
            if opener is None:
                asked.append(m.span())
            elif opener.casefold() in _QUESTION_OPENERS and not _inside(whole, m.start()):
                asked.append((m.start(), m.start("opener")))
        return asked
    cuts = []
    for m in _BREAK.finditer(text):
        if _inside(whole, m.start()):
            continue
        if m.group(0).startswith(".") and (not text[m.end() : m.end() + 1].isupper() or _abbreviated(text, m.start(), m.end())):
            continue
        cuts.append(m.span())
    return cuts


def _abbreviated(text: str, stop: int, after: int) -> bool:
    """Whether the full stop at ``stop`` ends an abbreviation, the next word at ``after``. A lone
    letter is an initial only before a name ("J. Smith", "John F. Kennedy"): before a function
    word a sentence starts ("plan B. Is it cheaper?", "vitamin D. The dose ...")."""
    abbreviation = _ABBREVIATION.search(text, max(0, stop - 8), stop)
    if abbreviation is None or abbreviation.group("letter") is None:
        return abbreviation is not None
    following = _FIRST_WORD.match(text, after)
    return following is None or following.group(0).casefold() not in STOPWORDS


def _clauses(text: str) -> list[tuple[int, int]]:
    """Where ``text`` (single-spaced) is cut into clauses: at "and", "and also", "as well as", at
    "also" or "plus" after a comma or a dash or before a question word (elsewhere one is an adverb
    inside a sentence: "the nginx logs also show 502 errors" was "the nginx logs" and "show 502
    errors"), and at "AND" before a word opening a question (elsewhere an operator); never inside
    a URL, quotes or brackets, and only where the right side asks something of its own: not a
    negation of the left ("and not about mice"), and either a question of its own ("and why …") or
    after a left side of 3 content words at least that neither compares things ("between",
    "compare", "vs") nor ends a list here (a comma, and at most
    :data:`_LIST_ITEM_WORDS` words from it to the "and"). With fewer, the left side is a fragment
    that needs the right one's object: "the causes and symptoms of diabetes" is one question, not
    "the causes"; after a comparison, or at a list's end, the right side is its last item ("install
    numpy, pandas and scipy on windows" was "install numpy, pandas" and "scipy on windows"). Past
    that "and" the list is over, and a later one may cut.

    After any of them, an opener that an acronym spells (all but :data:`_NO_ACRONYM_OPENERS`),
    written in capitals, opens a question only in a query in capitals: among lower case it is the
    acronym ("... efficacy and WHO booster dose guidelines", "... AND CAN FD frame timing"): see
    :func:`_in_capitals`."""
    whole = [m.span() for m in _WHOLE.finditer(text)]
    shouted: bool | None = None  # read once, at the first such opener
    cuts, left, compared, at = [], 0, False, 0
    item: int | None = None  # where the item after the last list comma starts
    for m in _CLAUSES.finditer(text):
        # Read a piece at a time: read over the whole left side at each "and", a long query of
        # them took quadratic time.
        piece = text[at : m.start()]
        left += len(_content_words(piece))
        compared = compared or _COMPARISON.search(piece) is not None
        for c in _LIST_COMMA.finditer(piece):
            if not _inside(whole, at + c.start()):
                item = at + c.end()
        at = m.end()
        if _inside(whole, m.start()):
            continue
        ends_list = item is not None and len(text[item : m.start()].split()) <= _LIST_ITEM_WORDS
        if ends_list:
            item = None
        first = _FIRST_WORD.match(text, m.end())
        opened = first.group(0) if first else ""
        opens = opened.casefold()
        if opened.isupper() and opens in _QUESTION_OPENERS and opens not in _NO_ACRONYM_OPENERS:
            if shouted is None:
                shouted = _in_capitals(text)
            if not shouted:
                opens = ""
        if m.group("adverb") and not m.group("pause") and opens not in _QUESTION_WORDS:
            continue
        if m.group("operator") and opens not in _QUESTION_OPENERS:
            continue
        if opens in _NEGATIONS or ((left < 3 or compared or ends_list) and opens not in _QUESTION_WORDS):
            continue
        cuts.append(m.span())
        left, compared, item = 0, False, None
    return cuts


def _in_capitals(text: str) -> bool:
    """Whether ``text`` holds no word in lower case, its URLs, e-mail addresses and words mixing
    cases aside: a query written in capitals still writes a link, an address or a product as its
    owner does ("... AT https://example.com/login FAILS AND IS THERE ...", "... FOR iPhone AND
    ..."), and one lower-case letter in it kept its "AND IS" from cutting."""
    return not any(w.islower() for w in _FIRST_WORD.findall(ADDRESS.sub(" ", text)))


def _looks_like_code(text: str) -> bool:
    """Whether :data:`CODE_SHARE` of the words of ``text`` (two at least) hold an operator, and no
    more than :data:`CODE_PROSE_WORDS` words of prose run between two of them: a question naming
    settings ("How do I set RETRIEVAL_TOP_K=20 and what does RETRIEVAL_TOP_K_MAX=100 do?") is prose
    about code, and was searched whole."""
    tokens = _URL.sub(" ", text).split()
    operators = [i for i, t in enumerate(tokens) if _OPERATOR.search(t)]
    if len(operators) < 2 or len(operators) < CODE_SHARE * len(tokens):
        return False
    for before, after in zip(operators, operators[1:]):
        run = 0
        for token in tokens[before + 1 : after]:
            run = run + 1 if _prose(token) else 0
            if run > CODE_PROSE_WORDS:
                return False
    return True


def _prose(token: str) -> bool:
    word = _PROSE_WORD.fullmatch(token)
    return word is not None and not (len(word.group(1)) > 1 and word.group(1).isupper())


def _parts(text: str, cuts: Sequence[tuple[int, int]]) -> list[str]:
    """``text`` cut at ``cuts``; a part that says nothing of its own (:func:`_says_something`:
    "And why?") stays attached to the one before, as it was written, and one before the first part
    that does ("- - - ? What is RRF?") to that part: standing alone, "- - -" was searched. So
    every part says something when there are two or more."""
    if not cuts:
        return [text]  # one part, whatever it says: read for nothing, a long query held the loop
    spans: list[tuple[int, int]] = []
    start = 0
    opening: int | None = None  # where the parts saying nothing before the first that does start
    for cut_start, cut_end in [*cuts, (len(text), len(text))]:
        part = text[start:cut_start]
        # Nothing between two cuts, or after the last "?", is no part at all.
        if part.strip(" ,."):
            if _says_something(part):
                spans.append((start if opening is None else opening, cut_start))
                opening = None
            elif spans:
                spans[-1] = (spans[-1][0], cut_start)
            elif opening is None:
                opening = start
        start = cut_end
    if opening is not None:
        spans.append((opening, len(text)))  # no part says anything: they are one
    return [text[a:b] for a, b in spans]


def _key(text: str) -> str:
    """What tells two sub-queries or a rewrite and its query apart: their words, case and the
    punctuation at a word's ends aside. Told apart by case and spacing alone, "What is error
    XK-4471?" and "What is error XK-4471." were both searched, and a rewrite that only dropped the
    query's "?" was embedded as a change. A lone mark ("work ?") is no word."""
    return " ".join(w for w in (w.strip(".,;:!?…") for w in text.casefold().split()) if w)


def _content_words(text: str) -> set[str]:
    """The words of ``text`` that say what it is about: its words and identifiers, case aside,
    without the stop words."""
    return {w.casefold() for w in words(text)} - STOPWORDS


def _a_question(part: str) -> bool:
    """Whether ``part`` of a query can be searched on its own: :func:`_three_words` at least, and
    one that says something (:func:`_says_something`; "the of the" does not)."""
    return _three_words(part) and _says_something(part)


def _three_words(part: str) -> bool:
    """Whether ``part`` holds three words, as ADAPTIVE counts them (each Han or kana character one:
    counted between spaces, a Chinese question was one word, and no Chinese query was ever
    decomposed; a mark is none, and "- - -" was searched)."""
    return len(words(part)) >= 3


def _says_something(text: str) -> bool:
    """Whether ``text`` holds a content word, or an acronym that spells a stop word ("IT" in
    "What is IT"), but not in a text written all in capitals, where every word looks like one.
    Read up to the first such word: read whole, twice, a 64 KiB query held the event loop 0.3 s."""
    lower_case: bool | None = None  # read once, at the first acronym
    for word in iter_words(text):
        if word.casefold() not in STOPWORDS:
            return True
        # A stop word in lower case is none ("it"), and telling so costs a word's checks each.
        if not word.islower() and names_one_thing(word):
            if lower_case is None:
                lower_case = any(ch.islower() for ch in text)
            if lower_case:
                return True
    return False


class NotApplicable(Exception):
    """The technique has nothing to offer for this query: dropped silently."""


class Unavailable(NotApplicable):
    """The technique cannot run in this configuration (HyDE without an LLM): reported as skipped."""


class Analyzer(Protocol):
    name: str

    async def rewrite(self, query: str) -> str: ...

    async def reformulate(self, query: str, feedback: Sequence[str]) -> list[str]: ...

    async def hyde(self, query: str) -> str: ...

    async def decompose(self, query: str) -> list[str]: ...

    def timed_out(self, techniques: Collection[str]) -> None:
        """``techniques`` of one analysis were cancelled for taking too long (a cancellation alone,
        the request's, is not the analyzer's fault)."""


@dataclass(slots=True)
class Analysis:
    rewritten: str | None = None
    reformulations: list[str] = field(default_factory=list)
    hyde: str | None = None
    sub_queries: list[str] = field(default_factory=list)
    #: technique -> why it contributed nothing ("skipped: ...", "timeout", "failed: ...",
    #: "llm_failed_used_classical ..."): all worth reporting
    dropped: dict[str, str] = field(default_factory=dict)
    #: techniques with nothing to offer for this query (a single question, no feedback yet)
    not_applicable: dict[str, str] = field(default_factory=dict)


def load_glossary(path: Path | None) -> dict[str, str]:
    """``abbr = expansion`` lines; blank lines and ``#`` comments ignored. An abbreviation written
    all in capitals is kept so (:class:`ClassicalAnalyzer` matches it in capitals only), any other
    in lower case."""
    if path is None:
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            abbr, expansion = (x.strip() for x in line.split("=", 1))
            if abbr and expansion:
                # Composed, as queries and documents are: a file written decomposed (macOS) never matched.
                abbr = unicodedata.normalize("NFC", abbr)
                out[abbr if abbr.isupper() else abbr.lower()] = unicodedata.normalize("NFC", expansion)
    return out


class ClassicalAnalyzer:
    """No LLM: glossary rewrite, pseudo-relevance feedback, rule-based decomposition; no HyDE."""

    name = "classical"

    def __init__(self, glossary: dict[str, str] | None = None, variants: int = 3) -> None:
        # An abbreviation written in capitals is matched in capitals only: read case-insensitively,
        # "US" and "IT" expanded "contact us about it", and "REST" the verb in "let it rest".
        self._acronyms = {k: v for k, v in (glossary or {}).items() if k.isupper()}
        self._glossary = {k.lower(): v for k, v in (glossary or {}).items() if not k.isupper()}
        self._variants = variants

    def timed_out(self, techniques: Collection[str]) -> None:
        pass  # nothing remote to hold responsible

    async def rewrite(self, query: str) -> str:
        text = " ".join(query.split())
        lowered = text.lower()
        expanded, done = [], set()
        quoted = [m.span() for m in _QUOTED.finditer(text)]
        at = 0
        for token in text.split(" "):
            start, at = at, at + len(token) + 1
            core = token.strip(".,;:!?()\"'")
            core = core if core in self._acronyms else core.lower()
            # A quoted phrase is searched as written: an expansion inside it ('"API (application
            # programming interface) timeout"') was a phrase no document holds.
            expansion = None if _inside(quoted, start + 1) else self._acronyms.get(core) or self._glossary.get(core)
            # Once per abbreviation, and looked at once: a query repeating one grew tenfold, each
            # copy expanded, or searched the whole query again for its expansion.
            if expansion and core not in done and expansion.lower() not in lowered:
                expanded.append(f"{token} ({expansion})")
            else:
                expanded.append(token)
            if expansion:
                done.add(core)
        rewritten = " ".join(expanded)
        # Only white space or a final mark changed: the same words, embedded again for nothing.
        if _key(rewritten) == _key(query):
            raise NotApplicable("nothing to normalize or expand")
        return rewritten

    async def reformulate(self, query: str, feedback: Sequence[str]) -> list[str]:
        """Pseudo-relevance feedback: the query plus terms that the top results share."""
        if not feedback:
            raise NotApplicable("needs the results of a first pass")
        word = _word()
        query_terms = {w.lower() for w in word.findall(query)}
        docs = [Counter(w.lower() for w in word.findall(text)) for text in feedback]
        df = Counter(t for d in docs for t in d)
        scores = {
            t: sum(d[t] for d in docs) * math.log(1 + df[t])
            for t in df
            if t not in query_terms and t not in STOPWORDS and len(t) > 2 and df[t] >= min(2, len(docs))
        }
        ranked = [t for t, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
        if not ranked:
            raise NotApplicable("no shared terms in the feedback")
        return [f"{query} {' '.join(ranked[i : i + 2])}" for i in range(0, min(len(ranked), 2 * self._variants), 2)]

    async def hyde(self, query: str) -> str:
        raise Unavailable("needs an LLM")

    async def decompose(self, query: str) -> list[str]:
        """Split a multi-part question: several sentences/questions, or clauses joined by 'and'."""
        code = _looks_like_code(query)
        parts = [p.strip(" ,") for p in _parts(query, _sentences(query, code))]
        if len(parts) < 2 and code:
            raise NotApplicable("code, not questions")
        if len(parts) < 2:
            # On single spaces: from each start inside a run of them, \s+ took the rest of the run
            # and gave it back a space at a time, quadratic (61 s on the event loop at 64 KB).
            text = " ".join(query.split())
            parts = [p.strip(" ,") for p in _parts(text, _clauses(text))]
        if len(parts) < 2:
            raise NotApplicable("a single question")
        # Each part once, and not one of stop words only ("the of the"): a repeated question was
        # searched twice and weighed double in the sub-queries' fusion.
        kept: dict[str, str] = {}
        for p in parts:
            if _three_words(p):  # each says something (see _parts)
                kept.setdefault(_key(p), p)
        if len(kept) < 2:
            raise NotApplicable("a single question")
        return list(kept.values())[:4]


#: why a technique cut for the request's deadline contributed nothing
DEADLINE_CUT = "timeout (deadline)"


async def analyze(
    analyzer: Analyzer,
    query: str,
    feedback: Sequence[str],
    *,
    timeout_s: float | None,
    total_timeout_s: float,
    time_left_s: float | None = None,
    log_limit: LogLimit | None = None,
) -> Analysis:
    """Run the four techniques concurrently; collect what succeeded, report the rest. With the
    request's deadline ``time_left_s`` away, they get at most half of it: analysis only improves
    a search, which needs the rest. A technique cut for the deadline is not the analyzer's fault.
    ``log_limit``: the application's, which spaces the lines of model failures that no breaker
    logs (None: one of this call's own)."""
    log_limit = log_limit or LogLimit()
    result = Analysis()
    jobs: dict[str, Callable[[], Awaitable[object]]] = {
        "rewrite": lambda: analyzer.rewrite(query),
        "reformulate": lambda: analyzer.reformulate(query, feedback),
        "hyde": lambda: analyzer.hyde(query),
        "decompose": lambda: analyzer.decompose(query),
    }
    wait_s = total_timeout_s if time_left_s is None else min(total_timeout_s, max(0.0, time_left_s / 2))
    # A model call's retry that cannot end before its technique is given up on fails at once.
    with waited_for(wait_s if timeout_s is None else min(timeout_s, wait_s)):
        tasks = {name: asyncio.ensure_future(asyncio.wait_for(job(), timeout_s)) for name, job in jobs.items()}
    by_deadline = wait_s < total_timeout_s
    try:
        _, pending = await asyncio.wait(tasks.values(), timeout=wait_s)
    except BaseException:
        abandon(tasks.values())  # the request was cancelled (its caller went away): so is its analysis
        raise
    abandon(pending)
    timed_out = []
    for name, task in tasks.items():
        if task in pending:
            if by_deadline:
                result.dropped[name] = DEADLINE_CUT
            else:
                result.dropped[name] = "timeout (total)"
                timed_out.append(name)
            continue
        exc = task.exception()
        if isinstance(exc, Reported):
            if isinstance(exc, UsedFallback) and isinstance(exc.__cause__, LlmError):
                log_failure(log, log_limit, f"query analysis: {name}", exc.__cause__, "the classical method answered", key="analysis")
            result.dropped[name] = str(exc)  # reported, but its value is used
            if exc.value is not None:
                _apply(result, name, exc.value)
            continue
        if isinstance(exc, Unavailable):
            result.dropped[name] = f"skipped: {exc}"
        elif isinstance(exc, NotApplicable):
            result.not_applicable[name] = str(exc)
        elif isinstance(exc, asyncio.TimeoutError):
            result.dropped[name] = "timeout"
            timed_out.append(name)
        elif isinstance(exc, LlmError):
            log_failure(log, log_limit, f"query analysis: {name}", exc, "the technique is left out", key="analysis")
            result.dropped[name] = f"failed: {type(exc).__name__}"
        elif exc is not None:
            log.warning("query analysis: %s failed: %s", name, exc)
            result.dropped[name] = f"failed: {type(exc).__name__}"
        else:
            _apply(result, name, task.result())
    if timed_out:
        analyzer.timed_out(timed_out)
    return result


def _apply(result: Analysis, technique: str, value: object) -> None:
    if technique == "rewrite":
        result.rewritten = str(value)
    elif technique == "reformulate":
        result.reformulations = [str(v) for v in value][:5]  # type: ignore[attr-defined]
    elif technique == "hyde":
        result.hyde = str(value)
    else:
        result.sub_queries = [str(v) for v in value][:4]  # type: ignore[attr-defined]


class Reported(Exception):
    """The technique answered, in a way worth reporting: its value (None: it has none) travels
    with the report."""

    def __init__(self, value: object, reason: str) -> None:
        super().__init__(reason)
        self.value = value


class UsedFallback(Reported):
    """The LLM failed; the classical method answered instead."""


#: why a technique's model text was cut: the model wrote past what its max_tokens can hold
RUNAWAY_CUT = "runaway_cut"


_SYSTEM = "You transform search queries for a retrieval system. Answer with the requested text only, no commentary."
_PROMPTS = {
    "rewrite": "Rewrite this search query to be clear and specific, expanding abbreviations. Keep every code, "
    "identifier and quoted phrase as written. One line.\nQuery: {query}",
    "reformulate": "Write {n} different phrasings of this search query, one per line, using synonyms.\nQuery: {query}",
    "hyde": "Write a short passage (3-4 sentences) that would answer this question.\nQuestion: {query}",
    "decompose": "If this question has several parts, split it into 2 to 4 self-contained sub-questions, one per line. "
    "If it has one part, answer NONE.\nQuestion: {query}",
}


#: a list marker ("- ", "* ", "1. ", "2) "), however many; "*" only before a space, not bold's "**"
_LIST_MARKER = re.compile(r"^\s*(?:(?:[-•]|\*(?=\s)|\d+[.)])\s*)+")
_HEADING = re.compile(r"^\s*#{1,6}\s")
#: a whole line in bold or italics, its marker nowhere inside ("__init__ versus __new__" is no emphasis)
_EMPHASIZED = re.compile(r"(\*\*|__|\*)((?:(?!\1).)+)\1")


def _json_lines(text: str) -> list[str] | None:
    """The lines of a text that is JSON as a whole: a list's strings, or those of a one-key
    object's value ({"query": "..."}); None when it is no JSON."""
    if not text.startswith(("{", "[")):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return None
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))
    items = value if isinstance(value, list) else [value]
    return [line for item in items if isinstance(item, str) for line in item.splitlines()]


def _json_framing(line: str) -> bool:
    """Whether ``line`` is JSON, or JSON cut short at its end ("{", '["RRF explained",'): the
    framing of an answer in JSON. A line that only opens with a bracket is text: "[^abc] negated
    character class", "{x!r} conversion flag", "[SOLVED] nginx 502" were dropped as framing."""
    if not line.startswith(("{", "[")):
        return False
    line = line.rstrip(",").rstrip()  # an item of a list written a line each
    try:
        json.loads(line)
    except json.JSONDecodeError as exc:
        # The parser stops at the first character JSON cannot have there: at the line's end, or
        # inside a string never closed, everything before it was JSON.
        return exc.pos >= len(line) or exc.msg.startswith("Unterminated string")
    except (ValueError, RecursionError):  # an integer past Python's digits; nested past the parser's depth
        return True
    return True


def _lines(text: Completion, query: str) -> list[str]:
    """The model's lines without list markers, and without the quotes or the Markdown emphasis
    around a whole line, each once (whatever its case and spacing), leaving out "NONE", the query
    itself, Markdown headings ("### Rewritten query") and lines that end in a colon: a preamble
    ("Here is the rewritten query:") or a heading ("**Sub-questions:**"), which were searched as
    queries. A text ``truncated`` (a Completion cut short) loses its last line, cut too.

    An answer in JSON is read for its strings: {"query": "..."} was searched as the rewrite, and a
    list of five variants as one. A line of JSON in other text (or of JSON cut short) is framing:
    see :func:`_json_framing`."""
    lines = _json_lines(text)
    if lines is None:
        lines = text.splitlines()
        if text.truncated:
            lines = lines[:-1]
    seen = {_key(query)}
    out = []
    for line in lines:
        if _HEADING.match(line):
            continue
        line = _LIST_MARKER.sub("", line).strip()
        if _json_framing(line):
            continue
        if emphasized := _EMPHASIZED.fullmatch(line):
            line = emphasized.group(2).strip()
        if len(line) > 1 and line[0] == line[-1] == '"' and line.count('"') == 2:
            line = line[1:-1].strip()  # the whole line quoted; a quoted phrase at either end keeps its quotes
        key = _key(line)
        if key and line.rstrip(".!").upper() != "NONE" and not line.endswith(":") and key not in seen:
            seen.add(key)
            out.append(line)
    return out


#: a label the model wrote before its line ("Query:", "Rewritten query:", "Sub-question 1:"), as
#: the prompt labels the query: the line is the model's framing, or the prompt echoed
_LABEL = re.compile(
    r"^\W*(?:[^\W\d_][\w-]*\s+){0,2}(?:query|question|sub-?question|rewrite|phrasing|variant|reformulation|passage|answer)s?"
    r"(?:\s+\d+)?\s*:",
    re.I,
)


def _head_words(text: str) -> list[str]:
    """The words of ``text`` as :func:`_key` reads them, but a label's colon kept: "Query:" in the
    prompt is the query's label, and a line starting "Query expansion ..." no echo of it."""
    return [w for w in (w.strip(".,;!?…") for w in text.casefold().split()) if w]


def _prompt_heads(prompt: str) -> list[list[str]]:
    """The first words of each line of ``prompt``, written without the query: a line of the
    answer that starts with them echoes the prompt. Not the query's lines: a multi-line query's
    would be heads, and a sub-question repeating one of them an echo."""
    return [head for line in prompt.splitlines() if (head := _head_words(line)[:4])]


def _echoes(line: str, heads: Sequence[list[str]]) -> bool:
    # Whole words: a head ending "api" is no echo in a line's "apis".
    words = _head_words(line)
    return any(words[: len(head)] == head for head in heads)


def _on_topic(lines: list[str], query: str, prompt: str, *, in_its_words: bool = False) -> list[str]:
    """The ``lines`` that may stand for ``query`` in a search: not the prompt echoed, not behind a
    label, and sharing a word or an identifier with the query (so holding a word at all). Each
    becomes a search, and a rewrite replaces the query in every leg: a chat preamble ("Certainly.",
    "Sure! Here's a clearer version of your query."), the prompt or a lone "?" replaced it.

    ``in_its_words``: in the query's language too, when the line shares only identifiers with it. A
    code or an acronym is written alike in every language: "Comment fonctionne RRF ?" replaced "How
    does RRF work?" in every leg, though no English document asks it so. A query holding stop words
    (English's: :data:`STOPWORDS`) wants a line holding one too; a query of keywords only, any line
    sharing one. Not a word that is no identifier shared: a rewrite spelling out the query's
    acronym ("How does Reciprocal Rank Fusion (RRF) combine several ranked lists?") may share none."""
    heads, wanted = _prompt_heads(prompt), _content_words(query)
    identifiers = identifier_words(query)
    stops = _stop_words(query)

    def about(line: str) -> bool:
        shared = _content_words(line) & wanted
        return bool(shared) and (not in_its_words or bool(shared - identifiers) or not stops or bool(_stop_words(line)))

    return [line for line in lines if not _LABEL.match(line) and not _echoes(line, heads) and about(line)]


def _stop_words(text: str) -> set[str]:
    return {w.casefold() for w in words(text)} & STOPWORDS


def _with_exact_terms(rewrite: str, query: str) -> str:
    """The rewrite, with the query's identifiers and quoted phrases it left out added at its end:
    it replaces the query in every leg, and a code the model dropped or expanded ("E1234", "RRF")
    would no longer be searched for as the documents write it."""
    missing = missing_exact_terms(query, rewrite)
    return f"{rewrite} ({' '.join(missing)})" if missing else rewrite


def _within_bytes(text: str, max_bytes: int) -> str:
    """``text`` within ``max_bytes`` of UTF-8, cut after its last whole word that fits."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    cut = encoded[:max_bytes].decode("utf-8", "ignore")
    return cut[: cut.rfind(" ")].rstrip() if " " in cut else cut


T = TypeVar("T")


def _reported(value: T, cut: bool) -> T:
    """``value``, reported as :data:`RUNAWAY_CUT` when the model's text it came from was cut."""
    if cut:
        raise Reported(value, RUNAWAY_CUT)
    return value


def _nothing(cut: bool, why: str) -> Exception:
    """What a technique raises when none of the model's text is searched: a runaway is reported
    even so (the model misbehaved); otherwise the technique has nothing to offer."""
    return Reported(None, RUNAWAY_CUT) if cut else NotApplicable(why)


@dataclass(frozen=True, slots=True)
class TechniqueModel:
    model: ChatModel
    temperature: float


class LlmAnalyzer:
    """Each technique asks its configured model; when that fails, the classical method answers.

    A technique without a model runs the classical method.
    """

    name = "llm"

    def __init__(
        self, models: dict[str, TechniqueModel], fallback: ClassicalAnalyzer, variants: int = 3, query_max_bytes: int = 65_536
    ) -> None:
        self._models = models
        self._fallback = fallback
        self._variants = variants
        self._query_max_bytes = query_max_bytes

    def timed_out(self, techniques: Collection[str]) -> None:
        """One failure per model, however many of its techniques timed out: they were one
        request's concurrent calls, and four of them must not open a breaker of threshold three."""
        models = {id(tm.model): tm.model for t in techniques if (tm := self._models.get(t)) is not None}
        for model in models.values():
            model.gave_up()

    def _prompt(self, technique: str, query: str) -> str:
        return _PROMPTS[technique].format(query=query, n=self._variants)

    def _own_text(self, technique: str) -> str:
        """What ``technique`` sends the model but the query: the system prompt too, which a model
        echoed as a rewrite, a variant and the HyDE passage's first line."""
        return f"{_SYSTEM}\n{self._prompt(technique, '')}"

    async def _ask(self, technique: str, query: str, classical: Callable[[], Awaitable[object]]) -> tuple[Completion, bool]:
        """The model's text, and whether it ran past what its max_tokens can hold (see
        :data:`CHARS_PER_TOKEN`): a model ignoring max_tokens wrote a 6 MB rewrite, which replaced
        the query in every leg and made the response larger than any client reads. Such a text
        keeps the whole lines within that; the line the cut goes through would be searched as a
        shorter query of its own."""
        tm = self._models[technique]
        max_tokens = 300 if technique == "hyde" else 200
        try:
            answer = await tm.model.complete(_SYSTEM, self._prompt(technique, query), temperature=tm.temperature, max_tokens=max_tokens)
        except Exception as exc:
            try:
                value = await classical()
            except NotApplicable:
                # Its own cause kept: an open breaker's refusal is told by it (refused_by_breaker),
                # and logged at DEBUG where a failure of the model is not.
                raise exc from exc.__cause__
            raise UsedFallback(value, f"llm_failed_used_classical ({type(exc).__name__})") from exc
        text = answer.strip()
        budget = max_tokens * CHARS_PER_TOKEN
        if len(text) <= budget:
            return Completion.of(text, getattr(answer, "truncated", False)), False
        return Completion.of(text[: max(text.rfind("\n", 0, budget + 1), 0)].strip(), False), True

    async def rewrite(self, query: str) -> str:
        if "rewrite" not in self._models:
            return await self._fallback.rewrite(query)
        answer, cut = await self._ask("rewrite", query, lambda: self._fallback.rewrite(query))
        lines = _on_topic(_lines(answer, query), query, self._own_text("rewrite"), in_its_words=True)
        if not lines:
            raise _nothing(cut, "no line of the model's is about the query: it kept it, wandered off, or its one line was cut short")
        # No longer than a query may be: it replaces the query, and is reported as Metrics.rewritten_query.
        return _reported(_within_bytes(_with_exact_terms(lines[0], query), self._query_max_bytes), cut)

    async def reformulate(self, query: str, feedback: Sequence[str]) -> list[str]:
        if "reformulate" not in self._models:
            return await self._fallback.reformulate(query, feedback)
        answer, cut = await self._ask("reformulate", query, lambda: self._fallback.reformulate(query, feedback))
        lines = _on_topic(_lines(answer, query), query, self._own_text("reformulate"))
        if not lines:
            raise _nothing(cut, "no variants")
        return _reported(lines[:5], cut)

    async def hyde(self, query: str) -> str:
        if "hyde" not in self._models:
            return await self._fallback.hyde(query)
        text, cut = await self._ask("hyde", query, lambda: self._fallback.hyde(query))
        # Free-form, but not the prompt echoed: its instruction would be embedded as the passage.
        heads = _prompt_heads(self._own_text("hyde"))
        passage = "\n".join(line for line in text.splitlines() if not _echoes(line, heads)).strip()
        if not passage:
            raise _nothing(cut, "empty passage")
        return _reported(passage, cut)

    async def decompose(self, query: str) -> list[str]:
        if "decompose" not in self._models:
            return await self._fallback.decompose(query)
        answer, cut = await self._ask("decompose", query, lambda: self._fallback.decompose(query))
        lines = [line for line in _on_topic(_lines(answer, query), query, self._own_text("decompose")) if _a_question(line)]
        if len(lines) < 2:
            raise _nothing(cut, "a single question")
        return _reported(lines[:4], cut)
