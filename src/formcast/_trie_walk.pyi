"""The trie walk in C (``_trie_walk.c``); see :func:`formcast.index._walk_natively`."""

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

_Int32 = npt.NDArray[np.int32]

def walk(
    table: _Int32,
    trie: tuple[npt.NDArray[Any], ...],
    frontier_nodes: _Int32,
    frontier_states: _Int32,
    out_ids: _Int32,
    out_states: _Int32,
    filled: int,
    pending_nodes: _Int32,
    pending_states: _Int32,
    builder: tuple[Any, ...] | None = None,
    /,
) -> tuple[int, int]: ...
def sort_pairs(ids: _Int32, states: _Int32, /) -> int: ...
def scatter_pairs(
    ids: _Int32,
    states: _Int32,
    plain_ids: _Int32,
    plain_lengths: _Int32,
    chain: _Int32,
    table: _Int32,
    repeats: _Int32,
    repeated: _Int32,
    out_bits: npt.NDArray[np.uint32],
    out_codes: npt.NDArray[np.uint8],
    out_palette: _Int32,
    /,
) -> tuple[int, int]: ...
def state_after(ids: bytes, states: bytes, token: int, /) -> int: ...
def pack_bits(ids: _Int32, out: npt.NDArray[np.uint32], /) -> None: ...
def tokens_by_byte(
    ids: npt.NDArray[np.int32],
    lengths: npt.NDArray[np.int32],
    token_bytes: npt.NDArray[np.uint8],
    out_bits: npt.NDArray[np.uint32],
    /,
) -> None: ...
def plain_template(
    plain_ids: _Int32,
    plain_lengths: _Int32,
    shape: npt.NDArray[np.uint8],
    out_codes: npt.NDArray[np.uint8],
    out_bits: npt.NDArray[np.uint32],
    /,
) -> int: ...
def scatter_on_template(
    ids: _Int32,
    states: _Int32,
    chain: _Int32,
    shape: npt.NDArray[np.uint8],
    template_codes: npt.NDArray[np.uint8],
    template_bits: npt.NDArray[np.uint32],
    plain_bits: npt.NDArray[np.uint32],
    repeats: _Int32,
    repeated: _Int32,
    out_codes: npt.NDArray[np.uint8],
    out_bits: npt.NDArray[np.uint32],
    out_palette: _Int32,
    /,
) -> tuple[int, int]: ...
def first_byte_split(
    table: _Int32,
    state: int,
    plain: npt.NDArray[np.uint8],
    by_first: npt.NDArray[np.uint8],
    lists: _Int32,
    /,
) -> tuple[int, int, int]: ...

class Visitor:
    """A state's first visit in one call (``_row_visit.c``); see
    :meth:`formcast.index.TokenIndex._visited`."""

    def __init__(
        self,
        all: tuple[npt.NDArray[Any], ...],
        other: tuple[npt.NDArray[Any], ...],
        plain: tuple[npt.NDArray[Any], ...],
        plain_root: _Int32,
        plain_bytes: npt.NDArray[np.uint8],
        plain_bits: npt.NDArray[np.uint32],
        bits_by_first: npt.NDArray[np.uint32],
        repeats: tuple[_Int32, _Int32, _Int32, _Int32],
        size: int,
        links: int,
        first_byte_min: int,
        sorted_share: int,
        template_of: Callable[[bytes], tuple[Any, Any, int]] | None,
        by_byte_of: Callable[[], npt.NDArray[np.uint32]] | None = None,
        text: tuple[Any, ...] | None = None,
        /,
    ) -> None: ...
    def visit(self, table: _Int32, state: int, builder: tuple[Any, ...], /) -> tuple[Any, ...]: ...
    @property
    def ways(self) -> dict[str, int]: ...
