"""The calculate tool's evaluator: arithmetic as Python computes it, and nothing else."""

from __future__ import annotations

import asyncio
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_server.workflow.calculator import CalculationError, evaluate

_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}

# An expression tree: an int, or (op, left, right); rendered with full parentheses.
trees = st.recursive(
    st.integers(-1000, 1000),
    lambda sub: st.tuples(st.sampled_from(sorted(_OPS)), sub, sub),
    max_leaves=12,
)


def _render(t: object) -> str:
    if isinstance(t, int):
        return f"({t})" if t < 0 else str(t)
    op, a, b = t  # type: ignore[misc]
    return f"({_render(a)} {op} {_render(b)})"


def _value(t: object) -> int:
    if isinstance(t, int):
        return t
    op, a, b = t  # type: ignore[misc]
    return _OPS[op](_value(a), _value(b))


@settings(max_examples=300, deadline=None)
@given(trees)
def test_agrees_with_python_arithmetic(tree: object) -> None:
    text = _render(tree)
    try:
        expected: int | None = _value(tree)
    except ZeroDivisionError:
        expected = None
    if expected is None:
        with pytest.raises(CalculationError, match="division by zero"):
            asyncio.run(evaluate(text))
    else:
        assert asyncio.run(evaluate(text)) == expected


def test_functions_constants_and_awaitables() -> None:
    async def count(name: str, kind: str | None = None) -> int:
        return len(name) + (10 if kind else 0)

    assert asyncio.run(evaluate("sqrt(16) + max(1, 2, 3) * round(2.6)")) == 13.0
    assert asyncio.run(evaluate('count("abc") + count("ab", kind="SERVICE")', {"count": count})) == 15
    assert asyncio.run(evaluate("2 ** 10 - pi * 0")) == 1024
    assert asyncio.run(evaluate("round(1234.5678, 2) + round(1234, -2) + round(5, -308)")) == 1234.57 + 1200


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        # Refused as "too large" for their exponents, though only an integer power that grows is costly
        ("2 ** -1000", 2**-1000),
        ("10 ** -301", 1e-301),
        ("10 ** -1001", 0.0),
        ("(-2) ** -1001", (-2) ** -1001),
        ("1.0001 ** 2000", 1.0001**2000),
        ("1.5 ** -2000", 0.0),
        ("(1 + 0.05 / 365) ** (365 * 10)", (1 + 0.05 / 365) ** (365 * 10)),  # ten years' daily compound interest
        ("2 ** 996", 2**996),
    ],
)
def test_powers_within_a_floats_range_are_computed(expression: str, value: float) -> None:
    assert asyncio.run(evaluate(expression)) == value


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("__import__('os').system('true')", "unknown function"),
        ("(1).__class__", "Attribute"),
        ("[1, 2][0]", "Subscript"),
        ("lambda: 1", "Lambda"),
        ("x", "unknown name"),
        ("'text'", "only numbers"),
        ("9 ** 9 ** 9", "power is too large: past an exponent of 1000"),
        ("10 ** 400", "power is too large"),
        # Integer powers grow digit by digit on the event loop: past a float's range, refused before
        ("10 ** 301", r"power is too large: past an exponent of 1000 or a result of 1e\+300"),
        ("(-2) ** 1001", "power is too large"),
        ("1 ** 1001", "power is too large"),
        # A float power past a float's range overflows at once
        ("2.0 ** 5000", r"the result is too large: past 1e\+300"),
        ("0.5 ** -5000", "the result is too large"),
        ("10 ** 400.0", "the result is too large"),
        ("1e300 * 1e300", "finite"),
        ("1 +", "not an expression"),
        ("", "empty"),
        ("1 + " * 300 + "1", "longer than"),
        ("True + 1", "only numbers"),
        ("abs(**{})", "not allowed"),
        # CPython computes 10 ** 10 ** 7 for this, holding the event loop for seconds
        ("round(7, -10 ** 7)", "ndigits must be between"),
        # A string a function returns stops there: it was repeated into gigabytes before the end
        ('max("ab") * 10 ** 8', "only numbers can be calculated with, not str"),
        ('-min("a")', "only numbers can be calculated with"),
        # A literal beyond a float's range is infinity, which reached result_json as -Infinity (no JSON)
        ("-" + "9" * 400 + ".0", "finite"),
        ("1e999", "finite"),
        ("log(8, 1)", "log: float division by zero"),  # raised ZeroDivisionError past the calculator's own errors
    ],
)
def test_rejects_what_is_not_arithmetic(expression: str, why: str) -> None:
    with pytest.raises(CalculationError, match=why):
        asyncio.run(evaluate(expression))
