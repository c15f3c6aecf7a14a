"""The boolean masks on the model's device, cached per automaton state.

:func:`allowed_mask` uploads a cursor's row once per (state, width, device) and reuses
it; :func:`budget_restricts` tells whether the token budget narrows a row, and
:func:`budget_narrows` whether it removes a token that could still end well;
:func:`model_device` finds where a model's parameters live.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import torch

from formcast.automaton import UNREACHABLE
from formcast.cursor import Cursor
from formcast.decode.kvcache import upload
from formcast.index import TokenIndex

__all__ = ["allowed_mask", "budget_narrows", "budget_restricts", "model_device"]

#: Per index: the device masks, keyed ``(state, width, device, tokens_left)``;
#: ``tokens_left`` is None for a state's full row and set only where the budget binds.
_mask_cache: weakref.WeakKeyDictionary[
    TokenIndex, dict[tuple[int, int, str, int | None], torch.Tensor]
] = weakref.WeakKeyDictionary()
#: Per index: each state's longest finite distance to acceptance after one token.
_reach_cache: weakref.WeakKeyDictionary[TokenIndex, dict[int, int]] = weakref.WeakKeyDictionary()


def budget_restricts(cursor: Cursor, tokens_left: int | None) -> bool:
    """Whether the budget removes any token from the cursor's current row."""
    if tokens_left is None:
        return False
    return cursor.index.budget_binds(cursor.state, tokens_left)


def budget_narrows(cursor: Cursor, tokens_left: int | None) -> bool:
    """Whether the budget removes a token of the cursor's row from which a complete
    output can still be reached (a token that leads nowhere, as some of a ``FromText``
    slot do, is removed at any budget: that is no choice of the budget's). The longest
    such distance is computed once per state."""
    if not budget_restricts(cursor, tokens_left):
        return False
    assert tokens_left is not None
    per_index = _reach_cache.setdefault(cursor.index, {})
    longest = per_index.get(cursor.state)
    if longest is None:
        index = cursor.index
        states = np.unique(index.row(cursor.state)[1])
        reach = [d for d in (index.min_tokens_to_accept(int(s)) for s in states) if d < UNREACHABLE]
        longest = max(reach, default=0)
        per_index[cursor.state] = longest
    return longest > tokens_left - 1


def allowed_mask(
    cursor: Cursor, width: int, device: torch.device, tokens_left: int | None
) -> torch.Tensor:
    """The cursor's boolean mask on ``device``, cached per index: a (state, width,
    device) seen before costs a dict lookup and no host-to-device copy. Where the budget
    binds (the last tokens of a row), the budget-safe mask is cached under the tokens
    left as well: at most one mask per state and count of tokens left below the state's
    longest distance to an accepting state. A new mask is uploaded without waiting for
    the device (see :func:`upload`). Do not modify the returned tensor."""
    limit = tokens_left if budget_restricts(cursor, tokens_left) else None
    per_index = _mask_cache.setdefault(cursor.index, {})
    key = (cursor.state, width, str(device), limit)
    mask = per_index.get(key)
    if mask is None:
        mask = upload(cursor.mask(width, tokens_left=limit), device)
        per_index[key] = mask
    return mask


def model_device(model: Any) -> torch.device:
    """The device of a model's parameters (``model.device`` when it has one)."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    return next(model.parameters()).device  # type: ignore[no-any-return]
