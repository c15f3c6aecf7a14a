"""Partial objects: what a streamed output holds so far.

``Partial[Receipt]`` is a Pydantic model with ``Receipt``'s fields, each optional
(default None), nested models partial too (``list[Item]`` becomes
``list[Partial[Item]]``). :func:`read_prefix` reads a prefix of JSON text (what a row has
generated so far) into the values it holds: every value that has closed, and the string
being written as far as it goes (an unfinished number, ``true`` or key is left out, as is
an escape cut in the middle). :func:`partial_of` validates that into a
``Partial[Model]``, leaving out a value the partial type rejects (the start of a
``Literal`` string, say), so that a partial never raises.

Pure Python and Pydantic; no torch.
"""

from __future__ import annotations

import json
import threading
import types
import typing
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Union

import pydantic
from pydantic import BaseModel

__all__ = ["Partial", "partial_model", "partial_of", "read_prefix"]

T = TypeVar("T", bound=BaseModel)

_models: dict[type[BaseModel], type[BaseModel]] = {}
_lock = threading.RLock()


class _PartialModel(BaseModel):
    """The base of every ``Partial[Model]`` class: the spans of its copied values."""

    _spans: dict[str, tuple[tuple[int, int], ...]] = pydantic.PrivateAttr(default_factory=dict)

    @property
    def spans(self) -> dict[str, tuple[tuple[int, int], ...]]:
        """The ``FromText`` values that have closed so far: JSON pointer to their
        ``(start, end)`` offsets in the input (as ``ExtractionResult.spans``); empty
        without ``FromText``. A field of the model named ``spans`` hides this."""
        return self._spans


class Partial(Generic[T]):
    """``Partial[Model]``: ``Model``'s fields, each optional, nested models partial too.

    ``Partial[Model]`` is a Pydantic model class, made once per ``Model`` and cached:
    ``isinstance(item, formcast.Partial[Receipt])`` tells a partial from the final
    ``Receipt`` a stream ends with. Field constraints (patterns, lengths, bounds) and
    validators are not carried over: a string being written need not satisfy them yet.
    Closed values have been checked while decoding (the constraint, and the model's own
    field validators with validator steering), and the stream's last item is the fully
    validated model.
    """

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...

        def model_dump(self, **kwargs: Any) -> dict[str, Any]: ...

        def model_dump_json(self, **kwargs: Any) -> str: ...

        @property
        def spans(self) -> dict[str, tuple[tuple[int, int], ...]]: ...

    def __class_getitem__(cls, item: Any) -> Any:
        if isinstance(item, TypeVar):
            return super().__class_getitem__(item)  # type: ignore[misc]
        if not (isinstance(item, type) and issubclass(item, BaseModel)):
            raise TypeError(f"expected a Pydantic model class in Partial[...], found {item!r}")
        return partial_model(item)


def partial_model(model: type[BaseModel]) -> type[BaseModel]:
    """``Partial[model]`` (made once per model class, then cached)."""
    with _lock:
        known = _models.get(model)
        if known is not None:
            return known
        fields: dict[str, Any] = {}
        for name, info in model.model_fields.items():
            annotation = _partial_annotation(info.annotation)
            fields[name] = (
                annotation | None,
                pydantic.Field(default=None, alias=info.alias),
            )
        bases: Any = (_PartialModel, Partial)
        made: type[BaseModel] = pydantic.create_model(
            f"Partial[{model.__name__}]",
            __base__=bases,
            __module__=model.__module__,
            **fields,
        )
        made.model_config["populate_by_name"] = True
        made.model_rebuild(force=True)
        _models[model] = made
        return made


def _partial_annotation(annotation: Any) -> Any:
    """The annotation a partial field takes: nested models partial, containers through."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return partial_model(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _partial_annotation(typing.get_args(annotation)[0])
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType) and args:
        return Union[tuple(_partial_annotation(a) for a in args)]  # noqa: UP007
    if origin in (list, set, frozenset, tuple) and args:
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple[_partial_annotation(args[0]), ...]  # type: ignore[misc]
        if origin is tuple:
            return list[Any]  # a fixed tuple is filled an item at a time
        return list[_partial_annotation(args[0])]  # type: ignore[misc]
    if origin is dict and len(args) == 2:
        return dict[args[0], _partial_annotation(args[1])]  # type: ignore[misc,valid-type]
    return annotation


# -- reading a prefix of JSON ---------------------------------------------------------------

_INCOMPLETE = object()
_SPACE = " \t\r\n"


def read_prefix(text: str) -> Any:
    """The values a prefix of JSON text holds (None when it holds no value yet).

    Objects and arrays hold their closed members and, last, the open one when it is a
    string, an object or an array (as far as written); an unfinished number, literal or
    key is left out. The prefix is trusted to be a prefix of valid JSON."""
    value, _, _ = _value(text, _skip(text, 0))
    return None if value is _INCOMPLETE else value


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _value(text: str, at: int) -> tuple[Any, int, bool]:
    """(value or _INCOMPLETE, position after it, closed)."""
    if at >= len(text):
        return _INCOMPLETE, at, False
    char = text[at]
    if char == '"':
        return _string(text, at)
    if char == "{":
        return _object(text, at)
    if char == "[":
        return _array(text, at)
    end = at
    while end < len(text) and text[end] not in ",]}" + _SPACE:
        end += 1
    if end == len(text):
        return _INCOMPLETE, end, False  # a number or literal may go on
    return json.loads(text[at:end]), end, True


def _string(text: str, at: int) -> tuple[Any, int, bool]:
    chars: list[str] = []
    i = at + 1
    while i < len(text):
        char = text[i]
        if char == '"':
            return "".join(chars), i + 1, True
        if char == "\\":
            if i + 1 >= len(text):
                break
            escape = text[i + 1]
            if escape == "u":
                if i + 6 > len(text):
                    break
                code = int(text[i + 2 : i + 6], 16)
                if 0xD800 <= code < 0xDC00:  # a surrogate pair
                    if i + 12 > len(text):
                        break
                    low = int(text[i + 8 : i + 12], 16)
                    chars.append(chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)))
                    i += 12
                    continue
                chars.append(chr(code))
                i += 6
                continue
            chars.append(json.loads(f'"\\{escape}"'))
            i += 2
            continue
        chars.append(char)
        i += 1
    return "".join(chars), len(text), False


def _object(text: str, at: int) -> tuple[Any, int, bool]:
    out: dict[str, Any] = {}
    i = _skip(text, at + 1)
    while i < len(text):
        if text[i] == "}":
            return out, i + 1, True
        if text[i] == ",":
            i = _skip(text, i + 1)
            continue
        key, i, closed = _string(text, i)
        if not closed:
            break
        i = _skip(text, i)
        if i >= len(text) or text[i] != ":":
            break
        value, i, closed = _value(text, _skip(text, i + 1))
        if value is not _INCOMPLETE:
            out[key] = value
        if not closed:
            break
        i = _skip(text, i)
    return out, len(text), False


def _array(text: str, at: int) -> tuple[Any, int, bool]:
    out: list[Any] = []
    i = _skip(text, at + 1)
    while i < len(text):
        if text[i] == "]":
            return out, i + 1, True
        if text[i] == ",":
            i = _skip(text, i + 1)
            continue
        value, i, closed = _value(text, i)
        if value is not _INCOMPLETE:
            out.append(value)
        if not closed:
            break
        i = _skip(text, i)
    return out, len(text), False


# -- validating it --------------------------------------------------------------------------


def partial_of(
    model: type[BaseModel],
    data: Any,
    spans: dict[str, tuple[tuple[int, int], ...]] | None = None,
) -> BaseModel:
    """``Partial[model]`` of the values read from a prefix (:func:`read_prefix`), with
    the ``spans`` of its copied values; a value the partial type rejects is left out
    (never raises)."""
    made = partial_model(model)
    values = data if isinstance(data, dict) else {}
    found = made()
    for _ in range(64):
        try:
            found = made.model_validate(values)
            break
        except pydantic.ValidationError as error:
            values = _without(values, [e["loc"] for e in error.errors()])
    if spans and isinstance(found, _PartialModel):
        found._spans = dict(spans)
    return found


def _without(values: Any, locations: list[tuple[int | str, ...]]) -> Any:
    """A copy of ``values`` without the item at the first of ``locations`` (cut at its
    last step that exists, so a rejected union or nested value goes whole)."""
    out = json.loads(json.dumps(values))
    for loc in locations[:1]:  # one at a time: removing a list item moves the next ones
        parent: Any = None
        place: Any = out
        key: Any = None
        for step in loc:
            found = isinstance(place, dict) and step in place
            if isinstance(place, list) and isinstance(step, int):
                found = 0 <= step < len(place)
            if found:
                parent, key, place = place, step, place[step]
            else:
                break
        if parent is None:
            return {}
        if isinstance(parent, dict):
            parent.pop(key, None)
        else:
            del parent[key]
    return out
