"""The terminals of Lark's ``common.lark`` that ``%import common.NAME`` brings in.

Written here, in Lark syntax read by :mod:`formcast.grammar.lark`, so that no file of
Lark is needed. Each one is the language Lark's Earley parser gives the terminal (with
``lexer="dynamic_complete"``); where ``common.lark`` relies on a lazy quantifier or a
lookbehind (``ESCAPED_STRING``, ``C_COMMENT``), the definition below is the regular
language that shortest match produces, written without them.
"""

from __future__ import annotations

__all__ = ["COMMON_TERMINALS", "COMMON_TEXT"]

COMMON_TEXT = r"""
DIGIT: /[0-9]/
HEXDIGIT: /[0-9a-fA-F]/
INT: /[0-9]+/
SIGNED_INT: /[+-]?[0-9]+/
DECIMAL: /[0-9]+\.[0-9]*|\.[0-9]+/
_EXP: /[eE][+-]?[0-9]+/
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: /[+-]/? FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: /[+-]/? NUMBER
ESCAPED_STRING: /"(?:[^"\\\n]|\\.)*"/
LCASE_LETTER: /[a-z]/
UCASE_LETTER: /[A-Z]/
LETTER: /[a-zA-Z]/
WORD: /[a-zA-Z]+/
CNAME: /[a-zA-Z_][a-zA-Z0-9_]*/
WS_INLINE: /[ \t]+/
WS: /[ \t\f\r\n]+/
CR: /\r/
LF: /\n/
NEWLINE: /(?:\r?\n)+/
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: /\/\*(?:[^*]|\*+[^*\/])*\*+\//
SQL_COMMENT: /--[^\n]*/
"""

COMMON_TERMINALS = frozenset(
    line.split(":")[0] for line in COMMON_TEXT.strip().splitlines() if not line.startswith("_")
)
"""The names ``%import common.NAME`` accepts."""
