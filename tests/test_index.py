"""The token index and the cursor: exact agreement with a brute-force walk, masks, errors."""

from __future__ import annotations

import pickle
import random
import zlib
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from formcast.automaton import DEAD, LazyAutomaton
from formcast.errors import InvalidOptionError, TokenNotAllowedError
from formcast.index import TokenIndex
from formcast.vocabulary import Vocabulary
from support.index_oracle import brute_force_row, index_row

JSON_STRING = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
PATTERNS = [
    r"\{\"name\":" + JSON_STRING + r",\"age\":(0|[1-9][0-9]{0,2})\}",
    r"(yes|no|maybe)",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?",
    r"[a-zé日😀]{1,6}",
    r"\[(true|false)(,(true|false)){0,3}\]",
    # plain tokens by length (a counted string), and plain subtrees kept without a walk
    # (a free string reached after some name prefixes)
    r'"[^"\\\x00-\x1f]{2,5}"!',
    r'"(name|age[0-9]|[^"\\\x00-\x1f]*)",',
]

# A hand-built vocabulary: single bytes, multi-byte tokens, UTF-8 fragments, an EOS.
HAND_TOKENS = [
    b"",
    *[bytes([b]) for b in range(256)],
    b'{"',
    b'":',
    b'","',
    b"name",
    b"age",
    b"yes",
    b"no",
    b"true",
    b"false",
    b",",
    b"12",
    b"\xc3",
    b"\xa9",
    "é".encode(),
    "日".encode(),
    "😀".encode()[:2],
    "😀".encode()[2:],
    b'"}',
    b".",
]


@pytest.fixture(scope="module")
def hand_vocabulary() -> Vocabulary:
    return Vocabulary.from_token_bytes(HAND_TOKENS, [0])


def _reachable_states(index: TokenIndex, limit: int) -> list[int]:
    seen, frontier = {index.initial_state}, [index.initial_state]
    while frontier and len(seen) < limit:
        state = frontier.pop()
        for nxt in index.row(state)[1].tolist():
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return sorted(seen)[:limit]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_rows_match_brute_force_on_hand_vocabulary(
    pattern: str, hand_vocabulary: Vocabulary, trie_walk: str
) -> None:
    index = TokenIndex(LazyAutomaton(pattern), hand_vocabulary)
    for state in _reachable_states(index, 200):
        assert index_row(index, state) == brute_force_row(index, state)


@pytest.mark.parametrize("pattern", [*PATTERNS[:2], *PATTERNS[-2:]])
def test_rows_match_brute_force_on_real_vocabulary(
    pattern: str, vocabulary: Vocabulary, trie_walk: str
) -> None:
    index = TokenIndex(LazyAutomaton(pattern), vocabulary)
    states = _reachable_states(index, 12)
    for state in states:
        assert index_row(index, state) == brute_force_row(index, state)


@pytest.mark.parametrize(
    "text",
    [
        '{"name":"José Ñúñez","age":41}',
        '{"name":"日本 😀","age":7}',
        '{"name":"a\\"b\\u00e9","age":0}',
    ],
)
def test_real_tokenization_walks_through_cursor(
    text: str, vocabulary: Vocabulary, tokenizer: object
) -> None:
    index = TokenIndex(LazyAutomaton(PATTERNS[0]), vocabulary)
    cursor = index.cursor()
    for token in tokenizer.encode(text, add_special_tokens=False):  # type: ignore[attr-defined]
        assert token in cursor.allowed_token_ids()
        cursor.advance(token)
    assert cursor.is_accepting()
    eos = next(iter(vocabulary.eos_token_ids))
    assert eos in cursor.allowed_token_ids()
    cursor.advance(eos)
    assert cursor.is_finished and cursor.allowed_token_ids().size == 0


def test_forbidden_token_and_early_eos_raise(hand_vocabulary: Vocabulary) -> None:
    index = TokenIndex(LazyAutomaton("(yes|no)"), hand_vocabulary)
    cursor = index.cursor()
    with pytest.raises(TokenNotAllowedError, match="expected a token allowed"):
        cursor.advance(HAND_TOKENS.index(b"true"))
    with pytest.raises(TokenNotAllowedError, match="EOS"):
        cursor.advance(0)
    cursor.advance(HAND_TOKENS.index(b"yes"))
    cursor.advance(0)
    with pytest.raises(TokenNotAllowedError, match="no more tokens"):
        cursor.advance(HAND_TOKENS.index(b"no"))


def test_mask_has_logits_width_and_bans_padding(hand_vocabulary: Vocabulary) -> None:
    index = TokenIndex(LazyAutomaton("[a-z]+"), hand_vocabulary)
    cursor = index.cursor()
    cursor.advance(HAND_TOKENS.index(b"no"))
    width = len(HAND_TOKENS) + 40
    mask = cursor.mask(width)
    assert mask.dtype == torch.bool and mask.shape == (width,)
    assert not mask[len(HAND_TOKENS) :].any()
    assert set(torch.nonzero(mask).flatten().tolist()) == set(cursor.allowed_token_ids().tolist())
    assert mask[0]  # EOS allowed: "no" is complete


def test_bitmask_agrees_with_mask(hand_vocabulary: Vocabulary) -> None:
    index = TokenIndex(LazyAutomaton(PATTERNS[0]), hand_vocabulary)
    cursor = index.cursor()
    width = 300
    buffer = np.full((width + 31) // 32, 0xFFFFFFFF, dtype=np.uint32)
    packed = cursor.bitmask(width, out=buffer)
    assert packed is buffer
    unpacked = np.unpackbits(packed.view(np.uint8), bitorder="little")[:width].astype(bool)
    assert np.array_equal(unpacked, cursor.mask(width).numpy())
    with pytest.raises(InvalidOptionError, match="uint32 buffer"):
        cursor.bitmask(width, out=np.zeros(3, dtype=np.uint32))


def test_width_smaller_than_vocabulary_is_rejected(hand_vocabulary: Vocabulary) -> None:
    cursor = TokenIndex(LazyAutomaton("a"), hand_vocabulary).cursor()
    with pytest.raises(InvalidOptionError, match="at least the vocabulary size"):
        cursor.mask(10)


def test_copy_is_independent(hand_vocabulary: Vocabulary) -> None:
    cursor = TokenIndex(LazyAutomaton("(yes|no)"), hand_vocabulary).cursor()
    twin = cursor.copy()
    cursor.advance(HAND_TOKENS.index(b"yes"))
    assert twin.state != cursor.state
    assert HAND_TOKENS.index(b"no") in twin.allowed_token_ids()


def test_index_pickles_with_its_rows(hand_vocabulary: Vocabulary) -> None:
    index = TokenIndex(LazyAutomaton(PATTERNS[0]), hand_vocabulary)
    index.row(index.initial_state)
    copy = pickle.loads(pickle.dumps(index))
    assert copy.computed_rows == 1
    # State ids are assigned lazily per automaton, so compare behaviour along token paths.
    rng = random.Random(0)
    for _ in range(20):
        original, twin = index.cursor(), copy.cursor()
        while not original.is_accepting():
            allowed = original.allowed_token_ids()
            assert np.array_equal(allowed, twin.allowed_token_ids())
            token = int(rng.choice(allowed.tolist()))
            original.advance(token)
            twin.advance(token)
        assert twin.is_accepting()


def test_forced_bytes_and_distances(hand_vocabulary: Vocabulary) -> None:
    index = TokenIndex(LazyAutomaton(r'\{"name":"[a-z]{2,4}"\}'), hand_vocabulary)
    cursor = index.cursor()
    assert cursor.forced_bytes() == b'{"name":"'
    assert cursor.min_tokens_to_accept() == len('{"name":"ab"}')
    cursor.advance_bytes(b'{"name":"ab')
    assert cursor.min_tokens_to_accept() == 2


@pytest.mark.parametrize("seed", range(20))
def test_budget_rows_always_leave_a_way_to_finish(seed: int, hand_vocabulary: Vocabulary) -> None:
    rng = random.Random(seed)
    index = TokenIndex(LazyAutomaton(PATTERNS[0]), hand_vocabulary)
    budget = index.min_tokens_to_accept(index.initial_state) + rng.randrange(0, 8)
    cursor = index.cursor()
    for used in range(budget):
        allowed = cursor.allowed_token_ids(tokens_left=budget - used)
        assert allowed.size, "the budget-filtered row must never be empty"
        token = int(rng.choice(allowed.tolist()))
        cursor.advance(token)
        if cursor.is_finished:
            break
    assert cursor.is_finished or cursor.is_accepting()


@pytest.mark.parametrize("count", [0, 1, 12, 40, 5000])
def test_packed_bits_sets_exactly_the_ids(count: int, trie_walk: str) -> None:
    """Every way of packing (in C; else bits set one by one for a handful of ids, a
    bincount for a few, packbits for many) gives the bits of the ids, the high bit of a
    word and ids sharing a word included."""
    from formcast.index import _packed_bits

    rng = np.random.default_rng(count)
    words = 1536
    ids = np.sort(rng.choice(words * 32, size=count, replace=False)).astype(np.int32)
    if count:
        ids[-1] = words * 32 - 1  # bit 31 of the last word
        ids[0] = 32 * int(ids[min(1, count - 1)] // 32)  # bit 0 of the second id's word
        ids = np.unique(ids)
    packed = _packed_bits(ids, words)
    assert packed.dtype == np.uint32 and packed.shape == (words,)
    expected = np.zeros(words * 32, dtype=bool)
    expected[ids] = True
    assert np.array_equal(np.unpackbits(packed.view(np.uint8), bitorder="little") == 1, expected)


@pytest.mark.parametrize("count", [0, 1, 40, 300, 2_000, 16_000, 20_000])
def test_a_row_sorted_or_scattered_by_token_leaves_out_dead_ends(
    count: int, trie_walk: str
) -> None:
    """A short row (sorted in C, or argsorted), a longer one (sorted as packed keys, up
    to a third of the vocabulary) and one scattered over the vocabulary give the same
    pairs: ascending token ids, each with its own state, the dead ones left out; states
    past 2**16 and the vocabulary's last id included."""
    from formcast.index import _packed_bits, _sorted_by_token

    size = 49_152
    rng = np.random.default_rng(count)
    ids = rng.choice(size - 1, size=count, replace=False).astype(np.int32)
    states = rng.integers(0, 200_000, size=count).astype(np.int32)
    if count:
        ids[0], states[0] = size - 1, 2**31 - 1
    trie = SimpleNamespace(repeats=np.zeros(0, dtype=np.int32), repeated=np.zeros(0, np.int32))
    pieces = max(1, count // 3)
    row = _sorted_by_token(
        [ids[:pieces], ids[pieces:]], [states[:pieces], states[pieces:]], size, trie
    )
    found, reached, bits = row.token_ids, row.next_states, row.bits
    alive = states != DEAD
    order = np.argsort(ids[alive])
    assert found.dtype == reached.dtype == np.int32
    assert found.tolist() == ids[alive][order].tolist()
    assert reached.tolist() == states[alive][order].tolist()
    if bits is not None:  # the C scatter's bitmask: exactly the row's tokens
        assert np.array_equal(bits, _packed_bits(found, (size + 31) // 32))
    if row.dense is not None:  # a large row's table (int32 here: its states are many)
        assert row.palette is None
        probes = [*ids[:50].tolist(), *range(0, size, 97)]
        table = dict(zip(found.tolist(), reached.tolist(), strict=True))
        assert [row.next_state(t) for t in probes] == [table.get(t, DEAD) for t in probes]


@pytest.mark.parametrize("count", [0, 40, 20_000])
def test_a_scattered_row_gives_repeated_tokens_their_originals_state(
    count: int, trie_walk: str
) -> None:
    """Tokens repeating another's bytes (absent from the walk) take the state of the token
    they repeat, dead or not, in the C scatter as in the numpy one."""
    from formcast.index import _sorted_by_token

    size = 49_152
    rng = np.random.default_rng(count)
    ids = rng.choice(size // 2, size=count, replace=False).astype(np.int32)
    states = rng.integers(0, 50, size=count).astype(np.int32)
    repeats = np.arange(size // 2, size // 2 + 300, dtype=np.int32)
    repeated = rng.integers(0, size // 2, size=300).astype(np.int32)
    trie = SimpleNamespace(repeats=repeats, repeated=repeated)
    row = _sorted_by_token([ids], [states], size, trie)
    found, reached = row.token_ids, row.next_states
    expected = np.zeros(size, dtype=np.int32)
    expected[ids] = states
    expected[repeats] = expected[repeated]
    assert found.tolist() == np.flatnonzero(expected).tolist()
    assert reached.tolist() == expected[found].tolist()


@pytest.mark.parametrize("count", [0, 30, 5_000])
def test_a_row_with_plain_tokens_reads_their_states_off_the_chain(
    count: int, trie_walk: str
) -> None:
    """Plain tokens take the state their length reaches on the chain (a DEAD link leaves
    them out), beside the walked tokens, in the C scatter as in numpy; the C scatter's
    bitmask holds exactly the row's tokens."""
    from formcast.index import _packed_bits, _sorted_by_token

    size = 49_152
    rng = np.random.default_rng(count)
    chosen = rng.permutation(size)
    ids = np.sort(chosen[:count]).astype(np.int32)
    states = rng.integers(1, 50, size=count).astype(np.int32)
    plain_ids = np.sort(chosen[count : count + 20_000]).astype(np.int32)
    lengths = rng.integers(1, 6, size=plain_ids.size).astype(np.int32)
    chain = np.array([9, 11, 12, 13, 14, DEAD], dtype=np.int32)
    trie = SimpleNamespace(repeats=np.zeros(0, np.int32), repeated=np.zeros(0, np.int32))
    row = _sorted_by_token([ids], [states], size, trie, (plain_ids, lengths, chain))
    found, reached, bits = row.token_ids, row.next_states, row.bits
    expected = np.zeros(size, dtype=np.int32)
    expected[ids] = states
    expected[plain_ids] = chain[lengths]
    assert found.tolist() == np.flatnonzero(expected).tolist()
    assert reached.tolist() == expected[found].tolist()
    assert (bits is not None) == (trie_walk == "C")
    if bits is not None:
        assert np.array_equal(bits, _packed_bits(found, (size + 31) // 32))
    if count == 5_000:  # large: one byte a token through a palette of its few states
        assert trie_walk != "C" or (row.dense is not None and row.palette is not None)
    if row.dense is not None:
        probes = range(0, size, 3)
        assert [row.next_state(t) for t in probes] == expected[probes].tolist()


@pytest.mark.parametrize("seed", range(6))
def test_plain_target_is_the_one_state_of_every_plain_byte(seed: int) -> None:
    """The quick reads of three plain bytes never decide wrongly: rows equal on them
    but parted elsewhere, rows parted only on a quote or a backslash (not plain), and
    rows whose plain bytes all agree."""
    from formcast.index import _PARTED, _plain_target
    from formcast.vocabulary import PLAIN_BYTES

    rng = np.random.default_rng(seed)
    row = np.full(256, 7, dtype=np.int32)
    row[rng.integers(0, 256, 5)] = rng.integers(0, 9, 5).astype(np.int32)
    row[[0x22, 0x5C]] = rng.integers(0, 9, 2).astype(np.int32)
    targets = row[PLAIN_BYTES]
    expected = int(targets[0]) if bool((targets == targets[0]).all()) else _PARTED
    assert _plain_target(row) == expected
    row[PLAIN_BYTES] = 3
    assert _plain_target(row) == 3
    row[PLAIN_BYTES[seed * 13 % PLAIN_BYTES.size]] = 4
    assert _plain_target(row) == _PARTED


def test_the_dead_state_allows_nothing(hand_vocabulary: Vocabulary, trie_walk: str) -> None:
    index = TokenIndex(LazyAutomaton("ab|ba"), hand_vocabulary)
    ids, following = index.row(DEAD)
    assert ids.size == 0 and following.size == 0
    assert not index.packed_mask(DEAD, hand_vocabulary.size).any()


@pytest.mark.parametrize("pattern", [r'"[^"\\]*"', r'\{"a":"(?:[^"\\]|\\.)*"\}', r"[a-z ]{0,30}x"])
def test_a_dense_row_answers_masks_and_steps_as_brute_force_does(
    pattern: str, vocabulary: Vocabulary, trie_walk: str
) -> None:
    """Rows of most of the vocabulary (inside a string) are kept as a table over the
    vocabulary by the C scatter: their next_state of every token, their mask and their
    sorted row, derived later, agree with brute force; the numpy walk keeps sorted rows."""
    from formcast.index import _packed_bits

    index = TokenIndex(LazyAutomaton(pattern), vocabulary)
    state = index.walk_bytes(index.initial_state, b'{"a":"' if "a" in pattern else b'"')
    if state < 0:
        state = index.walk_bytes(index.initial_state, b"ab")
    expected = brute_force_row(index, state)
    words = (vocabulary.size + 31) // 32
    mask = index.packed_mask(state, vocabulary.size)  # first: the row is made dense here
    dense = index._rows[state].dense
    assert (dense is not None) == (trie_walk == "C")
    assert len(expected) * 3 > vocabulary.size
    for token in [*range(0, vocabulary.size, 7), vocabulary.size, vocabulary.size + 5, 2**40]:
        assert index.next_state(state, token) == expected.get(token, -1), token
    ids = np.fromiter(sorted(expected), dtype=np.int32)
    if index.is_accepting(state):
        ids = np.union1d(ids, sorted(vocabulary.eos_token_ids)).astype(np.int32)
    assert np.array_equal(mask, _packed_bits(ids, words))
    assert index_row(index, state) == expected


def _chain_of(kind: str, links: int, rng: np.random.Generator) -> np.ndarray:
    """A chain of plain bytes' states (``chain[0]``: the row's own state) of one kind."""
    fresh = rng.permutation(np.arange(100, 100 + 4 * links)).astype(np.int32)
    chain = np.zeros(links, dtype=np.int32)
    chain[0] = 7
    if kind == "loop":  # a free string
        chain[1:] = fresh[0]
    elif kind == "counted":  # a bounded string far from its bound: one state a length
        chain[1:] = fresh[: links - 1]
    elif kind == "ending":  # near its bound: DEAD past the characters left
        left = int(rng.integers(1, links - 1))
        chain[1 : left + 1] = fresh[:left]
    elif kind == "floor":  # a minLength: one state a length, then one
        floor = int(rng.integers(1, links - 1))
        chain[1 : floor + 1] = fresh[:floor]
        chain[floor + 1 :] = fresh[floor]
    elif kind == "cycle":  # an even-length string: two states in turn
        chain[1::2], chain[2::2] = fresh[0], fresh[1]
    elif kind == "random":  # any states, DEAD among them (no grammar makes it)
        chain[1:] = rng.choice([DEAD, *fresh[:6].tolist()], size=links - 1)
    elif kind == "first dead":
        pass
    return chain


@pytest.mark.parametrize(
    "kind", ["loop", "counted", "ending", "floor", "cycle", "random", "first dead"]
)
@pytest.mark.parametrize("walked", ["none", "few", "chain states", "many", "plain too"])
def test_a_row_from_a_plain_template_is_the_scattered_row(
    kind: str, walked: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row with plain tokens made from the template of its chain's shape (C
    ``scatter_on_template``) is the row the scatter makes (C ``scatter_pairs``) and the
    numpy one: the same tokens and states, the same bits, the same table kind (codes
    and a palette up to 255 states, int32 past them: there the template gives way), and
    the same state a token."""
    import formcast.index
    from formcast.index import _packed_bits, _PlainTemplates, _sorted_by_token

    if formcast.index.native_walk is None:
        pytest.skip("formcast._trie_walk was not built")
    size, links = 20_000, 13
    rng = np.random.default_rng(zlib.crc32(f"{kind} {walked}".encode()))
    chosen = rng.permutation(size).astype(np.int32)
    plain_ids = np.sort(chosen[:14_000])
    lengths = rng.integers(1, links, size=plain_ids.size).astype(np.int32)
    token_bytes = np.zeros((size, links), dtype=np.uint8)  # not read here
    templates = _PlainTemplates(plain_ids, lengths, size, token_bytes)
    chain = _chain_of(kind, links, rng)
    others = np.sort(chosen[14_000:17_000])
    count = {"none": 0, "few": 40, "chain states": 3_000, "many": 3_000, "plain too": 400}
    ids = others[rng.permutation(others.size)[: count[walked]]]
    states = rng.integers(1, 30, size=ids.size).astype(np.int32)
    states[::7] = DEAD
    if walked == "chain states":
        states[1::2] = rng.choice(chain, size=states[1::2].size)
    if walked == "many":  # 300 states of their own: past what a byte codes
        states[: 3 * 300 : 3] = np.arange(1_000, 1_300, dtype=np.int32)
    if walked == "plain too":  # walked tokens that are plain (no real trie has them)
        ids[::2] = plain_ids[rng.permutation(plain_ids.size)[: ids[::2].size]]
    repeats = chosen[17_000:17_300]
    repeated = np.concatenate([chosen[:150], others[-150:]])  # plain tokens and others
    trie = SimpleNamespace(repeats=repeats, repeated=repeated)
    plain = (templates.ids, templates.lengths, chain)

    expected = np.zeros(size, dtype=np.int32)
    expected[ids] = states
    expected[plain_ids] = chain[lengths]  # a plain token keeps its chain state
    expected[repeats] = expected[repeated]
    row = _sorted_by_token([ids], [states], size, trie, plain, templates)
    scattered = _sorted_by_token([ids], [states], size, trie, plain)
    assert row.token_ids.tolist() == np.flatnonzero(expected).tolist()
    assert row.next_states.tolist() == expected[row.token_ids].tolist()
    assert row.bits is not None and scattered.bits is not None
    assert np.array_equal(row.bits, scattered.bits)
    assert np.array_equal(row.bits, _packed_bits(row.token_ids, (size + 31) // 32))
    assert (row.dense is None) == (scattered.dense is None)
    assert (row.palette is None) == (scattered.palette is None)
    if row.dense is not None:
        assert scattered.dense is not None and row.dense.dtype == scattered.dense.dtype
        if walked == "many":  # past 255 states the template gives way to the scatter
            assert row.dense.dtype == np.int32
        assert [row.next_state(t) for t in range(size)] == expected.tolist()
    if walked != "plain too":  # numpy's scatter leaves a token written twice undefined
        monkeypatch.setattr(formcast.index, "native_walk", None)
        reference = _sorted_by_token([ids], [states], size, trie, plain)
        assert np.array_equal(reference.token_ids, row.token_ids)
        assert np.array_equal(reference.next_states, row.next_states)


def test_plain_templates_are_kept_per_shape_for_the_last_shapes_used() -> None:
    """Rows of one chain shape share its template, whatever their states; the last
    ``_TEMPLATES_KEPT`` shapes are kept; a vocabulary's templates go with it."""
    import gc

    import formcast.index
    from formcast.index import _TEMPLATES_KEPT, _chain_shape, _plain_templates

    if formcast.index.native_walk is None:
        pytest.skip("formcast._trie_walk was not built")
    links = _TEMPLATES_KEPT + 8
    vocabulary = Vocabulary.from_token_bytes([b"", *(b"a" * k for k in range(1, links))], [0])
    templates = _plain_templates(vocabulary)
    assert _plain_templates(vocabulary) is templates
    first = _chain_shape(np.array([5, 6, 7, *[DEAD] * (links - 3)], dtype=np.int32))
    assert first is not None
    assert first == _chain_shape(np.array([9, 3, 4, *[DEAD] * (links - 3)], dtype=np.int32))
    template = templates.of(first)
    assert templates.of(first) is template and not template[0].flags.writeable
    assert template[0][1:].tolist() == [1, 2, *[0] * (links - 3)]  # token k: k bytes
    assert template[2] == 2 == int(np.bitwise_count(template[1]).sum())  # its bits set, kept
    for left in range(3, _TEMPLATES_KEPT + 8):
        chain = np.zeros(links, dtype=np.int32)
        chain[1 : left + 1] = np.arange(10, left + 10)
        shape = _chain_shape(chain)
        assert shape is not None
        templates.of(shape)
    assert len(templates._kept) == _TEMPLATES_KEPT
    assert first not in templates._kept and templates.of(first) is not template
    alive = len(formcast.index._TEMPLATES)
    del vocabulary, templates
    gc.collect()
    assert len(formcast.index._TEMPLATES) == alive - 1


@pytest.mark.parametrize(
    "chain",
    [
        [4, 5, 5, 5, 5],
        [5, 5, 5, 5, 5],
        [4, DEAD, DEAD, DEAD, DEAD],
        [4, 5, 6, 7, 8],
        [4, 5, 6, DEAD, DEAD],
        [4, 5, 6, 6, 6],
        [4, 5, 6, 6, DEAD],
        [4, 5, 6, 5, 6],
        [4, 5, DEAD, 5, DEAD],
        [4, 5, 4, 5, 4],
        [4],
    ],
)
def test_a_chain_shape_codes_its_states_by_first_appearance(chain: list[int]) -> None:
    from formcast.index import _chain_shape

    codes: dict[int, int] = {}
    expected = [0] + [codes.setdefault(s, len(codes) + 1) if s else 0 for s in chain[1:]]
    assert _chain_shape(np.array(chain, dtype=np.int32)) == bytes(expected)
    assert _chain_shape(np.array([4, *range(10, 300)], dtype=np.int32)) is None  # 290 states


STRING_SCHEMAS = {
    "free": {"type": "string"},
    "bounded": {"type": "string", "maxLength": 300},
    "floored": {"type": "string", "minLength": 3, "maxLength": 90},
    "short": {"type": "string", "maxLength": 4},
}


@pytest.mark.parametrize("name", sorted(STRING_SCHEMAS))
def test_string_rows_from_templates_are_the_numpy_rows(
    name: str, vocabulary: Vocabulary, tokenizer: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Along instances of real string schemas (a free string, one counted to its bound,
    where each length leads to its own state and lengths past the bound to DEAD, and a
    floor), every row the C visit makes from plain templates is the numpy walk's row."""
    import json

    import formcast.index
    from formcast.compiler import compile as compile_schema

    if formcast.index.native_walk is None:
        pytest.skip("formcast._trie_walk was not built")
    templates = formcast.index._plain_templates(vocabulary)
    templates._kept.clear()  # the shapes this schema's rows take, from here on
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": STRING_SCHEMAS[name]}}
    index = compile_schema(schema, vocabulary, mode="specification", cache=False)
    rng = random.Random(name)
    bound = STRING_SCHEMAS[name].get("maxLength", 120)
    states = set()
    for length in {3, bound - 2, bound}:
        text = "".join(rng.choice("abc de fghij klmno 12 xyz") for _ in range(length))
        instance = json.dumps({"a": text[:20], "b": text}, separators=(",", ":"))
        cursor = index.cursor()
        for token in tokenizer.encode(instance, add_special_tokens=False):  # type: ignore[attr-defined]
            states.add(cursor.state)
            cursor.bitmask(vocabulary.size)
            cursor.advance(token)
        assert cursor.is_accepting()
    assert templates._kept  # rows were made from templates (in C or by _templated)
    monkeypatch.setattr(formcast.index, "native_walk", None)
    reference = TokenIndex(index.automaton, vocabulary)
    probes = range(0, vocabulary.size, 5)
    for state in sorted(states):
        ids, following = index.row(state)
        expected_ids, expected_following = reference.row(state)
        assert np.array_equal(ids, expected_ids) and np.array_equal(following, expected_following)
        assert [index.next_state(state, t) for t in probes] == [
            reference.next_state(state, t) for t in probes
        ]


KEY_SCHEMAS = {
    "declared and free keys": {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
            },
            "mode": {"type": "integer"},
        },
    },
    "one declared key": {"type": "object", "properties": {"zeta": {"type": "boolean"}}},
    "shared initials, one required": {
        "type": "object",
        "properties": {"alpha": {"type": "integer"}, "alps": {}, "beta": {"type": "null"}},
        "required": ["alpha"],
        "additionalProperties": {"type": "integer"},
    },
}
KEY_INSTANCES = [
    {"apiVersion": "v1", "kind": "Job", "metadata": {"name": "x", "nsx": 1}, "mode": 3},
    {"api": 1, "kindness": [1], "é\\u00e9 key": None, "metadatum": {"a": 2}, "zeta": True},
    {"mod": 0, "m": {}, "": "", 'a"b': 2, "zz": 3},
    {"alpha": 1, "alps": [2], "alp": 3, "beta": None, "bet": 4},
]


@pytest.mark.parametrize("name", sorted(KEY_SCHEMAS))
def test_key_rows_read_by_first_byte_are_the_numpy_rows(
    name: str, vocabulary: Vocabulary, tokenizer: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object's key states (declared names and undeclared keys) read their plain
    tokens off the first byte, without a table over the vocabulary: before anything lays
    the table out, every step and the mask are the numpy walk's; then the row's arrays
    are too. The instances hold declared names, their prefixes and extensions, escapes,
    multi-byte characters and empty keys."""
    import json

    import formcast.index
    from formcast.compiler import compile as compile_schema

    if formcast.index.native_walk is None:
        pytest.skip("formcast._trie_walk was not built")
    schema = KEY_SCHEMAS[name]
    index = compile_schema(schema, vocabulary, mode="specification", cache=False)
    states: set[int] = set()
    for instance in KEY_INSTANCES:
        text = json.dumps(instance, separators=(",", ":"), ensure_ascii=False)
        cursor = index.cursor()
        for token in tokenizer.encode(text, add_special_tokens=False):  # type: ignore[attr-defined]
            if token not in cursor.allowed_token_ids():
                break  # a key or value the schema refuses: the states so far count
            states.add(cursor.state)
            cursor.advance(token)
    fresh = TokenIndex(index.automaton, vocabulary)  # no row computed yet
    looked_up = [state for state in sorted(states) if fresh._row(state).lookup is not None]
    assert looked_up, "no key row was read by first byte"
    monkeypatch.setattr(formcast.index, "native_walk", None)
    reference = TokenIndex(index.automaton, vocabulary)
    rng = np.random.default_rng(len(name))
    walk_ordered = []  # the walked pairs come in the walk's order, then steps order them
    for state in looked_up:
        expected_ids, expected_following = reference.row(state)
        lookup = fresh._row(state).lookup
        assert lookup is not None
        walk_ordered.append(bool((np.diff(lookup.pairs[0]) > 0).all()))
        probes = np.concatenate([rng.integers(0, vocabulary.size, 400), expected_ids[::50]])
        for token in [*probes.tolist(), vocabulary.size, 2**40]:
            assert fresh.next_state(state, token) == reference.next_state(state, token), token
        assert (np.diff(lookup.pairs[0]) > 0).all()  # ordered once the scans were used up
        assert np.array_equal(
            fresh.packed_mask(state, vocabulary.size), reference.packed_mask(state, vocabulary.size)
        )
        assert fresh._row(state).dense is None  # nothing laid the table out so far
        ids, following = fresh.row(state)
        assert np.array_equal(ids, expected_ids) and np.array_equal(following, expected_following)
    assert not all(walk_ordered)


@pytest.mark.parametrize("scans_left", [8, 1, 0, -1, -5])
def test_a_first_byte_lookup_reads_unordered_pairs_whatever_its_scan_count(
    scans_left: int, vocabulary: Vocabulary
) -> None:
    """Walked pairs in the walk's order are scanned, then ordered once: every step is
    right whatever the count of scans left says, even one that threads racing on it
    drove past zero without sorting."""
    from formcast.index import _FirstByteLookup

    ids = np.array([900, 12, 4_000, 7, 250, 31, 77, 3_000, 5, 60], dtype=np.int32)
    states = np.arange(2, 2 + ids.size, dtype=np.int32)
    by_first = np.zeros(256, dtype=np.uint8)  # no plain token read off its first byte
    palette = np.array([DEAD], dtype=np.int32)
    lookup = _FirstByteLookup(vocabulary, by_first, palette, ids.copy(), states.copy())
    lookup._scans_left = scans_left
    expected = dict(zip(ids.tolist(), states.tolist(), strict=True))
    for token in [*ids.tolist(), 13, 4_001, *ids.tolist()[::-1]]:
        assert lookup.state_of(token) == expected.get(token, DEAD), token
    assert lookup.pairs[2] and (np.diff(lookup.pairs[0]) > 0).all()


_BOUNDED_STRING = r'"(?:[^\x00-\x1f",\\]|\\n|\\t|\\u000b|\\\\){1,255}"'


def test_a_walk_short_of_room_computes_each_row_about_once(
    vocabulary: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first visit that needs more new states than the table has room for builds rows
    until the room runs out, then leaves the rest pending for the next round: the rows it
    computes and drops are at most one a round, not one a node left pending (thousands,
    each a subset construction, in a bounded JSON string). The row is each token walked
    byte by byte."""
    import formcast.automaton.lazy as lazy_module
    import formcast.automaton.table as table_module
    import formcast.index

    if formcast.index.native_walk is None or lazy_module.native_subset is None:
        pytest.skip("the C walk or the C subset construction was not built")
    monkeypatch.setattr(table_module, "VISIT_ROOM_MAPPED", table_module.BUILD_ROOM)
    automaton = LazyAutomaton(_BOUNDED_STRING)
    start = automaton.walk(b'"')
    index = TokenIndex(automaton, vocabulary)
    row = index_row(index, start)
    native = automaton._native_nfa()
    built = int((automaton.table[: automaton.num_states, 0] >= 0).sum())
    assert len(row) > 40_000 and built > 60  # past the first round's room
    rounds = 16  # each round at least doubles the room: far fewer than this
    assert built <= native.rows_computed <= built + rounds
    assert row == brute_force_row(index, start)
    assert automaton._visit_room > table_module.BUILD_ROOM  # the room it needed, kept


def test_a_key_visit_short_of_room_steps_on_in_the_next_round(
    vocabulary: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object key's first visit offered room for a single new state runs short, among
    the entries it reads alone below its names' prefixes: the node is left pending, whole,
    the next round walks on with more room, and the row it ends with is each token walked
    byte by byte."""
    import formcast.automaton.lazy as lazy_module
    import formcast.automaton.table as table_module
    import formcast.index

    if formcast.index.native_walk is None or lazy_module.native_subset is None:
        pytest.skip("the C walk or the C subset construction was not built")
    monkeypatch.setattr(table_module, "VISIT_ROOM_MAPPED", 1)
    names = (
        "alpha|alps|name|namespace|description|identifier|timeout|created|updated|version"
        "|status|address|country|enabled|retries|label|document|position|interval|region"
        "|subscription|category|attachment|permission|reference"
    )
    automaton = LazyAutomaton(r'\{(?:"(?:' + names + r'|[^"\\]*)":[0-9]{1,3},?)*\}')
    start = automaton.walk(b'{"')
    automaton._visit_room = 1
    calls = {"count": 0}
    visit = formcast.index._visitor(vocabulary).visit

    def counted(*arguments: Any) -> tuple[Any, ...]:
        calls["count"] += 1
        found: tuple[Any, ...] = visit(*arguments)
        return found

    found = automaton.visit_building(counted, start)
    assert found is not None and found[0] == formcast.index._VISIT_FIRST_BYTE
    assert calls["count"] >= 2
    after_des = automaton.walk(b"des", start)
    assert automaton._native.kept_step(after_des, ord("c")) > 0  # read alone
    index = TokenIndex(automaton, vocabulary)
    assert index_row(index, start) == brute_force_row(index, start)


def test_a_visit_offered_the_room_it_needs_walks_once(
    vocabulary: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table in a reservation of its own (one of 4 MB or more; here any) offers a first
    visit room for a thousand new states, so the visit of a bounded string (more than a
    hundred) walks once, where a table in numpy's memory starts short and calls the visit
    again; both give the row of each token walked byte by byte."""
    import formcast.automaton.lazy as lazy_module
    import formcast.automaton.table as table_module
    import formcast.index

    if formcast.index.native_walk is None or lazy_module.native_subset is None:
        pytest.skip("the C walk or the C subset construction was not built")
    visit = formcast.index._visitor(vocabulary).visit
    calls = {"count": 0}

    def counted(*arguments: Any) -> tuple[Any, ...]:
        calls["count"] += 1
        found: tuple[Any, ...] = visit(*arguments)
        return found

    for reserving in (True, False):
        monkeypatch.setattr(table_module, "_reserve_verdict", reserving)
        monkeypatch.setattr(table_module, "_MAPPED_BYTES", 0 if reserving else 1 << 22)
        automaton = LazyAutomaton(_BOUNDED_STRING)
        start = automaton.walk(b'"')
        calls["count"] = 0
        automaton.visit_building(counted, start)
        assert (automaton._mapping is not None) == reserving
        assert calls["count"] == 1 if reserving else calls["count"] >= 2
        assert automaton.num_states > table_module.BUILD_ROOM + 40
        index = TokenIndex(automaton, vocabulary)
        assert index_row(index, start) == brute_force_row(index, start)
