"""Combinators: ``anyOf``, ``oneOf``, ``allOf``, ``not``, ``if``/``then``/``else`` and the
dependency keywords, and the disjointness proofs ``oneOf`` needs.

``allOf`` is flattened before this module sees it (:mod:`formcast.regex.references`).
:func:`rewrite` turns ``not``, ``if``/``then``/``else`` and dependencies into plain
conjunctions and disjunctions, negating schemas keyword group by keyword group
(:func:`negate`); :func:`disjunction` distributes an ``anyOf``/``oneOf`` over its
siblings. ``_disjoint`` is a sound, partial test: types, enumerated values, length and
range intervals, and required properties with disjoint schemas.

Costs: distribution multiplies the siblings into every branch, and nested disjunctions
multiply each other (the translator caps the number of sub-schemas).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from formcast.errors import FormcastWarning, SchemaError, UnsupportedSchemaError, warn
from formcast.regex.context import Translation
from formcast.regex.dialect import alt
from formcast.regex.enums import enum_candidates, json_type
from formcast.regex.numbers import is_number, multiple_exclusion
from formcast.regex.objects import key_parts, member_exclusion, required_names
from formcast.regex.parts import (
    ALL_TYPES,
    ARRAY_KEYWORDS,
    NUMBER_KEYWORDS,
    OBJECT_KEYWORDS,
    REFUSED_KEYWORDS,
    STRING_KEYWORDS,
    VALIDATION_KEYWORDS,
    Never,
    Part,
    Result,
)
from formcast.regex.patterns import DfaTooLarge, PatternUnsupported
from formcast.regex.string_sets import has_word_between, intersection, pattern_language
from formcast.regex.strings import pattern_exclusion
from formcast.schema import ANNOTATION_KEYWORDS, join_pointer


def _is_value_exclusion(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and bool(schema)
        and all(k in ("enum", "const") or k in ANNOTATION_KEYWORDS for k in schema)
        and ("enum" in schema or "const" in schema)
    )


_INTERVAL_KEYWORDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "string": (("minLength",), ("maxLength",)),
    "array": (("minItems",), ("maxItems",)),
    "integer": (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")),
    "number": (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")),
}
"""Per JSON type, the keywords bounding a value from below and from above."""


def _interval(
    flat: Sequence[Part], lows: tuple[str, ...], highs: tuple[str, ...]
) -> tuple[float, float]:
    """A closed interval holding every length/count/value the conjunction allows.

    Exclusive bounds count as inclusive and non-numeric ones (draft 4 booleans) are
    ignored: the interval may only be too wide, so disjoint intervals prove disjointness.
    """
    low, high = -math.inf, math.inf
    for part in flat:
        schema = part.schema
        for keyword in lows:
            value = schema.get(keyword)
            if is_number(value):
                low = max(low, value)
        for keyword in highs:
            value = schema.get(keyword)
            if is_number(value):
                high = min(high, value)
    return low, high


def rewrite(t: Translation, flat: list[Part]) -> list[Part] | None:
    """Rewrite ``not``, dependencies and ``if`` into plain conjunctions/disjunctions."""
    for index, part in enumerate(flat):
        schema = part.schema
        pointer = part.pointer
        replaced: list[Part] | None = None
        if "if" in schema or "then" in schema or "else" in schema:
            rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
            replaced = [Part(rest, pointer, part.synthetic)]
            if "if" in schema and ("then" in schema or "else" in schema):
                # (if and then) or (not if and else): two disjoint branches
                condition = schema["if"]
                try:
                    negated = negate(t, condition, join_pointer(pointer, "if"), 0)
                except UnsupportedSchemaError as error:
                    raise UnsupportedSchemaError(
                        "if", pointer, f"cannot negate the condition ({error.reason})"
                    ) from None
                branches = [
                    {"allOf": [condition, schema.get("then", True)]},
                    {"allOf": [negated, schema.get("else", True)]},
                ]
                replaced.append(Part({"anyOf": branches}, pointer, True))
        elif (
            "not" in schema
            and not _is_value_exclusion(schema["not"])
            and pattern_exclusion(schema["not"]) is None
            and multiple_exclusion(schema["not"]) is None
            and member_exclusion(schema["not"]) is None
        ):
            rest = {k: v for k, v in schema.items() if k != "not"}
            negated = negate(t, schema["not"], join_pointer(pointer, "not"), 0)
            replaced = [
                Part(rest, pointer, part.synthetic),
                Part(negated, join_pointer(pointer, "not"), True),
            ]
        elif any(k in schema for k in ("dependentRequired", "dependentSchemas", "dependencies")):
            replaced = _rewrite_dependencies(t, flat, part)
        if replaced is not None:
            return flat[:index] + replaced + flat[index + 1 :]
    return None


def _rewrite_dependencies(t: Translation, flat: list[Part], part: Part) -> list[Part]:
    """``part`` without its dependencies: those on names ``flat`` requires hold outright,
    the others become ``anyOf`` [trigger absent, trigger present and its consequence]."""
    schema = part.schema
    required: set[str] = set()
    for other in flat:
        names = other.schema.get("required")
        if isinstance(names, list):
            required.update(n for n in names if isinstance(n, str))
    rest = {
        k: v
        for k, v in schema.items()
        if k not in ("dependentRequired", "dependentSchemas", "dependencies")
    }
    out = [Part(rest, part.pointer, part.synthetic)]
    conditional = []
    for keyword in ("dependentRequired", "dependentSchemas", "dependencies"):
        table = schema.get(keyword)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise SchemaError(f"expected an object for {keyword} at {part.pointer or '/'}")
        for trigger, value in table.items():
            pointer = join_pointer(part.pointer, keyword, trigger)
            if isinstance(value, list):
                consequence: Any = {"required": list(value)}
                consequence_part = Part(consequence, pointer, True)
            else:
                consequence = {"allOf": [value]}
                consequence_part = Part(value, pointer, part.synthetic)
            if trigger in required:
                out.append(consequence_part)
                continue
            conditional.append((keyword, trigger, consequence, pointer))
    most = t.limits.max_conditional_dependencies
    if len(conditional) > most:
        keyword, _, _, pointer = conditional[0]
        raise UnsupportedSchemaError(
            keyword,
            part.pointer,
            f"more than {most} dependencies on optional properties",
        )
    for _keyword, trigger, consequence, pointer in conditional:
        branches = [
            {"properties": {trigger: False}},
            {"required": [trigger], "allOf": [consequence]},
        ]
        out.append(Part({"anyOf": branches}, pointer, True))
    return out


_MAX_NEGATION_DEPTH = 24
"""Nested negations and the references they go through (a guard against cycles)."""


def negate(
    t: Translation, schema: Any, pointer: str, depth: int, empty_formats: bool = False
) -> Any:
    """A schema (synthetic) equivalent to ``{"not": schema}``; raises
    UnsupportedSchemaError (keyword ``not``) for keywords that cannot be negated.

    ``empty_formats`` (for a ``oneOf`` branch excluding another): a ``format``'s negation
    is no value, a subset of its negation whether a validator asserts the format or reads
    it as an annotation, so the branch only loses values; elsewhere it is refused."""
    if depth > _MAX_NEGATION_DEPTH:
        raise UnsupportedSchemaError("not", pointer, "negation nested too deeply")
    if schema is True:
        return False
    if schema is False:
        return True
    if not isinstance(schema, dict):
        raise SchemaError(f"expected a schema at {pointer or '/'}")
    keys = [k for k in schema if k in VALIDATION_KEYWORDS or k in REFUSED_KEYWORDS]
    if not keys:
        return False
    if keys == ["$ref"]:
        target, target_pointer = t.resolve(schema["$ref"], pointer)
        return negate(t, target, target_pointer, depth + 1, empty_formats)
    groups = _negation_groups(schema, keys)
    if len(groups) > 1:
        return {
            "anyOf": [_negate_group(t, schema, g, pointer, depth, empty_formats) for g in groups]
        }
    return _negate_group(t, schema, groups[0], pointer, depth, empty_formats)


def _negate_group(
    t: Translation,
    schema: dict[str, Any],
    keys: list[str],
    pointer: str,
    depth: int,
    empty_formats: bool = False,
) -> Any:
    first = keys[0]
    if first == "$ref":
        target, target_pointer = t.resolve(schema["$ref"], pointer)
        return negate(t, target, target_pointer, depth + 1, empty_formats)
    if first == "type" or first == "nullable":
        types = schema.get("type", list(ALL_TYPES))
        named = {types} if isinstance(types, str) else set(types)
        if schema.get("nullable") is True:
            named.add("null")
        if "integer" in named and "number" not in named:
            # the numbers that are not integers: a fraction that is not zero
            others = {"type": sorted(ALL_TYPES - named - {"number"})}
            return {"anyOf": [others, {"type": "number", "not": {"multipleOf": 1}}]}
        if "number" in named:
            named.add("integer")
        return {"type": sorted(ALL_TYPES - named)}
    if first in ("enum", "const"):
        return {"not": {first: schema[first]}}
    if first == "not":
        return schema["not"]
    if first == "anyOf":
        return {
            "allOf": [
                negate(t, s, join_pointer(pointer, "anyOf", i), depth + 1, empty_formats)
                for i, s in enumerate(schema["anyOf"])
            ]
        }
    if first == "allOf":
        return {
            "anyOf": [
                negate(t, s, join_pointer(pointer, "allOf", i), depth + 1, empty_formats)
                for i, s in enumerate(schema["allOf"])
            ]
        }
    if first == "oneOf":
        return _negate_one_of(
            t, schema["oneOf"], join_pointer(pointer, "oneOf"), depth, empty_formats
        )
    if keys == ["format"] and empty_formats:
        # some validators read a format as an annotation (its negation: no value), others
        # assert it (the strings outside it): no value is what both allow
        return False
    if keys == ["multipleOf"] and multiple_exclusion(schema) is not None:
        # a multipleOf holds for every non-number: its negation is a number that is not one
        return {"type": "number", "not": {"multipleOf": schema["multipleOf"]}}
    if first == "pattern" and keys == ["pattern"] and isinstance(schema["pattern"], str):
        # a pattern holds for every non-string: its negation is a non-matching string
        return {"type": "string", "not": {"pattern": schema["pattern"]}}
    if first == "required":
        names = schema["required"]
        if not names:
            return False
        return {"type": "object", "anyOf": [{"properties": {n: False}} for n in names]}
    if "additionalProperties" in keys and set(keys) <= {"properties", "additionalProperties"}:
        return _negate_members(t, schema, pointer, depth, empty_formats)
    if first == "properties" and keys == ["properties"]:
        branches = []
        for name, sub in schema["properties"].items():
            negated = negate(
                t, sub, join_pointer(pointer, "properties", name), depth + 1, empty_formats
            )
            branches.append({"required": [name], "properties": {name: negated}})
        return {"type": "object", "anyOf": branches} if branches else False
    if first == "items" and keys == ["items"] and not isinstance(schema["items"], list):
        negated = negate(
            t, schema["items"], join_pointer(pointer, "items"), depth + 1, empty_formats
        )
        return {"type": "array", "contains": negated}
    simple: dict[str, tuple[str, str, int]] = {
        "minLength": ("string", "maxLength", -1),
        "maxLength": ("string", "minLength", 1),
        "minItems": ("array", "maxItems", -1),
        "maxItems": ("array", "minItems", 1),
        "minProperties": ("object", "maxProperties", -1),
        "maxProperties": ("object", "minProperties", 1),
    }
    if first in simple and len(keys) == 1:
        kind, opposite, shift = simple[first]
        bound = schema[first] + shift
        if bound < 0:
            return False
        return {"type": kind, opposite: bound}
    if (
        first in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
        and not any(
            isinstance(schema.get(k), bool) for k in ("exclusiveMinimum", "exclusiveMaximum")
        )
        and len(keys) == 1
    ):
        opposite = {
            "minimum": "exclusiveMaximum",
            "exclusiveMinimum": "maximum",
            "maximum": "exclusiveMinimum",
            "exclusiveMaximum": "minimum",
        }[first]
        return {"type": "number", opposite: schema[first]}
    if first in ("if", "then", "else") and "if" not in keys:
        return False
    raise UnsupportedSchemaError("not", pointer, f"cannot negate {', '.join(keys)}")


def _negate_members(
    t: Translation, schema: dict[str, Any], pointer: str, depth: int, empty_formats: bool
) -> Any:
    """``not {properties, additionalProperties}``: an object with a declared property whose
    value fails its schema, or with a member outside the declared names whose value fails
    ``additionalProperties``. The latter is kept as a ``not`` of the declared names (each
    ``true``) and ``additionalProperties``, which :func:`~formcast.regex.objects.object_regex`
    writes (see :func:`~formcast.regex.objects.member_exclusion`)."""
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        raise SchemaError(f"expected an object for properties at {pointer or '/'}")
    branches: list[Any] = []
    for name, sub in properties.items():
        negated = negate(
            t, sub, join_pointer(pointer, "properties", name), depth + 1, empty_formats
        )
        if negated is not False:
            branches.append({"required": [name], "properties": {name: negated}})
    outside = {"properties": dict.fromkeys(properties, True)}
    outside["additionalProperties"] = schema["additionalProperties"]
    if member_exclusion(outside) is not None:
        branches.append({"not": outside})
    return {"type": "object", "anyOf": branches} if branches else False


def _negate_one_of(
    t: Translation, branches: Any, pointer: str, depth: int, empty_formats: bool
) -> Any:
    """``not oneOf``: no branch holds, or two of them do (one ``allOf`` per pair)."""
    if not isinstance(branches, list) or not branches:
        raise SchemaError(f"expected a non-empty list for oneOf at {pointer or '/'}")
    none = {
        "allOf": [
            negate(t, branch, join_pointer(pointer, i), depth + 1, empty_formats)
            for i, branch in enumerate(branches)
        ]
    }
    pairs = [
        {"allOf": [branches[i], branches[j]]}
        for i in range(len(branches))
        for j in range(i + 1, len(branches))
    ]
    return {"anyOf": [none, *pairs]}


def _negation_groups(schema: dict[str, Any], keys: list[str]) -> list[list[str]]:
    """Split keywords into groups that must be negated together."""
    together = [
        {"properties", "patternProperties", "additionalProperties"},
        {"items", "additionalItems", "prefixItems"},
        {"contains", "minContains", "maxContains"},
        {"if", "then", "else"},
        {"type", "nullable"},
    ]
    if isinstance(schema.get("exclusiveMinimum"), bool):
        together.append({"minimum", "exclusiveMinimum"})
    if isinstance(schema.get("exclusiveMaximum"), bool):
        together.append({"maximum", "exclusiveMaximum"})
    groups: list[list[str]] = []
    used: set[str] = set()
    for key in keys:
        if key in used:
            continue
        group = [key]
        for bundle in together:
            if key in bundle:
                group = [k for k in keys if k in bundle]
        used.update(group)
        groups.append(group)
    return groups


def disjunction(
    t: Translation, flat: list[Part], index: int, keyword: str, refs: tuple[str, ...]
) -> Result:
    """The ``anyOf``/``oneOf`` (``keyword``) of ``flat[index]`` distributed over the other
    parts: one alternative per branch, each translated with all the siblings.

    ``oneOf`` branches must exclude each other: pairs not proven disjoint each get the
    negation of the other, or the ``oneOf`` is refused. A branch that cannot be enforced
    is dropped with a warning while another branch can be."""
    part = flat[index]
    branches = part.schema[keyword]
    if not isinstance(branches, list) or not branches:
        raise SchemaError(f"expected a non-empty list for {keyword} at {part.pointer or '/'}")
    rest = Part(
        {k: v for k, v in part.schema.items() if k != keyword}, part.pointer, part.synthetic
    )
    base = [*flat[:index], rest, *flat[index + 1 :]]
    branch_parts = [
        Part(b, join_pointer(part.pointer, keyword, i), part.synthetic)
        for i, b in enumerate(branches)
    ]
    extra: list[list[Part]] = [[] for _ in branches]
    excluded: list[tuple[Part, str]] = []  # branches negated for another, and why
    if keyword == "oneOf" and len(branches) > 1:
        # exactly one branch: each branch excludes the others it may overlap with,
        # by a proof of disjointness or else by the negation of the other branch
        for i in range(len(branches)):
            for j in range(i + 1, len(branches)):
                if _disjoint(t, [*base, branch_parts[i]], [*base, branch_parts[j]], refs, 0):
                    continue
                shared = _shared_types(t, base, branch_parts[i], branch_parts[j], refs)
                if shared is not None:
                    # on the types both branches leave free, every value holds in both
                    # (so in no branch of the oneOf); on the others they are disjoint
                    kept = {"type": sorted(ALL_TYPES - shared)}
                    for mine in (i, j):
                        extra[mine].append(Part(kept, branch_parts[mine].pointer, True))
                    continue
                for mine, other in ((i, j), (j, i)):
                    why = f"cannot prove that branches {i} and {j} exclude each other, "
                    negated = _exclusion(t, branch_parts[other], part.pointer, why)
                    excluded.append((branch_parts[other], why))
                    extra[mine].append(Part(negated, branch_parts[other].pointer, True))
    results: list[str] = []
    nevers: list[Never] = []
    failures: list[UnsupportedSchemaError] = []
    for branch, exclusions in zip(branch_parts, extra, strict=False):
        try:
            # the branch's properties come where the branch is declared
            result = t.gen([*base[: index + 1], branch, *exclusions, *base[index + 1 :]], refs)
        except UnsupportedSchemaError as error:
            # kept for its message, without its traceback and context: their frames include
            # this one, whose list holds it (a reference cycle, with every sub-schema part
            # on the way, left for the garbage collector)
            error.__context__ = None
            failures.append(error.with_traceback(None))
            continue
        if isinstance(result, Never):
            nevers.append(result)
        else:
            results.append(result)
    if not results:
        if failures:  # popped, not named: no local of this frame holds what it raises
            raise failures.pop(0)
        _refuse_inexact_exclusions(t, excluded, part.pointer)
        recursion = [n for n in nevers if n.keyword == "$ref"]
        return (recursion or nevers)[0]
    for failure in failures:
        warn(
            FormcastWarning(
                f"formcast: dropped a {keyword} branch that cannot be enforced ({failure}); "
                "the output uses the remaining branches"
            ),
            stacklevel=4,
        )
    return alt(results) or ""


def _exclusion(t: Translation, other: Part, pointer: str, why: str) -> Any:
    """The negation of the ``oneOf`` branch ``other``, a format's as no value (see
    :func:`negate`). Raises UnsupportedSchemaError (``oneOf``) when ``other`` cannot be
    negated."""
    try:
        return negate(t, other.schema, other.pointer, 0, empty_formats=True)
    except UnsupportedSchemaError as error:
        raise UnsupportedSchemaError(
            "oneOf", pointer, f"{why}nor negate branch {other.pointer} ({error.reason})"
        ) from None


def _refuse_inexact_exclusions(
    t: Translation, excluded: list[tuple[Part, str]], pointer: str
) -> None:
    """When no branch of a ``oneOf`` is left: raise the error an exact negation of an
    excluded branch raises (a format negated as no value may be what emptied them), if
    any. Run only then, so the exact negations cost nothing on the way that succeeds."""
    for other, why in excluded:
        try:
            negate(t, other.schema, other.pointer, 0)
        except UnsupportedSchemaError as error:
            reason = f"{why}nor negate branch {other.pointer} exactly ({error.reason})"
            raise UnsupportedSchemaError("oneOf", pointer, reason) from None


_FAMILIES: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (OBJECT_KEYWORDS, frozenset({"object"})),
    (ARRAY_KEYWORDS, frozenset({"array"})),
    (STRING_KEYWORDS, frozenset({"string"})),
    (NUMBER_KEYWORDS, frozenset({"integer", "number"})),
)
"""Per family of keywords, the JSON types they constrain (every other type passes them)."""


def _free_types(t: Translation, branch: Part, refs: tuple[str, ...]) -> set[str]:
    """Types on which ``branch`` holds for every value (a sound, partial answer): those
    its ``type`` allows and none of its keywords constrains. Any other keyword with a
    meaning for validation (``enum``, ``not``, ``anyOf``, ...) gives no type."""
    try:
        flat, _, never = t.flatten([branch], refs)
    except SchemaError:
        return set()
    if never is not None:
        return set()
    free = set(ALL_TYPES)
    for part in flat:
        for key, value in part.schema.items():
            if key == "type":
                named = {value} if isinstance(value, str) else set(value)
                free &= named | ({"integer"} if "number" in named else set())
            elif key in VALIDATION_KEYWORDS or key in REFUSED_KEYWORDS:
                family = next((types for keys, types in _FAMILIES if key in keys), None)
                if family is None:
                    return set()
                free -= family
    return free


def _shared_types(
    t: Translation, base: list[Part], a: Part, b: Part, refs: tuple[str, ...]
) -> set[str] | None:
    """The types on which ``oneOf`` branches ``a`` and ``b`` both hold for every value,
    when on every other type they share (with the siblings ``base``) they are proven
    disjoint; ``None`` otherwise. Excluding these types from both branches is exact: such
    a value is valid for two branches, so for the ``oneOf`` never. ``integer`` and
    ``number`` go together (a type list cannot keep non-integer numbers alone)."""
    try:
        fa, _, na = t.flatten([*base, a], refs)
        fb, _, nb = t.flatten([*base, b], refs)
    except SchemaError:
        return None
    if na is not None or nb is not None:
        return None
    free = _free_types(t, a, refs) & _free_types(t, b, refs)
    if ("integer" in free) != ("number" in free):
        free -= {"integer", "number"}
    try:
        common = _possible_types(t, fa) & _possible_types(t, fb)
        for kind in common - free:
            if not _type_disjoint(t, kind, fa, fb, refs, 0):
                return None
    except SchemaError:
        return None
    return free  # a free type outside ``common`` is one ``base`` refuses: excluding it is moot


def _possible_types(t: Translation, flat: Sequence[Part], depth: int = 0) -> set[str]:
    """Over-approximation of the JSON types valid for the conjunction (spec semantics).

    ``number`` here means a non-integer number.
    """
    allowed = set(ALL_TYPES)
    for part in flat:
        schema = part.schema
        declared = schema.get("type")
        if declared is not None:
            named = {declared} if isinstance(declared, str) else set(declared)
            if schema.get("nullable") is True:
                named.add("null")
            if "number" in named:
                named.add("integer")
            allowed &= named
        for keyword in ("const", "enum"):
            if keyword in schema:
                values = [schema["const"]] if keyword == "const" else schema["enum"]
                allowed &= {json_type(v) for v in values}
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema and depth < 4 and isinstance(schema[keyword], list):
                union: set[str] = set()
                for i, branch in enumerate(schema[keyword]):
                    try:
                        sub, _, never = t.flatten(
                            [Part(branch, join_pointer(part.pointer, keyword, i))], ()
                        )
                    except SchemaError:
                        union = set(ALL_TYPES)
                        break
                    if never is None or never.keyword == "$ref":
                        union |= (
                            _possible_types(t, sub, depth + 1) if never is None else set(ALL_TYPES)
                        )
                allowed &= union
        negated = schema.get("not")
        if (
            isinstance(negated, dict)
            and set(negated) <= {"type"} | ANNOTATION_KEYWORDS
            and "type" in negated
        ):
            named = {negated["type"]} if isinstance(negated["type"], str) else set(negated["type"])
            if "number" in named:
                named.add("integer")
            allowed -= named
    return allowed


def _disjoint(
    t: Translation, a: list[Part], b: list[Part], refs: tuple[str, ...], depth: int
) -> bool:
    """True when no JSON value can satisfy both conjunctions (a sound, partial test)."""
    if depth > 6:
        return False
    try:
        fa, _, na = t.flatten(a, refs)
        fb, _, nb = t.flatten(b, refs)
    except SchemaError:
        return False
    for never in (na, nb):
        if never is not None:
            return never.keyword != "$ref"
    try:
        common = _possible_types(t, fa) & _possible_types(t, fb)
        if not common:
            return True
        for mine, theirs in ((fa, fb), (fb, fa)):
            values = enum_candidates(mine)
            if values is not None:
                return not any(t.valid(v, mine) and t.valid(v, theirs) for v in values)
        return all(_type_disjoint(t, kind, fa, fb, refs, depth) for kind in common)
    except SchemaError:
        return False


def _patterns_disjoint(t: Translation, flat: Sequence[Part], low: float, high: float) -> bool:
    """True when no string of ``low..high`` characters satisfies every ``pattern`` and
    ``not: {pattern}`` of ``flat`` (the two sides of a ``oneOf`` pair together). Each
    side is read generously, so that the proof holds for every engine's reading: a
    pattern in its wide reading, a negated pattern as the complement of its narrow one.
    Formats and other keywords are left out (which only widens the sets). ``False``
    (not proven) without patterns, or past the size limits."""
    kept = [p.schema["pattern"] for p in flat if isinstance(p.schema.get("pattern"), str)]
    removed = [q for p in flat if (q := pattern_exclusion(p.schema.get("not"))) is not None]
    if not kept and not removed:
        return False
    try:
        product = intersection(
            [pattern_language(p, True, t.limits) for p in kept],
            [pattern_language(p, False, t.limits) for p in removed],
            t.limits,
        )
        shortest = 0 if math.isinf(low) else max(0, math.ceil(low))
        longest = None if math.isinf(high) else math.floor(high)
        return not has_word_between(product, shortest, longest)
    except (PatternUnsupported, DfaTooLarge):
        return False


def _type_disjoint(
    t: Translation, kind: str, fa: list[Part], fb: list[Part], refs: tuple[str, ...], depth: int
) -> bool:
    """True when no value of JSON type ``kind`` satisfies both (sound, partial): their
    length, item-count or numeric intervals do not meet, or a property required by one
    has disjoint schemas on both sides."""
    bounds = _INTERVAL_KEYWORDS.get(kind)
    if bounds is not None:
        (a_lo, a_hi), (b_lo, b_hi) = _interval(fa, *bounds), _interval(fb, *bounds)
        if a_hi < b_lo or b_hi < a_lo:
            return True
        if kind == "string":
            return _patterns_disjoint(t, [*fa, *fb], max(a_lo, b_lo), min(a_hi, b_hi))
        return False
    if kind == "object":
        return any(
            _disjoint(t, key_parts(fa, name), key_parts(fb, name), refs, depth + 1)
            for name in required_names(fa) + required_names(fb)
        )
    return False
