"""The boolean masks on the model's device, cached per automaton state.

:func:`allowed_mask` uploads a cursor's row once per (state, width, device) and reuses
it; :func:`budget_restricts` tells whether the token budget narrows a row, and
:func:`budget_narrows` whether it removes a token that could still end well (both O(1)
per state once its row's distances are known: :meth:`TokenIndex.budget_binds`);
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

__all__ = [
    "allowed_mask",
    "budget_narrows",
    "budget_restricts",
    "device_mask",
    "model_device",
]

#: Per index: the device masks, keyed ``(state, width, device, tokens_left)``;
#: ``tokens_left`` is None for a state's full row and set only where the budget binds.
_mask_cache: weakref.WeakKeyDictionary[
    TokenIndex, dict[tuple[int, int, str, int | None], torch.Tensor]
] = weakref.WeakKeyDictionary()


def budget_restricts(cursor: Cursor, tokens_left: int | None) -> bool:
    """Whether the budget removes any token from the cursor's current row."""
    return tokens_left is not None and cursor.index.budget_binds(cursor.state, tokens_left)


def budget_narrows(cursor: Cursor, tokens_left: int | None) -> bool:
    """Whether the budget removes a token of the cursor's row from which a complete
    output can still be reached (a token that leads nowhere, as some of a ``FromText``
    slot do, is removed at any budget: that is no choice of the budget's)."""
    return tokens_left is not None and cursor.index.budget_narrows(cursor.state, tokens_left)


def _mask_limit(cursor: Cursor, tokens_left: int | None) -> int | None:
    """The tokens left that the cursor's mask depends on: None where the budget removes
    nothing; :data:`UNREACHABLE` where it removes only the tokens that lead nowhere (a
    ``FromText`` slot's, at any budget: one mask per state, not one per step); else
    ``tokens_left``."""
    if not budget_restricts(cursor, tokens_left):
        return None
    return tokens_left if budget_narrows(cursor, tokens_left) else UNREACHABLE


def allowed_mask(
    cursor: Cursor, width: int, device: torch.device, tokens_left: int | None
) -> torch.Tensor:
    """The cursor's boolean mask on ``device``, cached per index: a (state, width,
    device) seen before costs a dict lookup and no host-to-device copy. Where the budget
    binds (the last tokens of a row), the budget-safe mask is cached under the tokens
    left as well: at most one mask per state and count of tokens left below the state's
    longest finite distance to an accepting state (the tokens that lead nowhere are
    removed by one mask per state). A new mask is uploaded without waiting for
    the device (see :func:`upload`). Do not modify the returned tensor."""
    limit = _mask_limit(cursor, tokens_left)
    per_index = _mask_cache.setdefault(cursor.index, {})
    key = (cursor.state, width, str(device), limit)
    mask = per_index.get(key)
    if mask is None:
        mask = per_index[key] = device_mask(cursor, width, device, limit)
    return mask


def device_mask(
    cursor: Cursor,
    width: int,
    device: torch.device,
    tokens_left: int | None,
    *,
    packed: bool = False,
) -> torch.Tensor:
    """The cursor's boolean mask of ``width`` built on ``device``.

    On the CPU (``packed`` False) the mask is filled from the allowed ids. Elsewhere, or
    with ``packed``, the host sends what is smaller: the allowed ids (a few for most
    states: a copied value, a number), set on the device; or the state's packed bitmask
    (``width / 32`` words, 6 KB for a 49k vocabulary, cached per state), unpacked on the
    device. Either copy is a few kilobytes at most instead of a ``width``-byte mask, and
    the host builds no ``width``-long tensor; nothing waits for the device."""
    if device.type == "cpu" and not packed:
        return upload(cursor.mask(width, tokens_left=tokens_left), device)  # no copy
    ids = cursor.allowed_token_ids(tokens_left)
    words = (width + 31) // 32
    if ids.size <= words:
        mask = torch.zeros(width, dtype=torch.bool, device=device)
        mask[upload(torch.from_numpy(ids.astype(np.int64)), device)] = True
        return mask
    bits = cursor.bitmask(width, tokens_left=tokens_left).view(np.int32)
    word_of, bit_of = _bit_places(width, device)
    on_device = upload(torch.from_numpy(bits), device)
    return ((on_device[word_of] >> bit_of) & 1).bool()


_bit_place_cache: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}


def _bit_places(width: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """For each token id below ``width``: its word in a packed mask and its bit there
    (device tensors, made once per width and device)."""
    key = (width, device)
    found = _bit_place_cache.get(key)
    if found is None:
        ids = torch.arange(width, device=device, dtype=torch.int32)
        found = _bit_place_cache[key] = ((ids >> 5).long(), ids & 31)
    return found


def model_device(model: Any) -> torch.device:
    """The device of a model's parameters (``model.device`` when it has one)."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    return next(model.parameters()).device  # type: ignore[no-any-return]
