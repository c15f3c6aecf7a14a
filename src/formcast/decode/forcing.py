"""Jump-forward's tokenizer: the bytes a constraint forces, as the tokenizer's tokens."""

from __future__ import annotations

from typing import Any

from formcast.vocabulary import Vocabulary

__all__ = ["ForcedTokenizer"]


class ForcedTokenizer:
    """Tokenizes forced bytes the way the tokenizer would tokenize that text.

    Falls back to single-byte tokens when the tokenizer's own encoding does not reproduce
    the bytes exactly (SentencePiece prefix spaces, normalizers). Results are memoised.
    """

    def __init__(self, tokenizer: Any, vocabulary: Vocabulary) -> None:
        self._tokenizer = tokenizer
        self._vocabulary = vocabulary
        self._memo: dict[bytes, list[int]] = {}

    def __call__(self, forced: bytes) -> list[int]:
        forced = _complete_utf8_prefix(forced)
        if not forced:
            return []
        cached = self._memo.get(forced)
        if cached is None:
            cached = self._encode(forced)
            self._memo[forced] = cached
        return cached

    def _encode(self, forced: bytes) -> list[int]:
        table = self._vocabulary.token_bytes
        try:
            text = forced.decode("utf-8")
        except UnicodeDecodeError:  # starts inside a character the last token began
            text = None
        if self._tokenizer is not None and text is not None:
            ids = list(self._tokenizer.encode(text, add_special_tokens=False))
            if b"".join(table[i] for i in ids) == forced:
                return ids
        singles = self._vocabulary.single_byte_tokens
        fallback = [int(singles[b]) for b in forced]
        return fallback if min(fallback) >= 0 else []


def _complete_utf8_prefix(data: bytes) -> bytes:
    """The longest prefix of ``data`` that ends on a UTF-8 character boundary."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte & 0xC0 != 0x80:  # a lead byte or ASCII
            expected = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if expected <= back else data[: end - back]
    return data
