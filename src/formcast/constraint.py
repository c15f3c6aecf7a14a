"""Output types -> a regular expression, and the raw text -> a Python value.

An *output type* is what a user asks for: a Pydantic model class, any type pydantic can
validate (``int``, ``list[Item]``, ``Literal["a", "b"]``, an ``Enum``, ``date``,
``Optional[...]``), a JSON Schema (dict or JSON string), a :class:`Regex` or a
:class:`~formcast.grammar.Grammar` (also as ``Annotated[str, Regex(...)]`` or
``Annotated[str, Grammar(...)]``, a function's return annotation).
:func:`output_spec` reads it once into an :class:`OutputSpec`: its cache key, the regex
that constrains generation, the JSON Schema shown in the prompt, and the parser that
turns the generated text back into a value. The compiler and the extractor share it.

Types that are not Pydantic models are wrapped in a one-field object
``{"result": ...}`` so the model always writes a JSON object, and unwrapped on return.
"""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import pydantic
from pydantic import BaseModel

from formcast.annotations import Regex
from formcast.errors import OutputValidationError, SchemaError
from formcast.grammar import Grammar
from formcast.regex.translator import (
    DEFAULT_COMPILE_OPTIONS,
    CompileOptions,
    loaded_schema_to_regex,
)
from formcast.schema import load_schema, pydantic_schema, remember_pydantic_schema
from formcast.text import FromText

# CompileOptions lives with the translation it configures; exported here for the compiler.
__all__ = [
    "DEFAULT_COMPILE_OPTIONS",
    "CompileOptions",
    "Grammar",
    "OutputSpec",
    "Regex",
    "output_spec",
]

#: Name of the field that wraps non-object output types (see ``_wrap``).
RESULT_FIELD = "result"


@dataclass(frozen=True, eq=False)
class OutputSpec:
    """One output type, read once: what compiling it and extracting with it need.

    :func:`output_spec` reads the type without building anything costly; the cache key,
    the JSON Schema shown in the prompt and the regex are computed when first asked for,
    then kept (a compiled index may come from a cache, and then no regex is built).

    Attributes:
        given: the output type as it was given.
        output: the constraint read from it: a :class:`Regex`, a
            :class:`~formcast.grammar.Grammar` (also from ``Annotated[str, ...]``), or the
            JSON output type as given.
        options: the options it is compiled with.
        parse: raw generated text -> value; raises :class:`OutputValidationError`.
        is_json: whether the output is JSON text.
        pattern: the pattern of a :class:`Regex` output, else None.
        grammar: the :class:`~formcast.grammar.Grammar` of a grammar output, else None.
        model: the Pydantic model that validates the output (the output type itself, or
            the ``{"result": ...}`` wrapper of a non-model type), else None.
    """

    given: Any
    output: Any
    options: CompileOptions
    parse: Callable[[str], Any]
    is_json: bool
    pattern: str | None = None
    grammar: Grammar | None = None
    model: type[BaseModel] | None = None
    source: Any = None  # what load_schema reads, for a JSON output

    @functools.cached_property
    def key(self) -> str | None:
        """A canonical text of the constraint, without its regex: the disk cache's key.

        The key is compact JSON of the source document (a Pydantic model's
        ``model_json_schema()``, a JSON Schema as given, a regex's pattern) and of the
        options. Object keys keep their order, since property order decides the order of
        the generated output. ``None`` when no exact key can be given (a mapping holding
        values that are not plain JSON, such as tuples or non-string keys, or a model
        whose schema cannot be generated); the caller then builds the regex as usual,
        which raises if the output is unusable. Equal keys give equal regexes for the
        same formcast code.

        Cost: the schema generation and one ``json.dumps`` (~0.1 ms for a small model,
        ~5-10 ms for a 300 KB schema); no regex is built.
        """
        return _constraint_key(self.output, self.options)

    @functools.cached_property
    def json_schema(self) -> dict[str, Any] | None:
        """The schema shown in the prompt (None for a regex or a grammar). Cost: schema
        generation and the metaschema check (~ms)."""
        if not self.is_json:
            return None
        schema = load_schema(self.source)
        return schema if isinstance(schema, dict) else None

    @property
    def regex(self) -> str:
        """The constraint, over characters. Cost: schema generation plus regex
        construction (~ms), once.

        ``from_text`` copies every plain string value from the request's text (see
        :func:`formcast.regex.translator.schema_to_regex`); it is refused for a
        :class:`Regex` and a :class:`~formcast.grammar.Grammar`. For a grammar, ``mode``
        and ``whitespace`` apply to the JSON Schemas and models it embeds."""
        return self._compiled[0]

    @property
    def regex_key(self) -> str:
        """A hashable key of the compiled constraint: its regex plus the options."""
        return self._compiled[1]

    @functools.cached_property
    def _compiled(self) -> tuple[str, str]:
        options, output = self.options, self.output
        limits = options.limits
        if isinstance(output, Regex | Grammar) and options.from_text:
            raise SchemaError(
                f"expected a JSON output type with from_text, found formcast."
                f"{type(output).__name__}: its output cannot copy values from the text"
            )
        if isinstance(output, Regex):
            key = f"regex:{output.pattern}" + (f"|limits:{limits.key()}" if limits.key() else "")
            return output.pattern, key
        if isinstance(output, Grammar):
            regex = output.regex(mode=options.mode, whitespace=options.whitespace, limits=limits)
            key = f"regex:{regex}" + (f"|limits:{limits.key()}" if limits.key() else "")
            return regex, key
        key_options: dict[str, Any] = {
            "mode": options.mode,
            "whitespace": options.whitespace,
            "max_recursion_depth": options.max_recursion_depth,
        }
        if limits.key():
            key_options["limits"] = limits.key()
        regex = loaded_schema_to_regex(load_schema(self.source), options)
        return regex, _key(regex, key_options)


def output_spec(output: Any, options: CompileOptions = DEFAULT_COMPILE_OPTIONS) -> OutputSpec:
    """Read an output type into its :class:`OutputSpec`. Cost: for a type that is not a
    Pydantic model, its one-field wrapper model (memoised); nothing else is built.

    Raises:
        SchemaError: ``Annotated`` holds a misplaced Regex or Grammar, or pydantic cannot
            handle the type.
    """
    read = text_constraint(output)
    if isinstance(read, Regex):
        return OutputSpec(output, read, options, str, False, pattern=read.pattern)
    if isinstance(read, Grammar):
        return OutputSpec(output, read, options, str, False, grammar=read)
    source, parse = _source(read)
    model = source if isinstance(source, type) and issubclass(source, BaseModel) else None
    return OutputSpec(output, read, options, parse, True, model=model, source=source)


def _source(output: Any) -> tuple[Any, Callable[[str], Any]]:
    """The schema source of a non-regex output type and the parser of its raw text."""
    if isinstance(output, (Mapping, str, bool)):
        return output, _parse_plain_json
    if isinstance(output, type) and issubclass(output, BaseModel):
        return output, _model_parser(output)
    wrapped = _wrap(output)
    return wrapped, _wrapped_parser(wrapped)


def _constraint_key(output: Any, options: CompileOptions) -> str | None:
    """:attr:`OutputSpec.key` of an output already read by :func:`text_constraint`."""
    document: Any
    limits = options.limits
    try:
        if isinstance(output, Grammar):
            described = output.key()
            if described is None:
                return None
            return json.dumps(
                {**described, "options": _options_key(options, recursion_depth=False)},
                ensure_ascii=False,
                separators=(",", ":"),
            )
        if isinstance(output, Regex):
            regex_key: dict[str, str] = {"regex": output.pattern}
            if limits.key():
                regex_key["limits"] = limits.key()
            return json.dumps(regex_key, ensure_ascii=False)
        if isinstance(output, bool):
            document = output
        elif isinstance(output, str):
            document = json.loads(output)
        elif isinstance(output, Mapping):
            document = dict(output)
            if not _plain_json(document):
                return None
        elif isinstance(output, type) and issubclass(output, BaseModel):
            document = pydantic_schema(output)
        else:
            document = pydantic_schema(_wrap(output))
        return json.dumps(
            {"schema": document, "options": _options_key(options, recursion_depth=True)},
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )
    except Exception:  # the regex path reports what is wrong with the output
        return None


def text_constraint(output: Any) -> Any:
    """``Annotated[str, Regex(...)]`` or ``Annotated[str, Grammar(...)]`` as its
    :class:`Regex` or :class:`~formcast.grammar.Grammar`; any other output unchanged.

    Raises:
        SchemaError: ``Annotated`` holds a Regex or Grammar on a type other than ``str``,
            or more than one of them.
    """
    if typing.get_origin(output) is not Annotated:
        return output
    base, *metadata = typing.get_args(output)
    found = [item for item in metadata if isinstance(item, Regex | Grammar)]
    if not found:
        return output
    if base is not str or len(found) > 1:
        raise SchemaError(
            "expected Annotated[str, formcast.Regex(...)] or Annotated[str, "
            f"formcast.Grammar(...)] (one constraint on str), found {output!r}"
        )
    return found[0]


def _options_key(options: CompileOptions, *, recursion_depth: bool) -> list[Any]:
    """The options in an :attr:`OutputSpec.key`, in a fixed order: mode, whitespace,
    ``max_recursion_depth`` (only where ``recursion_depth``: a grammar does not read it),
    ``from_text``, and the limits when they differ from the defaults."""
    key: list[Any] = [options.mode, options.whitespace]
    if recursion_depth:
        key.append(options.max_recursion_depth)
    key.append(_from_text_key(options.from_text))
    if options.limits.key():
        key.append(options.limits.key())
    return key


def _from_text_key(from_text: FromText | bool | None) -> Any:
    if isinstance(from_text, FromText):
        return from_text.keyword_value()
    return bool(from_text)


_JSON_LEAVES = frozenset((str, int, bool, type(None)))


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made of dict (string keys), list, str, int, finite float, bool
    and None only, so that its JSON text identifies it exactly (no tuples, no subclasses)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if not all(type(key) is str for key in item):
                return False
            stack.extend(item.values())
        elif kind is list:
            if not set(map(type, item)) <= _JSON_LEAVES:  # a list of strings: no pass
                stack.extend(item)
        elif kind is float:
            if item != item or item in (float("inf"), float("-inf")):
                return False
        elif not (kind is str or kind is int or kind is bool or item is None):
            return False
    return True


def _key(regex: str, options: Mapping[str, Any]) -> str:
    return json.dumps({"regex": regex, **options}, sort_keys=True)


def _wrap(output: Any) -> type[BaseModel]:
    """A one-field model ``{"result": output}``; SchemaError if pydantic cannot handle it.

    Memoised for hashable types (``Literal[...]``, ``list[int]``...): a compile asks twice
    (the cache key, then the regex), and pydantic takes ~0.1 s per 10,000 literal values.
    The memo's key holds the type's ``repr`` too, since typing's equality ignores order
    (``Literal["x", "y"] == Literal["y", "x"]``) while the schema keeps it."""
    try:
        return _wrap_hashable(output, repr(output))
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
    return _new_wrapper(output)


@functools.lru_cache(maxsize=64)
def _wrap_hashable(output: Any, shown: str) -> type[BaseModel]:
    return _new_wrapper(output)


def _new_wrapper(output: Any) -> type[BaseModel]:
    """The wrapper model, its JSON Schema generated once here (which also tells whether
    pydantic can handle ``output``) and remembered for the compile's two asks."""
    try:
        wrapper: type[BaseModel] = pydantic.create_model("Result", result=(output, ...))
        remember_pydantic_schema(wrapper)
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as e:
        raise SchemaError(
            "expected a Pydantic model class, a type pydantic can validate (int, list[Model], "
            f"Literal[...], Enum, ...), a JSON Schema or formcast.Regex, found {output!r}: {e}"
        ) from e
    return wrapper


def _parse_plain_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise OutputValidationError(text, e) from e


def _model_parser(model: type[BaseModel]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return model.model_validate_json(text)
        except pydantic.ValidationError as e:
            raise OutputValidationError(text, e) from e

    return parse


def _wrapped_parser(wrapper: type[BaseModel]) -> Callable[[str], Any]:
    parse_model = _model_parser(wrapper)

    def parse(text: str) -> Any:
        return getattr(parse_model(text), RESULT_FIELD)

    return parse
