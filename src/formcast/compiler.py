"""Compile an output type for a tokenizer: output type -> regex -> lazy byte automaton -> index.

This is the low-level entry point::

    index = formcast.compile(Receipt, tokenizer)     # immutable, picklable, shareable
    cursor = index.cursor()                          # cheap, one per sequence

Compiled indexes are memoised in-process by (constraint, options, vocabulary fingerprint),
so compiling the same type twice for the same tokenizer is a dictionary lookup, and on disk
(:mod:`formcast.cache`), so that another process skips the regex and the automaton too.
An index compiled in one process and shipped to another (pickled) is handed to
:func:`adopt` there, so that ``compile`` returns it instead of compiling again.
"""

from __future__ import annotations

import reprlib
import threading
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

from formcast import cache as disk_cache
from formcast.automaton import LazyAutomaton, PushdownAutomaton, compile_automaton
from formcast.cache import CacheSetting
from formcast.constraint import (
    DEFAULT_COMPILE_OPTIONS,
    CompileOptions,
    Grammar,
    OutputSpec,
    Regex,
    output_spec,
)
from formcast.errors import (
    InvalidOptionError,
    recording_warnings,
    warning_data,
    warning_from_data,
)
from formcast.index import TokenIndex
from formcast.limits import DEFAULT_LIMITS, Limits
from formcast.schema import Mode
from formcast.text import FromText, text_slots
from formcast.vocabulary import Vocabulary

__all__ = ["adopt", "clear_memory_cache", "compile", "compile_spec", "vocabulary_of"]

_INDEX_CACHE_SIZE = 128  # keys; an index has up to two (its source and its regex)
_index_cache: OrderedDict[tuple[str, str, str], TokenIndex] = OrderedDict()
_vocabularies: dict[int, tuple[Any, Vocabulary]] = {}
_lock = threading.Lock()


def vocabulary_of(tokenizer: Any) -> Vocabulary:
    """The :class:`Vocabulary` of a tokenizer (or the vocabulary itself), memoised per
    tokenizer object. First call ~0.3 s for a 49k-token vocabulary."""
    if isinstance(tokenizer, Vocabulary):
        return tokenizer
    if not callable(getattr(tokenizer, "get_vocab", None)):
        hint = (
            f" (to load one by name: transformers.AutoTokenizer.from_pretrained({tokenizer!r}))"
            if isinstance(tokenizer, str)
            else ""
        )
        raise InvalidOptionError(
            "expected a Hugging Face tokenizer (an object with get_vocab(), such as "
            "transformers.AutoTokenizer.from_pretrained(...)) or a formcast Vocabulary, "
            f"found {type(tokenizer).__name__} {tokenizer!r:.60}{hint}"
        )
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
    max_recursion_depth: int | None = None,
    from_text: FromText | bool | None = None,
    cache: CacheSetting = None,
    limits: Limits | None = None,
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
        max_recursion_depth: ``None`` (the default): recursive schemas are exact at any
            depth (a pushdown automaton); an int unrolls them that many times instead (a
            bound on nesting, compiled to a finite automaton). Schemas that do not
            recurse compile the same either way.
        from_text: copy every plain string value (``str``, ``Optional[str]``, without a
            format, pattern or enum) from the request's text; ``True`` for the default
            :class:`formcast.FromText` options, or a ``FromText``. Fields annotated with
            their own ``FromText`` keep theirs. An index with such values needs the
            request's text: ``index.cursor(text=...)``.
        limits: the bounds on the work of this compile (:class:`formcast.limits.Limits`;
            ``None``: the defaults). Raising one accepts larger schemas at a cost in
            time and memory; indexes compiled with other limits are other cache entries.
        cache: the disk cache (:mod:`formcast.cache`): ``None`` follows
            ``$FORMCAST_DISK_CACHE`` (on by default), ``False`` neither reads nor writes
            it, ``True`` uses the default folder, a path uses that folder as the cache
            root.

    Cost: regex construction and automaton compilation on the first call for a given
    type and vocabulary (milliseconds to ~1 s for large schemas); with the disk cache on,
    that first call also builds the initial state's row and writes the entry (plain data,
    ~0.1-10 MB). Later calls hit an in-process cache; the first call of another process
    loads the entry (about a millisecond for typical schemas, plus the schema's canonical
    key: ``model_json_schema()`` and one ``json.dumps``). Index rows are built lazily
    while decoding; :func:`formcast.save_to_disk_cache` stores the ones built since. A
    :class:`formcast.Grammar` also builds up to ``limits.grammar_rows_at_compile`` rows of
    its byte automaton at compile (up to ~50 ms), so that its first masks do not.

    A recursive schema (with the default ``max_recursion_depth=None``), a grammar, or a
    :class:`formcast.Regex` whose definitions recurse compiles to a
    :class:`~formcast.automaton.PushdownAutomaton`; such an index is stored on disk too,
    with its machines, its sets of stacks and the rows built so far, so another process
    loads it instead of parsing the grammar and running its checks again
    (``benchmarks/cache.py --recursive`` measures both ways).

    Raises:
        SchemaError: the output type cannot be read as a constraint.
        UnsupportedSchemaError: the schema uses a keyword that cannot be enforced exactly.
        InvalidOptionError: ``cache`` is not None, a bool or a folder path.
    """
    folder = disk_cache.resolve(cache)
    vocabulary = vocabulary_of(tokenizer)
    options = CompileOptions(
        mode=mode,
        whitespace=whitespace,
        max_recursion_depth=max_recursion_depth,
        from_text=from_text,
        limits=DEFAULT_LIMITS if limits is None else limits,
    )
    return _compile(output_spec(output, options), vocabulary, folder)


def compile_spec(spec: OutputSpec, tokenizer: Any, *, cache: CacheSetting = None) -> TokenIndex:
    """:func:`compile` of an output type already read (:func:`output_spec`), with the
    options it was read with: the extractor reads a call's output type once, compiles it
    here and keeps the spec for its prompt and its parser."""
    folder = disk_cache.resolve(cache)
    return _compile(spec, vocabulary_of(tokenizer), folder)


def _compile(spec: OutputSpec, vocabulary: Vocabulary, folder: Path | None) -> TokenIndex:
    output, options = spec.given, spec.options
    fingerprint = vocabulary.fingerprint
    source = spec.key
    entry = ""
    if source is None:
        folder = None  # no exact key: the disk cache cannot be used
    else:
        found = _remembered(("source", source, fingerprint))
        if found is not None:
            return _said_again(found)
        if folder is not None:
            entry = disk_cache.entry_key(source, fingerprint)
            index = disk_cache.load(folder, entry, vocabulary)
            if index is not None:
                index.description = _describe(output)
                _remember(("source", source, fingerprint), index)
                return _said_again(index)
    with recording_warnings() as emitted:
        regex = spec.regex
    index = _remembered(("regex", spec.regex_key, fingerprint))
    if index is None:
        # a translated schema's recursive sub-schema without a finite value matches
        # nothing (JSON Schema's meaning); in a regex or grammar written so it is a mistake
        from_schema = not isinstance(output, (Regex, Grammar))
        automaton = compile_automaton(regex, options.limits, drop_empty_definitions=from_schema)
        if isinstance(automaton, PushdownAutomaton) and text_slots(regex):
            raise InvalidOptionError(
                "expected FromText values outside exact recursion, found both in "
                f"{_describe(output)!r}: values copied from a text are bound to a finite "
                "automaton only; set max_recursion_depth (and Limits.any_value_depth) to an int"
            )
        if isinstance(output, Grammar):
            _build_rows_ahead(automaton, options.limits.grammar_rows_at_compile)
        index = TokenIndex(automaton, vocabulary, description=_describe(output))
        index.build_warnings = tuple(warning_data(w) for w in emitted)
    if folder is not None:
        index.row(index.initial_state)  # so that a hit answers the first mask at once
        disk_cache.store(folder, entry, index)
    _remember(("regex", spec.regex_key, fingerprint), index)
    if source is not None:
        _remember(("source", source, fingerprint), index)
    return index


def _build_rows_ahead(automaton: LazyAutomaton | PushdownAutomaton, limit: int) -> None:
    """Build up to ``limit`` rows of a grammar's automaton now (see
    :attr:`Limits.grammar_rows_at_compile <formcast.limits.Limits.grammar_rows_at_compile>`):
    its own, or its machines' for a recursive grammar."""
    if isinstance(automaton, PushdownAutomaton):
        automaton.build_machine_rows(limit)
    else:
        automaton.build_breadth_first(limit)


def _said_again(index: TokenIndex) -> TokenIndex:
    """``index``, after emitting again the warnings its compilation emitted (a cache hit
    skips the compilation that said them; the caller's warning filters decide as usual)."""
    for data in index.build_warnings:
        warnings.warn(warning_from_data(data), stacklevel=3)
    return index


def adopt(
    index: TokenIndex,
    output: Any,
    tokenizer: Any,
    options: CompileOptions = DEFAULT_COMPILE_OPTIONS,
) -> None:
    """Make :func:`compile` return ``index`` for ``output`` in this process.

    For an index compiled in another process and shipped here (pickled: a Ray actor, a
    worker of a process pool), so that this process does not compile it again. Later
    calls of ``compile(output, tokenizer, ...)`` with the keyword options that
    ``options`` holds (:class:`formcast.constraint.CompileOptions`), and so every
    extraction of ``output`` by an :class:`~formcast.Extractor` over ``tokenizer``, get
    ``index`` from the in-process cache. The caller vouches that ``index`` was compiled
    from ``output`` with these options; only the tokenizer is checked.

    Cost: the constraint's key (``model_json_schema()`` and one ``json.dumps``); for an
    output with no exact key (a mapping holding values that are not plain JSON), the
    regex is built as well, but neither the automaton nor the index.

    Raises:
        InvalidOptionError: ``index`` was compiled for another vocabulary.
    """
    vocabulary = vocabulary_of(tokenizer)
    fingerprint = vocabulary.fingerprint
    if index.vocabulary.fingerprint != fingerprint:
        raise InvalidOptionError(
            f"expected an index compiled for this tokenizer (vocabulary {fingerprint[:12]}), "
            f"found one compiled for vocabulary {index.vocabulary.fingerprint[:12]}"
        )
    spec = output_spec(output, options)
    if spec.key is not None:
        _remember(("source", spec.key, fingerprint), index)
    else:
        _remember(("regex", spec.regex_key, fingerprint), index)


def clear_memory_cache() -> None:
    """Forget the indexes compiled in this process (the disk cache is left alone)."""
    with _lock:
        _index_cache.clear()


def _remembered(key: tuple[str, str, str]) -> TokenIndex | None:
    with _lock:
        found = _index_cache.get(key)
        if found is not None:
            _index_cache.move_to_end(key)
        return found


def _remember(key: tuple[str, str, str], index: TokenIndex) -> None:
    with _lock:
        _index_cache[key] = index
        _index_cache.move_to_end(key)
        while len(_index_cache) > _INDEX_CACHE_SIZE:
            _index_cache.popitem(last=False)


def _describe(output: Any) -> str:
    """A name for ``output`` in messages: its ``__name__``, else the start of its repr
    (long containers cut by :data:`_SHORT_REPR`, so that an ``enum`` of 100,000 names is
    not written out in full to keep 120 characters)."""
    name = getattr(output, "__name__", None)
    return name if isinstance(name, str) else _SHORT_REPR.repr(output)[:120]


# limits that fill the 120 characters kept and no more (an 800 KB Kubernetes schema: 0.15
# ms, against 2.7 ms when 8 levels of 64 items were written out to be cut)
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxlist = _SHORT_REPR.maxtuple = _SHORT_REPR.maxdict = 12
_SHORT_REPR.maxset = _SHORT_REPR.maxfrozenset = _SHORT_REPR.maxdeque = 12
_SHORT_REPR.maxstring = _SHORT_REPR.maxlong = _SHORT_REPR.maxother = 120
