"""Test-only helpers for the grammar tests: the reference recognizers (oracles), random
derivation from formcast's grammar representation, mutations, and walks of a compiled
index. Not for production use.

Oracles:
* GBNF: transformers-CFG's ``StringRecognizer`` (PyPI ``transformers-cfg``, installed with
  ``--no-deps``; it needs ``termcolor``). It reads ``.`` as any byte but ``\\n``, where
  llama.cpp (and formcast) read any character: grammars compared with it avoid ``.``.
* Lark: ``lark.Lark(..., parser="earley", lexer="dynamic_complete")``, whose language is
  the one formcast gives a Lark grammar (a terminal matches any string of its language).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pytest

from formcast import charset
from formcast.automaton import LazyAutomaton
from formcast.cursor import Cursor
from formcast.errors import GrammarError, TokenNotAllowedError
from formcast.grammar import Grammar, Syntax, nodes
from formcast.index import TokenIndex

GRAMMARS = Path(__file__).resolve().parents[3] / "shared" / "data" / "grammars"

Accepts = Callable[[str], bool]


def shared_grammars() -> list[Path]:
    """Every grammar file of the shared data (an empty list when it is absent)."""
    return sorted(GRAMMARS.rglob("*.ebnf")) if GRAMMARS.is_dir() else []


# ----------------------------------------------------------------------------- refusals


def refusal(text: str, syntax: Syntax, line: int, column: int, message: str) -> GrammarError:
    """The error reading ``text`` raises, checked to name ``(line, column)`` and to say
    ``message``; fails the test when reading succeeds or the error says otherwise."""
    with pytest.raises(GrammarError) as caught:
        Grammar(text, syntax=syntax)
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)
    assert message in str(caught.value)
    return caught.value


# ----------------------------------------------------------------------------- oracles


def gbnf_oracle(text: str, start: str = "root") -> Accepts:
    """transformers-CFG's recognizer for GBNF ``text``: string -> accepted in full."""
    pytest.importorskip("termcolor")
    parser = pytest.importorskip("transformers_cfg.parser")
    recognizer_module = pytest.importorskip("transformers_cfg.recognizer")
    state = parser.parse_ebnf(text)
    recognizer = recognizer_module.StringRecognizer(
        state.grammar_encoding, state.symbol_table[start]
    )

    def accepts(string: str) -> bool:
        return bool(recognizer._accept_string(string))

    return accepts


def lark_oracle(text: str, start: str = "start") -> Accepts:
    """Lark's Earley parser (complete dynamic lexing) for Lark ``text``."""
    lark = pytest.importorskip("lark")
    parser = lark.Lark(text, parser="earley", lexer="dynamic_complete", start=start)

    def accepts(string: str) -> bool:
        try:
            parser.parse(string)
        except lark.exceptions.LarkError:
            return False
        return True

    return accepts


# ----------------------------------------------------------------------------- derivation


def derive(
    grammar: Grammar, rng: random.Random, max_depth: int = 6, wide_limit: int | None = None
) -> str:
    """A random string of ``grammar``'s language (embedded constraints excepted): repeats
    of 0-3 extra items, and past ``max_depth`` nested rules the shortest ways out.

    ``wide_limit``: characters of wide classes (negated ones, ``.``: over 65,536 code
    points) are drawn at most this code point, for an oracle that reads negated classes
    over Latin-1 only (transformers-CFG)."""
    rules = grammar.checked.rules
    heights = _heights(rules)
    start = nodes.RuleRef(nodes.Where(0, 0), grammar.checked.start)
    return _Deriver(rules, heights, rng, max_depth, wide_limit).node(start, 0)


def _heights(rules: Mapping[str, nodes.Rule]) -> dict[str, int]:
    """Fewest nested rules needed to finish each rule (a fixpoint)."""
    heights: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for name, rule in rules.items():
            height = _node_height(rule.body, heights)
            if height is not None and height + 1 < heights.get(name, 1 << 30):
                heights[name] = height + 1
                changed = True
    return heights


def _node_height(node: nodes.Node, heights: Mapping[str, int]) -> int | None:
    if isinstance(node, nodes.RuleRef):
        return heights.get(node.name)
    if isinstance(node, nodes.Seq):
        parts = [_node_height(item, heights) for item in node.items]
        known = [part for part in parts if part is not None]
        return None if len(known) < len(parts) else max([0, *known])
    if isinstance(node, nodes.Choice):
        parts = [h for h in (_node_height(a, heights) for a in node.alternatives) if h is not None]
        return min(parts) if parts else None
    if isinstance(node, nodes.Repeat):
        return 0 if node.low == 0 else _node_height(node.item, heights)
    if isinstance(node, nodes.CharClass):
        return 0 if charset.minus(node.ranges, ((0xD800, 0xDFFF),)) else None
    return 0


class _Deriver:
    def __init__(
        self,
        rules: Mapping[str, nodes.Rule],
        heights: dict[str, int],
        rng: random.Random,
        limit: int,
        wide_limit: int | None,
    ) -> None:
        self.rules, self.heights, self.rng, self.limit = rules, heights, rng, limit
        self.wide_limit = wide_limit

    def node(self, node: nodes.Node, depth: int) -> str:
        rng = self.rng
        if isinstance(node, nodes.Literal):
            return node.text
        if isinstance(node, nodes.CharClass):
            ranges = node.ranges
            if self.wide_limit is not None and sum(b - a + 1 for a, b in ranges) > 0x10000:
                ranges = charset.intersect(ranges, ((0x20, self.wide_limit),))
            return random_char(ranges, rng)
        if isinstance(node, nodes.RuleRef):
            return self.node(self.rules[node.name].body, depth + 1)
        if isinstance(node, nodes.RegexTerminal):
            return sample_regex(node.pattern, rng)
        if isinstance(node, nodes.Embedded):
            raise ValueError("derive() does not sample embedded constraints")
        if isinstance(node, nodes.Seq):
            return "".join(self.node(item, depth) for item in node.items)
        if isinstance(node, nodes.Choice):
            options = [a for a in node.alternatives if _node_height(a, self.heights) is not None]
            if depth > self.limit:
                least = min(_node_height(a, self.heights) or 0 for a in options)
                options = [a for a in options if _node_height(a, self.heights) == least]
            return self.node(rng.choice(options), depth)
        extra = 0 if depth > self.limit else rng.randint(0, 3)
        count = node.low + extra if node.high is None else min(node.high, node.low + extra)
        if _node_height(node.item, self.heights) is None:
            count = 0
        return "".join(self.node(node.item, depth) for _ in range(count))


_SURROGATES = ((0xD800, 0xDFFF),)


def random_char(ranges: charset.Ranges, rng: random.Random) -> str:
    """A random character of ``ranges`` (a range first, uniformly, then a code point)."""
    usable = charset.minus(ranges, _SURROGATES)
    low, high = rng.choice(usable)
    return chr(rng.randint(low, high))


@functools.lru_cache(maxsize=256)
def _automaton(pattern: str) -> LazyAutomaton:
    return LazyAutomaton(pattern)


def sample_regex(pattern: str, rng: random.Random, max_bytes: int = 12) -> str:
    """A random string the regex matches: a random walk over its byte automaton, which
    heads for acceptance after ``max_bytes`` bytes."""
    automaton = _automaton(pattern)
    state = automaton.initial
    out = bytearray()
    while True:
        row = automaton.row(state)
        live = np.flatnonzero(row)
        stop = len(out) >= max_bytes or rng.random() < 0.3 or not len(live)
        if automaton.is_accepting(state) and stop:
            return out.decode("utf-8")
        if len(out) >= max_bytes:
            distance = {int(b): automaton.min_bytes_to_accept(int(row[b])) for b in live}
            best = min(distance.values())
            live = np.array([b for b, d in distance.items() if d == best])
        byte = int(rng.choice(list(live)))
        out.append(byte)
        state = int(row[byte])


# ----------------------------------------------------------------------------- mutations


def mutations(text: str, alphabet: str, rng: random.Random, count: int) -> list[str]:
    """``count`` small edits of ``text``: a deletion, insertion, replacement, swap or cut."""
    found = []
    for _ in range(count):
        chars = list(text)
        kind = rng.randrange(5)
        at = rng.randrange(len(chars) + 1)
        if kind == 0 and chars:
            del chars[min(at, len(chars) - 1)]
        elif kind == 1:
            chars.insert(at, rng.choice(alphabet))
        elif kind == 2 and chars:
            chars[min(at, len(chars) - 1)] = rng.choice(alphabet)
        elif kind == 3 and len(chars) > 1:
            i = min(at, len(chars) - 2)
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        else:
            chars = chars[:at]
        found.append("".join(chars))
    return found


# ----------------------------------------------------------------------------- index walks


def accepts_by_tokens(index: TokenIndex, token_ids: list[int]) -> bool:
    """Whether the cursor takes every token and ends accepting (raises on a refused one)."""
    cursor = Cursor(index)
    for token in token_ids:
        cursor.advance(token)
    return cursor.is_accepting()


def accepts_bytes(index: TokenIndex, text: str) -> bool:
    """Whether the index's automaton takes ``text``'s UTF-8 bytes and ends accepting."""
    cursor = Cursor(index)
    try:
        cursor.advance_bytes(text.encode("utf-8"))
    except TokenNotAllowedError:
        return False
    return cursor.is_accepting()


def random_decode(index: TokenIndex, rng: random.Random, extra_tokens: int = 30) -> str:
    """Random allowed tokens until EOS, ending within ``extra_tokens`` more than the
    fewest a complete output needs (budget-safe)."""
    cursor = Cursor(index)
    max_tokens = cursor.min_tokens_to_accept() + extra_tokens
    pieces = []
    eos = index.eos_token_ids
    for step in range(max_tokens + 1):  # the budget counts output tokens, EOS comes after
        allowed = cursor.allowed_token_ids(tokens_left=max_tokens - step)
        ending = [t for t in allowed.tolist() if t in eos]
        if ending and (rng.random() < 0.25 or len(ending) == len(allowed)):
            cursor.advance(ending[0])
            break
        token = int(rng.choice([t for t in allowed.tolist() if t not in eos]))
        cursor.advance(token)
        pieces.append(index.vocabulary.token_bytes[token])
    assert cursor.is_finished, "the budget-safe walk did not end"
    return b"".join(pieces).decode("utf-8")
