"""A list of literal words straight into a byte trie, with numpy: the fast path of choices.

A large alternation of literals (``Literal[...]`` or ``enum`` of thousands of names)
compiles, through the generic parser, into one chain per word joined at an alternation
start: every DFA state near the start then holds thousands of NFA states, and the parse
itself costs ~2 us per character in Python. The trie of the words is already deterministic, so
:func:`word_trie` builds it directly: the words are encoded, sorted and deduplicated,
each word's longest common prefix with its predecessor (LCP) says which of its bytes are
new trie nodes, and the parent of a word's first new node is the node its predecessors
made at that depth. All of it is vectorized over the words' bytes.

The parser (:mod:`formcast.automaton.parse`) takes this path for every group that is
only an alternation of at least :data:`CHOICE_MIN_WORDS` literals,
``(?:Paris|Lyon|...)`` (:data:`LITERAL_ALTERNATION`), which is what
:func:`formcast.regex.dialect.trie` writes for that many words. The language is the
same as the generic build's; only the NFA's shape and the cost differ.

Cost: O(total bytes) numpy work plus one ``lexsort`` of the words (``benchmarks/choices.py``
measures it against the generic parser).
"""

from __future__ import annotations

import re
from functools import lru_cache
from types import ModuleType
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

native_parse: ModuleType | None
try:  # choice_characters's scan in C (optional, see pyproject.toml); Python's otherwise
    from formcast import _regex_parse as native_parse
except ImportError:  # pragma: no cover - an install without a C compiler
    native_parse = None

__all__ = [
    "CHOICE_COST_DIVISOR",
    "CHOICE_MIN_WORDS",
    "LITERAL_ALTERNATION",
    "WordTrie",
    "choice_characters",
    "pattern_cost",
    "word_trie",
]

IdArray = npt.NDArray[np.int64]

CHOICE_MIN_WORDS = 32
"""Alternations of at least this many literals are built as a trie (fewer: generically)."""

CHOICE_COST_DIVISOR = 4
"""How many characters of a trie-built alternation cost what one character of any other
regex text costs to compile (a conservative reading of ``benchmarks/choices.py``)."""

_PLAIN_OR_BAR = r"[^\\^$.?*+()\[{]"
_LITERAL_ESCAPE = r"(?:\\x[0-9a-fA-F]{2}|\\[^A-Za-z0-9])"
LITERAL_ALTERNATION = re.compile(
    rf"\(\?:({_PLAIN_OR_BAR}*(?:{_LITERAL_ESCAPE}{_PLAIN_OR_BAR}*)*)\)", re.DOTALL
)
"""A group holding only literal characters, escapes of punctuation, ``\\xNN`` and ``|``
(group 1: its body). Written ``plain* (escape plain*)*``, so that a failed match
backtracks in linear time."""


@lru_cache(maxsize=32)
def choice_characters(pattern: str) -> int:
    """How many characters of ``pattern`` lie in trie-built alternations (groups of at
    least :data:`CHOICE_MIN_WORDS` literals). Cost: one C-speed scan for such groups
    (~1 ms per 100k characters), the last results kept: a compile asks for one pattern
    several times (its cost against the limits, its automaton, its index)."""
    found = 0
    if len(pattern) < CHOICE_MIN_WORDS * 2 or pattern.count("|") < CHOICE_MIN_WORDS - 1:
        return found  # too few bars for one such group: no scan
    if native_parse is not None:  # the same scan in C (~5x faster)
        return int(native_parse.choice_span(pattern, CHOICE_MIN_WORDS))
    return _choice_characters_scanned(pattern)


def _choice_characters_scanned(pattern: str) -> int:
    """:func:`choice_characters`'s scan in Python (the reference of the C one)."""
    found = 0
    for match in LITERAL_ALTERNATION.finditer(pattern):
        if match.group(1).count("|") >= CHOICE_MIN_WORDS - 1:
            found += match.end() - match.start()
    return found


def pattern_cost(pattern: str) -> int:
    """The characters of ``pattern``, those of its trie-built alternations divided by
    :data:`CHOICE_COST_DIVISOR`: what ``Limits.max_regex_length`` bounds, since it stands
    for the time the automaton takes to compile the text."""
    choices = choice_characters(pattern)
    return len(pattern) - choices + choices // CHOICE_COST_DIVISOR


# Past this many distinct LCP values, the owners of shared prefixes are found by one
# Python pass with a stack instead of one numpy pass per value.
_VECTOR_LCP_VALUES = 256


class WordTrie(NamedTuple):
    """A trie over bytes, as local state ids: ``0`` is the root, nodes ``1..nodes``.

    Byte edge ``k`` reads ``byte[k]`` from ``src[k]`` to ``dst[k]`` (one edge into each
    node; no two edges leaving a node read the same byte). ``ends`` are the nodes where a
    word ends (the root when the empty word is one of them), each once.
    """

    nodes: int
    src: IdArray
    byte: IdArray
    dst: IdArray
    ends: IdArray


def word_trie(words: list[bytes]) -> WordTrie:
    """The trie of ``words`` (duplicates and order do not matter). Cost: see the module."""
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    width = int(lengths.max(initial=0))
    joined = b"".join(words)
    if width * len(words) <= _MATRIX_BYTES and b"\x00" not in joined:
        lcp, lengths, fresh_bytes, has_empty = _sorted_matrix(words, width)
    else:
        lcp, lengths, fresh_bytes, has_empty = _sorted_runs(words)
    return _assemble(lcp, lengths, fresh_bytes, has_empty)


# Words as rows of a zero-padded byte matrix when it stays this small (and no word holds
# a zero byte, which the padding could not be told from); else as one run of bytes.
_MATRIX_BYTES = 1 << 26

# The three facts the trie is assembled from, for the sorted distinct non-empty words:
# their common prefix with the word before, their lengths, the bytes of their new nodes
# (word by word, by depth), and whether the empty word was among them.
_Sorted = tuple[IdArray, IdArray, IdArray, bool]


def _sorted_matrix(words: list[bytes], width: int) -> _Sorted:
    """Sort and compare the words as rows of a zero-padded byte matrix: each row read as
    big-endian 64-bit keys sorts with one ``lexsort`` (~4x faster than sorting the bytes
    objects), and a row's length is its count of non-zero bytes."""
    width = max(8, -(-width // 8) * 8)
    grid = np.array(words, dtype=f"S{width}").view(np.uint8).reshape(len(words), width)
    keys = grid.view(">u8")
    order = np.lexsort(keys.T[::-1])
    grid, keys = grid[order], keys[order]
    distinct = np.ones(len(grid), dtype=np.bool_)
    distinct[1:] = (keys[1:] != keys[:-1]).any(axis=1)
    grid = grid[distinct]
    lengths = np.count_nonzero(grid, axis=1).astype(np.int64)
    has_empty = bool(lengths.size) and lengths[0] == 0
    if has_empty:
        grid, lengths = grid[1:], lengths[1:]
    lcp = np.zeros(len(lengths), dtype=np.int64)
    if len(lengths) > 1:  # rows differ, so each has a first difference with the one before
        lcp[1:] = np.argmax(grid[1:] != grid[:-1], axis=1)
    columns = np.arange(width, dtype=np.int32)  # narrow: the mask is words x width
    fresh = (columns >= lcp.astype(np.int32)[:, None]) & (
        columns < lengths.astype(np.int32)[:, None]
    )
    return lcp, lengths, grid[fresh].astype(np.int64), has_empty


def _sorted_runs(words: list[bytes]) -> _Sorted:
    """Sort the words in Python and compare them as one run of bytes (any lengths,
    zero bytes included)."""
    unique = sorted(set(words))
    has_empty = bool(unique) and unique[0] == b""
    if has_empty:
        unique = unique[1:]
    lengths = np.fromiter(map(len, unique), dtype=np.int64, count=len(unique))
    data = np.frombuffer(b"".join(unique), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    word = np.repeat(np.arange(len(unique), dtype=np.int64), lengths)
    depth = np.arange(data.size, dtype=np.int64) - np.repeat(starts, lengths)
    previous = np.maximum(word - 1, 0)
    in_previous = (word > 0) & (depth < lengths[previous])
    other = np.where(in_previous, starts[previous] + depth, 0)
    same = in_previous & (data == data[other])
    first_difference = np.where(same, np.iinfo(np.int64).max, depth)
    lcp = np.zeros(0, dtype=np.int64)
    if len(unique):
        lcp = np.minimum(np.minimum.reduceat(first_difference, starts), lengths)
    fresh = depth >= lcp[word]
    return lcp, lengths, data[fresh].astype(np.int64), has_empty


def _assemble(lcp: IdArray, lengths: IdArray, fresh_bytes: IdArray, has_empty: bool) -> WordTrie:
    """The trie from the sorted words' facts: node ``(word i, depth d)`` is new for
    ``lcp_i < d <= len_i`` (at least one: a sorted distinct word is never a prefix of the
    one before it); new nodes are numbered word by word, by depth."""
    fresh = lengths - lcp
    total = int(fresh.sum())
    base = np.cumsum(fresh) - fresh + 1  # the first new node of each word
    owner = _owner_nodes(lcp, base)
    dst = np.arange(1, total + 1, dtype=np.int64)
    first_new = np.zeros(total, dtype=np.bool_)
    first_new[base[fresh > 0] - 1] = True
    word = np.repeat(np.arange(len(lengths), dtype=np.int64), fresh)
    src = np.where(first_new, owner[word], dst - 1)
    ends = base + fresh - 1
    if has_empty:
        ends = np.concatenate([np.zeros(1, dtype=np.int64), ends])
    return WordTrie(total, src, fresh_bytes, dst, ends)


def _owner_nodes(lcp: IdArray, base: IdArray) -> IdArray:
    """For each word, the node at depth ``lcp`` on its path (0, the root, when the depth
    is 0): made by the last earlier word ``j`` with ``lcp_j < lcp``, at ``base_j + lcp -
    lcp_j - 1``."""
    count = len(lcp)
    owner = np.zeros(count, dtype=np.int64)
    values = np.unique(lcp[lcp > 0])
    if values.size == 0:
        return owner
    maker = np.zeros(count, dtype=np.int64)
    if values.size <= _VECTOR_LCP_VALUES:
        positions = np.arange(count, dtype=np.int64)
        for value in values.tolist():
            last_below = np.maximum.accumulate(np.where(lcp < value, positions, 0))
            at = np.flatnonzero(lcp == value)
            maker[at] = last_below[at - 1]
    else:
        stack: list[int] = []  # earlier words with strictly increasing lcp
        prefixes = lcp.tolist()
        for i, value in enumerate(prefixes):
            while stack and prefixes[stack[-1]] >= value:
                stack.pop()
            maker[i] = stack[-1] if stack else 0
            stack.append(i)
    shared = lcp > 0
    owner[shared] = base[maker[shared]] + lcp[shared] - lcp[maker[shared]] - 1
    return owner
