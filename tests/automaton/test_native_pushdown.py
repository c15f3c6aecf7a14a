"""The rows of sets of stacks in C (``formcast/_pushdown.c``) against the Python rows of
:mod:`formcast.automaton.pushdown`, their reference: the same states, numbered alike,
the same rows, acceptance and distances on the pushdown tests' grammars and on recursive
JSON Schemas; the same token rows through an index; copies that move between the two;
and bad arguments refused with an error rather than read out of bounds."""

from __future__ import annotations

import pickle
import random
from typing import Any

import numpy as np
import pytest
from test_native_subset import (
    _LETTERS,
    _PLAIN,
    _byte_flags,
    plain_steps_against_rows,
    steps_against_rows,
)
from test_pushdown import GRAMMARS

import formcast
import formcast.automaton.pushdown as pushdown_module
from formcast.automaton import PushdownAutomaton, compile_automaton
from formcast.automaton.markers import CALL_BYTE, DIGIT_BYTES
from formcast.cursor import Cursor
from formcast.index import TokenIndex, _visitor
from formcast.limits import Limits
from formcast.regex.translator import schema_to_regex

native_pushdown = pushdown_module.native_pushdown
pytestmark = pytest.mark.skipif(native_pushdown is None, reason="formcast._pushdown was not built")

TREE = {  # a recursive schema: object keys, strings, numbers and arrays at every level
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "size": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "children": {"type": "array", "items": {"$ref": "#"}},
    },
    "required": ["name"],
    "additionalProperties": False,
}
LINKED = {  # mutual recursion through definitions, with a free-form object in between
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"value": {}, "next": {"$ref": "#/$defs/link"}},
            "required": ["value"],
        },
        "link": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]},
    },
    "$ref": "#/$defs/node",
}
KEYED = {  # declared names that share prefixes, undeclared keys too, and recursion
    "type": "object",
    "properties": {
        "alpha": {"type": "integer"},
        "alps": {"type": "string"},
        "name": {"$ref": "#"},
    },
    "additionalProperties": True,
}
PATTERNS = {name: grammar.regex() for name, grammar in GRAMMARS.items()}
PATTERNS["tree"] = schema_to_regex(TREE)
PATTERNS["linked"] = schema_to_regex(LINKED)
_STATES = 300  # states explored breadth-first per automaton


def _compiled(pattern: str, native: bool, monkeypatch: pytest.MonkeyPatch) -> PushdownAutomaton:
    with monkeypatch.context() as patch:
        if not native:
            patch.setattr(pushdown_module, "native_pushdown", None)
        automaton = compile_automaton(pattern)
    assert isinstance(automaton, PushdownAutomaton)
    assert automaton.rows_in_c == native
    return automaton


def _differences(python: PushdownAutomaton, native: PushdownAutomaton) -> list[str]:
    """Where two automata of one pattern disagree: the state count, a built row, a
    state's acceptance or its distance to acceptance."""
    found = []
    if python.num_states != native.num_states:
        found.append(f"{python.num_states} states against {native.num_states}")
    count = min(python.num_states, native.num_states)
    for state in range(count):
        mine, theirs = python.table[state], native.table[state]
        if mine[0] != -1 and theirs[0] != -1 and not np.array_equal(mine, theirs):
            found.append(f"row {state}: {np.flatnonzero(mine != theirs)[:8].tolist()} differ")
        if python.is_accepting(state) != native.is_accepting(state):
            found.append(f"state {state}: acceptance differs")
        if python.min_bytes_to_accept(state) != native.min_bytes_to_accept(state):
            found.append(f"state {state}: distance differs")
    return found


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_the_same_states_and_rows_as_the_python_rows(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    automata = []
    for native in (False, True):
        automaton = _compiled(PATTERNS[name], native, monkeypatch)
        automaton.build_breadth_first(_STATES)
        automata.append(automaton)
    python, native_one = automata
    assert python.num_states >= (5 if name == "mutual" else 20)  # tail calls: 5 states
    assert _differences(python, native_one) == []
    several = [s for s in range(1, native_one.num_states) if len(native_one._members(s)) > 1]
    if name in ("json", "lists", "tree"):
        assert several, "expected states of several stacks"
    for state in range(1, native_one.num_states, 7):  # the stacks, frame by frame
        assert len(native_one.stacks(state)) == len(python.stacks(state))


def test_machine_rows_asked_of_python_where_the_subset_construction_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without formcast._subset's construction for the machines, the C rows ask what a
    machine state reads, calls and ends of Python (Machines.info) and give the same rows."""
    import formcast.automaton.lazy as lazy_module

    reference = _compiled(PATTERNS["json"], False, monkeypatch)
    reference.build_breadth_first(_STATES)
    monkeypatch.setattr(lazy_module, "native_subset", None)
    asked = []
    machines_info = pushdown_module.Machines.info

    def info(self: Any, machine: int, state: int) -> Any:
        asked.append((machine, state))
        return machines_info(self, machine, state)

    monkeypatch.setattr(pushdown_module.Machines, "info", info)
    native_one = _compiled(PATTERNS["json"], True, monkeypatch)
    asked.clear()  # the build's own checks ask too; from here, only the C rows do
    native_one.build_breadth_first(_STATES)
    assert len(asked) > 20
    assert _differences(reference, native_one) == []


TEXTS = [
    '{"name":"root","size":3,"children":[{"name":"a","tags":["x","y"],"children":[]},'
    '{"name":"b","children":[{"name":"c"}]}]}',
    '{"value":{"k":"a"},"next":{"value":[1,2],"next":{"value":{},"next":null}}}',
    '{"alpha":1,"name":{"alps":"x y","name":{"zed":2,"alpine":[true]}},"other":"y"}',
]


@pytest.mark.parametrize(
    ("schema", "text"),
    zip([TREE, LINKED, KEYED], TEXTS, strict=True),
    ids=["tree", "linked", "keyed"],
)
def test_token_rows_are_those_of_the_python_rows(
    schema: dict[str, Any],
    text: str,
    vocabulary: Any,
    tokenizer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through an index over the real vocabulary, the C rows (built inside the C visit:
    an object key's entries stepped alone, a string's chain read off its plain bytes)
    allow the tokens the Python rows allow, state by state along an encoded instance."""
    pattern = schema_to_regex(schema)
    indexes = [TokenIndex(_compiled(pattern, native, monkeypatch), vocabulary) for native in (0, 1)]
    cursors = [Cursor(index) for index in indexes]
    tokens = tokenizer.encode(text, add_special_tokens=False)
    for token in tokens:
        masks = [cursor.bitmask(vocabulary.size) for cursor in cursors]
        assert np.array_equal(masks[0], masks[1])
        assert (int(masks[0].reshape(-1)[token // 32]) >> (token % 32)) & 1
        for cursor in cursors:
            cursor.advance(token)
    assert len(tokens) >= 30
    assert all(cursor.is_accepting() for cursor in cursors)


def test_copies_move_between_the_c_and_the_python_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pickled automaton goes on the same way whichever rows the copy builds, and a
    stored one (to_arrays) comes back with its states."""
    pattern = PATTERNS["json"]
    rng = random.Random(3)
    texts = [GRAMMARS["json"].sample(rng, depth=4).encode() for _ in range(12)]
    native = _compiled(pattern, True, monkeypatch)
    python = _compiled(pattern, False, monkeypatch)
    halfway = [native.walk(text[: len(text) // 2]) for text in texts]
    assert halfway == [python.walk(text[: len(text) // 2]) for text in texts]
    for source, native_copy in ((native, False), (python, True), (native, True)):
        with monkeypatch.context() as patch:
            if not native_copy:
                patch.setattr(pushdown_module, "native_pushdown", None)
            copy = pickle.loads(pickle.dumps(source))
            assert copy.rows_in_c == native_copy
            for text, state in zip(texts, halfway, strict=True):
                end = copy.walk(text[len(text) // 2 :], state)
                assert end == source.walk(text[len(text) // 2 :], state)
                assert copy.is_accepting(end)
    meta, arrays = native.to_arrays()
    stored = PushdownAutomaton.from_arrays(meta, arrays)
    assert stored.rows_in_c and stored.num_states == native.num_states
    assert [stored.walk(text) for text in texts] == [native.walk(text) for text in texts]


@pytest.mark.parametrize("native", [False, True], ids=["python", "C"])
def test_too_many_stacks_fail_alike(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    ambiguous = r"(?(DEFINE)(?P<s>a(?&s)?a?|b))(?&s)"
    with monkeypatch.context() as patch:
        if not native:
            patch.setattr(pushdown_module, "native_pushdown", None)
        automaton = compile_automaton(ambiguous, Limits(max_pushdown_stacks=8))
    with pytest.raises(formcast.SchemaError, match=r"at most 8 parses.*max_pushdown_stacks"):
        automaton.walk(b"a" * 40)


def _stacks() -> Any:
    assert native_pushdown is not None
    automaton = compile_automaton(PATTERNS["parens"])
    assert isinstance(automaton, PushdownAutomaton) and automaton.rows_in_c
    return automaton, automaton._native


def test_bad_arguments_are_refused() -> None:
    assert native_pushdown is not None
    automaton, stacks = _stacks()
    machines = automaton._machines

    def answer(machine: int, state: int) -> Any:
        return machines.info(machine, state)

    def too_many(count: int) -> Exception:
        return ValueError(count)

    automata = [*machines.automata]
    with pytest.raises(ValueError, match="markers"):
        native_pushdown.Stacks(answer, [1, 1], 8, too_many, automata, (CALL_BYTE, b"", 1))
    with pytest.raises(ValueError, match="initial state an automaton"):
        native_pushdown.Stacks(answer, [1], 8, too_many, automata, (CALL_BYTE, DIGIT_BYTES, 1))
    with pytest.raises(TypeError, match="callable"):
        native_pushdown.Stacks(None, [1, 1], 8, too_many, automata, (CALL_BYTE, DIGIT_BYTES, 1))
    with pytest.raises(ValueError, match="frame below"):
        stacks.frame(0, 1, 10_000)
    with pytest.raises(ValueError, match="known machine"):
        stacks.frame(7, 1, 0)
    with pytest.raises(ValueError, match="empty stack"):
        stacks.closure(0)
    with pytest.raises(ValueError, match="new frames"):
        stacks.take_frames([stacks.frame_of(1)])
    with pytest.raises(ValueError, match=r"ids in \[1, "):
        stacks.find([0])
    with pytest.raises(ValueError, match="live state id"):
        table = np.full((4, 256), -1, dtype=np.int32)
        stacks.build_rows(np.array([3], dtype=np.int32), table, np.zeros(4, np.bool_), [])
    with pytest.raises(ValueError, match="state held here"):
        stacks.members(10**6)


def test_frames_closures_and_members_read_back() -> None:
    automaton, stacks = _stacks()
    end = automaton.walk(b"(()")  # its first row takes in the states Python registered
    initial = automaton._members(automaton.initial)
    assert stacks.find(initial) == automaton.initial
    assert stacks.members(automaton.initial) == initial
    frames = stacks.frames()
    assert frames[0] == (-1, -1, -1) and len(frames) == stacks.frame_count
    assert all(stacks.frame_of(k) == frame for k, frame in enumerate(frames))
    top = min(initial)
    assert top in stacks.closure(top) or stacks.closure(top) <= initial
    assert stacks.rows_computed >= 3
    assert automaton.stacks(end)  # frames read back through frame_of


def _unbuilt(automaton: PushdownAutomaton, name: str, most: int = 12) -> list[int]:
    """Up to ``most`` registered states without a row, once 40 rows are built (1 of the
    five states of "mutual")."""
    automaton.build_breadth_first(1 if name == "mutual" else 40)
    states = range(1, automaton.num_states)
    return [s for s in states if automaton.table[s, 0] == -1][:most]


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_an_entry_stepped_alone_is_the_one_its_row_holds(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``step`` computes one entry of a set of stacks' row without the row: every entry
    of up to 12 unbuilt states equals the row built afterwards (the same state ids), the
    row is left unbuilt meanwhile, and every state a step registered accepts as its
    stacks do."""
    automaton = _compiled(PATTERNS[name], True, monkeypatch)
    stacks = automaton._native
    unbuilt = _unbuilt(automaton, name)
    assert unbuilt
    steps_against_rows(automaton, stacks, unbuilt, name)
    for state in range(1, automaton.num_states):
        assert automaton.is_accepting(state) == stacks.accepts(automaton._members(state))
    built = automaton.table[: automaton.num_states, 0] != -1
    for state in np.flatnonzero(built)[1:13].tolist():  # read off the row
        row = automaton.table[state].tolist()
        with automaton._lock:
            for byte in range(256):
                got = stacks.step(
                    state, byte, automaton._table, automaton._accepting, automaton._sets
                )
                assert got == row[byte]


@pytest.mark.parametrize("name", sorted(PATTERNS))
@pytest.mark.parametrize("plain", [_PLAIN, _LETTERS], ids=["plain", "letters"])
def test_the_state_every_plain_byte_leads_to_is_the_one_its_row_holds(
    name: str, plain: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``plain_step`` answers the one state every flagged byte leads to (0 where none
    lives, -3 where they part ways), as the row built afterwards holds it, and the same
    again once the row is built."""
    automaton = _compiled(PATTERNS[name], True, monkeypatch)
    stacks = automaton._native
    chosen = np.flatnonzero(np.unpackbits(np.frombuffer(plain, np.uint8), bitorder="little"))
    found = plain_steps_against_rows(automaton, stacks, _unbuilt(automaton, name, 60), plain, name)
    answers = {min(answer, 1) for answer in found}
    built = automaton.table[: automaton.num_states, 0] != -1
    for state in np.flatnonzero(built)[1:13].tolist():  # first asked with its row built
        targets = set(automaton.table[state, chosen].tolist())
        with automaton._lock:
            found = stacks.plain_step(
                state, plain, automaton._table, automaton._accepting, automaton._sets
            )
        assert found == (targets.pop() if len(targets) == 1 else -3), (name, state)
    if name in ("tree", "linked") and plain == _PLAIN:
        assert {-3, 1} <= answers, "expected states that part and states that lead on"


def test_a_step_without_room_registers_nothing() -> None:
    """A step or plain step that would register a state where the table has no room
    answers -2 and leaves the states as they were; bad states, bytes and masks are
    refused."""
    automaton, stacks = _stacks()
    start = automaton.walk(b"(")
    assert automaton.table[start, 0] == -1
    sets = automaton._sets
    count = len(sets)
    small = automaton._table[:count].copy()
    flags = automaton._accepting
    opening = _byte_flags(b"(")
    assert stacks.step(start, ord("("), small, flags, sets) == -2
    assert stacks.plain_step(start, opening, small, flags, sets) == -2
    assert len(sets) == count
    assert stacks.step(start, ord("x"), small, flags, sets) == 0  # dead
    with pytest.raises(ValueError, match="expected a byte"):
        stacks.step(start, 256, small, flags, sets)
    with pytest.raises(ValueError, match="live state id"):
        stacks.step(count + 3, 0, small, flags, sets)
    with pytest.raises(ValueError, match="int32 table"):
        stacks.step(start, 0, small.astype(np.int64), flags, sets)
    with pytest.raises(ValueError, match="32 bytes of byte flags"):
        stacks.plain_step(start, bytes(32), small, flags, sets)
    with pytest.raises(ValueError, match="live state id"):
        stacks.plain_step(0, opening, small, flags, sets)


def test_a_walk_refuses_a_builder_of_other_parts(vocabulary: Any) -> None:
    """A visit takes a pushdown automaton's builder whole (its stacks, flags, states and
    three capsules): one short of a capsule, or with a capsule in another's place, is
    refused before anything is read."""
    automaton, _ = _stacks()
    native = automaton._native_rows()
    assert native is not None
    builder = automaton._builder(native)
    visit = _visitor(vocabulary).visit
    with automaton._lock:
        with pytest.raises(TypeError, match="expected builder as"):
            visit(automaton._table, automaton.initial, builder[:4])
        with pytest.raises(ValueError, match="incorrect name"):
            visit(automaton._table, automaton.initial, (*builder[:4], builder[3], builder[5]))
        assert visit(automaton._table, automaton.initial, builder)[0] != 0
