"""Grammars as output constraints: :class:`Grammar`, in GBNF or Lark syntax.

A grammar is read once, when the :class:`Grammar` is made (syntax errors, undefined
rules and the other checks of :mod:`formcast.grammar.checks` raise
:class:`~formcast.errors.GrammarError` there, with line and column), and written as a
regex of formcast's dialect by :meth:`Grammar.regex`: one definition per recursive rule,
the other rules inline. From there it compiles like any constraint
(``formcast.compile(grammar, tokenizer)``, ``formcast.extract(grammar, text)``), and the
value an extraction returns is the matched ``str``.

Modules: :mod:`~formcast.grammar.nodes` (the representation), :mod:`~formcast.grammar.gbnf`
and :mod:`~formcast.grammar.lark` (the two dialects; :mod:`~formcast.grammar.lark_terminals`
for what Lark's terminals mean, :mod:`~formcast.grammar.lark_common`
holds the terminals of Lark's ``common.lark`` that can be imported),
:mod:`~formcast.grammar.checks` (names, left recursion, productivity),
:mod:`~formcast.grammar.embed` (constraints given in ``rules=``),
:mod:`~formcast.grammar.emit` (the regex).

The stage takes a grammar's text (and the constraints its ``rules=`` embed) and gives a
regex of formcast's dialect. It may import the stages that write regexes
(``formcast.schema``, ``formcast.regex``, the slot encoding of ``formcast.text``, the
``Regex`` annotation), the automaton (to check a terminal's regex), ``formcast.errors``,
``formcast.limits``, ``formcast.charset`` and ``formcast.graphs``; nothing of the index,
decoding or extraction.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from formcast.annotations import Regex
from formcast.errors import GrammarError
from formcast.grammar.checks import check_rules
from formcast.grammar.embed import JsonSchemaText, describe_embedding, freeze_embedding
from formcast.grammar.emit import emit_regex, recursive_rules
from formcast.grammar.gbnf import parse_gbnf
from formcast.grammar.lark import parse_lark
from formcast.grammar.nodes import RuleSet
from formcast.limits import DEFAULT_LIMITS, Limits
from formcast.schema import Mode, pydantic_schema
from formcast.text import FromText

__all__ = ["Grammar", "Syntax"]

Syntax = Literal["gbnf", "lark"]


@dataclass(frozen=True, init=False)
class Grammar:
    """Constrain the output to the language of a grammar.

    Args:
        text: the grammar, in GBNF (llama.cpp's dialect, the default) or Lark syntax.
        syntax: ``"gbnf"`` or ``"lark"``.
        start: the start rule; default ``root`` for GBNF, ``start`` for Lark.
        rules: constraints standing in for rules the grammar uses but does not define,
            by name: a Pydantic model class or JSON Schema dict (its compact JSON), a
            :class:`formcast.Regex`, or a list of strings (one of them).

    A ``Grammar`` is a frozen, hashable value (it is a cache key, like
    :class:`formcast.Regex`): two grammars with the same text, syntax, start and
    embedded constraints are equal. Making one parses and checks the text (cost:
    linear in the text, ~1 ms for a page of grammar); the regex is written on first use
    and remembered.

    Raises:
        GrammarError: the text does not parse, a rule is undefined, the start rule is
            missing, left recursion cannot be rewritten, a rule can never finish, a
            feature cannot be enforced (named, with its line and column), or an entry of
            ``rules`` is not something a rule can be.
    """

    text: str
    syntax: Syntax
    start: str
    rules: tuple[tuple[str, Any], ...]
    checked: RuleSet = field(repr=False, compare=False, hash=False)

    def __init__(
        self,
        text: str,
        syntax: Syntax = "gbnf",
        start: str | None = None,
        rules: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(text, str):
            raise GrammarError(f"expected the grammar as a str, found {type(text).__name__}")
        if syntax not in ("gbnf", "lark"):
            raise GrammarError(f"expected syntax 'gbnf' or 'lark', found {syntax!r}")
        embedded = tuple(
            (name, freeze_embedding(name, value)) for name, value in (rules or {}).items()
        )
        parsed = parse_gbnf(text, start) if syntax == "gbnf" else parse_lark(text, start)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "syntax", syntax)
        object.__setattr__(self, "start", start or ("root" if syntax == "gbnf" else "start"))
        object.__setattr__(self, "rules", embedded)
        object.__setattr__(self, "checked", check_rules(parsed, dict(embedded)))

    @property
    def is_recursive(self) -> bool:
        """Whether a rule reachable from the start refers to itself, directly or not
        (after direct left and tail recursion are rewritten). Compiling such a grammar
        needs the automaton's pushdown calls."""
        return bool(recursive_rules(self.checked.rules))

    def regex(
        self,
        *,
        mode: Mode = "generation",
        whitespace: bool | int = False,
        limits: Limits = DEFAULT_LIMITS,
    ) -> str:
        """The grammar as a regex of formcast's dialect (memoised). ``mode`` and
        ``whitespace`` apply to embedded JSON Schemas and models, as in
        :func:`formcast.compile`.

        Raises:
            GrammarError: the regex would exceed ``limits.max_regex_length``.
            SchemaError, UnsupportedSchemaError: an embedded schema cannot be enforced.
        """
        return _regex(self, mode, whitespace, limits)

    def embedded_descriptions(self) -> list[tuple[str, str]]:
        """``(rule name, what it stands for)`` for each constraint given in ``rules=``,
        in words for a prompt (:func:`formcast.grammar.embed.describe_embedding`)."""
        return [(name, describe_embedding(source)) for name, source in self.rules]

    def key(self) -> dict[str, Any] | None:
        """A JSON-able description that identifies this grammar (text, syntax, start and
        the embedded constraints' sources), or None when an embedded model's schema
        cannot be generated."""
        embedded = []
        for name, source in self.rules:
            described = _source_key(source)
            if described is None:
                return None
            embedded.append([name, described])
        return {"grammar": self.text, "syntax": self.syntax, "start": self.start, "rules": embedded}


@functools.lru_cache(maxsize=64)
def _regex(grammar: Grammar, mode: Mode, whitespace: bool | int, limits: Limits) -> str:
    return emit_regex(grammar.checked, mode=mode, whitespace=whitespace, limits=limits)


def _source_key(source: Any) -> Any:
    if isinstance(source, tuple):
        return {"choice": list(source)}
    if isinstance(source, Regex):
        return {"regex": source.pattern}
    if isinstance(source, FromText):
        return {"from_text": source.keyword_value()}
    if isinstance(source, JsonSchemaText):
        return {"schema": json.loads(source.text)}
    if isinstance(source, type) and issubclass(source, BaseModel):
        try:
            return {"schema": pydantic_schema(source)}
        except Exception:  # the regex path reports what is wrong with the model
            return None
    return None
