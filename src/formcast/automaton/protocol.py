"""What a token index reads of any automaton over bytes: :class:`ByteAutomaton`.

:class:`~formcast.automaton.lazy.LazyAutomaton`,
:class:`~formcast.automaton.pushdown.PushdownAutomaton` and
:class:`~formcast.automaton.bound.BoundAutomaton` (a compiled automaton with one
request's text in its slots) all offer it; :class:`~formcast.index.TokenIndex` reads
nothing else of them.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["ByteAutomaton"]

IntArray = npt.NDArray[np.int32]


class ByteAutomaton(Protocol):
    """What an index reads of an automaton over bytes (a
    :class:`~formcast.automaton.lazy.LazyAutomaton`, a
    :class:`~formcast.automaton.pushdown.PushdownAutomaton`, or a
    :class:`~formcast.automaton.bound.BoundAutomaton` with a request's text); the
    distances are counted in usable bytes, :data:`~formcast.automaton.UNREACHABLE` where
    no accepting state can be reached."""

    pattern: str

    @property
    def initial(self) -> int: ...
    def step(self, states: npt.NDArray[Any], data: npt.NDArray[np.uint8]) -> IntArray: ...
    def row(self, state: int) -> IntArray: ...
    def is_accepting(self, state: int) -> bool: ...
    def live_bytes(self, state: int) -> npt.NDArray[np.uint8]: ...
    def walk(self, data: bytes, state: int | None = None) -> int: ...
    def min_bytes_to_accept(
        self, state: int, usable: npt.NDArray[np.bool_] | None = None
    ) -> int: ...
