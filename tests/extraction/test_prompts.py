"""The default prompt: what the output type says about itself reaches the model.

Field descriptions, examples, constraints in words, nested models' fields and the class
docstring are rendered by ``describe_fields`` and ``describe_instructions``; a model that
has none of them renders exactly as it always did.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from formcast import Extractor, PromptTemplate
from formcast.constraint import output_spec
from formcast.extraction.extractor import (
    DEFAULT_INSTRUCTIONS,
    DEFAULT_USER,
    describe_fields,
    describe_instructions,
)


def fields_of(output: Any) -> str:
    return describe_fields(output_spec(output).json_schema)


def instructions_of(output: Any) -> str:
    return describe_instructions(DEFAULT_INSTRUCTIONS, output_spec(output).json_schema)


class Plain(BaseModel):
    company: str
    total: float
    count: int
    paid: bool
    tags: list[str]
    note: str | None = None
    kind: Literal["cash", "card"] = "cash"


def test_a_model_without_descriptions_renders_as_before() -> None:
    assert fields_of(Plain) == (
        "- company (string)\n"
        "- total (number)\n"
        "- count (integer)\n"
        "- paid (boolean)\n"
        "- tags (list of string)\n"
        "- note (string or null, optional)\n"
        "- kind (one of 'cash', 'card', optional)"
    )
    assert instructions_of(Plain) == DEFAULT_INSTRUCTIONS
    messages = PromptTemplate().render(
        text="ACME 5.50", schema=output_spec(Plain).json_schema, instructions=DEFAULT_INSTRUCTIONS
    )
    assert messages[1]["content"] == DEFAULT_USER.format(
        instructions=DEFAULT_INSTRUCTIONS, fields=fields_of(Plain), text="ACME 5.50"
    )


def test_outputs_that_are_not_models_render_as_before() -> None:
    assert fields_of(int) == "- result (integer)"
    assert fields_of(list[str]) == "- result (list of string)"
    assert describe_fields(None) == "- (see the instructions)"
    assert describe_fields({"type": "string"}) == "- a value of type string"
    assert describe_instructions("Say it.", None) == "Say it."


class Described(BaseModel):
    company: str = Field(description="name of the shop", examples=["KEDAI BUKU ALI"])
    total: float = Field(description="Total paid.", examples=[5.5, 12])
    date: str = Field(examples=["01/02/2020"])


def test_descriptions_and_examples_are_in_the_field_lines() -> None:
    assert fields_of(Described) == (
        '- company (string): name of the shop, e.g. "KEDAI BUKU ALI"\n'
        "- total (number): Total paid. E.g. 5.5 or 12\n"
        '- date (string): e.g. "01/02/2020"'
    )


def test_at_most_three_examples_and_one_line_per_field() -> None:
    class Many(BaseModel):
        word: str = Field(description="a word\n   from the text", examples=["a", "b", "c", "d"])

    assert fields_of(Many) == '- word (string): a word from the text, e.g. "a" or "b" or "c"'


class Shop(BaseModel):
    """A receipt from a shop.

    Amounts are in ringgit,
    as printed.
    """

    company: str


def test_the_docstring_follows_the_instructions() -> None:
    assert instructions_of(Shop) == (
        f"{DEFAULT_INSTRUCTIONS}\nA receipt from a shop.\nAmounts are in ringgit, as printed."
    )
    assert describe_instructions("", output_spec(Shop).json_schema).startswith("A receipt")
    assert fields_of(Shop) == "- company (string)"  # the docstring is not repeated here


class Line(BaseModel):
    """One bought item."""

    name: str = Field(description="product name", examples=["notebook"])
    price: float


class Order(BaseModel):
    shop: str
    lines: list[Line]
    first: Line | None = None
    extra: list[Line] | None = Field(default=None, description="items given for free")


def test_nested_fields_are_indented_under_their_field_and_spelled_out_once() -> None:
    assert fields_of(Order) == (
        "- shop (string)\n"
        "- lines (list of Line): One bought item.\n"
        '  - name (string): product name, e.g. "notebook"\n'
        "  - price (number)\n"
        "- first (Line or null, optional): One bought item.\n"
        "- extra (list of Line or null, optional): items given for free"
    )


def test_an_optional_nested_model_is_spelled_out() -> None:
    class Maybe(BaseModel):
        line: Line | None = None

    assert fields_of(Maybe).splitlines()[1:] == [
        '  - name (string): product name, e.g. "notebook"',
        "  - price (number)",
    ]


def test_recursive_and_deep_models_terminate() -> None:
    class Node(BaseModel):
        """A node of a tree."""

        name: str
        children: list[Node] = []

    assert instructions_of(Node).endswith("\nA node of a tree.")
    assert fields_of(Node) == (
        "- name (string)\n- children (list of Node, optional): A node of a tree."
    )

    class D(BaseModel):
        d: int

    class C(BaseModel):
        c: D

    class B(BaseModel):
        b: C

    class A(BaseModel):
        a: B

    assert fields_of(A) == "- a (B)\n  - b (C)\n    - c (D)"  # three levels at most


def test_inline_nested_objects_of_a_json_schema() -> None:
    schema = {
        "type": "object",
        "description": "A person.",
        "properties": {
            "name": {"type": "string", "description": "full name"},
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string", "examples": ["Paris"]}},
                "required": ["city"],
            },
        },
        "required": ["name"],
    }
    assert describe_fields(schema) == (
        '- name (string): full name\n- address (object, optional)\n  - city (string): e.g. "Paris"'
    )
    assert describe_instructions("Extract.", schema) == "Extract.\nA person."


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


def test_constraints_and_formats_in_words() -> None:
    class Constrained(BaseModel):
        code: str = Field(min_length=3, max_length=3, pattern=r"^[A-Z]+$")
        name: str = Field(max_length=20)
        word: str = Field(min_length=1)
        quantity: int = Field(ge=0, le=99)
        price: float = Field(gt=0)
        items: list[int] = Field(min_length=1, max_length=4)
        day: dt.date
        colour: Colour
        note: str | None = Field(default=None, max_length=1)

    assert fields_of(Constrained) == (
        "- code (string, exactly 3 characters, matching ^[A-Z]+$)\n"
        "- name (string, at most 20 characters)\n"
        "- word (string, at least 1 character)\n"
        "- quantity (integer, 0 to 99)\n"
        "- price (number, above 0)\n"
        "- items (list of integer, 1 to 4 items)\n"
        "- day (string, date YYYY-MM-DD)\n"
        "- colour (one of 'red', 'green')\n"
        "- note (string or null, optional, at most 1 character)"
    )


def test_a_long_pattern_is_left_out() -> None:
    class Coded(BaseModel):
        code: str = Field(pattern="^" + "[A-Z]" * 20 + "$")

    assert fields_of(Coded) == "- code (string)"


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        ({"type": "string"}, "- quote (string, copied exactly from the text)"),
        (
            {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "- quote (string or null, copied exactly from the text)",
        ),
        (
            {"type": "array", "items": {"type": "string"}},
            "- quote (list of string, copied exactly from the text)",
        ),
    ],
)
def test_values_copied_from_the_text_say_so(extra: dict[str, Any], line: str) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}, "required": ["quote"]}
    if "anyOf" in extra:
        extra["anyOf"][0]["x-formcast-from-text"] = True
    elif "items" in extra:
        extra["items"]["x-formcast-from-text"] = True
    else:
        extra["x-formcast-from-text"] = True
    schema["properties"]["quote"] = extra
    assert describe_fields(schema) == line


def test_from_text_marked_through_pydantic() -> None:
    class Quoted(BaseModel):
        company: str = Field(
            description="shop name", json_schema_extra={"x-formcast-from-text": True}
        )

    assert fields_of(Quoted) == "- company (string, copied exactly from the text): shop name"


def test_the_extractor_sends_the_rendered_prompt(
    tiny_model: Any, tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    extractor = Extractor(tiny_model, tokenizer, max_new_tokens=64)
    sent: list[list[dict[str, str]]] = []
    encode = extractor._encode

    def record(messages: list[dict[str, str]]) -> list[int]:
        sent.append(messages)
        return encode(messages)

    monkeypatch.setattr(extractor, "_encode", record)

    def prompts_of(text: str) -> list[str]:  # the prompts of this text (not prefix probes)
        return [m[-1]["content"] for m in sent if m[-1]["content"].rstrip().endswith(text)]

    assert extractor.run(Order, "ACME: 1 notebook 2.75").ok
    (user,) = prompts_of("ACME: 1 notebook 2.75")
    assert user.startswith(DEFAULT_INSTRUCTIONS + "\n\nFields:\n- shop (string)\n")
    assert '  - name (string): product name, e.g. "notebook"' in user
    extractor.run(Shop, "ACME", instructions="Find the shop.")
    (shop,) = prompts_of("ACME")
    assert shop.startswith("Find the shop.\nA receipt from a shop.\n")
