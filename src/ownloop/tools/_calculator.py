"""A safe arithmetic calculator, ready to register as a read tool.

Agent tutorials often hand a model's text to ``eval``; a model (or a document it read) can then
run any Python it likes. `calculate` never evaluates code: it parses the expression and walks a
whitelist of syntax — numbers, ``+ - * / // % **``, unary signs and parentheses — and refuses
everything else (names, calls, attributes, strings, comparisons…). Sizes are bounded so that an
expression cannot make the process spend unbounded memory or time.
"""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Callable

__all__ = ["MAX_EXPRESSION_CHARS", "calculate"]

MAX_EXPRESSION_CHARS = 200
"""The longest expression `calculate` accepts."""

_MAX_MAGNITUDE = 1e100
_MAX_EXPONENT = 1000
_ALLOWED_CHARACTERS = frozenset("0123456789.eE_+-*/%() \t")

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression safely, without ``eval``.

    Args:
        expression: Numbers combined with + - * / // % ** and parentheses, e.g. ``2 * (3 + 4)``
            (at most 200 characters).

    Returns:
        The value, as a float.

    Raises:
        ValueError: If the expression is not plain arithmetic, is too long, divides by zero, or
            its value is too large or not a real number. The message says which.
    """
    if not isinstance(expression, str):
        raise ValueError("the expression must be a string")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(
            f"the expression has {len(expression)} characters; at most "
            f"{MAX_EXPRESSION_CHARS} are allowed"
        )
    unexpected = sorted(set(expression) - _ALLOWED_CHARACTERS)
    if unexpected:
        shown = " ".join(repr(char) for char in unexpected[:5])
        raise ValueError(
            f"only numbers, + - * / // % ** and parentheses are allowed; found {shown}"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a warning about odd syntax must not escape
            tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ValueError(f"{expression!r} is not a valid arithmetic expression") from None
    value = _evaluate(tree.body)
    return float(value)


def _evaluate(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        return _checked(_number(node.value))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _checked(_power(_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        try:  # operands are bounded, so only a zero divisor can fail; floats overflow to inf
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
    raise ValueError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def _number(value: object) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    return value


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > _MAX_EXPONENT:
        raise ValueError(f"exponents are limited to ±{_MAX_EXPONENT}")
    if exponent > 0 and abs(base) > 1 and exponent * math.log10(abs(base)) > 100:
        raise ValueError("the result is too large")
    try:
        result: object = base**exponent
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("the result is too large") from None
    if isinstance(result, complex):
        raise ValueError("the result is not a real number")
    return _number(result)


def _checked(value: Number) -> Number:
    if not math.isfinite(value) or abs(value) > _MAX_MAGNITUDE:
        raise ValueError("the result is too large")
    return value
