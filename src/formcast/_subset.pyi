"""The subset construction of DFA rows in C (``_subset.c``); see
:meth:`formcast.automaton.lazy.LazyAutomaton._build_natively` and
:meth:`formcast.automaton.lazy.LazyAutomaton.walk_building`."""

from collections.abc import Iterable
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
    def build_rows(
        self,
        states: npt.NDArray[np.int32],
        table: npt.NDArray[np.int32],
        accepting: npt.NDArray[np.bool_],
        sets: list[frozenset[int] | None],
        /,
    ) -> int: ...
    def plain_chain(
        self,
        chain: npt.NDArray[np.int32],
        filled: int,
        plain: npt.NDArray[np.uint8],
        table: npt.NDArray[np.int32],
        accepting: npt.NDArray[np.bool_],
        sets: list[frozenset[int] | None],
        /,
    ) -> tuple[int, int]: ...
    def utf8_steps(self, state: int, table: npt.NDArray[np.int32], /) -> tuple[int, bytes]: ...
    def step(
        self,
        state: int,
        byte: int,
        table: npt.NDArray[np.int32],
        accepting: npt.NDArray[np.bool_],
        sets: list[frozenset[int] | None],
        /,
    ) -> int: ...
    def plain_step(
        self,
        state: int,
        plain: bytes,
        table: npt.NDArray[np.int32],
        accepting: npt.NDArray[np.bool_],
        sets: list[frozenset[int] | None],
        /,
    ) -> int: ...
    def live_bytes(
        self,
        state: int,
        table: npt.NDArray[np.int32],
        accepting: npt.NDArray[np.bool_],
        sets: list[frozenset[int] | None],
        /,
    ) -> bytes: ...
    def kept_step(self, state: int, byte: int, /) -> int: ...
    def closure(self, state: int, /) -> frozenset[int]: ...
    def members(self, state: int, /) -> frozenset[int]: ...
    def find(self, members: Iterable[int], /) -> int: ...
