"""The function decorator: a typed Python function becomes a model-backed one.

:meth:`formcast.Extractor.function` and :func:`formcast.function` wrap a function with
:func:`model_backed`: its docstring is the instruction, its call's arguments are the text
and its return annotation is the output type.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from formcast.errors import InvalidOptionError, SchemaError
from formcast.options import check_options, read_plan

if TYPE_CHECKING:
    from formcast.extractor import Extractor

__all__ = ["model_backed"]


def model_backed(
    extractor: Extractor, fn: Callable[..., Any], options: Mapping[str, Any]
) -> Callable[..., Any]:
    """``fn`` with its body replaced by an extraction of its return type, by ``extractor``
    with ``options``.

    The output type is compiled now (cost: a compile, or a cache hit), so an unsupported
    return type or a budget too small for any complete output fails here, at decoration.
    """
    hints = typing.get_type_hints(fn, include_extras=True)
    if "return" not in hints:
        raise SchemaError(
            f"expected {fn.__qualname__} to have a return annotation (the output type), found none"
        )
    output = hints["return"]
    check_options(options)
    budget = read_plan(options, extractor.max_new_tokens).budget
    index = extractor.compile(
        output,
        mode=options.get("mode"),
        whitespace=options.get("whitespace"),
        from_text=options.get("from_text"),
    )
    # with values copied from the text, the fewest tokens depend on each call's text
    needed = 0 if index.text_slots else index.min_tokens_to_accept(index.initial_state)
    if needed > budget:
        raise InvalidOptionError(
            f"expected max_new_tokens >= {needed} for {fn.__qualname__} (the fewest tokens a "
            f"complete output needs, counted in single bytes), found max_new_tokens={budget}"
        )
    signature = inspect.signature(fn)
    instructions = inspect.getdoc(fn) or f"Compute the result of {fn.__name__}."

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        text = _arguments_text(bound.arguments)
        return extractor.extract(output, text, instructions=instructions, **options)

    return call


def _arguments_text(arguments: Mapping[str, Any]) -> str:
    """A single text argument is the text itself; several become ``name: value`` lines."""
    if len(arguments) == 1:
        (value,) = arguments.values()
        if isinstance(value, str):
            return value
    return "\n".join(f"{name}: {value}" for name, value in arguments.items())
