"""Strings: ``minLength``/``maxLength``, ``pattern`` and ``format``.

A string regex is the JSON string token: quotes, then the contents. Unconstrained
contents allow every JSON spelling (:data:`~formcast.regex.dialect.STRING_CHAR`); a
``pattern`` or a ``format`` gives each character one spelling. Lengths count decoded
characters. Where a length cannot be fitted to one repetition of a pattern, the pattern's
DFA is crossed with a counter: with ``maxLength``, one definition per (state, length)
pair (:func:`bounded_pattern`); with ``minLength`` alone, a regex rebuilt by state
elimination (:func:`long_pattern`). Both are capped (see :mod:`formcast.regex.patterns`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from formcast.charset import Ranges
from formcast.errors import UnknownFormatWarning, UnsupportedSchemaError, warn
from formcast.limits import DEFAULT_LIMITS, Limits
from formcast.regex.context import Translation
from formcast.regex.dialect import (
    PLAIN,
    PLAIN_CHAR,
    STRING_CHAR,
    alt,
    encoded_set,
    except_words,
    json_dumps,
    repeat,
)
from formcast.regex.formats import (
    FREE_STRING_FORMATS,
    SPEC_STRING_FORMATS,
    STRING_FORMATS,
    format_length_of,
)
from formcast.regex.more_formats import (
    DECODED_FORMATS,
    GENERATION_FORMATS,
    JSON_SCHEMA_FORMATS,
    SPELLED_FORMATS,
)
from formcast.regex.parts import Never, Part, Result, TooLarge
from formcast.regex.patterns import (
    DfaTooLarge,
    PatternUnsupported,
    dfa_regex_or_plain,
    pattern_dfa,
    pattern_regex,
    pattern_union,
)
from formcast.regex.string_sets import (
    has_word_between,
    intersection,
    pattern_language,
    word_language,
)
from formcast.schema import ANNOTATION_KEYWORDS, Mode, join_pointer


def pattern_exclusion(schema: Any) -> str | None:
    """The pattern of ``{"not": {"pattern": p}}``'s inner schema (a pattern and
    annotations alone), else ``None``. Such a ``not`` stays in the conjunction: it means
    a string that ``p`` does not match, which :func:`string_regex` writes exactly."""
    if (
        isinstance(schema, dict)
        and isinstance(schema.get("pattern"), str)
        and all(k == "pattern" or k in ANNOTATION_KEYWORDS for k in schema)
    ):
        return str(schema["pattern"])
    return None


def string_regex(t: Translation, flat: list[Part], excluded: list[Any]) -> Result:
    """Regex for the JSON strings satisfying the length, ``pattern``, ``not: {pattern}``
    and ``format`` keywords of every part, minus the ``excluded`` values; a Never when
    none does.

    One pattern is translated on its own; several, or any pattern negation, are crossed
    as character DFAs (:mod:`formcast.regex.string_sets`). Raises UnsupportedSchemaError
    for several formats, a pattern with a format, lengths a format or a pattern cannot be
    crossed with, patterns whose product is past the size limits, and exclusions that
    cannot be written."""
    low = 0
    high: int | None = None
    length_pointer = {"minLength": flat[0].pointer, "maxLength": flat[0].pointer}
    patterns: list[tuple[str, str]] = []
    negated: list[tuple[str, str]] = []
    formats: list[tuple[str, str]] = []
    for part in flat:
        schema = part.schema
        if "minLength" in schema:
            low = max(low, int(schema["minLength"]))
            length_pointer["minLength"] = part.pointer
        if "maxLength" in schema:
            value = int(schema["maxLength"])
            high = value if high is None else min(high, value)
            length_pointer["maxLength"] = part.pointer
        if isinstance(schema.get("pattern"), str) and schema["pattern"] not in [
            p for p, _ in patterns
        ]:
            patterns.append((schema["pattern"], part.pointer))
        inverse = pattern_exclusion(schema.get("not"))
        if inverse is not None and inverse not in [p for p, _ in negated]:
            negated.append((inverse, join_pointer(part.pointer, "not")))
        if isinstance(schema.get("format"), str) and schema["format"] not in [
            f for f, _ in formats
        ]:
            formats.append((schema["format"], part.pointer))
    if high is not None and high < low:
        return Never("maxLength", length_pointer["maxLength"], "maxLength is below minLength")
    known: list[tuple[str, str]] = []
    for name, pointer in formats:
        if known_format(name, t.mode) is not None:
            known.append((name, pointer))
        elif not (name in FREE_STRING_FORMATS and t.mode == "generation"):
            any_string = any(part.schema.get(ANY_STRING_KEYWORD) is True for part in flat)
            unknown_format(name, pointer, t.mode, t.formats_asserted, any_string)
    json_content = _json_content(t, flat)
    if json_content is not None:
        if known or patterns or negated or low > 0 or high is not None:
            raise UnsupportedSchemaError(
                "contentSchema", json_content[1], "JSON text in a string takes no other keyword"
            )
        return _json_string(t, *json_content)
    if len(known) > 1:
        raise UnsupportedSchemaError(
            "format", known[1][1], "several different formats cannot be combined"
        )
    if known and (patterns or negated):
        # the format's regex over the decoded string, crossed with the patterns as one
        name, pointer = known[0]
        decoded = DECODED_FORMATS.get(name) or (
            format_regex(name, 0, None, t.mode) or known_format(name, t.mode)
        )
        if not patterns or not _patterns_within(t, patterns, f"^(?:{decoded})$", low, high):
            patterns.append((f"^(?:{decoded})$", pointer))
        known = []
    words = [v for v in excluded if isinstance(v, str)]
    if len(patterns) > 1 or negated:
        return _pattern_set(t, patterns, negated, words, low, high)
    one_spelling = True
    if known:
        name, pointer = known[0]
        exact = format_regex(name, low, high, t.mode)
        regex = known_format(name, t.mode)
        f_low, f_high = (0, math.inf)
        if regex and name not in SPELLED_FORMATS:
            f_low, f_high = format_length_of(regex)
        elif name in SPELLED_FORMATS:  # lengths count decoded characters, not spellings
            f_low, f_high = (0, math.inf) if low == 0 and high is None else (-1, math.inf)
        if exact is not None:
            f_low, f_high = low, high or 0
        if f_low < low:
            raise UnsupportedSchemaError(
                "minLength",
                length_pointer["minLength"],
                f"cannot be combined with format {name!r}",
            )
        if high is not None and f_high > high:
            raise UnsupportedSchemaError(
                "maxLength",
                length_pointer["maxLength"],
                f"cannot be combined with format {name!r}",
            )
        body: str | None = exact or regex
    elif patterns:
        pattern, pointer = patterns[0]
        try:
            body, bad = pattern_regex(pattern, low, high, t.plain_strings)
        except PatternUnsupported as error:
            raise UnsupportedSchemaError(
                "pattern", pointer, f"cannot translate pattern: {error}"
            ) from None
        if bad is not None:
            body = bounded_pattern(t, pattern, low, high)
            if body is None:
                raise UnsupportedSchemaError(
                    bad, length_pointer[bad], f"cannot be combined with pattern {pattern!r}"
                )
        if body is None:
            return Never(
                "pattern", pointer, "no string matches the pattern within the length bounds"
            )
        if words and ("(?&" in body or _matches_any(body, words)):
            return _pattern_set(t, patterns, negated, words, low, high)
    else:
        one_spelling = t.plain_strings
        char = PLAIN_CHAR if t.plain_strings else STRING_CHAR
        body = repeat(char, low, high)
    if words:
        if one_spelling:
            assert body is not None
            if "(?&" in body or _matches_any(body, words):
                raise UnsupportedSchemaError(
                    "not", flat[0].pointer, "cannot exclude these strings here"
                )
        else:
            body = except_words(PLAIN, words, low, high)
            if body is None:
                return Never("not", flat[0].pointer, "every allowed string is excluded")
    return f'"{body}"'


def _patterns_within(
    t: Translation, patterns: list[tuple[str, str]], outer: str, low: int, high: int | None
) -> bool:
    """Whether every string of ``low..high`` characters the ``patterns`` all match also
    matches ``outer`` (then ``outer`` need not be crossed with them); ``False`` when that
    cannot be told within the size limits."""
    try:
        kept = [pattern_language(p, False, t.limits) for p, _ in patterns]
        removed = [pattern_language(outer, False, t.limits)]
        return not has_word_between(intersection(kept, removed, t.limits), low, high)
    except (PatternUnsupported, DfaTooLarge):
        return False


def _matches_any(body: str, words: list[str]) -> bool:
    """Whether the string contents regex ``body`` matches the spelling of some word."""
    return any(re.fullmatch(body, json_dumps(w)[1:-1]) for w in words)


def _pattern_set(
    t: Translation,
    patterns: list[tuple[str, str]],
    negated: list[tuple[str, str]],
    words: list[str],
    low: int,
    high: int | None,
) -> Result:
    """The strings of ``low..high`` characters every pattern of ``patterns`` matches, no
    pattern of ``negated`` matches (in its wide reading), and none of ``words`` is: the
    product of their character DFAs, with the lengths counted as for one pattern."""
    pointer = (patterns or negated)[0][1]
    try:
        kept = [pattern_language(p, False, t.limits) for p, _ in patterns]
        removed = [pattern_language(p, True, t.limits) for p, _ in negated]
        removed += [word_language(w) for w in words]
        product = intersection(kept, removed, t.limits)
        empty = not has_word_between(product, low, high)
    except PatternUnsupported as error:
        raise UnsupportedSchemaError(
            "pattern", pointer, f"cannot translate pattern: {error}"
        ) from None
    except DfaTooLarge:
        raise UnsupportedSchemaError(
            "pattern", pointer, "these patterns cross into an automaton past the size limits"
        ) from None
    if empty:
        return Never("pattern", pointer, "no string matches the patterns within the length bounds")
    body = dfa_contents(t, list(product.moves), list(product.accepting), low, high)
    if body is None:
        keyword = "maxLength" if high is not None else "pattern"
        raise UnsupportedSchemaError(
            keyword, pointer, "these patterns and lengths cross past the size limits"
        )
    return f'"{body}"'


def formats_accept(
    value: str, formats: list[tuple[str, str]], mode: Mode, asserted: bool = False
) -> bool:
    """Whether the string ``value`` has every format of ``formats`` (name, pointer); an
    unknown format accepts it (see :func:`unknown_format`, which ``asserted`` passes to)."""
    for name, pointer in formats:
        regex = format_regex(name, 0, None, mode) or known_format(name, mode)
        if regex is not None:
            text = json_dumps(value)[1:-1] if name in SPELLED_FORMATS else value
            if re.fullmatch(regex, text) is None:
                return False
        elif name in FREE_STRING_FORMATS and mode == "generation":
            continue
        else:
            unknown_format(name, pointer, mode, asserted)
    return True


ANY_STRING_KEYWORD = "x-formcast-any-string"
"""A schema keyword: ``true`` beside a ``format`` formcast does not know accepts any
string for it in ``generation`` mode (which otherwise refuses the format)."""


def known_format(name: str, mode: Mode) -> str | None:
    """The regex formcast enforces for format ``name`` in ``mode``, or ``None`` when it
    does not know the format."""
    regex = STRING_FORMATS.get(name) or JSON_SCHEMA_FORMATS.get(name)
    if regex is None and mode == "generation":
        regex = GENERATION_FORMATS.get(name)
    return regex


def _json_content(t: Translation, flat: list[Part]) -> tuple[Any, str] | None:
    """The ``contentSchema`` of a string holding JSON text (``Json[T]``), and its
    pointer, in ``generation`` mode; else ``None`` (``specification`` mode reads content
    keywords as annotations)."""
    if t.mode != "generation":
        return None
    for part in flat:
        if part.schema.get("contentMediaType") == "application/json" and (
            "contentSchema" in part.schema
        ):
            return part.schema["contentSchema"], join_pointer(part.pointer, "contentSchema")
    return None


def _json_string(t: Translation, schema: Any, pointer: str) -> Result:
    """A JSON string whose contents are the JSON text of a value of ``schema``, for values
    written without ``"``, ``\\`` or whitespace (numbers, booleans, null and arrays of
    them): their text is its own spelling. Others are refused."""
    inner = t.gen([Part(schema, pointer)], ())
    if isinstance(inner, Never):
        return inner
    if '"' in inner or "\\\\" in inner or "(?&" in inner or t.ws:
        raise UnsupportedSchemaError(
            "contentSchema",
            pointer,
            "JSON text in a string is enforced for values without strings or objects "
            "(numbers, booleans, null and arrays of them) in compact JSON only",
        )
    return f'"{inner}"'


def format_regex(name: str, low: int, high: int | None, mode: Mode) -> str | None:
    """The exact ``specification``-mode regex of format ``name`` when every string it
    matches has ``low..high`` characters, else ``None`` (use :data:`STRING_FORMATS`)."""
    regex = SPEC_STRING_FORMATS.get(name) if mode == "specification" else None
    if regex is None:
        return None
    f_low, f_high = format_length_of(regex)
    if f_low < low or (high is not None and f_high > high):
        return None
    return regex


def unknown_format(
    name: str, pointer: str, mode: Mode, asserted: bool = False, any_string: bool = False
) -> None:
    """Refuse format ``name`` in ``generation`` mode, unless ``any_string`` (the schema's
    ``x-formcast-any-string`` keyword) accepts any string for it; in ``specification``
    mode, warn that it is not enforced (:class:`UnknownFormatWarning`), or refuse it when
    the document makes formats assertions (``asserted``).

    Generation mode promises output the caller's type accepts; a format it cannot check
    (a custom one, or one that depends on the file system such as ``file-path``) would
    break that promise silently.

    Every JSON Schema draft reads a format the validator does not know as an annotation
    (2019-09 and 2020-12 unless the format-assertion vocabulary is in use; drafts 4 to 7
    leave formats, and custom ones most of all, optional to check), so any string is
    valid there. The warning's ``stacklevel`` counts the frames of the translation above
    this call."""
    where = pointer or "/"
    if mode == "generation" and any_string:
        return
    if mode == "generation":
        raise UnsupportedSchemaError(
            "format",
            pointer,
            f"unknown format {name!r}: generation mode cannot enforce it (add "
            f'"{ANY_STRING_KEYWORD}": true beside it to accept any string)',
        )
    if mode == "specification" and asserted:
        raise UnsupportedSchemaError(
            "format", pointer, f"unknown format {name!r} (the schema's vocabulary asserts formats)"
        )
    reading = (
        "JSON Schema reads it as an annotation" if mode == "specification" else "it is not enforced"
    )
    warn(
        UnknownFormatWarning(
            name,
            pointer,
            f"formcast: unknown format {name!r} at {where}: {reading}; any string is allowed",
        ),
        stacklevel=5,
    )


def bounded_pattern(t: Translation, pattern: str, low: int, high: int | None) -> str | None:
    """String contents matching ``pattern`` with ``low..high`` characters, for patterns
    a length cannot simply be fitted to: :func:`dfa_contents` of the pattern's DFA
    (``None`` past the size limits, or when no string matches)."""
    built = pattern_dfa(pattern_union(pattern), t.limits)
    if built is None:
        return None
    return dfa_contents(t, *built, low, high)


def dfa_contents(
    t: Translation,
    moves: list[list[tuple[Ranges, int]]] | list[tuple[tuple[Ranges, int], ...]],
    accepting: list[bool],
    low: int,
    high: int | None,
) -> str | None:
    """String contents spelling the words of ``low..high`` characters a character DFA
    accepts: the DFA times a counter, one definition per live (state, characters read)
    pair, each calling the pairs one character on (with ``high``), or a regex rebuilt by
    state elimination (without). ``None`` when no word fits, or past the size limits
    (``max_length_product``, the inlined length of the definitions, which doubles per
    character where the DFA branches into two live states that do not merge, and the
    state elimination limits)."""
    if high is None:
        return long_pattern(moves, accepting, low, t.plain_strings, t.limits)
    if not t.sharing or len(moves) * (high + 1) > t.limits.max_length_product:
        return None
    calls: dict[tuple[int, int], str] = {}  # live (state, read) -> its regex
    for read in range(high, -1, -1):
        for state, row in enumerate(moves):
            options = []
            if accepting[state] and read >= low:
                options.append("")
            for ranges, target in row if read < high else []:
                after = calls.get((target, read + 1))
                if after is None:
                    continue
                char = encoded_set(ranges, t.plain_strings)
                if char is not None:
                    options.append(char + after)
            if options:
                body = alt(options) or ""
                try:
                    calls[(state, read)] = t.share(body, force=bool(body))
                except TooLarge:  # calls copy their callees: branching DFAs expand
                    return None  # exponentially with the length
    return calls.get((0, 0))


def long_pattern(
    moves: Sequence[Sequence[tuple[Ranges, int]]],
    accepting: Sequence[bool],
    low: int,
    plain: bool,
    limits: Limits = DEFAULT_LIMITS,
) -> str | None:
    """String contents spelling the words of at least ``low`` characters a character DFA
    accepts: the DFA crossed with a counter that stops at ``low``, turned back into a
    regex by state elimination (``None`` past its size limits, or when no word fits:
    both are refused by the caller). When the regex in every JSON spelling is past the
    limits (each character set written with its escapes is long), the plain spelling
    alone is written: characters that need an escape are then not produced."""
    if len(moves) * (low + 1) > limits.max_eliminated_states:
        return None
    width = low + 1
    counted = [
        [(ranges, target * width + min(read + 1, low)) for ranges, target in moves[q]]
        for q in range(len(moves))
        for read in range(width)
    ]
    final = [accepting[q] and read >= low for q in range(len(moves)) for read in range(width)]
    try:
        return dfa_regex_or_plain(counted, final, plain, limits)
    except DfaTooLarge:
        return None
