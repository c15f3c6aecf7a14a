"""A schema whose plain regex passes ``Limits.unshared_regex_length`` is translated again,
with long sub-schemas as definitions. The second pass takes from the first the
translations it would write alike (``_Translator.carry_over``): the regex is byte for
byte the one a second pass from scratch writes, in every recursion mode and with values
copied from the text, and a warning of a carried sub-schema is still given."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from regex_checks import MASKBENCH

import formcast.regex.translator as translator_module
from formcast.limits import Limits
from formcast.regex.translator import schema_to_regex

_SMALL = Limits(unshared_regex_length=3_000)


def _address(depth: int, zip_format: str = "date") -> dict[str, Any]:
    node: dict[str, Any] = {
        "type": "object",
        "properties": {
            "street": {"type": "string", "pattern": "^[A-Z][a-z]+$", "maxLength": 40},
            "zip": {"type": "string", "format": zip_format},
            "kind": {"enum": ["home", "work", "other"]},
            "lines": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            "note": {},  # any value: its regex is kept per pass
        },
        "required": ["street"],
    }
    if depth:
        node["properties"]["next"] = _address(depth - 1, zip_format)
    return node


SCHEMAS: dict[str, dict[str, Any]] = {
    "nested": {
        "type": "object",
        "properties": {f"a{k}": _address(2) for k in range(6)},
        "additionalProperties": False,
    },
    "references": {
        "$defs": {"address": _address(1), "any": {}},
        "type": "object",
        "properties": {
            **{f"r{k}": {"$ref": "#/$defs/address"} for k in range(8)},
            "free": {"$ref": "#/$defs/any"},
            "number": {"type": "number", "minimum": 0, "maximum": 1000},
        },
    },
    "any values": {  # `true` in two contexts: one regex of any value, kept per pass
        "$defs": {
            "inner": {
                "type": "object",
                "properties": {"c": True, "d": _address(0)},
                "additionalProperties": True,
            }
        },
        "type": "object",
        "properties": {"a": True, "b": {"$ref": "#/$defs/inner"}, "e": _address(1)},
        "additionalProperties": True,
    },
    "recursive": {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "value": _address(1),
                    "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
            }
        },
        "type": "object",
        "properties": {f"t{k}": {"$ref": "#/$defs/node"} for k in range(4)},
    },
}
OPTIONS: list[dict[str, Any]] = [
    {},
    {"max_recursion_depth": 2},
    {"mode": "specification"},
    {"from_text": True},
]


def _translate(
    schema: Any, carry: bool, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> tuple[str, int, bool]:
    """The regex, how many translations the second pass took from the first, and
    whether there was a second pass."""
    taken: list[bool] = []
    passes: list[int] = []
    reuse = translator_module._Translator._reuse
    carry_over = translator_module._Translator.carry_over

    def counted(self: Any, key: Any, known: Any) -> str:
        taken.append(key not in self._translated)
        return reuse(self, key, known)

    def handed_over(self: Any) -> Any:
        passes.append(1)
        return carry_over(self) if carry else {}

    with monkeypatch.context() as patch:
        patch.setattr(translator_module._Translator, "_reuse", counted)
        patch.setattr(translator_module._Translator, "carry_over", handed_over)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            regex = schema_to_regex(schema, limits=_SMALL, **options)
    return regex, sum(taken), bool(passes)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: json.dumps(o))
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_the_second_pass_writes_what_it_would_from_scratch(
    name: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    carried, taken, second_pass = _translate(SCHEMAS[name], True, monkeypatch, **options)
    fresh, none_taken, _ = _translate(SCHEMAS[name], False, monkeypatch, **options)
    assert none_taken == 0
    assert carried == fresh
    if name != "recursive" or "max_recursion_depth" in options:  # exact recursion: short
        assert second_pass, "expected a second pass"
    if second_pass and not options.get("from_text"):
        assert taken > 0, "expected translations carried over from the first pass"


def test_nothing_is_carried_when_values_are_copied_from_the_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, taken, second_pass = _translate(SCHEMAS["nested"], True, monkeypatch, from_text=True)
    assert second_pass and taken == 0


def test_a_warning_of_a_carried_sub_schema_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown format (an annotation in specification mode) warns in the first pass,
    where the sub-schema is translated; the second pass takes its translation."""
    schema = {
        "type": "object",
        "properties": {f"a{k}": _address(2, "postal-code") for k in range(6)},
    }
    assert _translate(schema, True, monkeypatch, mode="specification")[1] > 0
    with pytest.warns(UserWarning, match="postal-code"):
        schema_to_regex(schema, limits=_SMALL, mode="specification")


def _sample() -> list[Path]:
    return sorted(MASKBENCH.glob("*.json"))[::150] if MASKBENCH.is_dir() else []


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_maskbench_regexes_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    files = _sample()
    if not files:
        pytest.skip("the maskbench data is not here")
    compared = 0
    for path in files:
        schema = json.loads(path.read_text())["schema"]
        results = []
        for carry in (True, False):
            try:
                results.append(_translate(schema, carry, monkeypatch, mode="specification")[0])
            except Exception as error:  # both must fail alike
                results.append(f"{type(error).__name__}: {error}")
        assert results[0] == results[1], path.name
        compared += 1
    assert compared >= 15
