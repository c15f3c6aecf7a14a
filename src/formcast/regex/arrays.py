"""Arrays: ``items`` (schema or array form), ``prefixItems``, ``additionalItems``,
``unevaluatedItems``, ``minItems``/``maxItems``, ``contains`` and ``uniqueItems``.

Positional items are written one after the other, the first ``minItems`` required and
the rest nested optionals; the tail item regex is written twice (first item, then
``sep item`` repeated). ``contains`` (one schema, no length bounds) puts one matching
item among any number of plain ones.
"""

from __future__ import annotations

import json
import math

from formcast.errors import UnsupportedSchemaError
from formcast.regex.context import Translation
from formcast.regex.dialect import alt, group, json_literal, opt, repeat
from formcast.regex.enums import canonical, enum_candidates
from formcast.regex.parts import Never, Part, Result
from formcast.schema import join_pointer


def array_regex(t: Translation, flat: list[Part], refs: tuple[str, ...]) -> Result:
    """Regex for the JSON arrays satisfying every part; a Never when none does (an item
    that must be there is impossible, or the counts leave no length).

    Raises UnsupportedSchemaError for ``maxContains``, ``minContains`` > 1, ``contains``
    with length bounds or positional items, and ``uniqueItems`` in ``specification`` mode
    (an automaton cannot compare items)."""
    min_items = 0
    max_items: int | None = None
    pointer = flat[0].pointer
    layouts: list[tuple[list[Part], Part | None]] = []
    contains: list[Part] = []
    unique_pointer: str | None = None
    for part in flat:
        schema = part.schema
        ptr = part.pointer
        if "minItems" in schema:
            min_items = max(min_items, int(schema["minItems"]))
        if "maxItems" in schema:
            value = int(schema["maxItems"])
            max_items = value if max_items is None else min(max_items, value)
        if schema.get("uniqueItems") is True:
            unique_pointer = ptr
        prefix: list[Part] = []
        tail: Part | None = None
        items = schema.get("items")
        if "prefixItems" in schema:
            prefix = [
                Part(s, join_pointer(ptr, "prefixItems", i), part.synthetic)
                for i, s in enumerate(schema["prefixItems"])
            ]
            if "items" in schema:
                tail = Part(items, join_pointer(ptr, "items"), part.synthetic)
        elif isinstance(items, list):
            prefix = [
                Part(s, join_pointer(ptr, "items", i), part.synthetic) for i, s in enumerate(items)
            ]
            if "additionalItems" in schema:
                tail = Part(
                    schema["additionalItems"],
                    join_pointer(ptr, "additionalItems"),
                    part.synthetic,
                )
        elif "items" in schema:
            tail = Part(items, join_pointer(ptr, "items"), part.synthetic)
        if tail is None and "unevaluatedItems" in schema:
            tail = Part(
                schema["unevaluatedItems"],
                join_pointer(ptr, "unevaluatedItems"),
                part.synthetic,
            )
        layouts.append((prefix, tail))
        if "contains" in schema:
            min_contains = schema.get("minContains", 1)
            if "maxContains" in schema:
                raise UnsupportedSchemaError(
                    "maxContains", ptr, "counting matching items cannot be enforced"
                )
            if min_contains > 1:
                raise UnsupportedSchemaError(
                    "minContains", ptr, "counting matching items cannot be enforced"
                )
            if min_contains == 1:
                contains.append(
                    Part(schema["contains"], join_pointer(ptr, "contains"), part.synthetic)
                )
    many = max_items is None or max_items > 1
    if unique_pointer is not None and many and t.mode == "specification":
        distinct = None if contains else _distinct_arrays(t, layouts, min_items, max_items, refs)
        if distinct is None:
            raise UnsupportedSchemaError(
                "uniqueItems",
                unique_pointer,
                "an automaton cannot enforce distinct items (only among at most "
                f"{MAX_DISTINCT_ARRAYS} arrangements of enumerated values)",
            )
        return distinct
    if max_items is not None and max_items < min_items:
        return Never("maxItems", pointer, "maxItems is below minItems")
    prefix_length = max((len(p) for p, _ in layouts), default=0)

    def position(i: int) -> list[Part]:
        out = []
        for prefix, tail in layouts:
            if i < len(prefix):
                out.append(prefix[i])
            elif tail is not None:
                out.append(tail)
        return out

    tail_parts = [t for p, t in layouts if t is not None]
    cut: Never | None = None
    elements: list[str] = []
    limit = prefix_length if max_items is None else min(prefix_length, max_items)
    for i in range(limit):
        result = t.gen(position(i), refs)
        if isinstance(result, Never):
            cut = result
            break
        elements.append(result)
    tail_regex: str | None = None
    if cut is None and (max_items is None or max_items > len(elements)):
        result = t.gen(tail_parts, refs)
        if isinstance(result, Never):
            cut = result
        else:
            tail_regex = result
    most = len(elements) if tail_regex is None else max_items
    if most is not None and most < min_items:
        return cut or Never("minItems", pointer, "no array of minItems items is possible")
    if contains:
        if (
            len({json.dumps(c.schema, sort_keys=True) for c in contains}) > 1
            or prefix_length
            or (max_items is not None or min_items > 1)
        ):
            raise UnsupportedSchemaError(
                "contains",
                contains[0].pointer,
                "contains is only supported with a single items schema and no length bounds",
            )
        matching = t.gen(tail_parts + contains[:1], refs)
        if isinstance(matching, Never):
            return matching
        if tail_regex is None:
            body = matching
        else:
            body = f"(?:{tail_regex}{t.sep})*{matching}(?:{t.sep}{tail_regex})*"
        return rf"\[{t.ws}{body}{t.ws}\]"
    k = len(elements)
    if k == 0:
        if tail_regex is None:
            return rf"\[{t.ws}\]"
        high = None if most is None else most - 1
        body = tail_regex + repeat(t.sep + tail_regex, max(0, min_items - 1), high)
        may_be_empty = min_items == 0
    else:
        rest = ""
        if tail_regex is not None:
            rest = repeat(
                t.sep + tail_regex,
                max(0, min_items - k),
                None if max_items is None else max_items - k,
            )
        for i in reversed(range(k)):
            segment = ("" if i == 0 else t.sep) + elements[i] + rest
            rest = segment if (i < min_items or i == 0) else opt(segment)
        body = rest
        may_be_empty = min_items == 0
    if may_be_empty:
        return rf"\[{t.ws}(?:{body}{t.ws})?\]"
    return rf"\[{t.ws}{body}{t.ws}\]"


MAX_DISTINCT_ARRAYS = 512
"""Most arrays of distinct enumerated items :func:`_distinct_arrays` writes out."""


def _distinct_arrays(
    t: Translation,
    layouts: list[tuple[list[Part], Part | None]],
    min_items: int,
    max_items: int | None,
    refs: tuple[str, ...],
) -> Result | None:
    """``uniqueItems`` over items from a finite set: every arrangement of distinct
    values the items schema enumerates (``enum``/``const``, each checked against the
    items schema), with ``min_items..max_items`` of them, as a tree of alternatives.
    ``None`` (not handled) with positional items, items that are not enumerated, or more
    than :data:`MAX_DISTINCT_ARRAYS` arrangements."""
    if any(prefix for prefix, _ in layouts):
        return None
    tails = [tail for _, tail in layouts if tail is not None]
    flat, _, never = t.flatten(tails, refs)
    candidates = None if never is not None else enum_candidates(flat)
    if candidates is None:
        return None
    values: dict[str, str] = {}  # canonical form -> JSON text, valid values only
    for value in candidates:
        key = canonical(value)
        if key not in values and t.valid(value, flat):
            values[key] = json_literal(value)
    most = len(values) if max_items is None else min(max_items, len(values))
    arrangements = sum(math.perm(len(values), k) for k in range(min_items, most + 1))
    if arrangements > MAX_DISTINCT_ARRAYS:
        return None
    if arrangements == 0:
        return Never("uniqueItems", flat[0].pointer if flat else "", "too few distinct items")

    first = (
        alt(values[key] + _after(values, (key,), min_items, most, t.sep) for key in values)
        if most > 0
        else None
    )
    if first is None:
        return rf"\[{t.ws}\]"
    if min_items == 0:
        return rf"\[{t.ws}(?:{first}{t.ws})?\]"
    return rf"\[{t.ws}{group(first)}{t.ws}\]"


def _after(
    values: dict[str, str], used: tuple[str, ...], min_items: int, most: int, sep: str
) -> str:
    """The rest of an array of distinct ``values`` whose first items are ``used`` (a
    module function: a nested one that calls itself is a reference cycle, which would
    keep the translation it reads alive until the garbage collector runs)."""
    options = [""] if len(used) >= min_items else []
    if len(used) < most:
        options += [
            sep + values[key] + _after(values, (*used, key), min_items, most, sep)
            for key in values
            if key not in used
        ]
    return alt(options) or ""
