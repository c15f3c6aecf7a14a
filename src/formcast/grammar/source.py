"""A read position over grammar text, shared by the two dialects' parsers.

:class:`Source` keeps an offset into the text and turns offsets into 1-based line and
column for nodes and errors; :meth:`Source.fail` raises :class:`GrammarError` saying what
was expected and what was found there.
"""

from __future__ import annotations

import bisect
from typing import NoReturn

from formcast.errors import GrammarError
from formcast.grammar.nodes import Where

__all__ = ["Source"]

_SHOWN = 20  # characters of the text shown after "found"


class Source:
    """Grammar text and a position in it. Cost: one pass to index the line starts."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self._line_starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]

    def where(self, offset: int | None = None) -> Where:
        """Line and column of ``offset`` (default: the current position)."""
        offset = self.pos if offset is None else offset
        line = bisect.bisect_right(self._line_starts, offset)
        return Where(line, offset - self._line_starts[line - 1] + 1)

    def peek(self, length: int = 1) -> str:
        return self.text[self.pos : self.pos + length]

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def startswith(self, prefix: str) -> bool:
        return self.text.startswith(prefix, self.pos)

    def found(self, offset: int | None = None) -> str:
        """What stands at ``offset`` (default: here), for a message: a short quote, or
        "the end of the grammar"."""
        offset = self.pos if offset is None else offset
        if offset >= len(self.text):
            return "the end of the grammar"
        piece = self.text[offset : offset + _SHOWN].split("\n")[0]
        return repr(piece) if piece else "the end of the line"

    def fail(self, expected: str, offset: int | None = None, found: str | None = None) -> NoReturn:
        """Raise :class:`GrammarError`: expected ``expected``, found what is at ``offset``."""
        where = self.where(offset)
        shown = self.found(offset) if found is None else found
        raise GrammarError(f"expected {expected}, found {shown}", where.line, where.column)

    def refuse(self, feature: str, reason: str, offset: int | None = None) -> NoReturn:
        """Raise :class:`GrammarError` for a feature formcast cannot enforce, by name."""
        where = self.where(offset)
        raise GrammarError(f"{feature} is not supported: {reason}", where.line, where.column)
