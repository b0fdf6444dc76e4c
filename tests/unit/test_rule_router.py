"""The rule router (no LLM): what it sends to the calculator and what to retrieval."""

from __future__ import annotations

import pytest

from retrieval_server.knowledge import EntityMatch, EntityType, MatchKind, Route
from retrieval_server.workflow.routing import RuleRouter


@pytest.mark.parametrize(("question", "expression"), [
    ("what is 3-2?", "3-2"), ("compute (2+3)*4", "(2+3)*4"), ("what is 2^10?", "2**10"), ("how much is 0.5 * 4", "0.5 * 4"),
])
def test_arithmetic_goes_to_the_calculator(question: str, expression: str) -> None:
    decision = RuleRouter().rules(question, [])
    assert decision.route is Route.TOOL and [(c.name, c.arguments) for c in decision.tool_calls] == [("calculate", {"expression": expression})]


@pytest.mark.parametrize("question", ["what is 2024-01-15?", "what is 2024-1-5", "what is 007 - 1?", "what is 12/25/2024?", "what is 1/5/2024"])
def test_dates_and_codes_go_to_the_documents(question: str) -> None:
    """Read as arithmetic they fail (leading zeros) or answer nonsense (2024-01-15 = 2008,
    12/25/2024 = 0.000237)."""
    assert RuleRouter().rules(question, []).route is Route.RETRIEVE


@pytest.mark.parametrize("question", ["help", "Help!", "what can you do for me?", "who are you?", "What do you do here?"])
def test_questions_about_the_assistant_are_answered_directly(question: str) -> None:
    assert RuleRouter().rules(question, []).route is Route.DIRECT_ANSWER


@pytest.mark.parametrize("question", [
    "Help me find how AuthSvc rotates its signing keys", "help: LedgerDB backup fails with error 42",
    "What do you do when LedgerDB runs out of disk?",
])
def test_a_question_that_only_opens_like_one_about_the_assistant_goes_to_the_documents(question: str) -> None:
    """The whole question decides: one that opens with "help" or "what do you do" is about the documents."""
    assert RuleRouter().rules(question, []).route is Route.RETRIEVE


def _match(name: str) -> EntityMatch:
    return EntityMatch(name.lower(), name, EntityType.SERVICE, name, MatchKind.EXACT, 1.0)


@pytest.mark.parametrize(("question", "function"), [
    ("how many services depend on AuthSvc?", "count_dependents"), ("how many of them rely on AuthSvc", "count_dependents"),
    ("how many use AuthSvc", "count_dependents"), ("how many services does AuthSvc depend on?", "count_dependencies"),
])
def test_counting_questions_go_to_the_calculator(question: str, function: str) -> None:
    decision = RuleRouter().rules(question, [_match("AuthSvc")])
    assert decision.route is Route.TOOL and decision.tool_calls[0].arguments["expression"].startswith(f"{function}(")


@pytest.mark.parametrize("question", [
    "1" * 40_000 + "x", "how many " + "a" * 40_000, "what does " * 4_000 + "x", "how many does " * 3_000 + "x", "9 " * 20_000 + "?",
])
def test_the_rules_read_a_long_question_in_one_pass(question: str) -> None:
    """Runs the patterns could split every way took quadratic or worse time on the event loop
    (the second: 68 s at 65,000 letters). Now each is read once: this returns at once, and hung before."""
    assert RuleRouter().rules(question, [_match("AuthSvc")]).route is Route.RETRIEVE



def test_the_llm_routers_reason_never_holds_half_an_emoji() -> None:
    """The model's JSON may spell a lone surrogate ("\\ud83d"): protobuf could not send the reason."""
    from types import SimpleNamespace

    from retrieval_server.workflow.routing import LlmRouter

    router = LlmRouter(SimpleNamespace(name="m"), {}, RuleRouter())  # type: ignore[arg-type]
    decision = router.parse('{"action": "retrieve", "tools": [], "reason": "asks \\ud83d about AuthSvc"}')
    assert decision.route is Route.RETRIEVE and decision.reason == "asks \ufffd about AuthSvc"
