"""Classical entity recognition: names found by their shape and context, typed by cues.

What counts as a name:

* identifiers: CamelCase (``AuthService``, ``getUser``), snake_case, dotted paths, codes that mix
  letters and digits (``XK-4471``);
* acronyms (``JWT``, ``BM25``, ``mRNA``), unless the line is shouting in capitals; a capitalized
  word longer than five letters (``RESULTS``, ``BACKGROUND``) or a capitalized function word
  (``AND``) is a heading or emphasis, not an acronym;
* runs of capitalized words (``Project Alpha``, ``University of Oslo``, ``Jean-Pierre Dupont``,
  ``O'Brien Team``); a run that opens a
  sentence loses a leading function word ("The", "When"), and a single capitalized word that
  opens a sentence counts only if the document also uses it mid-sentence;
* glossary terms: an abbreviation and its expansion name one entity.

Types come from cues, strongest first: an honorific or a role phrase (PERSON), an
organization word (ORGANIZATION), "project" around or inside the name (PROJECT), a service word
at its end or right after it (SERVICE); otherwise identifiers are IDENTIFIER and the rest CONCEPT.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from retrieval_server.knowledge import EntityType, entity_key

# Letters and digits of any script: names are not all ASCII ("José García", "Sjögren", "Ørsted").
# Python's re has no class for upper- or lower-case letters beyond ASCII, so the shapes below are
# read with str's own case predicates, as is :func:`name_tokens`' apostrophe (the query side reads a
# question with it too). An apostrophe between letters is part of a word ("O'Brien", "D’Souza"),
# unless it opens a possessive or a contraction ("Kafka's", "don't"): without it "O'Brien" was the
# name "Brien".
_NAME_TOKEN = re.compile(r"[^\W_][\w\-.]*(?:['’](?!(?i:s|t|d|ll|re|ve|m)\b)(?=[^\W_])[\w\-.]*)*(?<=[^\W_])")
_APOSTROPHE = re.compile(r"['’]")
_JOINED = re.compile(r"([-'’])")
_ROMAN = re.compile(r"[IVXLC]+")


def name_tokens(text: str) -> list[tuple[int, int, str]]:
    """The words of ``text`` names are made of, as ``(start, end, word)``. An apostrophe joins only
    after a capital ("O'Brien", "D’Souza"): after a lower-case elision ("l'API", "d'AuthService",
    "dall'Università") the name that follows is a word of its own, or it was lost in "l'API"."""
    out: list[tuple[int, int, str]] = []
    for m in _NAME_TOKEN.finditer(text):
        start = m.start()
        for mark in _APOSTROPHE.finditer(text, start, m.end()):
            if text[start].isupper():
                continue
            # The elision ends at its last letter or digit, as a word does.
            end = mark.start()
            while not text[end - 1].isalnum():
                end -= 1
            out.append((start, end, text[start:end]))
            start = mark.end()
        out.append((start, m.end(), text[start : m.end()]))
    return out


# Function words and sentence openers that are capitalized only because they start a sentence.
_OPENERS = frozenset(
    """a an the this that these those it its our we you your they their he she his her i in on at for to from by with
    without of as if when while after before since because although though unlike like during between under over
    also however then now here there once most many several some each every all both other new today yesterday
    tomorrow another any no not only see note please use using why how what which who where whose yes so but and
    or nor yet first second third finally next last please given per via about above below up down more less
    """.split()
)
_CALENDAR = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december""".split()
)
# Acronym-shaped words that are not names.
_NOT_ACRONYMS = frozenset({"OK", "AM", "PM", "TODO", "FAQ", "NB", "PS", "ETC", "IE", "EG", "VS", "AIMS", "MAIN", "NOTE"})
_CONNECTORS = frozenset({"of", "for", "de", "van", "von", "der", "du", "la", "del", "&"})

#: honorifics written short, whose full stop ends no sentence ("Dr. Ada Byron")
HONORIFIC_ABBREVIATIONS = ("Mr", "Mrs", "Ms", "Dr", "Prof")
#: words before a person's name, never a name themselves (see :func:`is_honorific`)
_HONORIFICS = frozenset({*(h.lower() for h in HONORIFIC_ABBREVIATIONS), "professor", "sir", "dame"})
# Runs of white space are possessive (*+, ++): what follows each is not white space, so giving back
# part of one never makes a match, and trying every split of a long run between neighbouring runs
# held _PERSON_AFTER for minutes on 4 KiB of spaces (sentences_of collapses them, but a pattern
# should not rely on it).
_PERSON_BEFORE = re.compile(
    r"(?:\b(?:(?:written|maintained|owned|led|managed|reviewed|approved|created|authored|developed|run|founded)\s++by"
    r"|contact|owner|maintainer|lead|author|manager|engineer|developer|ask|cc|thanks)\s*+:?\s*+)$",
    re.I,
)
_PERSON_AFTER = re.compile(
    r"^(?:\s*+,?\s*+(?:\(|,)?\s*+(?:the\s++)?(?:owner|maintainer|tech lead|lead|manager|engineer|developer|author|architect|director|"
    r"cto|ceo|vp|head)\b|\s++(?:said|says|wrote|writes|leads|led|owns|owned|maintains|maintained|manages|managed|joined|"
    r"reported|approved|noted|explained|argued|announced|asked|answered|reviewed|presented)\b)",
    re.I,
)
_ORG_WORDS = frozenset(
    """team inc corp corporation ltd llc gmbh university institute foundation group department dept lab labs laboratory
    agency association committee council company""".split()
)
_SERVICE_WORDS = (
    "service",
    "services",
    "svc",
    "server",
    "api",
    "gateway",
    "router",
    "proxy",
    "queue",
    "cache",
    "db",
    "database",
    "store",
    "worker",
    "daemon",
    "broker",
    "bus",
    "engine",
    "registry",
    "scheduler",
    "balancer",
    "backend",
)
_SERVICE_AFTER = re.compile(r"^\s+(?:micro)?(?:service|server|api|database|queue|cluster|backend|daemon)\b", re.I)
_PROJECT_WORDS = ("project", "initiative", "program", "programme")
_PROJECT_AROUND = (re.compile(r"\bproject\s+$", re.I), re.compile(r"^\s+project\b", re.I))
#: how far either side of a name its cues are read, in characters: a few words. Read over the whole
#: sentence before each name, one long sentence of names ("Kafka and Kafka and ...") took time as its square.
_CUE_WINDOW = 256

# Votes: how much a cue counts when one name gets different types across its mentions.
CUE, SHAPE, DEFAULT = 3, 2, 1


@dataclass(frozen=True, slots=True)
class Mention:
    start: int
    end: int
    surface: str
    key: str
    entity_type: EntityType
    #: how strongly the context supports ``entity_type`` (CUE > SHAPE > DEFAULT)
    vote: int
    #: the name it stands for, when not its own surface (a glossary expansion stands for its abbreviation)
    canonical: str | None = None


@dataclass(frozen=True, slots=True)
class _Tok:
    start: int
    end: int
    text: str
    kind: str  # "ident", "acronym", "cap", "other"


def _heading_word(tok: str) -> bool:
    """All capitals, but a heading or emphasis rather than an acronym."""
    return tok.isalpha() and tok.isupper() and (len(tok.rstrip("s")) > 5 or tok.lower() in _OPENERS)


def _capitalized(tok: str) -> bool:
    """Capitalized words, maybe joined by hyphens or apostrophes ("Oslo", "García", "Jean-Pierre",
    "O'Brien"): each a capital then lower-case letters, or lower-case letters after a hyphen
    ("Well-known"); a lone capital before an apostrophe ("O'", "D'")."""
    parts = _JOINED.split(tok)
    words, joints = parts[0::2], parts[1::2]
    for i, word in enumerate(words):
        if not word.isalpha():
            return False
        capital = word[0].isupper() and (word[1:] == "" or word[1:].islower())
        if i == 0:
            fits = capital and (len(word) >= 2 or (bool(joints) and joints[0] != "-"))
        else:
            fits = (capital and len(word) >= 2) or (joints[i - 1] == "-" and word.islower())
        if not fits:
            return False
    return True


def is_honorific(word: str) -> bool:
    """Whether ``word`` is an honorific as written ("Dr", "Mr.", "Sir"). In capitals it is an acronym
    ("MS" multiple sclerosis, "DR" disaster recovery, "SIR" the epidemic model), a name like any other."""
    return word.rstrip(".").lower() in _HONORIFICS and not word.isupper()


def _acronym_shaped(tok: str) -> bool:
    """A capital, then capitals or digits, two capitals at least, maybe a plural "s" ("JWT", "BM25",
    "APIs"); not a Roman numeral."""
    body = tok[:-1] if tok.endswith("s") else tok
    return (
        len(body) >= 2
        and body[0].isupper()
        and all(c.isupper() or c.isdigit() for c in body)
        and sum(c.isupper() for c in body) >= 2
        and not _ROMAN.fullmatch(tok)
    )


def _camel(tok: str) -> bool:
    """Letters and digits opening with a letter, with a lower-case letter (maybe then digits) before a capital ("getUser", "oAuth2Client")."""
    if not (tok[0].isalpha() and tok.isalnum()):
        return False
    after_lower = False
    for c in tok:
        if c.isupper() and after_lower:
            return True
        if c.islower():
            after_lower = True
        elif not c.isdigit():
            after_lower = False
    return False


def acronym_singular(tok: str) -> str:
    """A plural acronym's singular ("APIs": "API"), which names the same thing; else ``tok``."""
    return tok[:-1] if tok.endswith("s") and tok[-2:-1].isupper() and _acronym_shaped(tok) else tok


def _real_acronym(tok: str) -> bool:
    """An acronym-shaped word that is one: not a listed non-name, not a heading's word."""
    return tok.rstrip("s") not in _NOT_ACRONYMS and not _heading_word(tok)


def _kind(tok: str) -> str:
    if tok.isalpha() and tok.islower():
        return "other"  # most words of prose: every shape below needs a capital, a digit, "_" or "."
    if "_" in tok and any(c.isalpha() for c in tok):
        return "ident"
    if "." in tok:
        parts = tok.split(".")
        if len(tok) >= 5 and all(p and p[0].isalpha() for p in parts):
            return "ident"
        return "other"
    if _acronym_shaped(tok):
        return "acronym" if _real_acronym(tok) else "other"
    if _camel(tok):
        return "ident"
    has_digit, has_alpha = any(c.isdigit() for c in tok), any(c.isalpha() for c in tok)
    if has_digit and has_alpha and len(tok) >= 3 and (any(c.isupper() for c in tok) or "-" in tok):
        return "ident"
    if "-" in tok and not tok.isupper() and any(_acronym_shaped(p) and _real_acronym(p) for p in tok.split("-")):
        # A compound around an acronym ("NF-κB", "TNF-α", "TNF-alpha") names one thing; in capitals
        # throughout ("DO-NOT") it is a line shouting.
        return "ident"
    if _capitalized(tok):
        return "cap"
    return "other"


def _words(name: str) -> list[str]:
    """A name's words, CamelCase split: "DatabaseSvc" -> ["database", "svc"], "HTTPServer" -> ["http", "server"]."""
    spaced = []
    for i, c in enumerate(name):
        if i and c.isupper():
            before = name[i - 1]
            if before.islower() or before.isdigit() or (before.isupper() and name[i + 1 : i + 2].islower()):
                spaced.append(" ")
        spaced.append(c)
    return [w.lower() for w in re.split(r"[\s_\-.]+", "".join(spaced)) if w]


def shape_type(name: str, kind: str) -> tuple[EntityType, int]:
    """The type a name's own words suggest."""
    words = _words(name)
    if words and (words[-1] in _ORG_WORDS or words[0] in ("university", "department")):
        return EntityType.ORGANIZATION, SHAPE
    if words and (words[0] in _PROJECT_WORDS or words[-1] in _PROJECT_WORDS):
        return EntityType.PROJECT, SHAPE
    if words and words[-1] in _SERVICE_WORDS and len(words) > 1:
        return EntityType.SERVICE, SHAPE
    if kind == "ident":
        return EntityType.IDENTIFIER, DEFAULT
    return EntityType.CONCEPT, DEFAULT


class MentionFinder:
    """Finds the names in one sentence. ``glossary`` maps abbreviations (lower case) to expansions."""

    def __init__(self, glossary: Mapping[str, str] | None = None) -> None:
        self._abbrs: dict[str, str] = {}
        phrases: dict[str, str] = {}
        for abbr, expansion in (glossary or {}).items():
            key = entity_key(abbr)
            if not key:
                continue
            self._abbrs[abbr.lower()] = key
            phrases[expansion.lower()] = key
        self._phrase_key = phrases
        self._phrases = (
            re.compile(r"\b(?:" + "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True)) + r")\b", re.I)
            if phrases
            else None
        )

    def glossary_name(self, key: str) -> str | None:
        """The abbreviation a glossary key was written as (upper-cased when it is a plain word)."""
        for abbr, k in self._abbrs.items():
            if k == key:
                return abbr.upper() if abbr.isalpha() and len(abbr) <= 6 else abbr
        return None

    def find(self, sentence: str) -> tuple[list[Mention], list[Mention]]:
        """``(mentions, openers)``: the names in ``sentence``, and single capitalized words that open
        it (names only if the document also uses them mid-sentence)."""
        out: list[Mention] = []
        taken: list[tuple[int, int]] = []
        if self._phrases is not None:
            for m in self._phrases.finditer(sentence):
                key = self._phrase_key[m.group(0).lower()]
                mention = self._typed(sentence, m.start(), m.end(), m.group(0), key, "glossary")
                out.append(dataclasses.replace(mention, canonical=self.glossary_name(key)))
                taken.append((m.start(), m.end()))
        toks = [
            _Tok(start, end, word, _kind(word))
            for start, end, word in name_tokens(sentence)
            if not taken or not any(a <= start < b for a, b in taken)
        ]
        letters = [t for t in toks if any(c.isalpha() for c in t.text)]
        shouting = len(letters) >= 3 and sum(t.text.isupper() for t in letters) > len(letters) / 2
        title_case = len(letters) >= 3 and sum(t.kind in ("cap", "acronym") or t.text.lower() in _CONNECTORS for t in letters) == len(letters)
        # A heading that runs into the sentence ("BACKGROUND Amyloid plaques ...") does not open it.
        first_word = next((i for i, t in enumerate(toks) if any(c.isalpha() for c in t.text) and not _heading_word(t.text)), -1)
        openers: list[Mention] = []
        i = 0
        while i < len(toks):
            t = toks[i]
            abbr_key = self._abbrs.get(t.text.lower())
            if abbr_key and (any(c.isupper() for c in t.text) or any(c.isdigit() for c in t.text)):
                out.append(self._typed(sentence, t.start, t.end, t.text, abbr_key, "glossary"))
                i += 1
                continue
            if t.kind == "ident":
                out.append(self._typed(sentence, t.start, t.end, t.text, entity_key(t.text), "ident"))
                i += 1
                continue
            if t.kind == "acronym":
                if not shouting:
                    out.append(self._typed(sentence, t.start, t.end, t.text, entity_key(acronym_singular(t.text)), "acronym"))
                i += 1
                continue
            if t.kind != "cap":
                i += 1
                continue
            # A run of capitalized words, joined by spaces and lower-case connectors ("of", "de").
            j = i + 1
            while j < len(toks):
                gap = sentence[toks[j - 1].end : toks[j].start]
                if gap.strip():
                    break
                if toks[j].kind == "cap":
                    j += 1
                elif toks[j].text in _CONNECTORS and j + 1 < len(toks) and toks[j + 1].kind == "cap" and not sentence[toks[j].end : toks[j + 1].start].strip():
                    j += 2
                else:
                    break
            run = toks[i:j]
            i = j
            at_start = run[0] is toks[first_word] if first_word >= 0 else False
            # An honorific is not part of the name it comes before: "Contact Mr. Smith" made "Contact Mr" a name.
            while run and (run[0].text.lower() in _OPENERS or is_honorific(run[0].text)):
                run = run[1:]
                at_start = False
            while run and (run[-1].text.lower() in _OPENERS or run[-1].text.lower() in _CONNECTORS or is_honorific(run[-1].text)):
                run = run[:-1]
            if not run or title_case or len(run) > 4:
                continue
            if len(run) == 1 and (run[0].text.lower() in _CALENDAR or run[0].text.lower() in _OPENERS):
                continue
            surface = sentence[run[0].start : run[-1].end]
            mention = self._typed(sentence, run[0].start, run[-1].end, surface, entity_key(surface), "cap")
            if at_start and len(run) == 1:
                openers.append(mention)
            else:
                out.append(mention)
        out.sort(key=lambda m: m.start)
        return out, openers

    def _typed(self, sentence: str, start: int, end: int, surface: str, key: str, kind: str) -> Mention:
        surface = re.sub(r"'s$", "", surface)
        lo = max(0, start - _CUE_WINDOW)
        after = sentence[end : end + _CUE_WINDOW]
        words = sentence[lo:start].split()
        if words and lo and not sentence[lo - 1].isspace() and not sentence[lo].isspace():
            words = words[1:]  # the window cut it: only its end, which may look like an honorific
        entity_type, vote = shape_type(surface, "ident" if kind == "ident" else "name")
        if kind == "cap" and ((words and is_honorific(words[-1])) or _PERSON_BEFORE.search(sentence, lo, start) or _PERSON_AFTER.search(after)):
            if vote < SHAPE or entity_type is EntityType.CONCEPT:
                entity_type, vote = EntityType.PERSON, CUE
        elif _PROJECT_AROUND[0].search(sentence, lo, start) or _PROJECT_AROUND[1].search(after):
            entity_type, vote = EntityType.PROJECT, CUE
        elif _SERVICE_AFTER.search(after) and entity_type in (EntityType.CONCEPT, EntityType.IDENTIFIER):
            entity_type, vote = EntityType.SERVICE, CUE
        return Mention(start, start + len(surface), surface, key, entity_type, vote)
