"""Module-level conveniences: thin wrappers over one shared default :class:`Extractor`.

``formcast.extract(Model, text)`` loads SmolLM2-135M-Instruct on first use (converting
it once into the cache folder, ~1 min; later processes load it in ~1 s) and keeps it
for the life of the process. Pass ``model=`` to use another one: a path or model id, or
an :class:`Extractor`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, overload

from formcast.constraint import Regex
from formcast.extractor import ExtractionResult, Extractor

__all__ = ["extract", "extract_many", "function", "get_default_extractor"]

T = TypeVar("T")
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
def extract(output: type[T], text: str, *, model: ModelChoice = None, **options: Any) -> T: ...
@overload
def extract(output: Regex, text: str, *, model: ModelChoice = None, **options: Any) -> str: ...
@overload
def extract(output: Any, text: str, *, model: ModelChoice = None, **options: Any) -> Any: ...


def extract(output: Any, text: str, *, model: ModelChoice = None, **options: Any) -> Any:
    """Extract one value of type ``output`` from ``text``; see :meth:`Extractor.extract`."""
    return _resolve(model).extract(output, text, **options)


def extract_many(
    output: Any,
    texts: Iterable[str],
    *,
    model: ModelChoice = None,
    batch_size: int = 8,
    progress: bool = True,
    **options: Any,
) -> Iterator[ExtractionResult[Any]]:
    """Batched extraction, results in input order; see :meth:`Extractor.extract_many`."""
    return _resolve(model).extract_many(
        output, texts, batch_size=batch_size, progress=progress, **options
    )


def function(
    fn: Callable[..., Any] | None = None, /, *, model: ModelChoice = None, **options: Any
) -> Any:
    """Decorator over the default (or given) model; see :meth:`Extractor.function`."""
    return (
        _resolve(model).function(fn, **options)
        if fn is not None
        else (lambda f: _resolve(model).function(f, **options))
    )
