"""``$ref`` and ``allOf`` flattening, recursion unrolling, and shared definitions.

* :class:`Flattener` expands ``$ref`` (local pointers, ``$anchor``, ``$id`` bases, through
  :class:`formcast.schema.References`) and ``allOf`` into the flat conjunction of parts
  that the families read. A reference followed more than ``max_depth`` times along one
  path gives a :class:`~formcast.regex.parts.Never`, which the callers drop where the
  schema allows (an optional property, an empty array, an ``anyOf`` branch): that is
  how recursion is unrolled.
* :class:`Definitions` turns a regex into a call ``(?&dN)`` to a definition written once,
  and writes the ``(?(DEFINE)...)`` prefix of the definitions a regex calls (see
  "Definitions" in :mod:`formcast.regex`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formcast.automaton.choices import pattern_cost
from formcast.errors import SchemaError, UnsupportedSchemaError
from formcast.regex.dialect import SHARE_MIN_LENGTH, calls
from formcast.regex.parts import REFUSED_KEYWORDS, VALIDATION_KEYWORDS, Never, Part, TooLarge
from formcast.schema import References, join_pointer
from formcast.text import FROM_TEXT_KEYWORD

# Calls are virtual copies whose state ids number the whole expansion (see automaton.py);
# past this inlined length, recursion is unrolled fewer times.
_MAX_EXPANDED_LENGTH = 2**56


class Definitions:
    """The definitions of one translation: regex text -> name, in the order made (a body
    calls earlier definitions only, so nothing recurses).

    ``share_long``: whether regexes past ``min_length`` become definitions unasked
    (without it only forced ones do); ``enabled``: off while building regexes that
    Python's ``re`` must read (a call is not ``re`` syntax).
    """

    def __init__(self, share_long: bool) -> None:
        self.share_long = share_long
        self.enabled = True
        self.names: dict[str, str] = {}
        self.defined_length = 0  # pattern_cost of every body so far (~ their characters)
        self._expanded: dict[str, int] = {}  # name -> length with its calls inlined

    def share(
        self,
        regex: str,
        force: bool = False,
        min_length: int = SHARE_MIN_LENGTH,
        where: tuple[str, str] = ("$ref", ""),
    ) -> str:
        """``(?&name)`` calling a definition of ``regex`` (made once per distinct text),
        for regexes of at least ``min_length`` characters (any, with ``force``);
        ``regex`` itself while sharing is off (regexes that ``re`` must read).

        Raises TooLarge, blaming ``where`` (keyword, pointer), when the definition's
        inlined length would pass :data:`_MAX_EXPANDED_LENGTH`."""
        if not self.enabled or (not force and (len(regex) < min_length or not self.share_long)):
            return regex
        name = self.names.get(regex)
        if name is None:
            expanded = len(regex) + sum(self._expanded[c] for c in calls(regex))
            if expanded > _MAX_EXPANDED_LENGTH:
                raise TooLarge(
                    *where,
                    f"the regex would expand to more than {_MAX_EXPANDED_LENGTH:.2e} characters",
                )
            name = self.names[regex] = f"d{len(self.names)}"
            self._expanded[name] = expanded
            self.defined_length += pattern_cost(regex)
        return f"(?&{name})"

    def prefixed(self, main: str) -> str:
        """``main`` preceded by the definitions it calls, directly or through others."""
        bodies = {name: body for body, name in self.names.items()}
        used: set[str] = set()
        pending = calls(main)
        while pending:
            name = pending.pop()
            if name not in used and name in bodies:
                used.add(name)
                pending.extend(calls(bodies[name]))
        if not used:
            return main
        defined = "".join(
            f"(?P<{name}>{body})" for body, name in self.names.items() if name in used
        )
        return f"(?(DEFINE){defined}){main}"


class Flattener:
    """Flattens the parts of one schema document; ``recursive`` turns true once some
    reference has been met again inside itself."""

    def __init__(self, root: Any, max_depth: int) -> None:
        self.references = References(root)
        self.max_depth = max_depth
        self.recursive = False

    def resolve(self, ref: str, pointer: str) -> tuple[Any, str]:
        """The schema ``ref`` (found at ``pointer``) points to, and its pointer."""
        return self.references.resolve(ref, pointer)

    def flatten(
        self, parts: list[Part], refs: tuple[str, ...]
    ) -> tuple[list[Part], tuple[str, ...], Never | None]:
        """Expand ``$ref`` and ``allOf`` into a flat list of object schemas."""
        out: list[Part] = []
        queue = list(parts)
        while queue:
            part = queue.pop(0)
            schema = part.schema
            if schema is True:
                continue
            if schema is False:
                return [], refs, Never("false", part.pointer, "the schema false allows no value")
            if not isinstance(schema, dict):
                raise SchemaError(
                    f"expected a schema (object or boolean) at {part.pointer or '/'}, found "
                    f"{type(schema).__name__}"
                )
            for keyword, reason in REFUSED_KEYWORDS.items():
                if keyword in schema:
                    raise UnsupportedSchemaError(keyword, part.pointer, reason)
            expanded: list[Part] = []
            if "$ref" in schema:
                ref = schema["$ref"]
                if not isinstance(ref, str):
                    raise SchemaError(f"expected a string $ref at {part.pointer or '/'}")
                target, target_pointer = self.resolve(ref, part.pointer)
                if target_pointer in refs:
                    self.recursive = True
                if refs.count(target_pointer) > self.max_depth:
                    return (
                        [],
                        refs,
                        Never(
                            "$ref",
                            part.pointer,
                            f"recursion deeper than max_recursion_depth={self.max_depth}",
                        ),
                    )
                refs = (*refs, target_pointer)
                expanded.append(Part(target, target_pointer))
            if "allOf" in schema:
                subs = schema["allOf"]
                if not isinstance(subs, list):
                    raise SchemaError(f"expected a list for allOf at {part.pointer or '/'}")
                for i, sub in enumerate(subs):
                    expanded.append(
                        Part(sub, join_pointer(part.pointer, "allOf", i), part.synthetic)
                    )
            if expanded:
                rest = {k: v for k, v in schema.items() if k not in ("$ref", "allOf")}
                if _has_validation(rest):
                    expanded.append(Part(rest, part.pointer, part.synthetic))
                queue[0:0] = expanded
                continue
            if _has_validation(schema):
                out.append(part)
        return out, refs, None


def _has_validation(schema: Mapping[str, Any]) -> bool:
    return any(
        k in VALIDATION_KEYWORDS or k in REFUSED_KEYWORDS or k == FROM_TEXT_KEYWORD for k in schema
    )
