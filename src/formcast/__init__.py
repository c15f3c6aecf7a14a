"""formcast: text in, validated Pydantic objects out, from a local language model.

    import formcast
    receipt = formcast.extract(Receipt, ocr_text)   # -> Receipt, never malformed

The pure stages (schema, regex, automaton, vocabulary, index, cursor) import without
torch; the decoding loop and the extractor load torch and transformers on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from formcast.errors import (
    ContextLengthError,
    EmptyInputError,
    ExtractionRuntimeError,
    FormcastError,
    FormcastWarning,
    GrammarError,
    InvalidOptionError,
    InvalidRowError,
    ModelLoadError,
    NoTextValueError,
    OutputValidationError,
    SchemaError,
    TokenNotAllowedError,
    UnknownFormatWarning,
    UnsupportedSchemaError,
    UserError,
)

if TYPE_CHECKING:
    from formcast.annotations import Choice, Regex
    from formcast.api import (
        aextract,
        aextract_many,
        astream,
        extract,
        extract_many,
        function,
        get_default_extractor,
        stream,
    )
    from formcast.automaton import LazyAutomaton, PushdownAutomaton
    from formcast.cache import clear_disk_cache, save_to_disk_cache
    from formcast.compiler import compile
    from formcast.cursor import Cursor
    from formcast.decode.logits import FormcastLogitsProcessor, LoopGuard, SamplingOptions
    from formcast.extraction.extractor import ExtractionResult, Extractor, PromptTemplate
    from formcast.extraction.partial import Partial
    from formcast.grammar import Grammar
    from formcast.index import TokenIndex
    from formcast.limits import Limits
    from formcast.regex.translator import schema_to_regex
    from formcast.text import FromText
    from formcast.vocabulary import Vocabulary

__version__ = "0.1.0"

_LAZY = {
    "aextract": "formcast.api",
    "aextract_many": "formcast.api",
    "astream": "formcast.api",
    "extract": "formcast.api",
    "extract_many": "formcast.api",
    "function": "formcast.api",
    "get_default_extractor": "formcast.api",
    "stream": "formcast.api",
    "compile": "formcast.compiler",
    "clear_disk_cache": "formcast.cache",
    "Choice": "formcast.annotations",
    "save_to_disk_cache": "formcast.cache",
    "Regex": "formcast.annotations",
    "Grammar": "formcast.grammar",
    "Limits": "formcast.limits",
    "FormcastLogitsProcessor": "formcast.decode.logits",
    "LoopGuard": "formcast.decode.logits",
    "SamplingOptions": "formcast.decode.logits",
    "ExtractionResult": "formcast.extraction.extractor",
    "Extractor": "formcast.extraction.extractor",
    "PromptTemplate": "formcast.extraction.extractor",
    "Partial": "formcast.extraction.partial",
    "LazyAutomaton": "formcast.automaton",
    "PushdownAutomaton": "formcast.automaton",
    "Cursor": "formcast.cursor",
    "FromText": "formcast.text",
    "TokenIndex": "formcast.index",
    "schema_to_regex": "formcast.regex.translator",
    "Vocabulary": "formcast.vocabulary",
}

__all__ = [
    "Choice",
    "ContextLengthError",
    "Cursor",
    "EmptyInputError",
    "ExtractionResult",
    "ExtractionRuntimeError",
    "Extractor",
    "FormcastError",
    "FormcastLogitsProcessor",
    "FormcastWarning",
    "FromText",
    "Grammar",
    "GrammarError",
    "InvalidOptionError",
    "InvalidRowError",
    "LazyAutomaton",
    "Limits",
    "LoopGuard",
    "ModelLoadError",
    "NoTextValueError",
    "OutputValidationError",
    "Partial",
    "PromptTemplate",
    "PushdownAutomaton",
    "Regex",
    "SamplingOptions",
    "SchemaError",
    "TokenIndex",
    "TokenNotAllowedError",
    "UnknownFormatWarning",
    "UnsupportedSchemaError",
    "UserError",
    "Vocabulary",
    "aextract",
    "aextract_many",
    "astream",
    "clear_disk_cache",
    "compile",
    "extract",
    "extract_many",
    "function",
    "get_default_extractor",
    "save_to_disk_cache",
    "schema_to_regex",
    "stream",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'formcast' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
