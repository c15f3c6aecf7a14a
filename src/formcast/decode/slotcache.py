"""The running rows in fixed buffers, so that every decoding pass can be a CUDA graph.

:class:`SlotCache` keeps the KV of a :class:`~formcast.decode.batching.BatchDecoder`'s
running rows in buffers allocated once (``[slots, kv_heads, width, head_dim]`` per layer,
fixed addresses). Row ``i`` lives in slot ``i``, so the rows of a pass are always the
first ``n`` slots, and a pass over ``n`` rows runs on the first ``bucket(n)`` slots (the
next power of two): few distinct shapes, one captured graph each
(:class:`~formcast.decode.graphs.PassGraphs`).

The column layout is :class:`~formcast.decode.kvcache.RowCache`'s: columns are shared by
all slots, a pass appends the same columns to every slot (at ``used``), the attention
mask says which columns each row sees and position ids number each row's own tokens.
What differs is how rows come and go, without changing any address:

* rows that end are replaced by the last rows (their slots' KV copied, one row each), so
  the running rows stay the first slots and only the rows that move are copied;
* a joining row, prefilled apart, is copied into the next free slot, its visible columns
  ending at ``used`` (right-aligned, as :meth:`RowCache.append` does);
* when a pass would run past the width, or a joining row needs more columns than
  ``used``, the slots are repacked (each slot's visible columns moved together, one copy
  of the cache); the buffers are reallocated twice as wide only when the longest row
  does not fit (the graphs are then captured again).

A pass does not go through transformers' mask code: :meth:`SlotCache.run` builds the
4-D additive attention bias itself from the mask buffer and ``used`` (device tensors), so
nothing in a pass reads a value back to the host. Slots past the running rows in a
bucket compute ignored logits; their masks may hide every column, which the additive
bias (the dtype's minimum, not ``-inf``) keeps finite.

Cost: the buffers hold ``slots * width`` columns from the start, whatever the rows use:
``layers * 2 * kv_heads * head_dim`` numbers per column (about 23 KB on the default
model in bfloat16). :func:`fitting_slots` sizes them from the device's free memory.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

from formcast.decode.forward import call_model
from formcast.decode.kvcache import RowCache, new_block, upload
from formcast.errors import InvalidOptionError

__all__ = [
    "PassRunner",
    "SlotCache",
    "SlotLayer",
    "bucket",
    "check_slot_model",
    "fitting_slots",
    "static_width",
]

#: The narrowest buffers; wider ones double it (few distinct shapes, few graphs).
MIN_WIDTH = 256
#: Of the device's free memory, the share the slot buffers may take (the rest is for
#: activations, logits and the graphs' memory pool).
MEMORY_SHARE = 0.8


def static_width(columns: int) -> int:
    """The buffer width for rows of up to ``columns`` columns: half as much again, for
    the hidden columns that accumulate between repacks, rounded up to a power of two
    times :data:`MIN_WIDTH`."""
    wanted = columns + columns // 2
    width = MIN_WIDTH
    while width < wanted:
        width *= 2
    return width


def bucket(rows: int, slots: int) -> int:
    """The slots a pass over ``rows`` rows runs on: the next power of two, at most
    ``slots``."""
    size = 1
    while size < rows:
        size *= 2
    return min(size, slots)


def check_slot_model(config: Any) -> str | None:
    """Why a model cannot decode from fixed slots (None when it can): every layer must
    attend to every column (no sliding window, no recurrent state), and the config must
    give the KV shape."""
    layer_types = getattr(config, "layer_types", None)
    if layer_types:
        other = sorted({t for t in layer_types if t != "full_attention"})
        if other:
            return f"its layers include {', '.join(other)}, not only full attention"
    window = getattr(config, "sliding_window", None)
    if window and getattr(config, "use_sliding_window", True):
        return f"it attends through a sliding window of {window} tokens"
    for name in ("num_hidden_layers", "num_attention_heads", "hidden_size"):
        if not isinstance(getattr(config, name, None), int):
            return f"its config has no {name}"
    return None


class SlotLayer(DynamicLayer):  # type: ignore[no-untyped-call]
    """One layer's keys and values in fixed buffers (or views of them); a pass writes
    its new columns at the device tensor ``columns`` and attends over the whole width."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, columns: torch.Tensor) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.buffers = (keys, values)
        self.keys, self.values, self.columns = keys, values, columns
        self.dtype, self.device = keys.dtype, keys.device
        self.is_initialized = True

    def lazy_initialization(self, *args: Any, **kwargs: Any) -> None:
        return None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = self.buffers
        keys.index_copy_(2, self.columns, key_states)
        values.index_copy_(2, self.columns, value_states)
        return keys, values

    def get_seq_length(self, *args: Any) -> int:
        return int(self.buffers[0].shape[2])

    def get_max_cache_shape(self) -> int:
        return int(self.buffers[0].shape[2])

    def get_mask_sizes(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        return int(self.buffers[0].shape[2]), 0


def kv_shape(config: Any) -> tuple[int, int, int]:
    """``(layers, kv_heads, head_dim)`` of a model's KV cache, from its config."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return int(config.num_hidden_layers), int(heads), int(head_dim)


def column_bytes(config: Any, dtype: torch.dtype) -> int:
    """Bytes of one column of one row: keys and values of every layer."""
    layers, heads, head_dim = kv_shape(config)
    return layers * 2 * heads * head_dim * torch.empty((), dtype=dtype).element_size()


def device_free_memory(device: torch.device) -> int | None:
    """Free bytes on ``device`` (CUDA only; None where the device does not say)."""
    if device.type != "cuda":
        return None
    return int(torch.cuda.mem_get_info(device)[0])


def fitting_slots(model: Any, slots: int, width: int) -> int:
    """``slots``, or fewer when :data:`MEMORY_SHARE` of the device's free memory holds
    fewer rows of ``width`` columns (where the device says how much is free).

    Raises:
        InvalidOptionError: not even one row of ``width`` columns fits.
    """
    parameter = next(model.parameters())
    free = device_free_memory(parameter.device)
    if free is None:
        return slots
    per_row = width * column_bytes(model.config, parameter.dtype)
    fit = int(free * MEMORY_SHARE) // per_row
    if fit < 1:
        raise InvalidOptionError(
            f"expected one row of {width} KV columns ({per_row / 2**20:.1f} MiB) to fit in "
            f"{MEMORY_SHARE:.0%} of the device's free memory ({free / 2**20:.1f} MiB), "
            "found less; use a shorter prompt or max_new_tokens, or free device memory"
        )
    if fit < slots:
        warnings.warn(
            f"formcast keeps {fit} rows at once instead of {slots}: {slots} rows of {width} "
            f"KV columns need {slots * per_row / 2**30:.2f} GiB, more than "
            f"{MEMORY_SHARE:.0%} of the device's free memory ({free / 2**30:.2f} GiB)",
            RuntimeWarning,
            stacklevel=3,
        )
    return min(slots, fit)


class SlotCache:
    """The running rows of a decoder in fixed buffers.

    Args:
        model: the model: its config gives the layers, KV heads and head size, its
            parameters the dtype and device of the buffers.
        slots: rows the buffers hold (see :func:`fitting_slots`).
        width: columns of the buffers (see :func:`static_width`).

    The methods mirror :class:`RowCache`'s, so the decoder drives both the same way,
    except that :meth:`feed` gives only the position ids, which :meth:`run` takes in
    place of the model call of a pass.
    """

    def __init__(self, model: Any, slots: int, width: int) -> None:
        self.model = model
        self.slots = slots
        parameter = next(model.parameters())
        self.device, self.dtype = parameter.device, parameter.dtype
        self.kv_shape = kv_shape(model.config)
        self.visible: list[int] = []
        self.used = 0
        #: Called with no argument whenever the buffers are reallocated (graphs over the
        #: old ones must be dropped).
        self.on_reallocate: Callable[[], None] | None = None
        self._allocate(width)

    def reset(self) -> None:
        """No rows (the buffers are kept, their contents hidden)."""
        self.attention.zero_()
        self.visible, self.used = [], 0

    # -- the decoder's side (as RowCache) -------------------------------------------------
    @property
    def rows(self) -> int:
        return len(self.visible)

    @property
    def width(self) -> int:
        """The fixed width of the buffers (every pass attends over all of it)."""
        return int(self.attention.shape[1])

    def waste(self) -> int:
        return 0  # hidden columns cost nothing until the width runs out (see feed)

    def compact(self) -> None:
        self._repack(max(self.visible, default=0))

    def feed(self, lengths: Sequence[int]) -> torch.Tensor:
        """Columns ``used .. used + w`` for a pass feeding ``lengths[i]`` tokens to row
        ``i`` (``w`` the longest, left-padded): marks them in the mask and returns the
        host ``[rows, w]`` position ids for :meth:`run`."""
        new = max(lengths)
        if self.used + new > self.width:
            self._make_room(new)
        seen, positions = new_block(self.visible, lengths)
        self.visible = [v + count for v, count in zip(self.visible, lengths, strict=True)]
        columns = torch.from_numpy(seen)
        self.attention[: self.rows, self.used : self.used + new] = upload(columns, self.device)
        return torch.from_numpy(positions)

    def run(
        self, input_ids: torch.Tensor, positions: torch.Tensor, runner: PassRunner
    ) -> torch.Tensor:
        """The pass :meth:`feed` prepared: ``[rows, w]`` host ids and positions in, the
        rows' last logits out (``[rows, vocab]``, on the device). ``runner`` runs the
        pass of a ``(bucket, w)`` shape (a captured graph, or the eager pass)."""
        rows, new = input_ids.shape
        size = bucket(rows, self.slots)
        ids, where = self.inputs(size, new)
        ids[:rows].copy_(upload(input_ids, self.device))
        where[:rows].copy_(upload(positions, self.device))
        self.write_from.fill_(self.used)
        logits = runner(self, size, new)
        self.used += new
        return logits[:rows]

    def inputs(self, size: int, new: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed input buffers (ids, positions) of passes of ``size`` rows feeding
        ``new`` tokens each (created on first use)."""
        key = (size, new)
        found = self._inputs.get(key)
        if found is None:
            found = (
                torch.zeros((size, new), dtype=torch.long, device=self.device),
                torch.zeros((size, new), dtype=torch.long, device=self.device),
            )
            self._inputs[key] = found
        return found

    def forward(self, size: int, new: int, model: Any = None) -> torch.Tensor:
        """One pass over the first ``size`` slots from the fixed buffers, with nothing
        read back to the host: what a graph captures. Returns ``[size, vocab]`` logits.
        ``model`` replaces the cache's model (a compiled one) when given."""
        ids, positions = self.inputs(size, new)
        write = self._write_columns[:new]
        torch.add(self._column_numbers[:new], self.write_from, out=write)
        seen = self.attention[:size, None, :] & (
            self._column_numbers[None, None, :] <= write[None, :, None]
        )
        bias = torch.zeros(seen.shape, dtype=self.dtype, device=self.device)
        bias.masked_fill_(~seen, torch.finfo(self.dtype).min)
        out = call_model(
            model if model is not None else self.model,
            self.cache_of(size, write),
            input_ids=ids,
            position_ids=positions,
            attention_mask=bias[:, None],
        )
        return out.logits[:, -1, :]  # type: ignore[no-any-return]

    def cache_of(self, size: int, write: torch.Tensor) -> Any:
        """A transformers ``Cache`` over the first ``size`` slots (views of the buffers)
        writing at ``write``; made once per shape."""
        key = (size, int(write.shape[0]))
        found = self._caches.get(key)
        if found is None:
            layers: list[Any] = [
                SlotLayer(keys[:size], values[:size], write) for keys, values in self.buffers
            ]
            found = Cache(layers=layers)
            self._caches[key] = found
        return found

    def append(self, other: RowCache) -> None:
        """Copy ``other``'s rows (prefilled apart) into the next slots; each row's
        visible columns end at ``used``."""
        if other.rows > self.slots - self.rows:
            raise RuntimeError(
                f"expected at most {self.slots - self.rows} joining rows, found {other.rows}"
            )
        longest = max(other.visible)
        if longest > self.used:
            self._make_room(longest - self.used, joining=longest)
        order = torch.sort(other.attention, dim=1, stable=True)  # hidden columns first
        for r in range(other.rows):
            slot, count = self.rows, other.visible[r]
            source = order.indices[r, other.width - count :]
            start = self.used - count
            for (keys, values), extra in zip(self.buffers, _kv_layers(other), strict=True):
                more_keys, more_values = extra.kv()
                keys[slot, :, start : self.used] = more_keys[r, :, source]
                values[slot, :, start : self.used] = more_values[r, :, source]
            self.attention[slot] = False
            self.attention[slot, start : self.used] = True
            self.visible.append(count)

    def keep_rows(self, keep: Sequence[int]) -> None:
        """Keep only the rows ``keep``, in that order: row ``keep[j]`` moves to slot
        ``j``. Only the rows that change slot are copied (the decoder fills the places
        of ended rows from the end, so at most one copy per ended row)."""
        moved = [(j, old) for j, old in enumerate(keep) if j != old]
        if moved:
            target = upload(torch.tensor([j for j, _ in moved]), self.device)
            source = upload(torch.tensor([old for _, old in moved]), self.device)
            for keys, values in self.buffers:
                keys.index_copy_(0, target, keys.index_select(0, source))
                values.index_copy_(0, target, values.index_select(0, source))
            self.attention.index_copy_(0, target, self.attention.index_select(0, source))
        self.visible = [self.visible[i] for i in keep]

    def hide_from(self, row: int, position: int) -> None:
        """Hide row ``row``'s tokens at positions ``position`` and later."""
        mask = self.attention[row].long()
        seen_before = torch.cumsum(mask, dim=0) - mask
        self.attention[row] &= seen_before < position
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
        """Move each running row's visible columns together, ending at column ``target``."""
        rows = self.rows
        if rows:
            order = torch.sort(self.attention[:rows].to(torch.uint8), dim=1, stable=True)
            index = order.indices[:, self.width - target :]
            for keys, values in self.buffers:
                gather = index[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
                keys[:rows, :, :target] = keys[:rows].gather(2, gather)
                values[:rows, :, :target] = values[:rows].gather(2, gather)
            kept = order.values[:, self.width - target :].bool()
            self.attention[:rows] = False
            self.attention[:rows, :target] = kept
        self.used = target

    def _widen(self, width: int) -> None:
        old_buffers, old_attention = self.buffers, self.attention
        self._allocate(width)  # both generations live until the copy is done
        for (keys, values), (old_keys, old_values) in zip(self.buffers, old_buffers, strict=True):
            keys[:, :, : old_keys.shape[2]] = old_keys
            values[:, :, : old_values.shape[2]] = old_values
        self.attention[:, : old_attention.shape[1]] = old_attention

    def _allocate(self, width: int) -> None:
        """New zeroed buffers of ``width`` columns; every shape-keyed object is dropped."""
        layers, heads, head_dim = self.kv_shape
        shape = (self.slots, heads, width, head_dim)
        self.buffers: list[tuple[torch.Tensor, torch.Tensor]] = []  # the old ones go first
        self.buffers = [
            (
                torch.zeros(shape, dtype=self.dtype, device=self.device),
                torch.zeros(shape, dtype=self.dtype, device=self.device),
            )
            for _ in range(layers)
        ]
        self.attention = torch.zeros((self.slots, width), dtype=torch.bool, device=self.device)
        self.write_from = torch.zeros((), dtype=torch.long, device=self.device)
        self._column_numbers = torch.arange(width, device=self.device)
        self._write_columns = torch.zeros(width, dtype=torch.long, device=self.device)
        self._caches: dict[tuple[int, int], Any] = {}
        self._inputs: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
        if self.on_reallocate is not None:
            self.on_reallocate()


#: Runs the pass of one shape over a slot cache: ``runner(cache, size, new)``.
PassRunner = Callable[[SlotCache, int, int], torch.Tensor]


def _kv_layers(rows: RowCache) -> list[Any]:
    return [layer for layer in rows.cache.layers if layer.is_initialized]
