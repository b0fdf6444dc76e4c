"""The router's decision for a GENERATION request: retrieve, run tools, or answer directly.

:class:`RuleRouter` decides from the question's form and the known entities it names;
:class:`LlmRouter` asks a chat model for a JSON decision, validated against the tools' parameter
types, and falls back to the rules when the model fails or answers something invalid.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from retrieval_server.backends.llm import ChatModel, log_failure, waited_for
from retrieval_server.observability.log_limit import LogLimit
from retrieval_server.identifiers import without_surrogates
from retrieval_server.knowledge import EntityMatch, Route, RouteDecision, ToolCall, entity_type_named
from retrieval_server.workflow.calculator import MAX_CHARS
from retrieval_server.workflow.time_limit import Limit
from retrieval_server.workflow.tools import Tool, describe_tools

log = logging.getLogger(__name__)

_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening)|thanks?(?: you)?(?: very much| a lot)?|thank you|bye|goodbye|"
    r"ok(?:ay)?|cheers|great|cool)(?:\s+(?:there|all|everyone|team|so much))?[\s!.,?]*$",
    re.I,
)
#: the whole question: "help me find how X rotates its keys" is a question for the documents
_META = re.compile(
    r"^(?:who are you|what are you|what can you do|help|how do i use (?:you|this)|what do you do)(?:\s+(?:for me|here))?[\s!.,?]*$", re.I
)
#: possessive: a run of digits that ends in a letter was tried at every split (quadratic: 19 s
#: for 32,000 digits, on the event loop); the digit it needs is checked apart
_ARITHMETIC = re.compile(r"^(?:what is|what's|compute|calculate|evaluate|how much is)?\s*(?P<expr>[\d\s.+\-*/%()^]++)\??$", re.I)
#: what reads as arithmetic but is a date, or a code with leading zeros (which Python's arithmetic refuses anyway):
#: "what is 2024-01-15?" and "what is 12/25/2024?" are questions for the documents
_NOT_ARITHMETIC = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{4}\b|(?<![\d.])0\d")
#: words matched whole (possessive): a long word after "how many" was split every way between
#: the type and the next word (68 s for 65,000 letters, on the event loop)
_HOW_MANY_DEPEND_ON = re.compile(
    r"\bhow many\s+(?P<type>[a-z]++)?\s*(?:\w++\s+)?(?:depend|rely|relies|use|call|need)s?\s+(?:up)?on\b|"
    r"\bhow many\s+(?P<type2>[a-z]++)?\s*(?:use|call|need)s?\b",
    re.I,
)
_HOW_MANY_DEPENDENCIES = re.compile(
    r"\bhow many\s+(?P<type>[a-z]++)?\s*(?:does|do|did)\s+.{1,200}?\s+(?:depend on|rely on|use|call|need)\b|\bhow many dependencies\b",
    re.I,
)
_SUMMARY = re.compile(r"\b(?:summari[sz]e|summary|overview|tl;?dr|recap)\b", re.I)
_DEPENDENCY_ANALYSIS = re.compile(
    r"\b(?:dependencies|dependents|dependency (?:tree|chain|graph)|transitive(?:ly)?|cycles?|circular|upstream|downstream|"
    r"blast radius|impact)\b",
    re.I,
)
_DEPENDENTS_WORDS = re.compile(r"\b(?:dependents|downstream|blast radius|impact|what depends on|who depends on)\b", re.I)
_DEPENDENCIES_WORDS = re.compile(r"\b(?:dependencies|upstream|what does .{1,200}? depend on)\b", re.I)
_LOOKUP = re.compile(
    r"\b(?:facts? about|what do (?:you|we) know about|tell me about|look ?up|info(?:rmation)? (?:on|about)|who (?:maintains|owns|leads))\b",
    re.I,
)


class Router(Protocol):
    name: str

    async def decide(self, query: str, matches: Sequence[EntityMatch], within: Limit) -> tuple[RouteDecision, str | None]:
        """The decision, and a degradation to report (None when all went as configured); a model
        asked for it answers within ``within``."""
        ...


class RuleRouter:
    name = "rules"

    async def decide(self, query: str, matches: Sequence[EntityMatch], within: Limit) -> tuple[RouteDecision, str | None]:
        return self.rules(query, matches), None

    def rules(self, query: str, matches: Sequence[EntityMatch]) -> RouteDecision:
        text = " ".join(query.split())
        if _GREETING.match(text) or _META.match(text):
            return RouteDecision(Route.DIRECT_ANSWER, reason="a greeting or a question about the assistant itself")
        arithmetic = _ARITHMETIC.match(text) if len(text) <= MAX_CHARS else None  # the calculator takes no more
        expr_text = arithmetic.group("expr") if arithmetic else ""
        if re.search(r"\d", expr_text) and re.search(r"[+\-*/%^]", expr_text) and not _NOT_ARITHMETIC.search(expr_text):
            expr = expr_text.replace("^", "**").strip()
            return RouteDecision(Route.TOOL, (ToolCall("calculate", {"expression": expr}),), "an arithmetic expression")
        entity = matches[0] if matches else None
        if entity is not None:
            many = _HOW_MANY_DEPENDENCIES.search(text)
            if many:
                expr = _count_call("count_dependencies", entity.name, _type_of(many.group("type")))
                return RouteDecision(Route.TOOL, (ToolCall("calculate", {"expression": expr}),), f"counts what {entity.name} depends on")
            many = _HOW_MANY_DEPEND_ON.search(text)
            if many:
                expr = _count_call("count_dependents", entity.name, _type_of(many.group("type") or many.group("type2")))
                return RouteDecision(Route.TOOL, (ToolCall("calculate", {"expression": expr}),), f"counts what depends on {entity.name}")
            if _DEPENDENCY_ANALYSIS.search(text):
                direction = (
                    "dependents"
                    if _DEPENDENTS_WORDS.search(text)
                    else "dependencies"
                    if _DEPENDENCIES_WORDS.search(text)
                    else "both"
                )
                call = ToolCall("analyze_dependencies", {"entity": entity.name, "direction": direction})
                return RouteDecision(Route.TOOL, (call,), f"asks about the dependency structure around {entity.name}")
            if _LOOKUP.search(text):
                return RouteDecision(Route.TOOL, (ToolCall("lookup_facts", {"entity": entity.name}),), f"asks what is known about {entity.name}")
        if _SUMMARY.search(text):
            return RouteDecision(Route.TOOL, (ToolCall("summarize", {}),), "asks for a summary of the documents")
        why = "names known entities: " + ", ".join(m.name for m in matches) if matches else "a question about the documents"
        return RouteDecision(Route.RETRIEVE, reason=why)


def _type_of(word: str | None) -> str | None:
    found = entity_type_named(word) if word else None
    return found.value if found else None


def _count_call(function: str, entity: str, entity_type: str | None) -> str:
    args = [json.dumps(entity)] + ([json.dumps(entity_type)] if entity_type else [])
    return f"{function}({', '.join(args)})"


class _LlmToolCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class _LlmDecision(BaseModel):
    action: Literal["retrieve", "tool", "direct_answer"]
    tools: list[_LlmToolCall] = Field(default_factory=list, max_length=4)
    reason: str = ""


_SYSTEM = "You route questions for a document assistant. Answer with one JSON object and nothing else."
_PROMPT = """Decide how to answer the question.
Actions:
- "retrieve": search the documents (most questions about their content).
- "tool": run one or more of these tools:
{tools}
- "direct_answer": greetings, thanks, or questions about the assistant itself; nothing to look up.
Known entities named in the question: {entities}
JSON: {{"action": "retrieve" | "tool" | "direct_answer", "tools": [{{"name": "...", "arguments": {{...}}}}], "reason": "..."}}

Question: {query}"""


class LlmRouter:
    def __init__(
        self, model: ChatModel, tools: Mapping[str, Tool], fallback: RuleRouter, temperature: float = 0.0, log_limit: LogLimit | None = None
    ) -> None:
        self._model = model
        #: the application's, which spaces the lines of failures no breaker speaks for
        self._log_limit = log_limit or LogLimit()
        self._tools = tools
        self._fallback = fallback
        self._temperature = temperature
        self.name = f"llm:{model.name}"

    async def decide(self, query: str, matches: Sequence[EntityMatch], within: Limit) -> tuple[RouteDecision, str | None]:
        entities = ", ".join(f"{m.name} ({m.entity_type.value})" for m in matches) or "none"
        limit = asyncio.timeout(within.seconds)
        try:
            # A retry's backoff past the limit is not started: the failure before it is counted
            # once, by the breaker, where the limit's cut would count it a second time (gave_up).
            with waited_for(within.seconds):
                async with limit:
                    answer = await self._model.complete(
                        _SYSTEM,
                        _PROMPT.format(tools=describe_tools(self._tools), entities=entities, query=query),
                        temperature=self._temperature,
                        max_tokens=300,
                    )
            return self.parse(answer), None
        except Exception as exc:
            if not limit.expired():
                log_failure(log, self._log_limit, "LLM router", exc, "deciding by rules")
                return self._fallback.rules(query, matches), "router:llm_failed_used_rules"
            # Each request's: the deadline's cut is the caller's budget, which the degradation
            # reports; the operator's limit is the provider's failure, which its breaker counts.
            log.debug("LLM router took over %.3f s; deciding by rules", within.seconds)
            if within.by_deadline:
                return self._fallback.rules(query, matches), "router:deadline_used_rules"
            self._model.gave_up()  # the operator's limit on the call: the provider's failure
            return self._fallback.rules(query, matches), "router:timeout_used_rules"

    def parse(self, answer: str) -> RouteDecision:
        start, end = answer.find("{"), answer.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("no JSON object in the router's answer")
        decision = _LlmDecision.model_validate(json.loads(answer[start : end + 1]))
        calls = []
        for call in decision.tools:
            tool = self._tools.get(call.name)
            if tool is None:
                raise ValueError(f"unknown tool '{call.name}'")
            try:
                tool.Params.model_validate(call.arguments)
            except ValidationError as exc:
                raise ValueError(f"invalid arguments for {call.name}: {exc.errors()[0]['msg']}") from None
            calls.append(ToolCall(call.name, call.arguments))
        route = Route(decision.action)
        if route is Route.TOOL and not calls:
            raise ValueError("action 'tool' without tools")
        # The answer's JSON may spell half an emoji ("\\ud83d"), which protobuf cannot send.
        return RouteDecision(route, tuple(calls) if route is Route.TOOL else (), without_surrogates(decision.reason[:500]), self.name)
