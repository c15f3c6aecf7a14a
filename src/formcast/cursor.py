"""A per-sequence cursor over a :class:`~formcast.index.TokenIndex`.

A cursor is small (an index reference, a state and a flag) and belongs to one sequence:
create one per generated sequence with :meth:`TokenIndex.cursor` or ``Cursor(index)``,
copy it to branch. Everything expensive lives in the shared index.

    cursor = Cursor(index)
    while not cursor.is_finished:
        mask = cursor.mask(logits.shape[-1])        # bool tensor, True = allowed
        token = pick(logits.masked_fill(~mask, -inf))
        cursor.advance(token)                       # raises TokenNotAllowedError if banned
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from formcast.errors import InvalidOptionError, TokenNotAllowedError

_UINT32 = np.dtype(np.uint32)  # a uint32 array's dtype is this one: `is` is the fast check

if TYPE_CHECKING:
    import torch

    # for annotations only: formcast.index imports this module to build cursors
    from formcast.index import TokenIndex

__all__ = ["Cursor"]


class Cursor:
    """Where one sequence stands in a compiled constraint.

    Contract: a token is allowed iff its bytes keep the automaton alive; EOS ids are
    allowed exactly in accepting states; after EOS the cursor is finished and allows
    nothing. Token ids at or beyond the vocabulary size (embedding padding) are never
    allowed.
    """

    __slots__ = ("_finished", "index", "state")

    def __init__(self, index: TokenIndex, state: int | None = None) -> None:
        self.index = index
        self.state = index.initial_state if state is None else state
        self._finished = False

    def copy(self) -> Cursor:
        """An independent cursor at the same position (O(1))."""
        twin = Cursor(self.index, self.state)
        twin._finished = self._finished
        return twin

    @property
    def is_finished(self) -> bool:
        """True once an EOS token was accepted."""
        return self._finished

    def is_accepting(self) -> bool:
        """Whether the output so far is complete (EOS would be allowed)."""
        return not self._finished and self.index.is_accepting(self.state)

    def allowed_token_ids(self, tokens_left: int | None = None) -> npt.NDArray[np.int32]:
        """Sorted ids of every allowed token, EOS ids included in accepting states.

        With ``tokens_left``, only tokens after which the output can still be completed
        within that many tokens (budget-safe ending).
        """
        if self._finished:
            return np.empty(0, dtype=np.int32)
        token_ids = self._row(tokens_left)[0]
        if self.index.is_accepting(self.state):
            eos = np.fromiter(sorted(self.index.eos_token_ids), dtype=np.int32)
            token_ids = np.union1d(token_ids, eos).astype(np.int32)
        return token_ids

    def mask(
        self,
        width: int | None = None,
        device: torch.device | str | None = None,
        tokens_left: int | None = None,
    ) -> torch.Tensor:
        """Boolean tensor of shape ``(width,)``, True where a token is allowed.

        ``width`` is the logits' width (defaults to the vocabulary size); ids at or beyond
        the vocabulary size are always False. Cost: one tensor allocation per call; the
        decoding loop in :mod:`formcast.decode.logits` caches masks per state instead.
        """
        import torch

        width = self._check_width(width)
        allowed = torch.zeros(width, dtype=torch.bool)
        allowed[torch.from_numpy(self.allowed_token_ids(tokens_left).astype(np.int64))] = True
        return allowed.to(device) if device is not None else allowed

    def bitmask(
        self,
        width: int | None = None,
        out: npt.NDArray[np.uint32] | None = None,
        tokens_left: int | None = None,
    ) -> npt.NDArray[np.uint32]:
        """Packed 32-bit mask: bit ``i % 32`` of word ``i // 32`` is set iff token ``i`` is
        allowed. Writes into ``out`` (uint32, length ``ceil(width / 32)``) when given.

        Cost: without ``tokens_left``, a copy of a per-state cached array (~1 µs for 49k
        tokens once the state's row exists); with it, one pass over the row.
        """
        if tokens_left is None and not self._finished:
            # Hot path: one dict lookup and one copy when the state's mask exists
            # (TokenIndex.cached_packed_mask inline; a slice assignment, ~0.1 us less than
            # np.copyto)
            index = self.index
            key = (self.state, index._size if width is None else width)
            packed = index._packed.get(key)
            if packed is None:  # a first visit's, in one flat pass where it can
                packed = index._first_packed(key)
            if packed is not None:
                if out is None:
                    return packed.copy()
                if (out.dtype is _UINT32 or out.dtype == np.uint32) and out.shape == packed.shape:
                    out[...] = packed
                    return out
        width = self._check_width(width)
        words = (width + 31) // 32
        if out is not None and (out.shape != (words,) or out.dtype != np.uint32):
            raise InvalidOptionError(
                f"expected a uint32 buffer of shape ({words},), found {out.dtype} {out.shape}"
            )
        if tokens_left is None and not self._finished:
            packed = self.index.packed_mask(self.state, width)
            if out is None:
                return packed.copy()
            out[...] = packed
            return out
        if out is None:
            out = np.zeros(words, dtype=np.uint32)
        else:
            out[:] = 0
        ids = self.allowed_token_ids(tokens_left)
        bits = np.left_shift(np.uint32(1), (ids % 32).astype(np.uint32))
        np.bitwise_or.at(out, ids // 32, bits)
        return out

    def advance(self, token_id: int) -> None:
        """Consume one token; raise :class:`TokenNotAllowedError` if it is not allowed."""
        if self._finished:
            raise TokenNotAllowedError(
                f"expected no more tokens (the sequence ended with EOS), found token {token_id}"
            )
        if token_id in self.index.eos_token_ids:
            if not self.index.is_accepting(self.state):
                raise TokenNotAllowedError(
                    f"expected a token that continues the output, found EOS ({token_id}) in "
                    f"state {self.state}, where the output is not yet complete"
                )
            self._finished = True
            return
        next_state = self.index.next_state(self.state, token_id)
        if next_state < 0:
            shown = (
                self.index.vocabulary.token_bytes[token_id]
                if 0 <= token_id < self.index.vocabulary.size
                else None
            )
            raise TokenNotAllowedError(
                f"expected a token allowed by {self.index.description!r} in state {self.state}, "
                f"found token {token_id} ({shown!r})"
            )
        self.state = next_state

    def advance_bytes(self, data: bytes) -> None:
        """Consume raw bytes (e.g. forced text), whatever tokens will carry them."""
        state = self.index.walk_bytes(self.state, data)
        if state < 0:
            raise TokenNotAllowedError(
                f"expected bytes allowed by {self.index.description!r}, found {data!r}"
            )
        self.state = state

    def forced_bytes(self) -> bytes:
        """Bytes the constraint fixes from here (for jump-forward decoding)."""
        return b"" if self._finished else self.index.forced_bytes(self.state)

    def min_tokens_to_accept(self) -> int:
        """Tokens that are always enough to complete the output from here (0 if accepting)."""
        return self.index.min_tokens_to_accept(self.state)

    def _row(self, tokens_left: int | None) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        if tokens_left is None:
            return self.index.row(self.state)
        return self.index.budget_row(self.state, tokens_left)

    def _check_width(self, width: int | None) -> int:
        size = self.index.vocabulary.size
        if width is None:
            return size
        if width < size:
            raise InvalidOptionError(
                f"expected a logits width of at least the vocabulary size {size}, found {width}"
            )
        return width
