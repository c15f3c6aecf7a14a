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
* With ``max_recursion_depth=None`` recursion is not unrolled: a reference met again
  inside itself becomes a call ``(?&rN)`` to a *recursive* definition of its target
  (:class:`Recursion`), which the automaton reads exactly with a pushdown automaton
  (:mod:`formcast.automaton.pushdown`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formcast.automaton.choices import pattern_cost
from formcast.errors import SchemaError, UnsupportedSchemaError
from formcast.regex.dialect import SHARE_MIN_LENGTH, calls
from formcast.regex.parts import (
    REFUSED_KEYWORDS,
    VALIDATION_KEYWORDS,
    Never,
    Part,
    Result,
    TooLarge,
)
from formcast.schema import References, join_pointer
from formcast.text import FROM_TEXT_KEYWORD

COMBINED_RECURSION_DEPTH = 3
"""With exact recursion, how many times a recursive reference combined with other keywords
(``allOf`` siblings, a ``$ref`` with ``minProperties``...) is unrolled: no call can stand
for the conjunction, so it is unrolled as by default (stricter, never looser)."""

# Calls are virtual copies whose state ids number the whole expansion (see automaton.py);
# past this inlined length, recursion is unrolled fewer times.
_MAX_EXPANDED_LENGTH = 2**56


class Definitions:
    """The definitions of one translation: regex text -> name, in the order made (a body
    shared by :meth:`share` calls earlier definitions only, so nothing recurses there;
    recursive definitions are added by :meth:`define_recursive`).

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
        self._calls: dict[str, list[str]] = {}  # name -> what its body calls (shared ones)
        self.recursive: dict[str, str] = {}  # name -> body of each recursive definition

    def define_recursive(self, name: str, body: str) -> None:
        """Add the recursive definition ``name`` (its calls are call edges of a pushdown
        automaton, not copies: they add nothing to the inlined length)."""
        self.recursive[name] = body
        self._expanded[name] = 0
        self.defined_length += len(body)

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
            # a recursive definition still being translated inlines to nothing either
            called = calls(regex)
            expanded = len(regex) + sum(self._expanded.get(c, 0) for c in called)
            if expanded > _MAX_EXPANDED_LENGTH:
                raise TooLarge(
                    *where,
                    f"the regex would expand to more than {_MAX_EXPANDED_LENGTH:.2e} characters",
                )
            name = self.names[regex] = f"d{len(self.names)}"
            self._expanded[name] = expanded
            self._calls[name] = called
            self.defined_length += pattern_cost(regex)
        return f"(?&{name})"

    def prefixed(self, main: str) -> str:
        """``main`` preceded by the definitions it calls, directly or through others."""
        bodies = {name: body for body, name in self.names.items()} | self.recursive
        used: set[str] = set()
        pending = calls(main)
        while pending:
            name = pending.pop()
            if name not in used and name in bodies:
                used.add(name)
                known = self._calls.get(name)
                pending.extend(calls(bodies[name]) if known is None else known)
        if not used:
            return main
        defined = "".join(f"(?P<{name}>{bodies[name]})" for name in bodies if name in used)
        return f"(?(DEFINE){defined}){main}"


class Recursion:
    """Recursive definitions of one translation (``max_recursion_depth=None``).

    The target of a reference met again inside itself gets a name ``rN`` (reserved by
    :meth:`call`); once the first expansion of that target is translated, it becomes the
    body of ``rN`` (:meth:`finish`) and the expansion itself a call. Later references to
    the same target, in the same spelling context, call it directly.
    """

    def __init__(self, definitions: Definitions) -> None:
        self.definitions = definitions
        self.names: dict[tuple[str, bool], str] = {}  # (target pointer, plain strings)
        self.defined: set[str] = set()

    def known(self, pointer: str, plain_strings: bool) -> str | None:
        """The call of the finished definition of ``pointer``, if there is one."""
        name = self.names.get((pointer, plain_strings))
        return f"(?&{name})" if name in self.defined else None

    def call(self, pointer: str, plain_strings: bool) -> str:
        """A call to the recursive definition of ``pointer`` (its name reserved)."""
        name = self.names.get((pointer, plain_strings))
        if name is None:
            name = self.names[(pointer, plain_strings)] = f"r{len(self.names)}"
        return f"(?&{name})"

    def pending(self) -> tuple[str, bool] | None:
        """A target called but not defined yet, if any."""
        return next((key for key, name in self.names.items() if name not in self.defined), None)

    def finish(self, pointer: str, plain_strings: bool, result: Result) -> Result:
        """``result`` (the translation of ``pointer``'s schema) as a call to its recursive
        definition when the translation called it, else ``result`` itself.

        Raises UnsupportedSchemaError when a schema that calls itself allows no value (its
        calls would be left without a definition)."""
        name = self.names.get((pointer, plain_strings))
        if name is None or name in self.defined:
            return result
        if isinstance(result, Never):
            raise UnsupportedSchemaError(
                "$ref", pointer, f"the recursive schema allows no value: {result.reason}"
            )
        self.definitions.define_recursive(name, result)
        self.defined.add(name)
        return f"(?&{name})"


class Flattener:
    """Flattens the parts of one schema document; ``recursive`` turns true once some
    reference has been met again inside itself."""

    def __init__(
        self, root: Any, max_depth: int | None, references: References | None = None
    ) -> None:
        """``max_depth`` None: recursion is exact, through calls made before flattening
        (:class:`Recursion`); a recursive reference that reaches :meth:`flatten` is one
        combined with other keywords, which no call can stand for: it is unrolled
        :data:`COMBINED_RECURSION_DEPTH` times, as recursion is by default.
        ``references``: the resolver of ``root`` when one exists already (another pass
        over the same document), else a new one."""
        self.references = References(root) if references is None else references
        self.max_depth = max_depth
        self.recursive = False

    def resolve(self, ref: str, pointer: str) -> tuple[Any, str]:
        """The schema ``ref`` (found at ``pointer``) points to, and its pointer."""
        return self.references.resolve(ref, pointer)

    def plain_reference(self, parts: list[Part]) -> str | None:
        """The target pointer of ``parts`` when they hold one ``$ref`` and nothing else
        that validates (a value of them is exactly a value of its target; parts of
        annotations only, as a distributed ``anyOf`` leaves, do not count), else None."""
        validating = [
            p
            for p in parts
            if p.schema is not True
            and (not isinstance(p.schema, dict) or _has_validation(p.schema))
        ]
        if len(validating) != 1:
            return None
        schema, pointer = validating[0].schema, validating[0].pointer
        while isinstance(schema, dict):  # through allOf of one schema: [{"$ref": ...}]
            reference = schema.get("$ref")
            if isinstance(reference, str) and _VALIDATING_BUT_REF.isdisjoint(schema):
                return self.resolve(reference, pointer)[1]
            wrapped = schema.get("allOf")
            if not isinstance(wrapped, list) or len(wrapped) != 1:
                return None
            if not _VALIDATING_BUT_ALL_OF.isdisjoint(schema):
                return None
            schema, pointer = wrapped[0], join_pointer(pointer, "allOf", 0)
        return None

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
            if not _REFUSED.isdisjoint(schema):
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
                depth = COMBINED_RECURSION_DEPTH if self.max_depth is None else self.max_depth
                if refs.count(target_pointer) > depth:
                    return (
                        [],
                        refs,
                        Never(
                            "$ref",
                            part.pointer,
                            f"recursion deeper than max_recursion_depth={depth}"
                            if self.max_depth is not None
                            else f"a recursive reference combined with other keywords, "
                            f"unrolled {depth} times",
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
    return not _VALIDATING.isdisjoint(schema)


_REFUSED = frozenset(REFUSED_KEYWORDS)
# the keywords that make a schema more than annotations (one set test per schema)
_VALIDATING = frozenset(VALIDATION_KEYWORDS) | _REFUSED | {FROM_TEXT_KEYWORD}
_VALIDATING_BUT_REF = _VALIDATING - {"$ref"}
_VALIDATING_BUT_ALL_OF = _VALIDATING - {"allOf"}
