"""Classical relation extraction: typed relations from the words between two names in a sentence.

Names joined only by list words ("A, B and C") form a group; the text between two neighbouring
groups decides the relation: "X depends on Y", "Y is used by X" (passive: the direction turns),
"X, which calls Y", "X and Y both depend on Z", "X, our billing API, uses Y". A clause opened by
"and" ("X depends on Y and uses Z") keeps the subject of the clause before it. Negated phrases
("no longer depends on", "does not use") and negated subjects ("Neither X nor Y uses Z", "None of
X and Y call Z") state nothing. Names that share a sentence without a
stated relation co-occur, the weakest relation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval_server.ingest.entities import HONORIFIC_ABBREVIATIONS, Mention
from retrieval_server.knowledge import RelationType

R = RelationType
# Runs of white space are possessive (*+, ++): each is followed by something that is not white
# space, so giving back part of one never makes a match, and trying every split of a long run
# between neighbouring runs took seconds on 4 KiB of spaces (sentences_of collapses them, but a
# pattern should not rely on it).
_ADVERBS = r"(?:(?:also|directly|still|now|heavily|currently|only|mainly|primarily|mostly|already|indirectly|both|all|each|in turn|always|usually)\s++)*"
_NOUNS = r"(?:(?:service|services|project|projects|team|teams|module|modules|library|component|api|app|system|job|tool)\s++)?"
_DET = r"(?:\s++(?:the|a|an|both|either|its|their|our))*"
# before a person's name, and not part of it ("is maintained by Dr. Ada Byron")
_HONORIFIC = rf"(?:\s*+\b(?:{'|'.join(HONORIFIC_ABBREVIATIONS)})\.?)?"

# (relation, phrase, passive): a passive phrase names the target first ("Y is used by X").
_PHRASES: list[tuple[RelationType, str, bool]] = [
    (R.DEPENDS_ON, r"(?:is|are) depended (?:up)?on by|(?:is|are) (?:required|needed) by|(?:is|are) a dependency of", True),
    (R.USES, r"(?:is|are) (?:used|consumed|read|queried) by", True),
    (R.CALLS, r"(?:is|are) (?:called|invoked) by", True),
    (R.EXTENDS, r"(?:is|are) extended by", True),
    (R.IMPLEMENTS, r"(?:is|are) implemented by", True),
    (R.PART_OF, r"includes|include|contains|contain|consists of|is composed of|comprises|(?:is|are) made up of", True),
    (R.MAINTAINS, r"(?:is|are|was|were) (?:maintained|owned|led|managed|run|built|developed|written) by", True),
    (R.DEPENDS_ON, r"(?:depends|depend|relies|rely|is dependent|are dependent|builds|build) (?:up)?on|requires|require|needs|need", False),
    (
        R.USES,
        r"uses|use|(?:is|are) using|makes? use of|(?:is|are) built (?:on|with)|runs on|run on|stores? (?:its |their )?data in|"
        r"reads? from|writes? to|connects? to|publishes to|consumes|subscribes to|caches in|authenticates (?:with|against|through)|"
        r"(?:is|are) backed by",
        False,
    ),
    (R.CALLS, r"calls|call|invokes|invoke|sends? requests to|queries|query|talks to|notifies|forwards (?:requests )?to", False),
    (R.EXTENDS, r"extends|extend|inherits from|(?:is|are) (?:a )?subclass(?:es)? of|(?:is|are) a fork of", False),
    (R.IMPLEMENTS, r"implements|implement", False),
    (R.PART_OF, r"(?:is|are) (?:a |an )?(?:part|component|module|subsystem|member) of|belongs? to", False),
    (R.MAINTAINS, r"maintains|maintain|owns|own|leads|lead|manages|manage|runs|built|developed|wrote", False),
]
_NEGATION = re.compile(r"\b(?:not|no longer|never|n't|nor|without|instead of|rather than|replaced|stopped|removed)\b", re.I)
# "nor" joins a list too, so that "Neither X nor Y" is one subject that the negation covers whole.
_LIST = re.compile(r"\s*+(?:,|&|/|\band\b|\bor\b|\bnor\b|\bas well as\b)+\s*+(?:(?:and|or|nor)\s++)?(?:the\s++)?" + _HONORIFIC + r"\s*+", re.I)
# A negation inside the subject's list ("Neither X nor Y"), or right ahead of it in its clause:
# one further ahead is another phrase's ("There is no doubt that X calls Y").
_NEGATED_SUBJECT = re.compile(r"\b(?:neither|nor|none\s+of|no|not)\b", re.I)
_NEGATED_LEAD = re.compile(r"\b(?:neither|none\s+of|no|not)\s+(?:(?:the|our|a|an|its|their)\s+)?$", re.I)
_CLAUSE_BREAK = re.compile(r"[,;:()]")
# Optional lead-in: "service", ", which", ", our billing API," (an appositive), "and".
_LEAD = r"^\s*+(?:'s\s++)?" + _NOUNS + r"(?:,[^,;:()]{1,60},\s*+|\([^()]{1,60}\)\s*+)?(?:,?\s*+(?:which|that|who)\s++)?" + _ADVERBS
_COMPILED = [
    (rel, re.compile(_LEAD + r"(?:" + phrase + r")" + _DET + _HONORIFIC + r"\s*+$", re.I), passive) for rel, phrase, passive in _PHRASES
]
_AND_CLAUSE = re.compile(r"^\s*+,?\s*+(?:and|but)\s++", re.I)
_APPOSITIVE = re.compile(r",\s*(?:our|the|a|an|its|their|his|her|my|your)\s[^,;:()]{1,60},", re.I)


#: Names of one sentence that its relations are read between, in order of appearance: pairs grow as
#: the square, and a list of 200 names (what a model may answer for an inventory) made 19,900
#: co-occurrences out of one sentence, where 12 make at most 66.
MAX_NAMES_PER_SENTENCE = 12


@dataclass(frozen=True, slots=True)
class SentenceRelation:
    source: str
    target: str
    relation: RelationType


def _relation(gap: str) -> tuple[RelationType, bool] | None:
    if _NEGATION.search(gap) or len(gap) > 120:
        return None
    for rel, pattern, passive in _COMPILED:
        if pattern.match(gap):
            return rel, passive
    return None


def _negated_subject(sentence: str, group: Sequence[Mention], prev_end: int | None) -> bool:
    """Whether a negation opens the clause of the group as its subject ("Neither X nor Y ...").

    prev_end is where the name before the group ends (None for the sentence's first group). Text
    from there without a clause break is the phrase whose object the group is ("X does not use Y,
    which calls Z"): its negation was that phrase's, and the group's own clause opens at the group.
    """
    before = sentence[prev_end or 0 : group[0].start]
    breaks = [m.end() for m in _CLAUSE_BREAK.finditer(before)]
    lead = before[breaks[-1] :] if breaks else before if prev_end is None else ""
    inside = (sentence[a.end : b.start] for a, b in zip(group, group[1:], strict=False))
    return bool(_NEGATED_LEAD.search(lead)) or any(_NEGATED_SUBJECT.search(text) for text in inside)


def relations_in_sentence(sentence: str, mentions: Sequence[Mention]) -> list[SentenceRelation]:
    """Typed relations the sentence states, then co-occurrence for every other pair of names in it."""
    mentions = list(mentions)
    # The first names, distinct, as co_occurrences counts them: cut by mention, one name repeated
    # twelve times left no room for the next. A later name's mentions still part the sentence, so
    # that the text read between two names is never one that holds a third.
    named = set(list(dict.fromkeys(m.key for m in mentions))[:MAX_NAMES_PER_SENTENCE])
    if len(named) < 2:
        return []
    # Names inside an appositive ("X, our billing API, uses Y") describe X; the clause runs past them.
    chain: list[Mention] = []
    skip_until = -1
    for m in mentions:
        if m.start < skip_until:
            continue
        chain.append(m)
        aside = _APPOSITIVE.match(sentence, m.end)
        skip_until = aside.end() - 1 if aside else -1
    groups: list[list[Mention]] = [[chain[0]]]
    gaps: list[str] = []
    for prev, cur in zip(chain, chain[1:], strict=False):
        gap = sentence[prev.end : cur.start]
        if _LIST.fullmatch(gap) or not gap.strip():
            groups[-1].append(cur)
        else:
            groups.append([cur])
            gaps.append(gap)
    typed: list[SentenceRelation] = []
    subject: list[Mention] | None = None
    for k, gap in enumerate(gaps):
        left, right = groups[k], groups[k + 1]
        clause = _AND_CLAUSE.match(gap)
        found = _relation(gap[clause.end() :] if clause else gap)
        if found is None:
            subject = None
            continue
        rel, passive = found
        if clause:
            if subject is None:
                continue  # "... and uses Z" after a clause we could not read: its subject is unknown
            left = subject  # "X depends on Y and uses Z": X uses Z
        elif _negated_subject(sentence, left, groups[k - 1][-1].end if k else None):
            subject = None  # "Neither X nor Y uses Z and calls W": the and-clause is negated too
            continue
        sources, targets = (right, left) if passive else (left, right)
        # By name: a list of a few names repeated would otherwise pair its mentions, as the square.
        for s in dict.fromkeys(m.key for m in sources if m.key in named):
            for t in dict.fromkeys(m.key for m in targets if m.key in named):
                if s != t:
                    typed.append(SentenceRelation(s, t, rel))
        subject = left
    # Once per sentence, not per clause: the graph sums the weight of each one, and a sentence
    # repeating "X uses Y" 200 times gave that edge any weight it liked.
    typed = list(dict.fromkeys(typed))
    return typed + co_occurrences([m.key for m in mentions], typed)


def co_occurrences(keys: Sequence[str], stated: Sequence[SentenceRelation]) -> list[SentenceRelation]:
    """Every pair of the sentence's first names that no stated relation links; undirected, stored sorted."""
    related = {frozenset((r.source, r.target)) for r in stated}
    # Capped here too, as distinct names: the LLM extractor's mentions are the model's names, uncapped.
    unique = list(dict.fromkeys(keys))[:MAX_NAMES_PER_SENTENCE]
    return [
        SentenceRelation(*sorted((a, b)), R.CO_OCCURS)
        for i, a in enumerate(unique)
        for b in unique[i + 1 :]
        if frozenset((a, b)) not in related
    ]
