"""Safe arithmetic over a parsed expression tree (``ast``), never ``eval``.

Numbers, ``+ - * / // % **``, parentheses, a few math functions, and the functions the caller
passes in (the calculate tool passes graph counts such as ``count_dependents("AuthService",
"SERVICE")``; they may be coroutines). Anything else (names, attributes, subscripts, lambdas,
comprehensions, strings outside a function's arguments) is rejected, and so are expressions that
are too long or would build huge numbers.
"""

from __future__ import annotations

import ast
import inspect
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

MAX_CHARS = 500
MAX_NODES = 200
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300
_TOO_LARGE = f"the result is too large: past {MAX_MAGNITUDE:g}"
#: digits ``round`` may be asked for: past a float's range the answer is the number or 0, while
#: CPython would compute ``10 ** ndigits`` first, holding the event loop for as long as that takes
MAX_ROUND_DIGITS = 308


def _round(number: Any, ndigits: Any = None) -> Any:
    if isinstance(ndigits, int) and abs(ndigits) > MAX_ROUND_DIGITS:
        raise ValueError(f"ndigits must be between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}")
    return round(number) if ndigits is None else round(number, ndigits)


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MATH: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "ceil": math.ceil,
    "floor": math.floor,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


class CalculationError(ValueError):
    """The expression is not allowed, or has no value (division by zero, overflow)."""


async def evaluate(expression: str, functions: Mapping[str, Callable[..., Any]] | None = None) -> int | float:
    """The value of ``expression``; raises :class:`CalculationError`."""
    text = expression.strip()
    if not text:
        raise CalculationError("empty expression")
    if len(text) > MAX_CHARS:
        raise CalculationError(f"expression longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise CalculationError(f"not an expression: {exc.msg}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculationError(f"expression has more than {MAX_NODES} parts")
    value = await _Evaluator({**MATH, **(functions or {})}).eval(tree.body)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculationError("the expression is not a number")
    return value


class _Evaluator:
    def __init__(self, functions: Mapping[str, Callable[..., Any]]) -> None:
        self._functions = functions

    async def eval(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise CalculationError(f"only numbers are allowed here, not {node.value!r}")
            return _bounded(node.value)  # a literal of 400 digits and ".0" is float infinity
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            raise CalculationError(f"unknown name '{node.id}'")
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _bounded(_UNARY[type(node.op)](await self.eval(node.operand)))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = await self.eval(node.left), await self.eval(node.right)
            if isinstance(node.op, ast.Pow) and _grows_past_bounds(left, right):
                raise CalculationError(f"the power is too large: past an exponent of {MAX_EXPONENT} or a result of {MAX_MAGNITUDE:g}")
            try:
                value = _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise CalculationError("division by zero") from None
            except OverflowError:
                raise CalculationError(_TOO_LARGE) from None  # a float power's: "(34, 'Numerical result out of range')"
            except ValueError as exc:
                raise CalculationError(str(exc)) from None
            return _bounded(value)
        if isinstance(node, ast.Call):
            return await self._call(node)
        raise CalculationError(f"'{type(node).__name__}' is not allowed in a calculation")

    async def _call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name) or node.func.id not in self._functions:
            name = node.func.id if isinstance(node.func, ast.Name) else type(node.func).__name__
            raise CalculationError(f"unknown function '{name}'; known: {', '.join(sorted(self._functions))}")
        fn = self._functions[node.func.id]
        args = [await self._argument(a) for a in node.args]
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise CalculationError("** arguments are not allowed")
            kwargs[kw.arg] = await self._argument(kw.value)
        try:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
        except CalculationError:
            raise
        except (TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:  # log(8, 1) divides by zero
            raise CalculationError(f"{node.func.id}: {exc}") from None
        return _bounded(value)

    async def _argument(self, node: ast.AST) -> Any:
        """A function argument: a number expression, or a string (entity names, types)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return await self.eval(node)


def _grows_past_bounds(base: int | float, exponent: int | float) -> bool:
    """Whether ``base ** exponent`` is an integer power too large to compute: Python computes one
    exactly, digit by digit, holding the event loop (``9 ** 9 ** 9``) before :func:`_bounded`
    sees it. A float power overflows at once (OverflowError), and a negative exponent makes a
    float: ``2 ** -1000`` and ``(1 + 0.05 / 365) ** 3650`` are ordinary numbers."""
    if not (isinstance(base, int) and isinstance(exponent, int)) or exponent <= 0:
        return False
    return exponent > MAX_EXPONENT or (abs(base) > 1 and exponent * math.log10(abs(base)) > 300)


def _bounded(value: Any) -> int | float:
    """``value`` when it is a finite number within :data:`MAX_MAGNITUDE`. Anything else stops the
    calculation where it appears: ``max("ab")`` is the string "b", and ``* 10**8`` repeated it
    into gigabytes before the result was found not to be a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculationError(f"only numbers can be calculated with, not {type(value).__name__} values")
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise CalculationError("the result is not a finite number")
    if abs(value) > MAX_MAGNITUDE:
        raise CalculationError(_TOO_LARGE)
    return value
