"""How the passes over fixed slots run: CUDA graphs, ``torch.compile`` or eagerly.

A :class:`SlotEngine` belongs to one model and outlives the decoders that use it (an
:class:`~formcast.extraction.extractor.Extractor` keeps one), so the slot buffers and the
captured graphs are made once, not per call. It hands each decoder a
:class:`~formcast.decode.slotcache.SlotCache` (reset, or reallocated when the decoder
needs more slots or columns) and runs that cache's passes:

* ``"graphs"`` (the default on CUDA): the pass of each shape (rows bucket, tokens fed per
  row) is captured once as a CUDA graph and replayed at every later pass of that shape.
  A pass of a small model is mostly kernel launches; a replay launches them all at once.
  Capture costs about one pass plus a warm-up pass per shape (~0.1 s), paid on the first
  pass of that shape. Passes feeding more than :data:`MAX_GRAPH_TOKENS` tokens per row
  (long forced runs) run eagerly. If a capture fails (a model whose forward reads a value
  back, or an op CUDA graphs refuse), a warning says why and every pass runs eagerly.
* ``"compile"``: each pass goes through ``torch.compile(model, dynamic=False)``
  (``mode="reduce-overhead"`` on CUDA); the first pass of each shape compiles (tens of
  seconds).
* ``"eager"``: the same passes, run as they are: the CPU's check of the slot path.

The slots serve one decoder at a time: a decoder takes them when it starts with no row
in its cache, and another decoder may take them over once none of the holder's rows is
in them; a decoder that starts meanwhile (a second call running beside the first) gets
None and grows its own cache. The extractor's lock keeps passes one at a time.
"""

from __future__ import annotations

import time
import warnings
import weakref
from typing import Any, Literal

import torch

from formcast.decode.masks import model_device
from formcast.decode.slotcache import SlotCache, check_slot_model, fitting_slots, static_width

__all__ = ["MAX_GRAPH_TOKENS", "EngineMode", "SlotEngine", "compiled", "slot_mode"]

#: Passes feeding at most this many tokens per row are captured; longer ones run eagerly.
MAX_GRAPH_TOKENS = 8

EngineMode = Literal["graphs", "compile", "eager"]


def slot_mode(model: Any, compile: bool | None) -> EngineMode | None:
    """How a model's passes run for an extractor's ``compile`` option: None for the
    growing cache (``compile=False``, or the default on a CPU), ``"compile"`` for
    ``compile=True``, ``"graphs"`` by default on CUDA. A model whose layers cannot use
    fixed slots gets the growing cache, with a warning saying why."""
    device = model_device(model)
    if compile is False or (compile is None and device.type != "cuda"):
        return None
    reason = check_slot_model(model.config)
    if reason is not None:
        warnings.warn(
            f"formcast decodes this model without fixed slots or CUDA graphs: {reason}",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return "compile" if compile else "graphs"


class SlotEngine:
    """The slot cache of one model and the runner of its passes.

    Attributes:
        passes: decoding passes run so far (prefills, which run apart, not counted).
        captures: graphs captured so far; ``capture_seconds`` their total time.
        fallback: why passes run eagerly after a failed capture (None while graphs work).
    """

    def __init__(self, model: Any, mode: EngineMode) -> None:
        self.model = model
        self.mode: EngineMode = mode
        self.cache: SlotCache | None = None
        self.passes = 0
        self.captures = 0
        self.capture_seconds = 0.0
        self.fallback: str | None = None
        self._graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self._pool: Any = None
        self._holder: weakref.ref[Any] | None = None  # the decoder the slots serve

    def slots(self, capacity: int, columns: int, holder: Any = None) -> SlotCache | None:
        """An empty slot cache of at least ``capacity`` slots (fewer when the device's
        memory holds fewer: see :func:`~formcast.decode.slotcache.fitting_slots`) and
        room for rows of ``columns`` columns, for ``holder``; the last one, reset, when it
        is big enough. None while another holder has rows in them (its ``holds_rows``).

        Raises:
            InvalidOptionError: not even one row of that width fits in memory.
        """
        current = None if self._holder is None else self._holder()
        if current is not None and current is not holder and current.holds_rows:
            return None
        self._holder = None if holder is None else weakref.ref(holder)
        width = static_width(columns)
        cache = self.cache
        if cache is not None and cache.slots >= capacity and cache.width >= width:
            cache.reset()
            return cache
        self.cache = None  # let the old buffers go before the new ones are allocated
        self._drop_graphs()
        slots = fitting_slots(self.model, capacity, width)
        self.cache = SlotCache(self.model, slots, width)
        self.cache.on_reallocate = self._drop_graphs
        return self.cache

    def serves(self, holder: Any) -> bool:
        """Whether the slots are ``holder``'s (the last :meth:`slots` was its)."""
        return self._holder is not None and self._holder() is holder

    def __call__(self, cache: SlotCache, size: int, new: int) -> torch.Tensor:
        """Run the pass ``cache`` prepared over its first ``size`` slots, ``new`` tokens
        per row: ``[size, vocab]`` logits on the device (valid until the next pass)."""
        self.passes += 1
        if self.mode == "compile":
            return cache.forward(size, new, model=compiled(self.model))
        if self.mode == "graphs" and self.fallback is None and new <= MAX_GRAPH_TOKENS:
            return self._replay(cache, size, new)
        return cache.forward(size, new)

    def _replay(self, cache: SlotCache, size: int, new: int) -> torch.Tensor:
        found = self._graphs.get((size, new))
        if found is None:
            try:
                found = self._capture(cache, size, new)
            except Exception as error:  # any capture failure means eager passes
                self.fallback = f"{type(error).__name__}: {error}"
                warnings.warn(
                    "formcast runs this model's decoding passes without CUDA graphs: "
                    f"capturing a pass failed ({self.fallback})",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return cache.forward(size, new)
            self._graphs[(size, new)] = found
        graph, logits = found
        graph.replay()
        return logits

    def _capture(
        self, cache: SlotCache, size: int, new: int
    ) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        """Capture the pass of one shape. The warm-up pass outside the graph computes the
        same pass from the same inputs (it writes the same keys and values), so the
        capture's replay repeats it exactly."""
        started = time.perf_counter()
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            cache.forward(size, new)  # kernel choice and workspaces, outside the graph
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            logits = cache.forward(size, new)
        self.captures += 1
        self.capture_seconds += time.perf_counter() - started
        return graph, logits

    def _drop_graphs(self) -> None:
        self._graphs.clear()


_compiled: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def compiled(model: Any) -> Any:
    """``torch.compile(model, dynamic=False)`` (``mode="reduce-overhead"`` on a GPU),
    made once per model and kept while the model lives, so every decoder over it shares
    the compiled code. Cost: the first pass of each shape compiles (a minute or more on a
    CPU, tens of seconds on a GPU)."""
    found = _compiled.get(model)
    if found is None:
        mode = "reduce-overhead" if model_device(model).type == "cuda" else None
        found = torch.compile(model, dynamic=False, mode=mode)
        _compiled[model] = found
    return found
