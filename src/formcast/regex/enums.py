"""``enum`` and ``const``: the values are checked, one by one, against every keyword.

An enumeration is exact whatever its siblings say: each candidate value is kept when
jsonschema (:class:`ValueChecker`) finds it valid against every part of the conjunction,
and written as its compact JSON text. Parts made only of ``type``/``enum``/``const`` are
checked directly, so a 10,000-value enum costs milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from formcast.automaton.choices import CHOICE_MIN_WORDS
from formcast.errors import SchemaError, UnsupportedSchemaError
from formcast.regex.context import Translation
from formcast.regex.dialect import alt, json_dumps, json_literal, string_choice
from formcast.regex.parts import Never, Part, Result
from formcast.regex.strings import formats_accept
from formcast.schema import ANNOTATION_KEYWORDS, validator_class


class ValueChecker:
    """Exact checks of JSON values against the parts of one schema document."""

    def __init__(self, root: Any) -> None:
        cls = validator_class(root)
        self.validator = cls(root, format_checker=cls.FORMAT_CHECKER)
        self._enum_keys: dict[int, tuple[list[Any], frozenset[str]]] = {}

    def enum_keys(self, values: list[Any]) -> frozenset[str]:
        """Canonical keys of an ``enum`` list, computed once per list."""
        known = self._enum_keys.get(id(values))
        if known is None or known[0] is not values:
            known = (values, frozenset(canonical(v) for v in values))
            self._enum_keys[id(values)] = known
        return known[1]

    def valid(self, value: Any, parts: Sequence[Part]) -> bool:
        """Exact check, with jsonschema, that ``value`` satisfies every part.

        Parts made only of ``type``/``enum``/``const`` (and annotations) are checked
        directly, so a 10,000-value enum costs milliseconds, not a validator call per value.
        Raises UnsupportedSchemaError (keyword ``enum``) when jsonschema cannot check.
        """
        for part in parts:
            if part.schema is True:
                continue
            simple = _simple_check(value, part.schema, self.enum_keys)
            if simple is not None:
                if not simple:
                    return False
                continue
            attempts: list[Any] = [part.schema]
            if not part.synthetic and part.schema is not False:
                # the full schema at the pointer (resolves references in nested resources)
                attempts.insert(0, {"$ref": "#" + quote(part.pointer, safe="/~")})
            for index, schema in enumerate(attempts):
                try:
                    ok = self.validator.evolve(schema=schema).is_valid(value)
                    break
                except Exception as error:
                    if index == len(attempts) - 1:
                        raise UnsupportedSchemaError(
                            "enum", part.pointer, f"cannot check values against the schema: {error}"
                        ) from None
            if not ok:
                return False
        return True


def enum_candidates(flat: Sequence[Part]) -> list[Any] | None:
    """The values of the first ``const`` or ``enum`` among the parts; ``None`` if none."""
    for part in flat:
        if "const" in part.schema:
            return [part.schema["const"]]
        if "enum" in part.schema:
            values = part.schema["enum"]
            if not isinstance(values, list):
                raise SchemaError(f"expected a list for enum at {part.pointer or '/'}")
            return list(values)
    return None


def enumeration(t: Translation, flat: list[Part], candidates: list[Any]) -> Result:
    """The candidates (duplicates dropped) that satisfy every part, as alternatives; a
    Never when none does.

    Many strings checked only against ``type``/``enum``/``const`` (a ``Literal`` of
    10,000 names) take :func:`_string_enumeration`: set operations, no per-value JSON
    text."""
    strings = _string_enumeration(flat, candidates)
    if strings is not None:
        if not strings:
            return Never("enum", flat[0].pointer, "no enum/const value satisfies every keyword")
        return string_choice(strings, distinct=True) or ""
    formats = [
        (p.schema["format"], p.pointer) for p in flat if isinstance(p.schema.get("format"), str)
    ]
    kept: list[Any] = []
    seen: set[str] = set()
    for value in candidates:
        key = canonical(value)
        if key in seen:
            continue
        seen.add(key)
        if isinstance(value, str) and not formats_accept(
            value, formats, t.mode, t.formats_asserted
        ):
            continue
        if t.valid(value, flat):
            kept.append(value)
    if not kept:
        return Never("enum", flat[0].pointer, "no enum/const value satisfies every keyword")
    if t.mode == "specification":
        return alt(_number_spellings(v) for v in kept) or ""
    return alt(json_literal(v) for v in kept) or ""


def _number_spellings(value: Any) -> str:
    """Regex for ``value``'s compact JSON text; for a number, also the spellings with
    trailing zeros that JSON Schema finds equal (``2``, ``2.0``, ``2.00`` for ``2.0``;
    ``2.5``, ``2.50`` for ``2.5``), but not the exponent forms."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return json_literal(value)
    if isinstance(value, float) and not value.is_integer():
        text = json_dumps(value)
        if "e" in text or "E" in text:
            return json_literal(value)
        return json_literal(value) + "0*"
    if isinstance(value, float) and abs(value) >= 1e16:
        return json_literal(value)
    whole = int(value)
    return json_literal(whole) + r"(?:\.0+)?"


def _string_enumeration(flat: Sequence[Part], candidates: list[Any]) -> list[str] | None:
    """The distinct candidates, in order, that every part allows, when there are at least
    :data:`CHOICE_MIN_WORDS` of them, all strings, and every part is ``true`` or has only
    ``type``/``enum``/``const`` and annotations; else ``None`` (check value by value).

    Two strings are equal as JSON values exactly when they are equal as Python strings,
    so deduplication and ``enum``/``const`` membership are set operations; the list the
    candidates come from (:func:`enum_candidates`: the first part with an ``enum``) is
    not checked against itself."""
    if len(candidates) < CHOICE_MIN_WORDS or set(map(type, candidates)) != {str}:
        return None
    kept: list[str] = list(dict.fromkeys(candidates))
    source = next((p for p in flat if "const" in p.schema or "enum" in p.schema), None)
    for part in flat:
        schema = part.schema
        if schema is True:
            continue
        if not isinstance(schema, Mapping) or not schema.keys() <= _SIMPLE_KEYWORDS:
            return None
        kinds = schema.get("type", ["string"])
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            return None
        if "string" not in kinds:
            return []
        if "const" in schema:
            const = schema["const"]
            kept = [v for v in kept if type(const) is str and v == const]
        values = schema.get("enum")
        if values is not None and part is not source:
            if not isinstance(values, list):
                return None
            allowed = {v for v in values if type(v) is str}
            kept = [v for v in kept if v in allowed]
    return kept


def canonical(value: Any) -> str:
    """A key equal for JSON-equal values: ``1`` and ``1.0`` meet, ``true`` and ``1`` do not."""
    return json.dumps(_integral_floats_as_ints(value), sort_keys=True, separators=(",", ":"))


def _integral_floats_as_ints(value: Any) -> Any:
    """``value`` with each integral float made an int, at any depth. (A module function:
    a nested one that calls itself is a reference cycle, left for the collector.)"""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral_floats_as_ints(item) for item in value]
    if isinstance(value, dict):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    return value


_SIMPLE_KEYWORDS = frozenset({"type", "enum", "const"}) | ANNOTATION_KEYWORDS


def _simple_check(
    value: Any, schema: Any, enum_keys: Callable[[list[Any]], frozenset[str]]
) -> bool | None:
    """Whether ``value`` satisfies ``schema`` when the schema has only type/enum/const
    (and annotations); ``None`` when it has anything else and needs a full validator."""
    if not isinstance(schema, Mapping) or not schema.keys() <= _SIMPLE_KEYWORDS:
        return None
    kind = schema.get("type")
    if kind is not None:
        kinds = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else None
        if kinds is None:
            return None
        actual = json_type(value)
        if actual not in kinds and not (actual == "integer" and "number" in kinds):
            return False
    if "const" in schema and canonical(schema["const"]) != canonical(value):
        return False
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list):
            return None
        if canonical(value) not in enum_keys(values):
            return False
    return True


def json_type(value: Any) -> str:
    """The JSON Schema type of a JSON value (a whole float is an ``integer``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
