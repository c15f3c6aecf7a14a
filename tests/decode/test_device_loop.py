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
from formcast.decode.batching import BatchDecoder, RowRequest, fill_from_end
from formcast.decode.engine import SlotEngine, slot_mode
from formcast.decode.forward import cache_keyword
from formcast.decode.logits import FieldSteering, ForcedTokenizer, LoopGuard, SamplingOptions
from formcast.errors import InvalidOptionError
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
        inputs[cache_keyword(self.inner)] = inputs.pop("past_key_values")
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
    build_mask = batching_module.allowed_mask

    def recorded(first_visit: Any) -> Any:
        def recording(index: TokenIndex, state: int) -> Any:
            recorder.events.append("first-visit")
            return first_visit(index, state)

        return recording

    def mask(*args: Any) -> torch.Tensor:
        recorder.events.append("mask")
        return build_mask(*args)

    # a row's first computation takes one of these ways (see TokenIndex._row)
    for way in ("_visited", "_walk_vocabulary"):
        monkeypatch.setattr(TokenIndex, way, recorded(getattr(TokenIndex, way)))
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


@pytest.mark.parametrize(("temperature", "slots"), [(0.0, False), (1.0, False), (0.0, True)])
def test_each_step_launches_first_and_waits_once(
    temperature: float,
    slots: bool,
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
) -> None:
    """Rows joining and leaving, jump-forward, the loop guard, rollbacks, compactions
    (forced at every step), chunked prefills and sampling, over the growing cache and
    over fixed slots (their passes run eagerly, as a graph replays them): every step that
    runs the model launches its passes before any mask work and reads the device once,
    after all of it."""
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
            engine=SlotEngine(model, "eager") if slots else None,
            prefill_tokens=8,
        )
        requests = [
            RowRequest(i, p, index.cursor(), steering, seed=i) for i, p in enumerate(prompts)
        ]
        _run(decoder, requests, recorder)
    ran = [events for events in recorder.steps() if "forward" in events and "mask" in events]
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


def _decode_all(
    model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
    capacity: int,
    engine: SlotEngine | None = None,
    prefill_tokens: int | None = None,
    join_rows: int = 1,
) -> list[tuple[str, int]]:
    """Every text of :data:`TEXTS` and a long one that joins last, greedy, with
    jump-forward, the loop guard and a rollback per row: ``(text, rollbacks)`` per row."""
    index = TokenIndex(LazyAutomaton(EVENT), vocabulary)
    texts = [*TEXTS, "the longest text of all, which joins last, " * 16]
    prompts = [list(tokenizer.encode(f"Text: {t} >>", add_special_tokens=False)) for t in texts]
    steering = FieldSteering(_second_value_rejected, max_retries=1)
    decoder = BatchDecoder(
        model,
        capacity=capacity,
        max_new_tokens=30,
        forced_tokenizer=ForcedTokenizer(tokenizer, vocabulary),
        loop_guard=LoopGuard(),
        engine=engine,
        prefill_tokens=prefill_tokens,
        join_rows=join_rows,
    )
    requests = [RowRequest(i, p, index.cursor(), steering) for i, p in enumerate(prompts)]
    finished = {done.key: done.generation for done in decoder.run(requests)}
    return [(finished[i].text, finished[i].rollbacks) for i in range(len(prompts))]


@pytest.fixture(scope="module")
def growing_outputs(tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary) -> Any:
    """The greedy outputs of the growing cache, whole prompts prefilled, per capacity."""
    return {c: _decode_all(tiny_model, tokenizer, vocabulary, c) for c in (2, 3)}


@pytest.mark.parametrize("capacity", [2, 3])
def test_fixed_slots_decode_as_the_growing_cache(
    capacity: int,
    growing_outputs: Any,
    monkeypatch: pytest.MonkeyPatch,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
) -> None:
    """Fixed slots give the growing cache's outputs through joins, rows leaving (the
    last rows moved into their places), rollbacks, repacks and a widening (a small
    minimum width forces them), with few pass shapes: a power-of-two count of slots and
    one shape per count of tokens fed."""
    monkeypatch.setattr(slotcache_module, "MIN_WIDTH", 8)
    engine = SlotEngine(tiny_model, "eager")
    shapes: list[tuple[int, int]] = []
    forward = slotcache_module.SlotCache.forward

    def recording(cache: Any, size: int, new: int, model: Any = None) -> torch.Tensor:
        shapes.append((size, new))
        return forward(cache, size, new, model)

    widened: list[int] = []
    widen = slotcache_module.SlotCache._widen

    def widening(cache: Any, width: int) -> None:
        widened.append(width)
        widen(cache, width)

    monkeypatch.setattr(slotcache_module.SlotCache, "forward", recording)
    monkeypatch.setattr(slotcache_module.SlotCache, "_widen", widening)
    growing = growing_outputs[capacity]
    assert _decode_all(tiny_model, tokenizer, vocabulary, capacity, engine) == growing
    assert any(rollbacks for _, rollbacks in growing)
    assert widened, "the last, longest prompt does not fit the first width"
    assert {size for size, _ in shapes} <= {1, 2, capacity}
    assert (1, 1) in shapes or (2, 1) in shapes


@pytest.mark.parametrize("slots", [False, True])
def test_chunked_prefill_decodes_as_one_pass(
    slots: bool,
    growing_outputs: Any,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
) -> None:
    """Prompts prefilled a few tokens per step, while the running rows decode, give the
    outputs of whole-prompt prefills (the chunks lay out the columns as one pass)."""
    engine = SlotEngine(tiny_model, "eager") if slots else None
    chunked = _decode_all(tiny_model, tokenizer, vocabulary, 3, engine, prefill_tokens=5)
    assert chunked == growing_outputs[3]


def test_an_engine_reuses_its_slots_and_reallocates_for_more(
    tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """A second decoder over the same engine decodes in the same buffers (reset) when
    they hold its rows, and gets new ones when it wants more slots."""
    engine = SlotEngine(tiny_model, "eager")
    first = _decode_all(tiny_model, tokenizer, vocabulary, 2, engine)
    cache = engine.cache
    assert cache is not None and cache.slots == 2
    assert _decode_all(tiny_model, tokenizer, vocabulary, 2, engine) == first
    assert engine.cache is cache
    _decode_all(tiny_model, tokenizer, vocabulary, 3, engine)
    assert engine.cache is not cache and engine.cache is not None and engine.cache.slots == 3


def test_a_failed_capture_warns_and_decodes_eagerly(
    growing_outputs: Any,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
) -> None:
    """A model whose pass cannot be captured (here: no CUDA at all) decodes the same,
    eagerly, with one warning that says why."""
    engine = SlotEngine(tiny_model, "graphs")
    with pytest.warns(RuntimeWarning, match="without CUDA graphs: capturing a pass failed"):
        outputs = _decode_all(tiny_model, tokenizer, vocabulary, 2, engine)
    assert outputs == growing_outputs[2]
    assert engine.fallback is not None and engine.captures == 0


def test_rows_that_end_are_replaced_from_the_end() -> None:
    assert fill_from_end(5, [0, 1, 2, 3, 4]) == [0, 1, 2, 3, 4]
    assert fill_from_end(5, [0, 2, 3, 4]) == [0, 4, 2, 3]
    assert fill_from_end(5, [1, 3]) == [3, 1]
    assert fill_from_end(6, [0, 1, 5]) == [0, 1, 5]
    assert fill_from_end(3, []) == []


def test_the_slot_path_is_chosen_by_device_and_option(tiny_model: Any) -> None:
    """On the CPU the default is the growing cache; ``compile=True`` asks for fixed
    slots run through ``torch.compile``, ``compile=False`` for the growing cache."""
    assert slot_mode(tiny_model, None) is None
    assert slot_mode(tiny_model, False) is None
    assert slot_mode(tiny_model, True) == "compile"


def test_fixed_slots_refuse_sliding_window_layers() -> None:
    """A sliding-window layer keeps only its last columns, not the shared layout: such
    a model gets the growing cache, with a warning that names the reason."""
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        sliding_window=16,
    )
    model = MistralForCausalLM(config)
    assert slotcache_module.check_slot_model(config) is not None
    with pytest.warns(RuntimeWarning, match="sliding window of 16 tokens"):
        assert slot_mode(model, True) is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")
def test_graphs_decode_as_eager_passes_on_cuda(
    tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """On CUDA, captured passes give the eager slot passes' outputs (float32)."""
    import copy

    model = copy.deepcopy(tiny_model).cuda()
    eager = _decode_all(model, tokenizer, vocabulary, 3, SlotEngine(model, "eager"))
    engine = SlotEngine(model, "graphs")
    assert _decode_all(model, tokenizer, vocabulary, 3, engine) == eager
    assert engine.fallback is None and engine.captures > 0


def test_no_pass_uses_a_deprecated_cache_keyword(
    tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """The cache goes under the keyword the installed transformers names (``cache`` from
    5.2x, ``past_key_values`` before), so no pass warns that it is deprecated."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _decode_all(tiny_model, tokenizer, vocabulary, 2, SlotEngine(tiny_model, "eager"))
        _decode_all(tiny_model, tokenizer, vocabulary, 2)
    assert not [w for w in caught if "past_key_values" in str(w.message)]


def test_slots_are_sized_to_the_device_memory(
    monkeypatch: pytest.MonkeyPatch, tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """Where the device's free memory holds fewer rows than the batch size, fewer rows
    decode at once (with a warning) and the outputs stay the same; where not even one
    row fits, the error says how much one row needs."""
    per_row = 256 * slotcache_module.column_bytes(tiny_model.config, torch.float32)
    free = int(2.5 * per_row / slotcache_module.MEMORY_SHARE)  # two rows of 256 columns
    monkeypatch.setattr(slotcache_module, "device_free_memory", lambda device: free)
    engine = SlotEngine(tiny_model, "eager")
    with pytest.warns(RuntimeWarning, match="keeps 2 rows at once instead of 3"):
        outputs = _decode_all(tiny_model, tokenizer, vocabulary, 3, engine)
    assert engine.cache is not None and engine.cache.slots == 2
    assert outputs == _decode_all(tiny_model, tokenizer, vocabulary, 2)
    monkeypatch.setattr(slotcache_module, "device_free_memory", lambda device: per_row // 4)
    with pytest.raises(InvalidOptionError, match="expected one row of 256 KV columns"):
        _decode_all(tiny_model, tokenizer, vocabulary, 3, SlotEngine(tiny_model, "eager"))


# ------------------------------------------------------------- rows dropped, decoders side by side


@pytest.mark.parametrize("slots", [False, True])
def test_dropped_rows_leave_the_others_as_they_were(
    slots: bool, growing_outputs: Any, tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """Rows dropped while waiting, while their prompt is half prefilled and while running
    never come back, free their slots at once, and the other rows decode as if the
    dropped ones had never been there."""
    index = TokenIndex(LazyAutomaton(EVENT), vocabulary)
    prompts = [list(tokenizer.encode(f"Text: {t} >>", add_special_tokens=False)) for t in TEXTS]
    steering = FieldSteering(_second_value_rejected, max_retries=1)
    decoder = BatchDecoder(
        tiny_model,
        capacity=3,
        max_new_tokens=30,
        forced_tokenizer=ForcedTokenizer(tokenizer, vocabulary),
        loop_guard=LoopGuard(),
        engine=SlotEngine(tiny_model, "eager") if slots else None,
        prefill_tokens=6,
    )
    for key in (0, 1, "gone-waiting"):
        decoder.add(RowRequest(key, prompts[int(key == 1)], index.cursor(), steering))
    assert decoder.remove(lambda key: key == "gone-waiting") == 1 and decoder.free_slots == 1
    decoder.add(RowRequest("gone-prefilling", prompts[1], index.cursor(), steering))
    finished = {done.key: done.generation for done in decoder.step()}
    assert decoder.holds_rows and not finished  # a chunk of every prompt is in the cache
    assert decoder.remove(lambda key: key == "gone-prefilling") == 1
    while len(decoder._running) < 2:
        finished.update((done.key, done.generation) for done in decoder.step())
    decoder.add(RowRequest("gone-running", prompts[2], index.cursor(), steering))
    for _ in range(3):
        finished.update((done.key, done.generation) for done in decoder.step())
    assert decoder.remove(lambda key: key == "gone-running") == 1
    while decoder.busy:
        finished.update((done.key, done.generation) for done in decoder.step())
    assert set(finished) == {0, 1}
    expected = growing_outputs[2][:2]
    assert [(finished[k].text, finished[k].rollbacks) for k in (0, 1)] == expected


def test_two_decoders_share_one_engine_safely(
    growing_outputs: Any, tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """Decoders stepped in turn over one engine (two calls at once): the first takes the
    slots, the second grows its own cache, and both give the growing cache's outputs; once
    the first has no row in them, the second takes the slots over."""
    engine = SlotEngine(tiny_model, "eager")
    index = TokenIndex(LazyAutomaton(EVENT), vocabulary)
    prompts = [list(tokenizer.encode(f"Text: {t} >>", add_special_tokens=False)) for t in TEXTS]
    steering = FieldSteering(_second_value_rejected, max_retries=1)

    def decoder() -> BatchDecoder:
        return BatchDecoder(
            tiny_model,
            capacity=2,
            max_new_tokens=30,
            forced_tokenizer=ForcedTokenizer(tokenizer, vocabulary),
            loop_guard=LoopGuard(),
            engine=engine,
        )

    first, second = decoder(), decoder()
    runs = [
        first.run(RowRequest(i, p, index.cursor(), steering) for i, p in enumerate(prompts)),
        second.run(RowRequest(i, p, index.cursor(), steering) for i, p in enumerate(prompts)),
    ]
    outputs: list[dict[int, Any]] = [{}, {}]
    while runs:
        for k, run in enumerate(list(runs)):
            done = next(run, None)
            if done is None:
                runs.remove(run)
            else:
                outputs[k][done.key] = (done.generation.text, done.generation.rollbacks)
        if first.holds_rows:
            assert engine.serves(first) and not engine.serves(second)
    expected = growing_outputs[2][: len(TEXTS)]
    assert [[o[i] for i in range(len(TEXTS))] for o in outputs] == [expected, expected]
    third = decoder()
    third.add(RowRequest(0, prompts[0], index.cursor()))
    third.step()
    assert engine.serves(third)


def test_masks_sent_as_ids_or_packed_bits_are_the_cursor_masks(
    tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """The masks a GPU gets (built on the device from the allowed ids, or unpacked from
    the packed bitmask, whichever the host sends smaller) equal the cursor's own, with
    and without a budget, in accepting states (EOS) and for logits wider than the
    vocabulary: along an event's and a copied value's output, token by token."""
    from typing import Annotated

    from pydantic import BaseModel

    import formcast
    from formcast import FromText

    class Copied(BaseModel):
        name: Annotated[str, FromText()]
        qty: int

    event = TokenIndex(LazyAutomaton(EVENT), vocabulary).cursor()
    copied = formcast.compile(Copied, tokenizer).cursor(text="KEDAI Ali bolt x 3 nut x 2")
    outputs = [
        (event, '{"date":"12 May","city":"Perth \\"W\\"","n":450}'),
        (copied, '{"name":"Ali bolt","qty":3}'),
    ]
    seen = {"ids": 0, "bits": 0}
    cpu = torch.device("cpu")
    for cursor, output in outputs:
        for token in [*tokenizer.encode(output, add_special_tokens=False), None]:
            width = 49_216
            words = (width + 31) // 32
            for tokens_left in (None, 40, 3):
                expected = cursor.mask(width, tokens_left=tokens_left)
                built = masks_module.device_mask(cursor, width, cpu, tokens_left, packed=True)
                assert torch.equal(built, expected), (output, cursor.state, tokens_left)
                seen["ids" if int(expected.sum()) <= words else "bits"] += 1
            if token is not None:
                cursor.advance(token)
    assert cursor.is_accepting() and seen["ids"] and seen["bits"], seen


@pytest.mark.parametrize("slots", [False, True])
def test_rows_that_join_in_groups_decode_as_alone(
    slots: bool,
    monkeypatch: pytest.MonkeyPatch,
    growing_outputs: Any,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
) -> None:
    """With ``join_rows``, rows added while others decode wait and start their prefill
    together (or after ``JOIN_STEPS`` steps): the same outputs, in fewer joins."""
    prefills: list[int] = []
    prefill_groups = BatchDecoder._prefill_groups

    def counted(decoder: Any, rows: Any) -> Any:
        groups = list(prefill_groups(decoder, rows))
        prefills.append(len(groups))
        return iter(groups)

    monkeypatch.setattr(BatchDecoder, "_prefill_groups", counted)
    engine = (lambda: SlotEngine(tiny_model, "eager")) if slots else (lambda: None)
    alone = _decode_all(tiny_model, tokenizer, vocabulary, 3, engine(), join_rows=1)
    one_by_one, prefills[:] = len(prefills), []
    grouped = _decode_all(tiny_model, tokenizer, vocabulary, 3, engine(), join_rows=3)
    assert alone == grouped == growing_outputs[3]
    assert len(prefills) < one_by_one, (prefills, one_by_one)
    with pytest.raises(InvalidOptionError, match="join_rows"):
        BatchDecoder(tiny_model, capacity=2, max_new_tokens=8, join_rows=0)
