"""Constraints, targets and an output class shared by the tests of the decoding loop,
of batching and of steering.

The regexes are written out by hand (not compiled from a schema) so that these tests
exercise the loop alone. ``ISO`` and ``DMY`` are two outputs for :class:`Event`: the
first is rejected by its validator, the second passes.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, field_validator

JSON_STRING = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
RECEIPT = (
    r'\{"company":' + JSON_STRING + r',"total":-?(0|[1-9][0-9]*)(\.[0-9]+)?,'
    r'"paid":(true|false)\}'
)
NAME = r'\{"name":' + JSON_STRING + r"\}"
EVENT = r'\{"date":' + JSON_STRING + r',"city":' + JSON_STRING + r"\}"
ISO = '{"date":"2018-03-12","city":"Paris"}'
DMY = '{"date":"12/03/2018","city":"Paris"}'

#: Where the default chat template ends a prompt: scripted models answer after it.
ASSISTANT = "<|im_start|>assistant\n"


class Event(BaseModel):
    date: str
    city: str

    @field_validator("date")
    @classmethod
    def day_month_year(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9]{2}/[0-9]{2}/[0-9]{4}", value):
            raise ValueError("expected a date written dd/mm/yyyy")
        return value


class Node(BaseModel):
    """A recursive output type: exact at any depth by default."""

    name: str
    children: list[Node] = []


def nested_node_text(depth: int, name: str = "n") -> str:
    """The compact JSON of a chain of ``depth`` nested nodes below a root."""
    text = f'{{"name":"{name}{depth}"}}'
    for level in range(depth - 1, -1, -1):
        text = f'{{"name":"{name}{level}","children":[{text}]}}'
    return text
