"""JSON Schema ``pattern`` (ECMAScript syntax) -> regex text of the string contents.

Three tools, each exact or refusing:

* :class:`PatternParser` reads the ECMAScript subset JSON Schema patterns use into a
  tree of character sets, sequences, alternations, repeats and anchors. Each character
  set keeps two readings: the characters every engine matches (``narrow``, which the
  output uses) and those some engine matches (``wide``, kept for negations), so ``\\d``
  or ``\\s`` never lets through a character that another validator refuses.
  Lookarounds, backreferences, ``\\b`` and Unicode property escapes raise
  :class:`PatternUnsupported`.
* :func:`pattern_regex` emits the contents of a JSON string whose decoded value matches
  the pattern (an unanchored search unless ``^``/``$``), fitting ``minLength``/
  ``maxLength`` to one repetition where it can.
* :func:`pattern_dfa` builds the pattern's DFA over characters (bounded sizes), and
  :func:`dfa_regex` turns such a DFA back into a regex by state elimination: what lengths
  that cannot be fitted are crossed with (``formcast.regex.strings``), and what
  :func:`pattern_except` crosses with a trie of excluded names.

Costs: parsing and emitting are linear in the pattern; the DFA and the elimination are
capped (the pattern limits of :class:`formcast.limits.Limits`) and report the cap with
``None`` or :class:`DfaTooLarge`.
The first pattern using ``\\D`` or ``[^\\d]`` builds a Unicode table (~0.1 s).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from formcast.charset import (
    ANY,
    DIGIT,
    ECMA_SPACE,
    LINE_TERMINATORS,
    MAX_CODE_POINT,
    WORD,
    Ranges,
    complement,
    contains,
    from_chars,
    intersect,
    minus,
    normalize,
    unicode_ranges,
)
from formcast.graphs import reachable
from formcast.limits import DEFAULT_LIMITS, Limits
from formcast.regex.dialect import alt, encoded_set, group_alt, repeat


class PatternUnsupported(Exception):
    """A pattern feature that cannot be translated exactly (message says which)."""


@dataclass(frozen=True)
class _PSet:
    narrow: Ranges  # characters every engine (ECMAScript, Python re, Rust regex) matches
    wide: Ranges  # characters some engine matches


@dataclass(frozen=True)
class _PSeq:
    items: tuple[_PNode, ...]


@dataclass(frozen=True)
class _PAlt:
    options: tuple[_PNode, ...]


@dataclass(frozen=True)
class _PRep:
    node: _PNode
    low: int
    high: int | None


@dataclass(frozen=True)
class _PGroup:
    node: _PNode


@dataclass(frozen=True)
class _PAnchor:
    start: bool


_PNode = _PSet | _PSeq | _PAlt | _PRep | _PGroup | _PAnchor


_LINE_FEED: Ranges = ((0x0A, 0x0A),)


def _exact(ranges: Ranges) -> _PSet:
    return _PSet(ranges, ranges)


def _shorthand(letter: str) -> _PSet:
    if letter == "d":
        return _PSet(DIGIT, normalize(DIGIT + unicode_ranges("digit")))
    if letter == "w":
        return _PSet(WORD, normalize((*WORD, (128, MAX_CODE_POINT))))
    if letter == "s":
        wide = normalize(ECMA_SPACE + unicode_ranges("space"))
        narrow = minus(intersect(ECMA_SPACE, unicode_ranges("space")), from_chars("\ufeff"))
        return _PSet(narrow, wide)
    positive = _shorthand(letter.lower())
    return _PSet(complement(positive.wide), complement(positive.narrow))


class PatternParser:
    """Recursive-descent parser for the ECMAScript regex subset used by JSON Schema."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.pos = 0

    def fail(self, what: str) -> PatternUnsupported:
        return PatternUnsupported(f"{what} (in {self.text!r} at offset {self.pos})")

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def parse(self) -> _PNode:
        node = self.alternation()
        if self.pos != len(self.text):
            raise self.fail("unbalanced ')'")
        return node

    def alternation(self) -> _PNode:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else _PAlt(tuple(options))

    def sequence(self) -> _PNode:
        items: list[_PNode] = []
        while self.pos < len(self.text) and self.peek() not in "|)":
            atom = self.atom()
            quant = self.quantifier()
            if quant is not None:
                if isinstance(atom, _PAnchor):
                    raise self.fail("quantified anchor")
                atom = _PRep(atom, quant[0], quant[1])
            items.append(atom)
        return items[0] if len(items) == 1 else _PSeq(tuple(items))

    def quantifier(self) -> tuple[int, int | None] | None:
        char = self.peek()
        result: tuple[int, int | None] | None = None
        if char == "*":
            result, self.pos = (0, None), self.pos + 1
        elif char == "+":
            result, self.pos = (1, None), self.pos + 1
        elif char == "?":
            result, self.pos = (0, 1), self.pos + 1
        elif char == "{":
            match = re.compile(r"\{(\d+)(?:(,)(\d*))?\}").match(self.text, self.pos)
            if match is None:
                return None
            low = int(match.group(1))
            high = (
                low if match.group(2) is None else (int(match.group(3)) if match.group(3) else None)
            )
            if high is not None and high < low:
                raise self.fail("quantifier range out of order")
            result, self.pos = (low, high), match.end()
        if result is not None and self.peek() == "?":
            self.pos += 1  # lazy: same language
        if result is not None and self.peek() in ("*", "+", "?") and self.peek():
            raise self.fail("nested quantifier")
        return result

    def atom(self) -> _PNode:
        char = self.peek()
        self.pos += 1
        if char == "^":
            return _PAnchor(True)
        if char == "$":
            return _PAnchor(False)
        if char == ".":
            return _exact(complement(LINE_TERMINATORS))
        if char == "(":
            return self.group()
        if char == "[":
            return self.char_class()
        if char == "\\":
            return self.escape(in_class=False)
        if char in "*+?":
            raise self.fail("nothing to repeat")
        if char == "{" and re.compile(r"\{\d*(,\d*)?\}").match(self.text, self.pos - 1):
            raise self.fail("quantifier without operand, or '{,n}' (read differently by engines)")
        return _exact(from_chars(char))

    def group(self) -> _PNode:
        if self.peek() == "?":
            nxt = self.peek(1)
            if nxt == ":":
                self.pos += 2
            elif nxt in "=!" or (nxt == "<" and self.peek(2) in "=!"):
                raise self.fail("lookaround")
            elif nxt == "<" or (nxt == "P" and self.peek(2) == "<"):
                end = self.text.find(">", self.pos)
                if end < 0:
                    raise self.fail("unterminated group name")
                self.pos = end + 1
            else:
                raise self.fail("inline flags or unknown group syntax")
        node = self.alternation()
        if self.peek() != ")":
            raise self.fail("missing ')'")
        self.pos += 1
        return _PGroup(node)

    def class_atom(self) -> _PSet | int:
        char = self.peek()
        self.pos += 1
        if char == "\\":
            result = self.escape(in_class=True)
            single = result.narrow == result.wide and len(result.narrow) == 1
            if single and result.narrow[0][0] == result.narrow[0][1]:
                return result.narrow[0][0]
            return result
        return ord(char)

    def char_class(self) -> _PNode:
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        narrow: list[tuple[int, int]] = []
        wide: list[tuple[int, int]] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail("unterminated character class")
            if self.peek() == "]":
                self.pos += 1
                break
            start = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                end = self.class_atom()
                if isinstance(start, _PSet) or isinstance(end, _PSet):
                    raise self.fail("character class shorthand in a range")
                if end < start:
                    raise self.fail("character range out of order")
                narrow.append((start, end))
                wide.append((start, end))
            elif isinstance(start, _PSet):
                narrow.extend(start.narrow)
                wide.extend(start.wide)
            else:
                narrow.append((start, start))
                wide.append((start, start))
        if negate:
            return _PSet(complement(normalize(wide)), complement(normalize(narrow)))
        return _PSet(normalize(narrow), normalize(wide))

    def escape(self, in_class: bool) -> _PSet:
        char = self.peek()
        if not char:
            raise self.fail("trailing backslash")
        self.pos += 1
        if char in "dDwWsS":
            return _shorthand(char)
        if char == "b":
            if in_class:
                return _exact(((8, 8),))
            raise self.fail("word boundary \\b")
        if char == "B":
            raise self.fail("word boundary \\B")
        if char.isdigit() and char != "0":
            raise self.fail("backreference")
        if char == "0":
            if self.peek().isdigit():
                raise self.fail("octal escape")
            return _exact(((0, 0),))
        if char == "k" and self.peek() == "<":
            raise self.fail("named backreference")
        if char in "pP" and self.peek() == "{":
            raise self.fail("unicode property escape")
        simple = {"n": 10, "r": 13, "t": 9, "f": 12, "v": 11}
        if char in simple:
            return _exact(((simple[char],) * 2,))
        if char == "c" and self.peek().isalpha() and self.peek().isascii():
            code = ord(self.peek()) % 32
            self.pos += 1
            return _exact(((code, code),))
        if char == "x":
            match = re.compile(r"[0-9a-fA-F]{2}").match(self.text, self.pos)
            if match:
                self.pos = match.end()
                code = int(match.group(0), 16)
                return _exact(((code, code),))
            return _exact(from_chars("x"))
        if char == "u":
            match = re.compile(r"[0-9a-fA-F]{4}").match(self.text, self.pos)
            if match:
                self.pos = match.end()
                code = int(match.group(0), 16)
                if 0xD800 <= code <= 0xDBFF:
                    low = re.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})").match(self.text, self.pos)
                    if not low:
                        raise self.fail("lone surrogate escape")
                    self.pos = low.end()
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
                elif 0xDC00 <= code <= 0xDFFF:
                    raise self.fail("lone surrogate escape")
                return _exact(((code, code),))
            if self.peek() == "{":
                raise self.fail("\\u{...} escape")
            return _exact(from_chars("u"))
        if char.isalnum():
            raise self.fail(f"unknown escape \\{char}")
        return _exact(from_chars(char))


def length_range(node: _PNode) -> tuple[int, float]:
    """Minimum and maximum number of characters matched by ``node``."""
    if isinstance(node, _PSet):
        return (1, 1)
    if isinstance(node, _PAnchor):
        return (0, 0)
    if isinstance(node, _PGroup):
        return length_range(node.node)
    if isinstance(node, _PSeq):
        ranges = [length_range(item) for item in node.items]
        return (sum(r[0] for r in ranges), sum(r[1] for r in ranges))
    if isinstance(node, _PAlt):
        ranges = [length_range(option) for option in node.options]
        return (min(r[0] for r in ranges), max(r[1] for r in ranges))
    low, high = length_range(node.node)
    top = math.inf if node.high is None else node.high * high
    return (node.low * low, top if node.high != 0 else 0)


@dataclass
class _Alternative:
    """One top-level alternative of a pattern: a sequence with its implicit ``.*`` sides."""

    items: list[_PNode]


def _top_alternatives(node: _PNode) -> list[_PNode]:
    if isinstance(node, _PAlt):
        out: list[_PNode] = []
        for option in node.options:
            out.extend(_top_alternatives(option))
        return out
    if isinstance(node, _PGroup):
        return _top_alternatives(node.node)
    if isinstance(node, _PSeq) and len(node.items) == 1:
        return _top_alternatives(node.items[0])
    return [node]


def _contains_anchor(node: _PNode) -> bool:
    if isinstance(node, _PAnchor):
        return True
    if isinstance(node, _PSeq):
        return any(_contains_anchor(i) for i in node.items)
    if isinstance(node, _PAlt):
        return any(_contains_anchor(i) for i in node.options)
    if isinstance(node, (_PGroup, _PRep)):
        return _contains_anchor(node.node)
    return False


def _split_anchors(node: _PNode, wide: bool = False) -> list[_Alternative]:
    """Split a pattern into alternatives with explicit free ``.*`` sides.

    ``^`` may only start and ``$`` only end an alternative (possibly inside a group that is
    the whole alternative); any other anchor is refused. ``$`` matches at the end of the
    string (ECMAScript); in the ``wide`` reading also before a final line feed, as
    Python's ``re`` (which some validators use) matches it.
    """
    out = []
    any_char = _PRep(_exact(ANY), 0, None)
    for alternative in _top_alternatives(node):
        items: list[_PNode] = (
            list(alternative.items) if isinstance(alternative, _PSeq) else [alternative]
        )
        anchored_start = anchored_end = False
        while items and isinstance(items[0], _PAnchor) and items[0].start:
            anchored_start = True
            items.pop(0)
        while items and isinstance(items[-1], _PAnchor) and not items[-1].start:
            anchored_end = True
            items.pop()
        if any(_contains_anchor(item) for item in items):
            raise PatternUnsupported("anchor in the middle of the pattern")
        if not anchored_start:
            items.insert(0, any_char)
        if not anchored_end:
            items.append(any_char)
        elif wide:
            items.append(_PRep(_exact(_LINE_FEED), 0, 1))
        out.append(_Alternative(items))
    return out


def _emit_pattern(node: _PNode, plain: bool) -> str | None:
    """Encoded-string regex for a parsed pattern node; ``None`` if it matches nothing."""
    if isinstance(node, _PSet):
        return encoded_set(node.narrow, plain)
    if isinstance(node, _PGroup):
        return _emit_pattern(node.node, plain)
    if isinstance(node, _PSeq):
        parts = []
        for item in node.items:
            part = _emit_pattern(item, plain)
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)
    if isinstance(node, _PAlt):
        return alt(p for p in (_emit_pattern(o, plain) for o in node.options) if p is not None)
    if isinstance(node, _PRep):
        inner = _emit_pattern(node.node, plain)
        if inner is None:
            return "" if node.low == 0 else None
        return repeat(inner, node.low, node.high)
    raise PatternUnsupported("anchor in the middle of the pattern")


def _fit_length(items: list[_PNode], low: int, high: int | None) -> list[_PNode] | None:
    """Adjust one variable repetition so the sequence has ``low..high`` characters.

    Returns the new items, ``None`` when the combination cannot be expressed this way.
    Raises ``ValueError`` when no string of the allowed lengths matches.
    """
    ranges = [length_range(item) for item in items]
    variable = [i for i, (a, b) in enumerate(ranges) if a != b]
    fixed = sum(a for i, (a, _b) in enumerate(ranges) if i not in variable)
    if not variable:
        if fixed < low or (high is not None and fixed > high):
            raise ValueError("length")
        return items
    if len(variable) != 1:
        return None
    index = variable[0]
    item = items[index]
    if not (isinstance(item, _PRep) and length_range(item.node) == (1, 1)):
        return None
    new_low = max(item.low, low - fixed)
    new_high: int | None = item.high
    if high is not None:
        new_high = high - fixed if new_high is None else min(new_high, high - fixed)
    if new_high is not None and new_high < new_low:
        raise ValueError("length")
    return [*items[:index], _PRep(item.node, new_low, new_high), *items[index + 1 :]]


class _PatternNfa:
    """The Thompson NFA of a parsed pattern over characters, for :func:`pattern_dfa`: per
    state its epsilon targets and its moves (code point ranges -> state). Methods rather
    than nested functions, since a nested function that calls itself is a reference
    cycle, freed only by the garbage collector, with the lists it holds."""

    def __init__(self, limits: Limits, wide: bool) -> None:
        self.limits = limits
        self.wide = wide
        self.eps: list[list[int]] = [[]]
        self.moves: list[list[tuple[Ranges, int]]] = [[]]

    def fresh(self) -> int:
        if len(self.eps) >= self.limits.max_pattern_nfa_states:
            raise OverflowError
        self.eps.append([])
        self.moves.append([])
        return len(self.eps) - 1

    def build(self, item: _PNode, start: int) -> int:
        """Add ``item`` from ``start``; return its end state."""
        eps = self.eps
        if isinstance(item, _PSet):
            end = self.fresh()
            chars = item.wide if self.wide else item.narrow
            if chars:
                self.moves[start].append((chars, end))
            return end
        if isinstance(item, _PGroup):
            return self.build(item.node, start)
        if isinstance(item, _PSeq):
            for part in item.items:
                start = self.build(part, start)
            return start
        if isinstance(item, _PAlt):
            end = self.fresh()
            for option in item.options:
                eps[self.build(option, start)].append(end)
            return end
        if isinstance(item, _PRep):
            for _ in range(item.low):
                start = self.build(item.node, start)
            if item.high is None:
                loop = self.fresh()
                eps[start].append(loop)
                eps[self.build(item.node, loop)].append(loop)
                return loop
            for _ in range(item.high - item.low):
                end = self.fresh()
                eps[start].append(end)
                eps[self.build(item.node, start)].append(end)
                start = end
            return start
        raise PatternUnsupported("anchor in the middle of the pattern")


def pattern_dfa(
    node: _PNode, limits: Limits = DEFAULT_LIMITS, wide: bool = False
) -> tuple[list[list[tuple[Ranges, int]]], list[bool]] | None:
    """A DFA over characters for a parsed, anchor-free pattern: per state its moves
    (disjoint code point ranges -> state) and whether it accepts; state 0 starts.
    Character sets take their narrow reading (what every engine matches), or their wide
    one (what some engine matches) with ``wide``. ``None`` past
    ``limits.max_pattern_nfa_states`` NFA or ``limits.max_pattern_dfa_states`` DFA states."""
    nfa = _PatternNfa(limits, wide)
    try:
        final = nfa.build(node, 0)
    except OverflowError:
        return None
    eps, moves = nfa.eps, nfa.moves

    def closure(states: Iterable[int]) -> frozenset[int]:
        return frozenset(reachable(eps, states))

    ids = {closure([0]): 0}
    order = [closure([0])]
    dfa_moves: list[list[tuple[Ranges, int]]] = []
    for members in order:  # grows while iterating
        edges = [edge for state in members for edge in moves[state]]
        points = sorted(
            {lo for ranges, _ in edges for lo, _ in ranges}
            | {hi + 1 for ranges, _ in edges for _, hi in ranges}
        )
        by_target: dict[frozenset[int], list[tuple[int, int]]] = {}
        for lo, next_lo in pairwise(points):
            targets = frozenset(t for ranges, t in edges if contains(ranges, lo))
            if targets:
                by_target.setdefault(closure(targets), []).append((lo, next_lo - 1))
        row = []
        for target, ranges in by_target.items():
            if target not in ids:
                if len(order) >= limits.max_pattern_dfa_states:
                    return None
                ids[target] = len(order)
                order.append(target)
            row.append((normalize(ranges), ids[target]))
        dfa_moves.append(row)
    return dfa_moves, [final in members for members in order]


class DfaTooLarge(Exception):
    """A DFA, or the regex state elimination builds from it, is past the size limits."""


def dfa_regex(
    moves: Sequence[Sequence[tuple[Ranges, int]]],
    accepting: Sequence[bool],
    plain: bool,
    limits: Limits = DEFAULT_LIMITS,
) -> str | None:
    """A regex for the JSON string contents spelling the words a character DFA accepts
    from state 0 (``None`` if none), by state elimination (fewest in x out edges first).

    Raises DfaTooLarge past ``limits.max_eliminated_states`` live states or
    ``limits.max_eliminated_regex_length`` characters in any intermediate regex."""
    count = len(moves)
    reached = reachable([[target for _, target in row] for row in moves], [0])
    productive = {q for q in range(count) if accepting[q]}
    changed = True
    while changed:
        changed = False
        for q in reached - productive:
            if any(t in productive for _, t in moves[q]):
                productive.add(q)
                changed = True
    live = reached & productive
    if 0 not in live:
        return None
    if len(live) > limits.max_eliminated_states:
        raise DfaTooLarge
    first, last = -1, -2  # the added start and final states
    label: dict[tuple[int, int], str] = {(first, 0): ""}
    for q in live:
        if accepting[q]:
            label[(q, last)] = ""
        for ranges, target in moves[q]:
            char = encoded_set(ranges, plain) if target in live else None
            if char is not None:
                key = (q, target)
                label[key] = char if key not in label else (alt([label[key], char]) or "")
    into: dict[int, set[int]] = {q: set() for q in live}
    out_of: dict[int, set[int]] = {q: set() for q in live}
    for a, b in label:
        if b in out_of or b == last:
            if a in out_of:
                out_of[a].add(b)
            if b in into:
                into[b].add(a)
    remaining = set(live)
    while remaining:
        k = min(remaining, key=lambda q: (len(into[q]) * len(out_of[q]), q))
        remaining.discard(k)
        loop = label.pop((k, k), None)
        middle = repeat(loop, 0, None) if loop else ""
        sources = [a for a in into[k] if a != k]  # the added start included
        targets = [b for b in out_of[k] if b != k]
        for a in sources:
            head = label.pop((a, k))
            for b in targets:
                path = group_alt(head) + middle + group_alt(label[(k, b)])
                key = (a, b)
                joined = path if key not in label else (alt([label[key], path]) or "")
                if len(joined) > limits.max_eliminated_regex_length:
                    raise DfaTooLarge
                label[key] = joined
                if a in out_of:
                    out_of[a].add(b)
                if b in into:
                    into[b].add(a)
            if a in out_of:
                out_of[a].discard(k)
        for b in targets:
            label.pop((k, b), None)
            if b in into:
                into[b].discard(k)
    return label.get((first, last))


def dfa_regex_or_plain(
    moves: Sequence[Sequence[tuple[Ranges, int]]],
    accepting: Sequence[bool],
    plain: bool,
    limits: Limits = DEFAULT_LIMITS,
) -> str | None:
    """:func:`dfa_regex`, and when the regex in every JSON spelling (``plain`` false) is
    past the limits (each character set written with its escapes is long), the plain
    spelling alone: characters that need an escape are then not produced, a narrowing.
    Raises DfaTooLarge when the plain spelling is past the limits too."""
    if not plain:
        try:
            return dfa_regex(moves, accepting, False, limits)
        except DfaTooLarge:
            pass
    return dfa_regex(moves, accepting, True, limits)


def pattern_union(pattern: str, wide: bool = False) -> _PNode:
    """The parsed pattern as one anchor-free node (implicit ``.*`` sides made explicit;
    ``wide``: ``$`` also before a final line feed, see :func:`_split_anchors`)."""
    alternatives = _split_anchors(PatternParser(pattern).parse(), wide)
    return _PAlt(tuple(_PSeq(tuple(a.items)) for a in alternatives))


def pattern_except(
    pattern: str, excluded: Sequence[str], limits: Limits = DEFAULT_LIMITS
) -> str | None:
    """Regex for the JSON string token (quotes included, plain spelling) of the names that
    match ``pattern`` and are none of ``excluded``: the pattern's DFA crossed with the trie
    of the excluded names. ``None`` if no name remains; raises DfaTooLarge."""
    built = pattern_dfa(pattern_union(pattern), limits)
    if built is None:
        raise DfaTooLarge
    moves, accepting = built
    trie: list[dict[int, int]] = [{}]
    ends: set[int] = set()
    for word in excluded:
        node = 0
        for char in word:
            node = trie[node].setdefault(ord(char), len(trie))
            if node == len(trie):
                trie.append({})
        ends.add(node)
    ids: dict[tuple[int, int], int] = {(0, 0): 0}
    order = [(0, 0)]
    product_moves: list[list[tuple[Ranges, int]]] = []
    for q, node in order:  # node -1: off the trie
        row: list[tuple[Ranges, int]] = []
        for ranges, target in moves[q]:
            pieces: list[tuple[Ranges, int]] = []
            rest = ranges
            if node >= 0:
                for code, child in trie[node].items():
                    if contains(ranges, code):
                        pieces.append((((code, code),), child))
                        rest = minus(rest, ((code, code),))
            pieces.append((rest, -1))
            for piece, next_node in pieces:
                if not piece:
                    continue
                pair = (target, next_node)
                if pair not in ids:
                    ids[pair] = len(order)
                    order.append(pair)
                row.append((piece, ids[pair]))
        product_moves.append(row)
    final = [accepting[q] and node not in ends for q, node in order]
    body = dfa_regex(product_moves, final, plain=True, limits=limits)
    return None if body is None else f'"{body}"'


def pattern_regex(
    pattern: str, low: int, high: int | None, plain: bool
) -> tuple[str | None, str | None]:
    """Regex for the *contents* of a JSON string whose decoded value matches ``pattern``.

    ``pattern`` follows JSON Schema (ECMAScript, unanchored search). Lengths in ``low..high``
    are enforced too. Returns ``(regex, None)`` (regex ``None`` if nothing matches) or
    ``(None, keyword)`` naming the length keyword that cannot be combined with the pattern.
    Raises ``PatternUnsupported`` for untranslatable syntax.
    """
    alternatives = _split_anchors(PatternParser(pattern).parse())
    out = []
    for alternative in alternatives:
        fitted = _fit_alternatives(alternative.items, low, high, _MAX_DISTRIBUTED)
        if fitted is None:
            a, _ = length_range(_PSeq(tuple(alternative.items)))
            return None, "minLength" if a < low else "maxLength"
        for items in fitted:
            emitted = _emit_pattern(_PSeq(tuple(items)), plain)
            if emitted is not None:
                out.append(emitted)
    return alt(out), None


_MAX_DISTRIBUTED = 16
"""Most sequences one alternative of a pattern is split into to fit lengths."""


def _fit_alternatives(
    items: list[_PNode], low: int, high: int | None, budget: int
) -> list[list[_PNode]] | None:
    """Sequences whose union is the strings of ``items`` with ``low..high`` characters:
    ``items`` itself when every string fits, else :func:`_fit_length`, else the sequence
    split at its first alternation (``a(b|c)d`` -> ``abd``, ``acd``: the same strings)
    with each part fitted, at most ``budget`` parts in all. ``None`` when no split fits."""
    a, b = length_range(_PSeq(tuple(items)))
    if a >= low and (high is None or b <= high):
        return [items]
    try:
        fitted = _fit_length(items, low, high)
    except ValueError:
        return []
    if fitted is not None:
        return [fitted]
    for index, item in enumerate(items):
        node = item.node if isinstance(item, _PGroup) else item
        if isinstance(node, _PAlt) and len(node.options) <= budget:
            out: list[list[_PNode]] = []
            for option in node.options:
                middle = list(option.items) if isinstance(option, _PSeq) else [option]
                split = [*items[:index], *middle, *items[index + 1 :]]
                part = _fit_alternatives(split, low, high, budget // len(node.options))
                if part is None:
                    return None
                out.extend(part)
            return out
    return None
