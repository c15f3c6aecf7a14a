"""Call markers: how a call into a recursive definition is written in a machine's NFA.

A call edge of the pushdown automaton (:mod:`formcast.automaton.pushdown`) is compiled
into the calling machine's byte NFA as a chain of *marker bytes*, bytes that never occur
in UTF-8 text: :data:`CALL_BYTE`, then the callee's number in base 12 over
:data:`DIGIT_BYTES`, in :func:`marker_width` digits. The machine's lazy DFA therefore
needs no other alphabet: after a state reads the marker of callee ``k``, it is in the
state to return to once ``k`` has matched. Marker bytes are never stepped by the
pushdown automaton's own rows, and never reach a vocabulary walk.

In distance searches, the edge reading :data:`CALL_BYTE` weighs what its callee costs to
complete and the digit edges nothing (:func:`call_edges`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from formcast.automaton.nfa import Nfa

__all__ = [
    "CALL_BYTE",
    "DIGIT_BYTES",
    "MARKER_BYTES",
    "call_edges",
    "call_marker",
    "marker_width",
]

CALL_BYTE = 0xFF
"""The first byte of every call marker (never in UTF-8)."""

DIGIT_BYTES = bytes([0xC0, 0xC1, *range(0xF5, 0xFF)])
"""The twelve digits of a callee's number (never in UTF-8 either)."""

Indices = npt.NDArray[np.intp]

MARKER_BYTES = frozenset([CALL_BYTE, *DIGIT_BYTES])
_DIGIT_VALUE = {byte: value for value, byte in enumerate(DIGIT_BYTES)}
_IS_DIGIT = np.zeros(256, dtype=np.bool_)
_IS_DIGIT[list(DIGIT_BYTES)] = True


def marker_width(callees: int) -> int:
    """Digits needed to number ``callees`` callees (at least one)."""
    width = 1
    while len(DIGIT_BYTES) ** width < callees:
        width += 1
    return width


def call_marker(callee: int, width: int) -> bytes:
    """The marker bytes of a call to callee ``callee`` (0-based)."""
    digits = []
    for _ in range(width):
        callee, digit = divmod(callee, len(DIGIT_BYTES))
        digits.append(DIGIT_BYTES[digit])
    return bytes([CALL_BYTE, *reversed(digits)])


def call_edges(nfa: Nfa, width: int) -> tuple[Indices, list[int], Indices]:
    """``(call edge indices, their callees, digit edge indices)`` among ``nfa``'s byte edges.

    A marker is a chain of concrete states, each with its single byte edge (concrete
    copies and virtual templates keep it whole), so a call's callee is read by following
    its digit edges. O(byte edges)."""
    lo = nfa.byte_lo
    calls = np.flatnonzero(lo == CALL_BYTE)
    digits = np.flatnonzero(_IS_DIGIT[lo])
    digit_at = {
        source: (byte, target)
        for source, byte, target in zip(
            nfa.byte_src[digits].tolist(),
            lo[digits].tolist(),
            nfa.byte_dst[digits].tolist(),
            strict=True,
        )
    }
    callees = []
    for state in nfa.byte_dst[calls].tolist():
        number = 0
        for _ in range(width):
            byte, state = digit_at[state]
            number = number * len(DIGIT_BYTES) + _DIGIT_VALUE[byte]
        callees.append(number)
    return calls, callees, digits
