"""The function decorator: a typed Python function becomes a model-backed one.

:meth:`formcast.Extractor.function` and :func:`formcast.function` wrap a function with
:func:`model_backed`: its docstring is the instruction, its call's arguments are the text
and its return annotation is the output type. The wrapper keeps the function's signature,
for callers and for type checkers.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from formcast.errors import InvalidOptionError, SchemaError
from formcast.extraction.options import ExtractOptions, check_options, read_plan

if TYPE_CHECKING:
    # for annotations only: formcast.extraction.extractor imports this module for Extractor.function
    from formcast.extraction.extractor import Extractor

__all__ = ["Decorator", "ModelBacked", "decorator_of", "model_backed"]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class ModelBacked(Protocol[P, R_co]):
    """A model-backed function: called, it returns the extracted value; its
    ``stream(...)``, called with the same arguments, yields ``formcast.Partial`` instances
    of the return type as the output is written, then the value itself (see
    :meth:`formcast.Extractor.stream`; the return type must be a Pydantic model). A
    model-backed ``async def`` is a coroutine function (:meth:`formcast.Extractor.aextract`:
    concurrent calls decode in one batch) and its ``stream(...)`` an async iterator."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def stream(self, *args: P.args, **kwargs: P.kwargs) -> Iterator[Any]: ...


class Decorator(Protocol):
    """What ``@extractor.function(**options)`` returns: it turns a function into a
    model-backed one with the same signature."""

    def __call__(self, fn: Callable[P, R], /) -> ModelBacked[P, R]: ...


def decorator_of(extractor: Extractor, options: ExtractOptions) -> Decorator:
    """The decorator that applies :func:`model_backed` with ``extractor`` and ``options``."""

    def decorate(fn: Callable[P, R], /) -> ModelBacked[P, R]:
        return model_backed(extractor, fn, options)

    return decorate


def model_backed(
    extractor: Extractor, fn: Callable[P, R], options: ExtractOptions
) -> ModelBacked[P, R]:
    """``fn`` with its body replaced by an extraction of its return type, by ``extractor``
    with ``options``. The instruction is the ``instructions`` option, else ``fn``'s
    docstring, else a sentence naming ``fn``.

    The output type is compiled now (cost: a compile, or a cache hit), so an unsupported
    return type or a budget too small for any complete output fails here, at decoration.

    Raises:
        SchemaError: ``fn`` has no return annotation, or one formcast cannot compile.
        InvalidOptionError: an option is unknown or out of range, or ``max_new_tokens``
            is below the fewest tokens a complete output needs.
    """
    hints = typing.get_type_hints(fn, include_extras=True)
    if "return" not in hints:
        raise SchemaError(
            f"expected {fn.__qualname__} to have a return annotation (the output type), found none"
        )
    output = hints["return"]
    check_options(options)
    plan = read_plan(options, extractor.max_new_tokens)
    index = extractor.compile(
        output,
        mode=options.get("mode"),
        whitespace=options.get("whitespace"),
        from_text=options.get("from_text"),
        max_recursion_depth=options.get("max_recursion_depth", ...),
    )
    # with values copied from the text, the fewest tokens depend on each call's text
    needed = 0 if index.text_slots else index.min_tokens_to_accept(index.initial_state)
    if needed > plan.budget:
        raise InvalidOptionError(
            f"expected max_new_tokens >= {needed} for {fn.__qualname__} (the fewest tokens a "
            f"complete output needs, counted in single bytes), found max_new_tokens={plan.budget}"
        )
    signature = inspect.signature(fn)
    call_options: ExtractOptions = {
        **options,
        "instructions": plan.instructions
        or inspect.getdoc(fn)
        or f"Compute the result of {fn.__name__}.",
    }

    def text_of(*args: Any, **kwargs: Any) -> str:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return _arguments_text(bound.arguments)

    if inspect.iscoroutinefunction(fn):
        return _awaitable(extractor, typing.cast(Callable[P, R], fn), output, text_of, call_options)

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return typing.cast(R, extractor.extract(output, text_of(*args, **kwargs), **call_options))

    def stream(*args: P.args, **kwargs: P.kwargs) -> Iterator[Any]:
        return extractor.stream(output, text_of(*args, **kwargs), **call_options)

    call.stream = stream  # type: ignore[attr-defined]
    return typing.cast(ModelBacked[P, R], call)


def _awaitable(
    extractor: Extractor,
    fn: Callable[P, R],
    output: Any,
    text_of: Callable[..., str],
    options: ExtractOptions,
) -> ModelBacked[P, R]:
    """The model-backed version of an ``async def``: a coroutine function awaiting
    :meth:`~formcast.Extractor.aextract` (concurrent calls share one batch); its
    ``stream(...)`` is :meth:`~formcast.Extractor.astream`, an async iterator."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return await extractor.aextract(output, text_of(*args, **kwargs), **options)

    def stream(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return extractor.astream(output, text_of(*args, **kwargs), **options)

    call.stream = stream  # type: ignore[attr-defined]
    return typing.cast(ModelBacked[P, R], call)


def _arguments_text(arguments: Mapping[str, Any]) -> str:
    """A single text argument is the text itself; several become ``name: value`` lines."""
    if len(arguments) == 1:
        (value,) = arguments.values()
        if isinstance(value, str):
            return value
    return "\n".join(f"{name}: {value}" for name, value in arguments.items())
