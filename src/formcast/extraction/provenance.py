"""Where each copied value came from: the spans of ``FromText`` values in the input.

:func:`text_spans` replays an output through its request's bound automaton
(:meth:`~formcast.automaton.bound.BoundAutomaton.slot_bytes`) to find the values a
``FromText`` slot wrote, names each by its JSON pointer in the output (``/company``,
``/items/2/name``), and finds where the text holds it, under its slot's options: a run
of whitespace in the text matches one space of the value (``whitespace="collapse"``),
and ``case_sensitive=False`` matches any case.

A substring automaton cannot tell two equal substrings of the text apart, so when the
value occurs several times every occurrence is given (in text order); a value the search
cannot find verbatim (a number the text writes in another form) has no span.

Pure Python; no torch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from formcast.text import FromText

__all__ = ["Span", "json_leaves", "text_spans"]

#: ``(start, end)`` character offsets into the input text: ``text[start:end]``.
Span = tuple[int, int]

_SPACE = " \t\r\n"


def json_leaves(raw: str) -> list[tuple[str, int, int]]:
    """Every string and number of a JSON text, or the closed ones of a prefix of one
    (a number that ends the prefix may still grow: left out): its JSON pointer and its
    character range in ``raw`` (a string's without its quotes)."""
    leaves: list[tuple[str, int, int]] = []
    try:
        _leaf(raw, _skip(raw, 0), "", leaves)
    except IndexError:  # a prefix: the leaves closed before its end are found
        if leaves and leaves[-1][2] == len(raw):
            leaves.pop()
    return leaves


def _skip(raw: str, at: int) -> int:
    while at < len(raw) and raw[at] in _SPACE:
        at += 1
    return at


def _string_end(raw: str, at: int) -> int:
    """The index of the closing quote of the string whose opening quote is at ``at``."""
    i = at + 1
    while raw[i] != '"':
        i += 2 if raw[i] == "\\" else 1
    return i


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _leaf(raw: str, at: int, pointer: str, leaves: list[tuple[str, int, int]]) -> int:
    char = raw[at]
    if char == '"':
        end = _string_end(raw, at)
        leaves.append((pointer, at + 1, end))
        return end + 1
    if char in "{[":
        closing = "}" if char == "{" else "]"
        i = _skip(raw, at + 1)
        position = 0
        while raw[i] != closing:
            if char == "{":
                key_end = _string_end(raw, i)
                key = json.loads(raw[i : key_end + 1])
                i = _skip(raw, _skip(raw, key_end + 1) + 1)  # past the colon
                i = _leaf(raw, i, f"{pointer}/{_escape(key)}", leaves)
            else:
                i = _leaf(raw, i, f"{pointer}/{position}", leaves)
                position += 1
            i = _skip(raw, i)
            if raw[i] == ",":
                i = _skip(raw, i + 1)
        return i + 1
    end = at
    while end < len(raw) and raw[end] not in ",]}" + _SPACE:
        end += 1
    if char in "-0123456789":
        leaves.append((pointer, at, end))
    return end


def text_spans(
    text: str, raw: str, slot_of_byte: Sequence[int], options: Sequence[FromText]
) -> dict[str, tuple[Span, ...]]:
    """The spans in ``text`` of the ``FromText`` values of the output ``raw``.

    ``slot_of_byte`` gives, per byte of ``raw`` (UTF-8), the slot that wrote it or -1
    (:meth:`~formcast.automaton.bound.BoundAutomaton.slot_bytes`); ``options`` the
    ``FromText`` options of each slot."""
    byte_at = [0]
    for char in raw:
        byte_at.append(byte_at[-1] + len(char.encode("utf-8")))
    spans: dict[str, tuple[Span, ...]] = {}
    for pointer, start, end in json_leaves(raw):
        if start == end:
            continue
        kinds = {slot_of_byte[b] for b in range(byte_at[start], byte_at[end])}
        kinds.discard(-1)
        if not kinds:
            continue
        literal = raw[start:end]
        is_string = start > 0 and raw[start - 1] == '"'
        value = json.loads(f'"{literal}"') if is_string else literal
        found = _occurrences(text, value, options[min(kinds)])
        if found:
            spans[pointer] = found
    return spans


def _occurrences(text: str, value: str, options: FromText) -> tuple[Span, ...]:
    """Where ``text`` holds ``value`` under the slot's options: at word boundaries or on
    whole lines as the options ask, else (a number written in another form around it,
    say) anywhere."""
    body = _pattern(value, options)
    flags = 0 if options.case_sensitive else re.IGNORECASE
    before = r"(?<!\w)" if options.word_boundaries and value[:1].isalnum() else ""
    after = r"(?!\w)" if options.word_boundaries and value[-1:].isalnum() else ""
    if options.whole_lines:
        before, after, flags = r"^[ \t]*" + before, after + r"[ \t]*$", flags | re.MULTILINE
    found = tuple(m.span(1) for m in re.finditer(f"{before}({body}){after}", text, flags))
    if found:
        return found
    return tuple(m.span() for m in re.finditer(body, text, flags))


def _pattern(value: str, options: FromText) -> str:
    parts = []
    for piece in re.split(r"(\s+)", value):
        if not piece:
            continue
        if piece.isspace() and options.whitespace == "collapse":
            parts.append(r"\s+")
        else:
            parts.append(re.escape(piece))
    return "".join(parts)
