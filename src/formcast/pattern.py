""":class:`Regex`, the output type that is a regular expression.

It lives apart from :mod:`formcast.constraint` so that :mod:`formcast.grammar`, which
embeds a ``Regex`` in a grammar, and :mod:`formcast.constraint`, which reads grammars as
output types, can both import it without an import cycle. ``formcast.Regex`` and
``formcast.constraint.Regex`` are this class.
"""

from __future__ import annotations

from dataclasses import dataclass

from formcast.errors import SchemaError

__all__ = ["Regex"]


@dataclass(frozen=True)
class Regex:
    """Constrain the output to a regular expression (Python ``re`` syntax, full match).

    The result of an extraction with a ``Regex`` output type is the matched ``str``.

    >>> Regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}").pattern
    '[0-9]{4}-[0-9]{2}-[0-9]{2}'
    """

    pattern: str

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern:
            raise SchemaError(f"expected a non-empty regex string, found {self.pattern!r}")
