"""The KV cache of the rows that decode together, and a prompt prefix computed once.

A :class:`RowCache` holds a transformers ``Cache`` whose layers grow in place
(:class:`GrowingLayer`) and the 2-D attention mask that says which of its columns each
row sees. The columns are shared by all rows: a forward pass that feeds ``w`` tokens per
row appends ``w`` columns to every row, and a row fed fewer tokens is left-padded with
columns its mask hides. Each row numbers its own tokens (position ids), so a row never
depends on where its columns sit; only the visible columns and their order matter.
That is what lets rows come and go:

* :meth:`RowCache.keep_rows` drops the rows that finished;
* :meth:`RowCache.append` adds rows prefilled apart (the two blocks right-aligned, the
  shorter one left-padded);
* :meth:`RowCache.trim` drops the leading columns no row sees any more, and
  :meth:`RowCache.compact` moves each row's visible columns together when hidden ones
  (padding, rolled-back tokens) take too much room;
* :meth:`RowCache.hide_from` hides a row's tokens from a position on (a rollback).

A :class:`SharedPrefix` is the KV of a token prefix common to many prompts (system
message, instructions, field list), computed once by one forward pass and copied into
each new row instead of being prefilled again. Keys and values of a causal model at a
position depend only on the tokens up to it, so the first ``k`` columns of the prefix are
exact for any prompt whose first ``k`` token ids are the prefix's.

Cost: appending a step writes only the new columns (a ``DynamicLayer`` copies the whole
layer on every step, several hundred MB per step at batch 8 with 1,000 columns on the
default model); keeping, appending and compacting rows copy the cache once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers.cache_utils import Cache, DynamicLayer

from formcast.decode.forward import attention_kernels, call_model

__all__ = [
    "GrowingLayer",
    "RowCache",
    "SharedPrefix",
    "common_prefix_length",
    "new_block",
    "upload",
]

#: Spare columns allocated beyond what a layer holds, so most steps write in place.
_SPARE_COLUMNS = 64


class GrowingLayer(DynamicLayer):  # type: ignore[no-untyped-call]
    """A ``DynamicLayer`` that appends into spare capacity instead of concatenating.

    ``keys`` and ``values`` are views of the first ``used`` columns of larger buffers
    (``[batch, heads, capacity, head_dim]``); when the capacity runs out, the buffers
    grow by half (amortised O(1) per column).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self.key_buffer: torch.Tensor | None = None
        self.value_buffer: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.adopt(key_states[:, :, :0], value_states[:, :, :0], spare=_SPARE_COLUMNS)
        self.is_initialized = True

    def adopt(self, keys: torch.Tensor, values: torch.Tensor, *, spare: int = 0) -> None:
        """Hold copies of ``keys`` and ``values`` with ``spare`` free columns after them."""
        used = keys.shape[2]
        key_buffer = keys.new_empty((*keys.shape[:2], used + spare, keys.shape[3]))
        value_buffer = values.new_empty((*values.shape[:2], used + spare, values.shape[3]))
        key_buffer[:, :, :used] = keys
        value_buffer[:, :, :used] = values
        self.set_buffers(key_buffer, value_buffer, used)

    def set_buffers(self, key_buffer: torch.Tensor, value_buffer: torch.Tensor, used: int) -> None:
        """Hold these buffers (no copy); their first ``used`` columns are the cache."""
        self.key_buffer, self.value_buffer = key_buffer, value_buffer
        self._view(used)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        assert self.key_buffer is not None and self.value_buffer is not None
        used = self.used
        added = key_states.shape[2]
        if used + added > self.key_buffer.shape[2]:
            keys, values = self.kv()
            self.adopt(keys, values, spare=max(added, used // 2) + _SPARE_COLUMNS)
            assert self.key_buffer is not None and self.value_buffer is not None
        self.key_buffer[:, :, used : used + added] = key_states
        self.value_buffer[:, :, used : used + added] = value_states
        self._view(used + added)
        return self.kv()

    def kv(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values held (views of the buffers)."""
        if self.keys is None or self.values is None:
            raise RuntimeError("expected an initialized cache layer, found an empty one")
        return self.keys, self.values

    @property
    def used(self) -> int:
        return 0 if self.keys is None else int(self.keys.shape[2])

    def _view(self, used: int) -> None:
        assert self.key_buffer is not None and self.value_buffer is not None
        self.keys = self.key_buffer[:, :, :used]
        self.values = self.value_buffer[:, :, :used]

    def get_seq_length(self) -> int:
        return self.used

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            keys, values = self.kv()
            self.adopt(keys[indices], values[indices], spare=_SPARE_COLUMNS)


def _new_cache() -> Any:
    return Cache(layer_class_to_replicate=GrowingLayer)


def _layers(cache: Any) -> list[GrowingLayer]:
    """The initialized layers of ``cache`` (none when the model ignores the cache)."""
    return [layer for layer in cache.layers if layer.is_initialized]


class SharedPrefix:
    """The token ids of a prompt prefix and, once computed, their keys and values.

    Args:
        token_ids: the prefix's token ids (compared with each prompt's, id by id).

    :meth:`compute` runs the model once over the prefix (positions 0..n-1); later calls
    return at once. The KV lives on the model's device: ``layers * 2 * heads * n *
    head_dim`` numbers (about 46 KB per token on the default model, fp32).
    """

    def __init__(self, token_ids: Sequence[int]) -> None:
        self.token_ids = tuple(int(t) for t in token_ids)
        self._kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self.computed = False

    def __len__(self) -> int:
        return len(self.token_ids)

    def usable_length(self, prompt: Sequence[int]) -> int:
        """How many of ``prompt``'s first tokens the prefix can stand for: the common
        prefix of the token ids, less one when it would cover the whole prompt (a row
        needs one token of its own to get its first logits)."""
        return min(common_prefix_length(self.token_ids, prompt), len(prompt) - 1)

    def compute(self, model: Any, device: torch.device) -> None:
        """Run the model over the prefix (once per instance)."""
        if self.computed or not self.token_ids:
            self.computed = True
            return
        cache = _new_cache()
        ids = torch.tensor([self.token_ids], dtype=torch.long, device=device)
        with torch.inference_mode(), attention_kernels(device):
            call_model(
                model,
                cache,
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                position_ids=torch.arange(len(self.token_ids), device=device)[None],
            )
        kv = (layer.kv() for layer in _layers(cache))
        self._kv = [(keys.clone(), values.clone()) for keys, values in kv]
        self.computed = True

    def rows(self, count: int, length: int, device: torch.device) -> RowCache:
        """A cache of ``count`` rows that each see the first ``length`` prefix tokens."""
        if not self.computed:
            raise RuntimeError("SharedPrefix.rows() before compute()")
        rows = RowCache(device)
        rows.cache = _new_cache()
        for keys, values in self._kv or []:
            layer = GrowingLayer()
            layer.dtype, layer.device = keys.dtype, keys.device
            layer.adopt(
                keys[:, :, :length].expand(count, -1, -1, -1),
                values[:, :, :length].expand(count, -1, -1, -1),
                spare=_SPARE_COLUMNS,
            )
            layer.is_initialized = True
            rows.cache.layers.append(layer)
        rows.attention = torch.ones((count, length), dtype=torch.long, device=device)
        rows.visible = [length] * count
        rows.first = [0] * count
        return rows


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """The number of leading token ids ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class RowCache:
    """The KV cache and the attention mask of a set of rows.

    Attributes:
        cache: the transformers ``Cache`` passed to the model as ``past_key_values``.
        attention: ``[rows, columns]`` long tensor on the device, 1 where a row sees a
            column.
        visible: per row, the number of columns it sees (its next position id).
        first: per row, its first visible column (columns before it are padding).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cache: Any = _new_cache()
        self.attention = torch.zeros((0, 0), dtype=torch.long, device=device)
        self.visible: list[int] = []
        self.first: list[int] = []

    @classmethod
    def empty_rows(cls, count: int, device: torch.device) -> RowCache:
        rows = cls(device)
        rows.attention = torch.zeros((count, 0), dtype=torch.long, device=device)
        rows.visible = [0] * count
        rows.first = [0] * count
        return rows

    @property
    def rows(self) -> int:
        return len(self.visible)

    @property
    def width(self) -> int:
        return int(self.attention.shape[1])

    def feed(self, lengths: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Columns for one forward pass feeding ``lengths[i]`` tokens to row ``i``: returns
        ``(attention, positions)``, the mask to pass (old columns and new) and the
        ``[rows, width]`` position ids (host tensor) of the new, left-padded block."""
        width = max(lengths)
        columns, positions = new_block(self.visible, lengths)
        for i, count in enumerate(lengths):
            if self.visible[i] == 0:
                self.first[i] = self.width + width - count
            self.visible[i] += count
        new = upload(torch.from_numpy(columns.astype(np.int64)), self.device)
        self.attention = torch.cat([self.attention, new], dim=1)
        return self.attention, torch.from_numpy(positions)

    def keep_rows(self, keep: Sequence[int]) -> None:
        """Keep only the rows ``keep`` (in that order), then trim leading columns."""
        index = upload(torch.tensor(list(keep), dtype=torch.long), self.device)
        for layer in _layers(self.cache):
            layer.batch_select_indices(index)
        self.attention = self.attention.index_select(0, index)
        self.visible = [self.visible[i] for i in keep]
        self.first = [self.first[i] for i in keep]
        self.trim()

    def append(self, other: RowCache) -> None:
        """Add ``other``'s rows after these; both blocks end on the same column."""
        if other.rows == 0:
            return
        if self.rows == 0:
            self.cache, self.attention = other.cache, other.attention
            self.visible, self.first = list(other.visible), list(other.first)
            return
        width = max(self.width, other.width)
        mine, theirs = _layers(self.cache), _layers(other.cache)
        if len(mine) != len(theirs):
            raise RuntimeError(
                f"expected caches with the same layers, found {len(mine)} and {len(theirs)}"
            )
        for layer, extra in zip(mine, theirs, strict=True):
            (keys, values), (more_keys, more_values) = layer.kv(), extra.kv()
            layer.set_buffers(
                _stack_right_aligned(keys, more_keys, width, _SPARE_COLUMNS),
                _stack_right_aligned(values, more_values, width, _SPARE_COLUMNS),
                width,
            )
        mine_shift, their_shift = width - self.width, width - other.width
        self.attention = _stack_right_aligned(self.attention, other.attention, width, 0)
        self.first = [f + mine_shift for f in self.first] + [f + their_shift for f in other.first]
        self.visible = self.visible + list(other.visible)

    def trim(self) -> None:
        """Drop the leading columns that no row sees (views, no copy)."""
        if not self.first:
            return
        cut = min(self.first)
        if cut <= 0:
            return
        for layer in _layers(self.cache):
            assert layer.key_buffer is not None and layer.value_buffer is not None
            used = layer.used
            layer.key_buffer = layer.key_buffer[:, :, cut:]
            layer.value_buffer = layer.value_buffer[:, :, cut:]
            layer._view(used - cut)
        self.attention = self.attention[:, cut:]
        self.first = [f - cut for f in self.first]

    def waste(self) -> int:
        """Columns beyond what the row that sees the most needs."""
        return self.width - max(self.visible, default=0)

    def compact(self) -> None:
        """Move each row's visible columns together, right-aligned, in order; the hidden
        columns between them (padding, rolled-back tokens) are dropped. One copy of the
        cache, no host synchronisation."""
        width = max(self.visible, default=0)
        if width == self.width:
            return
        # A stable sort of the mask puts each row's hidden columns first and keeps the
        # visible ones in order; the last `width` columns are what the row keeps.
        order = torch.sort(self.attention, dim=1, stable=True)
        index = order.indices[:, self.width - width :]
        for layer in _layers(self.cache):
            keys, values = layer.kv()
            gather = index[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
            layer.adopt(keys.gather(2, gather), values.gather(2, gather), spare=_SPARE_COLUMNS)
        self.attention = order.values[:, self.width - width :].contiguous()
        self.first = [width - v for v in self.visible]

    def hide_from(self, row: int, position: int) -> None:
        """Hide row ``row``'s tokens at positions ``position`` and later (its next token
        gets position ``position``). No host synchronisation."""
        mask = self.attention[row]
        seen_before = torch.cumsum(mask, dim=0) - mask  # visible columns before each
        self.attention[row] = mask * (seen_before < position)
        self.visible[row] = position


def _stack_right_aligned(
    top: torch.Tensor, bottom: torch.Tensor, width: int, spare: int
) -> torch.Tensor:
    """``top`` over ``bottom`` along dim 0, each ending at column ``width`` of the column
    dim (2 for 4-D KV tensors, 1 for 2-D masks) with zeros before, and ``spare``
    uninitialised columns after."""
    dim = 2 if top.dim() == 4 else 1
    shape = list(top.shape)
    shape[0] = top.shape[0] + bottom.shape[0]
    shape[dim] = width + spare
    out = top.new_empty(shape)
    out.narrow(dim, 0, width).zero_()
    out.narrow(0, 0, top.shape[0]).narrow(dim, width - top.shape[dim], top.shape[dim]).copy_(top)
    out.narrow(0, top.shape[0], bottom.shape[0]).narrow(
        dim, width - bottom.shape[dim], bottom.shape[dim]
    ).copy_(bottom)
    return out


def new_block(
    visible: Sequence[int], lengths: Sequence[int]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The new columns of a pass feeding ``lengths[i]`` tokens to a row that sees
    ``visible[i]`` columns, left-padded to the longest: ``(seen, positions)``, ``[rows,
    width]`` arrays, a row's padding unseen and numbered as its first new token."""
    counts = np.asarray(lengths, dtype=np.int64)
    width = int(counts.max())
    offset = np.arange(width, dtype=np.int64)[None, :] - (width - counts)[:, None]
    seen = offset >= 0
    positions = np.asarray(visible, dtype=np.int64)[:, None] + np.maximum(offset, 0)
    return seen, positions


def upload(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device``. On a GPU the copy goes through pinned memory and does
    not block the host: work queued before it (a forward pass) keeps running while the
    host goes on."""
    if device.type == "cpu":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)
