"""Reference implementation for the tests: small recursive grammars, their regex in
formcast's dialect, a recognizer, and random derivations. Test oracle only.

A :class:`Grammar` is a dict of named rules plus a main sequence, built from a few item
kinds (:class:`Lit`, :class:`Chars`, :class:`Call`, :class:`Opt`, :class:`Star`,
:class:`Alt`). From one grammar the tests derive:

* :meth:`Grammar.regex`: the pattern with ``(?(DEFINE)...)`` definitions that formcast
  compiles (to a :class:`~formcast.automaton.PushdownAutomaton` when rules recurse);
* :meth:`Grammar.matches`: an independent recognizer: memoised recursive descent over
  the rules computing, for each item and start position, the set of positions where it
  may end; leaves are matched with Python's :mod:`re`. It shares no code with formcast.
  Exponential blowup is avoided by the memo; left recursion is not supported (the
  grammars here have none);
* :meth:`Grammar.sample`: a random string derived from the rules, nesting at most a
  given depth before it takes each rule's shortest way out.

Cost: recognition is O(length^2 x items) at worst, fine for the strings of a few hundred
characters the tests use.
"""

from __future__ import annotations

import random
import re
import sys
from dataclasses import dataclass
from functools import cached_property

__all__ = ["Alt", "Call", "Chars", "Grammar", "Lit", "Opt", "Star"]


@dataclass(frozen=True)
class Lit:
    """A literal text."""

    text: str


@dataclass(frozen=True)
class Chars:
    """``low`` to ``high`` characters, each one of ``chars``."""

    chars: str
    low: int = 1
    high: int = 1


@dataclass(frozen=True)
class Call:
    """A call of the rule ``name``."""

    name: str


@dataclass(frozen=True)
class Opt:
    """``items`` or nothing."""

    items: tuple[Item, ...]


@dataclass(frozen=True)
class Star:
    """``items`` repeated zero or more times."""

    items: tuple[Item, ...]


@dataclass(frozen=True)
class Alt:
    """One of several sequences."""

    branches: tuple[tuple[Item, ...], ...]


Item = Lit | Chars | Call | Opt | Star | Alt
_Memo = dict[tuple[int, int], frozenset[int]]  # (id of an item, start) -> its ends


def _calls(items: tuple[Item, ...]) -> int:
    """Calls written in ``items`` (ties between shortest branches go to fewer calls)."""
    return sum(isinstance(item, Call) for item in items)


def _escape_class(chars: str) -> str:
    return "".join("\\" + c if c in "\\]^-[" else c for c in chars)


@dataclass(frozen=True)
class Grammar:
    rules: dict[str, tuple[Item, ...]]
    main: tuple[Item, ...]

    # -- the dialect regex -------------------------------------------------------------
    def regex(self) -> str:
        definitions = "".join(
            f"(?P<{name}>{self._sequence_regex(body)})" for name, body in self.rules.items()
        )
        return f"(?(DEFINE){definitions}){self._sequence_regex(self.main)}"

    def _sequence_regex(self, items: tuple[Item, ...]) -> str:
        return "".join(self._item_regex(item) for item in items)

    def _item_regex(self, item: Item) -> str:
        if isinstance(item, Lit):
            return re.escape(item.text)
        if isinstance(item, Chars):
            return f"[{_escape_class(item.chars)}]{{{item.low},{item.high}}}"
        if isinstance(item, Call):
            return f"(?&{item.name})"
        if isinstance(item, Opt):
            return f"(?:{self._sequence_regex(item.items)})?"
        if isinstance(item, Star):
            return f"(?:{self._sequence_regex(item.items)})*"
        return "(?:" + "|".join(self._sequence_regex(b) for b in item.branches) + ")"

    # -- the recognizer ----------------------------------------------------------------
    def matches(self, text: str) -> bool:
        """Whether ``text`` derives from the main sequence (in full)."""
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20 * len(text) + 1000))
        try:
            memo: _Memo = {}
            return len(text) in self._ends(self.main, text, 0, memo)
        finally:
            sys.setrecursionlimit(limit)

    def _ends(self, items: tuple[Item, ...], text: str, start: int, memo: _Memo) -> frozenset[int]:
        positions = frozenset([start])
        for item in items:
            positions = frozenset(
                end for position in positions for end in self._item_ends(item, text, position, memo)
            )
            if not positions:
                break
        return positions

    def _item_ends(self, item: Item, text: str, start: int, memo: _Memo) -> frozenset[int]:
        key = (id(item), start)
        found = memo.get(key)
        if found is not None:
            return found
        if isinstance(item, Lit):
            found = frozenset([start + len(item.text)] if text.startswith(item.text, start) else [])
        elif isinstance(item, Chars):
            leaf = self._leaf(item)
            found = frozenset(
                end
                for end in range(start + item.low, min(len(text), start + item.high) + 1)
                if leaf.fullmatch(text, start, end)
            )
        elif isinstance(item, Call):
            found = self._ends(self.rules[item.name], text, start, memo)
        elif isinstance(item, Opt):
            found = frozenset([start]) | self._ends(item.items, text, start, memo)
        elif isinstance(item, Star):
            reached = {start}
            frontier = [start]
            while frontier:
                position = frontier.pop()
                for end in self._ends(item.items, text, position, memo):
                    if end not in reached:
                        reached.add(end)
                        frontier.append(end)
            found = frozenset(reached)
        else:
            found = frozenset().union(*(self._ends(b, text, start, memo) for b in item.branches))
        memo[key] = found
        return found

    @cached_property
    def _leaves(self) -> dict[Chars, re.Pattern[str]]:
        return {}

    def _leaf(self, item: Chars) -> re.Pattern[str]:
        found = self._leaves.get(item)
        if found is None:
            found = self._leaves[item] = re.compile(f"[{_escape_class(item.chars)}]*")
        return found

    # -- random derivations ------------------------------------------------------------
    def sample(self, rng: random.Random, depth: int = 6) -> str:
        """A random string of the grammar: alternatives and repeats are chosen at random
        until ``depth`` calls are open, then the shortest way out of each."""
        out: list[str] = []
        self._sample_sequence(self.main, rng, depth, out)
        return "".join(out)

    def _sample_sequence(
        self, items: tuple[Item, ...], rng: random.Random, depth: int, out: list[str]
    ) -> None:
        for item in items:
            self._sample_item(item, rng, depth, out)

    def _sample_item(self, item: Item, rng: random.Random, depth: int, out: list[str]) -> None:
        deep = depth <= 0
        if isinstance(item, Lit):
            out.append(item.text)
        elif isinstance(item, Chars):
            count = item.low if deep else rng.randint(item.low, min(item.high, item.low + 4))
            out.extend(rng.choice(item.chars) for _ in range(count))
        elif isinstance(item, Call):
            self._sample_sequence(self.rules[item.name], rng, depth - 1, out)
        elif isinstance(item, Opt):
            if not deep and rng.random() < 0.5:
                self._sample_sequence(item.items, rng, depth, out)
        elif isinstance(item, Star):
            for _ in range(0 if deep else rng.choice([0, 1, 1, 2, 3])):
                self._sample_sequence(item.items, rng, depth, out)
        else:
            branches = item.branches
            if deep:
                branch = min(branches, key=lambda b: (self._cost_of_sequence(b), _calls(b)))
            else:
                branch = rng.choice(branches)
            self._sample_sequence(branch, rng, depth, out)

    def _cost_of_sequence(self, items: tuple[Item, ...]) -> int:
        return sum(self._cost(item) for item in items)

    def _cost(self, item: Item) -> int:
        """Characters of the shortest string of ``item`` (rules' costs by fixpoint)."""
        if isinstance(item, Lit):
            return len(item.text)
        if isinstance(item, Chars):
            return item.low
        if isinstance(item, Call):
            return self.rule_costs[item.name]
        if isinstance(item, Opt | Star):
            return 0
        return min(self._cost_of_sequence(b) for b in item.branches)

    @cached_property
    def rule_costs(self) -> dict[str, int]:
        """The shortest length of each rule (a fixpoint from "infinitely long")."""
        costs = dict.fromkeys(self.rules, 10**9)
        object.__setattr__(self, "rule_costs", costs)  # read by _cost while iterating
        changed = True
        while changed:
            changed = False
            for name, body in self.rules.items():
                cost = min(self._cost_of_sequence(body), 10**9)
                if cost < costs[name]:
                    costs[name] = cost
                    changed = True
        return costs

    def shortest(self) -> int:
        """Characters of the shortest string of the main sequence."""
        return self._cost_of_sequence(self.main)
