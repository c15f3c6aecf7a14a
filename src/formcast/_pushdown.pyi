"""The rows of a pushdown automaton's sets of stacks in C (``_pushdown.c``); see
:meth:`formcast.automaton.pushdown.PushdownAutomaton.walk_building`."""

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

class Stacks:
    frame_count: int
    rows_computed: int
    def __init__(
        self,
        info_of: Callable[[int, int], tuple[Any, ...]],
        initials: Sequence[int],
        max_stacks: int,
        too_many: Callable[[int], BaseException],
        automata: list[Any],
        markers: tuple[int, bytes, int],
        /,
    ) -> None: ...
    def frame(self, machine: int, state: int, below: int, /) -> int: ...
    def frame_of(self, frame: int, /) -> tuple[int, int, int]: ...
    def frames(self) -> list[tuple[int, int, int]]: ...
    def take_frames(self, frames: Iterable[tuple[int, int, int]], /) -> None: ...
    def closure(self, frame: int, /) -> frozenset[int]: ...
    def accepts(self, members: Iterable[int], /) -> bool: ...
    def members(self, state: int, /) -> frozenset[int]: ...
    def find(self, members: Iterable[int], /) -> int: ...
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
    def build_rows(
        self,
        states: npt.NDArray[np.int32],
        table: npt.NDArray[np.int32],
        accepting: npt.NDArray[np.bool_],
        sets: list[frozenset[int] | None],
        /,
    ) -> int: ...

_build_state: object
_step_state: object
_plain_step: object
