"""The subset construction of DFA rows in C (``_subset.c``); see
:meth:`formcast.automaton.lazy.LazyAutomaton._build_row`."""

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

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
    def segments(self, members: Iterable[int], /) -> list[tuple[int, int, frozenset[int]]]: ...
    def fill_row(
        self,
        members: Iterable[int],
        row: npt.NDArray[np.int32],
        ids: dict[frozenset[int], int],
        add_state: Callable[[frozenset[int]], int],
        /,
    ) -> None: ...
    def closure(self, state: int, /) -> frozenset[int]: ...
