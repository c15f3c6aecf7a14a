"""Read an output type into a JSON Schema document, and navigate that document.

This is the first stage of the pipeline (see ``DESIGN.md``)::

    Pydantic model / JSON Schema / JSON text  --load_schema-->  dict | bool  --regex-->  str

Contract:

* :func:`load_schema` accepts a Pydantic model class, a JSON Schema mapping, a JSON
  string or a boolean schema, and returns a *fresh* JSON Schema document (a ``dict`` or a
  ``bool``) that is valid against its metaschema. Anything else raises
  :class:`~formcast.errors.SchemaError` saying what was expected and what was found.
* :class:`References` resolves ``$ref`` values inside one document (JSON pointers,
  ``$anchor``, ``$id``/``id`` base URIs); references that leave the document raise
  :class:`~formcast.errors.UnsupportedSchemaError`.
* The keyword tables (:data:`ANNOTATION_KEYWORDS`, ...) say which keywords carry no
  validation meaning and may be ignored by the translator.

Costs: :func:`load_schema` deep-copies the document and validates it against the
metaschema (milliseconds for typical schemas, ~10-50 ms for schemas of a few hundred
kilobytes). :class:`References` walks the document once on construction.

``jsonschema`` is needed at run time (metaschema validation here, and exact filtering of
``enum`` values in :mod:`formcast.regex.enums`). ``jsonschema-rs``, where it is installed,
answers the metaschema check of a valid document first (~0.4 ms against ~65 ms for a
200-kilobyte Kubernetes schema); ``jsonschema`` still judges every document it rejects,
so the verdicts and the error messages are ``jsonschema``'s.
"""

from __future__ import annotations

import copy
import datetime as dt
import enum
import functools
import itertools
import json
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import unquote, urldefrag, urljoin

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import jsonschema.validators  # type: ignore[import-untyped, unused-ignore]
import pydantic
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from formcast.errors import SchemaError, UnsupportedSchemaError
from formcast.regex.dialect import NUMBER
from formcast.regex.formats import PYDANTIC_FORMS, STRING_FORMATS, url_regex
from formcast.regex.more_formats import PAYMENT_CARD_REGEX, byte_size_regex, date_range_regex
from formcast.regex.numbers import int_range

__all__ = [
    "ANNOTATION_KEYWORDS",
    "CONTAINER_KEYWORDS",
    "Mode",
    "References",
    "escape_pointer_token",
    "join_pointer",
    "load_schema",
    "pydantic_schema",
    "remember_pydantic_schema",
    "validator_class",
]

Mode = Literal["generation", "specification"]
"""How a schema is read.

``"generation"`` (default, for Pydantic models): only declared properties are produced and
an absent ``additionalProperties`` means ``false``; unknown formats are refused (unless
``"x-formcast-any-string": true`` stands beside one). Past and future dates are relative
to the day of compiling, which the generated schema names.

``"specification"`` (for third-party schemas): JSON Schema draft 2020-12 semantics (plus the
older spellings ``definitions``, ``dependencies``, array-form ``items`` with
``additionalItems``); an absent ``additionalProperties`` allows extra properties; an unknown
format is an annotation (any string, with a warning); ``uniqueItems: true`` is refused.
"""

ANNOTATION_KEYWORDS: frozenset[str] = frozenset(
    {
        "title",
        "description",
        "examples",
        "example",
        "default",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$recursiveAnchor",
        "$vocabulary",
        "discriminator",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "externalDocs",
        "xml",
    }
)
"""Keywords that never affect validity; the translator ignores them."""

CONTAINER_KEYWORDS: frozenset[str] = frozenset({"$defs", "definitions"})
"""Keywords that only hold subschemas for ``$ref`` and do not apply to the instance."""

_DEFAULT_BASE = "https://formcast.invalid/schema.json"

# Keywords whose value is one schema, a map of schemas, or a list of schemas; used to know
# where identifiers ($id, $anchor) may legitimately appear.
_SCHEMA_VALUED = frozenset(
    {
        "additionalProperties",
        "additionalItems",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
        "items",
    }
)
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})


def escape_pointer_token(token: str) -> str:
    """Escape one JSON pointer reference token (``~`` -> ``~0``, ``/`` -> ``~1``)."""
    return token.replace("~", "~0").replace("/", "~1")


def join_pointer(pointer: str, *tokens: str | int) -> str:
    """Append reference tokens to a JSON pointer.

    ``join_pointer("/a", "b/c", 0) == "/a/b~1c/0"``
    """
    return pointer + "".join("/" + escape_pointer_token(str(t)) for t in tokens)


def _describe(value: object) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} of type {type(value).__name__}"


def validator_class(schema: Any) -> Any:
    """The jsonschema validator class for a document (see :func:`load_schema`).

    The class named by ``$schema``; without one, draft 2020-12, or draft 7 / draft 4 when
    only those metaschemas accept the document (older spellings). A document that just
    went through :func:`load_schema` is answered from memory, without validating again.
    """
    if not isinstance(schema, dict):
        return jsonschema.Draft202012Validator
    known = _checked.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    if "$schema" in schema:
        return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return _metaschema_class(schema)[0]


_STAND_IN_LENGTH = 64  # lists of at least this many strings are checked by a stand-in


def _metaschema_stand_in(value: Any) -> Any:
    """``value`` with each list of at least :data:`_STAND_IN_LENGTH` strings (an ``enum``
    of 100,000 names) replaced by a few of its strings that the metaschema judges alike:
    strings still, distinct exactly when the list's are, never empty. The metaschemas
    (drafts 4 to 2020-12) say of such a list only its items' type, its length's lower
    bound and ``uniqueItems``, so the verdict is the same, without a validator step per
    item. Dicts and other lists are copied around the replaced ones; O(size) at C speed."""
    if isinstance(value, dict):
        return {key: _metaschema_stand_in(item) for key, item in value.items()}
    if isinstance(value, list):
        if len(value) >= _STAND_IN_LENGTH and _all_strings(value):
            distinct = list(dict.fromkeys(value))
            stand_in = distinct[:2]
            if len(distinct) < len(value):
                stand_in.append(distinct[0])  # a repeat, as in the list
            return stand_in
        return [_metaschema_stand_in(item) for item in value]
    return value


def _all_strings(values: list[Any]) -> bool:
    """Whether every item is a str (one C-speed join)."""
    try:
        "".join(values)
    except TypeError:
        return False
    return True


def _metaschema_class(schema: dict[str, Any]) -> tuple[Any, jsonschema.SchemaError | None]:
    """The validator class whose metaschema accepts ``schema``, and ``None``; or, when none
    does, the class named by ``$schema`` (default draft 2020-12) and its error.

    A document without ``$schema`` that fails the 2020-12 metaschema is also tried against
    draft 7 and draft 4, so that older spellings (array-form ``items``, boolean
    ``exclusiveMinimum``) are accepted.
    """
    first = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if _accepted_natively(schema, first):
        return first, None
    schema = _metaschema_stand_in(schema)
    if first is jsonschema.Draft202012Validator and _flat_2020_12().is_valid(schema):
        return first, None  # else the real metaschema's check names the error below
    try:
        first.check_schema(schema)
        return first, None
    except jsonschema.SchemaError as error:
        if "$schema" in schema:
            return first, error
        first_error = error
    for fallback in (jsonschema.Draft7Validator, jsonschema.Draft4Validator):
        try:
            fallback.check_schema(schema)
            return fallback, None
        except jsonschema.SchemaError:
            continue
    return first, first_error


# The metaschemas' keywords whose values (or, for the last two, keys) carry a format,
# drafts 4 to 2020-12 together: jsonschema checks those formats, jsonschema-rs does not.
_FORMATTED_VALUES = {
    "$schema": "uri",
    "$id": "uri-reference",
    "$ref": "uri-reference",
    "$dynamicRef": "uri-reference",
    "$recursiveRef": "uri-reference",
    "pattern": "regex",
}
_FORMATTED_KEYS = {"patternProperties": "regex", "$vocabulary": "uri"}


def _accepted_natively(schema: dict[str, Any], first: Any) -> bool:
    """Whether jsonschema-rs accepts ``schema`` against ``first``'s metaschema (the
    draft jsonschema reads it as), and every value the metaschemas give a format passes
    ``first``'s format checker (jsonschema-rs is left to check no formats): then
    ``first.check_schema`` accepts it too. False where that cannot be told (no
    jsonschema-rs, a document nested deeper than :data:`_NATIVE_DEPTH` or one it cannot
    read); the caller then asks jsonschema. The format scan is conservative: any string
    under one of those keywords anywhere, in a schema position or not, is checked, so a
    failure only sends the document to jsonschema. Cost: the compiled check (~1-2 µs a
    kilobyte) and one walk of the document in Python."""
    if _compiled_checks() is None:
        return False
    # the scan comes first: it also turns away documents nested too deep for the compiled
    # check (see _NATIVE_DEPTH)
    if not _formats_conform(schema, first.FORMAT_CHECKER):
        return False
    validator = _native_validator(first)
    try:
        return validator is not None and bool(validator.is_valid(schema))
    except Exception:  # a value it cannot read: jsonschema decides
        return False


@functools.cache
def _compiled_checks() -> Any:
    """The jsonschema-rs module, imported by the first metaschema check rather than by
    ``import formcast`` (~20 ms), or None where it is not installed (jsonschema alone
    then gives the same verdicts)."""
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - no wheel for this platform
        return None
    return jsonschema_rs


@functools.cache
def _native_validator(cls: Any) -> Any:
    """jsonschema-rs's validator of ``cls.META_SCHEMA``, the very document jsonschema
    checks against (jsonschema-rs's own metaschemas differ: its draft 4 allows an empty
    ``enum``), with formats left to :func:`_formats_conform`; None where it cannot
    read that document. Built once per draft (~0.3-6 ms)."""
    try:
        return _compiled_checks().validator_for(cls.META_SCHEMA, validate_formats=False)
    except Exception:
        return None


_NATIVE_DEPTH = 512
"""Deepest nesting handed to jsonschema-rs, whose recursion has no guard (a document
nested 20,000 deep ends the process); deeper ones go to jsonschema, which raises
RecursionError."""


def _formats_conform(document: Any, checker: Any) -> bool:
    """Whether every string under a keyword of :data:`_FORMATTED_VALUES` (and every key
    under one of :data:`_FORMATTED_KEYS`) in ``document`` conforms to its format, as far
    as ``checker`` checks that format, and ``document`` nests at most
    :data:`_NATIVE_DEPTH` containers deep."""
    checks = checker.checkers
    stack = [(document, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > _NATIVE_DEPTH:
            return False
        if isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if isinstance(value, (dict, list)):
                stack.append((value, depth + 1))
            form = _FORMATTED_VALUES.get(key)
            if form in checks and isinstance(value, str) and not checker.conforms(value, form):
                return False
            form = _FORMATTED_KEYS.get(key)
            if (
                form in checks
                and isinstance(value, dict)
                and not all(checker.conforms(name, form) for name in value)
            ):
                return False
    return True


_META_2020_12 = "https://json-schema.org/draft/2020-12/"


@functools.cache
def _flat_2020_12() -> Any:
    """A validator of draft 2020-12's metaschema made one document: its vocabularies'
    schemas joined under ``allOf`` with their ``$defs`` gathered at the root, and each
    ``$dynamicRef: "#meta"`` a ``$ref`` to the root, where the dynamic scope of a document
    checked against the metaschema resolves it anyway. It accepts exactly what
    ``Draft202012Validator.check_schema`` accepts (the same keywords and formats; checked on
    the 3,401 maskbench schemas), in half the time on large documents: jsonschema
    resolves a dynamic reference by searching the dynamic scope at every subschema
    (~160 ms against ~85 ms for a 200k-character Kubernetes schema). Built once."""
    # jsonschema (4.18 on) brings its metaschemas in this package
    from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped, unused-ignore]

    root = jsonschema.Draft202012Validator.META_SCHEMA
    ignored = {"$schema", "$id", "$vocabulary", "$dynamicAnchor", "$defs", "title"}
    gathered: dict[str, Any] = {}
    vocabularies = []
    for part in root["allOf"]:
        vocabulary = REGISTRY.contents(_META_2020_12 + part["$ref"])
        gathered.update(_rooted(vocabulary.get("$defs", {})))
        vocabularies.append(_rooted({k: v for k, v in vocabulary.items() if k not in ignored}))
    flat = _rooted({k: v for k, v in root.items() if k not in ignored | {"allOf"}})
    flat.update({"$schema": root["$schema"], "allOf": vocabularies, "$defs": gathered})
    validator = jsonschema.Draft202012Validator
    return validator(flat, format_checker=validator.FORMAT_CHECKER)


def _rooted(node: Any) -> Any:
    """A copy of a part of the 2020-12 metaschema whose references point into the one
    flat document of :func:`_flat_2020_12`: ``$dynamicRef: "#meta"`` to its root, and
    ``meta/<vocabulary>#/$defs/<name>`` to its gathered ``$defs``."""
    if isinstance(node, list):
        return [_rooted(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _rooted(value) for key, value in node.items() if key != "$dynamicRef"}
    if node.get("$dynamicRef") == "#meta":
        out["$ref"] = "#"
    elif "$dynamicRef" in node:
        out["$dynamicRef"] = node["$dynamicRef"]
    reference = out.get("$ref")
    if isinstance(reference, str) and reference.startswith("meta/") and "#/$defs/" in reference:
        out["$ref"] = "#/$defs/" + reference.split("#/$defs/", 1)[1]
    return out


# The last few documents load_schema validated, by identity, with the class that accepted
# them: schema_to_regex asks validator_class for the same object right after.
_checked: OrderedDict[int, tuple[dict[str, Any], Any]] = OrderedDict()
_CHECKED_SIZE = 8
_checked_lock = threading.Lock()


def _check_metaschema(schema: dict[str, Any] | bool) -> None:
    """Validate against the metaschema (see :func:`_metaschema_class`); the error of the
    class named by ``$schema`` (default draft 2020-12) is reported when none accepts."""
    if isinstance(schema, bool):
        return
    cls, error = _metaschema_class(schema)
    if error is not None:
        raise SchemaError(
            f"expected a valid JSON Schema, found an invalid one: {error.message} "
            f"(at /{'/'.join(str(p) for p in error.absolute_path)})"
        ) from None
    with _checked_lock:
        _checked[id(schema)] = (schema, cls)
        while len(_checked) > _CHECKED_SIZE:
            _checked.popitem(last=False)


_MAX_SET_SEQUENCES = 2000
"""Most arrays listed for a ``set`` of a finite enum (every order of every subset)."""

_MAX_SET_SUBSETS = 4096
"""Most arrays listed for a larger finite ``set`` (every subset, in declaration order)."""

_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _anchored(regex: str) -> str:
    return f"^(?:{regex})$"


def _decimal_text(max_digits: int | None, places: int | None) -> str | None:
    """Regex for decimals ``-?I(.F)?`` that Pydantic's ``max_digits`` and ``decimal_places``
    accept, digits counted as written (``None`` when no value is accepted)."""
    if places == 0:
        fraction = ""
    elif places is None:
        fraction = r"(?:\.[0-9]+)?"
    else:
        fraction = rf"(?:\.[0-9]{{1,{places}}})?"
    if max_digits is None:
        return rf"-?(?:0|[1-9][0-9]*){fraction}"
    if places is not None:
        whole = max_digits - places
        if whole < 0:
            return None
        if whole == 0:  # "0" alone counts one whole digit, "0.05" none
            return None if places == 0 else rf"-?0\.[0-9]{{1,{places}}}"
        return rf"-?(?:0|[1-9][0-9]{{0,{whole - 1}}}){fraction}"
    alts = [rf"0(?:\.[0-9]{{1,{max_digits}}})?"]
    for whole in range(1, max_digits + 1):
        rest = max_digits - whole
        tail = rf"(?:\.[0-9]{{1,{rest}}})?" if rest else ""
        alts.append(rf"[1-9][0-9]{{{whole - 1}}}{tail}")
    return "-?(?:" + "|".join(alts) + ")"


class _GenerationJsonSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema generator, narrowed or widened to what Pydantic itself accepts
    and writes, for ``generation`` mode (see :func:`load_schema`)."""

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        json_schema = super().dict_schema(schema)
        if "keys_schema" not in schema or "propertyNames" in json_schema:
            return json_schema
        keys = {k: v for k, v in self.generate_inner(schema["keys_schema"]).items() if k != "title"}
        kind = keys.get("type")
        if kind not in ("integer", "number", "boolean"):
            return json_schema
        names: dict[str, Any] | bool = False  # keys that cannot be written: only {}
        if kind == "boolean" and set(keys) == {"type"}:
            names = {"enum": ["true", "false"]}
        elif kind == "number" and set(keys) == {"type"}:
            names = {"pattern": _anchored(NUMBER)}
        elif kind == "integer" and set(keys) <= {"type", "minimum", "maximum"}:
            low, high = keys.get("minimum"), keys.get("maximum")
            if all(v is None or isinstance(v, int) for v in (low, high)):
                digits = int_range(low, high)
                names = {"pattern": _anchored(digits)} if digits is not None else False
        json_schema["propertyNames"] = names
        return json_schema

    def decimal_schema(self, schema: core_schema.DecimalSchema) -> JsonSchemaValue:
        json_schema = super().decimal_schema(schema)
        if self.mode != "validation" or "anyOf" not in json_schema:
            return json_schema
        number = dict(json_schema["anyOf"][0])
        max_digits, places = schema.get("max_digits"), schema.get("decimal_places")
        bounded = any(k in number for k in _NUMBER_BOUNDS)
        string = {"type": "string", "pattern": _anchored(_decimal_text(None, None) or "")}
        if max_digits is None and places is None:
            return number if bounded else {"anyOf": [number, string]}
        branches: list[JsonSchemaValue] = []
        whole = max_digits
        if places is not None:
            whole = None if max_digits is None else max_digits - places
        if whole is None or whole > 0:
            integer = {**number, "type": "integer"}
            if whole is not None:
                top = 10**whole - 1
                integer["minimum"] = max(integer.get("minimum", -top), -top)
                integer["maximum"] = min(integer.get("maximum", top), top)
            branches.append(integer)
        text = _decimal_text(max_digits, places)
        if not bounded and text is not None:
            branches.append({"type": "string", "pattern": _anchored(text)})
        if not branches:
            return {"not": {}}
        return branches[0] if len(branches) == 1 else {"anyOf": branches}

    def datetime_schema(self, schema: core_schema.DatetimeSchema) -> JsonSchemaValue:
        relative = schema.get("now_op")
        bounded = any(k in schema for k in _BOUNDS)
        if relative is not None or bounded:
            form = self._moment(schema, "date-time") or {"pattern": STRING_FORMATS["date-time"]}
            time = str(form["pattern"]).removeprefix("^(?:").removesuffix(")$")
            time = time[time.index("T") :]
            if relative is None:
                # whole days strictly between the bounds' days: any time, any offset
                return _days(*_day_bounds(schema, 2), time)
            return _relative_days(relative, time)
        return self._moment(schema, "date-time") or super().datetime_schema(schema)

    def date_schema(self, schema: core_schema.DateSchema) -> JsonSchemaValue:
        relative = schema.get("now_op")
        if relative is not None:
            return _relative_days(relative, "")
        if any(k in schema for k in _BOUNDS):
            return _days(*_day_bounds(schema, 1), "")
        return super().date_schema(schema)

    def time_schema(self, schema: core_schema.TimeSchema) -> JsonSchemaValue:
        if any(k in schema for k in _BOUNDS):
            return {"type": "string", "format": "time-with-bounds"}  # refused
        return self._moment(schema, "time") or super().time_schema(schema)

    def bytes_schema(self, schema: core_schema.BytesSchema) -> JsonSchemaValue:
        json_schema = super().bytes_schema(schema)
        if "max_length" in schema:  # Pydantic counts UTF-8 bytes: one per ASCII character
            json_schema["pattern"] = "^[\\x00-\\x7f]*$"
        return json_schema

    def function_after_schema(
        self, schema: core_schema.AfterValidatorFunctionSchema
    ) -> JsonSchemaValue:
        owner = getattr(schema["function"]["function"], "__self__", None)
        if owner is pydantic.PaymentCardNumber:
            return {"type": "string", "pattern": _anchored(PAYMENT_CARD_REGEX)}
        if owner is pydantic.ByteSize:
            text = {"type": "string", "pattern": _anchored(byte_size_regex())}
            return {"anyOf": [text, {"type": "integer", "minimum": 0}]}
        return super().function_after_schema(schema)

    def generate_inner(self, schema: Any) -> JsonSchemaValue:
        function = schema.get("function", {}).get("function") if "function" in schema else None
        name = getattr(function, "__qualname__", "")
        if schema.get("type") == "function-after" and name.startswith("PathType.validate_"):
            # the file system decides (exists, is a file, is new): refused by name and pointer
            return {"type": "string", "format": name.removeprefix("PathType.validate_") + "-path"}
        if schema.get("type") == "function-plain":
            function = schema["function"]["function"]
            if getattr(function, "__module__", "") == "pydantic._internal._validators" and (
                getattr(function, "__name__", "") == "import_string"
            ):
                # not every string names an importable object: refused by name and pointer
                return {"type": "string", "format": "import-string"}
        return super().generate_inner(schema)

    def multi_host_url_schema(self, schema: core_schema.MultiHostUrlSchema) -> JsonSchemaValue:
        json_schema = super().multi_host_url_schema(schema)
        schemes = schema.get("allowed_schemes")
        if json_schema.get("format") == "multi-host-uri":
            del json_schema["format"]
            chosen = [s.lower() for s in schemes] if schemes else None
            json_schema["pattern"] = _anchored(url_regex(chosen))
        return json_schema

    def _moment(self, schema: Any, name: str) -> JsonSchemaValue | None:
        constraint = schema.get("tz_constraint")
        if constraint is None:
            return {"type": "string", "pattern": _anchored(PYDANTIC_FORMS[name])}
        if constraint == "naive":
            return {"type": "string", "pattern": _anchored(PYDANTIC_FORMS["naive-" + name])}
        return None

    def timedelta_schema(self, schema: core_schema.TimedeltaSchema) -> JsonSchemaValue:
        if any(k in schema for k in _BOUNDS):
            return {"type": "string", "format": "duration-with-bounds"}  # refused
        json_schema = super().timedelta_schema(schema)
        if json_schema.get("format") != "duration":
            return json_schema
        return {"type": "string", "pattern": _anchored(PYDANTIC_FORMS["duration"])}

    def url_schema(self, schema: core_schema.UrlSchema) -> JsonSchemaValue:
        json_schema = super().url_schema(schema)
        schemes = schema.get("allowed_schemes")
        if json_schema.get("format") == "uri" and schemes:
            del json_schema["format"]
            json_schema["pattern"] = _anchored(url_regex([s.lower() for s in schemes]))
        return json_schema

    def set_schema(self, schema: core_schema.SetSchema) -> JsonSchemaValue:
        return self._unique(schema, super().set_schema(schema))

    def frozenset_schema(self, schema: core_schema.FrozenSetSchema) -> JsonSchemaValue:
        return self._unique(schema, super().frozenset_schema(schema))

    def _unique(self, schema: Any, json_schema: JsonSchemaValue) -> JsonSchemaValue:
        """A set of a small finite enum lists its arrays without repeats (``uniqueItems``
        exactly); other sets keep ``uniqueItems``, which generation mode does not enforce."""
        items = schema.get("items_schema") or {}
        if items.get("type") == "literal":
            values = list(items["expected"])
        elif items.get("type") == "enum":
            values = [member.value for member in items["members"]]
        else:
            return json_schema
        values = [v.value if isinstance(v, enum.Enum) else v for v in values]
        if not all(v is None or isinstance(v, (str, int, float, bool)) for v in values):
            return json_schema
        low = schema.get("min_length") or 0
        high = min(len(values), schema.get("max_length") or len(values))
        counts = range(low, high + 1)
        if sum(math.perm(len(values), k) for k in counts) <= _MAX_SET_SEQUENCES:
            arrays = [list(p) for k in counts for p in itertools.permutations(values, k)]
        elif sum(math.comb(len(values), k) for k in counts) <= _MAX_SET_SUBSETS:
            arrays = [list(c) for k in counts for c in itertools.combinations(values, k)]
        else:
            return json_schema
        return {**json_schema, "enum": arrays}


_BOUNDS = ("gt", "ge", "lt", "le")


def _day_bounds(schema: Any, margin: int) -> tuple[dt.date | None, dt.date | None]:
    """The first and last day a date (``margin`` 1) or a datetime (``margin`` 2: whole
    days away from the bounds' own, whatever the offsets) within ``schema``'s bounds
    may fall on; ``None``: unbounded."""
    low: dt.date | None = None
    high: dt.date | None = None
    day = dt.timedelta(days=1)
    for key in ("gt", "ge"):
        if key in schema:
            bound = schema[key]
            bound = bound.date() if isinstance(bound, dt.datetime) else bound
            low = bound + day * (margin if key == "gt" or margin == 2 else 0)
    for key in ("lt", "le"):
        if key in schema:
            bound = schema[key]
            bound = bound.date() if isinstance(bound, dt.datetime) else bound
            high = bound - day * (margin if key == "lt" or margin == 2 else 0)
    return low, high


def _days(low: dt.date | None, high: dt.date | None, time: str) -> JsonSchemaValue:
    """Strings of a day from ``low`` to ``high`` and then ``time`` (a regex)."""
    if low is not None and high is not None and low > high:
        return {"not": {}}
    return {"type": "string", "pattern": _anchored(f"(?:{date_range_regex(low, high)}){time}")}


_RELATIVE_MARGIN = dt.timedelta(days=2)
"""How far from the compile day a past or future date keeps: Pydantic compares with the
day (or moment) of validating, in its own time zone, so values within a day or two of
the compile day are left out."""


def compile_day() -> dt.date:
    """The day past and future dates are relative to: today, in local time."""
    return dt.date.today()


def _relative_days(relative: str, time: str) -> JsonSchemaValue:
    """``PastDate``/``FutureDate`` (``time`` empty) or their datetime forms (``time``: the
    regex of ``T`` and the time): dates up to two days before the compile day, or from
    two days after it. The day is written in the schema, so the cache keys of indexes
    compiled on other days differ; an index is valid on its compile day (and a
    ``FutureDate`` one until two days later)."""
    today = compile_day()
    if relative == "past":
        days = date_range_regex(None, today - _RELATIVE_MARGIN)
    else:
        days = date_range_regex(today + _RELATIVE_MARGIN, None)
    return {
        "type": "string",
        "pattern": _anchored(f"(?:{days}){time}"),
        "$comment": f"formcast: {relative} dates relative to the compile day {today.isoformat()}",
    }


def pydantic_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The JSON Schema formcast compiles for a Pydantic model: ``model_json_schema()``
    with the additions that make it say what Pydantic checks and writes (see the guide's
    "Pydantic models in generation mode"). Raises what pydantic raises. A model passed
    to :func:`remember_pydantic_schema` gets a copy of its remembered schema instead."""
    known = _remembered_schemas.get(model)
    if known is not None:
        result: dict[str, Any] = _copy_document(known)
        return result
    return model.model_json_schema(schema_generator=_GenerationJsonSchema)


def remember_pydantic_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """:func:`pydantic_schema` of ``model``, kept while the class lives, for a model
    that formcast made and nobody changes (the one-field wrapper of a ``Literal``):
    pydantic takes ~3 s for a ``Literal`` of 100,000 values, and a compile asks twice
    (the cache key, then the regex)."""
    schema = pydantic_schema(model)
    _remembered_schemas[model] = schema
    return schema


_remembered_schemas: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def load_schema(
    output: type[pydantic.BaseModel] | Mapping[str, Any] | str | bool,
) -> dict[str, Any] | bool:
    """Return the JSON Schema document for ``output``, validated against its metaschema.

    * a Pydantic model class -> ``output.model_json_schema()`` (validation mode);
    * a mapping -> a deep copy of it;
    * a string -> ``json.loads(output)`` (must be a JSON object or boolean);
    * ``True`` / ``False`` -> the boolean schema itself.

    Raises:
        SchemaError: for anything else (a plain class, an int, ...), for text that is not
            JSON, for a Pydantic model whose schema cannot be generated, and for a document
            that is not a valid JSON Schema (the message quotes jsonschema's).

    A document whose ``$schema`` names draft 7 or older loses the keywords beside each
    ``$ref``, which those drafts ignore (later drafts apply them).

    Cost: one deep copy plus one metaschema validation.
    """
    schema: Any
    if isinstance(output, bool):
        return output
    if isinstance(output, type) and issubclass(output, pydantic.BaseModel):
        try:
            schema = pydantic_schema(output)
        except pydantic.PydanticUserError as error:
            raise SchemaError(
                f"expected a Pydantic model whose JSON Schema can be generated, found "
                f"{output.__name__}: {error}"
            ) from None
    elif isinstance(output, Mapping):
        schema = _copy_document(dict(output))
    elif isinstance(output, str):
        try:
            schema = json.loads(output)
        except json.JSONDecodeError as error:
            raise SchemaError(
                f"expected a JSON Schema as JSON text, found text that is not JSON: {error}"
            ) from None
        if not isinstance(schema, (dict, bool)):
            raise SchemaError(
                f"expected a JSON Schema (a JSON object or boolean), found JSON {_describe(schema)}"
            )
    else:
        raise SchemaError(
            "expected a Pydantic model class, a JSON Schema dict or a JSON string, found "
            + _describe(output)
        )
    if isinstance(schema, dict) and not all(isinstance(k, str) for k in schema):
        raise SchemaError("expected a JSON Schema with string keys, found a non-string key")
    try:
        _check_metaschema(schema)
    except (TypeError, ValueError, RecursionError) as error:
        if isinstance(error, SchemaError):
            raise
        raise SchemaError(f"expected a JSON Schema document, found {_describe(schema)}") from None
    if isinstance(schema, dict) and _ignores_ref_siblings(schema):
        _drop_ref_siblings(schema)
    result: dict[str, Any] | bool = schema
    return result


_LEGACY_DRAFTS = ("draft-03", "draft-04", "draft-06", "draft-07")
_KEPT_BESIDE_REF = ANNOTATION_KEYWORDS | CONTAINER_KEYWORDS | {"$ref"}


def _ignores_ref_siblings(root: dict[str, Any]) -> bool:
    """Whether the document's ``$schema`` names draft 7 or older, where "all other
    properties in a ``$ref`` object MUST be ignored" (2019-09 made them apply)."""
    dialect = root.get("$schema")
    return isinstance(dialect, str) and any(draft in dialect for draft in _LEGACY_DRAFTS)


def _drop_ref_siblings(node: Any) -> None:
    """Remove, in place, the keywords beside each ``$ref`` that a draft 7 (or older)
    validator ignores, so that they constrain nothing here either; definitions,
    identifiers, annotations and ``x-`` extensions stay. Walks schema positions only."""
    if not isinstance(node, dict):
        return
    if isinstance(node.get("$ref"), str):
        for key in [k for k in node if k not in _KEPT_BESIDE_REF and not k.startswith("x-")]:
            del node[key]
    for _, sub in _subschemas(node):
        _drop_ref_siblings(sub)


def _subschemas(node: dict[str, Any]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """The values in schema positions directly below ``node``, each with its path from it
    (``("properties", "a")``, ``("anyOf", 0)``, ``("not",)``)."""
    for key, value in node.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                yield (key, name), sub
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                yield (key, index), sub
        elif key in _SCHEMA_VALUED:
            yield (key,), value


_ATOMS = frozenset((str, int, float, bool, type(None)))


def _copy_document(value: Any) -> Any:
    """A deep copy of a schema document (``copy.deepcopy``'s, but a list of plain
    values, such as an ``enum`` of 100,000 names, is copied in one C call, not item by
    item)."""
    if isinstance(value, dict):
        return {key: _copy_document(item) for key, item in value.items()}
    if isinstance(value, list):
        if set(map(type, value)) <= _ATOMS:
            return list(value)
        return [_copy_document(item) for item in value]
    return copy.deepcopy(value)


def _uses_draft4_ids(root: Any) -> bool:
    if not isinstance(root, dict):
        return False
    dialect = root.get("$schema")
    if isinstance(dialect, str):
        return "draft-04" in dialect or "draft-03" in dialect
    return isinstance(root.get("id"), str) and "$id" not in root


class References:
    """Resolve ``$ref`` values inside one schema document.

    The document is walked once, following only schema positions, to record every
    resource identifier (``$id``, or ``id`` for draft 4 documents) and every ``$anchor``.
    :meth:`resolve` then maps a reference, seen at some JSON pointer, to the referenced
    subschema and its canonical JSON pointer (``""`` is the root).

    Raises :class:`UnsupportedSchemaError` for references outside the document and
    :class:`SchemaError` for pointers that do not exist.
    """

    def __init__(self, root: Any) -> None:
        self.root = root
        self._id_key = "id" if _uses_draft4_ids(root) else "$id"
        self._resources: dict[str, str] = {}
        self._anchors: dict[tuple[str, str], str] = {}
        self._bases: dict[str, str] = {"": _DEFAULT_BASE}
        self._resources[_DEFAULT_BASE] = ""
        self._resolved: dict[tuple[str, str], tuple[Any, str]] = {}  # (base, $ref) -> target
        self._walk(root, "", _DEFAULT_BASE)

    def _walk(self, node: Any, pointer: str, base: str) -> None:
        if not isinstance(node, dict):
            return
        ident = node.get(self._id_key)
        if isinstance(ident, str):
            if ident.startswith("#") and self._id_key == "$id":
                self._anchors[(base, ident[1:])] = pointer
            else:
                full, fragment = urldefrag(urljoin(base, ident))
                base = full
                self._bases[pointer] = base
                self._resources.setdefault(base, pointer)
                if fragment:
                    self._anchors[(base, fragment)] = pointer
        anchor = node.get("$anchor")
        if isinstance(anchor, str):
            self._anchors[(base, anchor)] = pointer
        for path, sub in _subschemas(node):
            self._walk(sub, join_pointer(pointer, *path), base)

    def base_at(self, pointer: str) -> str:
        """The base URI in effect for the schema object at ``pointer``."""
        probe = pointer
        while True:
            if probe in self._bases:
                return self._bases[probe]
            if not probe:
                return _DEFAULT_BASE
            probe = probe.rsplit("/", 1)[0]

    def lookup(self, pointer: str) -> Any:
        """The value at a canonical JSON pointer of the document (``SchemaError`` if none)."""
        node = self.root
        if not pointer:
            return node
        for raw in pointer[1:].split("/"):
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise SchemaError(
                    f"expected {pointer!r} to exist in the schema, found no such path"
                )
        return node

    def resolve(self, ref: str, at: str) -> tuple[Any, str]:
        """Resolve ``ref`` found in the schema object at pointer ``at``.

        Returns ``(subschema, pointer)`` with the canonical pointer of the target.
        Cost: a dict lookup once a reference was resolved from the same base (the URL
        joins and the pointer walk run once per distinct reference and base).
        """
        base = self.base_at(at)
        known = self._resolved.get((base, ref))
        if known is not None:
            return known
        found = self._resolve(ref, at, base)
        self._resolved[(base, ref)] = found
        return found

    def _resolve(self, ref: str, at: str, base: str) -> tuple[Any, str]:
        uri, fragment = urldefrag(urljoin(base, ref))
        if uri not in self._resources:
            raise UnsupportedSchemaError(
                "$ref",
                at,
                f"cannot resolve {ref!r}: only references inside this document are supported",
            )
        resource = self._resources[uri]
        fragment = unquote(fragment)
        if fragment == "" or fragment.startswith("/"):
            pointer = resource + fragment
        elif (uri, fragment) in self._anchors:
            pointer = self._anchors[(uri, fragment)]
        else:
            raise SchemaError(
                f"expected anchor {fragment!r} (from $ref {ref!r}) to exist, found none"
            )
        try:
            target = self.lookup(pointer)
        except SchemaError:
            raise SchemaError(
                f"expected $ref {ref!r} at {at or '/'} to point into the schema, found no such path"
            ) from None
        return target, pointer
