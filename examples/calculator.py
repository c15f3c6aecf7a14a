"""An arithmetic calculator: the model writes an expression, Python evaluates it.

The Lark grammar allows nested parentheses, so it is recursive: the constraint is an
exact pushdown automaton, and every output is a well-formed expression (balanced
parentheses, no dangling operator), which this script evaluates without ``eval``.

    python examples/calculator.py
"""

from __future__ import annotations

import ast
import operator

import formcast

EXPRESSION = formcast.Grammar(
    r"""
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: factor | product "*" factor | product "/" factor
?factor: NUMBER | "-" factor | "(" sum ")"
NUMBER: /(0|[1-9][0-9]{0,5})(\.[0-9]{1,4})?/
%ignore " "
""",
    syntax="lark",
)

INSTRUCTIONS = "Write the arithmetic expression that answers the question, nothing else."

QUESTIONS = [
    "I buy 3 notebooks at 2.50 each and a pen at 1.20. How much do I pay?",
    "A train covers 180 km in 2 hours, then 90 km in 1.5 hours. What is its average speed?",
]

_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def evaluate(node: ast.AST) -> float:
    """The value of an expression the grammar allows (numbers, + - * /, parentheses)."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](evaluate(node.left), evaluate(node.right))
    raise ValueError(f"not an expression of the grammar: {ast.dump(node)}")


def main() -> int:
    for question in QUESTIONS:
        expression = formcast.extract(
            EXPRESSION, question, instructions=INSTRUCTIONS, max_new_tokens=32
        )
        try:
            value = f"{evaluate(ast.parse(expression, mode='eval')):g}"
        except ZeroDivisionError:
            value = "division by zero"
        print(f"{question}\n  -> {expression} = {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
