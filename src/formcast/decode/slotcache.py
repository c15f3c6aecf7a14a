"""A KV cache of fixed shape for compiled decoding: ``capacity`` slots, a fixed width.

:class:`SlotCache` keeps the rows of a :class:`~formcast.decode.batching.BatchDecoder` in the
preallocated buffers of a transformers ``StaticCache`` (``[capacity, heads, width,
head_dim]`` per layer, fixed addresses). Every decoding pass feeds all ``capacity``
slots, so the model always sees the same shapes: a compiled forward pass
(``torch.compile``, CUDA graphs on a GPU) is traced once and replayed at every step.

The column layout is :class:`~formcast.decode.kvcache.RowCache`'s: columns are shared by all
slots, a pass appends the same columns to every slot (at ``used``), the attention mask
says which columns each slot sees and position ids number each row's own tokens. What
differs is how rows come and go, without changing any shape:

* a row that ends frees its slot: its mask row is cleared (no copy of the cache);
* a joining row, prefilled apart, is copied into a free slot, its visible columns ending
  at ``used`` (right-aligned, as :meth:`RowCache.append` does);
* when a pass would run past the width, or a joining row needs more columns than
  ``used``, the slots are repacked (each slot's visible columns moved together, one copy
  of the cache); the buffers are reallocated twice as wide only when the longest row
  does not fit (a compiled pass is then traced again).

A free slot is fed the pad token and sees that one column, so its (ignored) logits stay
finite. Cost: the buffers hold ``capacity * width`` columns from the start, whatever the
rows use (``layers * 2 * kv_heads * head_dim`` numbers per column: about 46 KB on the
default model in float32).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

import torch
from transformers.cache_utils import StaticCache, StaticLayer

from formcast.decode.kvcache import RowCache, upload
from formcast.errors import InvalidOptionError

__all__ = ["SlotCache", "static_width"]

#: The narrowest buffers; wider ones double it (few distinct shapes, few graphs).
MIN_WIDTH = 256


def static_width(columns: int) -> int:
    """The buffer width for rows of up to ``columns`` columns: half as much again, for
    the hidden columns that accumulate between repacks, rounded up to a power of two
    times :data:`MIN_WIDTH`."""
    wanted = columns + columns // 2
    width = MIN_WIDTH
    while width < wanted:
        width *= 2
    return width


class SlotCache:
    """The rows of a decoder in the fixed buffers of a transformers ``StaticCache``.

    Args:
        config: the model's config (layer count, for ``StaticCache``).
        capacity: slots (the batch size of every decoding pass).
        width: columns of the buffers (see :func:`static_width`).
        like: a prefilled cache whose layers give the heads, head size, dtype and
            device of the buffers.

    Row ``i`` is the ``i``-th running row, as in :class:`RowCache`; ``slots[i]`` is
    where it lives. The methods mirror :class:`RowCache`'s, so the decoder drives both
    the same way.
    """

    def __init__(self, config: Any, capacity: int, width: int, like: RowCache) -> None:
        self.config = config
        self.capacity = capacity
        self.device = like.device
        self.slots: list[int] = []
        self.visible: list[int] = []
        self.first: list[int] = []
        self.used = 0
        prefilled = _kv_layers(like)
        self.buffers: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._allocate(width, prefilled[0].kv()[0])
        if len(self.buffers) != len(prefilled):
            raise RuntimeError(
                f"expected {len(self.buffers)} cache layers (the model's config), found "
                f"{len(prefilled)} in the prefilled rows"
            )

    # -- the decoder's side (as RowCache) -------------------------------------------------
    @property
    def rows(self) -> int:
        return len(self.slots)

    @property
    def width(self) -> int:
        """The fixed width of the buffers (every pass attends over all of it)."""
        return int(self.attention.shape[1])

    def waste(self) -> int:
        return 0  # hidden columns cost nothing until the width runs out (see feed)

    def compact(self) -> None:
        self._repack(max(self.visible, default=0))

    def spread(self, tensor: torch.Tensor, fill: int) -> torch.Tensor:
        """A ``[rows, w]`` host tensor laid out by slot: ``[capacity, w]``, ``fill`` in
        the free slots."""
        out = torch.full((self.capacity, tensor.shape[1]), fill, dtype=tensor.dtype)
        out[self.slots] = tensor
        return out

    def gather(self, logits: torch.Tensor) -> torch.Tensor:
        """The running rows' part of a pass's ``[capacity, ...]`` output, in row order."""
        index = upload(torch.tensor(self.slots, dtype=torch.long), self.device)
        return logits.index_select(0, index)

    def feed(self, lengths: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Columns ``used .. used + w`` for a pass feeding ``lengths[i]`` tokens to row
        ``i`` (``w`` the longest): returns the ``[capacity, width]`` attention mask and
        the ``[capacity, w]`` position ids (host)."""
        new = max(lengths)
        if self.used + new > self.width:
            self._make_room(new)
        columns = torch.zeros((self.capacity, new), dtype=torch.long)
        columns[:, -1] = 1  # a free slot sees its own pad token
        positions = torch.zeros((self.capacity, new), dtype=torch.long)
        for i, count in enumerate(lengths):
            slot, start = self.slots[i], self.visible[i]
            columns[slot] = 0
            columns[slot, new - count :] = 1
            positions[slot, new - count :] = torch.arange(start, start + count)
            positions[slot, : new - count] = start
            self.visible[i] += count
        self.attention[:, self.used : self.used + new] = upload(columns, self.device)
        self.used += new  # the static layers advance their own count as the pass writes
        return self.attention, positions

    def append(self, other: RowCache) -> None:
        """Copy ``other``'s rows (prefilled apart) into free slots, after the running
        rows; each row's visible columns end at ``used``."""
        if other.rows > self.capacity - self.rows:
            raise RuntimeError(
                f"expected at most {self.capacity - self.rows} joining rows, found {other.rows}"
            )
        longest = max(other.visible)
        if longest > self.used:
            self._make_room(longest - self.used, joining=longest)
        free = sorted(set(range(self.capacity)) - set(self.slots))[: other.rows]
        order = torch.sort(other.attention, dim=1, stable=True)  # hidden columns first
        for r, slot in enumerate(free):
            count = other.visible[r]
            source = order.indices[r, other.width - count :]
            start = self.used - count
            for (keys, values), extra in zip(self.buffers, _kv_layers(other), strict=True):
                more_keys, more_values = extra.kv()
                keys[slot, :, start : self.used] = more_keys[r, :, source]
                values[slot, :, start : self.used] = more_values[r, :, source]
            self.attention[slot] = 0
            self.attention[slot, self.used - count : self.used] = 1
            self.slots.append(slot)
            self.visible.append(count)
            self.first.append(self.used - count)

    def keep_rows(self, keep: Sequence[int]) -> None:
        """Keep only the rows ``keep`` (in that order); the others' slots are freed."""
        kept = set(keep)
        freed = [self.slots[i] for i in range(self.rows) if i not in kept]
        if freed:
            self.attention[upload(torch.tensor(freed, dtype=torch.long), self.device)] = 0
        self.slots = [self.slots[i] for i in keep]
        self.visible = [self.visible[i] for i in keep]
        self.first = [self.first[i] for i in keep]

    def hide_from(self, row: int, position: int) -> None:
        """Hide row ``row``'s tokens at positions ``position`` and later."""
        slot = self.slots[row]
        mask = self.attention[slot]
        seen_before = torch.cumsum(mask, dim=0) - mask
        self.attention[slot] = mask * (seen_before < position)
        self.visible[row] = position

    # -- layout ---------------------------------------------------------------------------
    def _make_room(self, new: int, joining: int = 0) -> None:
        """Repack so that ``new`` more columns fit after the rows (and a joining row of
        ``joining`` columns fits before ``used``); widen the buffers if they cannot."""
        target = max(max(self.visible, default=0), joining)
        if target + new > self.width:
            self._widen(static_width(target + new))
        self._repack(target)

    def _repack(self, target: int) -> None:
        """Move each slot's visible columns together, ending at column ``target``."""
        order = torch.sort(self.attention, dim=1, stable=True)  # hidden columns first
        index = order.indices[:, self.width - target :]
        for keys, values in self.buffers:
            gather = index[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
            keys[:, :, :target] = keys.gather(2, gather)
            values[:, :, :target] = values.gather(2, gather)
        attention = torch.zeros_like(self.attention)
        attention[:, :target] = order.values[:, self.width - target :]
        self.attention.copy_(attention)
        self.first = [target - v for v in self.visible]
        self._set_used(target)

    def _widen(self, width: int) -> None:
        old_buffers, old_attention = self.buffers, self.attention
        self._allocate(width, old_buffers[0][0])
        for (keys, values), (old_keys, old_values) in zip(self.buffers, old_buffers, strict=True):
            keys[:, :, : old_keys.shape[2]] = old_keys
            values[:, :, : old_values.shape[2]] = old_values
        self.attention[:, : old_attention.shape[1]] = old_attention

    def _allocate(self, width: int, keys: torch.Tensor) -> None:
        """New zeroed buffers of ``width`` columns, heads and dtype as ``keys``."""
        self.cache = StaticCache(config=self.config, max_cache_len=width)
        self.layers = _static_layers(self.cache)
        self.cache.early_initialization(
            batch_size=self.capacity,
            num_heads=int(keys.shape[1]),
            head_dim=int(keys.shape[3]),
            dtype=keys.dtype,
            device=keys.device,
        )
        self.buffers = [(layer.keys, layer.values) for layer in self.layers]
        self.attention = torch.zeros((self.capacity, width), dtype=torch.long, device=self.device)
        self._set_used(self.used)

    def _set_used(self, used: int) -> None:
        """Where the next pass writes (the static layers count it on the device)."""
        self.used = used
        for layer in self.layers:
            layer.cumulative_length.fill_(used)


def _kv_layers(rows: RowCache) -> list[Any]:
    return [layer for layer in rows.cache.layers if layer.is_initialized]


class _Layer(Protocol):
    """A ``StaticLayer`` once initialised, as this module uses it."""

    keys: torch.Tensor
    values: torch.Tensor
    cumulative_length: torch.Tensor


def _static_layers(cache: StaticCache) -> list[_Layer]:
    """The cache's layers, each a full-attention ``StaticLayer``.

    Raises:
        InvalidOptionError: a layer of another kind (sliding-window attention, a
            linear-attention state), whose columns do not follow the shared layout.
    """
    layers: list[_Layer] = []
    for i, layer in enumerate(cache.layers):
        if type(layer) is not StaticLayer:
            raise InvalidOptionError(
                "expected a model whose attention layers all see every column for "
                f"compile=True (a static KV cache of fixed slots), found layer {i} with a "
                f"{type(layer).__name__}"
            )
        layers.append(cast(_Layer, layer))
    return layers
