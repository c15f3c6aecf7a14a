"""Tests for formcast.schema: loading output types and resolving references."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import formcast
from formcast.errors import SchemaError, UnsupportedSchemaError
from formcast.schema import References, join_pointer, load_schema, validator_class
from support.fresh_interpreter import run_in_fresh_interpreter


class Point(BaseModel):
    x: int
    y: int


def test_pydantic_model_gives_its_json_schema() -> None:
    assert load_schema(Point) == Point.model_json_schema()


def test_dict_is_deep_copied() -> None:
    original: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    loaded = load_schema(original)
    assert loaded == original
    assert isinstance(loaded, dict)
    loaded["properties"]["a"]["type"] = "integer"
    assert original["properties"]["a"]["type"] == "string"


def test_json_text_is_parsed() -> None:
    assert load_schema('{"type": "integer"}') == {"type": "integer"}
    assert load_schema("true") is True


@pytest.mark.parametrize("value", [True, False])
def test_boolean_schemas(value: bool) -> None:
    assert load_schema(value) is value


@pytest.mark.parametrize(
    "bad",
    [
        42,
        3.5,
        None,
        ["type", "string"],
        object(),
        int,
        type("Plain", (), {}),
        b'{"type": "string"}',
    ],
    ids=lambda v: type(v).__name__,
)
def test_anything_else_is_refused(bad: Any) -> None:
    with pytest.raises(SchemaError, match="expected a Pydantic model class, a JSON Schema dict"):
        load_schema(bad)


@pytest.mark.parametrize("text", ["{not json", "", "{'type': 'string'}", '{"type": "string"'])
def test_text_that_is_not_json(text: str) -> None:
    with pytest.raises(SchemaError, match="not JSON"):
        load_schema(text)


@pytest.mark.parametrize("text", ["42", '"string"', "[1, 2]", "null"])
def test_json_that_is_not_a_schema(text: str) -> None:
    with pytest.raises(SchemaError, match="JSON Schema"):
        load_schema(text)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strin"},
        {"type": 5},
        {"minLength": -1},
        {"required": "name"},
        {"properties": {"a": 5}},
        {"enum": "abc"},
        {"$schema": "http://json-schema.org/draft-07/schema#", "items": [5]},
    ],
)
def test_invalid_schemas_are_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaError, match="valid JSON Schema") as info:
        load_schema(schema)
    assert not isinstance(info.value, UnsupportedSchemaError)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "items": [{"type": "string"}], "additionalItems": False},
        {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"},
        {"type": "object", "dependencies": {"a": ["b"]}},
        {"definitions": {"x": {"type": "string"}}, "$ref": "#/definitions/x"},
    ],
)
def test_older_spellings_are_accepted(schema: dict[str, Any]) -> None:
    assert load_schema(schema) == schema


def test_schema_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        load_schema(7)  # type: ignore[arg-type]


def test_join_pointer_escapes() -> None:
    assert join_pointer("", "properties", "a/b", "c~d", 0) == "/properties/a~1b/c~0d/0"


def test_references_resolve_pointers_and_anchors() -> None:
    root = {
        "$id": "https://example.com/root.json",
        "$defs": {
            "a/b": {"type": "string"},
            "anchored": {"$anchor": "here", "type": "integer"},
            "nested": {
                "$id": "nested.json",
                "$defs": {"inner": {"type": "boolean"}},
                "properties": {"x": {"$ref": "#/$defs/inner"}},
            },
        },
    }
    refs = References(root)
    assert refs.resolve("#/$defs/a~1b", "") == ({"type": "string"}, "/$defs/a~1b")
    assert refs.resolve("#here", "")[1] == "/$defs/anchored"
    assert refs.resolve("https://example.com/root.json#/$defs/a~1b", "")[1] == "/$defs/a~1b"
    # a reference inside the nested resource resolves against that resource
    assert refs.resolve("#/$defs/inner", "/$defs/nested/properties/x") == (
        {"type": "boolean"},
        "/$defs/nested/$defs/inner",
    )
    assert refs.resolve("nested.json#/$defs/inner", "")[1] == "/$defs/nested/$defs/inner"
    assert refs.resolve("#", "")[1] == ""


def test_a_reference_resolves_once_per_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resolutions are kept per (base, reference): the same reference from another place
    under the same base costs no URL work, and one under another base resolves there;
    a failed resolution is not kept and fails again."""
    import formcast.schema as schema_module

    root = {
        "$defs": {"inner": {"type": "null"}},
        "properties": {"a": {"$ref": "#/$defs/inner"}, "b": {"$ref": "#/$defs/inner"}},
        "items": {"$id": "https://example.com/other.json", "$defs": {"inner": {"type": "string"}}},
    }
    joins: list[str] = []
    real_join = schema_module.urljoin

    def counted(base: str, ref: str) -> str:
        joins.append(ref)
        return real_join(base, ref)

    refs = References(root)
    monkeypatch.setattr(schema_module, "urljoin", counted)
    first = refs.resolve("#/$defs/inner", "/properties/a")
    assert refs.resolve("#/$defs/inner", "/properties/b") is first
    assert first == ({"type": "null"}, "/$defs/inner")
    assert joins == ["#/$defs/inner"]
    assert refs.resolve("#/$defs/inner", "/items") == ({"type": "string"}, "/items/$defs/inner")
    assert joins == ["#/$defs/inner"] * 2
    for _ in range(2):
        with pytest.raises(SchemaError, match="no such path"):
            refs.resolve("#/$defs/missing", "")
    assert len(joins) == 4


def test_references_percent_encoded() -> None:
    root = {"definitions": {"a b": {"type": "null"}}}
    assert References(root).resolve("#/definitions/a%20b", "")[1] == "/definitions/a b"


def test_remote_reference_is_unsupported() -> None:
    refs = References({"type": "object"})
    with pytest.raises(UnsupportedSchemaError) as info:
        refs.resolve("https://other.example/schema.json", "/properties/a")
    assert info.value.keyword == "$ref"
    assert info.value.pointer == "/properties/a"


def test_missing_pointer_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="no such path"):
        References({"$defs": {}}).resolve("#/$defs/missing", "")


def test_draft4_ids() -> None:
    root = json.loads(
        '{"id": "http://example.com/s.json", "$schema": "http://json-schema.org/draft-04/schema#",'
        ' "definitions": {"a": {"type": "string"}}}'
    )
    refs = References(root)
    assert refs.resolve("http://example.com/s.json#/definitions/a", "")[1] == "/definitions/a"
    assert refs.resolve("#/definitions/a", "/properties/x")[1] == "/definitions/a"


@pytest.mark.parametrize(
    ("dialect", "applies"),
    [
        ("http://json-schema.org/draft-07/schema#", False),
        ("http://json-schema.org/draft-04/schema#", False),
        ("https://json-schema.org/draft/2020-12/schema", True),
        (None, True),
    ],
)
def test_keywords_beside_ref_follow_the_declared_draft(dialect: str | None, applies: bool) -> None:
    """Draft 7 and older ignore the keywords beside ``$ref``; 2019-09 and later apply
    them. jsonschema, by the same ``$schema``, agrees with the compiled automaton."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"w": {"$ref": "#/definitions/w", "required": ["c"], "title": "W"}},
        "definitions": {"w": {"type": "object", "properties": {"c": {"type": "integer"}}}},
    }
    if dialect is not None:
        schema["$schema"] = dialect
    loaded = load_schema(schema)
    assert isinstance(loaded, dict)
    assert ("required" in loaded["properties"]["w"]) is applies
    assert loaded["properties"]["w"]["title"] == "W"
    automaton = formcast.LazyAutomaton(formcast.schema_to_regex(schema, mode="specification"))
    validator = validator_class(schema)(schema)
    for value in [{"w": {}}, {"w": {"c": 1}}, {"w": {"c": "x"}}]:
        expected = validator.is_valid(value)
        assert automaton.matches(json.dumps(value, separators=(",", ":")).encode()) is expected
    assert validator.is_valid({"w": {}}) is not applies


def test_relative_dates_follow_the_compile_day(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PastDate's schema (so every cache key made of it) names the compile day: an
    index compiled on another day is another entry."""
    import datetime as dt

    import formcast.schema

    model = pydantic.create_model("Born", on=(pydantic.PastDate, ...))
    today = formcast.schema.pydantic_schema(model)
    monkeypatch.setattr(formcast.schema, "compile_day", lambda: dt.date(2030, 1, 1))
    later = formcast.schema.pydantic_schema(model)
    assert today != later and "2030-01-01" in json.dumps(later)


_INVALID_DOCUMENTS = [
    {"type": "strng"},
    {"properties": {"a": {"minLength": -1}}},
    {"items": {"type": ["string", 3]}},
    {"$defs": {"x": {"pattern": "(unclosed"}}, "$ref": "#/$defs/x"},
    {"required": "a"},
    {"anyOf": []},
    {"properties": {"a": {"$dynamicRef": 4}}},
    {"dependencies": {"a": [1]}},
    {"prefixItems": {"type": "integer"}},
    {"$id": "not a uri\\x"},
]


def _same_verdicts(documents: list[Any]) -> list[bool]:
    """The real 2020-12 metaschema's verdict on each document, asserting that the flat
    one load_schema checks first gives the same."""
    import jsonschema

    from formcast.schema import _flat_2020_12, _metaschema_stand_in

    flat = _flat_2020_12()
    verdicts = []
    for document in documents:
        document = _metaschema_stand_in(document)
        try:
            jsonschema.Draft202012Validator.check_schema(document)
            real = True
        except jsonschema.SchemaError:
            real = False
        assert flat.is_valid(document) == real, json.dumps(document)[:200]
        verdicts.append(real)
    return verdicts


def test_the_flat_2020_12_metaschema_refuses_what_the_real_one_refuses() -> None:
    """Each keyword's own vocabulary, formats and the root's deprecated keywords."""
    assert not any(_same_verdicts(_INVALID_DOCUMENTS))
    with pytest.raises(SchemaError, match=r"expected a valid JSON Schema.*'strng'"):
        load_schema({"type": "strng"})


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_the_flat_2020_12_metaschema_accepts_what_the_real_one_accepts(
    maskbench_dir: Any,
) -> None:
    documents = [
        json.loads(path.read_text())["schema"]
        for path in sorted(maskbench_dir.glob("*.json"))[::40]
    ]
    verdicts = _same_verdicts([d for d in documents if isinstance(d, dict)])
    assert sum(verdicts) > len(verdicts) // 2


_FORMAT_DOCUMENTS = [
    {"pattern": "[a-"},  # jsonschema-rs reads no format: jsonschema's regex check refuses
    {"properties": {"a": {"pattern": "(?P<n>a)\\d"}}},
    {"patternProperties": {"(bad": {}}},
    {"$ref": "#/$defs/a b", "$defs": {"a b": {}}},
    {"$id": "http://example.com/root.json", "$ref": "#/$defs/x", "$defs": {"x": {}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]},
    {"$schema": "http://json-schema.org/draft-04/schema", "exclusiveMinimum": True},
    {"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3},
    {"$schema": "https://example.com/own-dialect", "type": "string"},
    {"$schema": "https://json-schema.org/draft/2019-09/schema", "$recursiveRef": "#"},
    {"items": [{"type": "string"}]},  # draft 7 spelling without $schema: a fallback class
    {"exclusiveMaximum": True, "maximum": 3},  # draft 4 spelling without $schema
    {"enum": ["x"] * 100, "uniqueItems": True},
    {"properties": {"pattern": {"type": "string"}, "$ref": {"const": "not a ref"}}},
    # jsonschema-rs's own draft 4 metaschema allows an empty enum; jsonschema's does not
    {"$schema": "http://json-schema.org/draft-04/schema#", "enum": []},
]


def _verdict(document: dict[str, Any]) -> tuple[str, bool]:
    from formcast.schema import _metaschema_class

    cls, error = _metaschema_class(document)
    return cls.__name__, error is None


def _both_ways(documents: list[Any], monkeypatch: pytest.MonkeyPatch) -> int:
    """Assert that each document gets the same class and verdict with the compiled check
    first and with jsonschema alone; returns how many the compiled check answered."""
    import jsonschema

    import formcast.schema

    native = pytest.importorskip("jsonschema_rs")
    answered = 0
    for document in documents:
        if not isinstance(document, dict):
            continue
        first = jsonschema.validators.validator_for(
            document, default=jsonschema.Draft202012Validator
        )
        monkeypatch.setattr(formcast.schema, "_compiled_checks", lambda: native)
        fast = _verdict(document)
        accepted = formcast.schema._accepted_natively(document, first)
        monkeypatch.setattr(formcast.schema, "_compiled_checks", lambda: None)
        assert fast == _verdict(document), json.dumps(document)[:200]
        if accepted:  # what the compiled check accepts, jsonschema accepts
            first.check_schema(document)
            answered += 1
    return answered


def test_the_compiled_metaschema_check_gives_jsonschemas_verdicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """jsonschema-rs answers the documents it accepts; jsonschema still judges the rest:
    formats (which jsonschema-rs does not check), other drafts, unknown dialects."""
    answered = _both_ways(_INVALID_DOCUMENTS + _FORMAT_DOCUMENTS, monkeypatch)
    assert answered >= 6  # the fast path is taken where it can be
    with pytest.raises(SchemaError, match=r"'\[a-' is not a 'regex'"):
        load_schema({"type": "string", "pattern": "[a-"})


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_the_compiled_metaschema_check_agrees_on_real_schemas(
    maskbench_dir: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = [
        json.loads(path.read_text())["schema"]
        for path in sorted(maskbench_dir.glob("*.json"))[3::30]
    ]
    assert _both_ways(documents, monkeypatch) > len(documents) // 2


# keywords whose values the metaschemas of drafts 4 to 2020-12 check (some with a format),
# and a property name ("a")
_KEYWORDS = [
    "type", "pattern", "$ref", "items", "minimum", "exclusiveMinimum", "maximum", "enum",
    "properties", "a", "required", "$id", "anyOf", "patternProperties", "$defs",
    "prefixItems", "minLength", "dependencies",
]  # fmt: skip
_KEYWORD_VALUES: Any = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from(
        ["string", "integer", "object", "#", "#/$defs/a", "a b", "[a-", "^x+$", "(?P<n>x)"]
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYWORDS), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    document=st.dictionaries(st.sampled_from(_KEYWORDS), _KEYWORD_VALUES, max_size=4),
    dialect=st.sampled_from(
        [
            None,
            "http://json-schema.org/draft-04/schema#",
            "http://json-schema.org/draft-07/schema",
            "https://json-schema.org/draft/2019-09/schema",
            "https://json-schema.org/draft/2020-12/schema",
        ]
    ),
)
def test_the_compiled_metaschema_check_agrees_on_random_documents(
    document: dict[str, Any], dialect: str | None
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        if dialect is not None:
            document = {"$schema": dialect, **document}
        _both_ways([document], monkeypatch)


def test_documents_nested_too_deep_never_reach_the_compiled_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """jsonschema-rs's recursion has no guard (20,000 levels end the process): past
    _NATIVE_DEPTH containers the document goes to jsonschema without calling it."""
    import types

    import jsonschema

    import formcast.schema

    def nested(depth: int) -> dict[str, Any]:
        document: dict[str, Any] = {}
        inner = document
        for _ in range(depth):
            inner["items"] = {}
            inner = inner["items"]
        return document

    pytest.importorskip("jsonschema_rs")
    asked: list[int] = []
    stub = types.SimpleNamespace(is_valid=lambda d: asked.append(1))
    monkeypatch.setattr(formcast.schema, "_native_validator", lambda cls: stub)
    first = jsonschema.Draft202012Validator
    limit = formcast.schema._NATIVE_DEPTH
    assert not formcast.schema._accepted_natively(nested(limit + 1), first) and not asked
    formcast.schema._accepted_natively(nested(limit - 1), first)
    assert asked == [1]


def test_jsonschema_rs_is_imported_by_the_first_check_not_by_import_formcast() -> None:
    """``import formcast`` leaves jsonschema-rs (~20 ms to import) to the first schema
    it checks, which then uses it."""
    pytest.importorskip("jsonschema_rs")
    run_in_fresh_interpreter(
        """
        import sys
        import formcast
        assert "jsonschema_rs" not in sys.modules
        from formcast.schema import load_schema
        load_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
        assert "jsonschema_rs" in sys.modules
        """
    )
