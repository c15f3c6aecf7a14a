"""Token bytes for byte-level BPE (the real SmolLM2 tokenizer) and SentencePiece vocabularies."""

from __future__ import annotations

import itertools
import pickle
from typing import Any

import numpy as np
import pytest

from formcast.vocabulary import LARGE_SUBTREE, TokenTrie, Vocabulary

TEXTS = [
    "plain ascii",
    '{"company":"ABC","total":31.0}',
    "José Ñúñez",
    "Größe: 12 €",
    "日本語のテキスト",
    "emoji 😀🎉 and 👩‍👩‍👧",
    "tabs\tand\nnewlines",
    "Ελληνικά and русский",
]


@pytest.mark.parametrize("text", TEXTS)
def test_byte_level_tokens_concatenate_to_utf8(
    vocabulary: Vocabulary, tokenizer: Any, text: str
) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert b"".join(vocabulary.token_bytes[i] for i in ids) == text.encode("utf-8")


def test_fragment_tokens_exist_for_multibyte_characters(
    vocabulary: Vocabulary, tokenizer: Any
) -> None:
    ids = tokenizer.encode("😀", add_special_tokens=False)
    pieces = [vocabulary.token_bytes[i] for i in ids]
    assert len(pieces) > 1, "expected the emoji to be split into byte fragments"
    assert any(not _is_utf8(p) for p in pieces)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_special_tokens_have_no_bytes(vocabulary: Vocabulary, tokenizer: Any) -> None:
    for token_id in tokenizer.all_special_ids:
        assert vocabulary.token_bytes[token_id] == b""
        assert token_id in vocabulary.special_token_ids
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in vocabulary.eos_token_ids


def test_json_text_bytes_have_single_byte_tokens(vocabulary: Vocabulary) -> None:
    # Budget-safe endings rely on single-byte tokens for every byte compact JSON needs:
    # printable ASCII, continuation bytes, and the lead bytes of the BMP and plane 1.
    needed = [*range(0x20, 0x7F), *range(0x80, 0xC0), *range(0xC2, 0xF1)]
    missing = [b for b in needed if vocabulary.single_byte_tokens[b] < 0]
    assert missing == []


def test_pickle_round_trip_keeps_fingerprint(vocabulary: Vocabulary) -> None:
    copy = pickle.loads(pickle.dumps(vocabulary))
    assert copy.fingerprint == vocabulary.fingerprint
    assert copy.token_bytes == vocabulary.token_bytes


def test_fingerprint_changes_with_content() -> None:
    a = Vocabulary.from_token_bytes([b"", b"a", b"b"], [0])
    b = Vocabulary.from_token_bytes([b"", b"a", b"c"], [0])
    assert a.fingerprint != b.fingerprint


def test_missing_eos_is_an_error() -> None:
    with pytest.raises(ValueError, match="end-of-sequence"):
        Vocabulary.from_token_bytes([b"a"], [])


def _sentencepiece_tokenizer() -> Any:
    """A small SentencePiece-style fast tokenizer built in code: ▁ for spaces and
    <0xNN> byte-fallback tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece in ["▁", "a", "b", "▁a", "▁ab", "ab", "é", "▁Jos", "é"]:
        vocab.setdefault(piece, len(vocab))
    model = models.BPE(
        vocab=vocab,
        merges=[("▁", "a"), ("▁a", "b"), ("a", "b")],
        unk_token="<unk>",
        byte_fallback=True,
    )
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def test_sentencepiece_space_and_byte_fallback() -> None:
    tokenizer = _sentencepiece_tokenizer()
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    token_bytes = dict(
        zip(
            tokenizer.convert_ids_to_tokens(range(len(vocabulary.token_bytes))),
            vocabulary.token_bytes,
            strict=True,
        )
    )
    assert token_bytes["▁ab"] == b" ab"
    assert token_bytes["<0xC3>"] == b"\xc3"
    assert token_bytes["é"] == "é".encode()
    assert vocabulary.eos_token_ids == {tokenizer.eos_token_id}
    assert vocabulary.token_bytes[tokenizer.eos_token_id] == b""


def _full_trie(vocabulary: Vocabulary) -> TokenTrie:
    """The prefix tree of every usable token (the index walks two parts of it)."""
    return TokenTrie.build(vocabulary, vocabulary.usable_token_ids)


def _trie_tokens(vocabulary: Vocabulary) -> dict[int, bytes]:
    """Rebuild every token's bytes from the trie levels (node -> prefix)."""
    prefixes = [b""]
    rebuilt: dict[int, bytes] = {}
    for level in _full_trie(vocabulary).levels:
        prefixes = [
            prefixes[int(parent)] + bytes([int(byte)])
            for parent, byte in zip(level.node_parents, level.node_bytes, strict=True)
        ]
        for node, token in zip(level.end_nodes, level.end_tokens, strict=True):
            rebuilt[int(token)] = prefixes[int(node)]
    return rebuilt


def test_trie_holds_every_usable_token_once_with_shared_prefixes() -> None:
    tokens = [b"", b"a", b"ab", b"abc", b"ab", b"b\x00", b"b", b"b\x00\x00", b"\x00", b"ba"]
    vocabulary = Vocabulary.from_token_bytes(tokens, eos_token_ids=[0])
    assert _trie_tokens(vocabulary) == {i: t for i, t in enumerate(tokens) if t}
    sizes = [level.node_bytes.size for level in _full_trie(vocabulary).levels]
    assert sizes == [3, 3, 2]  # {a, b, \0}, {ab, b\0, ba}, {abc, b\0\0}


def _assert_subtrees_are_slices(vocabulary: Vocabulary) -> None:
    """Every node's slice of ``token_ids`` is exactly the tokens starting with its bytes."""
    trie = _full_trie(vocabulary)
    prefixes = [b""]
    for level in trie.levels:
        prefixes = [
            prefixes[int(parent)] + bytes([int(byte)])
            for parent, byte in zip(level.node_parents, level.node_bytes, strict=True)
        ]
        for node, prefix in enumerate(prefixes):
            inside = trie.token_ids[level.node_first[node] : level.node_stop[node]]
            expected = {
                int(i)
                for i in vocabulary.usable_token_ids
                if vocabulary.token_bytes[i].startswith(prefix)
            }
            assert sorted(int(i) for i in inside) == sorted(expected), prefix


def test_trie_subtrees_are_slices_of_the_token_order() -> None:
    tokens = [b"", b"a", b"ab", b"abc", b"ab", b"b\x00", b"b", b"b\x00\x00", b"\x00", b"ba"]
    _assert_subtrees_are_slices(Vocabulary.from_token_bytes(tokens, eos_token_ids=[0]))
    words = [b"", b"x", b"xy", b"xyz", b"xz", b"y", b"yx", b"z\xff", b"z", b"zz", b"zzz"]
    _assert_subtrees_are_slices(Vocabulary.from_token_bytes(words, eos_token_ids=[0]))


def test_trie_of_the_real_vocabulary(vocabulary: Vocabulary) -> None:
    rebuilt = _trie_tokens(vocabulary)
    assert rebuilt == {int(i): vocabulary.token_bytes[i] for i in vocabulary.usable_token_ids}
    assert sum(level.node_bytes.size for level in _full_trie(vocabulary).levels) < int(
        vocabulary.lengths.sum()
    )


def _assert_walk_fields(vocabulary: Vocabulary) -> None:
    """Each node's own token, children and bytes below, and the repeated tokens, as the
    live-node walk reads them, against the prefixes rebuilt from the levels."""
    trie = _full_trie(vocabulary)
    prefixes = [b""]
    levels = [*trie.levels, None]
    for level, following in itertools.pairwise(levels):
        assert level is not None
        prefixes = [
            prefixes[int(parent)] + bytes([int(byte)])
            for parent, byte in zip(level.node_parents, level.node_bytes, strict=True)
        ]
        for node, prefix in enumerate(prefixes):
            token = int(level.node_token[node])
            exact = [i for i, raw in enumerate(vocabulary.token_bytes) if raw == prefix]
            assert (token in exact) if exact else token == -1
            first, count = int(level.child_first[node]), int(level.child_count[node])
            children = [] if following is None else np.flatnonzero(following.node_parents == node)
            assert list(range(first, first + count)) == list(children)
            below = {
                byte
                for raw in vocabulary.token_bytes
                if raw.startswith(prefix)
                for byte in raw[len(prefix) :]
            }
            bits = np.unpackbits(level.below_bytes[node].view(np.uint8), bitorder="little")
            assert set(np.flatnonzero(bits).tolist()) == below, prefix
            size = int(level.node_stop[node] - level.node_first[node])
            assert bool(level.node_large[node]) == (size > LARGE_SUBTREE)
    for repeat, original in zip(trie.repeats, trie.repeated, strict=True):
        assert repeat != original
        assert vocabulary.token_bytes[repeat] == vocabulary.token_bytes[original]


def test_trie_fields_of_the_live_node_walk() -> None:
    tokens = [b"", b"a", b"ab", b"abc", b"ab", b"b\x00", b"b", b"b\x00\x00", b"\x00", b"ba"]
    vocabulary = Vocabulary.from_token_bytes(tokens, eos_token_ids=[0])
    _assert_walk_fields(vocabulary)
    trie = _full_trie(vocabulary)
    assert trie.repeats.tolist() == [4] and trie.repeated.tolist() == [2]  # b"ab" twice
    many = [b""] + [bytes([97, 97 + k % 26, 97 + k // 26]) for k in range(40)]
    _assert_walk_fields(Vocabulary.from_token_bytes(many, eos_token_ids=[0]))


@pytest.mark.parametrize("given", [None, "HuggingFaceTB/SmolLM2-135M-Instruct", 42])
def test_compile_without_a_tokenizer_says_what_was_expected(given: Any) -> None:
    import formcast
    from formcast.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="expected a Hugging Face tokenizer") as caught:
        formcast.compile(int, given)
    assert repr(given)[:20] in str(caught.value)
    if isinstance(given, str):
        assert "AutoTokenizer.from_pretrained('HuggingFaceTB" in str(caught.value)


def test_the_whole_tries_repeats_are_those_of_the_plain_and_other_tries() -> None:
    """A key row walks the plain and the other trie and takes its repeats from the whole
    trie: a token and the one it repeats share their bytes, so one of the two tries holds
    both, and every trie takes the lowest id of a run of equal tokens as its original."""
    tokens = [b"", b"ab", b'a"', b"ab", "é".encode(), b"x", b'a"', b"ab", "é".encode(), b"q"]
    vocabulary = Vocabulary.from_token_bytes(tokens, eos_token_ids=[0])

    def pairs(trie: Any) -> set[tuple[int, int]]:
        return set(zip(trie.repeats.tolist(), trie.repeated.tolist(), strict=True))

    whole = pairs(vocabulary.token_trie)
    assert whole == {(3, 1), (7, 1), (6, 2), (8, 4)}
    assert whole == pairs(vocabulary.plain_trie) | pairs(vocabulary.other_trie)


def test_plain_bits_by_first_byte_are_the_plain_tokens_starting_with_it(
    vocabulary: Vocabulary,
) -> None:
    """Row ``b`` of ``plain_bits_by_first`` is the packed set of the plain tokens whose
    first byte is ``b`` (read here from each token's bytes), and the rows together are
    ``plain_bits``."""
    bits = vocabulary.plain_bits_by_first
    words = (vocabulary.size + 31) // 32
    assert bits.shape == (256, words) and bits.dtype == np.uint32
    by_first: dict[int, list[int]] = {}
    for token in vocabulary.plain_token_ids.tolist():
        by_first.setdefault(vocabulary.token_bytes[token][0], []).append(token)
    for byte in [*sorted(by_first)[::7], 0x7E, 0x00]:
        flags = np.zeros(words * 32, dtype=np.bool_)
        flags[by_first.get(byte, [])] = True
        expected = np.packbits(flags, bitorder="little").view(np.uint32)
        assert np.array_equal(bits[byte], expected), byte
    assert np.array_equal(np.bitwise_or.reduce(bits, axis=0), vocabulary.plain_bits)


@pytest.mark.parametrize(
    ("data", "cut"),
    [
        ("é".encode(), (0, 0)),
        ("naïve café".encode(), (0, 0)),
        ("😀".encode(), (0, 0)),
        (b"ab\xe2\x80", (0xE2, 2)),  # a three-byte character, two of its bytes
        (b"\xe2", (0xE2, 1)),
        ("é".encode() + b"\xf0\x9f\x98", (0xF0, 3)),
        (b"abc", None),  # plain bytes alone
        ('é"'.encode(), None),  # a quote
        ("é\\".encode(), None),  # a backslash
        ("é\n".encode(), None),  # a control byte
        ("é\x7f".encode(), None),  # DEL: a string's character, not plain
        (b"\x80a", None),  # a continuation byte where a character starts
        (b"\xc3\x28", None),  # a lead byte cut by an ASCII byte
        (b"\xc0\xaf", None),  # an overlong form
        (b"\xe0\x80\x80", None),  # an overlong three-byte form
        (b"\xed\xa0\x80", None),  # a surrogate
        (b"\xf4\x90\x80\x80", None),  # past U+10FFFF
        (b"\xf5\x80", None),  # no character starts with 0xF5
    ],
)
def test_text_cut_reads_well_formed_characters_and_where_the_last_is_cut(
    data: bytes, cut: tuple[int, int] | None
) -> None:
    """A token of plain bytes and well-formed non-ASCII characters is text: its last
    character whole (0, 0), or cut short (the lead byte, the bytes it holds). Anything
    else a string cannot take as it comes is not text."""
    from formcast.vocabulary import text_cut

    assert text_cut(data) == cut


def test_plain_text_and_special_tokens_part_the_usable_ones(vocabulary: Vocabulary) -> None:
    """Every usable token is plain, text (whole or cut short) or in the special trie, and
    only one of them; each text token's cut is text_cut's, read off its bytes."""
    from formcast.vocabulary import text_cut

    text = vocabulary.text_tokens
    words = (vocabulary.size + 31) // 32
    whole = np.flatnonzero(
        np.unpackbits(text.whole_bits.view(np.uint8), bitorder="little")[: words * 32]
    )
    cut = text.cut_ids.tolist()
    special = vocabulary.special_trie.token_ids.tolist()
    plain = vocabulary.plain_token_ids.tolist()
    parts = [set(whole.tolist()), set(cut), set(special), set(plain)]
    assert sum(len(part) for part in parts) == vocabulary.usable_token_ids.size
    assert set().union(*parts) == set(vocabulary.usable_token_ids.tolist())
    assert whole.size > 100 and len(cut) > 50  # SmolLM2 has both kinds
    for token in whole.tolist()[::17]:
        assert text_cut(vocabulary.token_bytes[token]) == (0, 0)
    for token, lead, depth in zip(
        cut, text.cut_leads.tolist(), text.cut_depths.tolist(), strict=True
    ):
        assert text_cut(vocabulary.token_bytes[token]) == (lead, depth)
    for token in special[::11]:
        assert text_cut(vocabulary.token_bytes[token]) is None
