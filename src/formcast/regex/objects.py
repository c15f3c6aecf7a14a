"""Objects: ``properties``, ``required``, ``additionalProperties``/
``unevaluatedProperties``, ``patternProperties``, ``propertyNames`` and
``minProperties``/``maxProperties``.

Members come in declaration order (required-but-undeclared names last, extras after all
declared ones). ``k`` optional members are written by divide and conquer (``_nonempty``),
each ``O(log k)`` times; long member and extra regexes become definitions. Extra names
exclude the declared ones: from a free name through the trie of the declared names,
from a ``patternProperties`` key through the pattern's DFA crossed with it. Two patterns
whose names meet (:func:`regex_disjoint`) both apply to the names they share.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Sequence
from typing import Any

from formcast.automaton import DEAD, LazyAutomaton
from formcast.errors import SchemaError, UnsupportedSchemaError
from formcast.regex.context import Translation
from formcast.regex.dialect import (
    ESCAPED_CHAR,
    ESCAPED_KEY,
    PLAIN,
    alt,
    except_words,
    group,
    json_dumps,
    json_literal,
    opt,
    repeat,
)
from formcast.regex.enums import enum_candidates
from formcast.regex.parts import Never, Part, Result
from formcast.regex.patterns import (
    DfaTooLarge,
    PatternUnsupported,
    dfa_regex_or_plain,
    pattern_except,
    pattern_regex,
)
from formcast.regex.string_sets import intersection, pattern_language, word_language
from formcast.schema import ANNOTATION_KEYWORDS, join_pointer

# SHARE_MIN_LENGTH for the regexes written several times: optional members, extras
# pairs of states a disjointness walk visits before it gives up (a few tenths of a second)
_MAX_PRODUCT_STATES = 20_000


def member_exclusion(schema: Any) -> tuple[list[str], Any] | None:
    """The names and ``additionalProperties`` of ``{"not": {"properties": {n: true, ...},
    "additionalProperties": A}}``'s inner schema (those keywords and annotations alone, A
    not trivially true), else ``None``. Such a ``not`` stays in the conjunction: it means
    an object with a member named none of the names whose value fails ``A``, which
    :func:`object_regex` writes."""
    if not isinstance(schema, dict) or "additionalProperties" not in schema:
        return None
    if not all(
        k in ("properties", "additionalProperties") or k in ANNOTATION_KEYWORDS for k in schema
    ):
        return None
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or not all(
        v is True or v == {} for v in properties.values()
    ):
        return None
    extra = schema["additionalProperties"]
    if extra is True or extra == {}:
        return None
    return list(properties), extra


def object_regex(
    t: Translation,
    flat: list[Part],
    refs: tuple[str, ...],
    outside: tuple[list[str], Any, str] | None = None,
) -> Result:
    """Regex for the JSON objects satisfying every part; a Never when none does (a
    required property is impossible, or the counts leave no object). ``outside``
    (``names, schema, pointer``): the object must also have an extra member, named none
    of ``names``, whose value satisfies ``schema``.

    Raises UnsupportedSchemaError for property counts that would need counting optional
    or extra members, and for extra names that cannot be told from the declared ones."""
    for index, part in enumerate(flat):
        excluded = member_exclusion(part.schema.get("not"))
        if excluded is not None:
            return _with_member_outside(t, flat, index, excluded, refs)
    pointer = flat[0].pointer
    names: list[str] = []
    for part in flat:
        properties = part.schema.get("properties") or {}
        if not isinstance(properties, dict):
            raise SchemaError(f"expected an object for properties at {part.pointer or '/'}")
        names.extend(n for n in properties if n not in names)
    required = required_names(flat)
    names.extend(n for n in required if n not in names)
    name_parts = [
        Part(p.schema["propertyNames"], join_pointer(p.pointer, "propertyNames"), p.synthetic)
        for p in flat
        if "propertyNames" in p.schema
    ]
    min_props = 0
    max_props: int | None = None
    count_pointer = {"minProperties": pointer, "maxProperties": pointer}
    for part in flat:
        if "minProperties" in part.schema:
            min_props = max(min_props, int(part.schema["minProperties"]))
            count_pointer["minProperties"] = part.pointer
        if "maxProperties" in part.schema:
            count = int(part.schema["maxProperties"])
            max_props = count if max_props is None else min(max_props, count)
            count_pointer["maxProperties"] = part.pointer

    # declared members
    members: list[tuple[str, bool]] = []
    for name in names:
        is_required = name in required
        if name_parts and not t.valid(name, name_parts):
            if is_required:
                return Never(
                    "propertyNames",
                    name_parts[0].pointer,
                    f"required name {name!r} is not allowed",
                )
            continue
        value = t.gen(key_parts(flat, name), refs)
        if isinstance(value, Never):
            if is_required:
                return value
            continue
        if not is_required:  # optional members are written O(log k) times each
            value = t.share_repeated(value, where=("properties", pointer))
        members.append((json_literal(name) + t.colon + value, is_required))

    extras = _extras(t, flat, names, name_parts, refs)
    if extras is not None:
        extras = t.share_repeated(extras, where=("properties", pointer))  # written twice below
    witness: str | None = None
    if outside is not None:
        witness = _outside_member(t, flat, names, name_parts, outside, refs)
        if witness is None:
            return Never("not", outside[2], "no extra member can fail additionalProperties")
        if max_props is not None or min_props > 1 + sum(1 for _, r in members if r):
            raise UnsupportedSchemaError(
                "not", outside[2], "cannot count properties beside a required extra member"
            )
    n_required = sum(1 for _, r in members if r)
    n_optional = len(members) - n_required
    if (
        extras is None
        and n_optional > 0
        and ((max_props is not None and len(members) > max_props) or min_props > n_required)
    ):
        counted = _counted_members(t, members, min_props, max_props, count_pointer)
        if counted is not None:
            return counted
    extra_limit: int | None = None
    if max_props is not None:
        if n_required > max_props:
            return Never(
                "maxProperties",
                count_pointer["maxProperties"],
                "more required properties than maxProperties",
            )
        if n_optional == 0:
            extra_limit = max_props - n_required
        elif extras is not None or len(members) > max_props:
            raise UnsupportedSchemaError(
                "maxProperties",
                count_pointer["maxProperties"],
                "cannot count optional properties",
            )
    if extra_limit == 0:
        extras = None
    nonempty = False
    if min_props > n_required:
        if n_required == 0 and min_props == 1 and (members or extras is not None):
            nonempty = True
        else:
            raise UnsupportedSchemaError(
                "minProperties",
                count_pointer["minProperties"],
                "cannot count optional or extra properties",
            )

    # assemble: each element is (first form, comma form, trailing form, required)
    elements: list[tuple[str, str, str, bool]] = []
    for member, is_required in members:
        comma = t.sep + member
        elements.append(
            (
                member,
                comma if is_required else opt(comma),
                opt(member + t.sep),
                is_required,
            )
        )
    if witness is not None:
        # any extras around one that is the required witness
        around = "" if extras is None else group(extras + t.sep)
        after = "" if extras is None else group(t.sep + extras)
        first = (around + "*" if around else "") + witness + (after + "*" if after else "")
        elements.append((first, t.sep + first, "", True))
    elif extras is not None:
        more = None if extra_limit is None else extra_limit - 1
        first = extras + repeat(t.sep + extras, 0, more)
        elements.append((first, repeat(t.sep + extras, 0, extra_limit), "", False))
    if not elements:
        return rf"\{{{t.ws}\}}"
    required_at = [i for i, e in enumerate(elements) if e[3]]
    if required_at:
        r = required_at[0]
        body = (
            "".join(e[2] for e in elements[:r])
            + elements[r][0]
            + "".join(e[1] for e in elements[r + 1 :])
        )
        return rf"\{{{t.ws}{body}{t.ws}\}}"
    body = _nonempty(elements)
    if nonempty:
        return rf"\{{{t.ws}{body}{t.ws}\}}"
    return rf"\{{{t.ws}(?:{body}{t.ws})?\}}"


MAX_COUNTED_SUBSETS = 256
"""Most sets of optional properties :func:`_counted_members` writes out one by one."""


def _counted_members(
    t: Translation,
    members: list[tuple[str, bool]],
    low: int,
    high: int | None,
    count_pointer: dict[str, str],
) -> Result | None:
    """Objects of the declared ``members`` alone (no other name allowed) with
    ``low..high`` members in all: one alternative per set of optional members that
    gives an allowed count, each in declaration order. ``None`` past
    :data:`MAX_COUNTED_SUBSETS` sets; a Never when no count is allowed."""
    optional = [i for i, (_, is_required) in enumerate(members) if not is_required]
    n_required = len(members) - len(optional)
    most = len(optional) if high is None else min(high - n_required, len(optional))
    sizes = range(max(low - n_required, 0), most + 1)
    if sum(math.comb(len(optional), size) for size in sizes) > MAX_COUNTED_SUBSETS:
        return None
    bodies = []
    for size in sizes:
        for chosen in itertools.combinations(optional, size):
            kept = [m for i, (m, is_required) in enumerate(members) if is_required or i in chosen]
            bodies.append(t.sep.join(kept))
    nonempty = alt(b for b in bodies if b)
    if nonempty is None:
        if "" in bodies:
            return rf"\{{{t.ws}\}}"
        keyword = "minProperties" if low > len(members) else "maxProperties"
        return Never(keyword, count_pointer[keyword], "no number of properties is allowed")
    if "" in bodies:
        return rf"\{{{t.ws}(?:{nonempty}{t.ws})?\}}"
    return rf"\{{{t.ws}{group(nonempty)}{t.ws}\}}"


def _with_member_outside(
    t: Translation,
    flat: list[Part],
    index: int,
    exclusion: tuple[list[str], Any],
    refs: tuple[str, ...],
) -> Result:
    """The objects of ``flat`` that also have a member named none of the exclusion's names
    whose value fails its ``additionalProperties`` (``flat[index]``'s ``not``): one
    alternative per name the other parts declare, that member required with a failing
    value, and one where the member is an extra."""
    names_out, extra = exclusion
    part = flat[index]
    where = join_pointer(part.pointer, "not")
    rest = Part({k: v for k, v in part.schema.items() if k != "not"}, part.pointer, part.synthetic)
    others = [*flat[:index], rest, *flat[index + 1 :]]
    failing = t.negate(extra, join_pointer(where, "additionalProperties"))
    declared: list[str] = []
    for other in others:
        properties = other.schema.get("properties")
        declared.extend(n for n in properties or {} if n not in declared)
    declared.extend(n for n in required_names(others) if n not in declared)
    results: list[Result] = []
    for name in declared:
        if name not in names_out:
            member = {"type": "object", "required": [name], "properties": {name: failing}}
            results.append(t.gen([*others, Part(member, where, True)], refs))
    results.append(object_regex(t, others, refs, (names_out, failing, where)))
    found = [r for r in results if isinstance(r, str)]
    if found:
        return alt(found) or ""
    return next(r for r in results if isinstance(r, Never))


def _outside_member(
    t: Translation,
    flat: list[Part],
    names: list[str],
    name_parts: list[Part],
    outside: tuple[list[str], Any, str],
    refs: tuple[str, ...],
) -> str | None:
    """Regex for one extra member named none of ``names`` nor the outside names, whose
    value satisfies the extras' schemas and the outside schema; ``None`` if none can be.
    In generation mode an object without ``additionalProperties`` has no extras to give."""
    names_out, schema, where = outside
    if t.mode == "generation" and not any(
        "additionalProperties" in p.schema or "patternProperties" in p.schema for p in flat
    ):
        return None
    excluded = [*names, *(n for n in names_out if n not in names)]
    witness = Part({"additionalProperties": schema}, where, True)
    return _extras(t, [*flat, witness], excluded, name_parts, refs)


def required_names(flat: Sequence[Part]) -> list[str]:
    """The names every part requires, in order of first mention."""
    names: list[str] = []
    for part in flat:
        listed = part.schema.get("required")
        if isinstance(listed, list):
            names.extend(n for n in listed if isinstance(n, str) and n not in names)
    return names


def key_parts(flat: Sequence[Part], name: str) -> list[Part]:
    """The schemas a property ``name`` must satisfy (spec semantics, no gen defaults)."""
    out: list[Part] = []
    for part in flat:
        schema = part.schema
        properties = schema.get("properties") or {}
        if not isinstance(properties, dict):
            raise SchemaError(f"expected an object for properties at {part.pointer or '/'}")
        matched = False
        if name in properties:
            out.append(
                Part(
                    properties[name],
                    join_pointer(part.pointer, "properties", name),
                    part.synthetic,
                )
            )
            matched = True
        patterns = schema.get("patternProperties") or {}
        for pattern, sub in patterns.items():
            if key_matches(pattern, name, part.pointer):
                out.append(
                    Part(
                        sub,
                        join_pointer(part.pointer, "patternProperties", pattern),
                        part.synthetic,
                    )
                )
                matched = True
        if not matched:
            for keyword in ("additionalProperties", "unevaluatedProperties"):
                if keyword in schema:
                    out.append(
                        Part(schema[keyword], join_pointer(part.pointer, keyword), part.synthetic)
                    )
                    break
    return out


def pattern_for_key(pattern: str, pointer: str, keyword: str) -> str | None:
    """Regex for a JSON string token (with quotes) whose value matches ``pattern``;
    ``None`` when no string does. Raises UnsupportedSchemaError, blaming ``keyword`` at
    ``pointer``, for a pattern that cannot be translated."""
    try:
        return _key_token(pattern)
    except PatternUnsupported as error:
        raise UnsupportedSchemaError(
            keyword, pointer, f"cannot translate pattern: {error}"
        ) from None


@functools.lru_cache(maxsize=1024)
def _key_token(pattern: str) -> str | None:
    body, _ = pattern_regex(pattern, 0, None, plain=True)
    return None if body is None else f'"{body}"'


def key_matches(pattern: str, name: str, pointer: str) -> bool:
    """Whether the property ``name`` matches the ``patternProperties`` key ``pattern``."""
    regex = pattern_for_key(pattern, pointer, "patternProperties")
    return regex is not None and re.fullmatch(regex, json_dumps(name)) is not None


def _extras(
    t: Translation,
    flat: list[Part],
    names: list[str],
    name_parts: list[Part],
    refs: tuple[str, ...],
) -> str | None:
    """Regex for one extra (undeclared) member, or ``None`` if none may appear."""
    has_patterns = any(p.schema.get("patternProperties") for p in flat)
    explicit: list[Part] = []
    forbidden = False
    for part in flat:
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if keyword in part.schema:
                value = part.schema[keyword]
                if value is False:
                    forbidden = True
                explicit.append(Part(value, join_pointer(part.pointer, keyword), part.synthetic))
                break
    if has_patterns and name_parts:
        raise UnsupportedSchemaError(
            "propertyNames",
            name_parts[0].pointer,
            "cannot be combined with patternProperties",
        )
    alternatives: list[str] = []
    free_allowed = not forbidden
    if t.mode == "generation" and not explicit:
        free_allowed = False
    if free_allowed:
        value = t.gen(explicit, refs) if explicit else t.any_value(t.any_depth)
        if not isinstance(value, Never):
            if has_patterns:
                key = _unmatched_key(t, flat, names)
            else:
                key = _free_key(t, names, name_parts, refs)
            if key is not None:
                alternatives.append(key + t.colon + value)
    if has_patterns:
        alternatives.extend(_pattern_members(t, flat, names, refs))
    return alt(alternatives)


def _unmatched_key(t: Translation, flat: list[Part], names: list[str]) -> str | None:
    """Regex for the JSON string token of an extra name that matches no
    ``patternProperties`` key and is no declared name: the complement of the patterns in
    their wide reading (so no name some validator finds matching slips in as an extra),
    minus the trie of the names. Written in every JSON spelling, or, when that regex is
    past the pattern limits (each character set spelled with its escapes is long), in the
    plain spelling alone. ``None`` if no such name exists, or if the complement is past
    the limits or uses syntax read inexactly: extras are then not produced, which keeps
    every output valid (a narrowing, never a loosening)."""
    patterns = [p for part in flat for p in part.schema.get("patternProperties") or {}]
    try:
        removed = [pattern_language(p, wide=True, limits=t.limits) for p in patterns]
        removed += [word_language(name) for name in names]
        unmatched = intersection([], removed, t.limits)
        body = dfa_regex_or_plain(unmatched.moves, unmatched.accepting, False, t.limits)
    except (PatternUnsupported, DfaTooLarge):
        return None
    return None if body is None else f'"{body}"'


def _free_key(
    t: Translation, names: list[str], name_parts: list[Part], refs: tuple[str, ...]
) -> str | None:
    if not name_parts:
        body = except_words(PLAIN, names, 0, None)
        plain = None if body is None else f'"{body}"'
        if any(ESCAPED_CHAR.search(name) for name in names):
            return plain
        return alt([x for x in (plain, ESCAPED_KEY) if x is not None])
    flat, _, never = t.flatten(name_parts, refs)
    if never is not None:
        return None
    candidates = enum_candidates(flat)
    if candidates is not None:
        allowed = [
            v for v in candidates if isinstance(v, str) and v not in names and t.valid(v, flat)
        ]
        return alt(json_literal(v) for v in allowed)
    saved = t.plain_strings, t.sharing
    t.plain_strings, t.sharing = True, False  # the key is matched with re below
    try:
        key = t.gen([*name_parts, Part({"type": "string"}, name_parts[0].pointer, True)], refs)
    finally:
        t.plain_strings, t.sharing = saved
    if isinstance(key, Never):
        return None
    for name in names:
        if re.fullmatch(key, json_dumps(name)):
            raise UnsupportedSchemaError(
                "propertyNames",
                name_parts[0].pointer,
                f"allowed extra names include the declared name {name!r}, which cannot be excluded",
            )
    return key


def _pattern_members(
    t: Translation, flat: list[Part], names: list[str], refs: tuple[str, ...]
) -> list[str]:
    out = []
    for part in flat:
        patterns = part.schema.get("patternProperties") or {}
        for pattern, sub in patterns.items():
            ptr = join_pointer(part.pointer, "patternProperties", pattern)
            key = pattern_for_key(pattern, part.pointer, "patternProperties")
            if key is None:
                continue
            declared = [name for name in names if re.fullmatch(key, json_dumps(name))]
            if declared:
                try:
                    key = pattern_except(pattern, declared, t.limits)
                except DfaTooLarge:
                    raise UnsupportedSchemaError(
                        "patternProperties",
                        part.pointer,
                        f"pattern {pattern!r} matches the declared property "
                        f"{declared[0]!r}, which cannot be excluded from the extra names",
                    ) from None
                if key is None:
                    continue
            value_parts = [Part(sub, ptr, part.synthetic)]
            for other_part in flat:
                other_patterns = other_part.schema.get("patternProperties") or {}
                for other, other_sub in other_patterns.items():
                    if other_part is part and other == pattern:
                        continue
                    other_key = pattern_for_key(other, other_part.pointer, "patternProperties")
                    if other_key is not None and not regex_disjoint(key, other_key):
                        value_parts.append(
                            Part(
                                other_sub,
                                join_pointer(other_part.pointer, "patternProperties", other),
                                other_part.synthetic,
                            )
                        )
                if other_part is not part:
                    for keyword in ("additionalProperties", "unevaluatedProperties"):
                        if keyword in other_part.schema:
                            value_parts.append(
                                Part(
                                    other_part.schema[keyword],
                                    join_pointer(other_part.pointer, keyword),
                                    other_part.synthetic,
                                )
                            )
                            break
            value = t.gen(value_parts, refs)
            if not isinstance(value, Never):
                out.append(key + t.colon + value)
    return out


def _nonempty(elements: list[tuple[str, str, str, bool]]) -> str:
    """Non-empty member list of optional elements, in order (divide and conquer).

    ``F(A + B) = F(A) C(B) | F(B)`` where ``C`` chains the comma forms; each element regex
    appears ``O(log k)`` times, so ``k`` optional properties cost ``O(k log k)``.
    """
    if len(elements) == 1:
        return elements[0][0]
    middle = len(elements) // 2
    head, tail = elements[:middle], elements[middle:]
    return alt([_nonempty(head) + "".join(e[1] for e in tail), _nonempty(tail)]) or ""


@functools.lru_cache(maxsize=4096)
def regex_disjoint(a: str, b: str, max_pairs: int = _MAX_PRODUCT_STATES) -> bool:
    """True when the two regexes provably match no common string.

    A walk over the pairs of states of their byte automata that some input reaches
    together: disjoint when no such pair accepts in both. ``False`` (not proven) past
    ``max_pairs`` pairs, or when either regex is refused by the automaton."""
    try:
        first, second = LazyAutomaton(a), LazyAutomaton(b)
    except SchemaError:
        return False
    start = (first.initial, second.initial)
    seen = {start}
    pending = [start]
    while pending:
        state_a, state_b = pending.pop()
        if first.is_accepting(state_a) and second.is_accepting(state_b):
            return False
        row_a, row_b = first.row(state_a), second.row(state_b)
        both = (row_a != DEAD) & (row_b != DEAD)
        for pair in zip(row_a[both].tolist(), row_b[both].tolist(), strict=True):
            if pair not in seen:
                if len(seen) >= max_pairs:
                    return False
                seen.add(pair)
                pending.append(pair)
    return True
