"""What the keyword families see of the translation under way.

The family modules (strings, arrays, objects, combinators, enumerations, values from the
text) take the translator as a :class:`Translation` and never import the translator
core (:mod:`formcast.regex.translator`), which implements it: so the families recurse
into sub-schemas (``gen``) without an import cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from formcast.limits import Limits
from formcast.regex.parts import Never, Part, Result
from formcast.schema import Mode
from formcast.text import FromText, TextSlot


class Translation(Protocol):
    """One translation of one schema document (one per attempt of ``schema_to_regex``).

    Attributes:
        mode: ``"generation"`` or ``"specification"`` (:data:`formcast.schema.Mode`).
        ws: the whitespace regex allowed at each place inside arrays and objects
            (``""`` for compact JSON); ``sep`` and ``colon`` are ``,`` and ``:`` with it.
        any_depth: nesting of unconstrained values (``true``, ``{}``); None: any.
        plain_strings: strings are spelled without escapes (extra names matched with
            ``re``, and their patterns).
        sharing: regexes may become definitions; off while building a regex that
            Python's ``re`` must read.
        from_text: the options for plain string values copied from the text, if any.
        limits: the bounds of the translation.
        formats_asserted: the document's root declares the format-assertion vocabulary
            (:func:`~formcast.regex.formats.asserts_formats`): unknown formats are refused
            instead of read as annotations.
    """

    mode: Mode
    ws: str
    sep: str
    colon: str
    any_depth: int | None
    plain_strings: bool
    sharing: bool
    from_text: FromText | None
    limits: Limits
    formats_asserted: bool

    def gen(self, parts: list[Part], refs: tuple[str, ...]) -> Result:
        """Regex for a value satisfying every part; ``refs``: the references followed
        on the way here (recursion is unrolled along them)."""
        ...

    def types(self, flat: Sequence[Part]) -> set[str]:
        """The JSON types a flat conjunction allows."""
        ...

    def any_value(self, depth: int | None) -> str:
        """Any JSON value nesting at most ``depth`` arrays/objects."""
        ...

    def share(self, regex: str, force: bool = False) -> str:
        """A call to a definition of ``regex`` when it is at least
        ``limits.share_min_length`` characters long (any length with ``force``) and
        sharing is on, else ``regex`` (:meth:`formcast.regex.references.Definitions.share`)."""
        ...

    def share_repeated(self, regex: str, where: tuple[str, str]) -> str:
        """Like :meth:`share` for a regex the caller writes several times, from
        ``limits.share_repeated_min_length`` characters on; ``where`` (keyword, pointer) is
        blamed when the definition would grow too large."""
        ...

    def valid(self, value: Any, parts: Sequence[Part]) -> bool:
        """Whether the JSON ``value`` satisfies every part (jsonschema, exact)."""
        ...

    def flatten(
        self, parts: list[Part], refs: tuple[str, ...]
    ) -> tuple[list[Part], tuple[str, ...], Never | None]:
        """``$ref`` and ``allOf`` expanded (:meth:`formcast.regex.references.Flattener.flatten`)."""
        ...

    def resolve(self, ref: str, pointer: str) -> tuple[Any, str]:
        """The schema a ``$ref`` found at ``pointer`` points to, and its pointer."""
        ...

    def negate(self, schema: Any, pointer: str) -> Any:
        """A schema for ``{"not": schema}`` (:func:`formcast.regex.combinators.negate`)."""
        ...

    def text_slot(self, slot: TextSlot, pointer: str) -> str:
        """The regex of a slot copied from the text, its kind registered."""
        ...
