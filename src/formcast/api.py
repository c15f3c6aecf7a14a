"""Module-level conveniences: thin wrappers over one shared default :class:`Extractor`.

``formcast.extract(Model, text)`` loads SmolLM2-135M-Instruct on first use (converting
it once into the cache folder, ~1 min; later processes load it in ~1 s) and keeps it
for the life of the process. Pass ``model=`` to use another one: a path or model id, or
an :class:`Extractor`.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, ParamSpec, TypeVar, cast, overload

from pydantic import BaseModel
from typing_extensions import Unpack

from formcast.constraint import Grammar, Regex
from formcast.extraction.decorator import Decorator, ModelBacked
from formcast.extraction.extractor import STREAM_EVERY, ExtractionResult, Extractor
from formcast.extraction.options import ExtractManyOptions, ExtractOptions
from formcast.extraction.partial import Partial

__all__ = [
    "ExtractManyWithModel",
    "aextract",
    "aextract_many",
    "astream",
    "extract",
    "extract_many",
    "function",
    "get_default_extractor",
    "stream",
]

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)
ModelChoice = Extractor | str | os.PathLike[str] | None

_default: Extractor | None = None
_default_lock = threading.Lock()
_by_path: dict[str, Extractor] = {}


def get_default_extractor() -> Extractor:
    """The process-wide extractor over the default model (loaded once, thread-safe)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Extractor.default()
        return _default


def _resolve(model: ModelChoice) -> Extractor:
    if model is None:
        return get_default_extractor()
    if isinstance(model, Extractor):
        return model
    key = os.fspath(model)
    with _default_lock:
        if key not in _by_path:
            _by_path[key] = Extractor.from_pretrained(key)
        return _by_path[key]


@overload
def extract(
    output: type[T], text: str, *, model: ModelChoice = None, **options: Unpack[ExtractOptions]
) -> T: ...
@overload
def extract(
    output: Regex | Grammar,
    text: str,
    *,
    model: ModelChoice = None,
    **options: Unpack[ExtractOptions],
) -> str: ...
@overload
def extract(
    output: Any, text: str, *, model: ModelChoice = None, **options: Unpack[ExtractOptions]
) -> Any: ...


def extract(
    output: Any, text: str, *, model: ModelChoice = None, **options: Unpack[ExtractOptions]
) -> Any:
    """Extract one value of type ``output`` from ``text``; see :meth:`Extractor.extract`."""
    return _resolve(model).extract(output, text, **options)


def stream(
    output: type[M],
    text: str,
    *,
    model: ModelChoice = None,
    every: int = STREAM_EVERY,
    **options: Unpack[ExtractOptions],
) -> Iterator[Partial[M] | M]:
    """``formcast.Partial[output]`` instances as the output is written, then the validated
    ``output`` itself; see :meth:`Extractor.stream`."""
    return _resolve(model).stream(output, text, every=every, **options)


async def aextract(
    output: Any, text: str, *, model: ModelChoice = None, **options: Unpack[ExtractOptions]
) -> Any:
    """:func:`extract`, awaited; concurrent calls decode together in one batch (see
    :meth:`Extractor.aextract`). The model is loaded, the first time, in a worker thread."""
    extractor = await asyncio.to_thread(_resolve, model)
    return await extractor.aextract(output, text, **options)


async def astream(
    output: type[M],
    text: str,
    *,
    model: ModelChoice = None,
    every: int = STREAM_EVERY,
    **options: Unpack[ExtractOptions],
) -> AsyncIterator[Partial[M] | M]:
    """:func:`stream`, as an async iterator; see :meth:`Extractor.astream`."""
    extractor = await asyncio.to_thread(_resolve, model)
    async for item in extractor.astream(output, text, every=every, **options):
        yield item


class ExtractManyWithModel(ExtractManyOptions, total=False):
    """The options of :func:`formcast.extract_many`: those of
    :meth:`Extractor.extract_many`, and ``model`` (as for :func:`formcast.extract`)."""

    model: ModelChoice


@overload
def extract_many(
    output: type[T], texts: Iterable[str], **options: Unpack[ExtractManyWithModel]
) -> Iterator[ExtractionResult[T]]: ...
@overload
def extract_many(
    output: Regex | Grammar, texts: Iterable[str], **options: Unpack[ExtractManyWithModel]
) -> Iterator[ExtractionResult[str]]: ...
@overload
def extract_many(
    output: Any, texts: Iterable[str], **options: Unpack[ExtractManyWithModel]
) -> Iterator[ExtractionResult[Any]]: ...


def extract_many(
    output: Any, texts: Iterable[str], **options: Unpack[ExtractManyWithModel]
) -> Iterator[ExtractionResult[Any]]:
    """Extraction with continuous batching, results in input order (or as they end);
    see :meth:`Extractor.extract_many`."""
    model = options.pop("model", None)
    return _resolve(model).extract_many(output, texts, **cast(ExtractManyOptions, options))


async def aextract_many(
    output: Any, texts: Iterable[str], **options: Unpack[ExtractManyWithModel]
) -> AsyncIterator[ExtractionResult[Any]]:
    """:func:`extract_many`, as an async iterator in the shared batch of the async calls;
    see :meth:`Extractor.aextract_many`."""
    model = options.pop("model", None)
    extractor = await asyncio.to_thread(_resolve, model)
    async for result in extractor.aextract_many(output, texts, **cast(ExtractManyOptions, options)):
        yield result


@overload
def function(
    fn: Callable[P, R], /, *, model: ModelChoice = None, **options: Unpack[ExtractOptions]
) -> ModelBacked[P, R]: ...
@overload
def function(
    fn: None = None, /, *, model: ModelChoice = None, **options: Unpack[ExtractOptions]
) -> Decorator: ...


def function(
    fn: Callable[P, R] | None = None,
    /,
    *,
    model: ModelChoice = None,
    **options: Unpack[ExtractOptions],
) -> ModelBacked[P, R] | Decorator:
    """Decorator over the default (or given) model; see :meth:`Extractor.function`.

    The model is loaded when the function is decorated, not when it is called.
    """
    extractor = _resolve(model)
    if fn is None:
        return extractor.function(**options)
    return extractor.function(fn, **options)
