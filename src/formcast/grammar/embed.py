"""Constraints embedded in a grammar in place of a rule (``Grammar(..., rules={...})``,
and Lark's ``%json {...}``).

:func:`freeze_embedding` checks what the caller gave and turns it into a hashable source
(so that a :class:`~formcast.grammar.Grammar` stays a cache key);
:func:`embedded_regex` writes a source as a regex of formcast's dialect, whose own
``(?(DEFINE)...)`` the emitter merges into the grammar's.

Accepted: a Pydantic model class or a JSON Schema (a mapping, or :class:`JsonSchemaText`)
-> the compact JSON text it validates, through
:func:`formcast.regex.translator.schema_to_regex`; a :class:`formcast.Regex`; a list or
tuple of strings -> one of them; a :class:`formcast.FromText` -> a span of the request's
text, written raw (the emitter numbers its slot, :mod:`formcast.grammar.spans`). Refused
by name: schemas that copy values from the text (their slots are JSON strings).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from formcast.annotations import Regex
from formcast.errors import GrammarError
from formcast.limits import Limits
from formcast.regex import dialect
from formcast.regex.translator import schema_to_regex
from formcast.schema import Mode, pydantic_schema
from formcast.text import FromText, text_slots

__all__ = [
    "JsonSchemaText",
    "describe_embedding",
    "embedded_may_be_empty",
    "embedded_regex",
    "freeze_embedding",
]

_SHOWN_SCHEMA = 300  # characters of an embedded JSON Schema shown in a prompt

# A leading global flag group of a Regex, e.g. "(?s)"; inside a grammar it must be scoped.
_GLOBAL_FLAGS = re.compile(r"\(\?([a-zA-Z]+)\)")


@dataclass(frozen=True)
class JsonSchemaText:
    """A JSON Schema as compact JSON text (key order kept: it decides the output order)."""

    text: str


def freeze_embedding(name: str, value: Any) -> Any:
    """The hashable source of ``value`` given for rule ``name``.

    Raises:
        GrammarError: ``value`` is not something a rule can be replaced by, or ``name``
            is not a str.
    """
    if not isinstance(name, str):
        raise GrammarError(f"expected rule names in rules= to be str, found {name!r}")
    if isinstance(value, FromText | Regex):
        return value
    if isinstance(value, type) and issubclass(value, BaseModel):
        return value
    if isinstance(value, JsonSchemaText):
        return value
    if isinstance(value, Mapping):
        try:
            text = json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as error:
            raise GrammarError(
                f"expected the JSON Schema for rule {name!r} to be plain JSON, found {error}"
            ) from None
        return JsonSchemaText(text)
    if isinstance(value, list | tuple) and value and all(isinstance(w, str) for w in value):
        return tuple(value)
    raise GrammarError(
        f"expected rule {name!r} in rules= to be a Pydantic model class, a JSON Schema dict, "
        f"a formcast.Regex, a formcast.FromText or a non-empty list of strings, found {value!r}"
    )


def embedded_regex(
    source: Any, label: str, *, mode: Mode, whitespace: bool | int, limits: Limits
) -> str:
    """``source`` (from :func:`freeze_embedding`) as a regex, possibly opening with its
    own definitions. Cost: a schema's translation (~ms), nothing for the others.

    Raises:
        GrammarError: the schema copies values from the text.
        SchemaError, UnsupportedSchemaError: the schema or regex cannot be used.
    """
    if isinstance(source, tuple):
        return dialect.trie(source) or ""
    if isinstance(source, Regex):
        return _scoped(source.pattern)
    if isinstance(source, FromText):
        raise GrammarError(f"expected the span {label!r} to be written by the grammar's emitter")
    schema = source.text if isinstance(source, JsonSchemaText) else source
    regex = schema_to_regex(schema, mode=mode, whitespace=whitespace, limits=limits)
    if text_slots(regex):
        raise GrammarError(
            f"expected the schema embedded as {label!r} to copy no values from the text, "
            "found FromText fields: a grammar cannot bind them per request"
        )
    return regex


def _scoped(pattern: str) -> str:
    """A regex's leading global flags ``(?s)`` as a scoped group ``(?s:...)``, and its
    leading ``^`` / trailing ``$`` (no-ops under full match) dropped."""
    definitions, main = dialect.split_definitions(pattern)
    flags = _GLOBAL_FLAGS.match(main)
    if flags:
        main = main[flags.end() :]
    if main.startswith("^"):
        main = main[1:]
    if main.endswith("$") and not _escaped_at(main, len(main) - 1):
        main = main[:-1]
    if flags:
        main = f"(?{flags.group(1)}:{main})"
    return dialect.with_definitions(list(definitions.items()), main)


def _escaped_at(text: str, index: int) -> bool:
    backslashes = 0
    while index - backslashes - 1 >= 0 and text[index - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def embedded_may_be_empty(source: Any) -> bool:
    """Whether ``source`` may match the empty string (a JSON value never does; a regex
    that Python's ``re`` cannot test counts as possibly empty)."""
    if isinstance(source, tuple):
        return "" in source
    if isinstance(source, FromText):
        return source.min_length == 0
    if isinstance(source, Regex):
        try:
            plain = dialect.inline_definitions(_scoped(source.pattern))
            return re.fullmatch(plain, "") is not None
        except (ValueError, re.error):
            return True
    return False


def describe_embedding(source: Any) -> str:
    """What an embedded constraint stands for, in a few words for the prompt: the
    choices, the regex, or the compact JSON Schema (cut after 300 characters)."""
    if isinstance(source, tuple):
        return "one of " + ", ".join(json.dumps(word, ensure_ascii=False) for word in source)
    if isinstance(source, Regex):
        return f"text matching the regular expression {source.pattern}"
    if isinstance(source, FromText):
        return "a span copied exactly from the text"
    if isinstance(source, JsonSchemaText):
        text = source.text
    else:
        text = json.dumps(pydantic_schema(source), ensure_ascii=False, separators=(",", ":"))
    if len(text) > _SHOWN_SCHEMA:
        text = text[:_SHOWN_SCHEMA] + "..."
    return f"compact JSON matching the JSON Schema {text}"
