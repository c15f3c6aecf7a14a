"""The subset construction of DFA rows in C (``_subset.c``); see
:meth:`formcast.automaton.lazy.LazyAutomaton._build_row`."""

from collections.abc import Sequence
from typing import Any

class Nfa:
    def __init__(
        self,
        byte_offsets: Any,
        byte_lo: Any,
        byte_hi: Any,
        byte_dst: Any,
        eps_offsets: Any,
        eps_dst: Any,
        reads: Any,
        blocks: Any,
        extra_sources: Any,
        extra_offsets: Any,
        extra_targets: Any,
        final: int,
        /,
    ) -> None: ...
    def segments(self, members: Sequence[int], /) -> list[tuple[int, int, frozenset[int]]]: ...
    def closure(self, state: int, /) -> frozenset[int]: ...
