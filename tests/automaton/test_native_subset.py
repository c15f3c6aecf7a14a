"""The subset construction in C (``formcast/_subset.c``) against the Python one in
:mod:`formcast.automaton.lazy`, its reference: the same DFA states, numbered alike, and
the same rows, on the automaton tests' patterns, random patterns, schema regexes and the
machines of recursive patterns, with counted repeats kept concrete and made virtual; the
same closures state by state; and bad arguments refused with ValueError rather than read
out of bounds."""

from __future__ import annotations

import pickle
from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_automaton import CALL_CASES, PATTERNS, random_regexes
from test_nfa_invariants import NESTED_REPEATS, _schema_regexes, nfa_of

import formcast.automaton.lazy as lazy_module
import formcast.automaton.table as table_module
from formcast.automaton import LazyAutomaton, PushdownAutomaton, compile_automaton
from formcast.automaton.nfa import VIRTUAL_BASE, Nfa
from formcast.errors import SchemaError

native_subset = lazy_module.native_subset
pytestmark = [
    pytest.mark.skipif(native_subset is None, reason="formcast._subset was not built"),
    pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning"),
]

CORPUS = [p for p in PATTERNS if p not in ("", "^", "$")]
CORPUS += [pattern for pattern, _ in CALL_CASES] + NESTED_REPEATS
VIRTUAL = pytest.mark.parametrize("virtual", [False, True], ids=["concrete", "virtual"])
_STATES = 400  # states explored breadth-first per automaton


def _explored(
    nfa: Nfa, native: bool, monkeypatch: pytest.MonkeyPatch, limit: int = _STATES
) -> LazyAutomaton:
    """The automaton of ``nfa`` with the rows of up to ``limit`` states built
    breadth-first, by the C construction or by the Python one."""
    with monkeypatch.context() as patch:
        if not native:
            patch.setattr(lazy_module, "native_subset", None)
        automaton = LazyAutomaton.of_nfa(nfa)
        automaton.build_breadth_first(limit)
        assert (automaton._native is not None) == native
    return automaton


def _differences(python: LazyAutomaton, native: LazyAutomaton) -> list[str]:
    """Where two automata of one NFA disagree: a state's members, or a built row."""
    found = []
    if python.num_states != native.num_states:
        found.append(f"{python.num_states} states against {native.num_states}")
    for state in range(min(python.num_states, native.num_states)):
        mine, theirs = python._members(state), native._members(state)
        if mine != theirs:
            found.append(f"state {state}: {sorted(mine)[:8]} against {sorted(theirs)[:8]}")
    count = min(python.num_states, native.num_states)
    rows = np.flatnonzero((python.table[:count] != native.table[:count]).any(axis=1))
    found += [f"row {state} differs" for state in rows[:8].tolist()]
    flags = np.flatnonzero(python.accepting[:count] != native.accepting[:count])
    found += [f"state {state}: acceptance differs" for state in flags[:8].tolist()]
    return found


def _check_same(nfa: Nfa, monkeypatch: pytest.MonkeyPatch, limit: int = _STATES) -> None:
    python = _explored(nfa, False, monkeypatch, limit)
    native = _explored(nfa, True, monkeypatch, limit)
    assert _differences(python, native) == [], nfa.pattern[:120]
    # and closure by closure, for every member of every state reached
    members = sorted({m for state in range(python.num_states) for m in python._members(state)})
    members += [nfa.start, nfa.final]
    for member in members:
        assert native._native.closure(member) == python._closure(member), (nfa.pattern, member)


@VIRTUAL
@pytest.mark.parametrize("pattern", CORPUS)
def test_rows_match_the_python_construction(
    pattern: str, virtual: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check_same(nfa_of(pattern, virtual), monkeypatch)


# states of hundreds of members, in scrambled id order: their successor sets are sorted
# by the C construction's own quicksort (past 16 ids) before they are interned
WIDE_PATTERNS = [
    "(?:" + "|".join(f"k{(i * 37) % 97:02d}[a-z]{{0,{i % 5}}}v" for i in range(97)) + ")+",
    "(?:" + "|".join(f"[a-z]{{{i % 4}}}{chr(97 + i % 26)}{i}" for i in range(120)) + ")",
    # after "a": the end (accepting) among a hundred words' first states
    "a(?:" + "|".join(["", *(f"[{chr(98 + i % 20)}-z]{i}" for i in range(100))]) + ")",
]


@VIRTUAL
@pytest.mark.parametrize(
    "pattern", WIDE_PATTERNS, ids=["repeated words", "classes and words", "an end among words"]
)
def test_rows_of_states_of_many_members_match(
    pattern: str, virtual: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    automaton = _explored(nfa_of(pattern, virtual), True, monkeypatch, limit=50)
    sizes = [len(automaton._members(state)) for state in range(automaton.num_states)]
    assert max(sizes) > 64  # past the insertion sort
    _check_same(nfa_of(pattern, virtual), monkeypatch)


@VIRTUAL
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(pattern=random_regexes())
def test_rows_match_on_random_patterns(
    pattern: str, virtual: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        nfa = nfa_of(pattern, virtual)
    except SchemaError:  # e.g. a pattern that matches nothing
        return
    _check_same(nfa, monkeypatch)
    _stepped_then_built(nfa, 4)  # and each entry computed alone, as its row holds it


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_rows_match_on_schema_regexes(monkeypatch: pytest.MonkeyPatch) -> None:
    regexes = _schema_regexes()
    if not regexes:
        pytest.skip("the maskbench data is not here")
    for regex in regexes:
        for virtual in (False, True):
            _check_same(nfa_of(regex, virtual), monkeypatch, limit=150)


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?(DEFINE)(?P<v>\[(?:(?&v)(?:,(?&v))*)?\]|[0-9]{1,3}))(?&v)",
        r'(?(DEFINE)(?P<o>\{(?:"[a-z]{1,4}":(?&o)(?:,"[a-z]+":(?&o)){0,3})?\}))(?&o)',
    ],
)
def test_machines_of_a_recursive_pattern_match(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machines of a pushdown automaton share one NFA's edges, each with its own start
    and final state: walking the same words gives the same machine rows both ways."""
    words = [b"[1,[22,[]],333]", b"[[[[[]]]]]", b'{"ab":{},"c":{"d":{}}}', b"[1,2,3,4,5"]
    built = []
    for native in (False, True):
        with monkeypatch.context() as patch:
            if not native:
                patch.setattr(lazy_module, "native_subset", None)
            automaton = compile_automaton(pattern)
            assert isinstance(automaton, PushdownAutomaton)
            verdicts = [automaton.matches(word) for word in words]
            machines = automaton._machines.automata
            for machine in machines:
                machine.build_breadth_first(_STATES)
            built.append((verdicts, machines))
    (python_verdicts, python), (native_verdicts, native) = built
    assert python_verdicts == native_verdicts
    assert any(machine._native is not None for machine in native)
    for mine, theirs in zip(python, native, strict=True):
        differences, compared = _differences_by_members(mine, theirs)
        assert differences == []
        assert compared >= min(mine.num_states, 50), "expected most rows compared"


def _differences_by_members(python: LazyAutomaton, native: LazyAutomaton) -> tuple[list[str], int]:
    """Where two automata of one NFA disagree, their states matched by members (not by
    number: a pushdown automaton's frames read a machine state's entries alone, which
    registers states in another order than rows do): a state's acceptance, or a row
    both built (its targets' members); and how many rows were compared."""
    by_members = {native._members(s): s for s in range(native.num_states)}
    found, compared = [], 0
    for state in range(python.num_states):
        members = python._members(state)
        other = by_members.get(members)
        if other is None:
            continue
        if python.is_accepting(state) != native.is_accepting(other):
            found.append(f"state {state}: acceptance differs")
        if python.table[state, 0] == -1 or native.table[other, 0] == -1:
            continue
        compared += 1
        for byte in range(256):
            mine, theirs = int(python.table[state, byte]), int(native.table[other, byte])
            if python._members(mine) != native._members(theirs):
                found.append(f"state {state} byte {byte}: {mine} against {theirs}")
                break
    return found, compared


def test_a_wrong_construction_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above fails when the C construction is given a wrong NFA: here one
    whose final state is another, so acceptance moves and the states' members change."""
    nfa = nfa_of(r"(ab|a)*c{2,4}d", True)
    python = _explored(nfa, False, monkeypatch)
    native = LazyAutomaton.of_nfa(nfa)
    assert native_subset is not None
    native._native = native_subset.Nfa(*_parts(nfa)[:-1], nfa.start)  # not the final state
    native.build_breadth_first(_STATES)
    assert _differences(python, native) != []


def _parts(nfa: Nfa) -> list[Any]:
    return list(lazy_module.native_arguments(LazyAutomaton.of_nfa(nfa)._edges, nfa.final))


def test_bad_arguments_are_refused() -> None:
    assert native_subset is not None
    nfa = nfa_of(r"x(?:ab){2,40}y", True)
    parts = _parts(nfa)
    good = native_subset.Nfa(*parts)
    with pytest.raises(ValueError):
        good.segments([nfa.concrete_states + 5])  # past the concrete states
    with pytest.raises(ValueError):
        good.segments([-3])
    with pytest.raises(ValueError):
        good.closure(VIRTUAL_BASE + nfa.virtual_states + 10**6)  # in no block
    with pytest.raises(TypeError):
        good.segments(["a"])
    short = list(parts)
    short[1] = array("q", list(parts[1])[:-1])  # one byte edge fewer than the offsets say
    with pytest.raises(ValueError):
        native_subset.Nfa(*short)
    wrong_type = list(parts)
    wrong_type[2] = np.asarray(parts[2], dtype=np.int32)
    with pytest.raises(ValueError):
        native_subset.Nfa(*wrong_type)
    offsets = list(parts)
    offsets[0] = array("q", [0, *([10**9] * (len(parts[0]) - 1))])
    with pytest.raises(ValueError):
        native_subset.Nfa(*offsets)


def test_pickled_automata_build_rows_natively(monkeypatch: pytest.MonkeyPatch) -> None:
    """The C construction's NFA is not pickled: a copy makes its own on its first row."""
    import pickle

    automaton = LazyAutomaton(r'\{"a":[0-9]{1,5}(?:,"b":"[a-z]{0,9}")?\}')
    automaton.walk(b'{"a":12')
    copy = pickle.loads(pickle.dumps(automaton))
    assert copy._native is None
    assert copy.matches(b'{"a":12,"b":"xyz"}') and copy._native is not None
    python = _explored(automaton._nfa, False, monkeypatch)
    copy.build_breadth_first(_STATES)
    mine, theirs = _rows_by_members(python), _rows_by_members(copy)
    shared = mine.keys() & theirs.keys()
    assert len(shared) > 10
    assert all(mine[members] == theirs[members] for members in shared)


def _rows_by_members(automaton: LazyAutomaton) -> dict[frozenset[int], tuple[frozenset[int], ...]]:
    """Each built row as the members of its 256 targets, by the members of its state
    (what does not depend on the order states were numbered in)."""
    sets, table = automaton._members, automaton.table
    return {
        sets(state): tuple(sets(target) for target in table[state].tolist())
        for state in range(automaton.num_states)
        if table[state, 0] >= 0
    }


_KEYS_SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string", "maxLength": 12},
        "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
        "count": {"type": "integer"},
    },
}


def _walked_rows(vocabulary: Any, texts: list[bytes]) -> dict[bytes, tuple[Any, Any]]:
    """The token rows of the states along ``texts``' prefixes, in a fresh index."""
    from formcast.compiler import clear_memory_cache
    from formcast.compiler import compile as compile_index

    clear_memory_cache()
    index = compile_index(_KEYS_SCHEMA, vocabulary, mode="specification")
    rows = {}
    for text in texts:
        for end in range(len(text) + 1):
            state = index.automaton.walk(text[:end])
            if state:
                ids, states = index.row(state)
                members = [index.automaton._members(s) for s in states.tolist()]
                rows[text[:end]] = (ids.tolist(), members)
    return rows


def test_walks_that_build_rows_in_c_match_the_rounds_through_python(
    vocabulary: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The C walk builds the rows it reaches itself (a LazyAutomaton's, by this module's
    capsule); with no room in the table for a row's new states it leaves them pending
    for Python, as it does for automata built in Python. Both ways give the same rows,
    and so does the Python construction."""
    texts = [b'{"apiVersion":"v1","kind":"Job","metadata":{"name":"x"},"count":3}', b'{"zz":"']
    built_in_c = _walked_rows(vocabulary, texts)
    # rows left pending where the table is full
    monkeypatch.setattr(table_module, "BUILD_ROOM", 0)
    monkeypatch.setattr(lazy_module, "BUILD_ROOM", 0)
    pending = _walked_rows(vocabulary, texts)
    monkeypatch.setattr(lazy_module, "native_subset", None)
    python = _walked_rows(vocabulary, texts)
    assert len(built_in_c) > 40
    assert built_in_c == pending == python


def test_build_rows_refuses_bad_arguments() -> None:
    automaton = LazyAutomaton(r'\{"a":[0-9]{1,5}\}')
    automaton.walk(b'{"a":1')
    native = automaton._native
    assert native is not None
    table, accepting = automaton._table, automaton._accepting
    sets = automaton._sets
    with pytest.raises(ValueError, match="DFA state id"):
        native.build_rows(np.array([len(sets) + 3], np.int32), table, accepting, sets)
    with pytest.raises(ValueError, match="int32"):
        native.build_rows(np.array([1], np.int64), table, accepting, sets)
    with pytest.raises(ValueError, match="acceptance flag"):
        native.build_rows(np.array([1], np.int32), table, accepting[:1], sets)
    with pytest.raises(TypeError):
        native.build_rows(np.array([1], np.int32), table, accepting, tuple(sets))
    # a table without room for a row's new states: nothing is built, the index returned
    unbuilt = [s for s in range(automaton.num_states) if table[s, 0] == -1]
    assert unbuilt
    small = table[: len(sets)].copy()
    assert native.build_rows(np.array(unbuilt, np.int32), small, accepting, sets) == 0


@pytest.mark.parametrize(
    ("pattern", "chained"),
    [
        (r'"[^"\\]*"', True),  # a free string: its characters loop
        (r'"[^"\\]{2,40}"', True),  # a bound counts them, a floor keeps the quote away
        (r'"[^"\\]{0,3}"x', True),  # the chain ends in DEAD past the bound
        (r'"(?:[a-z]+|[0-9]{1,5})"', False),  # plain bytes part ways at once
        (r'"a[^"\\]{1,90}"', True),
    ],
)
def test_plain_chains_built_in_c_match_the_python_rows(
    pattern: str, chained: bool, vocabulary: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chain of plain bytes' states, its rows built in one C call, is the one the index
    walks row by row without the C module, from every state on the way into the string."""
    from formcast.index import TokenIndex

    chains = []
    for native in (True, False):
        with monkeypatch.context() as patch:
            if not native:
                patch.setattr(lazy_module, "native_subset", None)
            automaton = LazyAutomaton(pattern)
            index = TokenIndex(automaton, vocabulary)
            found = []
            for prefix in (b'"', b'"a', b'"ab', b'"abc'):
                state = automaton.walk(prefix)
                chain = index._plain_chain(state, 80) if state else None
                found.append(
                    None if chain is None else [automaton._members(s) for s in chain.tolist()]
                )
            assert (automaton._native is not None) == native
            if not native:
                with pytest.raises(RuntimeError, match="C subset construction"):
                    automaton.plain_chain(automaton.initial, 8, np.arange(3, dtype=np.uint8))
        chains.append(found)
    assert chains[0] == chains[1]
    assert any(chain is not None for chain in chains[0]) == chained


def test_plain_chain_refuses_bad_arguments() -> None:
    automaton = LazyAutomaton(r'"[^"\\]{0,50}"')
    state = automaton.walk(b'"')
    native = automaton._native_nfa()
    table, accepting = automaton._table, automaton._accepting
    sets = automaton._sets
    chain = np.zeros(8, dtype=np.int32)
    chain[0] = state
    plain = np.frombuffer(b"abc", dtype=np.uint8)
    with pytest.raises(ValueError, match="chain begun"):
        native.plain_chain(chain, 0, plain, table, accepting, sets)
    with pytest.raises(ValueError, match="int32 chain"):
        native.plain_chain(chain.astype(np.int64), 1, plain, table, accepting, sets)
    chain[0] = len(sets) + 7
    with pytest.raises(ValueError, match="DFA state id"):
        native.plain_chain(chain, 1, plain, table, accepting, sets)


# ------------------------------------------------------------------- one entry alone


def steps_against_rows(
    automaton: Any, native: Any, states: list[int], label: object
) -> list[list[int]]:
    """Every entry of each of ``states`` (rows not built) computed alone by
    ``native.step`` (the automaton's Nfa or Stacks: the pushdown tests use this too), the
    row left unbuilt meanwhile, then the row built: the same states, entry by entry. The
    entries, a list a state; ``label`` names the automaton in a failure."""
    stepped = []
    for state in states:
        with automaton._lock:
            automaton._reserve(256)
            entries = [
                native.step(state, byte, automaton._table, automaton._accepting, automaton._sets)
                for byte in range(256)
            ]
            automaton._took_in()
        assert automaton.table[state, 0] == -1  # the row is left as it was
        automaton.build_rows([state])
        assert automaton.table[state].tolist() == entries, (label, state)
        stepped.append(entries)
    return stepped


def plain_steps_against_rows(
    automaton: Any, native: Any, states: list[int], plain: bytes, label: object
) -> list[int]:
    """For each of ``states`` (rows not built), ``native.plain_step`` over the bytes
    ``plain`` flags, then the state's row built: where the row sends all those bytes to
    one state, that state (the same id, registered as the row registers it), else -3; and
    asked again with the row built, read off it, the same. The answers."""
    flags = np.frombuffer(plain, dtype=np.uint8)
    chosen = np.flatnonzero(np.unpackbits(flags, bitorder="little"))
    answers = []
    for state in states:
        with automaton._lock:
            automaton._reserve(1)
            found = native.plain_step(
                state, plain, automaton._table, automaton._accepting, automaton._sets
            )
            automaton._took_in()
        assert automaton.table[state, 0] == -1  # the row is left as it was
        automaton.build_rows([state])
        targets = set(automaton.table[state, chosen].tolist())
        assert found == (targets.pop() if len(targets) == 1 else -3), (label, state)
        with automaton._lock:
            again = native.plain_step(
                state, plain, automaton._table, automaton._accepting, automaton._sets
            )
        assert again == found
        answers.append(found)
    return answers


def _stepped_then_built(nfa: Nfa, explored: int) -> None:
    """The automaton of ``nfa`` with ``explored`` rows built breadth-first, then every
    entry of every other registered state (up to 12 of them) computed alone by ``step``
    and compared with its row, built afterwards: the same state, and every state's
    acceptance that of its members."""
    automaton = LazyAutomaton.of_nfa(nfa)
    automaton.build_breadth_first(explored)
    native = automaton._native_nfa()
    assert native is not None
    unbuilt = [s for s in range(1, automaton.num_states) if automaton.table[s, 0] == -1][:12]
    assert unbuilt or automaton.table[: automaton.num_states, 0].min() >= 0
    stepped = steps_against_rows(automaton, native, unbuilt, nfa.pattern)
    for state, entries in zip(unbuilt, stepped, strict=True):
        assert all(native.kept_step(state, b) == entries[b] for b in range(256))
    for state in range(1, automaton.num_states):
        assert automaton.is_accepting(state) == (nfa.final in automaton._members(state))


_KEYS = r'\{(?:"(?:alpha|alps|name|[^"\\]*)":(?:[0-9]{1,3}|"[^"\\]*"),?)*\}'


@VIRTUAL
def test_an_entry_computed_alone_is_the_one_its_row_holds(virtual: bool) -> None:
    """Each entry ``step`` computes alone is the one the state's row holds once built (the
    same state id, registered as the row registers it), over the corpus: an object key's
    names, counted repeats (as virtual copies too), calls."""
    for pattern in [*CORPUS, _KEYS]:
        _stepped_then_built(nfa_of(pattern, virtual), 6)


def _short_of_room() -> tuple[LazyAutomaton, int, Any, np.ndarray]:
    """A bounded string's automaton, the state inside its quote (row unbuilt), its Nfa and
    a copy of its table with no room past the states registered."""
    automaton = LazyAutomaton(r'"[a-z]{0,4}"')
    start = automaton.walk(b'"')
    native = automaton._native_nfa()
    assert native is not None and automaton.table[start, 0] == -1
    return automaton, start, native, automaton._table[: len(automaton._sets)].copy()


def test_a_step_without_room_registers_nothing() -> None:
    """A step that would register a state where the table has no room answers -2 and
    leaves the states as they were; bad ids and bytes are refused."""
    automaton, start, native, small = _short_of_room()
    sets = automaton._sets
    count = len(sets)
    assert native.step(start, ord("a"), small, automaton._accepting, sets) == -2
    assert len(sets) == count and native.kept_step(start, ord("a")) == -1
    assert native.step(start, ord("{"), small, automaton._accepting, sets) == 0  # dead
    with pytest.raises(ValueError, match="DFA state id and a byte"):
        native.step(start, 256, small, automaton._accepting, sets)
    with pytest.raises(ValueError, match="DFA state id and a byte"):
        native.step(count + 3, 0, small, automaton._accepting, sets)
    with pytest.raises(ValueError, match="int32 table"):
        native.step(start, 0, small.astype(np.int64), automaton._accepting, sets)


def _plain_stepped_then_built(nfa: Nfa, explored: int, plain: bytes) -> None:
    """The automaton of ``nfa`` with ``explored`` rows built breadth-first; for every other
    registered state (up to 12), ``plain_step`` over the bytes ``plain`` flags, then the
    state's row built: where the row sends all those bytes to one state, that state (the
    same id, registered as the row registers it), else -3."""
    automaton = LazyAutomaton.of_nfa(nfa)
    automaton.build_breadth_first(explored)
    native = automaton._native_nfa()
    assert native is not None
    unbuilt = [s for s in range(1, automaton.num_states) if automaton.table[s, 0] == -1][:12]
    plain_steps_against_rows(automaton, native, unbuilt, plain, nfa.pattern)
    for state in range(1, automaton.num_states):
        assert automaton.is_accepting(state) == (nfa.final in automaton._members(state))


def _byte_flags(data: bytes) -> bytes:
    flags = np.zeros(256, dtype=np.uint8)
    flags[list(data)] = 1
    return np.packbits(flags, bitorder="little").tobytes()


# printable ASCII but the quote and the backslash (a string's plain bytes), and letters
_PLAIN = _byte_flags(bytes(b for b in range(32, 127) if b not in b'"\\'))
_LETTERS = _byte_flags(b"abcdefghijklmnopqrstuvwxyz")


@VIRTUAL
@pytest.mark.parametrize("plain", [_PLAIN, _LETTERS], ids=["plain", "letters"])
def test_the_state_every_plain_byte_leads_to_is_the_one_its_row_holds(
    virtual: bool, plain: bytes
) -> None:
    """``plain_step`` reads off a state's edges the one state every flagged byte leads to
    (or -3 where they part ways), as its row holds it once built: over the corpus, an
    object key's names, and strings counted and bounded (as virtual copies too)."""
    strings = [r'"[^"\\]{3,40}"', r'"[^"\\]{2}[a-z]{0,9}x?"', r'"(?:[a-m]|[n-z]){0,12}"']
    for pattern in [*CORPUS, _KEYS, *strings]:
        _plain_stepped_then_built(nfa_of(pattern, virtual), 4, plain)


@VIRTUAL
def test_the_bytes_a_state_reads_are_those_its_row_leads_on(virtual: bool) -> None:
    """``live_bytes`` reads off a state's edges the bytes its row sends to a live state
    registering nothing, and the same off the built row:
    over the corpus and an object key's names, concrete and virtual."""
    for pattern in [*CORPUS, _KEYS]:
        automaton = LazyAutomaton.of_nfa(nfa_of(pattern, virtual))
        automaton.build_breadth_first(4)
        native = automaton._native_nfa()
        assert native is not None
        unbuilt = [s for s in range(1, automaton.num_states) if automaton.table[s, 0] == -1]
        for state in unbuilt[:12]:
            count = len(automaton._sets)
            with automaton._lock:
                found = native.live_bytes(
                    state, automaton._table, automaton._accepting, automaton._sets
                )
            assert len(automaton._sets) == count and automaton.table[state, 0] == -1
            automaton.build_rows([state])
            live = np.packbits(automaton.table[state] != 0, bitorder="little").tobytes()
            assert found == live, (pattern, state)
            with automaton._lock:
                again = native.live_bytes(
                    state, automaton._table, automaton._accepting, automaton._sets
                )
            assert again == live


def test_a_plain_step_without_room_registers_nothing() -> None:
    """A plain step that would register a state where the table has no room answers -2
    and leaves the states as they were; a mask with no byte, and bad ids, are refused."""
    automaton, start, native, small = _short_of_room()
    sets = automaton._sets
    count = len(sets)
    assert native.plain_step(start, _LETTERS, small, automaton._accepting, sets) == -2
    assert len(sets) == count
    with pytest.raises(ValueError, match="32 bytes of byte flags"):
        native.plain_step(start, bytes(32), small, automaton._accepting, sets)
    with pytest.raises(ValueError, match="32 bytes of byte flags"):
        native.plain_step(start, b"\xff", small, automaton._accepting, sets)
    with pytest.raises(ValueError, match="DFA state id"):
        native.plain_step(count + 3, _LETTERS, small, automaton._accepting, sets)


# -------------------------------------------------------------------- states held in C


def test_states_made_in_c_are_held_there_and_read_back_as_members() -> None:
    """A state the C construction makes has no Python object: None in ``_sets``, its
    members held by the Nfa, read back by ``_members`` and found by ``_state_id``; a
    pickled automaton carries them as frozensets and walks the same."""
    automaton = LazyAutomaton(r'\{"a":"[a-z]{0,6}","b":[0-9]{1,3}\}')
    end = automaton.walk(b'{"a":"xyz","b":12}')
    assert automaton.is_accepting(end)
    made_in_c = [sid for sid in range(automaton.num_states) if automaton._sets[sid] is None]
    assert len(made_in_c) > 10
    for sid in made_in_c:
        members = automaton._members(sid)
        assert isinstance(members, frozenset) and members
        assert automaton._state_id(members) == sid
        assert automaton._native.find(sorted(members, reverse=True)) == sid
    assert automaton._state_id(frozenset({10**9})) is None
    copy = pickle.loads(pickle.dumps(automaton))
    assert all(copy._members(s) == automaton._members(s) for s in range(automaton.num_states))
    assert copy.walk(b'{"a":"xyz","b":12}') == end


def test_states_registered_from_python_are_taken_in_before_c_makes_any() -> None:
    """A state Python registers between two C calls (as node_states does) keeps its id:
    the C construction takes it in first, and a row leading to those members leads to
    that id rather than to a second state with the same members."""
    pattern = r'\{"k":[0-9]{2,4}\}'
    reference = LazyAutomaton(pattern)
    reference.walk(b'{"k":123}')
    later = reference.walk(b'{"k":12')
    members = reference._members(later)
    automaton = LazyAutomaton(pattern)
    automaton.walk(b'{"k":1')  # rows made in C, up to just before those members
    assert automaton._state_id(members) is None
    with automaton._lock:
        registered = automaton._add_state(members)
    assert automaton.walk(b'{"k":12') == registered
    states = [automaton._members(s) for s in range(automaton.num_states)]
    assert len(set(states)) == len(states)  # no two states with the same members


def test_c_construction_refuses_a_state_list_it_cannot_read() -> None:
    automaton = LazyAutomaton(r'"[a-z]{0,4}"')
    automaton.walk(b'"a')
    native, table, accepting = automaton._native, automaton._table, automaton._accepting
    sets = [*automaton._sets, "not members"]
    with pytest.raises(TypeError, match=r"expected state \d+ as a frozenset"):
        native.build_rows(np.array([1], np.int32), table, accepting, sets)
    with pytest.raises(ValueError, match="held here"):
        native.members(automaton.num_states + 5)


_JSON_CHARACTER = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'


def _characters_sampled() -> list[str]:
    """Every two-byte character, and a stride over the three- and four-byte ones with
    the ends of each lead byte's range."""
    points = [*range(0x80, 0x800), *range(0x800, 0x10000, 97), *range(0x10000, 0x110000, 4099)]
    points += [0xFFFF, 0x10000, 0x10FFFF, 0xD7FF, 0xE000]
    return [chr(p) for p in points if not 0xD800 <= p < 0xE000]


def _malformed() -> list[bytes]:
    """Bytes that start no character, and each lead byte cut by a byte outside its
    continuation range (overlong forms, surrogates, past U+10FFFF)."""
    starts = [bytes([b]) for b in [*range(0x80, 0xC2), *range(0xF5, 0x100)]]
    return [*starts, b"\xe0\x80", b"\xed\xa0", b"\xf0\x80", b"\xf4\x90", b"\xc3\x28", b"\xc3\xc3"]


@pytest.mark.parametrize(
    ("pattern", "prefix", "way"),
    [
        ('"' + _JSON_CHARACTER + '*"', b'"', "loops"),
        (r'"[^"\\]*"', b'"', "loops"),
        (r'"[^"\\]{0,5}"', b'"', "leads on"),  # a character counts one of five
        (r'\{"(?:alpha|[^a"\\][^"\\]*)":1\}', b'{"', "leads on"),  # a free key starts
        (r'"[^"\\é]*"', b'"', "parts"),  # é is left out
        (r'"[^"\\\U0001F600]*"', b'"', "parts"),  # a four-byte character left out
        (r'"(?:[^"\\]|é{2})*"', b'"', "parts"),  # é leads where the others do not
        (r'"[a-z]*"', b'"', "parts"),  # no character lives
    ],
)
def test_utf8_steps_is_where_every_character_leads(pattern: str, prefix: bytes, way: str) -> None:
    """``utf8_steps`` names the state every well-formed non-ASCII character leads to,
    where all lead to one and every malformed sequence dies (0 elsewhere), and the states
    inside a character by its lead byte and depth: those the automaton's own steps reach
    (sampled characters, all their prefixes). Asked again, it gives the answer it kept."""
    automaton = LazyAutomaton(pattern)
    state = automaton.walk(prefix)
    automaton.row(state)
    nfa = automaton._native_nfa()
    target, raw = nfa.utf8_steps(state, automaton.table)
    assert nfa.utf8_steps(state, automaton.table) == (target, raw) or target == 0  # kept
    steps = np.frombuffer(raw, dtype=np.int32).reshape(3, 64)
    if way == "parts":
        assert nfa.utf8_steps(state, automaton.table)[0] == 0
        assert target == 0
        return
    assert (target == state) == (way == "loops") and target > 0
    for character in _characters_sampled():
        data = character.encode()
        assert automaton.walk(data, state) == target, character
        for depth in range(1, len(data)):
            assert automaton.walk(data[:depth], state) == steps[depth - 1, data[0] - 0xC0]
    for data in _malformed():
        assert automaton.walk(data, state) == 0, data


def test_utf8_steps_refuses_what_it_cannot_read() -> None:
    automaton = LazyAutomaton(r'"[^"\\]*"')
    nfa = automaton._native_nfa()
    with pytest.raises(ValueError, match="int32 table"):
        nfa.utf8_steps(1, np.zeros((2, 255), dtype=np.int32))
    with pytest.raises(ValueError, match="DFA state id"):
        nfa.utf8_steps(5, automaton.table[:2])
    assert nfa.utf8_steps(1, automaton.table)[0] == 0  # its row not built yet
