"""Answers for GENERATION requests, whose sentences cite the returned contexts as [n].

With a chat model: a grounded prompt (numbered contexts and tool results, "answer only from
these, cite each sentence, or say NOT_ANSWERABLE"), streamed token by token to a streaming
caller. The answer is then checked: a citation that points at no returned context is removed
and reported (``answer:invalid_citation_removed``), as is every one of a direct answer; an
answer that cites nothing although it had contexts to cite falls back to the extractive answer
(``answer:uncited_used_extractive``).

Without one (or when the model fails): an extractive answer, the contexts' sentences that best
support the question (ranked by the cross-encoder when one is configured, else by cosine with
the query embedding), each cited, plus what the tools found. When nothing supports an answer,
the answer says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from retrieval_server.backends.llm import ChatModel, Completion, log_failure, waited_for
from retrieval_server.backends.reranker import scores_reporting
from retrieval_server.domain import RetrievedContext
from retrieval_server.ingest.chunker import STOP_ALONE, split_sentences
from retrieval_server.knowledge import Answer, AnswerSentence, Citation, Route, ToolResult
from retrieval_server.workflow.sentences import CITATION as _CITATION, Sentence, sentences_of_contexts, uncited
from retrieval_server.workflow.state import QueryState, WorkflowDeps
from retrieval_server.workflow.model_text import CHARS_PER_TOKEN, whole_sentences, within_budget
from retrieval_server.workflow.time_limit import Limit

log = logging.getLogger(__name__)

NOT_ANSWERABLE = "NOT_ANSWERABLE"
UNSUPPORTED = "The documents I can read do not answer this question."
DIRECT = (
    "I answer questions about the indexed documents. Ask about a service, a project or a topic they cover, "
    "or ask me to look up what is known about an entity, count or analyze its dependencies, or summarize what I find."
)
_STOP = re.compile(rf"[.!?]|{STOP_ALONE}")
#: the sentinel as a model writes it, not only alone: "**NOT_ANSWERABLE**", "Answer: NOT_ANSWERABLE",
#: a sentence then the sentinel; each was taken for the answer, supported, when a tool had run.
#: Spelled as the prompt spells it: "the status code not_answerable" is an answer's words.
_SAYS_NOT_ANSWERABLE = re.compile(rf"(?<![A-Za-z0-9_]){NOT_ANSWERABLE}(?![A-Za-z0-9_])")
_LABEL = r"(?:(?i:(?:final[\s*`~]+)?answer)[\s*`~]*:[\s*`~]*)?"
#: a reply that opens with the sentinel, its markdown and an "Answer:" or "Final answer:" label
#: aside: the verdict, whatever follows ("NOT_ANSWERABLE - context [1] covers sign-in only", which
#: cites what the model read and was taken for an answer whose text was the sentinel)
_OPENS_NOT_ANSWERABLE = re.compile(rf"[\s*`#>~]*{_LABEL}{NOT_ANSWERABLE}(?![A-Za-z0-9_])")
#: a list item's marker ("- ", "+ ", "2. ", "2) "; "* " is markdown's)
_LIST_MARKER = r"(?:[-+]|\d{1,3}[.)])"
#: a sentence that is the sentinel, its markdown ("**NOT_ANSWERABLE**", "> NOT_ANSWERABLE"), a list
#: item's marker ("- NOT_ANSWERABLE" was kept, supported), quotes, a label and a final stop aside
_SENTINEL_SENTENCE = re.compile(
    rf"[\s*`#>~“”\"']*(?:{_LIST_MARKER}[\s*`#>~“”\"']*)?{_LABEL}[“”\"']*{NOT_ANSWERABLE}[\s*`~“”\"']*[.!。！]?[\s*`~“”\"']*"
)
#: a numbered item's marker that the sentences were split after ("2." of "2. NOT_ANSWERABLE")
_BARE_NUMBER = re.compile(r"\d{1,3}[.)]")

_GROUNDED_SYSTEM = (
    "You answer questions using only the numbered contexts and the tool results given. After every sentence that uses a "
    "context, cite it as [n] (several: [1][3]). Do not use outside knowledge. If the contexts and tool results do not "
    f"contain the answer, reply exactly {NOT_ANSWERABLE}."
)
_DIRECT_SYSTEM = (
    "You are the assistant of a document search service. Answer greetings and questions about yourself briefly; "
    "do not state facts about the documents."
)


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    answer: Answer
    degraded: tuple[str, ...] = ()


def parse_cited(text: str, contexts: Sequence[RetrievedContext]) -> tuple[list[AnswerSentence], int]:
    """The answer's sentences with their valid citations, and how many citations pointed nowhere.

    A citation written after a sentence's full stop and a space ("... fails. [2]") belongs to that
    sentence, unless the answer's first sentence opens with one ("[1] AuthSvc ...") and none ends a
    sentence: then each marker belongs to the sentence it opens. One written against the stop
    ("... fails.[2] Next") ends no sentence: it cites the sentence it is in.
    """
    return _parsed(text, len(contexts))


#: contexts enough for every marker to point at one: a marker has at most four digits (CITATION)
_EVERY_MARKER = 9999


def as_checked(text: str) -> tuple[str, int]:
    """A model's ``text`` as the citation check renders it when it keeps all of it, every marker
    valid: its sentences on one line, "fails. [2]" as "fails [2].", "[1, 3]" as "[1] [3]"; and how
    many markers the check takes out whatever the contexts ("[0]"). A final Answer.text that
    differs from this text, or a text the check took a marker from, replaced the text streamed."""
    sentences, invalid = _parsed(text, _EVERY_MARKER)
    return render(sentences), invalid


_LEADING_MARKERS = re.compile(r"^(?:\s*\[\d{1,4}(?:\s*[,;]\s*\d{1,4})*\])+")
#: a marker that ends its sentence, before its stop or with none ("sign-in [1]."); one before a
#: closing parenthesis is inside its sentence ("sign-in (see also [2]).")
_MARKERS_ENDING = re.compile(r"\[\d{1,4}(?:\s*[,;]\s*\d{1,4})*\][^\w)]*$")


def _leading_style(parts: Sequence[str]) -> bool:
    """Whether each marker opens the sentence it cites ("[1] AuthSvc ... [2] PaymentRouter ..."):
    moved back, each was given to the sentence before it. An answer opening with a marker may
    still cite as sentences end ("[1] and [2] agree ... Redis. [2] ... LedgerDB. [3]"): then its
    markers were each given to the sentence after theirs."""
    if not parts or not _LEADING_MARKERS.match(parts[0]) or _LEADING_MARKERS.fullmatch(parts[-1]):
        return False
    return not any(_MARKERS_ENDING.search(p) and not _LEADING_MARKERS.fullmatch(p) for p in parts)


def _parsed(text: str, n_contexts: int) -> tuple[list[AnswerSentence], int]:
    sentences: list[AnswerSentence] = []
    invalid = 0
    # A marker against a stop ("approx.[1] 300", "sign-in.[1] PaymentRouter") ends no sentence: only
    # the words tell an abbreviation's stop from a sentence's, and each rule read from the letters
    # around it (a capital after it, a one-letter word before it) split some of either wrongly.
    parts = split_sentences(text)
    leading_style = _leading_style(parts)
    for raw in parts:
        lead = _LEADING_MARKERS.match(raw)
        # Leading style: only a run with no text after it goes back.
        if lead and sentences and (not leading_style or not raw[lead.end() :].strip()):
            moved, raw = lead.group(0), raw[lead.end() :].strip()
            prev = sentences[-1]
            extra, bad = _markers(moved, n_contexts)
            invalid += bad
            sentences[-1] = AnswerSentence(prev.text, tuple(dict.fromkeys([*prev.citations, *extra])))
            if not raw:
                continue
        cites, bad = _markers(raw, n_contexts)
        invalid += bad
        clean = " ".join(_CITATION.sub("", raw).split())
        if clean:
            sentences.append(AnswerSentence(clean, tuple(dict.fromkeys(cites))))
    return sentences, invalid


def _markers(text: str, n_contexts: int) -> tuple[list[int], int]:
    valid, invalid = [], 0
    for run in _CITATION.finditer(text):
        for part in re.findall(r"\d+", run.group(0)):
            k = int(part)
            if 1 <= k <= n_contexts:
                valid.append(k)
            else:
                invalid += 1
    return valid, invalid


def render(sentences: Sequence[AnswerSentence]) -> str:
    """The sentences with their markers before the closing punctuation: "... Alice Chen [1]."."""
    out = []
    for s in sentences:
        marks = "".join(f" [{c}]" for c in s.citations)
        body, end = (s.text[:-1], s.text[-1]) if _STOP.fullmatch(s.text[-1:]) else (s.text, "")
        out.append(body + marks + end)
    return " ".join(out)


def citations_for(sentences: Sequence[AnswerSentence], contexts: Sequence[RetrievedContext]) -> tuple[Citation, ...]:
    used = sorted({c for s in sentences for c in s.citations})
    return tuple(
        Citation(k, contexts[k - 1].parent.parent_chunk_id, contexts[k - 1].document.document_id, contexts[k - 1].document.title)
        for k in used
    )


def _numbered(contexts: Sequence[RetrievedContext], tools: Sequence[ToolResult]) -> str:
    parts = ["Contexts:"] + [
        f"[{i}] ({c.document.title or c.document.document_id}) {' '.join(c.parent.content.split())}" for i, c in enumerate(contexts, 1)
    ]
    if not contexts:
        parts.append("(none)")
    if tools:
        parts.append("Tool results:")
        for t in tools:
            body = json.dumps(t.result, default=str)[:2000] if t.success else f"failed: {t.error}"
            parts.append(f"- {t.name}({json.dumps(dict(t.arguments), default=str)}): {body}")
    return "\n".join(parts)


#: degradation tag of an answer the model said NOT_ANSWERABLE to although a tool answered: the tools' summaries
NOT_ANSWERABLE_USED_TOOLS = "answer:not_answerable_used_extractive"
#: degradation tag of a model's answer that said NOT_ANSWERABLE for part of the question, as a sentence
#: of its own beside sentences citing the contexts: the answer is those, the sentinel's sentences left out
PARTLY_NOT_ANSWERABLE = "answer:partly_not_answerable"
#: degradation tag of an answer written extractively because the request's deadline left the model no time
DEADLINE_USED_EXTRACTIVE = "answer:deadline_used_extractive"


class _OutOfTime(Exception):
    """The model was still writing when its time was up: the request's deadline, or ``ANSWER_TIMEOUT_S``.

    The caller's deadline is the caller's budget, not a verdict on the model: like a cancellation,
    it leaves the model's circuit breaker as it was (a caller asking for 50 ms must not open the
    breaker for every other caller). The operator's limit is the model's failure."""

    def __init__(self, within: Limit) -> None:
        super().__init__(f"the {'deadline' if within.by_deadline else 'answer timeout'} came after {within.seconds:.3f} s")
        self.by_deadline = within.by_deadline


async def _ask(
    chat: ChatModel, system: str, prompt: str, state: QueryState, deps: WorkflowDeps, temperature: float, within: Limit, sent: list[str],
    degraded: list[str], sentinel: Callable[[str], bool] | None,
) -> str:
    """The model's text, streamed to a streaming caller as it arrives (each piece sent is added to
    ``sent``), within ``within`` (past the request's deadline the caller is gone, and with it
    everything retrieved), and within what ``ANSWER_MAX_TOKENS`` can hold (``answer:runaway_cut``).
    ``sentinel``: whether a reply is the model's NOT_ANSWERABLE, for a prompt that asks for it."""
    max_tokens = deps.settings.answer_max_tokens
    limit = asyncio.timeout(within.seconds)
    try:
        # A model call's retry whose backoff would end past the limit is not started (see LlmRouter.decide).
        with waited_for(within.seconds):
            async with limit:
                if state.events is None:
                    text, over = within_budget(await chat.complete(system, prompt, temperature=temperature, max_tokens=max_tokens), max_tokens)
                else:
                    tokens = chat.stream(system, prompt, temperature=temperature, max_tokens=max_tokens)
                    text, over = await _streamed(tokens, state.events, sent, max_tokens * CHARS_PER_TOKEN, sentinel)
    except TimeoutError as exc:
        if not limit.expired():
            raise
        if not within.by_deadline:
            chat.gave_up()
        raise _OutOfTime(within) from exc
    if over:
        degraded.append(RUNAWAY)
    return text


#: degradation tag of a model's text cut where it ran past what ANSWER_MAX_TOKENS can hold: the
#: model ignored max_tokens (see CHARS_PER_TOKEN)
RUNAWAY = "answer:runaway_cut"


def _prefixes(word: str) -> str:
    return "|".join(re.escape(word[:k]) for k in range(len(word), 0, -1))


#: the end of a reply that may open NOT_ANSWERABLE, markdown, a list item's marker where a line
#: starts (elsewhere "TLS 1.2. NOT_ANSWERABLE" lost its "2.") and a label before it ("**NOT_ANSW",
#: "- NOT", "2.", "Answer: NOT", "**Final answ"), read as
#: _SAYS_NOT_ANSWERABLE reads the sentinel and _LABEL the label: spelled so, as a word ("Not
#: answerable" and "NOT ANSWERABLE" were held back until the reply ended). A label held back only
#: to the sentinel streamed "**Final answer:" before the stand-in was to replace the reply, which
#: was then never sent; a marker, "- AuthSvc ... [1].\n-" before the sentinel's item.
_OPENING = re.compile(
    rf"(?:[\s*`#>~]+|(?<![A-Za-z0-9_]))(?:(?<=\n)[ \t>*]*(?:{_LIST_MARKER}|\d{{1,3}}\Z)(?:[ \t*`#>~]+|\Z))?(?:"
    rf"(?P<label>(?i:(?:final[\s*`~]+)?(?:answer[\s*`~]*(?::[\s*`~]*)?|{_prefixes('answe')})|final[\s*`~]*|{_prefixes('fina')}))"
    rf"|{_LABEL}(?P<word>{_prefixes(NOT_ANSWERABLE)}))?\Z"
)
#: how far before the end of what is held an opening may start: the sentinel, a label and markdown
#: around them ("**Final answer:** NOT_ANSWERABLE")
_OPENING_REACH = 4 * len(NOT_ANSWERABLE)


async def _streamed(
    tokens: AsyncIterator[str], events: Callable[[str], None], sent: list[str], budget: int, sentinel: Callable[[str], bool] | None
) -> tuple[Completion, bool]:
    """The streamed text, each piece sent on as it comes, and whether it ran past ``budget``
    characters: then the stream is closed (which ends the model's call) and the text is a cut one.

    With a ``sentinel`` to look for, the end of the text that may open NOT_ANSWERABLE is held back
    until it does not, and once the reply says it, the rest with it: the sentinel is the prompt's
    word to this server, and a caller shown it read it as the answer (after other words too, which
    are sent). What is held is sent at the end unless the reply is the sentinel, or the stream was
    cut inside it ("NOT_ANSW")."""
    truncated = over = False
    size = 0
    text: list[str] = []
    held = ""
    said = opened = False
    # What precedes what is held: the last character sent, a line's start before the first (the
    # opening reads a list item's marker only where a line starts, the sentinel only as a word).
    before = "\n"

    def send(piece: str) -> None:
        nonlocal before
        before = piece[-1]
        sent.append(piece)
        events(piece)

    async with contextlib.aclosing(tokens):  # type: ignore[type-var]
        async for token in tokens:
            if isinstance(token, Completion) and token.truncated:
                truncated = True
            if size + len(token) > budget:
                token, over = token[: budget - size], True
            if token:
                text.append(token)
                size += len(token)
                if sentinel is None:
                    send(token)
                elif said:
                    held += token
                else:
                    held += token
                    probe = before + held
                    says = _SAYS_NOT_ANSWERABLE.search(probe, 1)
                    end = says.end() - 1 if says else len(held)
                    opening = _OPENING.search(probe, max(1, end + 1 - _OPENING_REACH), end + 1)
                    cut = opening.start() - 1 if opening else end
                    said, opened = says is not None, bool(opening and opening.group("word"))
                    if cut:
                        send(held[:cut])
                        held = held[cut:]
            if over:
                break
    whole = "".join(text)
    cut_inside = (truncated or over) and opened and not said
    if held and not cut_inside and not (sentinel is not None and sentinel(whole)):
        send(held)
    return Completion.of(whole, truncated or over), over


class _CutShort(Exception):
    """Nothing of the model's text was left once its unfinished sentence went."""


#: degradation tag of a written answer whose last sentence max_tokens (or a closed stream) cut short, and which lost it
TRUNCATED = "answer:truncated"


def _failed(deps: WorkflowDeps, what: str, exc: Exception, instead: str) -> None:
    if isinstance(exc, _OutOfTime):
        # Each request's: the deadline's cut is the caller's budget, which the degradation reports;
        # the operator's limit is the provider's failure, which its breaker counts.
        log.debug("%s took over its time; %s", what, instead)
    else:
        log_failure(log, deps.log_limit, what, exc, instead)


def _fallback_reason(exc: Exception) -> str:
    if isinstance(exc, _OutOfTime):
        return DEADLINE_USED_EXTRACTIVE if exc.by_deadline else "answer:timeout_used_extractive"
    if isinstance(exc, _CutShort):
        return TRUNCATED
    return "answer:llm_failed_used_extractive"


async def write_answer(
    state: QueryState, deps: WorkflowDeps, chat: ChatModel | None, temperature: float, within: Limit
) -> AnswerOutcome:
    """The answer; the model, when there is one, is given ``within``."""
    route = state.route.route if state.route else Route.RETRIEVE
    tools = tuple(state.tool_results)
    if route is Route.DIRECT_ANSWER:
        return await _direct(state, deps, chat, temperature, within)
    degraded: list[str] = []
    sent: list[str] = []
    if chat is not None:
        try:
            text = await _ask(
                chat, _GROUNDED_SYSTEM, f"{_numbered(state.contexts, tools)}\n\nQuestion: {state.options.query}", state, deps, temperature,
                within, sent, degraded, lambda reply: _holds_not_answerable(reply, len(state.contexts)),
            )
        except Exception as exc:
            _failed(deps, "answer generation", exc, "answering extractively")
            degraded.append(_fallback_reason(exc))
        else:
            outcome = _checked(text, state, chat.name, route, tools, degraded)
            if outcome is not None:
                if state.events is not None and not sent:
                    # The model's NOT_ANSWERABLE, held back (_streamed): the caller hears what answers instead.
                    state.events(outcome.answer.text)
                return outcome
    # Once the model's text has reached a streaming caller, the pieces sent are the text as the
    # model wrote it (StreamQueryResponse.answer_delta); its replacement arrives as the final
    # response's Answer.text, not as more pieces run on after the rejected ones.
    answer = await _extractive(state, deps, route, tools, degraded, stream=not sent)
    return AnswerOutcome(answer, tuple(degraded))


def _says_not_answerable(text: str, n_contexts: int) -> bool:
    """Whether the model's ``text`` is its NOT_ANSWERABLE: it opens with the sentinel, whatever
    follows ("NOT_ANSWERABLE [1]", "NOT_ANSWERABLE: context [1] covers sign-in only"), or it says
    the sentinel and none of its other sentences cites one of the ``n_contexts`` contexts. A cited
    sentence that mentions it ("... the model must reply NOT_ANSWERABLE [1].") is an answer, and so
    are cited sentences beside one that is the sentinel (:func:`_answered_in_part`)."""
    if not _SAYS_NOT_ANSWERABLE.search(text):
        return False
    if _OPENS_NOT_ANSWERABLE.match(text):
        return True
    return not any(s.citations for s in _parsed(text, n_contexts)[0] if not _SENTINEL_SENTENCE.fullmatch(s.text))


def _holds_not_answerable(text: str, n_contexts: int) -> bool:
    """Whether the model's ``text`` says NOT_ANSWERABLE, for the whole question or for part of it
    (a sentence of its own): what a streaming caller is never sent."""
    return _says_not_answerable(text, n_contexts) or (
        _SAYS_NOT_ANSWERABLE.search(text) is not None and any(_SENTINEL_SENTENCE.fullmatch(s.text) for s in _parsed(text, n_contexts)[0])
    )


def _answered_in_part(text: str, sentences: list[AnswerSentence], degraded: list[str]) -> list[AnswerSentence]:
    """The ``sentences`` of the model's ``text`` but those that are the sentinel: the model answered
    what the contexts hold ("AuthSvc handles sign-in [1].") and said NOT_ANSWERABLE for the rest
    (its port); the answer, thrown away whole, lost the half that was cited."""
    kept: list[AnswerSentence] = []
    for s in sentences:
        if not _SENTINEL_SENTENCE.fullmatch(s.text):
            kept.append(s)
        elif kept and _BARE_NUMBER.fullmatch(kept[-1].text) and not kept[-1].citations and re.search(
            rf"(?m)^[ \t>*]*{re.escape(kept[-1].text)}[ \t*`~]*{_LABEL}{NOT_ANSWERABLE}", text
        ):
            kept.pop()  # its item's number, a sentence of its own: "2." was left (not "... sign-in [1]? 3.", an answer)
    if len(kept) < len(sentences):
        degraded.append(PARTLY_NOT_ANSWERABLE)
    return kept


def _checked(text: str, state: QueryState, model: str, route: Route, tools: tuple[ToolResult, ...], degraded: list[str]) -> AnswerOutcome | None:
    """The model's answer after the citation check, or None when it must be replaced by the extractive one."""
    contexts = state.contexts
    if _says_not_answerable(text, len(contexts)):
        if any(t.success for t in tools):
            # A tool's answer (the calculator's count) is an answer the model did not see as one.
            degraded.append(NOT_ANSWERABLE_USED_TOOLS)
            return None
        sentences = [AnswerSentence(UNSUPPORTED)]
        return AnswerOutcome(Answer(UNSUPPORTED, tuple(sentences), (), route, False, False, model, tools), tuple(degraded))
    text, cut = whole_sentences(text)
    if cut:
        degraded.append(TRUNCATED)
    sentences, invalid = parse_cited(text, contexts)
    if invalid:
        degraded.append("answer:invalid_citation_removed")
    sentences = _answered_in_part(text, sentences, degraded)
    cited = any(s.citations for s in sentences)
    # With no contexts too: what the model wrote then came from its own knowledge.
    if not sentences or (not cited and not any(t.success for t in tools)):
        degraded.append("answer:uncited_used_extractive")
        return None
    answer = Answer(render(sentences), tuple(sentences), citations_for(sentences, contexts), route, False, True, model, tools)
    return AnswerOutcome(answer, tuple(degraded))


async def _direct(
    state: QueryState, deps: WorkflowDeps, chat: ChatModel | None, temperature: float, within: Limit, stream: bool = True
) -> AnswerOutcome:
    if chat is not None:
        sent: list[str] = []
        degraded: list[str] = []
        try:
            text, cut = whole_sentences(await _ask(chat, _DIRECT_SYSTEM, state.options.query, state, deps, temperature, within, sent, degraded, None))
            if cut:
                degraded.append(TRUNCATED)
            # No contexts: every marker the model wrote ("I am the assistant [1].") points nowhere.
            sentences, invalid = parse_cited(text, ())
            if invalid:
                degraded.append("answer:invalid_citation_removed")
            if not sentences:
                raise _CutShort("the model's answer was cut before its first sentence ended") if cut else ValueError("the model's answer has no text")
            answer = Answer(render(sentences), tuple(sentences), (), Route.DIRECT_ANSWER, False, True, chat.name)
            return AnswerOutcome(answer, tuple(degraded))
        except Exception as exc:
            _failed(deps, "direct answer", exc, "using the built-in one")
            outcome = await _direct(state, deps, None, temperature, within, stream=not sent)
            # What happened to the model's text before it failed (runaway_cut, a marker taken out) happened too.
            return AnswerOutcome(outcome.answer, tuple(dict.fromkeys([*degraded, _fallback_reason(exc)])))
    if state.events is not None and stream:
        state.events(DIRECT)
    return AnswerOutcome(Answer(DIRECT, (AnswerSentence(DIRECT),), (), Route.DIRECT_ANSWER, True, True, "extractive"))


async def _extractive(
    state: QueryState, deps: WorkflowDeps, route: Route, tools: tuple[ToolResult, ...], degraded: list[str], stream: bool = True
) -> Answer:
    contexts = state.contexts
    sentences: list[AnswerSentence] = []
    written_by: str | None = None
    for t in tools:
        if t.success and t.name == "summarize" and t.result["model"] == "extractive":
            # An extractive summary's sentences, each with its context: its rendered text is not
            # read again, as a model's is.
            sentences.extend(AnswerSentence(s["text"], (s["context"],)) for s in t.result["sentences"])
        elif t.success:
            # A summary written from the contexts cites them already; a model's is checked as its answer is.
            cited, invalid = parse_cited(t.summary, contexts)
            if invalid:
                degraded.append("answer:invalid_citation_removed")
            if t.name == "summarize":
                written_by = t.result["model"]
            sentences.extend(cited)
        else:
            # The error may quote the caller ("no known entity named 'Foo [7]'"), brackets and all.
            sentences.append(AnswerSentence(f"The {t.name} tool failed: {uncited(t.error)}."))
    supported = any(t.success for t in tools)
    summarized = any(t.success and t.name == "summarize" for t in tools)
    if contexts and not summarized and (route is Route.RETRIEVE or not supported):
        support = await _supporting(state, deps)
        sentences.extend(support)
        supported = supported or bool(support)
    if not supported:
        sentences.insert(0, AnswerSentence(UNSUPPORTED))
    text = render(sentences)
    if state.events is not None and stream:
        for i, s in enumerate(sentences):
            state.events((" " if i else "") + render([s]))
    # A model's summary makes the answer the model's (Answer.extractive: no model wrote it).
    return Answer(text, tuple(sentences), citations_for(sentences, contexts), route, written_by is None, supported, written_by or "extractive", tools)


#: the extractive answer's sentences were not ranked by the deadline: the contexts' first ones
ANSWER_UNRANKED = "deadline:answer_unranked"
#: the extractive answer's sentences were not ranked, the model failing: the contexts' first ones
RANKING_FAILED = "answer:ranking_failed_unranked"


async def _supporting(state: QueryState, deps: WorkflowDeps) -> list[AnswerSentence]:
    """The contexts' sentences that best support the question, above the support threshold, best
    first. With a deadline, ranking them (a model's run over up to 80 sentences, seconds for long
    ones) gets the time left less half the reserve; past it, each context's first sentence answers,
    in the contexts' order (``deadline:answer_unranked``). The deadline had passed with the
    contexts ready in 25 ms, and DEADLINE_EXCEEDED came instead of them. A ranking that fails
    answers the same way (``answer:ranking_failed_unranked``): it failed the request INTERNAL."""
    candidates = sentences_of_contexts(state.contexts)
    if not candidates:
        return []
    left = state.time_left()
    bound = asyncio.timeout(None if left is None else max(0.0, left - deps.settings.deadline_reserve_ms / 2e3))
    try:
        async with bound:
            scores, threshold = await _ranked(state, deps, candidates, bound.expired)
    except Exception:
        # The deadline's cut: a TimeoutError, or whatever a model made of its cancellation. Any
        # other failure (an embedder's own timeout among them) is the model's: like a failing
        # tool or answer model, it degrades the request (which has its contexts), never fails it.
        if bound.expired():
            state.degrade(ANSWER_UNRANKED)
        else:
            log.error("ranking the answer's sentences failed; answering with the contexts' first ones", exc_info=True)
            state.degrade(RANKING_FAILED)
        firsts: dict[int, Sentence] = {}
        for s in candidates:
            firsts.setdefault(s.context, s)
        return [AnswerSentence(s.text, (s.context,)) for s in list(firsts.values())[: deps.settings.answer_max_sentences]]
    order = np.argsort(-scores, kind="stable")
    out: list[AnswerSentence] = []
    seen: set[str] = set()
    for i in order:
        if scores[i] < threshold or len(out) >= deps.settings.answer_max_sentences:
            break
        s = candidates[int(i)]
        if s.text.lower() in seen:
            continue
        seen.add(s.text.lower())
        out.append(AnswerSentence(s.text, (s.context,)))
    return out


async def _ranked(
    state: QueryState, deps: WorkflowDeps, candidates: list[Sentence], cut: Callable[[], bool]
) -> tuple[np.ndarray, float]:
    """The candidates scored against the question (by the reranker, else by the embedder), and the
    threshold of that score. ``cut``: whether the deadline has cut the ranking."""
    texts = [s.text for s in candidates]
    query = state.options.query
    if deps.reranker is not None and state.options.rerank:
        try:
            # Every candidate, as the embedder scores them: RERANK_CANDIDATES bounds the fused hits,
            # and cut here it left the later contexts' sentences out (sentences_of_contexts bounds them).
            scores, degraded = await scores_reporting(deps.reranker, query, texts)
            if degraded:
                # The rerank stage reports it for its own call only: TEI may fail here alone.
                state.degrade(degraded)
            return np.asarray(scores, dtype=np.float64), deps.settings.rerank_threshold  # float32 ties sigmoids near 1
        except Exception:
            if cut():
                raise  # the deadline's, whatever the reranker made of it: not its failure, and no time to embed
            log.warning("reranking answer sentences failed; using the embedder", exc_info=True)
    vectors = await deps.embedder.embed(texts)
    # The question's own vector: the dense legs' is a rewrite's when analysis rewrote it.
    own = state.own_query_vector()
    qv = own if own is not None else (await deps.embedder.embed([query]))[0]
    return np.asarray(vectors @ qv, dtype=np.float32), deps.settings.answer_min_similarity
