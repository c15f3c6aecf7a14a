"""Automaton x vocabulary: which tokens each automaton state allows, and where they lead.

A :class:`TokenIndex` is the compiled form of a constraint for one vocabulary. It is
immutable in meaning (rows are computed lazily and cached, but a row never changes),
picklable, and safe to share between threads and sequences; per-sequence state lives in
a :class:`formcast.cursor.Cursor`.

Cost model: construction is O(1) beyond the automaton's own (lazy) construction. A row
(one automaton state) is computed by walking the vocabulary's prefix tries, visiting live
nodes only: the children of every distinct token prefix still alive are stepped through
the byte automaton once, nothing is done over the dead part of the trie, and the
automaton's rows are built as the walk needs them (those of prefixes with children: a
token's end state gets its row when reached). The walk is the C module
``formcast._trie_walk`` (constant C work a live node; built at install time where a C
compiler is found), else numpy, level by level (one gather a level, some twenty array
operations of ~1 us each); both give the same rows.
Where plain bytes cannot tell tokens apart they are not walked at all: inside a free
string they all stay in the state, inside a length-bounded string their state depends
only on their length, and where no plain byte is allowed none is looked at. In either
trie, a prefix whose state loops on every byte below it (a string, an identifier, a run
of digits) keeps its whole subtree there as a slice. For a 49k-token vocabulary a walk
costs ~0.1-0.3 ms with numpy when few tokens fit (a number, a key, a name) and ~1 ms
for a few hundred tokens through a recursive grammar (several times less in C), plus
the automaton rows it builds on the way; it is done once, the first time a sequence
reaches that state. Budget distances are computed only when budget-limited decoding asks
for them.

A row of most of the vocabulary (inside a string, or a key of an object that allows other
keys) is laid out by the C module as a table over the vocabulary, its bitmask written on
the way (:func:`_scattered`): its mask is then a copy of those bits and a step one read of
the table, and its sorted arrays are derived only when something reads them. Such a row
costs ~0.1-0.3 ms from a state whose automaton rows exist, most of it the O(vocabulary)
passes and the page faults of the row's fresh memory; a small row ~20 us. Inside a
string, where a plain token's state depends on its length alone, the plain tokens' part
of the table depends only on the shape of the chain of states by length, not on the
states: it is copied from a template kept per vocabulary and shape, and only the other
tokens are written over it (:func:`_templated`: ~15-20 us a row against ~120-250 us
for the scatter; the first row of a shape builds its template, ~0.1 ms).

Over an automaton whose rows are built in C (a :class:`~formcast.automaton.LazyAutomaton`,
a :class:`~formcast.automaton.PushdownAutomaton`), a state's first visit is one C call
(:meth:`TokenIndex._visited`, ``formcast._trie_walk.Visitor``): the same ways (the chain
of plain bytes and its template, less the tokens holding a byte a string leaves out; an
object's key read by first byte; the whole trie), the same rows, but no Python between
the walks, sorts, scatters and bits (~4-7 us of Python remain around the call, against
~10-30 us around the steps taken one at a time). The Python steps remain for the other
automata (bound to a text, with a trie-built choice walked jointly) and the reference
the tests compare the call with.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import cached_property
from types import ModuleType
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from formcast import blob
from formcast.automaton import DEAD, UNREACHABLE, ByteAutomaton, LazyAutomaton, PushdownAutomaton
from formcast.automaton import lazy as lazy_module
from formcast.automaton.bound import BoundAutomaton
from formcast.automaton.choices import choice_characters
from formcast.automaton.deterministic import NO_NODE
from formcast.automaton.nfa import VIRTUAL_BASE
from formcast.automaton.table import UNBUILT, TableAutomaton, arrays_under
from formcast.cursor import Cursor
from formcast.errors import InvalidOptionError
from formcast.text import TextSlot, text_slots
from formcast.vocabulary import (
    PLAIN_BYTES,
    FlatTrie,
    TokenTrie,
    TrieLevel,
    Vocabulary,
)

native_rows = lazy_module.native_subset  # the DFA rows in C (formcast._subset), if built
native_walk: ModuleType | None
try:  # the trie walk in C, built at install time where a C compiler is found
    from formcast import _trie_walk as native_walk
except ImportError:  # pragma: no cover (the numpy walk below then does the same work)
    native_walk = None

__all__ = ["TokenIndex"]

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]

_UNKNOWN = -2  # a plain successor not computed yet
_ID_LIMIT = 1 << 31  # token ids are int32
_FORMAT = 2  # the layout of to_bytes: bumped when it changes
# The automata an index serialises, by the name its header gives their kind.
_STORED_AUTOMATA: dict[str, type[LazyAutomaton] | type[PushdownAutomaton]] = {
    "lazy": LazyAutomaton,
    "pushdown": PushdownAutomaton,
}
_PARTED = -3  # plain bytes lead to different states
_PLAIN_BYTES_U8 = PLAIN_BYTES.astype(np.uint8)
# A state whose plain bytes part ways has its plain tokens read off by first byte when at
# least this many plain bytes lead on (an object's key: all of them; a number: ten).
_FIRST_BYTE_MIN = 32
_FEW_IDS = 16  # rows of at most this many tokens set their mask bits one by one
# Rows of at most a third of the vocabulary are sorted; larger ones are scattered over it
# (a sort of 16k keys costs about what a scatter over 49k tokens does). Up to
# _ARGSORTED_ROW tokens, an argsort; past it, one sort of packed (token, state) keys.
_SORTED_SHARE = 3
_ARGSORTED_ROW = 512
# Three plain bytes that most grammar states send different ways (see _plain_target).
_SPACE, _DIGIT, _LETTER = 0x20, 0x30, 0x61
_PRINTABLE = 0x7F - _SPACE  # the bytes from the space up to "~"
_NOT_PLAIN = np.setdiff1d(np.arange(_PRINTABLE), PLAIN_BYTES - _SPACE)  # '"' and '\\'
# Trie-built choices of fewer characters than this are walked by DFA rows when the C walk
# is there: building the rows of a short list's prefixes costs less than the numpy walk
# along the NFA's edges (benchmarks/choices.py, the fast and rows paths). With the rows
# built in C too (formcast._subset) the crossover moves to lists ten times as long: a
# walk along 3,000 city names (~30k characters) costs 6.7 ms by rows against 7.9 ms
# jointly, 10,000 names 13 ms against 11 ms; an 8,651-character enum of maskbench's
# (minecraft-dimension-type) 35 ms against 363 ms.
_JOINT_WALK_MIN = 5_000 if native_rows is None else 50_000
# the plain tokens of a row: their ids, their lengths, and the states of a chain by length
_Plain = tuple[IntArray, IntArray, IntArray]
_TABLED = TableAutomaton  # the automata whose table the C walk reads (BoundAutomaton too)
_ON_NODE = -4  # in a walk: the prefix stands on a deterministic NFA node (see _joint_step)


class _Row:
    """One state's allowed tokens and their next states; the budget distances of those
    states are filled in on first use (only budget-limited decoding needs them).

    A large row made by the C scatter (:func:`_scattered`) is held as ``dense``, one entry
    a token of the vocabulary (its next state, or :data:`DEAD`), with ``bits``, its tokens
    as a packed bitmask (EOS left out). When the row's states are few (at most 255, as
    inside a string, where a plain token's state depends on its length alone), ``dense``
    holds one byte a token, a code into ``palette`` (code 0: :data:`DEAD`); else the
    states themselves (int32). A mask then copies the bits and a step reads one entry;
    the sorted ``token_ids`` and ``next_states`` are derived from it the first time they
    are read (O(vocabulary), once). A quarter of the memory of the two arrays for a row of
    ~50k tokens (fresh memory costs its page faults: ~0.1 ms for those two arrays).

    A string's large row a visit made on its template holds the template's codes as
    ``dense`` (shared with every row of that template) and, as ``overrides``, the tokens
    whose state differs from the template's (sorted int32 ids and states, as bytes);
    ``bits`` then decide which tokens are allowed. There an allowed token of code 0 that
    no override names (a character that is not plain, which the visit set in the bits
    instead of listing it) takes ``palette[0]``, which is :data:`DEAD` in other rows."""

    # What a row holds, None where it holds nothing of the kind: class defaults, so that a
    # sorted row a visit answered sets its two alone (_row_of_visit: ~0.2 us less a first
    # visit than an __init__ setting all ten)
    _ids: IntArray | None = None
    _next: IntArray | None = None
    # a visit's answer of a sorted row, (kind, ids, states, bits) as int32 and uint32
    # bytes: a step reads them by a binary search in C, the arrays are made only when read
    _raw: tuple[Any, ...] | None = None
    bits: npt.NDArray[np.uint32] | None = None
    dense: npt.NDArray[np.int32] | npt.NDArray[np.uint8] | None = None
    palette: IntArray | None = None
    lookup: _FirstByteLookup | None = None
    overrides: tuple[bytes, bytes] | None = None
    distances: IntArray | None = None
    longest: tuple[int, int] | None = None  # see TokenIndex._longest

    def __init__(
        self,
        token_ids: IntArray | None,
        next_states: IntArray | None,
        bits: npt.NDArray[np.uint32] | None = None,
        dense: npt.NDArray[np.int32] | npt.NDArray[np.uint8] | None = None,
        palette: IntArray | None = None,
        lookup: _FirstByteLookup | None = None,
        overrides: tuple[bytes, bytes] | None = None,
    ) -> None:
        if dense is None and lookup is None and (token_ids is None or next_states is None):
            raise ValueError("expected a row's tokens and states, its dense table or lookup")
        if overrides is not None and (bits is None or dense is None or palette is None):
            raise ValueError("expected a templated row's bits, codes and palette")
        self._ids = token_ids
        self._next = next_states
        self.bits = bits
        self.dense = dense
        self.palette = palette
        self.lookup = lookup
        self.overrides = overrides

    @property
    def token_ids(self) -> IntArray:
        if self._ids is None:
            self._unpack()
        assert self._ids is not None
        return self._ids

    @property
    def next_states(self) -> IntArray:
        if self._next is None:
            self._unpack()
        assert self._next is not None
        return self._next

    @property
    def stepped_directly(self) -> bool:
        """Whether :meth:`next_state` reads this row without its sorted arrays (a
        visit's answer is searched in C, where that module is still on: the tests turn
        it off after rows were made)."""
        raw = self._raw is not None and native_walk is not None
        return raw or self.dense is not None or self.lookup is not None

    def next_state(self, token_id: int) -> int:
        """The state ``token_id`` leads to (:data:`DEAD` if none) in a dense row, one read
        by first byte, or one a visit answered (:attr:`stepped_directly`)."""
        if self._raw is not None and native_walk is not None:
            return int(native_walk.state_after(self._raw[1], self._raw[2], token_id))
        if self.lookup is not None:
            return self.lookup.state_of(token_id)
        dense = self.dense
        assert dense is not None
        if token_id >= dense.size or token_id < 0:
            return DEAD
        if self.overrides is not None:
            return self._templated_state(token_id)
        entry = int(dense[token_id])
        return entry if self.palette is None else int(self.palette[entry])

    def _templated_state(self, token_id: int) -> int:
        """:meth:`next_state` of a row on its template (see the class docstring)."""
        bits, dense, palette, overrides = self.bits, self.dense, self.palette, self.overrides
        assert bits is not None and dense is not None and palette is not None
        assert overrides is not None
        if not (int(bits[token_id >> 5]) >> (token_id & 31)) & 1:
            return DEAD
        if native_walk is not None:
            state = int(native_walk.state_after(overrides[0], overrides[1], token_id))
        else:
            ids = _ints(overrides[0])
            at = int(np.searchsorted(ids, token_id))
            found = at < ids.size and int(ids[at]) == token_id
            state = int(_ints(overrides[1])[at]) if found else DEAD
        return state if state != DEAD else int(palette[dense[token_id]])

    def _unpack(self) -> None:
        """The sorted tokens and states of a dense row (readers racing here compute the
        same arrays; the states are set first, so the ids never come without them). A row
        read by first byte lays out its table here, the first time (O(vocabulary)); a
        visit's reads its bytes in place."""
        if self._raw is not None:
            self._next = _ints(self._raw[2])
            self._ids = _ints(self._raw[1])
            return
        if self.dense is None and self.lookup is not None:
            self.dense, self.palette = self.lookup.table()
        dense = self.dense
        assert dense is not None
        if self.overrides is not None:
            self._unpack_templated()
            return
        ids = np.flatnonzero(dense).astype(np.int32)
        entries = dense[ids]
        self._next = (entries if self.palette is None else self.palette[entries]).astype(
            np.int32, copy=False
        )
        self._ids = ids

    def _unpack_templated(self) -> None:
        """:meth:`_unpack` of a row on its template: the allowed tokens from the bits, their
        states from the template's codes, then the overrides' (O(vocabulary), once)."""
        bits, dense, palette, overrides = self.bits, self.dense, self.palette, self.overrides
        assert bits is not None and dense is not None and palette is not None
        assert overrides is not None
        ids = np.flatnonzero(_unpacked_bits(bits, dense.size)).astype(np.int32)
        states = palette[dense[ids]].astype(np.int32)
        changed, changed_states = _ints(overrides[0]), _ints(overrides[1])
        at = np.searchsorted(ids, changed)
        inside = at < ids.size
        hit = inside.copy()
        hit[inside] = ids[at[inside]] == changed[inside]
        states[at[hit]] = changed_states[hit]
        self._next = states
        self._ids = ids


class TokenIndex:
    """The allowed tokens and next states of every automaton state, computed on demand.

    Args:
        automaton: the lazy byte-level automaton of the constraint.
        vocabulary: the tokenizer's token bytes and EOS ids.
        description: a human-readable name of the constraint (shown in errors).

    End of sequence is not part of the rows: a cursor allows EOS exactly in accepting
    states.
    """

    def __init__(
        self, automaton: ByteAutomaton, vocabulary: Vocabulary, *, description: str = ""
    ) -> None:
        self.automaton = automaton
        self.vocabulary = vocabulary
        self.description = description or automaton.pattern
        self.build_warnings: tuple[dict[str, str], ...] = ()
        """The warnings compiling the constraint emitted (:func:`formcast.errors.warning_data`
        form), said again when a cache hands the index out."""
        self._usable_bytes = vocabulary.single_byte_tokens >= 0
        # the vocabulary's size and its words of bits, read at every first visit
        self._size = vocabulary.size
        self._words = (vocabulary.size + 31) // 32
        self._rows: dict[int, _Row] = {}
        self._distances: dict[int, int] = {}
        self._packed: dict[tuple[int, int], npt.NDArray[np.uint32]] = {}
        self._forced: dict[tuple[int, int], bytes] = {}  # see forced_bytes
        self._plain_next = np.full(64, _UNKNOWN, dtype=np.int32)  # see _plain_successor
        self._loop_bytes = np.zeros((64, 4), dtype=np.uint64)  # see _loops
        self._loop_known = np.zeros(64, dtype=np.bool_)
        self._lock = threading.Lock()

    # -- pickling: caches travel, the lock does not -------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        state.pop("_visit", None)  # bound to this process's Visitor
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- plain-data serialisation (the disk cache) ---------------------------------------
    def to_bytes(self) -> bytes:
        """The index as plain data, without its vocabulary: the automaton's states and rows
        reached so far and the token rows built so far (:mod:`formcast.blob`; no pickle).

        Indexes over a :class:`~formcast.automaton.LazyAutomaton` or a recursive
        pattern's :class:`~formcast.automaton.PushdownAutomaton` serialise (the latter
        with its machines, frames and sets of stacks); one bound to a text does not.
        Cost: linear in the states and rows; other threads adding rows wait meanwhile.

        Raises:
            InvalidOptionError: the index is bound to a text.
        """
        automaton = self.automaton
        if isinstance(automaton, PushdownAutomaton):
            kind = "pushdown"
        elif isinstance(automaton, LazyAutomaton):
            kind = "lazy"
        else:
            what = "bound to a text" if isinstance(automaton, BoundAutomaton) else "not compiled"
            raise InvalidOptionError(
                f"expected an index over a compiled constraint, found one over "
                f"{type(automaton).__name__} ({what}), which is not saved"
            )
        with self._lock:  # first: every state these name exists before the automaton's copy
            rows = sorted(self._rows.items())
            distances = sorted(self._distances.items())
            plain_next = self._plain_next.copy()
        automaton_meta, arrays = automaton.to_arrays()
        arrays = {f"automaton.{name}": array for name, array in arrays.items()}
        arrays.update(
            row_states=np.array([state for state, _ in rows], dtype=np.int64),
            row_offsets=np.cumsum([0, *(r.token_ids.size for _, r in rows)], dtype=np.int64),
            row_tokens=_concat([r.token_ids for _, r in rows]),
            row_next=_concat([r.next_states for _, r in rows]),
            distance_states=np.array([state for state, _ in distances], dtype=np.int64),
            distance_values=np.array([value for _, value in distances], dtype=np.int64),
            plain_next=plain_next,
        )
        meta = {
            "format": _FORMAT,
            "description": self.description,
            "vocabulary": self.vocabulary.fingerprint,
            "kind": kind,
            "automaton": automaton_meta,
            "warnings": list(self.build_warnings),
        }
        return blob.pack(meta, arrays)

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, vocabulary: Vocabulary) -> TokenIndex:
        """The index :meth:`to_bytes` wrote, over ``vocabulary`` (the one it was built
        for). Reads plain data only: nothing in ``data`` can run code.

        Raises:
            ValueError: ``data`` is not such an index, is damaged, or was built for
                another vocabulary.
        """
        meta, arrays = blob.unpack(data)
        if meta.get("format") != _FORMAT:
            raise ValueError(f"expected index format {_FORMAT}, found {meta.get('format')!r}")
        if meta.get("vocabulary") != vocabulary.fingerprint:
            raise ValueError("expected the vocabulary the index was built for, found another")
        kind = _STORED_AUTOMATA.get(str(meta.get("kind")))
        if kind is None:
            raise ValueError(f"expected an automaton kind of {sorted(_STORED_AUTOMATA)}")
        automaton = kind.from_arrays(meta.get("automaton", {}), arrays_under(arrays, "automaton."))
        index = cls(automaton, vocabulary, description=str(meta.get("description", "")))
        index.build_warnings = _warnings_of(meta.get("warnings", []))
        index._adopt_rows(arrays, automaton.num_states)
        return index

    def _adopt_rows(self, arrays: Mapping[str, npt.NDArray[Any]], count: int) -> None:
        """Take the token rows, distances and plain-byte successors :meth:`to_bytes`
        wrote, over an automaton of ``count`` states."""
        try:
            states = arrays["row_states"].tolist()
            offsets = arrays["row_offsets"].tolist()
            tokens, following = arrays["row_tokens"], arrays["row_next"]
            distance_states = arrays["distance_states"].tolist()
            distance_values = arrays["distance_values"].tolist()
            plain_next = arrays["plain_next"]
        except KeyError as missing:
            raise ValueError(f"expected an index field {missing}, found none") from None
        if len(offsets) != len(states) + 1 or tokens.shape != following.shape:
            raise ValueError("expected one offset per row and one state per token")
        if len(distance_states) != len(distance_values) or plain_next.ndim != 1:
            raise ValueError("expected one distance per state and a flat plain-byte table")
        named = [np.asarray(states), following, np.asarray(distance_states), plain_next]
        if any(part.size and int(part.max()) >= count for part in named):
            raise ValueError(f"expected token rows naming the automaton's {count} states")
        for k, state in enumerate(states):
            span = slice(offsets[k], offsets[k + 1])
            self._rows[state] = _Row(
                tokens[span].astype(np.int32), following[span].astype(np.int32)
            )
        self._distances = dict(zip(distance_states, distance_values, strict=True))
        self._plain_next = plain_next.astype(np.int32)

    def cursor(self, text: str | None = None) -> Cursor:
        """A fresh per-sequence :class:`~formcast.cursor.Cursor` at the initial state.

        ``text`` is the request's text, required when the constraint copies values from
        it (``FromText``, see :attr:`text_slots`) and refused otherwise. O(1) without a
        text; with one, the cost of :meth:`bind`.
        """
        if text is not None:
            return Cursor(self.bind(text))
        if self.text_slots:
            raise InvalidOptionError(
                f"expected a text for {self.description!r}, which copies values from the "
                "text (FromText), found none: call index.cursor(text=...)"
            )
        return Cursor(self)

    @cached_property
    def text_slots(self) -> tuple[TextSlot, ...]:
        """The kinds of values this constraint copies from a request's text (empty when
        it copies none)."""
        if not isinstance(self.automaton, LazyAutomaton):
            return ()
        return text_slots(self.automaton.pattern)

    def bind(self, text: str) -> TokenIndex:
        """The index of one request: this constraint with ``text`` in its ``FromText``
        values. Rows are built lazily, for this request only.

        Cost: linear in the text (a few ms for 2,000 characters) plus one weighted
        distance table of the automaton (linear in its NFA).

        Raises:
            InvalidOptionError: the constraint copies nothing from a text, or ``text`` is
                not a str.
            NoTextValueError: the text holds no value for a field the output needs.
        """
        if not isinstance(text, str):
            raise InvalidOptionError(f"expected the text as str, found {type(text).__name__}")
        if not self.text_slots or not isinstance(self.automaton, LazyAutomaton):
            raise InvalidOptionError(
                f"expected a constraint that copies values from the text (FromText), found "
                f"{self.description!r}, which copies none"
            )
        bound = BoundAutomaton(self.automaton, self.text_slots, text, self._usable_bytes)
        return TokenIndex(bound, self.vocabulary, description=self.description)

    # -- queries --------------------------------------------------------------------------
    @cached_property
    def _eos_ids(self) -> IntArray:
        """The EOS ids, sorted (set in the masks of accepting states)."""
        return np.fromiter(sorted(self.vocabulary.eos_token_ids), dtype=np.int32)

    @property
    def initial_state(self) -> int:
        return self.automaton.initial

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return self.vocabulary.eos_token_ids

    @property
    def computed_rows(self) -> int:
        """How many states have their row built so far (for benchmarks and tests)."""
        return len(self._rows)

    def is_accepting(self, state: int) -> bool:
        """Whether the output may end in ``state``."""
        return self.automaton.is_accepting(state)

    def row(self, state: int) -> tuple[IntArray, IntArray]:
        """``(token_ids, next_states)`` of every non-EOS token allowed in ``state``.

        ``token_ids`` is sorted ascending. The arrays are shared: do not modify them.
        First call per state costs one vectorised vocabulary walk; later calls are a dict
        lookup.
        """
        found = self._row(state)
        return found.token_ids, found.next_states

    def next_state(self, state: int, token_id: int) -> int:
        """The state after ``token_id``, or -1 if the token is not allowed (EOS excluded)."""
        found = self._row(state)
        if not 0 <= token_id < _ID_LIMIT:
            return -1
        if found.stepped_directly:  # one entry of a large row, or a search in C
            following = found.next_state(token_id)
            return -1 if following == DEAD else following
        token_ids, next_states = found.token_ids, found.next_states
        # an int32 needle: a Python int would make numpy cast the whole row first (~12 us)
        position = int(token_ids.searchsorted(np.int32(token_id)))
        if position < token_ids.size and token_ids[position] == token_id:
            return int(next_states[position])
        return -1

    def walk_bytes(self, state: int, data: bytes) -> int:
        """Advance ``state`` over raw bytes; -1 once the automaton dies."""
        state = self.automaton.walk(data, state)
        return -1 if state == DEAD else state

    def min_tokens_to_accept(self, state: int) -> int:
        """Tokens that always suffice to reach an accepting state from ``state``.

        Counted over the vocabulary's single-byte tokens, so a path of exactly this many
        tokens exists; 0 in accepting states; :data:`UNREACHABLE` if none exists.
        """
        distance = self._distances.get(state)
        if distance is None:
            distance = min(
                self.automaton.min_bytes_to_accept(state, self._usable_bytes), UNREACHABLE
            )
            self._distances[state] = distance
        return distance

    def budget_binds(self, state: int, tokens_left: int) -> bool:
        """Whether :meth:`budget_row` would drop any token of ``state``'s row. O(1) once
        the row's longest distances are known (computed on the first call per row)."""
        return self._longest(self._row(state))[0] > tokens_left - 1

    def budget_narrows(self, state: int, tokens_left: int) -> bool:
        """Whether :meth:`budget_row` would drop a token of ``state``'s row from which an
        accepting state can still be reached (the budget's choice, unlike a token that
        leads nowhere, which it drops at any budget). O(1) as :meth:`budget_binds`."""
        return self._longest(self._row(state))[1] > tokens_left - 1

    def budget_row(self, state: int, tokens_left: int) -> tuple[IntArray, IntArray]:
        """The row of ``state`` keeping only tokens after which ``tokens_left - 1`` tokens
        still suffice to reach an accepting state (EOS counts as no token)."""
        found = self._row(state)
        keep = self._distances_of(found) <= tokens_left - 1
        if keep.all():
            return found.token_ids, found.next_states
        return found.token_ids[keep], found.next_states[keep]

    def cached_packed_mask(self, state: int, width: int | None) -> npt.NDArray[np.uint32] | None:
        """:meth:`packed_mask` if it was already built (``width`` None: the vocabulary
        size), else ``None``; never computes anything."""
        return self._packed.get((state, self.vocabulary.size if width is None else width))

    def packed_mask(self, state: int, width: int) -> npt.NDArray[np.uint32]:
        """The packed allowed-token bitmask of ``state`` for logits of ``width`` (EOS set in
        accepting states): bit ``i % 32`` of word ``i // 32``. Cached per (state, width);
        the array is shared and read-only."""
        key = (state, width)
        cached = self._packed.get(key)
        if cached is not None:
            return cached
        visited = self._first_packed(key)
        if visited is not None:
            return visited
        found = self._row(state)
        words = (width + 31) // 32
        eos = self._eos_ids
        with_eos = eos.size > 0 and self.automaton.is_accepting(state)  # EOS set too
        if found.bits is not None and found.bits.size == words and not with_eos:
            packed = found.bits  # read-only from here: the row's bits are never written
        elif found.bits is not None and found.bits.size <= words:
            # the bits the C scatter wrote: no pass over the row's ~50k ids
            packed = np.zeros(words, dtype=np.uint32)
            packed[: found.bits.size] = found.bits
            if with_eos:
                packed |= _packed_bits(eos, words)
        else:
            ids = found.token_ids
            if with_eos:
                ids = np.union1d(ids, eos).astype(np.int32)
            packed = _packed_bits(ids, words)
        packed.setflags(write=False)
        with self._lock:
            return self._packed.setdefault(key, packed)

    def _first_packed(self, key: tuple[int, int]) -> npt.NDArray[np.uint32] | None:
        """:meth:`packed_mask` of ``key`` (state, width) where its state was not visited
        and :meth:`_visited` makes its row, in one flat pass: the row kept, and its bits
        kept as the mask (with EOS set in an accepting state; ``width`` the vocabulary's
        size or past it in the same words); None elsewhere (the row kept, if made: the
        caller goes on from it). Cursor.bitmask calls it on a miss: the general
        way's calls and checks were ~1.7 us of a small first visit's ~3 of Python
        (first_visits.py small)."""
        state, width = key
        if width != self._size and (width < self._size or (width + 31) >> 5 != self._words):
            return None
        if state in self._rows or state == DEAD or not self._visits:
            return None
        visited = self._visited(state)  # the one way to the Visitor: tests switch it off
        if visited is None:
            return None
        row = self._rows.setdefault(state, visited)
        bits = row.bits
        if bits is None or bits.size != self._words:
            return None
        automaton: Any = self.automaton  # a TableAutomaton, as _visits says: its flags read
        if self._eos_ids.size and automaton._accepting[state]:  # EOS set too: a copy
            packed = bits | self._eos_bits
            packed.setflags(write=False)
            return self._packed.setdefault(key, packed)
        if bits.flags.writeable:  # not the visit's bytes read in place
            bits.setflags(write=False)  # the row's bits are never written
        return self._packed.setdefault(key, bits)

    @cached_property
    def _eos_bits(self) -> npt.NDArray[np.uint32]:
        """The EOS ids as packed bits over the vocabulary's words (an accepting state's
        mask is its row's bits and these)."""
        return _packed_bits(self._eos_ids, self._words)

    def forced_bytes(self, state: int, limit: int = 256) -> bytes:
        """The bytes the automaton forces from ``state``: while a state is not accepting and
        has exactly one live byte, that byte is the only possible continuation. Cached per
        (state, limit): a decoding loop asks at every step of every row."""
        key = (state, limit)
        found = self._forced.get(key)
        if found is None:
            found = self._forced[key] = self._walk_forced(state, limit)
        return found

    def _walk_forced(self, state: int, limit: int) -> bytes:
        out = bytearray()
        automaton = self.automaton
        while len(out) < limit and not automaton.is_accepting(state):
            live = automaton.live_bytes(state)
            if live.size != 1:
                break
            byte = int(live[0])
            out.append(byte)
            state = int(automaton.row(state)[byte])
        return bytes(out)

    # -- the vectorised walk ---------------------------------------------------------------
    def _row(self, state: int) -> _Row:
        cached = self._rows.get(state)
        if cached is not None:
            return cached
        computed = self._visited(state) if self._visits else None
        if computed is None:
            computed = self._walk_vocabulary(state)
        with self._lock:
            return self._rows.setdefault(state, computed)

    def _longest(self, row: _Row) -> tuple[int, int]:
        """The longest ``min_tokens_to_accept`` after one token of ``row`` (a dead end counts
        as :data:`UNREACHABLE`) and the longest finite one, -1 for a row without tokens;
        computed once per row, over its distinct next states."""
        if row.longest is None:
            states = np.unique(row.next_states)
            distances = [self.min_tokens_to_accept(int(s)) for s in states]
            finite = [d for d in distances if d < UNREACHABLE]
            row.longest = (max(distances, default=-1), max(finite, default=-1))
        return row.longest

    def _distances_of(self, row: _Row) -> IntArray:
        """``min_tokens_to_accept`` of each next state of ``row`` (computed once per row)."""
        if row.distances is None:
            unique, inverse = np.unique(row.next_states, return_inverse=True)
            per_state = np.fromiter(
                (self.min_tokens_to_accept(int(s)) for s in unique),
                dtype=np.int32,
                count=unique.size,
            )
            row.distances = per_state[inverse].astype(np.int32)
        return row.distances

    def _walk_vocabulary(self, state: int) -> _Row:
        """Every token allowed in ``state`` and the state it leads to (a dense row where
        the C scatter made one: see :func:`_sorted_by_token`).

        Plain tokens (every byte stands for itself inside a JSON string: most of a
        vocabulary) take a shortcut wherever plain bytes cannot tell tokens apart:

        - when every plain byte from ``state`` leads to one state, and so on for each
          next one (a free string loops on itself; a length-bounded string counts one
          more character), a plain token's state depends only on its length, and no
          plain token is walked;
        - otherwise the plain trie is walked like the others.

        The other tokens (quotes, escapes, control and multi-byte characters) are walked;
        in either trie a prefix whose state loops on every byte below it keeps its whole
        subtree there without a walk (:meth:`_walk_trie`). Inside a trie-built choice,
        prefixes follow the choice's trie without DFA rows (:meth:`_joint_step`)."""
        vocabulary = self.vocabulary
        joint = self._joint_automaton()
        chain = None
        if joint is None or joint.single_nodes(np.full(1, state, np.int32))[0, 0] == NO_NODE:
            chain = self._plain_chain(state, vocabulary.plain_trie.max_length)
        plain: _Plain | None = None
        if chain is None:
            by_first_byte = self._first_byte_row(state) if joint is None else None
            if by_first_byte is not None:
                return by_first_byte
            trie = vocabulary.token_trie
        else:
            trie = vocabulary.other_trie
            if chain.size > 1 and chain[1] != DEAD:  # else no plain token is allowed
                plain = (vocabulary.plain_token_ids, vocabulary.plain_token_lengths, chain)
        templates = None
        if plain is not None and native_walk is not None:
            templates = _plain_templates(vocabulary)
        automaton = self.automaton
        if joint is None and native_walk is not None and isinstance(automaton, _TABLED):

            def finish(ids: IntArray, states: IntArray) -> _Row:
                # on the walk's own buffers, before they are given back: no copy of them
                return _sorted_by_token([ids], [states], vocabulary.size, trie, plain, templates)

            return _walk_natively(automaton, trie, state, finish)
        ids, states = self._walk_trie(trie, state, joint)
        return _sorted_by_token(ids, states, vocabulary.size, trie, plain, templates)

    def _visited(self, state: int) -> _Row | None:
        """The row of ``state`` by one C call, :class:`formcast._trie_walk.Visitor`'s
        visit, which takes the ways below (the chain of plain bytes, an object's key, the
        whole trie) and builds the rows it reads, where the automaton's rows are built in
        C (a lazy DFA's, a pushdown automaton's); ``None`` elsewhere (and where those
        modules are not built). The same row as the ways below take one call at a time:
        ~10 us less of Python around the walk at the median of maskbench's first visits
        (see :func:`_row_of_visit`)."""
        if state == DEAD or not self._visits:
            return None
        automaton: Any = self.automaton  # a TableAutomaton, as _visits says
        found = automaton.visit_building(self._visit, state)
        return None if found is None else _row_of_visit(found, self.vocabulary)

    @cached_property
    def _visit(self) -> Callable[..., tuple[Any, ...]]:
        """The visit of this vocabulary's Visitor (see :meth:`_visited`), looked up once."""
        visit: Callable[..., tuple[Any, ...]] = _visitor(self.vocabulary).visit
        return visit

    @cached_property
    def _visits(self) -> bool:
        """Whether :meth:`_visited` makes this index's rows: an automaton whose rows are
        built in C (:attr:`TableAutomaton.rows_in_c
        <formcast.automaton.table.TableAutomaton.rows_in_c>`), without a trie-built
        choice worth walking directly (the same for every state)."""
        automaton = self.automaton
        return (
            native_walk is not None
            and isinstance(automaton, TableAutomaton)
            and automaton.rows_in_c
            and self._joint_automaton() is None
        )

    def _first_byte_row(self, state: int) -> _Row | None:
        """The row of a state whose plain bytes part ways but lead on, most of them, to
        states that stay where they are on every plain byte: an object's key, where each
        declared name takes its own way and every other byte starts an undeclared key,
        whose characters loop. A plain token whose first byte leads to such a state ends
        there, whatever its length: the row's plain tokens are read off their first byte
        (:class:`_FirstByteLookup`) and its bits are those of the plain tokens by first
        byte, joined (:attr:`Vocabulary.plain_bits_by_first`); only the plain tokens
        under the other first bytes (the declared names' initials) and the other tokens
        are walked. ``None`` where it does not apply (fewer than :data:`_FIRST_BYTE_MIN`
        live plain bytes, no looping state, no C walk). Cost: one C call to part the plain
        bytes (:func:`formcast._trie_walk.first_byte_split`), a few numpy calls over the
        packed words, the walks and the rows they build: ~0.17 ms at the median and
        ~1.1 ms at the p99 of maskbench's key rows, against ~0.3-2 ms for a walk of the
        whole trie below such a state."""
        automaton = self.automaton
        if native_walk is None or not isinstance(automaton, _TABLED):
            return None
        table = automaton.table  # the row of ``state`` is built: its plain chain was asked
        # An undeclared key starts with any byte no declared name starts with: '~' or
        # '`' (two reads tell the usual grammar state, where they lead nowhere or on)
        probe = int(table[state, ord("~")]) or int(table[state, ord("`")])
        if probe <= DEAD or not self._loops_on_plain(probe):
            return None
        targets = table[state, PLAIN_BYTES]
        following = targets[targets != DEAD]
        if following.size < _FIRST_BYTE_MIN or int(following.min()) < 0:
            return None
        if not isinstance(automaton, BoundAutomaton):  # a built row is whole: one read
            following = following[table[following, 0] == UNBUILT]  # (a key has ~90)
        if following.size:
            automaton.build_rows(np.unique(following).tolist())
        # code c of by_first: lists[0][c - 1], a looping state; 0: not read (see the C)
        by_first = np.empty(256, dtype=np.uint8)
        lists = np.empty((4, 256), dtype=np.int32)
        looped, walked, unread = native_walk.first_byte_split(
            automaton.table, state, _PLAIN_BYTES_U8, by_first, lists
        )
        if not looped:
            return None
        vocabulary = self.vocabulary
        plain_trie = vocabulary.plain_trie
        walked_ids, walked_states = _walk_natively(automaton, vocabulary.other_trie, state, _copied)
        if walked:
            nodes = plain_trie.flat.root_children[lists[1, :walked]]
            start = (nodes[nodes >= 0], lists[2, :walked][nodes >= 0])
            ids, states = _walk_natively(automaton, plain_trie, state, _copied, start)
            walked_ids, walked_states = walked_ids + ids, walked_states + states
        return _looked_up(
            vocabulary, by_first, lists[0, :looped], lists[3, :unread], walked_ids, walked_states
        )

    def _loops_on_plain(self, state: int) -> bool:
        """Whether ``state`` stays where it is on every plain byte (its row built here)."""
        row = self._built_row(state)
        return bool((row[PLAIN_BYTES] == state).all())

    def _built_row(self, state: int) -> IntArray:
        """The automaton's row of ``state``: a view of its table where that row is built,
        else :meth:`~formcast.automaton.table.TableAutomaton.row` (which builds it)."""
        automaton = self.automaton
        if isinstance(automaton, _TABLED):
            row: IntArray = automaton.table[state]
            if int(row.min()) >= 0:
                return row
        return automaton.row(state)

    def _joint_automaton(self) -> LazyAutomaton | None:
        """The automaton when its deterministic nodes are worth walking directly (it
        holds a trie-built choice, of at least :data:`_JOINT_WALK_MIN` characters when
        the C walk is there), else None."""
        automaton = self.automaton
        if not isinstance(automaton, LazyAutomaton):
            return None
        if native_walk is not None and self._choice_characters < _JOINT_WALK_MIN:
            return None  # a short list: its rows cost less than walking the NFA's edges
        return automaton if automaton.deterministic_nodes() is not None else None

    @cached_property
    def _choice_characters(self) -> int:
        """The characters of the pattern's trie-built choices (one scan of the pattern)."""
        return choice_characters(self.automaton.pattern)

    def _plain_chain(self, state: int, depth: int) -> IntArray | None:
        """``chain[k]``: the state every ``k`` plain bytes lead to from ``state``, for ``k``
        up to ``depth``; ``None`` if some plain bytes part ways on the way (O(depth)
        lookups, each state's plain successor computed once)."""
        automaton = self.automaton
        if isinstance(automaton, LazyAutomaton) and lazy_module.native_subset is not None:
            row = automaton.table[state]  # one call, its rows built in C
            if row[0] >= 0 and _plain_target(row) == _PARTED:
                return None  # built, and parted at once: the usual grammar state
            return automaton.plain_chain(state, depth + 1, _PLAIN_BYTES_U8)
        if self._plain_successor(state) == _PARTED:
            return None  # the common case inside most grammars: known before any array
        chain = np.full(depth + 1, DEAD, dtype=np.int32)
        chain[0] = current = state
        for k in range(1, depth + 1):
            following = self._plain_successor(current)
            if following == _PARTED:
                return None
            if following == DEAD:
                break
            chain[k] = following
            if following == current:  # a loop: every later step stays here
                chain[k:] = current
                break
            current = following
        return chain

    def _plain_successor(self, state: int) -> int:
        """The one state ``state`` moves to on every plain byte, or ``_PARTED`` where plain
        bytes lead to different states (cached per state)."""
        known = self._plain_next
        if state >= known.size:
            grown = np.full(max(2 * known.size, state + 1), _UNKNOWN, dtype=np.int32)
            grown[: known.size] = known
            self._plain_next = known = grown
        found = int(known[state])
        if found == _UNKNOWN:
            found = _plain_target(self._built_row(state))
            known[state] = found
        return found

    def _loops(self, states: IntArray) -> npt.NDArray[np.uint64]:
        """The bytes on which each of ``states`` stays where it is, as 256-bit sets (four
        uint64 words a state, the layout of :attr:`TrieLevel.below_bytes`). Computed once
        per state from its row (which the walk needs anyway), then one gather."""
        if int(states.max()) >= self._loop_known.size:
            size = max(2 * self._loop_known.size, int(states.max()) + 1)
            known = np.zeros(size, dtype=np.bool_)
            known[: self._loop_known.size] = self._loop_known
            loops = np.zeros((size, 4), dtype=np.uint64)
            loops[: self._loop_bytes.shape[0]] = self._loop_bytes
            self._loop_bytes, self._loop_known = loops, known
        loops, known = self._loop_bytes, self._loop_known
        for state in set(states[~known[states]].tolist()):
            staying = self.automaton.row(state) == state
            loops[state] = np.packbits(staying, bitorder="little").view(np.uint64)
            known[state] = True  # after the bits: a reader never sees a half-written set
        return loops[states]

    def _walk_trie(
        self, trie: TokenTrie, state: int, joint: LazyAutomaton | None = None
    ) -> tuple[list[IntArray], list[IntArray]]:
        """Advance every token of ``trie`` from ``state``, one level (byte position) at a
        time, visiting only live nodes: each live node's prefix is stepped once (a gather
        per level from its parent's state), and its children are the next level's nodes.

        A node whose state loops on every byte below it in the trie keeps its whole
        subtree in that state (inside a string, an identifier, a run of digits), taken as
        a slice of the trie's token order instead of walked.

        ``joint`` (an automaton with deterministic nodes): prefixes standing on such a
        node follow the NFA's edges instead of DFA rows (:meth:`_joint_step`).

        Cost: O(live nodes) numpy work per level, and the automaton rows of the states
        of live inner nodes; nothing over the dead part of the trie."""
        automaton = self.automaton
        if joint is None and native_walk is not None and isinstance(automaton, _TABLED):
            return _walk_natively(automaton, trie, state, _copied)
        found_ids: list[IntArray] = []
        found_states: list[IntArray] = []
        nodes = np.arange(trie.levels[0].node_bytes.size if trie.levels else 0, dtype=np.int32)
        parent_states = np.full(nodes.size, state, dtype=np.int32)
        parent_places = None
        if joint is not None:
            start = joint.single_nodes(np.full(1, state, dtype=np.int32))
            parent_places = np.repeat(start, nodes.size, axis=1)
        for level in trie.levels:
            data = level.node_bytes[nodes]
            if joint is None or parent_places is None:
                reached, places = self.automaton.step(parent_states, data), None
            else:
                reached, places = self._joint_step(joint, parent_states, parent_places, data)
            alive = np.flatnonzero(reached)  # DEAD is 0 (_ON_NODE is alive)
            if not alive.size:
                break
            nodes, reached = nodes[alive], reached[alive]
            places = None if places is None else places[:, alive]
            whole = self._staying(level, nodes, reached)
            if whole is not None:  # whole subtrees, the node's own token included
                first, stop = level.node_first[nodes[whole]], level.node_stop[nodes[whole]]
                found_ids.append(trie.token_ids[_slices(first, stop - first)])
                found_states.append(np.repeat(reached[whole], stop - first))
                nodes, reached = nodes[~whole], reached[~whole]
                places = None if places is None else places[:, ~whole]
            tokens = level.node_token[nodes]
            ending = tokens >= 0
            ending_states = reached[ending]
            if joint is not None and places is not None:
                on_node = ending_states == _ON_NODE
                if on_node.any():
                    at = places[:, ending][:, on_node]
                    ending_states[on_node] = joint.node_states(at[0] + at[1])
            found_ids.append(tokens[ending])
            found_states.append(ending_states)
            first, sizes = level.child_first[nodes], level.child_count[nodes]
            total = int(sizes.sum())
            if not total:
                break
            nodes = _slices(first, sizes, total)
            parent_states = np.repeat(reached, sizes)
            if places is not None:
                parent_places = np.repeat(places, sizes, axis=1)
        return found_ids, found_states

    @staticmethod
    def _joint_step(
        joint: LazyAutomaton,
        states: IntArray,
        places: npt.NDArray[np.int64],
        data: npt.NDArray[np.uint8],
    ) -> tuple[IntArray, npt.NDArray[np.int64]]:
        """The prefixes advanced by their bytes: their states and where they stand.
        ``places`` holds, per prefix, where it stands (:meth:`LazyAutomaton.single_nodes`:
        a deterministic template node, or :data:`NO_NODE`, and its copy's two shifts). One
        on a node moves to the node's child, stays on it when that child is deterministic
        too (its state then reads :data:`_ON_NODE`: no DFA state is registered) and else
        takes the child's DFA state; any other takes a DFA step, and stands on a node when
        the state reached is one deterministic node alone. The states are the ones DFA
        steps would reach (:mod:`formcast.automaton.deterministic`)."""
        reached = np.empty_like(states)
        moved = places.copy()
        on_node = places[0] != NO_NODE
        by_row, by_node = np.flatnonzero(~on_node), np.flatnonzero(on_node)
        if by_row.size:
            stepped = joint.step(states[by_row], data[by_row])
            reached[by_row] = stepped
            moved[:, by_row] = joint.single_nodes(stepped)
        if by_node.size:
            deterministic = joint.deterministic_nodes()
            if deterministic is None:  # pragma: no cover (joint automata have them)
                raise AssertionError("expected an automaton with deterministic nodes")
            children = deterministic.children(places[0, by_node], data[by_node])
            concrete_shift, virtual_shift = places[1, by_node], places[2, by_node]
            members = children + np.where(children < VIRTUAL_BASE, concrete_shift, virtual_shift)
            stays = deterministic.is_deterministic(children)
            copied = stays & (concrete_shift != 0)
            stays[copied] = ~deterministic.is_attached(members[copied])
            moved[0, by_node] = np.where(stays, children, NO_NODE)
            following = np.where(stays, _ON_NODE, DEAD).astype(np.int32)
            leaving = np.flatnonzero(~stays & (children != NO_NODE))
            if leaving.size:
                following[leaving] = joint.node_states(members[leaving])
            reached[by_node] = following
        return reached, moved

    def _staying(self, level: TrieLevel, nodes: IntArray, states: IntArray) -> BoolArray | None:
        """Which of ``nodes`` (live, at ``states``) loop on every byte below them, so
        that their whole subtree ends in their state; ``None`` when none does. Only
        large subtrees are checked (:attr:`~formcast.vocabulary.TrieLevel.node_large`):
        smaller ones cost less to walk."""
        large = np.flatnonzero(level.node_large[nodes] & (states >= 0))  # not _ON_NODE
        if not large.size:
            return None
        escaping = level.below_bytes[nodes[large]] & ~self._loops(states[large])
        staying = large[~escaping.any(axis=1)]
        if not staying.size:
            return None
        whole = np.zeros(nodes.size, dtype=np.bool_)
        whole[staying] = True
        return whole


def _copied(ids: IntArray, states: IntArray) -> tuple[list[IntArray], list[IntArray]]:
    """The walk's tokens and states, copied out of its buffers."""
    return [ids.copy()], [states.copy()]


_Finished = TypeVar("_Finished")


def _walk_natively(
    automaton: TableAutomaton[Any],
    trie: TokenTrie,
    state: int,
    finish: Callable[[IntArray, IntArray], _Finished],
    start: tuple[IntArray, IntArray] | None = None,
) -> _Finished:
    """:meth:`TokenIndex._walk_trie` without a joint automaton, by the C walk, from the
    trie's root in ``state`` (or from the nodes ``start[0]`` in the states ``start[1]``,
    the states their bytes lead to, when given). The walk builds the rows of a
    :class:`LazyAutomaton` it reaches itself, by the C subset construction
    (:meth:`~formcast.automaton.lazy.LazyAutomaton.walk_building`), from its first round
    unless the automaton's rows were built ahead (then a first round walks as far as
    built rows go, and building starts from where it stopped); other automata's rows,
    and rows past the table's room, are built between rounds (O(live nodes) over all
    rounds, plus the transitions built). Returns ``finish`` of the tokens reached and
    their states, given as views of the walk's buffers while it still holds them
    (``finish`` copies what it keeps)."""
    assert native_walk is not None
    if state == DEAD:  # nothing is allowed after a dead end (the walk takes live states)
        return finish(_NONE, _NONE)
    flat = trie.flat
    buffers = _BUFFERS.take(flat.token_count, flat.node_count)
    try:
        ids, states, pending_nodes, pending_states = buffers
        frontier_nodes, frontier_states = (
            (_ROOT, np.array([state], dtype=np.int32)) if start is None else start
        )
        filled = 0
        # A walk over an automaton whose rows are built in C builds the rows it reaches
        # (under its lock), from the first round where its rows are built lazily: a first
        # visit meets unbuilt rows at once, and a round that stops there costs more than
        # building does. Where rows were built ahead (a grammar's, at compile), the first
        # round reads built rows alone (no lock, the GIL released). Other automata's rows
        # are built here between rounds.
        builds_rows = automaton.rows_in_c
        building = builds_rows and not automaton.rows_built_ahead
        while True:
            walk_round = _WalkRound(
                flat.walk_arrays, frontier_nodes, frontier_states, buffers, filled
            )
            if building:
                filled, pending = automaton.walk_building(walk_round.run)
            else:
                filled, pending = walk_round.run(automaton.table, None)
            if not pending:
                return finish(ids[:filled], states[:filled])
            frontier_nodes = pending_nodes[:pending].copy()
            frontier_states = pending_states[:pending].copy()
            if building or not builds_rows:  # rows the walk did not build itself
                _build_children_entries(automaton, flat, frontier_nodes, frontier_states)
            building = builds_rows
    finally:
        _BUFFERS.give_back(buffers)


class _WalkRound(NamedTuple):
    """One call of the C walk, but for the table it reads and what builds rows in it (see
    :meth:`TableAutomaton.walk_building`)."""

    trie: tuple[npt.NDArray[Any], ...]
    frontier_nodes: IntArray
    frontier_states: IntArray
    buffers: _Buffers  # out ids, out states, pending nodes, pending states
    filled: int

    def run(self, table: IntArray, builder: tuple[Any, ...] | None) -> tuple[int, int]:
        assert native_walk is not None
        ids, states, pending_nodes, pending_states = self.buffers
        counts: tuple[int, int] = native_walk.walk(
            table,
            self.trie,
            self.frontier_nodes,
            self.frontier_states,
            ids,
            states,
            self.filled,
            pending_nodes,
            pending_states,
            builder,
        )
        return counts


_ROOT = np.zeros(1, dtype=np.int32)  # the frontier of a walk's first round: the trie's root
_ROOT.setflags(write=False)
_NONE = np.zeros(0, dtype=np.int32)
_NONE.setflags(write=False)
_Buffers = tuple[IntArray, IntArray, IntArray, IntArray]


class _WalkBuffers:
    """The output and pending buffers of the C walk (token ids and states, pending nodes
    and states), grown to the largest trie walked and then reused, so that a walk
    allocates nothing the size of the vocabulary. A walk started while another one holds
    them (another thread's, or one an automaton starts while building what a walk stopped
    at) gets buffers of its own. A non-blocking lock marks them held: cheaper than a
    thread-local set of buffers, whose every attribute read costs a lookup."""

    def __init__(self) -> None:
        self._held: _Buffers | None = None
        self._busy = threading.Lock()

    def take(self, tokens: int, nodes: int) -> _Buffers:
        """Buffers at least ``tokens`` and ``nodes`` long, until :meth:`give_back`."""
        if not self._busy.acquire(blocking=False):
            return _new_buffers(tokens, nodes)
        held = self._held
        if held is None or held[0].size < tokens or held[2].size < nodes:
            tokens = max(tokens, held[0].size if held else 0)
            nodes = max(nodes, held[2].size if held else 0)
            try:
                held = self._held = _new_buffers(tokens, nodes)
            except BaseException:
                self._busy.release()
                raise
        return held

    def give_back(self, buffers: _Buffers) -> None:
        if buffers is self._held:
            self._busy.release()


def _new_buffers(tokens: int, nodes: int) -> _Buffers:
    ids, states = np.empty((2, tokens), dtype=np.int32)
    pending_nodes, pending_states = np.empty((2, nodes), dtype=np.int32)
    return ids, states, pending_nodes, pending_states


_BUFFERS = _WalkBuffers()
_SCATTER_BUFFERS = _WalkBuffers()  # the table of a large row's scatter (_scattered)


def _build_children_entries(
    automaton: TableAutomaton[Any], flat: FlatTrie, nodes: IntArray, states: IntArray
) -> None:
    """Build the transitions from each of ``states`` on the bytes of its node's children:
    whole rows in a :class:`TableAutomaton` (where a row is built at once), the live ones
    among those entries alone in a :class:`BoundAutomaton` (whose entries each cost a
    closure: :meth:`BoundAutomaton.build_below`)."""
    if isinstance(automaton, BoundAutomaton):
        automaton.build_below(nodes.tolist(), states.tolist(), flat.child_bytes)
    else:
        automaton.build_rows(np.unique(states).tolist())


def _plain_target(row: IntArray) -> int:
    """The one state ``row`` leads to on every plain byte, else :data:`_PARTED`. Most
    grammar states part them at once (a letter, a digit and a space go different ways),
    which three reads tell before any array is made."""
    first = row[_SPACE]
    if row[_DIGIT] != first or row[_LETTER] != first:
        return _PARTED
    differs = row[_SPACE : _SPACE + _PRINTABLE] != first
    differs[_NOT_PLAIN] = False
    return _PARTED if bool(differs.any()) else int(first)


def _unpacked_bits(bits: npt.NDArray[np.uint32], size: int) -> npt.NDArray[np.bool_]:
    """Whether each of the first ``size`` tokens has its bit set in ``bits`` (bit ``i % 32``
    of word ``i // 32``): the inverse of :func:`_packed_bits`, O(size)."""
    return np.unpackbits(bits.view(np.uint8), bitorder="little")[:size].astype(np.bool_)


def _packed_bits(ids: IntArray, words: int) -> npt.NDArray[np.uint32]:
    """``words`` uint32 words with bit ``i % 32`` of word ``i // 32`` set for each of the
    distinct ``ids``. In C where the module is built (one pass over the ids); else a
    handful: set one by one; a few: one bincount of their bits per word (distinct powers
    of two add up to their union, exactly in float64 below 2**32); many: a boolean
    scatter and ``packbits``."""
    if native_walk is not None:
        packed = np.empty(words, dtype=np.uint32)
        native_walk.pack_bits(np.ascontiguousarray(ids, dtype=np.int32), packed)
        return packed
    if ids.size <= _FEW_IDS:
        packed = np.zeros(words, dtype=np.uint32)
        for token in ids.tolist():
            packed[token >> 5] |= 1 << (token & 31)
        return packed
    if ids.size * 8 < words:
        bits = np.left_shift(1, ids & 31, dtype=np.int64).astype(np.float64)
        summed = np.bincount(ids >> 5, weights=bits, minlength=words)
        return summed.astype(np.uint32)
    flags = np.zeros(words * 32, dtype=bool)
    flags[ids] = True
    return np.packbits(flags, bitorder="little").view(np.uint32)


def _concat(arrays: list[IntArray]) -> IntArray:
    """The arrays end to end (one of them as it is: no copy)."""
    if len(arrays) == 1:
        return arrays[0]
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int32)


def _slices(first: IntArray, sizes: IntArray, total: int | None = None) -> IntArray:
    """The concatenated ranges ``[first[i], first[i] + sizes[i])`` (empty ones add
    nothing; ``total``: ``sizes.sum()`` when known), as one index array."""
    if total is None:
        total = int(sizes.sum())
    offsets = np.repeat(first - np.cumsum(sizes) + sizes, sizes)
    return (offsets + np.arange(total, dtype=np.int32)).astype(np.int32)


def _sorted_by_token(
    ids: list[IntArray],
    states: list[IntArray],
    size: int,
    trie: TokenTrie,
    plain: _Plain | None = None,
    templates: _PlainTemplates | None = None,
) -> _Row:
    """The row of these (token, state) pairs (each token at most once), :data:`DEAD` left
    out, ordered by token id: a sort when they are at most a third of the vocabulary,
    else a scatter over it. Tokens repeating another's bytes in ``trie`` get that token's
    state. ``plain``: the plain tokens too, ``(ids, lengths, chain)``, each token's state
    ``chain[length]`` (a walked token that is also plain takes the chain's state).

    Where the C module is built, a large row (or one with plain tokens or repeats) is
    scattered there into a table over the vocabulary, its bitmask written on the way, and
    kept as that table when it holds more than a third of the vocabulary (a dense
    :class:`_Row`: ~0.1 ms for 50k tokens, against ~0.5 ms of numpy gathers, copies and
    scatters). With ``templates`` (those of the vocabulary whose plain tokens ``plain``
    holds), a row with plain tokens starts from the template of its chain's shape
    instead (:func:`_templated`: ~15-20 us)."""
    found = _concat(ids)
    reached = _concat(states)
    large = plain is not None or trie.repeats.size or found.size * _SORTED_SHARE > size
    if native_walk is not None and large:
        if plain is not None and templates is not None:
            templated = _templated(found, reached, plain, size, trie, templates)
            if templated is not None:
                return templated
        return _scattered(found, reached, plain, size, trie)
    if plain is not None:
        plain_ids, lengths, chain = plain
        found = _concat([found, plain_ids])
        reached = _concat([reached, chain[lengths]])
    if not trie.repeats.size and found.size * _SORTED_SHARE <= size:
        return _Row(*_sorted_pairs(found, reached))
    table = np.full(size, DEAD, dtype=np.int32)
    table[found] = reached
    if trie.repeats.size:
        table[trie.repeats] = table[trie.repeated]
    token_ids = np.flatnonzero(table).astype(np.int32)
    return _Row(token_ids, table[token_ids])


def _scattered(
    found: IntArray, reached: IntArray, plain: _Plain | None, size: int, trie: TokenTrie
) -> _Row:
    """:func:`_sorted_by_token` of a large row by the C module's ``scatter_pairs``: on a
    table reused from row to row, kept as one byte a token when its states are few."""
    assert native_walk is not None
    plain_ids, lengths, chain = (_NONE, _NONE, _NONE) if plain is None else plain
    buffers = _SCATTER_BUFFERS.take(size, size)
    try:
        table = buffers[2][:size]
        bits = np.empty((size + 31) // 32, dtype=np.uint32)
        codes = np.empty(size, dtype=np.uint8)
        palette = np.empty(256, dtype=np.int32)
        kept, distinct = native_walk.scatter_pairs(
            np.ascontiguousarray(found, dtype=np.int32),
            np.ascontiguousarray(reached, dtype=np.int32),
            np.ascontiguousarray(plain_ids, dtype=np.int32),
            np.ascontiguousarray(lengths, dtype=np.int32),
            np.ascontiguousarray(chain, dtype=np.int32),
            table,
            np.ascontiguousarray(trie.repeats, dtype=np.int32),
            np.ascontiguousarray(trie.repeated, dtype=np.int32),
            bits,
            codes,
            palette,
        )
        if kept * _SORTED_SHARE <= size:
            token_ids = np.flatnonzero(table).astype(np.int32)
            return _Row(token_ids, table[token_ids], bits)
        if distinct > 0:
            return _Row(None, None, bits, codes, palette[:distinct].copy())
        return _Row(None, None, bits, table.copy())
    finally:
        _SCATTER_BUFFERS.give_back(buffers)


# Per vocabulary, the templates of this many chain shapes are kept (the last used): a
# schema's strings use a few (a free string one; a bounded one a shape per count of
# characters left below the longest plain token, reached near its end only).
_TEMPLATES_KEPT = 64
# a template's codes, its bits and how many are set (what the C visit would count anew)
_Template = tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint32], int]


class _PlainTemplates:
    """One vocabulary's plain tokens (their ids, lengths and bits over the vocabulary) and
    the templates of rows inside strings made from them, by chain shape
    (:func:`_chain_shape`): a template is the plain tokens' part of any row whose chain
    has that shape, one code a token of the vocabulary (``shape[length]``; 0 for the
    others) and its bits (C ``plain_template``). The last :data:`_TEMPLATES_KEPT` shapes
    used are kept; safe to share between threads. It also answers which plain tokens hold
    each byte (:meth:`by_byte`), for strings whose characters leave out a few bytes."""

    __slots__ = ("_by_byte", "_kept", "_lock", "_token_bytes", "bits", "ids", "lengths", "size")

    def __init__(
        self, ids: IntArray, lengths: IntArray, size: int, token_bytes: npt.NDArray[np.uint8]
    ) -> None:
        self.ids = np.ascontiguousarray(ids, dtype=np.int32)
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int32)
        self.size = size
        self.bits = _packed_bits(self.ids, (size + 31) // 32)
        # the vocabulary's token bytes, a zero-padded row a token (read, not copied)
        self._token_bytes = token_bytes
        self._by_byte: npt.NDArray[np.uint32] | None = None
        self._kept: OrderedDict[bytes, _Template] = OrderedDict()
        self._lock = threading.Lock()

    def by_byte(self) -> npt.NDArray[np.uint32]:
        """The plain tokens holding each byte, as 256 packed bitmasks over the vocabulary
        (bit ``i % 32`` of word ``i // 32``): what the C visit drops from a string's row
        when its characters leave out that byte. Built the first time it is asked for
        (~0.3 ms and 1.5 MB for 49k tokens, by C ``tokens_by_byte``), then shared."""
        found = self._by_byte
        if found is None:
            assert native_walk is not None  # asked by its Visitor only
            found = np.zeros((256, (self.size + 31) // 32), dtype=np.uint32)
            native_walk.tokens_by_byte(self.ids, self.lengths, self._token_bytes, found)
            found.setflags(write=False)
            with self._lock:
                if self._by_byte is None:
                    self._by_byte = found
                found = self._by_byte
        return found

    def of(self, shape: bytes) -> _Template:
        """The template of ``shape`` (built the first time: O(vocabulary), ~0.1 ms)."""
        with self._lock:
            found = self._kept.get(shape)
            if found is not None:
                self._kept.move_to_end(shape)
                return found
        assert native_walk is not None
        codes = np.empty(self.size, dtype=np.uint8)
        bits = np.empty((self.size + 31) // 32, dtype=np.uint32)
        kept = native_walk.plain_template(
            self.ids, self.lengths, np.frombuffer(shape, dtype=np.uint8), codes, bits
        )
        codes.setflags(write=False)
        bits.setflags(write=False)
        with self._lock:
            found = self._kept.setdefault(shape, (codes, bits, kept))
            self._kept.move_to_end(shape)
            while len(self._kept) > _TEMPLATES_KEPT:
                self._kept.popitem(last=False)
        return found


_TEMPLATES: weakref.WeakKeyDictionary[Vocabulary, _PlainTemplates] = weakref.WeakKeyDictionary()
_TEMPLATES_LOCK = threading.Lock()


def _plain_templates(vocabulary: Vocabulary) -> _PlainTemplates:
    """The plain tokens' templates of ``vocabulary`` (by its identity: vocabularies compare
    by identity), made on first use and dropped with the vocabulary."""
    found = _TEMPLATES.get(vocabulary)
    if found is None:
        with _TEMPLATES_LOCK:
            found = _TEMPLATES.get(vocabulary)
            if found is None:
                found = _PlainTemplates(
                    vocabulary.plain_token_ids,
                    vocabulary.plain_token_lengths,
                    vocabulary.size,
                    vocabulary.byte_matrix,
                )
                _TEMPLATES[vocabulary] = found
    return found


def _chain_shape(chain: IntArray) -> bytes | None:
    """The shape of a chain of plain bytes' states: byte ``k`` (``k >= 1``) is 0 where
    ``chain[k]`` is :data:`DEAD`, else 1 + the index of ``chain[k]`` among the chain's
    distinct live states in order of first appearance; byte 0 is 0 (no token is empty).
    ``None`` past 255 distinct states (a code is one byte).

    The chains of strings (distinct states while a length bound counts characters, then
    one state or DEAD to the end) are told by a few list scans (~3 us); others take a
    loop over the chain."""
    states = chain.tolist()
    links = len(states)
    tail = states[1:]
    dead = tail.count(DEAD)
    live = len(tail) - dead
    if not live:
        return _run_shape(links, 0, 0)
    if not dead or tail[live:].count(DEAD) == dead:  # DEAD, if at all, to the end
        last = tail[live - 1]
        first = tail.index(last)  # from here on ``last`` alone, before it distinct ones
        if tail.count(last) == live - first and len(set(tail[:first])) == first:
            return _run_shape(links, first, live) if first < 255 else None
    codes: dict[int, int] = {}
    shape = bytearray(links)
    for k in range(1, links):
        state = states[k]
        if state != DEAD:
            code = codes.get(state)
            if code is None:
                if len(codes) == 255:
                    return None
                code = codes[state] = len(codes) + 1
            shape[k] = code
    return bytes(shape)


_RUN_SHAPES: dict[tuple[int, int, int], bytes] = {}


def _run_shape(links: int, first: int, live: int) -> bytes:
    """The shape of a chain of ``links`` states whose links ``1 .. first`` are distinct
    states, ``first + 1 .. live`` one more, and the rest DEAD (see :func:`_chain_shape`)."""
    key = (links, first, live)
    found = _RUN_SHAPES.get(key)
    if found is None:
        codes = [0, *range(1, first + 1), *[first + 1] * (live - first), *[0] * (links - 1 - live)]
        found = _RUN_SHAPES[key] = bytes(codes)
    return found


def _templated(
    found: IntArray,
    reached: IntArray,
    plain: _Plain,
    size: int,
    trie: TokenTrie,
    templates: _PlainTemplates,
) -> _Row | None:
    """:func:`_scattered` of a row with plain tokens, from the template of its chain's
    shape (C ``scatter_on_template``): a copy of the template's codes and bits, the
    chain's states as the first of the palette, then the walked tokens and the repeats
    written over it; O(vocabulary / 8 + walked tokens), no pass over the plain tokens.
    ``None`` where the template does not apply (other plain tokens than ``templates``'
    ones, a chain of more than 255 states, a row of more than 255 states): the caller
    then scatters the row."""
    assert native_walk is not None
    plain_ids, _, chain = plain
    if plain_ids is not templates.ids or size != templates.size:
        return None
    shape = _chain_shape(chain)
    if shape is None:
        return None
    template_codes, template_bits, _ = templates.of(shape)
    codes = np.empty(size, dtype=np.uint8)
    bits = np.empty(template_bits.size, dtype=np.uint32)
    palette = np.empty(256, dtype=np.int32)
    kept, distinct = native_walk.scatter_on_template(
        np.ascontiguousarray(found, dtype=np.int32),
        np.ascontiguousarray(reached, dtype=np.int32),
        np.ascontiguousarray(chain, dtype=np.int32),
        np.frombuffer(shape, dtype=np.uint8),
        template_codes,
        template_bits,
        templates.bits,
        np.ascontiguousarray(trie.repeats, dtype=np.int32),
        np.ascontiguousarray(trie.repeated, dtype=np.int32),
        codes,
        bits,
        palette,
    )
    if distinct < 0:
        return None
    palette = palette[:distinct].copy()
    if kept * _SORTED_SHARE <= size:
        token_ids = np.flatnonzero(codes).astype(np.int32)
        return _Row(token_ids, palette[codes[token_ids]], bits)
    return _Row(None, None, bits, codes, palette)


class _FirstByteLookup:
    """A large row whose plain tokens' states are read off their first byte
    (``by_first``, codes into ``palette``: each such state stays where it is on every
    plain byte), but for the ``ids`` whose ``states`` were walked; no table over the
    vocabulary is laid out until something asks for the row's arrays (:meth:`table`).

    The walked pairs come in the walk's order (by bytes, not ids). The first
    :data:`_SCANNED_LOOKUPS` steps scan them (~2 us for a few thousand); the next one
    orders them by id (~15 us, the sort a row of a single step never needs), and each step
    after is a binary search. A plain token's step is two reads.

    ``others``, where the visit gave it, is ``(state, bits)``: an allowed token (its bit
    set in the row's ``bits``) that is neither plain nor among the pairs leads to
    ``state`` (a free key's UTF-8 characters, which the visit set in the bits instead of
    listing them); else such a token is :data:`DEAD`."""

    __slots__ = ("_scans_left", "by_first", "others", "pairs", "palette", "vocabulary")

    def __init__(
        self,
        vocabulary: Vocabulary,
        by_first: npt.NDArray[np.uint8],
        palette: IntArray,
        ids: IntArray,
        states: IntArray,
        *,
        ordered: bool = False,
        others: tuple[int, npt.NDArray[np.uint32]] | None = None,
    ) -> None:
        self.vocabulary = vocabulary
        self.by_first = by_first
        self.palette = palette
        self.others = None if others is None or others[0] == DEAD else others
        # (ids, states, whether ordered by id) in one attribute: a reader never sees ids
        # from one ordering with states, or the flag, from the other
        self.pairs = (ids, states, ordered)
        self._scans_left = 0 if ids.size <= _SCANNED_LOOKUPS else _SCANNED_LOOKUPS

    def state_of(self, token_id: int) -> int:
        """The state ``token_id`` leads to (:data:`DEAD` if none)."""
        ids, states, ordered = self.pairs
        if not ordered and self._scans_left > 0:
            self._scans_left -= 1  # threads may race on the count: it only says when to sort
            found = np.flatnonzero(ids == token_id)
            if found.size:
                return int(states[found[0]])
        else:
            if not ordered:
                ids, states = _sorted_pairs(ids, states)
                self.pairs = (ids, states, True)
            position = int(ids.searchsorted(np.int32(token_id)))
            if position < ids.size and ids[position] == token_id:
                return int(states[position])
        vocabulary = self.vocabulary
        if token_id >= vocabulary.size:
            return DEAD
        if not vocabulary.plain_flags[token_id]:
            others = self.others
            if others is not None and int(others[1][token_id >> 5]) >> (token_id & 31) & 1:
                return others[0]
            return DEAD
        return int(self.palette[self.by_first[vocabulary.first_bytes[token_id]]])

    def table(self) -> tuple[IntArray, None]:
        """The row as a table of states over the vocabulary (O(vocabulary) numpy)."""
        vocabulary = self.vocabulary
        table = np.zeros(vocabulary.size, dtype=np.int32)
        codes = self.by_first[vocabulary.plain_token_firsts]
        table[vocabulary.plain_token_ids] = self.palette[codes]
        if self.others is not None:  # the allowed tokens that are not plain
            state, bits = self.others
            allowed = _unpacked_bits(bits, vocabulary.size)
            table[np.flatnonzero(allowed & ~vocabulary.plain_flags)] = state
        ids, states, _ = self.pairs
        table[ids] = states
        return table, None


_SCANNED_LOOKUPS = 8  # steps from a first-byte row that scan its walked pairs unordered


def _looked_up(
    vocabulary: Vocabulary,
    by_first: npt.NDArray[np.uint8],
    looping: IntArray,
    unread: IntArray,
    walked_ids: list[IntArray],
    walked_states: list[IntArray],
) -> _Row:
    """The row of :meth:`TokenIndex._first_byte_row`: its bits are the plain tokens' but
    for those starting with the ``unread`` bytes (dead, or walked), plus the walked
    tokens'; its steps are looked up (:class:`_FirstByteLookup`, code ``c`` of
    ``by_first`` for ``looping[c - 1]``). The walked pairs (from the C walk: no dead end,
    each token once) stay in the walk's order, unless the vocabulary repeats tokens. O(unread
    bytes + walked tokens) numpy work over packed words, no pass over the vocabulary."""
    ids, states = _concat(walked_ids), _concat(walked_states)
    # the repeats of the plain and the other trie: the same tokens and originals as the
    # whole trie's (a token and the one it repeats share their bytes, so one of the two
    # tries holds both, and each trie takes the lowest id of a run as its original)
    repeats = vocabulary.token_trie
    ordered = bool(repeats.repeats.size and ids.size)
    if ordered:  # a walked token's repeats take its state
        ids, states = _sorted_pairs(ids, states)
        position = np.minimum(ids.searchsorted(repeats.repeated), ids.size - 1)
        hit = ids[position] == repeats.repeated
        if hit.any():
            ids, states = _sorted_pairs(
                np.concatenate([ids, repeats.repeats[hit]]),
                np.concatenate([states, states[position[hit]]]),
            )
    bits = vocabulary.plain_bits.copy()
    if unread.size:
        bits &= ~np.bitwise_or.reduce(vocabulary.plain_bits_by_first[unread], axis=0)
    if ids.size:
        bits |= _packed_bits(ids, bits.size)
    palette = np.concatenate([[DEAD], looping]).astype(np.int32)
    lookup = _FirstByteLookup(vocabulary, by_first, palette, ids, states, ordered=ordered)
    return _Row(None, None, bits, lookup=lookup)


# What a Visitor's visit answers (formcast/_row_visit.c): its first item
_VISIT_SORTED, _VISIT_FIRST_BYTE, _VISIT_CHAIN, _VISIT_CODED, _VISIT_TABLE = 1, 3, 4, 5, 6
_VISIT_TEMPLATED = 7
_VISITORS: weakref.WeakKeyDictionary[Vocabulary, Any] = weakref.WeakKeyDictionary()


def _visitor(vocabulary: Vocabulary) -> Any:
    """The :class:`formcast._trie_walk.Visitor` of ``vocabulary`` (by its identity), made
    on first use and dropped with it (see :func:`_new_visitor`)."""
    found = _VISITORS.get(vocabulary)
    if found is None:
        templates = _plain_templates(vocabulary)
        with _TEMPLATES_LOCK:
            found = _VISITORS.get(vocabulary)
            if found is None:
                found = _VISITORS[vocabulary] = _new_visitor(
                    vocabulary, templates.of, templates.by_byte
                )
    return found


def _new_visitor(
    vocabulary: Vocabulary,
    template_of: Callable[[bytes], _Template] | None,
    by_byte_of: Callable[[], npt.NDArray[np.uint32]] | None = None,
) -> Any:
    """A Visitor of ``vocabulary``: it holds the vocabulary's three tries, its plain
    tokens' bits (by first byte too: ~1 ms to build, 1.5 MB for 49k tokens) and buffers
    of ~12 bytes a token and 8 a trie node; ``template_of`` gives the plain tokens'
    template of a chain's shape (:meth:`_PlainTemplates.of`; None: a string's row is
    finished here, by :func:`_scattered`); ``by_byte_of`` the plain tokens holding each
    byte (:meth:`_PlainTemplates.by_byte`; None: a string leaving out some plain bytes is
    walked whole)."""
    assert native_walk is not None
    plain_trie, whole, other = vocabulary.plain_trie, vocabulary.token_trie, vocabulary.other_trie
    repeats = (whole.repeats, whole.repeated, other.repeats, other.repeated)
    text = vocabulary.text_tokens
    return native_walk.Visitor(
        whole.flat.walk_arrays,
        other.flat.walk_arrays,
        plain_trie.flat.walk_arrays,
        plain_trie.flat.root_children,
        _PLAIN_BYTES_U8,
        vocabulary.plain_bits,
        vocabulary.plain_bits_by_first,
        tuple(np.ascontiguousarray(tokens, dtype=np.int32) for tokens in repeats),
        vocabulary.size,
        plain_trie.max_length + 1,
        _FIRST_BYTE_MIN,
        _SORTED_SHARE,
        template_of,
        by_byte_of,
        (vocabulary.special_trie.flat.walk_arrays, *text.arrays()),
    )


# dtypes as objects: np.frombuffer(data, dtype=np.int32) converts the type each call, ~0.15 us
# of a first visit's few reads of the visit's bytes
_INT32, _UINT32, _UINT8 = np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.uint8)


def _ints(data: bytes) -> IntArray:
    """The int32 array ``data`` holds, read in place (read-only: rows never change)."""
    return np.frombuffer(data, _INT32)


_new_object = object.__new__


def _row_of_visit(found: tuple[Any, ...], vocabulary: Vocabulary) -> _Row:
    """The row a Visitor's visit answered (its arrays as bytes, read in place): sorted
    with its bits; coded one byte a token, or a table of states, with its bits; a
    string's on its template (the template's codes and the tokens apart from them); an
    object key's row (:meth:`TokenIndex._first_byte_row`); or a row inside a string that
    its template could not make (:func:`_scattered`)."""
    kind = found[0]
    if kind == _VISIT_SORTED:  # most first visits answer this: its bits and answer alone
        row: _Row = _new_object(_Row)
        row.bits = np.frombuffer(found[3], _UINT32)
        row._raw = found
        return row
    if kind == _VISIT_CODED:
        codes = np.frombuffer(found[1], _UINT8)
        return _Row(None, None, np.frombuffer(found[3], _UINT32), codes, _ints(found[2]))
    if kind == _VISIT_TABLE:
        return _Row(None, None, np.frombuffer(found[2], _UINT32), _ints(found[1]))
    if kind == _VISIT_TEMPLATED:  # the fields alone, as a sorted row's
        row = _new_object(_Row)
        row.bits = np.frombuffer(found[5], _UINT32)
        row.dense = found[1]
        row.palette = _ints(found[2])
        row.overrides = (found[3], found[4])
        return row
    if kind == _VISIT_FIRST_BYTE:
        _, ids, states, bits, by_first, palette, unread, others = found
        by_first_codes = np.frombuffer(by_first, _UINT8)
        palette_states = _ints(palette)
        if bits is None:  # tokens repeat others: their states are looked up there
            looping = palette_states[1:]
            return _looked_up(
                vocabulary, by_first_codes, looping, _ints(unread), [_ints(ids)], [_ints(states)]
            )
        bits_array = np.frombuffer(bits, _UINT32)
        key_row: _Row = _new_object(_Row)
        key_row.bits = bits_array
        key_row.lookup = _FirstByteLookup(
            vocabulary,
            by_first_codes,
            palette_states,
            _ints(ids),
            _ints(states),
            others=(others, bits_array),
        )
        return key_row
    if kind != _VISIT_CHAIN:
        raise AssertionError(f"expected a visit's answer, found {found!r:.80}")
    _, chain, ids, states = found
    plain = (vocabulary.plain_token_ids, vocabulary.plain_token_lengths, _ints(chain))
    return _scattered(_ints(ids), _ints(states), plain, vocabulary.size, vocabulary.other_trie)


def _sorted_pairs(found: IntArray, reached: IntArray) -> tuple[IntArray, IntArray]:
    """The (token, state) pairs without :data:`DEAD`, ordered by token (each token at most
    once): by the C module's sort where it is built (an insertion sort of a few dozen
    pairs, a radix sort of more: O(pairs)); else an argsort up to :data:`_ARGSORTED_ROW`
    pairs, past it one sort of ``token << 32 | state`` keys, cheaper than an argsort and
    two gathers."""
    if native_walk is not None:
        ids, states = np.array(found, dtype=np.int32), np.array(reached, dtype=np.int32)
        kept = native_walk.sort_pairs(ids, states)  # in place, on copies of their own
        return ids[:kept], states[:kept]
    if found.size <= _ARGSORTED_ROW:
        if not reached.all():  # the C walk leaves out dead ends; other walks may not
            live = reached != DEAD
            found, reached = found[live], reached[live]
        order = np.argsort(found)  # each token at most once: no tie to keep stable
        return found[order].astype(np.int32, copy=False), reached[order].astype(
            np.int32, copy=False
        )
    keys = (found.astype(np.int64) << 32) | reached.astype(np.int64)
    keys.sort()
    next_states = (keys & 0xFFFFFFFF).astype(np.int32)
    live = next_states != DEAD
    return (keys[live] >> 32).astype(np.int32), next_states[live]


def _warnings_of(stored: Any) -> tuple[dict[str, str], ...]:
    """The build warnings a stored index lists; ValueError if they are not string maps."""
    if not isinstance(stored, list) or not all(
        isinstance(item, dict)
        and all(isinstance(v, str) for v in item.values())
        and isinstance(item.get("message"), str)
        for item in stored
    ):
        raise ValueError("expected the index's warnings as a list of string maps")
    return tuple(stored)
