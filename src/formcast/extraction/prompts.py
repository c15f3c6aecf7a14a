"""Prompts: how a request (a text, an output schema, an instruction) becomes chat messages.

:class:`PromptTemplate` renders the messages; :func:`describe_fields` and
:func:`describe_instructions` write the parts taken from the output's JSON Schema. Every
function here is pure and deterministic, so a prompt depends only on its inputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from formcast.text import FROM_TEXT_KEYWORD

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_SYSTEM",
    "DEFAULT_USER",
    "GRAMMAR_INSTRUCTIONS",
    "REGEX_INSTRUCTIONS",
    "PromptTemplate",
    "describe_fields",
    "describe_instructions",
    "grammar_instructions",
    "with_feedback",
]

DEFAULT_SYSTEM = (
    "You are a precise information extraction assistant. You read a text and reply with "
    "a single JSON object holding the requested fields, copied from the text."
)
DEFAULT_USER = "{instructions}\n\nFields:\n{fields}\n\nText:\n{text}"
DEFAULT_INSTRUCTIONS = "Extract the following fields from the text."
REGEX_INSTRUCTIONS = "Answer with text matching the regular expression {pattern}."
GRAMMAR_INSTRUCTIONS = (
    "Answer with text that follows this {syntax} grammar, from its rule {start}:\n{grammar}"
)
#: The grammar shown in the prompt is cut after this many characters (comments and blank
#: lines are dropped first), so that a large grammar does not crowd out the text.
MAX_GRAMMAR_SHOWN = 1500
_GRAMMAR_NAMES = {"gbnf": "GBNF", "lark": "Lark"}


def grammar_instructions(
    text: str, syntax: str, start: str, embedded: Sequence[tuple[str, str]] = ()
) -> str:
    """The instructions for a grammar output: :data:`GRAMMAR_INSTRUCTIONS` with the
    grammar's lines, without comment-only and blank lines, cut after
    :data:`MAX_GRAMMAR_SHOWN` characters; then a line per rule given as a constraint
    (``embedded``: rule name, what it stands for)."""
    lines = [
        line.rstrip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "//"))
    ]
    shown = "\n".join(lines)
    if len(shown) > MAX_GRAMMAR_SHOWN:
        rest = len(shown) - MAX_GRAMMAR_SHOWN
        shown = f"{shown[:MAX_GRAMMAR_SHOWN]}\n... ({rest} more characters)"
    lines = [f"where {name} is {description}" for name, description in embedded]
    return "\n".join(
        [
            GRAMMAR_INSTRUCTIONS.format(
                syntax=_GRAMMAR_NAMES.get(syntax, syntax), start=start, grammar=shown
            ),
            *lines,
        ]
    )


@dataclass(frozen=True)
class PromptTemplate:
    """How a request becomes chat messages.

    ``user`` may use the placeholders ``{instructions}`` (the instruction, then the output
    type's docstring), ``{fields}`` (one line per expected field, with its type,
    constraints, description and examples; nested fields indented) and ``{text}``.
    ``system`` may be ``None``. When the tokenizer has a chat template it is applied;
    otherwise the messages are joined with blank lines.
    """

    system: str | None = DEFAULT_SYSTEM
    user: str = DEFAULT_USER

    def messages(self, *, text: str, fields: str, instructions: str) -> list[dict[str, str]]:
        content = self.user.format(instructions=instructions, fields=fields, text=text)
        messages = [{"role": "user", "content": content}]
        if self.system is not None:
            messages.insert(0, {"role": "system", "content": self.system})
        return messages

    def render(
        self, *, text: str, schema: Mapping[str, Any] | None, instructions: str
    ) -> list[dict[str, str]]:
        """The messages for one text and one output schema: :meth:`messages` with
        ``fields`` from :func:`describe_fields` and ``instructions`` followed by the
        schema's own description (:func:`describe_instructions`)."""
        return self.messages(
            text=text,
            fields=describe_fields(schema),
            instructions=describe_instructions(instructions, schema),
        )


def describe_fields(schema: Mapping[str, Any] | None) -> str:
    """The ``{fields}`` block of the prompt: one line per property, in schema order.

    A line reads ``- name (type, notes): description, e.g. example``. The notes say
    ``optional`` for a property that is not required, then the constraints in words
    (``at most 20 characters``, ``0 to 99``, ``at most 3 items``), and ``copied exactly
    from the text`` for a property marked with ``x-formcast-from-text``. Up to three
    ``examples`` are shown as JSON. The fields of a nested object (inline, or a ``$ref``
    into ``$defs``) follow their field's line, indented by two spaces; a definition is
    spelled out once, and a recursive one is not spelled out again inside itself.

    The output is a pure function of the schema, so prompts are deterministic.
    """
    if not schema:
        return "- (see the instructions)"
    resolved = _resolve(schema, schema)
    properties = resolved.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return f"- a value of type {_type_name(schema, schema)}"
    lines: list[str] = []
    _property_lines(resolved, schema, 0, set(_root_ref(schema)), lines)
    return "\n".join(lines)


def describe_instructions(instructions: str, schema: Mapping[str, Any] | None) -> str:
    """The ``{instructions}`` of the prompt: ``instructions``, then on a new line the
    output type's own description (a Pydantic model's class docstring), if it has one."""
    if not schema:
        return instructions
    description = _text(_resolve(schema, schema).get("description"), single_line=False)
    if not description:
        return instructions
    return f"{instructions}\n{description}" if instructions else description


#: How far nested objects are spelled out below their field (levels of indentation).
MAX_FIELD_DEPTH = 3
#: At most this many of a property's ``examples`` are shown.
MAX_EXAMPLES = 3
#: A ``pattern`` longer than this is not shown (long patterns are rarely written by hand).
MAX_PATTERN_SHOWN = 40

_FORMAT_WORDS = {
    "date": "date YYYY-MM-DD",
    "date-time": "date and time YYYY-MM-DDTHH:MM:SS",
    "time": "time HH:MM:SS",
}


def _property_lines(
    obj: Mapping[str, Any],
    root: Mapping[str, Any],
    depth: int,
    spelled: set[str],
    lines: list[str],
) -> None:
    """Append the lines of ``obj``'s properties (and of their nested objects) to ``lines``.

    ``spelled`` holds the ``$ref`` targets already spelled out (or being spelled out);
    they are not spelled out again."""
    properties = obj.get("properties")
    if not isinstance(properties, Mapping):
        return
    required = set(obj.get("required", []))
    indent = "  " * depth
    for name, sub in properties.items():
        notes = [_type_name(sub, root)]
        if name not in required:
            notes.append("optional")
        notes.extend(_constraint_words(sub, root))
        nested_ref, nested = _nested_object(sub, root)
        tail = _field_tail(sub, nested)
        lines.append(f"{indent}- {name} ({', '.join(notes)}){tail}")
        if nested is None or depth + 1 >= MAX_FIELD_DEPTH or nested_ref in spelled:
            continue
        if nested_ref is not None:
            spelled.add(nested_ref)
        _property_lines(nested, root, depth + 1, spelled, lines)


def _field_tail(sub: Any, nested: Mapping[str, Any] | None) -> str:
    """``: description, e.g. example`` for a property line ("" when there is neither)."""
    if not isinstance(sub, Mapping):
        return ""
    description = _text(sub.get("description"))
    if not description and nested is not None:
        description = _text(nested.get("description"))  # the nested model's docstring
    examples = sub.get("examples")
    shown = ""
    if isinstance(examples, list) and examples:
        shown = " or ".join(_json_text(v) for v in examples[:MAX_EXAMPLES])
    if not shown:
        return f": {description}" if description else ""
    if not description:
        return f": e.g. {shown}"
    joint = " E.g." if description[-1] in ".!?" else ", e.g."
    return f": {description}{joint} {shown}"


def _type_name(sub: Any, root: Mapping[str, Any]) -> str:
    if not isinstance(sub, Mapping):
        return "any"
    if "$ref" in sub:
        target = _lookup(str(sub["$ref"]), root)
        if target is not None and "enum" in target and "properties" not in target:
            return _type_name(target, root)  # an Enum class: name its values
        return str(sub["$ref"]).rsplit("/", 1)[-1] or "value"
    if "enum" in sub:
        return "one of " + ", ".join(repr(v) for v in sub["enum"])
    if "const" in sub:
        return f"exactly {sub['const']!r}"
    if "anyOf" in sub:
        return " or ".join(_type_name(s, root) for s in sub["anyOf"])
    kind = sub.get("type", "any")
    if kind == "array":
        return f"list of {_type_name(sub.get('items', {}), root)}"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    fmt = sub.get("format")
    return f"{kind}, {_FORMAT_WORDS.get(fmt, fmt)}" if fmt else str(kind)


def _constraint_words(sub: Any, root: Mapping[str, Any]) -> list[str]:
    """The constraints of a property in words: lengths, bounds, item counts, a short
    pattern, and whether the value is copied from the text. Looks through ``$ref`` and
    through an optional (``X or null``) to the one branch that is not null."""
    sub = _non_null(sub, root)
    if not isinstance(sub, Mapping):
        return []
    words: list[str] = []
    if "minLength" in sub or "maxLength" in sub:
        words.append(_range_words(sub.get("minLength"), sub.get("maxLength"), "character"))
    pattern = sub.get("pattern")
    if isinstance(pattern, str) and len(pattern) <= MAX_PATTERN_SHOWN:
        words.append(f"matching {pattern}")
    low, high = sub.get("minimum"), sub.get("maximum")
    if low is not None and high is not None:
        words.append(f"{_number(low)} to {_number(high)}")
    elif low is not None:
        words.append(f"at least {_number(low)}")
    elif high is not None:
        words.append(f"at most {_number(high)}")
    if sub.get("exclusiveMinimum") is not None:
        words.append(f"above {_number(sub['exclusiveMinimum'])}")
    if sub.get("exclusiveMaximum") is not None:
        words.append(f"below {_number(sub['exclusiveMaximum'])}")
    if sub.get("multipleOf") is not None:
        words.append(f"a multiple of {_number(sub['multipleOf'])}")
    if "minItems" in sub or "maxItems" in sub:
        words.append(_range_words(sub.get("minItems"), sub.get("maxItems"), "item"))
    if _from_text(sub, root):
        words.append("copied exactly from the text")
    return words


def _from_text(sub: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    """Whether ``sub`` (or, for a list, its items) carries ``x-formcast-from-text``."""
    if sub.get(FROM_TEXT_KEYWORD):
        return True
    items = _non_null(sub.get("items"), root)
    return isinstance(items, Mapping) and bool(items.get(FROM_TEXT_KEYWORD))


def _range_words(low: Any, high: Any, unit: str) -> str:
    """``at least 1 item``, ``at most 20 characters``, ``2 to 5 items``, ``exactly 3 ...``."""

    def counted(n: Any) -> str:
        return f"{n} {unit}" if n == 1 else f"{n} {unit}s"

    if low is not None and high is not None:
        return f"exactly {counted(high)}" if low == high else f"{low} to {counted(high)}"
    if high is not None:
        return f"at most {counted(high)}"
    return f"at least {counted(low)}"


def _nested_object(
    sub: Any, root: Mapping[str, Any]
) -> tuple[str | None, Mapping[str, Any] | None]:
    """The object schema whose fields a property holds, and the ``$ref`` it came from.

    Looks through ``$ref``, a single ``allOf``, lists (their items) and optionals (the one
    branch that is not null). ``(None, None)`` when the property holds no object with
    ``properties`` (a scalar, a mapping, a union of several kinds)."""
    ref: str | None = None
    for _ in range(8):  # a chain of wrappers, never a cycle
        if not isinstance(sub, Mapping):
            return None, None
        if "$ref" in sub:
            ref = str(sub["$ref"])
            sub = _lookup(ref, root)
        elif isinstance(sub.get("allOf"), list) and len(sub["allOf"]) == 1:
            sub = sub["allOf"][0]
        elif "anyOf" in sub or "oneOf" in sub:
            branches = _not_null(sub)
            if len(branches) != 1:
                return None, None
            sub = branches[0]
        elif sub.get("type") == "array" and "items" in sub:
            sub = sub["items"]
        elif isinstance(sub.get("properties"), Mapping) and sub["properties"]:
            return ref, sub
        else:
            return None, None
    return None, None


def _non_null(sub: Any, root: Mapping[str, Any]) -> Any:
    """The single branch of an ``anyOf``/``oneOf`` that is not ``null`` (resolving a
    ``$ref``), else ``sub`` itself."""
    if not isinstance(sub, Mapping):
        return sub
    branches = _not_null(sub)
    return _resolve(branches[0] if len(branches) == 1 else sub, root)


def _not_null(sub: Mapping[str, Any]) -> list[Any]:
    """The branches of an ``anyOf``/``oneOf`` other than ``{"type": "null"}``."""
    branches = sub.get("anyOf", sub.get("oneOf"))
    if not isinstance(branches, list):
        return []
    return [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]


def _resolve(sub: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``sub``, or the definition its ``$ref`` points to when that is a local pointer."""
    if isinstance(sub, Mapping) and "$ref" in sub:
        target = _lookup(str(sub["$ref"]), root)
        if target is not None:
            return target
    return sub


def _root_ref(schema: Mapping[str, Any]) -> list[str]:
    """The top-level ``$ref`` of a schema (a recursive Pydantic model has one)."""
    return [str(schema["$ref"])] if "$ref" in schema else []


def _lookup(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema at a local JSON pointer (``#/$defs/Item``, ``#``), or None."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


def _text(value: Any, *, single_line: bool = True) -> str:
    """A description as prompt text: stripped; on one line, or with each paragraph on
    one line."""
    if not isinstance(value, str):
        return ""
    if single_line:
        return " ".join(value.split())
    paragraphs = (" ".join(p.split()) for p in value.strip().split("\n\n"))
    return "\n".join(p for p in paragraphs if p)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def _number(value: Any) -> str:
    """A bound as written in a prompt: ``5`` rather than ``5.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def with_feedback(messages: list[dict[str, str]], feedback: str) -> list[dict[str, str]]:
    """The messages with ``feedback`` (why the last output was rejected) appended to the
    last message, the user's."""
    last = messages[-1]
    return [*messages[:-1], {**last, "content": f"{last['content']}\n\n{feedback}"}]
