"""Token id -> raw bytes, for any Hugging Face tokenizer.

The automaton runs over UTF-8 bytes, so every token must be known as the exact bytes
it appends to the output. Two families of vocabularies are read:

* byte-level BPE (GPT-2 style: SmolLM2, Llama 3, Qwen): each token string is written in
  GPT-2's printable byte alphabet (``Ġ`` for a space, ``Ã©`` for the two bytes of ``é``);
  a token may be a fragment of a multi-byte character.
* SentencePiece style (Llama 2, Mistral, T5): ``▁`` stands for a space and ``<0xNN>``
  tokens carry single bytes (byte fallback).

Special tokens (BOS, EOS, padding, chat markers) get no bytes: they can never appear
inside constrained output. End of sequence is handled separately through
``eos_token_ids``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["OPENS_CUT", "OPENS_PLAIN", "OPENS_WHOLE", "TextTokens", "Vocabulary", "text_cut"]

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_SENTENCEPIECE_SPACE = "\u2581"


@lru_cache(maxsize=1)
def _gpt2_unicode_to_byte() -> dict[str, int]:
    """Inverse of GPT-2's byte -> printable character map (bytes_to_unicode)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    byte_for_char: dict[str, int] = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            byte_for_char[chr(256 + extra)] = b
            extra += 1
    return byte_for_char


def _byte_level_bytes(token: str) -> bytes | None:
    table = _gpt2_unicode_to_byte()
    try:
        return bytes(table[ch] for ch in token)
    except KeyError:
        return None


def _sentencepiece_bytes(token: str) -> bytes:
    fallback = _BYTE_FALLBACK.match(token)
    if fallback:
        return bytes([int(fallback.group(1), 16)])
    return token.replace(_SENTENCEPIECE_SPACE, " ").encode("utf-8")


LARGE_SUBTREE = 16
"""Subtrees of more tokens than this are worth checking whole before walking them
(:attr:`TrieLevel.node_large`); smaller ones cost less to walk."""

#: Printable ASCII except ``"`` and ``\\``: the bytes that stand for themselves inside a
#: JSON string.
PLAIN_BYTES: npt.NDArray[np.int64] = np.setdiff1d(np.arange(0x20, 0x7F), [0x22, 0x5C])

# The continuation bytes of a well-formed UTF-8 character, by its lead byte (Unicode's
# table: no overlong forms, no surrogates, nothing past U+10FFFF). formcast._subset's
# utf8_steps reads an automaton by the same table.
_UTF8_CONTINUATIONS: dict[int, tuple[tuple[int, int], ...]] = {
    **{lead: ((0x80, 0xBF),) for lead in range(0xC2, 0xE0)},
    0xE0: ((0xA0, 0xBF), (0x80, 0xBF)),
    **{lead: ((0x80, 0xBF),) * 2 for lead in [*range(0xE1, 0xED), 0xEE, 0xEF]},
    0xED: ((0x80, 0x9F), (0x80, 0xBF)),
    0xF0: ((0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    **{lead: ((0x80, 0xBF),) * 3 for lead in range(0xF1, 0xF4)},
    0xF4: ((0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
}
_PLAIN_SET = frozenset(PLAIN_BYTES.tolist())


def text_cut(data: bytes) -> tuple[int, int] | None:
    """Where ``data`` is plain bytes and well-formed non-ASCII UTF-8 characters, the last
    of them possibly cut short, and holds at least one non-ASCII byte: ``(0, 0)`` when its
    last character is whole, else the lead byte of the cut one and how many of its bytes
    ``data`` holds. ``None`` for anything else (plain bytes alone, a quote, backslash or
    control byte, a malformed sequence)."""
    at, size, non_ascii = 0, len(data), False
    while at < size:
        byte = data[at]
        if byte < 0x80:
            if byte not in _PLAIN_SET:
                return None
            at += 1
            continue
        continuations = _UTF8_CONTINUATIONS.get(byte)
        if continuations is None:
            return None
        non_ascii = True
        for k, (low, high) in enumerate(continuations):
            if at + 1 + k == size:
                return byte, 1 + k
            if not low <= data[at + 1 + k] <= high:
                return None
        at += 1 + len(continuations)
    return (0, 0) if non_ascii else None


def _characters(data: bytes) -> int:
    """The characters of well-formed UTF-8 ``data`` (its bytes that start one), at most
    255."""
    return min(255, sum(1 for byte in data if not 0x80 <= byte < 0xC0))


@dataclass(frozen=True)
class TextTokens:
    """The tokens that are not plain only for their non-ASCII characters
    (:func:`text_cut`): a string's state that loops on every plain byte and every such
    character keeps them without a walk (``formcast._subset``'s ``utf8_steps`` tells).

    An object's key state leads on to a free key's on most plain bytes and on every
    non-ASCII character; there the tokens that open with such a character are taken
    alike (``whole_lead_bits``, the cut ones by ``cut_openings``), and those that open
    with a plain byte are read under their first byte in ``plain_first``.

    Attributes:
        whole_bits: those whose last character is whole, as a packed bitmask over the
            vocabulary (bit ``i % 32`` of word ``i // 32``).
        whole_lead_bits: the same, of those that open with a non-ASCII byte.
        cut_ids: those whose last character is cut short (int32, ascending), with
            ``cut_leads`` (its lead byte), ``cut_depths`` (its bytes the token holds,
            1 to 3) and ``cut_openings`` (:data:`OPENS_PLAIN`, :data:`OPENS_CUT`: the
            token is that cut character alone, or :data:`OPENS_WHOLE`: with a whole
            non-ASCII character first), all uint8.
        whole_ids: those whose last character is whole (int32, ascending), with
            ``whole_chars``, their characters (plain or not), and ``cut_chars``, the
            whole characters before a cut token's cut one (uint8 both): where each
            character counts one, as inside a string of bounded length.
        plain_first: the prefix tree of those that open with a plain byte.
        plain_first_depths: for each of ``plain_first``'s tokens in its order
            (``plain_first.token_ids``), the bytes of its cut character (0: whole), with
            ``plain_first_leads`` its lead byte (0: whole), both uint8.
    """

    whole_bits: npt.NDArray[np.uint32]
    whole_lead_bits: npt.NDArray[np.uint32]
    cut_ids: npt.NDArray[np.int32]
    cut_leads: npt.NDArray[np.uint8]
    cut_depths: npt.NDArray[np.uint8]
    cut_openings: npt.NDArray[np.uint8]
    whole_ids: npt.NDArray[np.int32]
    whole_chars: npt.NDArray[np.uint8]
    cut_chars: npt.NDArray[np.uint8]
    plain_first: TokenTrie
    plain_first_depths: npt.NDArray[np.uint8]
    plain_first_leads: npt.NDArray[np.uint8]

    def arrays(self) -> tuple[Any, ...]:
        """What :class:`formcast._trie_walk.Visitor` takes of them, in its order."""
        return (
            self.whole_bits,
            self.whole_lead_bits,
            self.cut_ids,
            self.cut_leads,
            self.cut_depths,
            self.cut_openings,
            self.plain_first.flat.walk_arrays,
            self.plain_first.flat.root_children,
            self.plain_first_depths,
            self.plain_first_leads,
            self.whole_ids,
            self.whole_chars,
            self.cut_chars,
        )


OPENS_PLAIN, OPENS_CUT, OPENS_WHOLE = 0, 1, 2
"""How a text token cut short opens (:attr:`TextTokens.cut_openings`)."""


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """The byte string of every token id, plus the ids that end a sequence.

    Build it once per tokenizer with :meth:`from_tokenizer` (cost: one pass over the
    vocabulary, ~0.1 s for 50k tokens). Immutable and picklable.

    Attributes:
        token_bytes: bytes appended by token ``i``; empty for special tokens and ids that
            never appear in output.
        eos_token_ids: ids that end generation (allowed only where the output is complete).
        special_token_ids: ids that are never allowed inside constrained output.
    """

    token_bytes: tuple[bytes, ...]
    eos_token_ids: frozenset[int]
    special_token_ids: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not self.eos_token_ids:
            raise ValueError("expected at least one end-of-sequence token id, found none")
        for token_id in self.eos_token_ids:
            if not 0 <= token_id < len(self.token_bytes):
                raise ValueError(
                    f"expected EOS ids within the vocabulary (0..{len(self.token_bytes) - 1}),"
                    f" found {token_id}"
                )

    @property
    def size(self) -> int:
        """Number of token ids described (the tokenizer's length, not the logits width)."""
        return len(self.token_bytes)

    @classmethod
    def from_token_bytes(
        cls, token_bytes: Sequence[bytes], eos_token_ids: Iterable[int]
    ) -> Vocabulary:
        """A vocabulary from an explicit list of byte strings (tests, custom tokenizers).

        Tokens listed in ``eos_token_ids`` get no bytes whatever their entry says.
        """
        eos = frozenset(eos_token_ids)
        cleaned = tuple(b"" if i in eos else bytes(b) for i, b in enumerate(token_bytes))
        return cls(cleaned, eos, eos)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> Vocabulary:
        """Read a Hugging Face tokenizer (fast or slow).

        EOS ids are the tokenizer's ``eos_token_id`` plus, when the tokenizer declares a
        chat template, the end-of-turn token it uses (e.g. ``<|im_end|>``), so that a
        chat model may stop the way it was trained to.
        """
        vocab: Mapping[str, int] = tokenizer.get_vocab()
        size = max(len(tokenizer), max(vocab.values(), default=-1) + 1)
        special = _special_ids(tokenizer)
        decode = _token_decoder(tokenizer)
        table: list[bytes] = [b""] * size
        for token, token_id in vocab.items():
            if token_id in special:
                continue
            raw = decode(token)
            table[token_id] = raw if raw is not None else token.encode("utf-8")
        eos = _eos_ids(tokenizer)
        if not eos:
            raise ValueError(
                "expected the tokenizer to define an end-of-sequence token "
                "(tokenizer.eos_token_id), found None"
            )
        vocabulary = cls(tuple(table), frozenset(eos), frozenset(special | eos))
        vocabulary.prepare()
        return vocabulary

    def prepare(self) -> None:
        """Build the derived arrays the index walks (byte matrix, tries and their flat
        forms) now rather than on the first row (~0.35 s of CPU for 49k tokens);
        :meth:`from_tokenizer` calls it."""
        tries = (self.token_trie, self.plain_trie, self.other_trie)
        _ = ([trie.flat for trie in tries], self.single_byte_tokens)

    @cached_property
    def fingerprint(self) -> str:
        """A sha256 over every token's bytes and the EOS ids: equal vocabularies, equal keys."""
        digest = hashlib.sha256()
        for raw in self.token_bytes:
            digest.update(len(raw).to_bytes(2, "little"))
            digest.update(raw)
        digest.update(json.dumps(sorted(self.eos_token_ids)).encode())
        return digest.hexdigest()

    @cached_property
    def lengths(self) -> npt.NDArray[np.int32]:
        """Byte length of every token (0 for special tokens)."""
        return np.fromiter((len(b) for b in self.token_bytes), dtype=np.int32, count=self.size)

    @cached_property
    def byte_matrix(self) -> npt.NDArray[np.uint8]:
        """Token bytes as a (size, max_length) matrix, zero-padded on the right."""
        width = int(self.lengths.max(initial=0))
        matrix = np.zeros((self.size, max(width, 1)), dtype=np.uint8)
        for token_id, raw in enumerate(self.token_bytes):
            if raw:
                matrix[token_id, : len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        return matrix

    @cached_property
    def usable_token_ids(self) -> npt.NDArray[np.int32]:
        """Ids of tokens that have bytes and so may appear inside output."""
        return np.flatnonzero(self.lengths > 0).astype(np.int32)

    @cached_property
    def single_byte_tokens(self) -> npt.NDArray[np.int32]:
        """``single_byte_tokens[b]`` is a token id whose bytes are exactly ``b``, or -1."""
        table = np.full(256, -1, dtype=np.int32)
        for token_id in np.flatnonzero(self.lengths == 1)[::-1]:
            table[self.token_bytes[token_id][0]] = token_id
        return table

    @cached_property
    def plain_token_ids(self) -> npt.NDArray[np.int32]:
        """Tokens made only of :data:`PLAIN_BYTES` (most of a vocabulary: words, digits,
        punctuation other than quote and backslash). A state that loops on every plain
        byte keeps all of them without walking them."""
        plain = np.zeros(256, dtype=bool)
        plain[PLAIN_BYTES] = True
        matrix = self.byte_matrix
        inside = np.arange(matrix.shape[1]) < self.lengths[:, None]
        all_plain = np.all(plain[matrix] | ~inside, axis=1) & (self.lengths > 0)
        return np.flatnonzero(all_plain).astype(np.int32)

    @cached_property
    def plain_token_lengths(self) -> npt.NDArray[np.int32]:
        """The byte length of each of :attr:`plain_token_ids` (the index reads a plain
        token's state off a chain by it)."""
        return self.lengths[self.plain_token_ids]

    @cached_property
    def plain_flags(self) -> npt.NDArray[np.bool_]:
        """Whether each token of the vocabulary is one of :attr:`plain_token_ids`."""
        flags = np.zeros(self.size, dtype=np.bool_)
        flags[self.plain_token_ids] = True
        return flags

    @cached_property
    def first_bytes(self) -> npt.NDArray[np.uint8]:
        """The first byte of each token of the vocabulary (0 for a token without bytes)."""
        return np.ascontiguousarray(self.byte_matrix[:, 0], dtype=np.uint8)

    @cached_property
    def plain_bits_by_first(self) -> npt.NDArray[np.uint32]:
        """The plain tokens starting with each byte, as 256 packed bitmasks over the
        vocabulary (bit ``i % 32`` of word ``i // 32``; 1.5 MB for 49k tokens, built once:
        a row reads its plain tokens by first byte off them, see
        :meth:`formcast.index.TokenIndex._first_byte_row`)."""
        words = (self.size + 31) // 32
        ids = self.plain_token_ids.astype(np.int64)
        flat = self.plain_token_firsts.astype(np.int64) * words + (ids >> 5)
        bits = np.zeros(256 * words, dtype=np.uint32)
        # one unbuffered OR a token (~1 ms for 49k; a float bincount of the same bits over
        # the 400k words took 2-4 ms, in a process's first key row)
        np.bitwise_or.at(bits, flat, np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
        return bits.reshape(256, words)

    @cached_property
    def plain_bits(self) -> npt.NDArray[np.uint32]:
        """:attr:`plain_token_ids` as a packed bitmask over the vocabulary (bit ``i % 32``
        of word ``i // 32``)."""
        return self._packed(self.plain_token_ids)

    @cached_property
    def plain_token_firsts(self) -> npt.NDArray[np.uint8]:
        """The first byte of each of :attr:`plain_token_ids`."""
        return self.first_bytes[self.plain_token_ids]

    @cached_property
    def plain_trie(self) -> TokenTrie:
        """The prefix tree of the plain tokens (every byte in :data:`PLAIN_BYTES`)."""
        return TokenTrie.build(self, self.plain_token_ids)

    @cached_property
    def token_trie(self) -> TokenTrie:
        """The prefix tree of every usable token (walked where plain tokens must be)."""
        return TokenTrie.build(self, self.usable_token_ids)

    @cached_property
    def other_trie(self) -> TokenTrie:
        """The prefix tree of the usable tokens that are not plain."""
        return TokenTrie.build(self, self._other_token_ids)

    @cached_property
    def _other_token_ids(self) -> npt.NDArray[np.int32]:
        return np.setdiff1d(self.usable_token_ids, self.plain_token_ids).astype(np.int32)

    @cached_property
    def _text_cuts(self) -> dict[int, tuple[int, int]]:
        """:func:`text_cut` of each token it applies to (one pass over the tokens that are
        not plain, ~1 ms for 49k tokens)."""
        cuts = {}
        for token_id in self._other_token_ids.tolist():
            cut = text_cut(self.token_bytes[token_id])
            if cut is not None:
                cuts[token_id] = cut
        return cuts

    @cached_property
    def text_tokens(self) -> TextTokens:
        """The tokens that are not plain only for their non-ASCII characters (see
        :class:`TextTokens`); :attr:`special_trie` holds the other tokens that are not
        plain. Built once (~5 ms for 49k tokens)."""
        cuts, data = self._text_cuts, self.token_bytes
        whole = sorted(t for t, (lead, _) in cuts.items() if not lead)
        cut = sorted((t, lead, depth) for t, (lead, depth) in cuts.items() if lead)
        columns = np.array(cut, dtype=np.int64).reshape(-1, 3)
        openings = [
            OPENS_PLAIN if data[t][0] < 0x80 else OPENS_CUT if len(data[t]) == d else OPENS_WHOLE
            for t, _, d in cut
        ]
        plain_first = TokenTrie.build(
            self, np.array(sorted(t for t in cuts if data[t][0] < 0x80), dtype=np.int32)
        )
        in_order = [cuts[t] for t in plain_first.token_ids.tolist()]
        return TextTokens(
            whole_bits=self._packed(whole),
            whole_lead_bits=self._packed([t for t in whole if data[t][0] >= 0x80]),
            cut_ids=np.ascontiguousarray(columns[:, 0], dtype=np.int32),
            cut_leads=np.ascontiguousarray(columns[:, 1], dtype=np.uint8),
            cut_depths=np.ascontiguousarray(columns[:, 2], dtype=np.uint8),
            cut_openings=np.array(openings, dtype=np.uint8),
            whole_ids=np.array(whole, dtype=np.int32),
            whole_chars=np.array([_characters(data[t]) for t in whole], dtype=np.uint8),
            cut_chars=np.array([_characters(data[t][:-d]) for t, _, d in cut], dtype=np.uint8),
            plain_first=plain_first,
            plain_first_depths=np.array([d for _, d in in_order], dtype=np.uint8),
            plain_first_leads=np.array([lead for lead, _ in in_order], dtype=np.uint8),
        )

    def _packed(self, ids: list[int] | npt.NDArray[np.int32]) -> npt.NDArray[np.uint32]:
        """``ids`` as a packed bitmask over the vocabulary (bit ``i % 32`` of word
        ``i // 32``)."""
        flags = np.zeros(-(-self.size // 32) * 32, dtype=np.bool_)
        flags[np.asarray(ids, dtype=np.int64)] = True
        return np.packbits(flags, bitorder="little").view(np.uint32)

    @cached_property
    def special_trie(self) -> TokenTrie:
        """The prefix tree of the tokens that are neither plain nor text
        (:attr:`text_tokens`): those holding a quote, a backslash, a control byte or a
        malformed UTF-8 sequence."""
        text = np.fromiter(self._text_cuts, dtype=np.int32, count=len(self._text_cuts))
        return TokenTrie.build(self, np.setdiff1d(self._other_token_ids, text).astype(np.int32))

    def __getstate__(self) -> dict[str, Any]:
        # Derived arrays are rebuilt on demand; pickles stay small.
        return {
            "token_bytes": self.token_bytes,
            "eos_token_ids": self.eos_token_ids,
            "special_token_ids": self.special_token_ids,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)


def _special_ids(tokenizer: Any) -> set[int]:
    ids = {int(i) for i in getattr(tokenizer, "all_special_ids", []) if i is not None}
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    for token_id, added_token in added.items():
        if getattr(added_token, "special", False):
            ids.add(int(token_id))
    return ids


def _eos_ids(tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, list):
        ids.update(int(i) for i in eos)
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, str):
        for marker in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"):
            if marker in template:
                token_id = tokenizer.convert_tokens_to_ids(marker)
                unknown = getattr(tokenizer, "unk_token_id", None)
                if isinstance(token_id, int) and token_id != unknown:
                    ids.add(token_id)
    return ids


def _decoder_kind(tokenizer: Any) -> str:
    """'byte_level', 'sentencepiece' or 'unknown', read from the fast tokenizer's decoder."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return "sentencepiece" if hasattr(tokenizer, "sp_model") else "unknown"
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    text = json.dumps(decoder)
    if '"ByteLevel"' in text:
        return "byte_level"
    if '"ByteFallback"' in text or '"Metaspace"' in text or _SENTENCEPIECE_SPACE in text:
        return "sentencepiece"
    return "unknown"


def _token_decoder(tokenizer: Any) -> Any:
    kind = _decoder_kind(tokenizer)
    if kind == "byte_level":
        return _byte_level_bytes
    if kind == "sentencepiece":
        return _sentencepiece_bytes
    raise ValueError(
        "expected a byte-level BPE or SentencePiece tokenizer (a fast tokenizer whose decoder "
        f"is ByteLevel, Metaspace or ByteFallback), found {type(tokenizer).__name__} with an "
        "unrecognised decoder"
    )


@dataclass(frozen=True, eq=False)
class _Level:
    """A :class:`TrieLevel`'s own fields, before the levels are linked."""

    node_parents: npt.NDArray[np.int32]
    node_bytes: npt.NDArray[np.uint8]
    end_nodes: npt.NDArray[np.int32]
    end_tokens: npt.NDArray[np.int32]
    node_first: npt.NDArray[np.int32]
    node_stop: npt.NDArray[np.int32]
    node_token: npt.NDArray[np.int32]


@dataclass(frozen=True, eq=False)
class TrieLevel(_Level):
    """The trie nodes at one depth ``d``: the distinct ``d``-byte prefixes of tokens.

    Node ``n`` extends node ``node_parents[n]`` of depth ``d - 1`` (the root, 0, for
    ``d = 1``) by byte ``node_bytes[n]``. Token ``end_tokens[i]`` has exactly the bytes
    of node ``end_nodes[i]``. The tokens starting with node ``n``'s bytes (its subtree)
    are ``token_ids[node_first[n]:node_stop[n]]`` of the :class:`TokenTrie`.

    For walks that visit only live nodes: ``node_token[n]`` is the token with exactly
    node ``n``'s bytes (-1 if none; see :attr:`TokenTrie.repeats`); node ``n``'s
    ``child_count[n]`` children are the nodes from ``child_first[n]`` on at the next
    depth; ``node_large[n]`` says whether more than :data:`LARGE_SUBTREE` tokens start
    with its bytes; ``below_bytes[n]`` is the set of bytes that follow node ``n``'s bytes
    in its subtree (256 bits as four little-endian uint64 words; bit ``b`` of word
    ``b // 64`` is byte ``b``), so a state looping on all of them keeps the whole subtree.
    """

    child_first: npt.NDArray[np.int32]
    child_count: npt.NDArray[np.int32]
    node_large: npt.NDArray[np.bool_]
    below_bytes: npt.NDArray[np.uint64]


@dataclass(frozen=True, eq=False)
class TokenTrie:
    """The prefix tree of some of a vocabulary's tokens (:meth:`build`'s ``ids``; the index
    walks :attr:`Vocabulary.plain_trie` and :attr:`Vocabulary.other_trie`), one
    :class:`TrieLevel` per depth.

    Walking the trie instead of every token visits each shared prefix once: 49k
    SmolLM2 tokens hold 332k bytes but only 100k distinct prefixes.
    """

    levels: tuple[TrieLevel, ...]
    token_ids: npt.NDArray[np.int32]
    """The tokens in lexicographic order of their bytes: every subtree is a slice."""
    repeats: npt.NDArray[np.int32]
    """Tokens whose bytes repeat those of the token at the same place of
    :attr:`repeated` (not a node's :attr:`TrieLevel.node_token`): a walk gives them
    that token's state."""
    repeated: npt.NDArray[np.int32]

    @property
    def max_length(self) -> int:
        """The longest token's length in bytes (the number of levels)."""
        return len(self.levels)

    @cached_property
    def flat(self) -> FlatTrie:
        """The trie as one array per field over all levels (built once, O(nodes))."""
        return FlatTrie.of(self)

    @classmethod
    def build(cls, vocabulary: Vocabulary, ids: npt.NDArray[np.int32]) -> TokenTrie:
        """The trie of tokens ``ids`` (each with at least one byte): sort their bytes, then
        number the distinct prefixes depth by depth."""
        matrix = vocabulary.byte_matrix[ids]
        lengths = vocabulary.lengths[ids]
        # Lexicographic order: zero padding sorts a prefix before its extensions, and the
        # length breaks the tie between a token ending in 0x00 bytes and a shorter one.
        order = np.lexsort((lengths, *matrix.T[::-1]))
        ids, matrix, lengths = ids[order], matrix[order], lengths[order]
        node = np.zeros(ids.size, dtype=np.int32)  # each token's node at the previous depth
        levels = [
            _trie_level(depth, ids, matrix, lengths, node)
            for depth in range(1, int(lengths.max(initial=0)) + 1)
        ]
        same = np.zeros(ids.size, dtype=np.bool_)
        same[1:] = (lengths[1:] == lengths[:-1]) & np.all(matrix[1:] == matrix[:-1], axis=1)
        first = np.maximum.accumulate(np.where(same, 0, np.arange(ids.size)))
        return cls(_linked(levels), ids, ids[same], ids[first[same]])


RECORD_FIELDS = (
    "child_first",
    "child_count",
    "node_token",
    "subtree_first",
    "subtree_stop",
    "node_byte",
    "node_large",
    "unused",
)
"""The columns of :attr:`FlatTrie.node_records` (``NodeRecord`` in ``_trie_walk.h``):
eight int32, 32 bytes, two nodes a cache line."""


@dataclass(frozen=True, eq=False)
class FlatTrie:
    """A :class:`TokenTrie` with its levels concatenated, for the C walk
    (``formcast/_trie_walk.c``): node 0 is the root (the empty prefix), then the nodes of
    depth 1, 2, ... in order; ``child_first`` holds these global numbers (with
    ``node_bytes`` and ``child_count``, what Python reads of the trie: :meth:`child_bytes`,
    :attr:`root_children`). ``node_records`` holds what the walk reads of a node side by
    side, eight int32 a node (:data:`RECORD_FIELDS`; a node's subtree is
    ``token_ids[subtree_first:subtree_stop]``): a node's fields in one cache line, and its
    children's in one to a few, where arrays apart cost a cache miss each for a walk that
    reaches the trie's far corners (3.2 MB for 100k nodes). ``below_bytes`` holds four
    words a node (:attr:`TrieLevel.below_bytes`, flattened)."""

    node_bytes: npt.NDArray[np.uint8]
    child_first: npt.NDArray[np.int32]
    child_count: npt.NDArray[np.int32]
    below_bytes: npt.NDArray[np.uint64]
    token_ids: npt.NDArray[np.int32]
    node_records: npt.NDArray[np.int32]

    @property
    def node_count(self) -> int:
        return int(self.node_bytes.size)

    @property
    def token_count(self) -> int:
        return int(self.token_ids.size)

    @cached_property
    def walk_arrays(self) -> tuple[npt.NDArray[Any], ...]:
        """What the C walk reads, in the order it takes them: ``node_records`` (each
        node's fields side by side), ``below_bytes`` and ``token_ids``."""
        return (self.node_records, self.below_bytes, self.token_ids)

    @cached_property
    def _node_bytes_data(self) -> bytes:
        return self.node_bytes.tobytes()

    def child_bytes(self, node: int) -> bytes:
        """The bytes of ``node``'s children, ascending: a slice of a copy of
        :attr:`node_bytes` (made once, O(nodes) at C speed)."""
        start = int(self.child_first[node])
        return self._node_bytes_data[start : start + int(self.child_count[node])]

    @cached_property
    def root_children(self) -> npt.NDArray[np.int32]:
        """The node of each first byte (256 entries; -1 where no token starts with it)."""
        found = np.full(256, -1, dtype=np.int32)
        first, count = int(self.child_first[0]), int(self.child_count[0])
        children = np.arange(first, first + count, dtype=np.int32)
        found[self.node_bytes[children]] = children
        return found

    @classmethod
    def of(cls, trie: TokenTrie) -> FlatTrie:
        levels = trie.levels
        sizes = [level.node_bytes.size for level in levels]
        offsets = np.cumsum([1, *sizes])  # the global number of each level's first node

        def joined(field: str, root: Any, dtype: Any) -> npt.NDArray[Any]:
            parts = [np.asarray([root], dtype=dtype)]
            parts += [np.asarray(getattr(level, field), dtype=dtype) for level in levels]
            return np.ascontiguousarray(np.concatenate(parts))

        child_first = [np.asarray([1], dtype=np.int32)]
        for depth, level in enumerate(levels):
            child_first.append((level.child_first + offsets[depth + 1]).astype(np.int32))
        # the root is never a large node, so the walk never reads the bytes below it
        below = [np.zeros((1, 4), dtype=np.uint64), *(level.below_bytes for level in levels)]
        node_bytes = joined("node_bytes", 0, np.uint8)
        first = np.ascontiguousarray(np.concatenate(child_first))
        count = joined("child_count", sizes[0] if sizes else 0, np.int32)
        columns = (
            first,
            count,
            joined("node_token", -1, np.int32),
            joined("node_first", 0, np.int32),  # subtree_first
            joined("node_stop", trie.token_ids.size, np.int32),  # subtree_stop
            node_bytes,
            joined("node_large", False, np.uint8),
        )
        records = np.zeros((node_bytes.size, len(RECORD_FIELDS)), dtype=np.int32)
        for column, values in enumerate(columns):
            records[:, column] = values
        return cls(
            node_bytes=node_bytes,
            child_first=first,
            child_count=count,
            below_bytes=np.ascontiguousarray(np.concatenate(below).reshape(-1)),
            token_ids=np.ascontiguousarray(trie.token_ids, dtype=np.int32),
            node_records=records,
        )


def _trie_level(
    depth: int,
    ids: npt.NDArray[np.int32],
    matrix: npt.NDArray[np.uint8],
    lengths: npt.NDArray[np.int32],
    node: npt.NDArray[np.int32],
) -> _Level:
    """One trie level from lexicographically sorted tokens; updates ``node`` in place to
    each token's node at ``depth`` (tokens shorter than ``depth`` keep stale values).

    Tokens sharing a ``depth``-byte prefix are contiguous in sorted order, so a new node
    starts wherever the parent or the byte at ``depth`` changes, and its subtree runs to
    the last token of that run."""
    reaching = np.flatnonzero(lengths >= depth)
    parents = node[reaching]
    column = matrix[reaching, depth - 1]
    fresh = np.ones(reaching.size, dtype=bool)
    fresh[1:] = (parents[1:] != parents[:-1]) | (column[1:] != column[:-1])
    numbers = (np.cumsum(fresh) - 1).astype(np.int32)
    node[reaching] = numbers
    starts = np.flatnonzero(fresh)
    ending = lengths[reaching] == depth
    lasts = np.append(starts[1:] - 1, reaching.size - 1)
    ended, ending_ids = numbers[ending], ids[reaching[ending]]
    first = np.ones(ended.size, dtype=np.bool_)  # of tokens with the same bytes (adjacent)
    first[1:] = ended[1:] != ended[:-1]
    node_token = np.full(starts.size, -1, dtype=np.int32)
    node_token[ended[first]] = ending_ids[first]
    return _Level(
        parents[starts],
        column[starts],
        numbers[ending],
        ids[reaching[ending]],
        reaching[starts].astype(np.int32),
        (reaching[lasts] + 1).astype(np.int32),
        node_token,
    )


def _linked(levels: list[_Level]) -> tuple[TrieLevel, ...]:
    """The levels with each node's children and the bytes below it, deepest first (a
    node's children are contiguous: nodes are numbered in lexicographic order)."""
    linked: list[TrieLevel] = []
    below_next = np.zeros((0, 4), dtype=np.uint64)
    parents_next = np.zeros(0, dtype=np.int32)
    bytes_next = np.zeros(0, dtype=np.uint8)
    for level in reversed(levels):
        size = level.node_parents.size
        numbers = np.arange(size, dtype=np.int32)
        child_first = np.searchsorted(parents_next, numbers, side="left").astype(np.int32)
        child_stop = np.searchsorted(parents_next, numbers, side="right").astype(np.int32)
        # bytes below a node: its children's bytes and the bytes below them
        following = below_next.copy()
        following[np.arange(bytes_next.size), bytes_next >> 6] |= np.left_shift(
            np.uint64(1), (bytes_next & 63).astype(np.uint64)
        )
        below = np.zeros((size, 4), dtype=np.uint64)
        inner = np.flatnonzero(child_stop > child_first)
        if inner.size:
            below[inner] = np.bitwise_or.reduceat(following, child_first[inner], axis=0)
        large = level.node_stop - level.node_first > LARGE_SUBTREE
        linked.append(
            TrieLevel(
                **vars(level),
                child_first=child_first,
                child_count=child_stop - child_first,
                node_large=large,
                below_bytes=below,
            )
        )
        below_next, parents_next, bytes_next = below, level.node_parents, level.node_bytes
    return tuple(reversed(linked))
