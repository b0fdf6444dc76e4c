"""The rule router (no LLM): what it sends to the calculator and what to retrieval."""

from __future__ import annotations

import pytest

from retrieval_server.knowledge import Route
from retrieval_server.workflow.routing import RuleRouter


@pytest.mark.parametrize(("question", "expression"), [
    ("what is 3-2?", "3-2"), ("compute (2+3)*4", "(2+3)*4"), ("what is 2^10?", "2**10"), ("how much is 0.5 * 4", "0.5 * 4"),
])
def test_arithmetic_goes_to_the_calculator(question: str, expression: str) -> None:
    decision = RuleRouter().rules(question, [])
    assert decision.route is Route.TOOL and [(c.name, c.arguments) for c in decision.tool_calls] == [("calculate", {"expression": expression})]


@pytest.mark.parametrize("question", ["what is 2024-01-15?", "what is 2024-1-5", "what is 007 - 1?"])
def test_dates_and_codes_go_to_the_documents(question: str) -> None:
    """Read as arithmetic they fail (leading zeros) or answer nonsense (2024-01-15 = 2008)."""
    assert RuleRouter().rules(question, []).route is Route.RETRIEVE
