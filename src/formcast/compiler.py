"""Compile an output type for a tokenizer: output type -> regex -> lazy byte automaton -> index.

This is the low-level entry point::

    index = formcast.compile(Receipt, tokenizer)     # immutable, picklable, shareable
    cursor = index.cursor()                          # cheap, one per sequence

Compiled indexes are memoised in-process by (regex, options, vocabulary fingerprint), so
compiling the same type twice for the same tokenizer is a dictionary lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from formcast.automaton import LazyAutomaton
from formcast.constraint import output_spec
from formcast.index import TokenIndex
from formcast.schema import Mode
from formcast.vocabulary import Vocabulary

__all__ = ["compile", "vocabulary_of"]

_INDEX_CACHE_SIZE = 64
_index_cache: OrderedDict[tuple[str, str], TokenIndex] = OrderedDict()
_vocabularies: dict[int, tuple[Any, Vocabulary]] = {}
_lock = threading.Lock()


def vocabulary_of(tokenizer: Any) -> Vocabulary:
    """The :class:`Vocabulary` of a tokenizer (or the vocabulary itself), memoised per
    tokenizer object. First call ~0.3 s for a 49k-token vocabulary."""
    if isinstance(tokenizer, Vocabulary):
        return tokenizer
    with _lock:
        known = _vocabularies.get(id(tokenizer))
        if known is not None and known[0] is tokenizer:
            return known[1]
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    with _lock:
        _vocabularies[id(tokenizer)] = (tokenizer, vocabulary)
    return vocabulary


def compile(
    output: Any,
    tokenizer: Any,
    *,
    mode: Mode = "generation",
    whitespace: bool | int = False,
    max_recursion_depth: int = 3,
) -> TokenIndex:
    """Compile ``output`` for ``tokenizer`` into a :class:`TokenIndex`.

    Args:
        output: a Pydantic model class, a JSON Schema (dict or JSON string), any type
            pydantic validates (``int``, ``list[Model]``, ``Literal[...]``, an Enum), or
            :class:`formcast.Regex`.
        tokenizer: a Hugging Face tokenizer, or a :class:`Vocabulary`.
        mode: ``"generation"`` (declared properties only, in order) or
            ``"specification"`` (JSON Schema semantics; for third-party schemas).
        whitespace: ``False`` for compact JSON; ``True`` or an int to allow bounded
            whitespace between JSON tokens.
        max_recursion_depth: how deep recursive schemas are unrolled.

    Cost: regex construction and automaton compilation on the first call for a given
    type and vocabulary (milliseconds to ~1 s for large schemas); index rows are built
    lazily while decoding. Later calls hit an in-process cache.

    Raises:
        SchemaError: the output type cannot be read as a constraint.
        UnsupportedSchemaError: the schema uses a keyword that cannot be enforced exactly.
    """
    vocabulary = vocabulary_of(tokenizer)
    spec = output_spec(
        output, mode=mode, whitespace=whitespace, max_recursion_depth=max_recursion_depth
    )
    key = (spec.key, vocabulary.fingerprint)
    with _lock:
        cached = _index_cache.get(key)
        if cached is not None:
            _index_cache.move_to_end(key)
            return cached
    index = TokenIndex(LazyAutomaton(spec.regex), vocabulary, description=_describe(output))
    with _lock:
        _index_cache[key] = index
        while len(_index_cache) > _INDEX_CACHE_SIZE:
            _index_cache.popitem(last=False)
    return index


def _describe(output: Any) -> str:
    name = getattr(output, "__name__", None)
    return name if isinstance(name, str) else repr(output)[:120]
