"""Peer engines for maskbench: llguidance, xgrammar and outlines-core behind one protocol.

Each adapter is built once per worker process from the default model's Hugging Face
tokenizer (the engine's own tokenizer conversion, not timed), then judged schema by schema
exactly like formcast in ``maskbench.check_schema``:

* the schema is compiled with JSON Schema semantics (extra properties allowed where the
  schema does not forbid them) and compact JSON (separators ``,`` and ``:``, no free
  whitespace) where the engine lets us choose;
* *time to first mask* runs from the schema document to the first full packed bitmask of
  the vocabulary (compile, matcher, first mask);
* every test instance is serialized with ``maskbench.serialize``, tokenized with the same
  tokenizer, and walked token by token: full mask (timed), is the token allowed, advance;
  a valid instance must be accepted and end complete, an invalid one must be refused.

A compile error is ``unsupported``; an engine error while walking allowed tokens is a
``crash``. Masks are packed ``int32`` words, bit ``i % 32`` of word ``i // 32`` for token
``i``, which is the layout all four engines write.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from engines import import_problem, installed_version
from maskbench import Matcher, SchemaResult, judge_instances, origin_of

PEERS = ("llguidance", "xgrammar", "outlines-core")
_DISTRIBUTIONS = {
    "llguidance": "llguidance",
    "xgrammar": "xgrammar",
    "outlines-core": "outlines-core",
}
_MODULES = {"llguidance": "llguidance", "xgrammar": "xgrammar", "outlines-core": "outlines_core"}

Bitmask = npt.NDArray[np.int32]


class UnsupportedSchema(Exception):
    """The engine refused to compile the schema (its own message in ``args[0]``)."""


class Compiled(Protocol):
    def matcher(self) -> Matcher: ...


class Engine(Protocol):
    name: str
    version: str
    width: int

    def compile(self, schema: Any) -> Compiled:
        """Compile a JSON Schema document; raise UnsupportedSchema when the engine refuses."""


def version_of(name: str) -> str:
    return installed_version(_DISTRIBUTIONS[name])


def missing_reason(name: str) -> str | None:
    """Why ``name`` cannot run here (``None`` when it can)."""
    if name not in PEERS:
        return f"unknown engine {name!r}"
    return import_problem(_MODULES[name], _DISTRIBUTIONS[name])


def allocate(width: int) -> Bitmask:
    return np.zeros((1, (width + 31) // 32), dtype=np.int32)


# -- llguidance ------------------------------------------------------------------------------
class _LLGuidanceMatcher:
    def __init__(self, matcher: Any) -> None:
        import llguidance.numpy

        self._matcher = matcher
        self._fill = llguidance.numpy.fill_next_token_bitmask

    def fill(self, out: Bitmask) -> None:
        self._fill(self._matcher, out, 0)
        if self._matcher.is_error():
            raise RuntimeError(f"llguidance: {self._matcher.get_error()}"[:300])

    def advance(self, token: int) -> None:
        if not self._matcher.consume_token(token):
            raise RuntimeError(f"llguidance refused an allowed token: {self._matcher.get_error()}")

    def accepting(self) -> bool:
        return bool(self._matcher.is_accepting())


class _LLGuidanceCompiled:
    def __init__(self, pristine: Any) -> None:
        self._pristine = pristine  # a matcher that has consumed nothing

    def matcher(self) -> Matcher:
        return _LLGuidanceMatcher(self._pristine.deep_copy())


class LLGuidanceEngine:
    """llguidance: JSON Schema -> grammar, lazy Earley parser with a token trie."""

    name = "llguidance"

    def __init__(self, hf_tokenizer: Any) -> None:
        import llguidance.hf

        self.version = version_of(self.name)
        self._tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer)
        self.width = int(self._tokenizer.vocab_size)

    def compile(self, schema: Any) -> Compiled:
        from llguidance import LLMatcher

        try:
            grammar = LLMatcher.grammar_from_json_schema(
                schema, defaults={"whitespace_flexible": False}
            )
        except ValueError as e:
            raise UnsupportedSchema(str(e)) from e
        # The constructor builds the grammar and reports a refusal as an error state (it never
        # raises); every walk starts from a copy of this matcher.
        matcher = LLMatcher(self._tokenizer, grammar, log_level=0)
        if matcher.is_error():
            raise UnsupportedSchema(matcher.get_error())
        return _LLGuidanceCompiled(matcher)


# -- xgrammar --------------------------------------------------------------------------------
class _XGrammarMatcher:
    def __init__(self, matcher: Any) -> None:
        self._matcher = matcher

    def fill(self, out: Bitmask) -> None:
        self._matcher.fill_next_token_bitmask(out, 0)

    def advance(self, token: int) -> None:
        if not self._matcher.accept_token(token):
            raise RuntimeError(f"xgrammar refused an allowed token {token}")

    def accepting(self) -> bool:
        return bool(self._matcher.is_completed())


class _XGrammarCompiled:
    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled

    def matcher(self) -> Matcher:
        import xgrammar

        return _XGrammarMatcher(xgrammar.GrammarMatcher(self._compiled))


class XGrammarEngine:
    """xgrammar: JSON Schema -> EBNF, pushdown automaton with a precomputed token cache."""

    name = "xgrammar"

    def __init__(self, hf_tokenizer: Any) -> None:
        import xgrammar

        self.version = version_of(self.name)
        self.width = len(hf_tokenizer)
        info = xgrammar.TokenizerInfo.from_huggingface(hf_tokenizer, vocab_size=self.width)
        # one compile thread, like every other engine here; no cache (each schema once)
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def compile(self, schema: Any) -> Compiled:
        try:
            compiled = self._compiler.compile_json_schema(
                json.dumps(schema),
                any_whitespace=False,
                separators=(",", ":"),
                strict_mode=False,  # JSON Schema semantics: extra properties unless forbidden
            )
        except (RuntimeError, ValueError, TypeError) as e:
            raise UnsupportedSchema(str(e).strip()) from e
        return _XGrammarCompiled(compiled)


# -- outlines-core ---------------------------------------------------------------------------
class _OutlinesCoreMatcher:
    def __init__(self, index: Any) -> None:
        from outlines_core import Guide  # type: ignore[import-untyped,unused-ignore]

        self._index = index
        self._guide = Guide(index)

    def fill(self, out: Bitmask) -> None:
        self._guide.write_mask_into(out.ctypes.data, out.size, out.itemsize)

    def advance(self, token: int) -> None:
        self._guide.advance(token, return_tokens=False)

    def accepting(self) -> bool:
        return bool(self._index.is_final_state(self._guide.get_state()))


class _OutlinesCoreCompiled:
    def __init__(self, index: Any) -> None:
        self._index = index

    def matcher(self) -> Matcher:
        return _OutlinesCoreMatcher(self._index)


class OutlinesCoreEngine:
    """outlines-core: JSON Schema -> regex -> eager DFA x vocabulary index."""

    name = "outlines-core"

    def __init__(self, hf_tokenizer: Any, token_bytes: tuple[bytes, ...]) -> None:
        from outlines_core import Vocabulary  # type: ignore[import-untyped,unused-ignore]

        self.version = version_of(self.name)
        self.width = len(token_bytes)
        eos = int(hf_tokenizer.eos_token_id)
        # outlines-core takes the raw bytes of every token; formcast's table is the byte
        # decoding of the same tokenizer (empty for special tokens, which never match).
        table: dict[bytes, list[int]] = {}
        for token_id, raw in enumerate(token_bytes):
            if raw and token_id != eos:
                table.setdefault(raw, []).append(token_id)
        self._vocabulary = Vocabulary(eos, table)

    def compile(self, schema: Any) -> Compiled:
        from outlines_core import Index  # type: ignore[import-untyped,unused-ignore]
        from outlines_core.json_schema import (  # type: ignore[import-untyped,unused-ignore]
            build_regex_from_schema,
        )

        try:
            regex = build_regex_from_schema(json.dumps(schema), "")  # no free whitespace
            index = Index(regex, self._vocabulary)
        except (ValueError, TypeError, RuntimeError) as e:
            raise UnsupportedSchema(str(e).strip()) from e
        return _OutlinesCoreCompiled(index)


def load(name: str, hf_tokenizer: Any, token_bytes: tuple[bytes, ...]) -> Engine:
    """Build the adapter for ``name`` (its tokenizer conversion; seconds, once per worker)."""
    if name == "llguidance":
        return LLGuidanceEngine(hf_tokenizer)
    if name == "xgrammar":
        return XGrammarEngine(hf_tokenizer)
    if name == "outlines-core":
        return OutlinesCoreEngine(hf_tokenizer, token_bytes)
    raise ValueError(f"expected one of {', '.join(PEERS)}, found {name!r}")


# keywords distinctive enough to be found by name in an engine's message (not "not", "if")
_KEYWORDS = (
    "oneOf",
    "anyOf",
    "allOf",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "propertyNames",
    "additionalProperties",
    "unevaluatedProperties",
    "uniqueItems",
    "minContains",
    "maxContains",
    "multipleOf",
    "$ref",
)


_ANNOTATIONS = frozenset({"description", "default", "title", "examples", "$comment"})


def refused_keyword(message: str) -> str:
    """The JSON Schema keyword an engine's refusal names, for the "most common" line."""
    structure = re.match(r"Unsupported JSON Schema structure (.*)", message)
    if structure:  # outlines-core quotes the subschema it cannot translate
        try:
            subschema = json.loads(structure.group(1).strip())
        except ValueError:
            subschema = None
        if subschema is False:
            return "false schema"
        if isinstance(subschema, dict):
            keys = [k for k in subschema if k not in _ANNOTATIONS]
            return keys[0] if keys else "annotations only"
    if message.startswith("The vocabulary provided is incompatible"):
        return "other: regex/vocabulary"
    quoted = re.search(r"""(?:keys?|keywords?):? *\[?["'`]([$\w]+)["'`]""", message)
    if quoted:
        return quoted.group(1)
    if re.search(r"\b[Ff]ormat\b", message.split("{", 1)[0]):
        return "format"
    if "patternPropert" in message:
        return "patternProperties"
    positions = {
        keyword: found.start()
        for keyword in _KEYWORDS
        if (found := re.search(rf"(?<![\w$]){re.escape(keyword)}(?!\w)", message))
    }
    if positions:
        return min(positions, key=positions.__getitem__)
    return "other: " + " ".join(message.split()[:3])[:32]


# -- the same protocol as maskbench.check_schema ---------------------------------------------
def check_schema(path: Path, tokenizer: Any, engine: Engine) -> SchemaResult:
    """Compile one schema with ``engine`` and judge all its instances."""
    document = json.loads(path.read_text())
    schema, tests = document["schema"], document.get("tests", [])
    result = SchemaResult(path.name, origin_of(path.name), "pass", instances=len(tests))
    buffer = allocate(engine.width)
    started = time.perf_counter()
    try:
        compiled = engine.compile(schema)
        compiled.matcher().fill(buffer)
    except UnsupportedSchema as e:
        result.status, result.detail = "unsupported", str(e)[:300]
        result.keyword = refused_keyword(str(e))
        return result
    result.compile_ms = (time.perf_counter() - started) * 1000
    return judge_instances(result, schema, tests, tokenizer, compiled.matcher, buffer)
