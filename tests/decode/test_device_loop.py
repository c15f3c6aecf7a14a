"""The decoding loop's contract with an asynchronous device, checked on the CPU.

On a GPU a kernel launch returns at once and the host only waits when it reads a
device value. So that the host's constraint work (first visits of automaton states,
masks, loop-guard and steering bans) runs while the device computes, the loop must

* launch a step's forward passes before that work;
* read nothing from the device but the chosen token ids, once per step;
* copy a state's mask to the device once: a state seen before costs no upload.

:class:`_Recorder` watches a real attention stack (the tiny random Llama) for this: it
logs each forward pass, each first visit of an index state and each mask built, and,
through a ``TorchFunctionMode``, every tensor call outside the model that would wait for
a GPU (``tolist``, ``item``, ``bool(tensor)``...). The model's own internals are not
watched: what transformers does inside a forward pass is not the loop's to change.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

from formcast.automaton import LazyAutomaton
from formcast.decode import batching as batching_module
from formcast.decode import masks as masks_module
from formcast.decode import slotcache as slotcache_module
from formcast.decode.batching import BatchDecoder, RowRequest
from formcast.decode.logits import FieldSteering, ForcedTokenizer, LoopGuard, SamplingOptions
from formcast.index import TokenIndex
from formcast.vocabulary import Vocabulary

JSON_STRING = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
EVENT = r'\{"date":' + JSON_STRING + r',"city":' + JSON_STRING + r',"n":(0|[1-9][0-9]{0,5})\}'
TEXTS = ["ACME, 12 May", "a longer text with several more tokens in it", "x", "mid size", "y z"]

#: Tensor methods that make the host wait for the device when the tensor lives there.
SYNCHRONISING = frozenset(
    {"tolist", "item", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__"}
)


class _Recorder(TorchFunctionMode):
    """The ordered events of a decoding run (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self.in_model = False

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if not self.in_model and name in SYNCHRONISING:
            self.events.append(f"sync:{name}")
        return func(*args, **(kwargs or {}))

    def step_marker(self) -> None:
        self.events.append("step")

    def steps(self) -> list[list[str]]:
        """The events of each :meth:`BatchDecoder.step`."""
        out: list[list[str]] = []
        for event in self.events:
            if event == "step":
                out.append([])
            elif out:
                out[-1].append(event)
        return out


class _WatchedModel(torch.nn.Module):
    def __init__(self, model: Any, recorder: _Recorder) -> None:
        super().__init__()
        self.inner = model
        self.config = model.config
        self.recorder = recorder

    def forward(self, **inputs: Any) -> Any:
        self.recorder.events.append("forward")
        self.recorder.in_model = True
        try:
            return self.inner(**inputs)
        finally:
            self.recorder.in_model = False


@contextmanager
def _watching(
    monkeypatch: pytest.MonkeyPatch, model: Any
) -> Iterator[tuple[_Recorder, _WatchedModel]]:
    recorder = _Recorder()
    walk = TokenIndex._walk_vocabulary
    build_mask = batching_module.allowed_mask

    def first_visit(index: TokenIndex, state: int) -> Any:
        recorder.events.append("first-visit")
        return walk(index, state)

    def mask(*args: Any) -> torch.Tensor:
        recorder.events.append("mask")
        return build_mask(*args)

    monkeypatch.setattr(TokenIndex, "_walk_vocabulary", first_visit)
    monkeypatch.setattr(batching_module, "allowed_mask", mask)
    with recorder:
        yield recorder, _WatchedModel(model, recorder)


def _second_value_rejected(key: str, value: str) -> bool:
    return key != "city"  # every city is written twice: a rollback per row


def _run(decoder: BatchDecoder, requests: list[RowRequest], recorder: _Recorder) -> int:
    """Decode every request, marking each step; the number of steps."""
    pending = list(requests)
    steps = 0
    while pending or decoder.busy:
        while pending and decoder.free_slots:
            decoder.add(pending.pop(0))
        recorder.step_marker()
        decoder.step()
        steps += 1
    return steps


@pytest.mark.parametrize(("temperature", "compile"), [(0.0, False), (1.0, False), (0.0, True)])
def test_each_step_launches_first_and_waits_once(
    temperature: float,
    compile: bool,
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
) -> None:
    """Rows joining and leaving, jump-forward, the loop guard, rollbacks, compactions
    (forced at every step) and sampling, over the growing cache and over the slot cache
    of ``compile=True`` (its compiled function replaced by the model itself): every step
    that runs the model launches its passes before any mask work and reads the device
    once, after all of it."""
    monkeypatch.setattr(batching_module, "compiled", lambda model: model)
    monkeypatch.setattr(batching_module, "COMPACT_MIN_COLUMNS", 0)
    monkeypatch.setattr(batching_module, "COMPACT_SHARE", 0.0)
    index = TokenIndex(LazyAutomaton(EVENT), vocabulary)
    prompts = [list(tokenizer.encode(f"Text: {t} >>", add_special_tokens=False)) for t in TEXTS]
    steering = FieldSteering(_second_value_rejected, max_retries=1)
    with _watching(monkeypatch, tiny_model) as (recorder, model):
        decoder = BatchDecoder(
            model,
            capacity=2,
            max_new_tokens=30,
            forced_tokenizer=ForcedTokenizer(tokenizer, vocabulary),
            sampling=SamplingOptions(temperature=temperature),
            loop_guard=LoopGuard(),
            compile=compile,
        )
        requests = [
            RowRequest(i, p, index.cursor(), steering, seed=i) for i, p in enumerate(prompts)
        ]
        _run(decoder, requests, recorder)
    ran = [events for events in recorder.steps() if "forward" in events]
    assert len(ran) > len(TEXTS)
    for events in ran:
        launch = events.index("forward")
        assert "mask" not in events[:launch] and "first-visit" not in events[:launch]
        syncs = [i for i, e in enumerate(events) if e.startswith("sync:")]
        assert [events[i] for i in syncs] == ["sync:tolist"]
        last_forward = max(i for i, e in enumerate(events) if e == "forward")
        last_mask = max(i for i, e in enumerate(events) if e == "mask")
        assert last_forward < syncs[0] and last_mask < syncs[0]
    assert any(e == "first-visit" for events in ran for e in events)


@pytest.mark.parametrize("budget", [40, 30])
def test_a_state_seen_before_costs_no_upload(
    budget: int,
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
) -> None:
    """A second run over the same states copies no mask to the device, also when the
    budget cuts the rows (``budget=30``: the budget-safe masks near the end)."""
    uploads: list[tuple[int, ...]] = []
    upload = masks_module.upload

    def counted(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        uploads.append(tuple(tensor.shape))
        return upload(tensor, device)

    monkeypatch.setattr(masks_module, "upload", counted)
    index = TokenIndex(LazyAutomaton(EVENT), vocabulary)
    prompts = [list(tokenizer.encode(f"Text: {t} >>", add_special_tokens=False)) for t in TEXTS[:3]]

    def run() -> list[str]:
        decoder = BatchDecoder(tiny_model, capacity=3, max_new_tokens=budget)
        requests = [RowRequest(i, p, index.cursor()) for i, p in enumerate(prompts)]
        finished = {done.key: done.generation for done in decoder.run(requests)}
        return [finished[i].text for i in range(len(prompts))]

    first = run()
    assert uploads, "the first run uploads the masks of the states it visits"
    assert all(shape == (tiny_model.config.vocab_size,) for shape in uploads)
    uploads.clear()
    assert run() == first
    assert uploads == []
    if budget == 30:
        assert any(g.endswith("}") for g in first)


def test_a_cached_mask_is_the_same_device_tensor(vocabulary: Vocabulary) -> None:
    index = TokenIndex(LazyAutomaton(EVENT), vocabulary)
    cursor = index.cursor()
    device = torch.device("cpu")
    first = masks_module.allowed_mask(cursor, 49_216, device, None)
    assert masks_module.allowed_mask(cursor, 49_216, device, None) is first
    assert masks_module.allowed_mask(cursor, 49_216, device, 200) is first  # budget binds not
    wider = masks_module.allowed_mask(cursor, 49_280, device, None)
    assert wider.shape == (49_280,) and not bool(wider[49_216:].any())


# ------------------------------------------------------------------ the static slot cache


@pytest.mark.parametrize("capacity", [2, 3])
def test_slot_cache_decodes_as_the_growing_cache(
    capacity: int,
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
) -> None:
    """``compile=True`` keeps the rows in a SlotCache: the same outputs as the growing
    cache, through joins, rollbacks, repacks and a widening (a small minimum width
    forces them), and every compiled pass has the same shape. The compiled function is replaced
    by a recorder (tracing takes minutes on a CPU); the shapes it sees are what a
    compiled graph would be traced for."""
    monkeypatch.setattr(slotcache_module, "MIN_WIDTH", 8)
    shapes: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def recording(model: Any) -> Any:
        def run(**inputs: Any) -> Any:
            shapes.append((tuple(inputs["input_ids"].shape), tuple(inputs["attention_mask"].shape)))
            return model(**inputs)

        return run

    monkeypatch.setattr(batching_module, "compiled", recording)
    index = TokenIndex(LazyAutomaton(EVENT), vocabulary)
    texts = [*TEXTS, "the longest text of all, which joins last, " * 16]
    prompts = [list(tokenizer.encode(f"Text: {t} >>", add_special_tokens=False)) for t in texts]
    steering = FieldSteering(_second_value_rejected, max_retries=1)

    def run(compile: bool) -> list[tuple[str, int]]:
        decoder = BatchDecoder(
            tiny_model,
            capacity=capacity,
            max_new_tokens=30,
            forced_tokenizer=ForcedTokenizer(tokenizer, vocabulary),
            loop_guard=LoopGuard(),
            compile=compile,
        )
        requests = [RowRequest(i, p, index.cursor(), steering) for i, p in enumerate(prompts)]
        finished = {done.key: done.generation for done in decoder.run(requests)}
        return [(finished[i].text, finished[i].rollbacks) for i in range(len(prompts))]

    growing = run(compile=False)
    assert shapes == []
    widened = []
    original = slotcache_module.SlotCache._widen

    def widen(cache: Any, width: int) -> None:
        widened.append(width)
        original(cache, width)

    monkeypatch.setattr(slotcache_module.SlotCache, "_widen", widen)
    assert run(compile=True) == growing
    assert any(rollbacks for _, rollbacks in growing)
    assert shapes and {ids for ids, _ in shapes} == {(capacity, 1)}
    assert len({mask for _, mask in shapes}) == len(widened) + 1
    assert widened, "the last, longest prompt does not fit the first width"


def test_slot_cache_refuses_sliding_window_layers() -> None:
    """A sliding-window layer keeps only its last columns, not the shared layout."""
    from transformers import MistralConfig

    from formcast.decode.kvcache import RowCache
    from formcast.errors import InvalidOptionError

    config = MistralConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        sliding_window=16,
    )
    rows = RowCache.empty_rows(1, torch.device("cpu"))
    keys = torch.zeros((1, 2, 3, 8))
    for layer in range(2):
        rows.cache.update(keys, keys, layer)
    with pytest.raises(InvalidOptionError, match="layer 0 with a StaticSlidingWindowLayer"):
        slotcache_module.SlotCache(config, 2, 64, rows)
