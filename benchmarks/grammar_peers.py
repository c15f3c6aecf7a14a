"""The four grammar engines of ``grammars.py`` behind one protocol: formcast,
transformers-CFG, llguidance and xgrammar.

Each adapter converts the default model's Hugging Face tokenizer once, untimed (the
engines' own conversions), then ``compile(text)`` takes the GBNF text to a matcher whose
first mask is ready (the timed *compile*). A matcher is one walk along one token sequence:
``fill`` computes the full mask of the vocabulary (timed), ``allows`` reads it for one
token, ``advance`` consumes the token (timed apart). A grammar an engine refuses raises
:class:`Unsupported`.

How each engine is driven:

* formcast: ``formcast.Grammar(text)``, ``formcast.compile(grammar, vocabulary,
  cache=False)`` after clearing the memory cache, ``Cursor.bitmask`` into a uint32 buffer.
  Rows are built lazily and kept by the index, so the masks along the walks include every
  first visit of a state (as a decoding loop meets them).
* transformers-CFG: ``IncrementalGrammarConstraint`` (its incremental token recognizer)
  with the byte trie and token mapping built once (by hand: see :func:`_tcfg_tables`);
  ``filter_vocab`` gives a boolean tensor over the vocabulary (its native mask, not
  packed), memoized per parser stack by the library itself.
* llguidance: ``llguidance.grammar_from("gbnf", text)`` (its GBNF to Lark converter),
  an ``LLMatcher`` over ``llguidance.hf.from_tokenizer``; every walk starts from a copy of
  a matcher that consumed nothing; ``llguidance.numpy.fill_next_token_bitmask``.
* xgrammar: ``Grammar.from_ebnf``, ``GrammarCompiler(TokenizerInfo.from_huggingface(...),
  max_threads=1, cache_enabled=False).compile_grammar``, ``GrammarMatcher``,
  ``fill_next_token_bitmask`` into an int32 buffer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from engines import import_problem, installed_version

ENGINES = ("formcast", "transformers-cfg", "llguidance", "xgrammar")
_DISTRIBUTIONS = {
    "formcast": "formcast",
    "transformers-cfg": "transformers-cfg",
    "llguidance": "llguidance",
    "xgrammar": "xgrammar",
}
_MODULES = {
    "formcast": "formcast",
    "transformers-cfg": "transformers_cfg",
    "llguidance": "llguidance",
    "xgrammar": "xgrammar",
}


class Unsupported(Exception):
    """The engine refused to compile the grammar (its own message in ``args[0]``)."""


class Matcher(Protocol):
    def fill(self) -> None:
        """Compute the full mask of the vocabulary at the current position."""

    def allows(self, token: int) -> bool:
        """Whether the mask of the last ``fill`` allows ``token``."""

    def advance(self, token: int) -> None:
        """Consume ``token``; raise ``RuntimeError`` if the engine refuses it."""


class Engine(Protocol):
    name: str
    version: str

    def compile(self, text: str) -> Callable[[], Matcher]:
        """Compile GBNF ``text`` up to its first mask; return a factory of fresh walks.
        Raise :class:`Unsupported` when the engine refuses the grammar."""


def version_of(name: str) -> str:
    return installed_version(_DISTRIBUTIONS[name])


def missing_reason(name: str) -> str | None:
    """Why engine ``name`` cannot run here (``None`` when it can)."""
    return import_problem(_MODULES[name], _DISTRIBUTIONS[name])


def _bit(words: Any, token: int) -> bool:
    return bool((int(words[token // 32]) >> (token % 32)) & 1)


# -- formcast --------------------------------------------------------------------------------
class _CursorMatcher:
    def __init__(self, index: Any, buffer: Any) -> None:
        self._cursor = index.cursor()
        self._buffer = buffer
        self._width = buffer.size * 32

    def fill(self) -> None:
        self._cursor.bitmask(self._width, out=self._buffer)

    def allows(self, token: int) -> bool:
        return _bit(self._buffer, token)

    def advance(self, token: int) -> None:
        self._cursor.advance(token)


class FormcastEngine:
    name = "formcast"

    def __init__(self, vocabulary: Any) -> None:
        self.version = version_of(self.name)
        self._vocabulary = vocabulary
        self._width = (vocabulary.size + 31) // 32 * 32
        self._buffer = np.zeros(self._width // 32, dtype=np.uint32)

    def compile(self, text: str) -> Callable[[], Matcher]:
        import formcast
        from formcast.compiler import clear_memory_cache

        clear_memory_cache()  # a cold compile every time, no index from an earlier one
        try:
            grammar = formcast.Grammar(text)
            index = formcast.compile(grammar, self._vocabulary, cache=False)
        except formcast.SchemaError as e:
            raise Unsupported(str(e)) from e
        index.cursor().bitmask(self._width, out=self._buffer)
        return lambda: _CursorMatcher(index, self._buffer)


# -- transformers-CFG ------------------------------------------------------------------------
class _RecognizerMatcher:
    def __init__(self, recognizer: Any) -> None:
        self._recognizer = recognizer
        self._state = recognizer.string_recognizer.get_initial_parsing_state()
        self._accepts: Any = None

    def fill(self) -> None:
        self._accepts = self._recognizer.filter_vocab(self._state, "cpu")

    def allows(self, token: int) -> bool:
        return bool(self._accepts[token])

    def advance(self, token: int) -> None:
        self._state = self._recognizer._update_state_with_token_id(token, self._state)
        if not self._state.stacks:
            raise RuntimeError(f"transformers-CFG has no parse left after token {token}")


class TransformersCfgEngine:
    name = "transformers-cfg"

    def __init__(self, hf_tokenizer: Any, token_bytes: Sequence[bytes]) -> None:
        self.version = version_of(self.name)
        self._tokenizer = hf_tokenizer
        self._trie, self._mapping = _tcfg_tables(hf_tokenizer, token_bytes)

    def compile(self, text: str) -> Callable[[], Matcher]:
        from transformers_cfg.grammar_utils import IncrementalGrammarConstraint
        from transformers_cfg.token_grammar_recognizer import IncrementalTokenRecognizer

        # its masks are memoized per (recognizer, stack) in one class-wide LRU cache of
        # vocabulary-sized tensors: empty it between grammars to keep memory flat
        IncrementalTokenRecognizer.get_next_token_acceptance_for_single_stack.cache_clear()
        try:
            recognizer = IncrementalGrammarConstraint(
                text, "root", self._tokenizer, trie=self._trie, homomorphism=self._mapping
            )
            _RecognizerMatcher(recognizer).fill()
        except Exception as e:  # its parser raises bare exceptions of several kinds
            raise Unsupported(f"{type(e).__name__}: {e}") from e
        return lambda: _RecognizerMatcher(recognizer)


def _byte_level_alphabet() -> dict[int, str]:
    """GPT-2's byte-level BPE alphabet: byte -> the character standing for it in token
    strings (printable Latin-1 bytes stand for themselves, the others for 256 + n)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    table = {b: chr(b) for b in printable}
    table.update({b: chr(256 + n) for n, b in enumerate(others)})
    return table


def _tcfg_tables(hf_tokenizer: Any, token_bytes: Sequence[bytes]) -> tuple[Any, Any]:
    """transformers-CFG's byte trie and token mapping for a byte-level BPE tokenizer.

    Its own constructors pick the mapping by the tokenizer's class and reload a slow
    tokenizer (or GPT-2's, from the network) for the byte alphabet; transformers 5 gives
    SmolLM2's tokenizer the generic ``TokenizersBackend`` class and has no slow one. So
    the same objects are built here from GPT-2's alphabet, and checked: every token's
    bytes must equal formcast's decoding of the same tokenizer."""
    from types import SimpleNamespace

    from transformers_cfg.tokenization.byte_trie import ByteTrie
    from transformers_cfg.tokenization.middle.ByteProxyMapping import ByteProxyMapping
    from transformers_cfg.tokenization.middle.TokenizerMiddleMapping import (
        GPT2TokenizerMiddleMapping,
        TokenizerMiddleMapping,
    )

    alphabet = _byte_level_alphabet()
    decoder = {c: b for b, c in alphabet.items()}
    mapping = GPT2TokenizerMiddleMapping.__new__(GPT2TokenizerMiddleMapping)
    TokenizerMiddleMapping.__init__(mapping, hf_tokenizer)
    mapping.byte_proxy_mapper = ByteProxyMapping(
        SimpleNamespace(is_fast=False, byte_encoder=alphabet, byte_decoder=decoder)
    )
    trie = ByteTrie()
    special = set(hf_tokenizer.all_special_ids)
    for token_id in range(len(hf_tokenizer.get_vocab())):
        if token_id in special or not token_bytes[token_id]:
            continue  # special and added tokens: no bytes, never allowed
        raw = mapping.map(token_id)
        if raw != token_bytes[token_id]:
            raise RuntimeError(
                f"token {token_id}: {raw!r}, formcast reads {token_bytes[token_id]!r}"
            )
        trie.insert(raw, token_id)
    trie.vocab_size = len(hf_tokenizer.get_vocab())
    return trie, mapping


# -- llguidance ------------------------------------------------------------------------------
class _LLGuidanceMatcher:
    def __init__(self, matcher: Any, buffer: Any) -> None:
        import llguidance.numpy

        self._matcher = matcher
        self._buffer = buffer
        self._words = buffer.reshape(-1)
        self._fill = llguidance.numpy.fill_next_token_bitmask

    def fill(self) -> None:
        self._fill(self._matcher, self._buffer, 0)
        if self._matcher.is_error():
            raise RuntimeError(f"llguidance: {self._matcher.get_error()}"[:300])

    def allows(self, token: int) -> bool:
        return _bit(self._words, token)

    def advance(self, token: int) -> None:
        if not self._matcher.consume_token(token):
            raise RuntimeError(f"llguidance refused token {token}: {self._matcher.get_error()}")


class LLGuidanceEngine:
    name = "llguidance"

    def __init__(self, hf_tokenizer: Any) -> None:
        import llguidance.hf

        self.version = version_of(self.name)
        self._tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer)
        words = (int(self._tokenizer.vocab_size) + 31) // 32
        self._buffer = np.zeros((1, words), dtype=np.int32)

    def compile(self, text: str) -> Callable[[], Matcher]:
        import llguidance

        try:
            grammar = llguidance.grammar_from("gbnf", text)
        except ValueError as e:
            raise Unsupported(str(e)) from e
        # the constructor reports a refusal as an error state, it never raises
        pristine = llguidance.LLMatcher(self._tokenizer, grammar, log_level=0)
        if pristine.is_error():
            raise Unsupported(pristine.get_error())
        first = _LLGuidanceMatcher(pristine.deep_copy(), self._buffer)
        try:
            first.fill()
        except RuntimeError as e:
            raise Unsupported(str(e)) from e
        return lambda: _LLGuidanceMatcher(pristine.deep_copy(), self._buffer)


# -- xgrammar --------------------------------------------------------------------------------
class _XGrammarMatcher:
    def __init__(self, compiled: Any, buffer: Any) -> None:
        import xgrammar

        self._matcher = xgrammar.GrammarMatcher(compiled)
        self._buffer = buffer
        self._words = buffer.reshape(-1)

    def fill(self) -> None:
        self._matcher.fill_next_token_bitmask(self._buffer, 0)

    def allows(self, token: int) -> bool:
        return _bit(self._words, token)

    def advance(self, token: int) -> None:
        if not self._matcher.accept_token(token):
            raise RuntimeError(f"xgrammar refused token {token}")


class XGrammarEngine:
    name = "xgrammar"

    def __init__(self, hf_tokenizer: Any) -> None:
        import xgrammar

        self.version = version_of(self.name)
        width = len(hf_tokenizer)
        info = xgrammar.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=width)
        # one compile thread like every other engine here; no cache (each grammar is
        # compiled cold, every time)
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self._buffer = np.zeros((1, (width + 31) // 32), dtype=np.int32)

    def compile(self, text: str) -> Callable[[], Matcher]:
        import xgrammar

        try:
            grammar = xgrammar.Grammar.from_ebnf(text, root_rule_name="root")
            compiled = self._compiler.compile_grammar(grammar)
        except (RuntimeError, ValueError, TypeError) as e:
            raise Unsupported(str(e).strip()) from e
        _XGrammarMatcher(compiled, self._buffer).fill()
        return lambda: _XGrammarMatcher(compiled, self._buffer)


def load(name: str, hf_tokenizer: Any, vocabulary: Any) -> Engine:
    """The adapter for ``name`` (its tokenizer conversion: seconds, untimed)."""
    if name == "formcast":
        return FormcastEngine(vocabulary)
    if name == "transformers-cfg":
        return TransformersCfgEngine(hf_tokenizer, vocabulary.token_bytes)
    if name == "llguidance":
        return LLGuidanceEngine(hf_tokenizer)
    if name == "xgrammar":
        return XGrammarEngine(hf_tokenizer)
    raise ValueError(f"expected one of {', '.join(ENGINES)}, found {name!r}")
