"""The C trie walk (``formcast/_trie_walk.c``) at its own interface: rounds that stop at
rows not built and resume from them, and bad arguments refused with ValueError instead
of read out of bounds. Its rows are checked against brute force, beside the numpy walk's,
by the tests that take the ``trie_walk`` fixture (``test_index``, ``grammar/test_rows``).
"""

from __future__ import annotations

import random
import re
import threading
from typing import Any

import numpy as np
import pytest

from formcast.automaton import DEAD, LazyAutomaton, compile_automaton
from formcast.index import TokenIndex, native_walk
from formcast.vocabulary import Vocabulary
from support.index_oracle import brute_force_row, index_row, walk_rows_randomly

pytestmark = pytest.mark.skipif(native_walk is None, reason="formcast._trie_walk was not built")

VOCABULARY = Vocabulary.from_token_bytes(
    [b"", b"a", b"ab", b"abc", b"b", b"ba", b"c", b"x", b"abab"], [0]
)
FLAT = VOCABULARY.token_trie.flat


def _round(
    automaton: LazyAutomaton,
    nodes: list[int],
    states: list[int],
    out_size: int = FLAT.token_count,
    table: Any = None,
) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """One call: the tokens reached with their states, and the pending (node, state)."""
    assert native_walk is not None
    out, out_states = np.empty((2, out_size), dtype=np.int32)
    pending, pending_states = np.empty((2, FLAT.node_count), dtype=np.int32)
    filled, count = native_walk.walk(
        automaton.table if table is None else table,
        FLAT.walk_arrays,
        np.asarray(nodes, dtype=np.int32),
        np.asarray(states, dtype=np.int32),
        out,
        out_states,
        0,
        pending,
        pending_states,
    )
    found = dict(zip(out[:filled].tolist(), out_states[:filled].tolist(), strict=True))
    return found, list(zip(pending[:count].tolist(), pending_states[:count].tolist(), strict=True))


def test_rounds_stop_at_rows_not_built_and_end_with_every_live_token() -> None:
    automaton = LazyAutomaton("(ab)*c?|ba")
    start = automaton.initial
    found, pending = _round(automaton, [0], [start])
    assert found == {} and pending == [(0, start)]  # the start's own row is not built
    rounds = 0
    while pending:
        for state in {state for _, state in pending}:
            automaton.row(state)  # builds it
        nodes, states = zip(*pending, strict=True)
        more, pending = _round(automaton, list(nodes), list(states))
        assert not set(more) & set(found)  # each token once over all rounds
        found.update(more)
        rounds += 1
    assert rounds >= 2  # "ab" needs the row after "a", built in a later round
    expected = {}
    for token, raw in enumerate(VOCABULARY.token_bytes):
        if raw and (reached := automaton.walk(raw, start)) != DEAD:
            expected[token] = reached
    assert found == expected
    assert set(expected) == {1, 2, 3, 4, 5, 6, 8}  # every token but "x"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"out_size": 1}, "output buffers large enough"),
        ({"nodes": [FLAT.node_count]}, "trie nodes within"),
        ({"states": [10**6]}, "live states within"),
        ({"table": np.zeros(100, dtype=np.int32)}, "the table to hold at least 256"),
    ],
)
def test_bad_arguments_are_refused_not_read_out_of_bounds(
    change: dict[str, Any], message: str
) -> None:
    automaton = LazyAutomaton("[a-c]+")
    built = 0
    while built < automaton.num_states:  # every row, so that the walk goes to the end
        for state in range(built, automaton.num_states):
            automaton.row(state)
            built += 1
    arguments: dict[str, Any] = {"nodes": [0], "states": [automaton.initial]} | change
    with pytest.raises(ValueError, match=message):
        _round(automaton, **arguments)


WORD = '"[a-z]{1,6}"'
THREADED_PATTERNS = {
    # a lazy DFA: rows built whole
    "record": (
        rf'\{{"name":"[a-zA-Z ]{{1,12}}","tags":\[({WORD}(,{WORD}){{0,3}})?\],"n":[0-9]{{1,4}}\}}'
    ),
    # a pushdown automaton: rows built whole, from sets of stacks
    "nested values": (
        r'(?(DEFINE)(?P<v>\{("[a-z]{1,4}":(?&v)(,"[a-z]{1,4}":(?&v))*)?\}'
        r"|\[((?&v)(,(?&v))*)?\]|[0-9]{1,4}))(?&v)"
    ),
}


@pytest.mark.parametrize("name", sorted(THREADED_PATTERNS))
def test_threads_building_rows_of_one_index_agree_with_brute_force(
    vocabulary: Vocabulary, name: str
) -> None:
    """The C walk runs without the GIL while other threads build automaton rows (of a
    lazy DFA, or of a pushdown automaton) and grow the table: rows built by eight threads
    at once are still exact."""
    tokens = [b"", *(bytes([b]) for b in range(256)), *vocabulary.token_bytes[::9]]
    small = Vocabulary.from_token_bytes(tokens, [0])
    index = TokenIndex(compile_automaton(THREADED_PATTERNS[name]), small)
    errors: list[BaseException] = []

    def walk(seed: int) -> None:
        try:
            walk_rows_randomly(index, random.Random(seed), walks=6, depth=40)
        except BaseException as error:  # a thread's error, reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=walk, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert index.computed_rows > 20
    for state in list(index._rows):
        assert index_row(index, state) == brute_force_row(index, state)


def test_a_walk_inside_a_walk_gets_buffers_of_its_own() -> None:
    """The C walk's buffers are kept per thread and reused; a walk started while they
    are held (from an automaton building what a walk stopped at) gets others."""
    from formcast.index import _BUFFERS

    outer = _BUFFERS.take(10, 20)
    inner = _BUFFERS.take(10, 20)
    assert all(not np.shares_memory(a, b) for a in outer for b in inner)
    assert min(a.size for a in outer[:2]) >= 10 and min(a.size for a in outer[2:]) >= 20
    _BUFFERS.give_back(inner)
    _BUFFERS.give_back(outer)
    again = _BUFFERS.take(5, 5)
    assert all(a is b for a, b in zip(again, outer, strict=True))  # reused, not grown
    _BUFFERS.give_back(again)
    grown = _BUFFERS.take(outer[0].size + 1, 5)
    assert grown[0].size == outer[0].size + 1 and grown[2].size >= outer[2].size
    _BUFFERS.give_back(grown)


@pytest.mark.parametrize(
    ("count", "largest"),
    # the insertion sort (up to 64 pairs), then the radix sort's two and three passes
    [(0, 50_000), (1, 50_000), (2, 50_000), (7, 50_000), (64, 50_000), (65, 50_000),
     (300, 50_000), (20_000, 50_000), (3_000, 2**22 + 5_000), (3_000, 2**31 - 1)],
)  # fmt: skip
def test_sort_pairs_orders_by_token_and_leaves_out_dead_states(count: int, largest: int) -> None:
    assert native_walk is not None
    rng = np.random.default_rng(count)
    ids = rng.choice(largest, size=count, replace=False).astype(np.int32)
    states = rng.integers(0, 4, count).astype(np.int32)  # some DEAD (0)
    pairs = zip(ids.tolist(), states.tolist(), strict=True)
    expected = sorted((t, s) for t, s in pairs if s != DEAD)
    kept = native_walk.sort_pairs(ids, states)
    assert kept == len(expected)
    assert list(zip(ids[:kept].tolist(), states[:kept].tolist(), strict=True)) == expected


def test_sort_pairs_refuses_buffers_of_other_lengths_or_read_only() -> None:
    assert native_walk is not None
    with pytest.raises(ValueError, match="expected 3 states, one an id, found 4"):
        native_walk.sort_pairs(np.zeros(3, np.int32), np.ones(4, np.int32))
    frozen = np.arange(3, dtype=np.int32)
    frozen.setflags(write=False)
    with pytest.raises((ValueError, BufferError)):
        native_walk.sort_pairs(frozen, np.ones(3, np.int32))


@pytest.mark.parametrize("count", [0, 1, 5, 40, 2_000])
def test_pack_bits_sets_exactly_the_bits_of_the_ids(count: int) -> None:
    assert native_walk is not None
    rng = np.random.default_rng(count)
    ids = rng.permutation(3_000)[:count].astype(np.int32)
    out = np.full(94, 0xFFFFFFFF, dtype=np.uint32)  # stale bits must be cleared
    native_walk.pack_bits(ids, out)
    flags = np.zeros(94 * 32, dtype=bool)
    flags[ids] = True
    assert np.array_equal(out, np.packbits(flags, bitorder="little").view(np.uint32))


def test_pack_bits_refuses_an_id_past_the_buffer() -> None:
    assert native_walk is not None
    out = np.zeros(2, dtype=np.uint32)
    with pytest.raises(ValueError, match=r"expected ids in \[0, 64\), found 64"):
        native_walk.pack_bits(np.array([3, 64], dtype=np.int32), out)
    with pytest.raises(ValueError, match="found -1"):
        native_walk.pack_bits(np.array([-1], dtype=np.int32), out)


@pytest.mark.parametrize("count", [5, 2_000])
def test_pack_bits_of_sorted_ids_with_runs_in_one_word(count: int) -> None:
    """A row's ids come sorted: the bits of a word gather before one store."""
    assert native_walk is not None
    rng = np.random.default_rng(count)
    ids = np.sort(rng.permutation(3_000)[:count]).astype(np.int32)
    out = np.zeros(94, dtype=np.uint32)
    native_walk.pack_bits(ids, out)
    flags = np.zeros(94 * 32, dtype=bool)
    flags[ids] = True
    assert np.array_equal(out, np.packbits(flags, bitorder="little").view(np.uint32))


@pytest.mark.parametrize("count", [0, 1, 7, 3_000])
def test_state_after_finds_each_token_of_a_row_held_as_bytes(count: int) -> None:
    """A visit's sorted row, read by binary search: every token in it gives its state,
    every other (below, between, past its ids) gives DEAD."""
    assert native_walk is not None
    rng = np.random.default_rng(count)
    ids = np.sort(rng.permutation(10_000)[:count]).astype(np.int32)
    states = rng.integers(1, 500, size=count).astype(np.int32)
    expected = dict(zip(ids.tolist(), states.tolist(), strict=True))
    raw_ids, raw_states = ids.tobytes(), states.tobytes()
    for token in [-1, 0, 9_999, 10_000, 2**40, *rng.integers(0, 10_000, size=200).tolist()]:
        assert native_walk.state_after(raw_ids, raw_states, token) == expected.get(token, DEAD)


def test_state_after_refuses_rows_it_cannot_read() -> None:
    assert native_walk is not None
    with pytest.raises(ValueError, match="found 8 and 4 bytes"):
        native_walk.state_after(bytes(8), bytes(4), 1)
    with pytest.raises(ValueError, match="found 6 and 6 bytes"):
        native_walk.state_after(bytes(6), bytes(6), 1)
    with pytest.raises(TypeError, match="expected state_after"):
        native_walk.state_after(bytearray(8), bytes(8), 1)  # type: ignore[arg-type]


def test_scatter_pairs_refuses_ids_outside_the_table_and_short_outputs() -> None:
    assert native_walk is not None
    table = np.empty(100, dtype=np.int32)
    bits = np.empty(4, dtype=np.uint32)
    codes, palette = np.empty(100, dtype=np.uint8), np.empty(256, dtype=np.int32)
    none = np.zeros(0, dtype=np.int32)
    ids, states = np.array([3, 99], dtype=np.int32), np.array([7, 8], dtype=np.int32)

    def scatter(*changed: Any) -> tuple[int, int]:
        arguments = [ids, states, none, none, none, table, none, none, bits, codes, palette]
        for position, value in changed:
            arguments[position] = value
        assert native_walk is not None
        kept, distinct = native_walk.scatter_pairs(*arguments)
        return int(kept), int(distinct)

    assert scatter() == (2, 3)
    assert np.flatnonzero(table).tolist() == [3, 99] and table[[3, 99]].tolist() == [7, 8]
    assert bits.tolist() == [1 << 3, 0, 0, 1 << 3]
    assert palette[:3][codes].tolist() == table.tolist()
    with pytest.raises(ValueError, match=r"expected token ids in \[0, 100\)"):
        scatter((0, np.array([100, 1], dtype=np.int32)))
    with pytest.raises(ValueError, match=r"expected token ids in \[0, 100\)"):
        scatter((6, np.array([5], np.int32)), (7, np.array([-1], np.int32)))
    with pytest.raises(ValueError, match=r"plain lengths in \[0, 2\)"):  # past the chain
        scatter(
            (2, np.array([5], np.int32)),
            (3, np.array([2], np.int32)),
            (4, np.array([0, 4], np.int32)),
        )
    with pytest.raises(ValueError):
        scatter((8, bits[:3]))  # 100 tokens need 4 words
    with pytest.raises(ValueError):
        scatter((9, codes[:99]))
    with pytest.raises(ValueError):
        scatter((10, palette[:255]))


@pytest.mark.parametrize("distinct", [1, 2, 255, 256, 3_000])
def test_scatter_pairs_codes_a_table_of_few_states_in_a_byte_a_token(distinct: int) -> None:
    """Up to 255 distinct states (DEAD aside) the table is coded one byte a token through
    a palette; past that, distinct is -1 and the int32 table stands alone."""
    assert native_walk is not None
    size = 10_000
    rng = np.random.default_rng(distinct)
    ids = rng.permutation(size)[:6_000].astype(np.int32)
    states = (rng.integers(0, distinct, size=ids.size) * 7 + 1).astype(np.int32)
    states[:distinct] = np.arange(distinct, dtype=np.int32) * 7 + 1  # each one at least once
    table = np.empty(size, dtype=np.int32)
    bits = np.empty((size + 31) // 32, dtype=np.uint32)
    codes, palette = np.empty(size, dtype=np.uint8), np.empty(256, dtype=np.int32)
    none = np.zeros(0, dtype=np.int32)
    kept, found = native_walk.scatter_pairs(
        ids, states, none, none, none, table, none, none, bits, codes, palette
    )
    expected = np.zeros(size, dtype=np.int32)
    expected[ids] = states
    assert kept == ids.size and np.array_equal(table, expected)
    if distinct <= 255:
        assert found == distinct + 1 and palette[0] == 0
        assert np.array_equal(palette[:found][codes], expected)
    else:
        assert found == -1


def _template(
    plain_ids: np.ndarray, lengths: np.ndarray, shape: bytes, size: int
) -> tuple[int, np.ndarray, np.ndarray]:
    assert native_walk is not None
    codes = np.full(size, 99, dtype=np.uint8)  # stale codes and bits must be cleared
    bits = np.full((size + 31) // 32 + 1, 0xFFFFFFFF, dtype=np.uint32)
    kept = native_walk.plain_template(
        plain_ids, lengths, np.frombuffer(shape, dtype=np.uint8), codes, bits
    )
    return int(kept), codes, bits


def test_plain_template_codes_each_plain_token_by_its_length() -> None:
    """A plain token's code is the shape's byte at its length (0: DEAD, left out of the
    bits); every other token's is 0, and every word of the bits is written."""
    size = 100
    plain_ids = np.array([3, 31, 32, 64, 99], dtype=np.int32)
    lengths = np.array([1, 2, 3, 2, 1], dtype=np.int32)
    kept, codes, bits = _template(plain_ids, lengths, bytes([0, 1, 2, 0]), size)
    expected = np.zeros(size, dtype=np.uint8)
    expected[plain_ids] = [1, 2, 0, 2, 1]
    assert kept == 4 and np.array_equal(codes, expected)
    flags = np.zeros(bits.size * 32, dtype=bool)
    flags[[3, 31, 64, 99]] = True
    assert np.array_equal(bits, np.packbits(flags, bitorder="little").view(np.uint32))


def test_plain_template_refuses_ids_and_lengths_outside_and_short_outputs() -> None:
    assert native_walk is not None
    ids, lengths = np.array([3, 99], dtype=np.int32), np.array([1, 2], dtype=np.int32)
    shape = bytes([0, 1, 1])
    with pytest.raises(ValueError, match=r"ids in \[0, 100\) and lengths in \[1, 3\)"):
        _template(np.array([3, 100], dtype=np.int32), lengths, shape, 100)
    with pytest.raises(ValueError, match=r"lengths in \[1, 3\)"):
        _template(ids, np.array([1, 3], dtype=np.int32), shape, 100)
    with pytest.raises(ValueError, match=r"lengths in \[1, 3\)"):  # no token is empty
        _template(ids, np.array([0, 1], dtype=np.int32), shape, 100)
    with pytest.raises(ValueError, match="plain_lengths"):
        _template(ids, lengths[:1], shape, 100)
    with pytest.raises(ValueError, match="out_bits"):
        native_walk.plain_template(
            ids,
            lengths,
            np.frombuffer(shape, np.uint8),
            np.empty(100, np.uint8),
            np.empty(3, np.uint32),
        )


def _on_template(*changed: tuple[int, Any]) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray]:
    """scatter_on_template over a template of 100 tokens (plain tokens 10..19 of length
    1, 20..29 of length 2, 30..39 of length 3; chain 5, 6, DEAD) with walked tokens 3 and
    99, a repeat of token 11 as 50 and one of 3 as 98, arguments replaced by ``changed``."""
    assert native_walk is not None
    size = 100
    plain_ids = np.arange(10, 40, dtype=np.int32)
    lengths = np.repeat(np.arange(1, 4, dtype=np.int32), 10)
    shape = bytes([0, 1, 2, 0])
    _, template_codes, template_bits = _template(plain_ids, lengths, shape, size)
    plain_bits = np.zeros(4, dtype=np.uint32)
    native_walk.pack_bits(plain_ids, plain_bits)
    codes, palette = np.empty(size, dtype=np.uint8), np.empty(256, dtype=np.int32)
    bits = np.empty(4, dtype=np.uint32)
    arguments: list[Any] = [
        np.array([3, 99], dtype=np.int32),
        np.array([7, 6], dtype=np.int32),
        np.array([4, 5, 6, DEAD], dtype=np.int32),  # chain[0] is not read
        np.frombuffer(shape, dtype=np.uint8),
        template_codes[:size],
        template_bits[:4],
        plain_bits,
        np.array([50, 98], dtype=np.int32),
        np.array([11, 3], dtype=np.int32),
        codes,
        bits,
        palette,
    ]
    for position, value in changed:
        arguments[position] = value
    kept, distinct = native_walk.scatter_on_template(*arguments)
    return int(kept), int(distinct), codes, bits, palette


def test_scatter_on_template_names_the_chain_states_then_the_walked_ones() -> None:
    kept, distinct, codes, bits, palette = _on_template()
    assert distinct == 4 and palette[:4].tolist() == [DEAD, 5, 6, 7]
    expected = np.zeros(100, dtype=np.int32)
    expected[10:20], expected[20:30] = 5, 6
    expected[[3, 99]] = [7, 6]  # a walked token of a chain state takes its code
    expected[[50, 98]] = expected[[11, 3]]
    assert kept == 24 and np.array_equal(palette[:distinct][codes], expected)
    flags = np.zeros(128, dtype=bool)
    flags[:100] = expected != DEAD
    assert np.array_equal(bits, np.packbits(flags, bitorder="little").view(np.uint32))


def test_scatter_on_template_keeps_a_plain_tokens_chain_state_and_repeats_dead_ends() -> None:
    """A walked token that is also plain keeps its state off the chain (the plain tokens
    are written last in scatter_pairs); a walked DEAD, and a repeat of a DEAD token,
    clear the token's code and bit."""
    kept, distinct, codes, bits, palette = _on_template(
        (0, np.array([12, 35, 40], dtype=np.int32)),  # 12 and 35 are plain
        (1, np.array([9, 9, DEAD], dtype=np.int32)),
        (7, np.array([13, 98], dtype=np.int32)),
        (8, np.array([35, 40], dtype=np.int32)),
    )
    assert distinct == 3  # state 9 never met: no code for it
    decoded = palette[:distinct][codes]
    assert decoded[12] == 5 and decoded[35] == DEAD and decoded[13] == DEAD
    assert kept == 19 and decoded[98] == DEAD and not bits[3] >> 2 & 1
    assert not bits[0] >> 13 & 1 and bits[0] >> 12 & 1


def test_scatter_on_template_gives_up_past_255_states() -> None:
    ids = np.arange(40, 100, dtype=np.int32)
    few = _on_template((0, ids), (1, np.arange(1_000, 1_060, dtype=np.int32)))
    assert few[1] == 3 + 60
    many = np.arange(1_000, 1_060, dtype=np.int32)
    palette = np.zeros(256, dtype=np.int32)
    shape = bytes([0, *range(1, 201)])
    chain = np.array([1, *range(2_000, 2_200)], dtype=np.int32)
    _, distinct, *_ = _on_template(
        (0, ids), (1, many), (2, chain), (3, np.frombuffer(shape, np.uint8)), (11, palette)
    )
    assert distinct == -1  # 200 of the chain and 60 more


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ([(0, np.array([100], dtype=np.int32)), (1, np.ones(1, np.int32))], r"ids in \[0, 100\)"),
        ([(7, np.array([-1], dtype=np.int32)), (8, np.ones(1, np.int32))], r"ids in \[0, 100\)"),
        ([(8, np.array([11, 100], dtype=np.int32))], r"ids in \[0, 100\)"),
        ([(3, np.frombuffer(bytes([0, 1, 1, 0]), np.uint8))], "a shape coding the chain"),
        ([(3, np.frombuffer(bytes([0, 1, 2, 2]), np.uint8))], "a shape coding the chain"),
        ([(3, np.frombuffer(bytes([0, 0, 2, 0]), np.uint8))], "a shape coding the chain"),
        ([(3, np.frombuffer(bytes([0, 1, 2, 0, 0]), np.uint8))], "as long as the chain"),
        ([(3, np.frombuffer(bytes([0, 1, 2]), np.uint8))], "shape"),
        ([(1, np.ones(1, np.int32))], "states"),
        ([(5, np.zeros(3, np.uint32))], "template_bits"),
        ([(6, np.zeros(3, np.uint32))], "plain_bits"),
        ([(9, np.zeros(99, np.uint8))], "out_codes"),
        ([(10, np.zeros(3, np.uint32))], "out_bits"),
        ([(11, np.zeros(255, np.int32))], "out_palette"),
    ],
)
def test_scatter_on_template_refuses_bad_ids_shapes_and_short_buffers(
    changed: list[tuple[int, Any]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _on_template(*changed)


@pytest.mark.parametrize("seed", range(6))
def test_first_byte_split_matches_a_reading_of_the_table(seed: int) -> None:
    """Random tables where some states loop on every plain byte: the codes, the looping
    states, the walked bytes and the unread ones are what the table says."""
    assert native_walk is not None
    rng = np.random.default_rng(seed)
    plain = np.array(sorted(rng.choice(np.arange(32, 127), size=60, replace=False)), np.uint8)
    states = 12
    table = rng.integers(0, states, size=(states, 256)).astype(np.int32)
    looping = sorted(rng.choice(np.arange(2, states), size=3, replace=False).tolist())
    for state in looping:
        table[state, plain] = state
    table[1, plain] = rng.choice([DEAD, *looping, 5, 6], size=plain.size)
    by_first = np.full(256, 99, dtype=np.uint8)
    lists = np.full((4, 256), -7, dtype=np.int32)
    looped, walked, unread = native_walk.first_byte_split(table, 1, plain, by_first, lists)

    targets = table[1, plain]
    reached = sorted({int(t) for t in targets if t in looping})
    assert lists[0, :looped].tolist() == reached
    expected_codes = np.zeros(256, dtype=np.uint8)
    for byte, target in zip(plain.tolist(), targets.tolist(), strict=True):
        if target in reached:
            expected_codes[byte] = reached.index(target) + 1
    assert by_first.tolist() == expected_codes.tolist()
    other = [(b, t) for b, t in zip(plain.tolist(), targets.tolist(), strict=True)
             if t not in reached]  # fmt: skip
    assert lists[3, :unread].tolist() == [b for b, _ in other]
    live = [(b, t) for b, t in other if t != DEAD]
    assert lists[1, :walked].tolist() == [b for b, _ in live]
    assert lists[2, :walked].tolist() == [t for _, t in live]


def test_first_byte_split_refuses_targets_whose_rows_are_not_built() -> None:
    assert native_walk is not None
    plain = np.arange(97, 123, dtype=np.uint8)
    table = np.zeros((3, 256), dtype=np.int32)
    table[1, plain] = 2
    table[2] = -1  # UNBUILT
    lists = np.empty((4, 256), dtype=np.int32)
    by_first = np.empty(256, dtype=np.uint8)
    with pytest.raises(ValueError, match="built rows"):
        native_walk.first_byte_split(table, 1, plain, by_first, lists)
    with pytest.raises(ValueError, match="live state"):
        native_walk.first_byte_split(table, 3, plain, by_first, lists)


# -- a state's first visit in one call (formcast/_row_visit.c) ------------------------------
VISIT_PATTERNS = [
    # an object key: declared names and free keys (index._first_byte_row's way)
    r'\{(?:"(?:alpha|alps|beta|name|namespace|[^"\\]*)":(?:[0-9]{1,3}|"[^"\\]*"|true),?)*\}',
    # strings: free, counted to a bound, with a floor (the chain of plain bytes)
    r'"[^"\\]*"|"[^"\\]{2,7}"x',
    r'\["(?:[^"\\]|\\n){0,40}"(?:,"[a-z ]{1,5}")*\]',
    # neither: numbers, words, a choice (the whole trie)
    r"(?:-?[0-9]+(?:\.[0-9]{1,4})?|true|false|null|abc|abd|[0-9a-f]{8})",
    # strings leaving out a few plain bytes, bounded and free (diverted_visit, none diverted),
    # and one leaving out other bytes after its first character (the whole trie)
    r'\["[^,"\\]{1,30}"(?:,"[^,:"\\]*")*\]|"[^,"\\][^;"\\]{0,9}"',
    # strings whose non-ASCII characters part ways (their text tokens walked), free and
    # bounded, beside a free one and a short bounded one (taken whole, counted to their
    # end: formcast._subset's utf8_steps), and one whose characters outlive its plain bytes
    r'\["[^"\\é]*"(?:,"(?:[^"\\]|é{2})*")*(?:,"(?:[^"\\]|é{2}){0,6}")?(?:,"[^"\\]*")?'
    r'(?:,"[^"\\]{1,2}")?\]|a"[^"\\]?é*"',
]
# printable ASCII and words, three of them repeated (their rows take the original's state)
VISIT_TOKENS = [
    b"",
    *[bytes([b]) for b in range(32, 127)],
    *[w.encode() for w in ["alpha", "al", "alps", "beta", "name", "names", "pace", '":', '","']],
    *[w.encode() for w in ["abc", "12", "3.5", "true", "fa", "lse", "null", " de", "xyz", "\\n"]],
    b"\xc3\xa9",
    # text tokens (non-ASCII characters, the last one whole or cut short), and tokens
    # that are not: a quote after a character, malformed sequences, DEL
    *[w.encode() for w in ["aé", "日本", "😀", 'é"', "\x7f"]],
    *[b"\xe2", b"x\xe2\x80", b"\xf0\x9f\x98", b"\x80a", b"\xc3\x28", b"\xc3"],
    *[w.encode() for w in ["qé", " 日", "né"]],  # under a free key's initial, a name's
    b"\xc3\xa9\xe2\x80",  # cut short after a whole character
    b"na",
    b"na",
    b'":',
]


def _visits(index: TokenIndex, states: list[int]) -> list[int]:
    """The kind of each state's visit (its first item)."""
    import formcast.index

    visitor = formcast.index._visitor(index.vocabulary)
    kinds = []
    for state in states:
        found = index.automaton.visit_building(visitor.visit, state)
        assert found is not None
        kinds.append(found[0])
    return kinds


@pytest.mark.parametrize("templated", [True, False], ids=["templates", "no templates"])
@pytest.mark.parametrize("repeated", [False, True], ids=["unique", "repeated tokens"])
@pytest.mark.parametrize("pattern", VISIT_PATTERNS)
def test_a_visit_gives_the_row_the_ways_give_one_call_at_a_time(
    pattern: str, repeated: bool, templated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every reachable state's row, mask and steps by the Visitor's one call are those of
    index.py's ways taken one call at a time (on the same automaton, so the same state
    numbers), and the brute force's; the patterns between them take each of its ways,
    with the plain tokens' templates and without them (then index.py scatters a string's
    row)."""
    import formcast.automaton.lazy as lazy_module
    import formcast.index

    if lazy_module.native_subset is None:
        pytest.skip("formcast._subset was not built")
    tokens = VISIT_TOKENS if repeated else list(dict.fromkeys(VISIT_TOKENS))
    vocabulary = Vocabulary.from_token_bytes(tokens, [0])
    assert bool(vocabulary.token_trie.repeats.size) == repeated
    templates = formcast.index._plain_templates(vocabulary)
    template_of = templates.of if templated else None
    by_byte_of = templates.by_byte if templated else None
    monkeypatch.setitem(
        formcast.index._VISITORS,
        vocabulary,
        formcast.index._new_visitor(vocabulary, template_of, by_byte_of),
    )
    automaton = LazyAutomaton(pattern)
    visited = TokenIndex(automaton, vocabulary)
    states = _reachable(visited, 150)
    kinds = _visits(visited, states)
    monkeypatch.setattr(TokenIndex, "_visited", lambda self, state: None)
    reference = TokenIndex(automaton, vocabulary)
    probes = range(-1, vocabulary.size + 2)
    for state in states:
        assert (
            index_row(visited, state)
            == index_row(reference, state)
            == brute_force_row(visited, state)
        )
        assert np.array_equal(
            visited.packed_mask(state, vocabulary.size + 40),
            reference.packed_mask(state, vocabulary.size + 40),
        )
        assert [visited.next_state(state, t) for t in probes] == [
            reference.next_state(state, t) for t in probes
        ]
    assert formcast.index._VISIT_SORTED in kinds
    way = VISIT_PATTERNS.index(pattern)
    if way == 0:
        assert formcast.index._VISIT_FIRST_BYTE in kinds
    if way in (1, 2):  # strings: from a template, or left to index.py without one
        assert (formcast.index._VISIT_CHAIN in kinds) != templated
        assert bool(templates._kept) or not templated
        # a large row on its template: the template's codes and the tokens apart from it
        assert (formcast.index._VISIT_TEMPLATED in kinds) == templated
    if way == 4:  # the plain tokens by the bytes they hold: asked only by that way
        assert (templates._by_byte is not None) == templated


def _assert_as_index_py_makes_it(
    visited: TokenIndex, state: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row of ``state`` the Visitor made in ``visited``: the same tokens, states, mask
    and steps as index.py's own ways give on the same automaton."""
    monkeypatch.setattr(TokenIndex, "_visited", lambda self, state: None)
    reference = TokenIndex(visited.automaton, visited.vocabulary)
    size = visited.vocabulary.size
    assert index_row(visited, state) == index_row(reference, state)
    assert np.array_equal(visited.packed_mask(state, size), reference.packed_mask(state, size))
    assert [visited.next_state(state, t) for t in range(size)] == [
        reference.next_state(state, t) for t in range(size)
    ]


def _visited_first(
    pattern: str, prefix: bytes, kind: int
) -> tuple[Vocabulary, LazyAutomaton, TokenIndex, int, tuple[Any, ...]]:
    """The Visitor's first visit of the state ``prefix`` leads to in ``pattern``'s
    automaton (over VISIT_TOKENS, each once), which must take the way ``kind``: the
    vocabulary, the automaton, an index over it, the state and the visit's answer."""
    import formcast.automaton.lazy as lazy_module
    import formcast.index

    if lazy_module.native_subset is None:
        pytest.skip("formcast._subset was not built")
    vocabulary = Vocabulary.from_token_bytes(list(dict.fromkeys(VISIT_TOKENS)), [0])
    automaton = LazyAutomaton(pattern)
    visited = TokenIndex(automaton, vocabulary)
    state = automaton.walk(prefix)
    found = automaton.visit_building(formcast.index._visitor(vocabulary).visit, state)
    assert found is not None and found[0] == kind
    return vocabulary, automaton, visited, state, found


@pytest.mark.parametrize(
    ("pattern", "read_off"),
    [
        (VISIT_PATTERNS[0], True),  # free keys start with any byte: all under "a" live
        (r'\{(?:"(?:alpha|alps|[^a"\\][^"\\]*)":[0-9]{1,3},?)*\}', False),  # "abc" dies
        # "abc" dies, and "alps" leaves every name for the free key: listed all the same
        (r'\{(?:"(?:alpha|(?:a[^b"\\]|[^a"\\])[^"\\]*)":[0-9]{1,3},?)*\}', False),
    ],
    ids=["every token lives", "some die", "some die, some leave the names"],
)
def test_a_key_row_reads_a_declared_initial_off_its_first_byte_where_its_tokens_live(
    pattern: str, read_off: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a declared name's initial, the tokens that leave every name (to the free
    key's looping state) are read off their first byte, and the row's pairs are the
    tokens on a name's way, where every token under the initial lives; where some die,
    the initial stays unread and each of its live tokens is a pair. A token that is not
    plain and ends in the free key is a bit of the row, not a pair. Either way the row,
    its mask and its steps are those of index.py's own ways."""
    import formcast.index

    vocabulary, _, visited, state, found = _visited_first(
        pattern, b'{"', formcast.index._VISIT_FIRST_BYTE
    )
    ids = np.frombuffer(found[1], dtype=np.int32).tolist()
    by_first, unread = found[4], np.frombuffer(found[6], dtype=np.int32).tolist()
    under_a = {vocabulary.token_bytes[t] for t in ids if vocabulary.token_bytes[t][:1] == b"a"}
    assert (by_first[ord("a")] == 1) == read_off
    assert (ord("a") in unread) != read_off
    # the pairs under "a": tokens on a name's way ("alps" and "alpha" may end where a free
    # key loops, and then are read off too); never "abc", which leaves every name
    assert {b"a", b"al"} <= under_a <= {b"a", b"al", b"alps", b"alpha"}
    abc = vocabulary.token_bytes.index(b"abc")
    assert (visited.next_state(state, abc) >= 0) == read_off  # it dies where not read off
    # "é" (not plain) starts a free key: a bit of the row, not a pair, and its state the
    # first looping one's (others)
    e_acute = vocabulary.token_bytes.index("é".encode())
    loop = int(np.frombuffer(found[5], dtype=np.int32)[1])
    assert e_acute not in ids and found[7] == loop
    assert visited.next_state(state, e_acute) == loop
    _assert_as_index_py_makes_it(visited, state, monkeypatch)


def test_a_string_row_takes_its_characters_that_are_not_plain_as_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A free string's large row on its template: "é" (not plain) ends where one plain
    character leads, so the row takes it as a bit of code 0 whose state is palette[0],
    not as a listed pair; its mask and steps are those of index.py's own ways."""
    import formcast.index

    vocabulary, automaton, visited, state, found = _visited_first(
        r'"(?:[^"\\\x00-\x1f]|\\n)*"', b'"', formcast.index._VISIT_TEMPLATED
    )
    ids = np.frombuffer(found[3], dtype=np.int32).tolist()
    palette = np.frombuffer(found[2], dtype=np.int32)
    e_acute = vocabulary.token_bytes.index("é".encode())
    after_one = int(automaton.table[state][ord("x")])  # where one plain byte leads
    assert e_acute not in ids and int(palette[0]) == after_one
    assert visited.next_state(state, e_acute) == after_one
    assert ids  # the tokens apart remain listed: the closing quote's, the escape's
    _assert_as_index_py_makes_it(visited, state, monkeypatch)


def _read_past(automaton: LazyAutomaton, state: int) -> bool:
    """Whether a walk read on from ``state``: its row built, or an entry of it computed
    alone (formcast._subset's step, below a trie node of a few children)."""
    native = automaton._native
    assert native is not None
    built = int(automaton.table[state][0]) != -1
    return built or any(native.kept_step(state, byte) >= 0 for byte in range(256))


@pytest.mark.parametrize(
    ("pattern", "taken_whole"),
    [(r'"(?:[^"\\\x00-\x1f]|\\n)*"', True), (r'"(?:[^"\\é]|\\n)*"', False)],
    ids=["every character loops", "one is left out"],
)
def test_a_string_takes_its_text_tokens_without_the_rows_inside_a_character(
    pattern: str, taken_whole: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a free string's state loops on every non-ASCII character, its visit takes
    the text tokens as they are (whole: its own state; cut short: the state inside the
    character) and reads nothing past a state inside one; where a character is left out,
    they are walked, reading on from there. Either way the row is index.py's."""
    import formcast.index

    vocabulary, automaton, visited, state, found = _visited_first(
        pattern, b'"', formcast.index._VISIT_TEMPLATED
    )
    after_lead = int(automaton.table[state][0xF0])  # "😀" and a cut one start there
    assert after_lead > 0 and _read_past(automaton, after_lead) != taken_whole
    ids = set(np.frombuffer(found[3], dtype=np.int32).tolist())
    token = vocabulary.token_bytes.index
    assert token(b"x\xe2\x80") in ids and token("日本".encode()) not in ids  # pair, bit
    assert visited.next_state(state, token("日本".encode())) == state
    assert visited.next_state(state, token(b"x\xe2\x80")) == automaton.walk(b"x\xe2\x80", state)
    assert visited.next_state(state, token(b"\xc3\x28")) == -1  # malformed: not allowed
    _assert_as_index_py_makes_it(visited, state, monkeypatch)


def test_a_key_takes_its_text_tokens_without_the_rows_inside_a_character(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where every non-ASCII character leads an object key's state to its free key, which
    loops on them, the key's visit takes the text tokens without a walk (nothing read
    past a state inside a character, from the key or the free key) but those under a
    declared name's initial ("né"), which it walks; its row is index.py's."""
    import formcast.index

    vocabulary, automaton, visited, state, found = _visited_first(
        VISIT_PATTERNS[0], b'{"', formcast.index._VISIT_FIRST_BYTE
    )
    free = automaton.walk("é".encode(), state)
    assert free == found[7] == automaton.walk(b"q", state)  # the first looping state
    for start in (state, free):
        after_lead = int(automaton.table[start][0xF0])
        assert after_lead > 0 and not _read_past(automaton, after_lead)
    token = vocabulary.token_bytes.index
    ids = np.frombuffer(found[1], dtype=np.int32).tolist()
    assert token("qé".encode()) not in ids and token(b"\xf0\x9f\x98") in ids
    assert visited.next_state(state, token("né".encode())) == automaton.walk("né".encode(), state)
    _assert_as_index_py_makes_it(visited, state, monkeypatch)


def test_a_key_reads_a_names_prefix_entry_by_entry_without_its_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below a declared name's prefix whose trie node has a few children ("al": one,
    "p"), the key's visit reads those children's entries alone (formcast._subset's step)
    and leaves the prefix's row unbuilt; the entries are those the row holds once built,
    and the visit's row is index.py's."""
    import formcast.index

    vocabulary, automaton, visited, state, _ = _visited_first(
        VISIT_PATTERNS[0], b'{"', formcast.index._VISIT_FIRST_BYTE
    )
    native = automaton._native
    assert native is not None
    after_al = automaton.walk(b"al", state)  # reads the rows before it, not its own
    assert int(automaton.table[after_al][0]) == -1
    stepped = native.kept_step(after_al, ord("p"))
    assert stepped > 0 and native.kept_step(after_al, ord("q")) == -1  # no child there
    assert automaton.walk(b"p", after_al) == stepped  # its row, now built, agrees
    token = vocabulary.token_bytes.index
    assert visited.next_state(state, token(b"alps")) == automaton.walk(b"alps", state)
    _assert_as_index_py_makes_it(visited, state, monkeypatch)


def test_a_walk_elsewhere_builds_the_rows_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside a key's declared names, a walk below a node of a few children builds the
    row it reads (a state met at many small nodes, a bounded string's count, would compute
    most of its row entry by entry): the whole trie's walk of numbers and words reads no
    entry alone, and its row is index.py's."""
    import formcast.index

    _, automaton, visited, state, _ = _visited_first(
        VISIT_PATTERNS[3], b"", formcast.index._VISIT_SORTED
    )
    native = automaton._native
    assert native is not None
    reached = range(1, automaton.num_states)
    assert not any(native.kept_step(s, byte) >= 0 for s in reached for byte in range(256))
    after_ab = automaton.walk(b"ab", state)  # "abc" below it: one child
    assert int(automaton.table[after_ab][0]) != -1
    _assert_as_index_py_makes_it(visited, state, monkeypatch)


def test_a_row_on_its_template_steps_and_unpacks_without_the_c_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A string's large row made on its template (the template's codes and the tokens
    apart from them) answers every step, and its sorted arrays, as brute force does, with
    the C module on and then off (a binary search in numpy)."""
    import formcast.automaton.lazy as lazy_module
    import formcast.index

    if lazy_module.native_subset is None:
        pytest.skip("formcast._subset was not built")
    vocabulary = Vocabulary.from_token_bytes(list(dict.fromkeys(VISIT_TOKENS)), [0])
    index = TokenIndex(LazyAutomaton(VISIT_PATTERNS[1]), vocabulary)
    templated = [
        state
        for state in _reachable(index, 150)
        if index._row(state).overrides is not None and index._row(state).overrides[0]
    ]
    assert templated  # rows with tokens apart from their template (quotes, escapes)
    probes = range(vocabulary.size)
    for native in (formcast.index.native_walk, None):
        monkeypatch.setattr(formcast.index, "native_walk", native)
        for state in templated:
            expected = brute_force_row(index, state)
            assert [index.next_state(state, t) for t in probes] == [
                expected.get(t, -1) for t in probes
            ]
    for state in templated:
        row = index._row(state)
        assert dict(zip(row.token_ids.tolist(), row.next_states.tolist(), strict=True)) == (
            brute_force_row(index, state)
        )


# Characters a random string may take: all of them, or some (a range of Cyrillic, one
# left out, two that lead elsewhere than the others), and how many
_TEXT_CLASSES = [
    r'[^"\\]',
    r'[^"\\\x00-\x1f]',
    r'[^"\\é]',
    r"[a-z а-я]",
    r'(?:[^"\\]|é{2})',
    r'(?:[^"\\日]|日本)',
]
_TEXT_COUNTS = ["*", "+", "{0,3}", "{2,5}", "{1,2}", "?é*"]
_TEXT_TOKENS = [
    w.encode() for w in ["é", "aé", "日本", "本", "😀", "при", "вет", "ab", "a b", "Ж", " ж"]
] + [b"\xd0", b"\xe6\x97", b"a\xf0\x9f", b"\xbf", b"\xc3\x28"]


@pytest.mark.parametrize("seed", range(6))
def test_strings_of_random_characters_and_counts_visit_as_index_py_walks(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strings of characters drawn from full and partial classes, free, bounded or
    floored, over a vocabulary of text tokens of several scripts (whole, cut short, after
    a plain byte, malformed): every reachable state's row by the Visitor (taking the text
    tokens whole where its characters go alike) is index.py's row, mask and steps."""
    import formcast.automaton.lazy as lazy_module

    if lazy_module.native_subset is None:
        pytest.skip("formcast._subset was not built")
    rng = random.Random(seed)
    fields = ['"' + rng.choice(_TEXT_CLASSES) + rng.choice(_TEXT_COUNTS) + '"' for _ in range(3)]
    pattern = r"\[" + ",".join(fields) + r"\]"
    tokens = list(dict.fromkeys([*VISIT_TOKENS, *_TEXT_TOKENS]))
    vocabulary = Vocabulary.from_token_bytes(tokens, [0])
    visited = TokenIndex(LazyAutomaton(pattern), vocabulary)
    states = _reachable(visited, 120)
    for state in states:
        visited.row(state)  # by the Visitor, before index.py's ways take over
    monkeypatch.setattr(TokenIndex, "_visited", lambda self, state: None)
    reference = TokenIndex(visited.automaton, vocabulary)
    probes = range(vocabulary.size)
    for state in states:
        assert index_row(visited, state) == index_row(reference, state), pattern
        assert [visited.next_state(state, t) for t in probes] == [
            reference.next_state(state, t) for t in probes
        ], pattern


# Strings whose plain bytes part three ways: most along a chain (counted or looping), a
# few elsewhere (between a hostname's labels, a UUID's groups, an address's parts), the
# rest dead; and tokens holding those few bytes beside the chain's
_DIVERTED_PATTERNS = [
    r'"[A-Za-z0-9](?:[A-Za-z0-9-]{0,5}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,5}'
    r'[A-Za-z0-9])?)*"',
    r'"[0-9A-Za-z]{3}-[0-9A-Za-z]{2}-[0-9A-Za-z]{4}"',
    r'"[a-z0-9+_-]+@[a-z0-9-]+(?:\.[a-z]{2,4})+"',
    r'\["[a-z]+(?:[.:][a-z]+)*"(?:,"[A-Za-z]{2,9}(?:-[0-9]{1,3})?")*\]',
    # the chain's own bytes part ways after two (not the way there), then a free one
    r'"[a-z]{2}(?:[a-m][0-9]|[n-z]-)[a-z]*(?:\.[a-z]+)*"',
]
_DIVERTED_TOKENS = [
    w.encode()
    for w in ["ab-c", "x.y", "e.g", "-base", "a1", "Z9-", ".com", "f0e1", "web-", "mail@"]
] + [w.encode() for w in ["@x", "co.uk", "9-9", "abc.", "x--", "a:b", "Ab-12", '-1"', '.io"']]


def _reachable_rows_as_index_py(
    pattern: str, tokens: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> Vocabulary:
    """Every reachable state of ``pattern`` (over ``tokens``, each once) visited by the
    Visitor first, then its row, mask and steps compared with index.py's; the
    vocabulary."""
    import formcast.automaton.lazy as lazy_module

    if lazy_module.native_subset is None:
        pytest.skip("formcast._subset was not built")
    vocabulary = Vocabulary.from_token_bytes(list(dict.fromkeys(tokens)), [0])
    visited = TokenIndex(LazyAutomaton(pattern), vocabulary)
    states = _reachable(visited, 150)  # by the Visitor, before index.py's ways take over
    with monkeypatch.context() as patched:
        patched.setattr(TokenIndex, "_visited", lambda self, state: None)
        reference = TokenIndex(visited.automaton, vocabulary)
        probes = range(vocabulary.size)
        for state in states:
            assert index_row(visited, state) == index_row(reference, state), pattern
            assert np.array_equal(
                visited.packed_mask(state, vocabulary.size),
                reference.packed_mask(state, vocabulary.size),
            ), pattern
            assert [visited.next_state(state, t) for t in probes] == [
                reference.next_state(state, t) for t in probes
            ], pattern
    return vocabulary


@pytest.mark.parametrize("pattern", _DIVERTED_PATTERNS)
def test_strings_parting_at_a_few_bytes_visit_as_index_py_walks(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A string whose plain bytes lead along a chain but for a few that lead elsewhere
    (the Visitor's diverted way: a template, and a walk below the nodes where a token
    leaves the chain): every reachable state's row, mask and steps are index.py's, and
    the way was taken."""
    import formcast.index

    tokens = [*VISIT_TOKENS, *_DIVERTED_TOKENS]
    vocabulary = _reachable_rows_as_index_py(pattern, tokens, monkeypatch)
    assert formcast.index._visitor(vocabulary).ways["diverted"] > 0


@pytest.mark.parametrize(
    "pattern",
    [r'"[^"\\]{4}[a-z]*"', r'"[^"\\]{0,6}"', r'\["[^"\\]{3}(?:[^"\\]{2}|é)*"\]'],
    ids=["parting", "ending", "characters"],
)
def test_a_chain_past_its_counted_links_reads_the_plain_bytes_edges(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A string's chain past the links whose characters the text tokens count is read
    off the plain bytes' edges (formcast._subset's plain_step), its rows unbuilt: where
    the chain parts there, ends, or counts characters otherwise, every reachable
    state's row is index.py's."""
    _reachable_rows_as_index_py(pattern, [*VISIT_TOKENS, *_TEXT_TOKENS], monkeypatch)


@pytest.mark.parametrize(
    "pattern", [r'\["[a-z]{1,3}"(?:,[0-9]{1,2})*\]', r"(?:abc|alps|[0-9]{1,4})(?:,true)?"]
)
def test_a_cursors_first_mask_of_a_state_is_index_pys_with_eos_where_it_accepts(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first mask of each state asked by a cursor (the visit and the mask in one pass,
    TokenIndex._first_packed) is the mask index.py's ways give, EOS set exactly where the
    state accepts; states reached breadth-first, each one's mask asked before its row."""
    import formcast.automaton.lazy as lazy_module
    from formcast.cursor import Cursor

    if lazy_module.native_subset is None:
        pytest.skip("formcast._subset was not built")
    vocabulary = Vocabulary.from_token_bytes(list(dict.fromkeys(VISIT_TOKENS)), [0])
    size = vocabulary.size
    visited = TokenIndex(LazyAutomaton(pattern), vocabulary)
    masks: dict[int, np.ndarray] = {}
    frontier = [visited.initial_state]
    while frontier and len(masks) < 60:
        state = frontier.pop()
        if state in masks:
            continue
        masks[state] = Cursor(visited, state).bitmask(size).copy()
        frontier.extend(int(s) for s in visited.row(state)[1] if int(s) not in masks)
    assert any(visited.is_accepting(state) for state in masks)
    monkeypatch.setattr(TokenIndex, "_visited", lambda self, state: None)
    reference = TokenIndex(visited.automaton, vocabulary)
    for state, mask in masks.items():
        assert np.array_equal(mask, reference.packed_mask(state, size)), (pattern, state)
        assert bool(mask[0] & 1) == visited.is_accepting(state)  # EOS is token 0


def _reachable(index: TokenIndex, limit: int) -> list[int]:
    seen, frontier = {index.initial_state}, [index.initial_state]
    while frontier and len(seen) < limit:
        for following in index.row(frontier.pop())[1].tolist():
            if following not in seen:
                seen.add(following)
                frontier.append(following)
    return sorted(seen)[:limit]


@pytest.mark.parametrize(
    ("broken", "error", "message"),
    [
        (lambda t: t[:2], TypeError, "(codes, bits, kept)"),
        (lambda t: (t[0], t[1], -1), ValueError, "count in [0,"),
        (lambda t: (t[0], t[1], "2"), TypeError, "integer"),
    ],
)
def test_a_visit_refuses_a_template_without_its_count(
    monkeypatch: pytest.MonkeyPatch, broken: Any, error: type[Exception], message: str
) -> None:
    """A string's visit reads the template's bits set from what template_of gives, not
    counting them again: a template without that count, or with one outside the
    vocabulary, is refused with what was expected."""
    import formcast.automaton.lazy as lazy_module
    import formcast.index

    if lazy_module.native_subset is None:
        pytest.skip("formcast._subset was not built")
    vocabulary = Vocabulary.from_token_bytes(list(dict.fromkeys(VISIT_TOKENS)), [0])
    templates = formcast.index._plain_templates(vocabulary)
    visitor = formcast.index._new_visitor(vocabulary, lambda shape: broken(templates.of(shape)))
    monkeypatch.setitem(formcast.index._VISITORS, vocabulary, visitor)
    automaton = LazyAutomaton(VISIT_PATTERNS[1])
    index = TokenIndex(automaton, vocabulary)
    with pytest.raises(error, match=re.escape(message)):
        index.packed_mask(automaton.walk(b'"'), vocabulary.size)


def test_a_visit_inside_a_visit_gets_buffers_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A visit that starts while another holds the Visitor's buffers (another thread's,
    once the first calls back into Python for a template) walks in buffers of its own:
    both rows are those of index.py's ways. Here the first template the outer visits ask
    for visits the first states of another automaton from inside the callback."""
    import formcast.automaton.lazy as lazy_module
    import formcast.index

    if lazy_module.native_subset is None:
        pytest.skip("formcast._subset was not built")
    vocabulary = Vocabulary.from_token_bytes(list(dict.fromkeys(VISIT_TOKENS)), [0])
    templates = formcast.index._plain_templates(vocabulary)
    inner = TokenIndex(LazyAutomaton(VISIT_PATTERNS[0]), vocabulary)
    inner_states = [inner.initial_state]

    def template_of(shape: bytes) -> Any:
        if len(inner_states) == 1:  # the first call: visits nested in the outer one
            for state in inner_states[:1] + list(range(2, 12)):
                if state < inner.automaton.num_states:
                    inner._row(state)
                    inner_states.append(state)
        return templates.of(shape)

    visitor = formcast.index._new_visitor(vocabulary, template_of)
    monkeypatch.setitem(formcast.index._VISITORS, vocabulary, visitor)
    outer = TokenIndex(LazyAutomaton(VISIT_PATTERNS[1]), vocabulary)
    states = _reachable(outer, 40)
    assert len(inner_states) > 2, "no visit ran inside another"
    monkeypatch.setattr(TokenIndex, "_visited", lambda self, state: None)
    for index, visited in ((outer, states), (inner, inner_states[1:])):
        reference = TokenIndex(index.automaton, vocabulary)
        for state in visited:
            assert index_row(index, state) == index_row(reference, state)
            assert index_row(index, state) == brute_force_row(reference, state)


def test_the_plain_tokens_by_the_bytes_they_hold() -> None:
    """tokens_by_byte sets, for each byte, the bits of the tokens given holding it
    anywhere (their rows read off a vocabulary's byte matrix by id; the same as a set per
    token), and refuses ids and lengths out of range."""
    if native_walk is None:
        pytest.skip("formcast._trie_walk was not built")
    rng = np.random.default_rng(7)
    size, width = 300, 6
    ids = rng.permutation(size)[:200].astype(np.int32)
    lengths = rng.integers(1, width + 1, size=ids.size).astype(np.int32)
    matrix = rng.integers(32, 127, size=(size, width)).astype(np.uint8)
    matrix[ids[:, None], np.arange(width)[None, :]] *= np.arange(width) < lengths[:, None]
    out = np.zeros((256, (size + 31) // 32), dtype=np.uint32)
    native_walk.tokens_by_byte(ids, lengths, matrix, out)
    expected = np.zeros_like(out)
    for token, length in zip(ids.tolist(), lengths.tolist(), strict=True):
        for byte in set(matrix[token, :length].tolist()):
            expected[byte, token >> 5] |= np.uint32(1 << (token & 31))
    assert np.array_equal(out, expected)
    assert not out[0].any()  # padding is not read
    others = np.setdiff1d(np.arange(size), ids)
    held = np.unpackbits(out.view(np.uint8), bitorder="little").reshape(256, -1)[:, :size]
    assert not held[:, others].any()  # only the tokens given
    with pytest.raises(ValueError, match="ids below"):
        native_walk.tokens_by_byte(ids + size, lengths, matrix, out)
    with pytest.raises(ValueError, match="lengths up to"):
        native_walk.tokens_by_byte(ids, lengths + width, matrix, out)
    with pytest.raises(ValueError, match="a row of bytes a token"):
        native_walk.tokens_by_byte(ids, lengths, matrix.reshape(-1), out)


def test_a_visitor_refuses_bad_arguments() -> None:
    """A Visitor checks what it is given against what it reads: tries of three arrays,
    token ids below the size, plain_root nodes of the plain trie, text tokens cut within
    a character and of ids below the size, a live state of the table and a writable
    table; each otherwise raises instead of reading out of bounds."""
    import formcast.index

    assert native_walk is not None
    vocabulary = Vocabulary.from_token_bytes(VISIT_TOKENS, [0])
    plain_trie = vocabulary.plain_trie
    arguments: list[Any] = [
        vocabulary.token_trie.flat.walk_arrays,
        vocabulary.other_trie.flat.walk_arrays,
        plain_trie.flat.walk_arrays,
        plain_trie.flat.root_children,
        formcast.index._PLAIN_BYTES_U8,
        vocabulary.plain_bits,
        vocabulary.plain_bits_by_first,
        tuple(np.zeros(0, dtype=np.int32) for _ in range(4)),
        vocabulary.size,
        plain_trie.max_length + 1,
        32,
        3,
        None,
    ]
    native_walk.Visitor(*arguments)  # the arguments as index.py gives them
    changes: list[tuple[int, Any, str]] = [
        (0, vocabulary.token_trie.flat.walk_arrays[:2], "as 3 arrays"),
        (8, 3, "token ids below"),
        (3, np.full(256, plain_trie.flat.node_count, dtype=np.int32), "plain_root"),
        (6, vocabulary.plain_bits_by_first[:10], "bits_by_first"),
        (11, 0, "positive"),
        (7, (np.array([vocabulary.size], dtype=np.int32),) * 4, "token ids below"),
        (12, 3, "callable"),
    ]
    for position, value, message in changes:
        changed = list(arguments)
        changed[position] = value
        with pytest.raises((ValueError, TypeError), match=message):
            native_walk.Visitor(*changed)
    # the text tokens' arrays (TextTokens.arrays(), after the special trie)
    text = [vocabulary.special_trie.flat.walk_arrays, *vocabulary.text_tokens.arrays()]
    native_walk.Visitor(*arguments, None, tuple(text))
    text_changes: list[tuple[int, Any, str]] = [
        (4, np.full(text[3].size, 0x80, dtype=np.uint8), "lead byte"),  # no character's
        (5, np.full(text[3].size, 4, dtype=np.uint8), "of its bytes"),  # past a character
        (3, np.full(text[3].size, vocabulary.size, dtype=np.int32), "below the size"),
        (8, np.full(256, 10**6, dtype=np.int32), "root of its nodes"),
        (11, np.full(text[11].size, vocabulary.size, dtype=np.int32), "below the size"),
        (1, text[1][:1], "whole bits"),
    ]
    for position, value, message in text_changes:
        changed_text = list(text)
        changed_text[position] = value
        with pytest.raises(ValueError, match=message):
            native_walk.Visitor(*arguments, None, tuple(changed_text))
    with pytest.raises(TypeError, match="special trie"):
        native_walk.Visitor(*arguments, None, tuple(text[:5]))
    visitor = native_walk.Visitor(*arguments)
    automaton = LazyAutomaton(r'"[a-z]*"')
    builder = (automaton._native_nfa(), automaton._accepting, automaton._sets)
    if builder[0] is None:
        pytest.skip("formcast._subset was not built")
    for state in (DEAD, automaton.table.shape[0]):
        with pytest.raises(ValueError, match="live state"):
            visitor.visit(automaton.table, state, builder)
    frozen = automaton.table.copy()
    frozen.setflags(write=False)
    with pytest.raises((ValueError, BufferError)):
        visitor.visit(frozen, automaton.initial, builder)
