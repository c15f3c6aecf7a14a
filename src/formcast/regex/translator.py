"""The translator core: :func:`schema_to_regex` and the dispatch over keyword families.

:func:`schema_to_regex` checks its options, loads the schema, and runs a translation:
first with plain sub-schemas (concrete automaton states walk faster than calls), then,
past ``Limits.unshared_regex_length`` characters, with long sub-schemas as definitions, then with
recursion unrolled fewer times (with a warning) while the regex is still too large.

One :class:`_Translator` serves one attempt. It flattens a conjunction (``$ref``,
``allOf``), rewrites ``not``/``if``/dependencies, distributes the first
``anyOf``/``oneOf``, and hands what is left to the family of each allowed type (strings,
numbers, arrays, objects, enumerations, values from the text). The families reach back
only through :class:`~formcast.regex.context.Translation`, which it implements; none
imports this module.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from formcast.automaton.choices import CHOICE_COST_DIVISOR, choice_characters
from formcast.errors import FormcastWarning, InvalidOptionError, UnsupportedSchemaError, warn
from formcast.limits import DEFAULT_LIMITS, Limits
from formcast.regex.arrays import array_regex
from formcast.regex.combinators import disjunction, negate, rewrite
from formcast.regex.dialect import (
    NULL,
    NUMBER,
    SPECIFICATION_NUMBER,
    STRING,
    WHITESPACE_DEFAULT,
    alt,
)
from formcast.regex.enums import ValueChecker, enum_candidates, enumeration
from formcast.regex.formats import asserts_formats
from formcast.regex.numbers import multiple_exclusion, numeric_regex
from formcast.regex.objects import member_exclusion, object_regex
from formcast.regex.parts import (
    ALL_TYPES,
    ARRAY_KEYWORDS,
    NUMBER_KEYWORDS,
    OBJECT_KEYWORDS,
    STRING_KEYWORDS,
    Never,
    Part,
    Result,
    TooLarge,
)
from formcast.regex.references import Definitions, Flattener, Recursion
from formcast.regex.strings import pattern_exclusion, string_regex
from formcast.regex.text_values import TextSlots, text_value
from formcast.schema import Mode, References, load_schema
from formcast.text import FromText, TextSlot

__all__ = [
    "DEFAULT_COMPILE_OPTIONS",
    "CompileOptions",
    "loaded_schema_to_regex",
    "schema_to_regex",
]

_ANY_VALUE = "#any"  # the recursive definition of any JSON value (no JSON pointer)

# The bounds of a translation are in formcast.limits.Limits: max_regex_length,
# unshared_regex_length (regexes are first built with definitions only for unconstrained
# values, and past it again with long sub-schemas as definitions: calls resolve states
# slower than plain copies), max_subschemas (nested anyOf/oneOf distribute over each other
# and over allOf, which can grow exponentially), any_value_depth, share_min_length.


def _blamed_disjunction(parts: Sequence[Part]) -> tuple[str, str]:
    """The innermost ``anyOf``/``oneOf`` (keyword, pointer) that ``parts`` come from."""
    best = ("anyOf", parts[0].pointer if parts else "")
    deepest = -1
    for part in parts:
        for keyword in ("anyOf", "oneOf"):
            at = part.pointer.rfind(f"/{keyword}/")
            if at > deepest:
                deepest, best = at, (keyword, part.pointer[:at])
    return best


def _main_keyword(parts: Sequence[Part]) -> str:
    """The keyword to blame when the translation of ``parts`` grows too large."""
    schema = parts[0].schema if parts else {}
    if isinstance(schema, dict):
        for keyword in ("anyOf", "oneOf", "properties", "items", "$ref"):
            if keyword in schema:
                return keyword
    return "$ref"


class _Translator:
    """Walks one schema document and builds the regex; one instance per attempt.

    Implements :class:`~formcast.regex.context.Translation` for the family modules.
    """

    def __init__(
        self,
        root: Any,
        mode: Mode,
        whitespace: int,
        max_depth: int | None,
        any_depth: int | None = 1,
        share_long: bool = True,
        from_text: FromText | None = None,
        limits: Limits = DEFAULT_LIMITS,
        references: References | None = None,
        carried: dict[Any, _Translated] | None = None,
    ) -> None:
        """``max_depth``: how many times recursion is unrolled (None: exact, through
        recursive definitions); ``any_depth``: nesting of unconstrained values (None: any,
        through a recursive definition); ``share_long``: whether long
        sub-schema regexes become definitions (without it, regexes past
        ``limits.unshared_regex_length`` characters raise :class:`TooLarge`); ``from_text``:
        the options applied to every plain string value without its own keyword;
        ``references``: the resolver of ``root``, shared by the passes over it;
        ``carried``: what the previous pass hands over (:meth:`carry_over`)."""
        self.mode = mode
        self.number_token = SPECIFICATION_NUMBER if mode == "specification" else NUMBER
        self.formats_asserted = asserts_formats(root)
        self.limits = limits
        self.from_text = from_text
        self.any_depth = any_depth
        unshared = min(limits.unshared_regex_length, limits.max_regex_length)
        self.limit = limits.max_regex_length if share_long else unshared
        self.ws = f"[ \\n\\t]{{0,{whitespace}}}" if whitespace else ""
        self.sep = f"{self.ws},{self.ws}"
        self.colon = f"{self.ws}:{self.ws}"
        self.plain_strings = False
        self.subschemas = 0
        self.definitions = Definitions(share_long)
        self.flattener = Flattener(root, max_depth, references)
        self.recursion = Recursion(self.definitions)
        self.checker = ValueChecker(root)
        self.text_slots = TextSlots()
        # (schema ids, refs, plain_strings) -> the translation, with the parts kept alive
        self._translated: dict[Any, _Translated] = {}
        # translations of an earlier pass that this one would write alike (carry_over)
        self._carried: dict[Any, _Translated] = carried or {}
        # per gen() frame: whether its regex depends on the pass (see carry_over)
        self._pass_dependent: list[bool] = []
        self._any: dict[int, str] = {}

    # ------------------------------------------------------------------ Translation

    @property
    def sharing(self) -> bool:
        """Whether regexes may become definitions (off for regexes ``re`` must read)."""
        return self.definitions.enabled

    @sharing.setter
    def sharing(self, value: bool) -> None:
        self.definitions.enabled = value

    @property
    def recursive(self) -> bool:
        """Whether some reference was met again inside itself."""
        return self.flattener.recursive

    def share(self, regex: str, force: bool = False) -> str:
        self._note_sharing(regex, force, self.limits.share_min_length)
        return self.definitions.share(regex, force, self.limits.share_min_length)

    def share_repeated(self, regex: str, where: tuple[str, str]) -> str:
        self._note_sharing(regex, False, self.limits.share_repeated_min_length)
        return self.definitions.share(regex, False, self.limits.share_repeated_min_length, where)

    def _note_sharing(self, regex: str, force: bool, min_length: int) -> None:
        """Mark the current frame's regex as pass-dependent when a definition is made
        for ``regex`` (its call has a per-pass name), or would be in a pass that shares
        long regexes while this one does not."""
        if self._pass_dependent and (force or len(regex) >= min_length):
            self._pass_dependent[-1] = True

    def carry_over(self) -> dict[Any, _Translated]:
        """The translations of this pass (which does not share long regexes) that the
        next one, which does, would write alike: those whose frames made no definition
        and had no sub-regex long enough to become one, nor an unconstrained value.
        Empty when values are copied from the text (their slots are per pass)."""
        if self.text_slots.kinds:
            return {}
        return {key: found for key, found in self._translated.items() if found.portable}

    def valid(self, value: Any, parts: Sequence[Part]) -> bool:
        return self.checker.valid(value, parts)

    def negate(self, schema: Any, pointer: str) -> Any:
        return negate(self, schema, pointer, 0)

    def flatten(
        self, parts: list[Part], refs: tuple[str, ...]
    ) -> tuple[list[Part], tuple[str, ...], Never | None]:
        return self.flattener.flatten(parts, refs)

    def resolve(self, ref: str, pointer: str) -> tuple[Any, str]:
        return self.flattener.resolve(ref, pointer)

    def text_slot(self, slot: TextSlot, pointer: str) -> str:
        return self.text_slots.regex(slot, pointer)

    def finish(self, main: str) -> str:
        """``main`` preceded by the definitions it calls, directly or through others, and
        followed by the table of its text slots, if any."""
        return self.definitions.prefixed(main + self.text_slots.table_comment())

    # ------------------------------------------------------------------ dispatch

    def gen(self, parts: list[Part], refs: tuple[str, ...]) -> Result:
        """Regex for a value satisfying every part (a conjunction)."""
        self.subschemas += 1
        if self.subschemas > self.limits.max_subschemas:
            raise TooLarge(
                *_blamed_disjunction(parts),
                f"the schema expands into more than {self.limits.max_subschemas} sub-schemas "
                "(anyOf/oneOf "
                "distributed over each other and over allOf)",
                final=True,
            )
        self._pass_dependent.append(False)
        try:
            result = self._gen(parts, refs)
        finally:
            dependent = self._pass_dependent.pop()
        if dependent and self._pass_dependent:
            self._pass_dependent[-1] = True
        if isinstance(result, str):
            self._note_sharing(result, False, self.limits.share_min_length)
            if self._too_long(result):
                raise TooLarge(
                    _main_keyword(parts),
                    parts[0].pointer if parts else "",
                    f"the regex would exceed max_regex_length={self.limits.max_regex_length} "
                    "characters",
                )
            where = (_main_keyword(parts), parts[0].pointer if parts else "")
            return self.definitions.share(result, False, self.limits.share_min_length, where)
        return result

    def _too_long(self, result: str) -> bool:
        """Whether ``result`` (with the definitions so far) passes this pass's limit.

        Trie-built alternations (large ``enum``/``Literal`` lists) count at a fraction of
        their length against ``max_regex_length`` (:func:`pattern_cost`), and not at all
        against ``unshared_regex_length``: sharing cannot shorten one list, and a list
        written many times passes ``max_regex_length`` and is shared then."""
        defined = self.definitions.defined_length
        if len(result) + defined <= self.limit:
            return False
        choices = choice_characters(result)
        plain = len(result) - choices + defined
        if plain + choices // CHOICE_COST_DIVISOR > self.limits.max_regex_length:
            return True
        return plain > self.limit

    def _gen(self, parts: list[Part], refs: tuple[str, ...]) -> Result:
        """``gen`` without the budget checks. With exact recursion, a reference to a
        schema being translated (or already defined) is a call to its recursive
        definition, and the first translation of a target that called itself becomes that
        definition."""
        target = self.flattener.plain_reference(parts) if self.exact else None
        if target is None:
            return self._gen_once(parts, refs)
        known = self.recursion.known(target, self.plain_strings)
        if known is not None:
            return known
        if target in refs:
            if not self.sharing:
                raise UnsupportedSchemaError(
                    "$ref",
                    parts[0].pointer,
                    "recursion inside a name pattern (propertyNames, patternProperties) "
                    "cannot be enforced exactly; set max_recursion_depth to unroll it",
                )
            return self.recursion.call(target, self.plain_strings)
        return self.recursion.finish(target, self.plain_strings, self._gen_once(parts, refs))

    def define_pending(self) -> None:
        """Define every recursive target that was called but whose first translation
        went through no plain reference (the root, a reference with siblings): each is
        translated on its own, calling itself."""
        while pending := self.recursion.pending():
            pointer, plain_strings = pending
            schema, _ = self.resolve("#" + pointer, "")
            saved, self.plain_strings = self.plain_strings, plain_strings
            try:
                result = self.gen([Part(schema, pointer)], (pointer,))
            finally:
                self.plain_strings = saved
            self.recursion.finish(pointer, plain_strings, result)

    @property
    def exact(self) -> bool:
        """Whether recursion is exact (``max_recursion_depth=None``)."""
        return self.flattener.max_depth is None

    def _gen_once(self, parts: list[Part], refs: tuple[str, ...]) -> Result:
        """Flatten, then translate once per context."""
        flat, refs, never = self.flatten(parts, refs)
        if never is not None:
            return never
        # A definition reached through many $refs is translated once per recursion
        # context. The key holds schema ids: the entry keeps those schemas alive.
        key = (tuple((id(p.schema), p.synthetic) for p in flat), refs, self.plain_strings)
        known = self._translated.get(key) or self._carried.get(key)
        if known is not None and known.sharing == self.sharing:
            return self._reuse(key, known)
        subschemas, recursive = self.subschemas, self.flattener.recursive
        result = self._gen_flat(flat, refs)
        if isinstance(result, str):
            self._translated[key] = _Translated(
                self.sharing,
                result,
                flat,
                portable=not self._pass_dependent[-1] and "(?&" not in result,
                subschemas=self.subschemas - subschemas,
                found_recursion=self.flattener.recursive and not recursive,
            )
        return result

    def _reuse(self, key: Any, known: _Translated) -> str:
        """A translation made before: in this pass (its frame's pass dependence carries
        over to the caller's), or carried from the previous one (its sub-schemas are
        counted and its recursion noted as if translated again)."""
        if not known.portable:
            self._pass_dependent[-1] = True
        if key not in self._translated:  # carried from the previous pass
            self._translated[key] = known
            self.subschemas += known.subschemas
            if known.found_recursion:
                self.flattener.recursive = True
        return known.regex

    def _gen_flat(self, flat: list[Part], refs: tuple[str, ...]) -> Result:
        """Dispatch: rewrites first, then the first ``anyOf``/``oneOf``, then the types."""
        if enum_candidates(flat) is not None:
            # each value is checked against every keyword as it stands (jsonschema): no
            # rewrite or negation is needed, and none can refuse the schema
            return self.conjunction(flat, refs)
        rewritten = rewrite(self, flat)
        if rewritten is not None:
            return self.gen(rewritten, refs)
        for index, part in enumerate(flat):
            for keyword in ("anyOf", "oneOf"):
                if keyword in part.schema:
                    return disjunction(self, flat, index, keyword, refs)
        return self.conjunction(flat, refs)

    def conjunction(self, flat: list[Part], refs: tuple[str, ...]) -> Result:
        """The flat conjunction (no rewrite or disjunction left) by type family: a value
        from the text, an enumeration, or the alternatives of every allowed type, minus
        the values a ``not`` of ``enum``/``const`` excludes."""
        if not flat:
            return self.any_value(self.any_depth)
        copied = text_value(self, flat)
        if copied is not None:
            return copied
        candidates = enum_candidates(flat)
        if candidates is not None:
            return enumeration(self, flat, candidates)
        excluded: list[Any] = []
        for part in flat:
            negated = part.schema.get("not")
            if (
                negated is not None
                and pattern_exclusion(negated) is None
                and multiple_exclusion(negated) is None
                and member_exclusion(negated) is None
            ):
                excluded.extend([negated["const"]] if "const" in negated else negated["enum"])
        types = self.types(flat)
        alts: list[str] = []
        nevers: list[Never] = []
        first = flat[0].pointer

        def add(result: Result) -> None:
            if isinstance(result, Never):
                nevers.append(result)
            else:
                alts.append(result)

        if "null" in types and not any(v is None for v in excluded):
            alts.append(NULL)
        if "boolean" in types:
            for word, value in (("true", True), ("false", False)):
                if not any(v is value for v in excluded):
                    alts.append(word)
        if "integer" in types or "number" in types:
            numbers = numeric_regex(flat, "number" not in types, excluded)
            add(self.number_token if numbers == NUMBER else numbers)
        if "string" in types:
            add(string_regex(self, flat, excluded))
        if "array" in types:
            if any(isinstance(v, list) for v in excluded):
                raise UnsupportedSchemaError("not", first, "cannot exclude array values")
            add(array_regex(self, flat, refs))
        if "object" in types:
            if any(isinstance(v, dict) for v in excluded):
                raise UnsupportedSchemaError("not", first, "cannot exclude object values")
            add(object_regex(self, flat, refs))
        if alts:
            return alt(alts) or ""
        if nevers:
            recursion = [n for n in nevers if n.keyword == "$ref"]
            return (recursion or nevers)[0]
        return Never("type", first, "no JSON type satisfies every type keyword")

    def types(self, flat: Sequence[Part]) -> set[str]:
        """The JSON types the parts allow (``number`` implies ``integer``); in
        ``generation`` mode, a schema without ``type`` takes the types its keywords
        constrain."""
        allowed = set(ALL_TYPES)
        explicit = False
        for part in flat:
            declared = part.schema.get("type")
            if declared is None:
                continue
            explicit = True
            named = {declared} if isinstance(declared, str) else set(declared)
            if part.schema.get("nullable") is True:
                named.add("null")
            if "number" in named:
                named.add("integer")
            allowed &= named
        for part in flat:
            if pattern_exclusion(part.schema.get("not")) is not None:
                allowed &= {"string"}  # not: {pattern: ...} holds for strings alone
            if multiple_exclusion(part.schema.get("not")) is not None:
                allowed &= {"number", "integer"}  # and not: {multipleOf: k} for numbers
            if member_exclusion(part.schema.get("not")) is not None:
                allowed &= {"object"}  # and a member outside names for objects
        if not explicit and self.mode == "generation":
            families: set[str] = set()
            for part in flat:
                keys = set(part.schema)
                if keys & OBJECT_KEYWORDS:
                    families.add("object")
                if keys & ARRAY_KEYWORDS:
                    families.add("array")
                if keys & STRING_KEYWORDS:
                    families.add("string")
                if keys & NUMBER_KEYWORDS:
                    families |= {"number", "integer"}
            if families:
                allowed &= families
        return allowed

    def any_value(self, depth: int | None) -> str:
        """Any JSON value nesting at most ``depth`` arrays/objects (a call to a definition
        per level, each calling the level below); ``depth`` None: at any depth, one
        recursive definition (where calls cannot be written, ``Limits().any_value_depth``
        levels)."""
        if self._pass_dependent:  # kept per pass (shared or not): not carried over
            self._pass_dependent[-1] = True
        if depth is None:
            if not self.sharing:
                return self.any_value(DEFAULT_LIMITS.any_value_depth or 1)
            return self._any_value_recursive()
        if depth not in self._any:
            deep = self.any_depth is None or self.any_depth > 1
            scalar = alt([STRING, self.number_token, "true", "false", NULL]) or ""
            if depth == 0:
                self._any[0] = self.share(scalar, force=deep)
                return self._any[0]
            inner = self.any_value(depth - 1)
            array = rf"\[{self.ws}(?:{inner}(?:{self.sep}{inner})*{self.ws})?\]"
            member = f"{self.share(STRING, force=deep)}{self.colon}{inner}"
            obj = rf"\{{{self.ws}(?:{member}(?:{self.sep}{member})*{self.ws})?\}}"
            alternatives = [self.share(scalar, force=deep), array, obj]
            self._any[depth] = self.share(alt(alternatives) or "", force=deep)
        return self._any[depth]

    def _any_value_recursive(self) -> str:
        key = (_ANY_VALUE, False)
        call = self.recursion.known(*key)
        if call is None:
            inner = self.recursion.call(*key)
            scalar = alt([STRING, self.number_token, "true", "false", NULL]) or ""
            scalar = self.share(scalar, force=True)
            array = rf"\[{self.ws}(?:{inner}(?:{self.sep}{inner})*{self.ws})?\]"
            member = f"{self.share(STRING, force=True)}{self.colon}{inner}"
            obj = rf"\{{{self.ws}(?:{member}(?:{self.sep}{member})*{self.ws})?\}}"
            call = str(self.recursion.finish(*key, alt([scalar, array, obj]) or ""))
        return call


@dataclass(frozen=True)
class CompileOptions:
    """The options of a schema's translation in one value: the keywords of
    :func:`schema_to_regex` and :func:`formcast.compile` (documented there)."""

    mode: Mode = "generation"
    whitespace: bool | int = False
    max_recursion_depth: int | None = None
    from_text: FromText | bool | None = None
    limits: Limits = DEFAULT_LIMITS


DEFAULT_COMPILE_OPTIONS = CompileOptions()


def schema_to_regex(
    schema: Mapping[str, Any] | bool | str | type[pydantic.BaseModel],
    *,
    mode: Mode = "generation",
    whitespace: bool | int = False,
    max_recursion_depth: int | None = None,
    from_text: FromText | bool | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> str:
    """Compile ``schema`` into a regex matching JSON texts that validate against it.

    Args:
        schema: a Pydantic model class, a JSON Schema mapping, JSON text, or a boolean
            schema (read with :func:`formcast.schema.load_schema`).
        mode: ``"generation"`` (Pydantic semantics: only declared properties) or
            ``"specification"`` (JSON Schema semantics: extra properties allowed unless
            ``additionalProperties: false``); see :data:`formcast.schema.Mode`.
        whitespace: ``False``/``0`` for compact JSON, ``N`` for at most ``N`` of
            ``[ \\n\\t]`` at each place inside arrays and objects where JSON allows
            whitespace, ``True`` for :data:`WHITESPACE_DEFAULT`.
        max_recursion_depth: ``None`` (the default): recursion through ``$ref`` is
            exact, at any depth, through recursive definitions (compiled to a pushdown
            automaton); an int bounds it instead: how many times a definition may be
            nested inside itself (``0``: recursive references are never followed). A
            schema that does not recurse gets the same regex either way.
        from_text: copy every plain string value (``str`` or ``Optional[str]``, without
            a format, pattern or enum) from the request's text, with these options
            (``True``: the defaults of :class:`formcast.FromText`). Values with their
            own ``x-formcast-from-text`` keyword keep theirs.
        limits: the bounds of the translation (:class:`formcast.limits.Limits`).

    Returns:
        A regex in the dialect described in :mod:`formcast.regex`. Values copied from the
        text are slots (:mod:`formcast.text`), listed in a comment at the end.

    Raises:
        SchemaError: the input is not a schema (see ``load_schema``).
        UnsupportedSchemaError: a keyword cannot be enforced exactly (``.keyword``,
            ``.pointer`` say which and where), or the schema allows no value.
        InvalidOptionError: an option is out of range.

    Cost: pure Python, proportional to the size of the output (see :mod:`formcast.regex`);
    compile once and reuse the result.
    """
    options = CompileOptions(mode, whitespace, max_recursion_depth, from_text, limits)
    return loaded_schema_to_regex(load_schema(schema), options)


def loaded_schema_to_regex(
    root: dict[str, Any] | bool, options: CompileOptions = DEFAULT_COMPILE_OPTIONS
) -> str:
    """:func:`schema_to_regex` of a document :func:`~formcast.schema.load_schema` returned,
    without a second copy and metaschema check (~0.2 s for an ``enum`` of 100,000 names).
    Raises as :func:`schema_to_regex`."""
    mode, whitespace, limits = options.mode, options.whitespace, options.limits
    max_recursion_depth, from_text = options.max_recursion_depth, options.from_text
    if mode not in ("generation", "specification"):
        raise InvalidOptionError(f"expected mode 'generation' or 'specification', found {mode!r}")
    if isinstance(whitespace, bool):
        spaces = WHITESPACE_DEFAULT if whitespace else 0
    elif isinstance(whitespace, int) and whitespace >= 0:
        spaces = whitespace
    else:
        raise InvalidOptionError(
            f"expected whitespace to be a bool or an int >= 0, found {whitespace!r}"
        )
    if max_recursion_depth is not None and (
        not isinstance(max_recursion_depth, int)
        or isinstance(max_recursion_depth, bool)
        or max_recursion_depth < 0
    ):
        raise InvalidOptionError(
            f"expected max_recursion_depth to be an int >= 0 or None, found {max_recursion_depth!r}"
        )
    text_default = _from_text_option(from_text)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    depth = max_recursion_depth
    result: Result = ""
    try:
        any_depth = limits.any_value_depth if mode == "specification" else 1
        share_long = False  # first try plain sub-schemas: concrete NFA states walk faster
        references = References(root)  # one resolver for every pass
        carried: dict[Any, _Translated] = {}
        while True:
            translator = _Translator(
                root,
                mode,
                spaces,
                depth,
                any_depth,
                share_long,
                text_default,
                limits,
                references,
                carried,
            )
            try:
                result = translator.gen([Part(root, "")], ("",))
                if translator.exact:
                    result = translator.recursion.finish("", False, result)
                    translator.define_pending()
                break
            except TooLarge as error:
                if not share_long and not error.final:
                    share_long = True
                    carried = translator.carry_over()
                    continue
                carried = {}
                if translator.recursive and depth and not error.final:
                    depth -= 1
                    continue
                raise UnsupportedSchemaError(error.keyword, error.pointer, error.reason) from None
    except RecursionError:
        raise UnsupportedSchemaError("$ref", "", "the schema nests too deeply") from None
    finally:
        sys.setrecursionlimit(limit)
    if depth is not None and max_recursion_depth is not None and depth < max_recursion_depth:
        warn(
            FormcastWarning(
                f"formcast: recursive references unrolled {depth} times instead of "
                f"max_recursion_depth={max_recursion_depth}, to keep the regex under "
                f"max_regex_length={limits.max_regex_length} characters"
            ),
            stacklevel=2,
        )
    if isinstance(result, Never):
        raise UnsupportedSchemaError(result.keyword, result.pointer, result.reason)
    return translator.finish(result)


@dataclass(frozen=True)
class _Translated:
    """One sub-schema's translation in one context: ``regex`` under ``sharing``, the
    ``parts`` whose ids key it (kept alive), whether the next pass would write it alike
    (``portable``), how many sub-schemas it translated, and whether it found recursion."""

    sharing: bool
    regex: str
    parts: list[Part]
    portable: bool
    subschemas: int
    found_recursion: bool


def _from_text_option(value: FromText | bool | None) -> FromText | None:
    if value is None or value is False:
        return None
    if value is True:
        return FromText()
    if isinstance(value, FromText):
        return value
    raise InvalidOptionError(f"expected from_text to be a bool or a FromText, found {value!r}")
