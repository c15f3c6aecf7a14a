"""How formcast calls a transformers model: the cache keyword, the attention kernels.

Two things every forward pass of the decoder shares:

* **The cache keyword.** transformers named the KV cache argument ``past_key_values``
  until 5.2x, which accepts ``cache`` and warns on every pass that the old name goes in
  5.40. :func:`cache_keyword` reads the model's ``forward`` signature once, so the same
  call works on the oldest and the newest transformers formcast supports.
* **The attention kernels.** PyTorch may run ``scaled_dot_product_attention`` through
  cuDNN when a pass carries an attention mask. cuDNN builds an execution plan for every
  new key length, and a decoding pass has a new key length at every step: on an H100 that
  made each attention call cost ~1.25 ms instead of a few microseconds, 2.5x the whole
  pass of the same model called without a mask. :func:`attention_kernels` leaves cuDNN
  out (flash, memory-efficient and math kernels remain), on CUDA only.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["attention_kernels", "cache_keyword", "call_model"]

_keywords: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def cache_keyword(model: Any) -> str:
    """``"cache"`` when the model's ``forward`` (or the model itself, a plain callable)
    takes it (newer transformers), else ``"past_key_values"``. Read once per model."""
    found = _keywords.get(model)
    if found is None:
        try:
            parameters = inspect.signature(getattr(model, "forward", model)).parameters
        except (TypeError, ValueError):  # a forward without a readable signature
            parameters = {}  # type: ignore[assignment]
        found = "cache" if "cache" in parameters else "past_key_values"
        with contextlib.suppress(TypeError):  # not weakly referenceable: read it again
            _keywords[model] = found
    return found


def _kernels_without_cudnn() -> list[Any]:
    from torch.nn.attention import SDPBackend

    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@contextlib.contextmanager
def attention_kernels(device: torch.device) -> Iterator[None]:
    """Run the passes inside without cuDNN attention on CUDA; no change elsewhere."""
    if device.type != "cuda":
        yield
        return
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(_kernels_without_cudnn()):
        yield


def call_model(model: Any, cache: Any, **inputs: Any) -> Any:
    """``model(**inputs)`` with ``cache`` under the model's own keyword, ``use_cache``
    on and only the last position's logits computed."""
    inputs[cache_keyword(model)] = cache
    return model(use_cache=True, logits_to_keep=1, **inputs)
