"""The byte NFA a pattern compiles to: a frozen value with flat edge arrays and virtual blocks.

:func:`formcast.automaton.parse.build_nfa` produces an :class:`Nfa`; the lazy subset
construction (:mod:`formcast.automaton.lazy`) and the distance search
(:mod:`formcast.automaton.distances`) only read it.

State ids below :data:`VIRTUAL_BASE` are *concrete*: their edges are stored in the
arrays. Ids from :data:`VIRTUAL_BASE` on are *virtual*: they number the copies of
counted repeats and subroutine calls made into a :class:`Block`, and their edges are
derived on demand from the block's template.

Invariants (construction keeps them; ``tests/support/automaton_invariants.py`` checks them):

* every byte and epsilon edge in the arrays leaves a concrete state and enters a
  concrete state or a virtual one inside some block's copies; byte ranges are
  ``0 <= lo <= hi <= 255``;
* blocks are sorted by ``base`` and their copy ranges are disjoint; a template's virtual
  part is exactly the copies of the blocks nested in it;
* a template is closed: every edge leaving one of its states (including
  :attr:`Nfa.extras` of its virtual states) enters one of its states, no edge in it
  enters its start, and its end has no way out, so a copy's only exits are the repeat's
  glue and the parent's edges at the copy's end (here and below, epsilon self-loops do
  not count: ``X?`` of an empty group leaves one, harmlessly);
* the edges a parent attached to a virtual id (:attr:`Nfa.extras`) leave the start or
  the end of a copy;
* the final state has no way out, and every state reachable from the start can reach it
  (sub-expressions with an empty language are never linked in).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["VIRTUAL_BASE", "VIRTUAL_LIMIT", "Block", "BlockTree", "Nfa", "csr", "csr_arrays"]

VIRTUAL_BASE = 1 << 40
"""State ids from here on are virtual copies (see :class:`Block`)."""

VIRTUAL_LIMIT = 1 << 62
"""Virtual ids stay below this (a pattern needing more is refused)."""

IdArray = npt.NDArray[np.int64]
ByteBoundArray = npt.NDArray[np.int32]


class Block(NamedTuple):
    """The virtual copies of one counted repeat ``X{m,n}`` (or ``X{m,}``, ``m >= 2``), or
    of one subroutine call (one copy of its definition).

    ``X`` (the template) is the concrete states ``[s0, s0 + size_c)`` plus the virtual
    states ``[v0, v0 + span - size_c)`` of blocks nested in it. Copy ``j`` (0-based) of
    the template occupies the virtual ids ``[base + j * span, base + (j + 1) * span)``:
    concrete template states first, then nested virtual ones, in order. A virtual state's
    edges are its template state's edges mapped into the copy, plus, at the end of a copy,
    the repeat's own glue (derived here, never stored: on to the next copy; out to the
    last copy's end once ``low`` copies are done; for ``X{m,}`` the last copy loops and
    leaves to ``exit``), plus the epsilon edges a parent attached to that very id.
    """

    base: int
    span: int
    copies: int
    s0: int
    size_c: int
    v0: int
    x_start: int
    x_end: int
    low: int
    bounded: bool
    exit: int  # X{m,}: the concrete state after the loop; -1 when bounded

    def copy_of(self, j: int, state: int) -> int:
        """The id in copy ``j`` of the template state ``state``."""
        concrete_shift, virtual_shift = self.shifts(j)
        return state + (concrete_shift if state < VIRTUAL_BASE else virtual_shift)

    def shifts(self, j: int) -> tuple[int, int]:
        """What copy ``j`` adds to a concrete and to a virtual template state's id."""
        first = self.base + j * self.span
        return first - self.s0, first + self.size_c - self.v0

    def locate(self, state: int) -> tuple[int, int]:
        """``(copy index, template state)`` of the virtual ``state`` of this block."""
        j, local = divmod(state - self.base, self.span)
        if local < self.size_c:
            return j, self.s0 + local
        return j, self.v0 + local - self.size_c

    def glue(self, j: int) -> list[int]:
        """Where the end of copy ``j`` leads (epsilon edges derived from the repeat)."""
        last = self.copies - 1
        out = []
        if j < last:
            out.append(self.copy_of(j + 1, self.x_start))
            if self.bounded and j >= max(self.low, 1) - 1:
                out.append(self.copy_of(last, self.x_end))
        elif not self.bounded:
            out.append(self.copy_of(last, self.x_start))
            out.append(self.exit)
        return out

    @property
    def template(self) -> tuple[int, int, int, int, int, int]:
        """What identifies the template: the calls to one definition share it, and with it
        their relative edges and distance tables."""
        return (self.s0, self.size_c, self.v0, self.span, self.x_start, self.x_end)

    @property
    def virtual_end(self) -> int:
        """The first id past the template's virtual part."""
        return self.v0 + self.span - self.size_c

    def in_template(self, state: int) -> bool:
        """Whether ``state`` is one of the template's (concrete or virtual) states."""
        if state < VIRTUAL_BASE:
            return self.s0 <= state < self.s0 + self.size_c
        return self.v0 <= state < self.virtual_end

    def copies_still_needed(self, j: int) -> int:
        """Copies after copy ``j`` that a shortest way out must still read."""
        return max(0, max(self.low, 1) - 1 - j)


@dataclass(frozen=True, eq=False)
class Nfa:
    """A pattern's Thompson NFA over bytes, trimmed, with its epsilon chains bypassed.

    Edges are parallel arrays: byte edge ``k`` reads a byte in ``byte_lo[k]..byte_hi[k]``
    from ``byte_src[k]`` to ``byte_dst[k]``; epsilon edge ``k`` goes from ``eps_src[k]``
    (always concrete) to ``eps_dst[k]``. The arrays are never modified once built.
    Pickles as its fields (the arrays, the blocks, the extras).
    """

    pattern: str
    concrete_states: int
    """Concrete states are the ids ``[0, concrete_states)``."""
    virtual_states: int
    """Virtual states are the ids ``[VIRTUAL_BASE, VIRTUAL_BASE + virtual_states)``."""
    start: int
    final: int
    """The only accepting state."""
    blocks: tuple[Block, ...]
    """The virtual blocks, by ascending ``base``."""
    byte_src: IdArray
    byte_lo: ByteBoundArray
    byte_hi: ByteBoundArray
    byte_dst: IdArray
    eps_src: IdArray
    eps_dst: IdArray
    extras: Mapping[int, tuple[int, ...]]
    """Epsilon edges a parent attached to a virtual id (a copy's start or end), by source."""

    @property
    def size(self) -> tuple[int, int, int]:
        """``(concrete states, byte edges, epsilon edges)`` (diagnostics)."""
        return self.concrete_states, int(self.byte_src.size), int(self.eps_src.size)

    def to_arrays(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        """The NFA as plain data: JSON-ready scalars and int arrays (see
        :meth:`from_arrays`). Blocks become one row of ints each; extras a CSR."""
        sources = sorted(self.extras)
        targets = [self.extras[source] for source in sources]
        meta = {
            "pattern": self.pattern,
            "concrete_states": self.concrete_states,
            "virtual_states": self.virtual_states,
            "start": self.start,
            "final": self.final,
        }
        arrays: dict[str, npt.NDArray[Any]] = {
            "blocks": np.array(
                [[*block[:-2], int(block.bounded), block.exit] for block in self.blocks],
                dtype=np.int64,
            ).reshape(len(self.blocks), len(Block._fields)),
            "byte_src": self.byte_src,
            "byte_lo": self.byte_lo,
            "byte_hi": self.byte_hi,
            "byte_dst": self.byte_dst,
            "eps_src": self.eps_src,
            "eps_dst": self.eps_dst,
            "extra_sources": np.array(sources, dtype=np.int64),
            "extra_offsets": np.cumsum([0, *map(len, targets)], dtype=np.int64),
            "extra_targets": np.array([t for group in targets for t in group], dtype=np.int64),
        }
        return meta, arrays

    @classmethod
    def from_arrays(cls, meta: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]]) -> Nfa:
        """The NFA :meth:`to_arrays` wrote.

        Raises:
            ValueError: a field is missing or of the wrong type, dtype or shape.
        """
        try:
            scalars = {name: meta[name] for name in _SCALARS}
            blocks_array = _ints(arrays["blocks"], 2)
            edges = {name: _ints(arrays[name], 1) for name in _EDGE_ARRAYS}
            offsets = _ints(arrays["extra_offsets"], 1).tolist()
            sources = _ints(arrays["extra_sources"], 1).tolist()
            targets = _ints(arrays["extra_targets"], 1).tolist()
        except KeyError as missing:
            raise ValueError(f"expected an NFA field {missing}, found none") from None
        if not isinstance(scalars["pattern"], str) or not all(
            isinstance(scalars[name], int) for name in _SCALARS[1:]
        ):
            raise ValueError("expected a str pattern and int state counts")
        if blocks_array.shape[1:] != (len(Block._fields),) or len(offsets) != len(sources) + 1:
            raise ValueError("expected one row per block and one offset per extra source")
        if len({edges[n].size for n in _EDGE_ARRAYS[:4]}) > 1 or edges["eps_src"].size != (
            edges["eps_dst"].size
        ):
            raise ValueError("expected edge arrays of equal lengths")
        blocks = tuple(
            Block._make([*row[:-2], bool(row[-2]), row[-1]]) for row in blocks_array.tolist()
        )
        extras = {
            source: tuple(targets[offsets[k] : offsets[k + 1]]) for k, source in enumerate(sources)
        }
        return cls(
            **scalars,
            blocks=blocks,
            byte_src=edges["byte_src"],
            byte_lo=edges["byte_lo"].astype(np.int32),
            byte_hi=edges["byte_hi"].astype(np.int32),
            byte_dst=edges["byte_dst"],
            eps_src=edges["eps_src"],
            eps_dst=edges["eps_dst"],
            extras=extras,
        )


_SCALARS = ("pattern", "concrete_states", "virtual_states", "start", "final")
_EDGE_ARRAYS = ("byte_src", "byte_lo", "byte_hi", "byte_dst", "eps_src", "eps_dst")


def _ints(array: npt.NDArray[Any], ndim: int) -> IdArray:
    """``array`` as int64 with ``ndim`` dimensions (a copy only when the dtype differs)."""
    if array.ndim != ndim or array.dtype.kind not in "iu":
        raise ValueError(f"expected a {ndim}-d int array, found {array.dtype} {array.shape}")
    return array.astype(np.int64, copy=False)


@dataclass(frozen=True, eq=False)
class BlockTree:
    """Which block each virtual id belongs to, and how blocks nest (derived from
    :attr:`Nfa.blocks` in O(blocks log blocks); rebuilt after unpickling, never stored)."""

    bases: list[int]
    """``blocks[i].base``, ascending: the block of a virtual id is found by bisection."""
    children: list[list[int]]
    """The blocks directly inside each block's template (calls to one definition share
    a template, hence their children)."""
    top: list[int]
    """The blocks directly in the top scope (inside no template)."""

    @classmethod
    def of(cls, blocks: tuple[Block, ...]) -> BlockTree:
        """A block's template holds the virtual ids ``[v0, virtual_end)``; the blocks whose
        ids start there are inside it, and its direct children are those not inside the
        template of another one of them."""
        bases = [block.base for block in blocks]

        def direct(lo: int, hi: int) -> list[int]:
            inside = range(bisect_left(bases, lo), bisect_left(bases, hi))
            spans = sorted(
                (blocks[i].v0, blocks[i].virtual_end)
                for i in inside
                if blocks[i].span > blocks[i].size_c
            )
            starts = [a for a, _ in spans]
            reach: list[int] = []  # reach[k]: the furthest end among spans[:k + 1]
            for _, b in spans:
                reach.append(max(b, reach[-1]) if reach else b)
            out = []
            for i in inside:
                k = bisect_right(starts, bases[i]) - 1
                if k < 0 or reach[k] <= bases[i]:
                    out.append(i)
            return out

        by_template: dict[tuple[int, int], list[int]] = {}
        children = []
        for block in blocks:
            key = (block.v0, block.virtual_end)
            if key not in by_template:
                by_template[key] = direct(*key)
            children.append(by_template[key])
        return cls(bases, children, direct(VIRTUAL_BASE, VIRTUAL_LIMIT))


def csr(keys: npt.NDArray[np.integer[Any]], count: int) -> tuple[npt.NDArray[np.intp], list[int]]:
    """A stable order of ``keys`` and the offsets of each key's block (length count+1)."""
    order, offsets = csr_arrays(keys, count)
    return order, offsets.tolist()


def csr_arrays(
    keys: npt.NDArray[np.integer[Any]], count: int
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """:func:`csr` with the offsets as an array (``keys`` in ``[0, count)``). O(n) but
    for the stable sort, which is linear on the nearly sorted sources of a parse."""
    order = np.argsort(keys, kind="stable")
    offsets = np.zeros(count + 1, dtype=np.intp)
    np.cumsum(np.bincount(keys, minlength=count)[:count], out=offsets[1:])
    return order, offsets
