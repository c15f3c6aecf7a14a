"""Continuous batching (:class:`BatchDecoder`), the row cache and the shared prompt prefix.

The contract under test: a row's greedy output does not depend on the rows it shares
the decoder with, on when it joined, on the prefix KV it was given, or on the cache's
compactions. :class:`ScriptedModel` checks the mask and the positions of every row at
every call and scores exactly (no float noise); the tiny random Llama checks the same on
a real attention stack.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Annotated, Any, Literal

import pytest
import torch
from pydantic import BaseModel, Field

from formcast import FromText
from formcast.automaton import LazyAutomaton
from formcast.compiler import compile as compile_index
from formcast.decode import batching as batching_module
from formcast.decode.batching import BatchDecoder, Finished, RowRequest
from formcast.decode.kvcache import RowCache, SharedPrefix, common_prefix_length
from formcast.decode.logits import (
    FieldSteering,
    ForcedTokenizer,
    LoopGuard,
    SamplingOptions,
    generate,
)
from formcast.errors import InvalidOptionError
from formcast.extraction.extractor import Extractor
from formcast.index import TokenIndex
from formcast.vocabulary import Vocabulary
from support.decoding_cases import ASSISTANT, DMY, EVENT, ISO, NAME, RECEIPT, Event
from support.scripted_model import ScriptedModel, following

SHARED = "You read texts and answer in JSON. Fields: company, total, paid.\nText:\n"
TEXTS = [
    "ACME",
    "a somewhat longer text, with several more tokens in it than the first one",
    "mid size text here",
    "x",
    "the fifth text, of middling length",
]


def _index(vocabulary: Vocabulary, pattern: str) -> TokenIndex:
    return TokenIndex(LazyAutomaton(pattern), vocabulary)


def _prompts(tokenizer: Any, texts: list[str], marker: str = " >>") -> list[list[int]]:
    return [list(tokenizer.encode(SHARED + t + marker, add_special_tokens=False)) for t in texts]


def _decode(decoder: BatchDecoder, requests: list[RowRequest]) -> dict[Any, Finished]:
    return {done.key: done for done in decoder.run(requests)}


def _alone(model: Any, prompt: list[int], cursor: Any, **options: Any) -> list[int]:
    return generate(model, [prompt], [cursor], **options)[0].token_ids


# ------------------------------------------------------------------ rows join as others end


@pytest.mark.parametrize("capacity", [1, 2, 3])
def test_continuous_batching_equals_decoding_alone(
    capacity: int, tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    index = _index(vocabulary, RECEIPT)
    forced = ForcedTokenizer(tokenizer, vocabulary)
    prompts = _prompts(tokenizer, TEXTS)
    options: dict[str, Any] = {"max_new_tokens": 40, "forced_tokenizer": forced}
    alone = [_alone(tiny_model, p, index.cursor(), **options) for p in prompts]
    decoder = BatchDecoder(tiny_model, capacity=capacity, **options)
    requests = [RowRequest(i, p, index.cursor()) for i, p in enumerate(prompts)]
    finished = _decode(decoder, requests)
    assert [finished[i].generation.token_ids for i in range(len(prompts))] == alone
    for done in finished.values():
        assert re.fullmatch(RECEIPT, done.generation.text)


def test_a_row_joins_while_the_others_run(tokenizer: Any, vocabulary: Vocabulary) -> None:
    """Capacity 2: the short outputs end first and the next prompt is prefilled at once,
    while the long output goes on; the cache never holds more than 2 rows."""
    long_name = '{"name":"' + "word " * 12 + '"}'

    def targets(prompt: str) -> list[str]:
        return [long_name] if "long" in prompt else ['{"name":"ok"}']

    index = _index(vocabulary, NAME)
    model = ScriptedModel(following(tokenizer, targets, ">>"))
    texts = ["long one", "short a", "short b", "short c"]
    prompts = _prompts(tokenizer, texts)
    decoder = BatchDecoder(model, capacity=2, max_new_tokens=60)
    requests = (RowRequest(i, p, index.cursor()) for i, p in enumerate(prompts))
    finished = list(decoder.run(requests))
    assert [done.key for done in finished] == [1, 2, 3, 0]
    assert [done.generation.text for done in finished] == ['{"name":"ok"}'] * 3 + [long_name]
    assert max(rows for rows, _ in model.calls) == 2
    # Each short prompt after the first joined as a one-row prefill (its whole prompt).
    prefills = [(rows, width) for rows, width in model.calls if width > 1]
    assert prefills[1:] == [(1, len(prompts[2])), (1, len(prompts[3]))]


def test_rows_with_different_constraints_and_texts_share_a_batch(
    tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    copied = compile_index(Copied, vocabulary)
    receipt, name = _index(vocabulary, RECEIPT), _index(vocabulary, NAME)
    texts = ["SHOP ONE 01/02/2020 TOTAL 3.50", "SHOP TWO TOTAL 7", "a name", "receipt"]
    prompts = _prompts(tokenizer, texts)

    def cursors() -> list[Any]:
        return [
            copied.cursor(text=texts[0]),
            copied.cursor(text=texts[1]),
            name.cursor(),
            receipt.cursor(),
        ]

    forced = ForcedTokenizer(tokenizer, vocabulary)
    options: dict[str, Any] = {"max_new_tokens": 40, "forced_tokenizer": forced}
    alone = [_alone(tiny_model, p, c, **options) for p, c in zip(prompts, cursors(), strict=True)]
    decoder = BatchDecoder(tiny_model, capacity=3, **options)
    requests = [
        RowRequest(i, p, c) for i, (p, c) in enumerate(zip(prompts, cursors(), strict=True))
    ]
    finished = _decode(decoder, requests)
    outputs = [finished[i].generation for i in range(4)]
    assert [g.token_ids for g in outputs] == alone
    for generation, text in zip(outputs[:2], texts, strict=False):
        value = Copied.model_validate_json(generation.text)
        assert value.company in text
    assert re.fullmatch(NAME, outputs[2].text) and re.fullmatch(RECEIPT, outputs[3].text)


def test_run_reads_requests_lazily(tokenizer: Any, vocabulary: Vocabulary) -> None:
    index = _index(vocabulary, NAME)
    model = ScriptedModel(following(tokenizer, ['{"name":"ok"}'], ">>"))
    prompts = _prompts(tokenizer, [f"text {i}" for i in range(7)])
    taken: list[int] = []

    def requests() -> Iterator[RowRequest]:
        for i, prompt in enumerate(prompts):
            taken.append(i)
            yield RowRequest(i, prompt, index.cursor())

    stream = BatchDecoder(model, capacity=3, max_new_tokens=20).run(requests())
    first = next(stream)
    assert first.generation.text == '{"name":"ok"}'
    assert len(taken) == 3  # one request per slot, nothing read ahead
    assert sorted([first.key, *(done.key for done in stream)]) == list(range(7))


def test_add_checks_the_request(tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary) -> None:
    index = _index(vocabulary, RECEIPT)
    decoder = BatchDecoder(tiny_model, capacity=1, max_new_tokens=40)
    with pytest.raises(InvalidOptionError, match="at least one token"):
        decoder.add(RowRequest(0, [], index.cursor()))
    needed = index.min_tokens_to_accept(index.initial_state)
    small = BatchDecoder(tiny_model, capacity=1, max_new_tokens=needed - 1)
    with pytest.raises(InvalidOptionError, match=f"max_new_tokens >= {needed}"):
        small.add(RowRequest(0, [1, 2], index.cursor()))
    decoder.add(RowRequest(0, [1, 2], index.cursor()))
    with pytest.raises(InvalidOptionError, match="free slot"):
        decoder.add(RowRequest(1, [1, 2], index.cursor()))
    with pytest.raises(InvalidOptionError, match="capacity"):
        BatchDecoder(tiny_model, capacity=0, max_new_tokens=40)


def test_sampled_rows_do_not_depend_on_their_neighbours(
    tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """With a seed per row, a row samples the same tokens alone or in a batch."""
    index = _index(vocabulary, NAME)
    model = ScriptedModel(following(tokenizer, ['{"name":"ab"}', '{"name":"cd"}'], ">>"))
    prompts = _prompts(tokenizer, [f"text {i}" for i in range(5)])
    sampling = SamplingOptions(temperature=4.0)

    def run(capacity: int, rows: list[int]) -> dict[int, str]:
        decoder = BatchDecoder(model, capacity=capacity, max_new_tokens=12, sampling=sampling)
        requests = [RowRequest(i, prompts[i], index.cursor(), seed=100 + i) for i in rows]
        return {k: f.generation.text for k, f in _decode(decoder, requests).items()}

    together = run(3, list(range(5)))
    assert together == {i: run(1, [i])[i] for i in range(5)}
    assert len(set(together.values())) > 1  # the seeds differ, and so do the samples


# ------------------------------------------------------------------ steering, guard, compaction


def _dates_with_slashes(key: str, value: str) -> bool:
    return key != "date" or "/" in value


@pytest.mark.parametrize("compact_at", [10_000, 0])
def test_steered_rows_join_and_roll_back_independently(
    compact_at: int, tokenizer: Any, vocabulary: Vocabulary, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rollbacks and compactions (forced at every step with ``compact_at=0``) keep every
    row exact: ScriptedModel checks each row's visible tokens and positions."""
    monkeypatch.setattr(batching_module, "COMPACT_MIN_COLUMNS", compact_at)
    monkeypatch.setattr(batching_module, "COMPACT_SHARE", 0.0 if compact_at == 0 else 1.0)

    def targets(prompt: str) -> list[str]:
        return [ISO, DMY] if "iso" in prompt else [DMY.replace("Paris", "Oslo")]

    index = _index(vocabulary, EVENT)
    model = ScriptedModel(following(tokenizer, targets, ">>"))
    forced = ForcedTokenizer(tokenizer, vocabulary)
    texts = ["iso", "short", "iso again, longer prompt", "x", "iso three", "last"]
    prompts = _prompts(tokenizer, texts)
    options: dict[str, Any] = {
        "max_new_tokens": 60,
        "forced_tokenizer": forced,
        "loop_guard": LoopGuard(),
    }
    decoder = BatchDecoder(model, capacity=2, **options)
    requests = [
        RowRequest(i, p, index.cursor(), FieldSteering(_dates_with_slashes))
        for i, p in enumerate(prompts)
    ]
    finished = _decode(decoder, requests)
    together = [(finished[i].generation.text, finished[i].generation.rollbacks) for i in range(6)]
    alone = [
        generate(
            model, [p], [index.cursor()], steering=[FieldSteering(_dates_with_slashes)], **options
        )[0]
        for p in prompts
    ]
    assert together == [(g.text, g.rollbacks) for g in alone]
    assert [rollbacks for _, rollbacks in together] == [1, 0, 1, 0, 1, 0]


def test_prefill_groups_rows_of_similar_lengths(tokenizer: Any, vocabulary: Vocabulary) -> None:
    index = _index(vocabulary, NAME)
    model = ScriptedModel(following(tokenizer, ['{"name":"ok"}'], ">>"))
    texts = ["a", "b", "c " * 60, "d " * 61]
    prompts = _prompts(tokenizer, texts)
    decoder = BatchDecoder(model, capacity=4, max_new_tokens=20)
    finished = _decode(decoder, [RowRequest(i, p, index.cursor()) for i, p in enumerate(prompts)])
    assert all(f.generation.text == '{"name":"ok"}' for f in finished.values())
    prefills = [(rows, width) for rows, width in model.calls if width > 1]
    # the two short prompts together, the two long ones together: no long padding
    assert sorted(prefills) == [(2, max(len(p) for p in prompts[:2])), (2, len(prompts[3]))]


# ------------------------------------------------------------------ the shared prefix


def test_prefix_length_compares_token_ids(tokenizer: Any) -> None:
    prompts = _prompts(tokenizer, ["alpha", "beta"])
    shared = common_prefix_length(prompts[0], prompts[1])
    assert 0 < shared < min(len(p) for p in prompts)
    assert prompts[0][:shared] == prompts[1][:shared]
    prefix = SharedPrefix(prompts[0])
    assert prefix.usable_length(prompts[0]) == len(prompts[0]) - 1  # one token of its own
    assert prefix.usable_length(prompts[1]) == shared
    assert SharedPrefix([]).usable_length(prompts[0]) == 0


@pytest.mark.parametrize("capacity", [1, 3])
def test_shared_prefix_gives_the_same_outputs(
    capacity: int, tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    index = _index(vocabulary, RECEIPT)
    forced = ForcedTokenizer(tokenizer, vocabulary)
    prompts = _prompts(tokenizer, TEXTS)
    shared = min(common_prefix_length(prompts[0], p) for p in prompts)
    # a prefix longer than what the prompts share: each uses the ids it has in common
    prefix = SharedPrefix(prompts[0][: shared + 3])

    def run(prefix: SharedPrefix | None) -> list[list[int]]:
        decoder = BatchDecoder(
            tiny_model, capacity=capacity, max_new_tokens=40, forced_tokenizer=forced, prefix=prefix
        )
        requests = [RowRequest(i, p, index.cursor()) for i, p in enumerate(prompts)]
        finished = _decode(decoder, requests)
        return [finished[i].generation.token_ids for i in range(len(prompts))]

    assert run(prefix) == run(None)
    assert prefix.computed


def test_shared_prefix_is_computed_once_and_not_prefilled_again(
    tokenizer: Any, vocabulary: Vocabulary
) -> None:
    index = _index(vocabulary, NAME)
    model = ScriptedModel(following(tokenizer, ['{"name":"ok"}'], ">>"))
    prompts = _prompts(tokenizer, ["one", "two", "three"])
    shared = min(common_prefix_length(prompts[0], p) for p in prompts)
    prefix = SharedPrefix(prompts[0][:shared])
    for _ in range(2):  # a second decoder reuses the computed prefix
        decoder = BatchDecoder(model, capacity=1, max_new_tokens=20, prefix=prefix)
        finished = _decode(
            decoder, [RowRequest(i, p, index.cursor()) for i, p in enumerate(prompts)]
        )
        assert all(f.generation.text == '{"name":"ok"}' for f in finished.values())
    prefills = [width for _, width in model.calls if width > 1]
    assert prefills[0] == shared  # the prefix itself, once
    assert prefills[1:] == [len(p) - shared for p in prompts] * 2
    assert model.seen  # the model saw the whole prompt: prefix columns, then the suffix


# ------------------------------------------------------------------ the row cache


def _filled(tokens: list[list[int]]) -> RowCache:
    """A row cache whose single layer holds each row's token ids as its keys."""
    rows = RowCache.empty_rows(len(tokens), torch.device("cpu"))
    width = max(len(t) for t in tokens)
    rows.feed([len(t) for t in tokens])
    keys = torch.zeros((len(tokens), 1, width, 1), dtype=torch.float64)
    for i, row in enumerate(tokens):
        keys[i, 0, width - len(row) :, 0] = torch.tensor(row, dtype=torch.float64)
    rows.cache.update(keys, keys, 0)
    return rows


def _visible(rows: RowCache) -> list[list[int]]:
    keys = rows.cache.layers[0].keys[:, 0, :, 0].to(torch.long)
    return [
        [
            int(t)
            for t, seen in zip(keys[i].tolist(), rows.attention[i].tolist(), strict=True)
            if seen
        ]
        for i in range(rows.rows)
    ]


def test_row_cache_keeps_each_rows_tokens_in_order() -> None:
    rows = _filled([[1, 2, 3], [4, 5]])
    rows.append(_filled([[6, 7, 8, 9, 10]]))
    assert _visible(rows) == [[1, 2, 3], [4, 5], [6, 7, 8, 9, 10]]
    assert rows.width == 5 and rows.first == [2, 3, 0]
    rows.hide_from(2, 2)  # a rollback of row 2 to position 2
    assert _visible(rows) == [[1, 2, 3], [4, 5], [6, 7]] and rows.visible == [3, 2, 2]
    rows.keep_rows([0, 1])  # the long row leaves: its leading columns go
    assert _visible(rows) == [[1, 2, 3], [4, 5]] and rows.width == 3
    rows.hide_from(0, 1)
    rows.compact()
    assert _visible(rows) == [[1], [4, 5]] and rows.width == 2 and rows.first == [1, 0]


# ------------------------------------------------------------------ extract_many


class Copied(BaseModel):
    company: Annotated[str, FromText()]
    total: Annotated[float, FromText()]


def _scripted_extractor(tokenizer: Any, targets: Any) -> tuple[Extractor, ScriptedModel]:
    model = ScriptedModel(following(tokenizer, targets, ASSISTANT))
    return Extractor(model, tokenizer, max_new_tokens=60), model


def _event_targets(prompt: str) -> list[str]:
    """Long cities for texts that say "long", a rejected ISO date first for "iso"."""
    city = "Saint-Remy-de-Provence" if "long" in prompt else "Oslo"
    dmy = DMY.replace("Paris", city)
    return [ISO, dmy] if "iso" in prompt else [dmy]


@pytest.mark.parametrize("batching", ["static", "continuous"])
@pytest.mark.parametrize("share_prefix", [False, True])
def test_extract_many_equals_one_text_at_a_time(
    batching: Literal["static", "continuous"], share_prefix: bool, tiny_extractor: Extractor
) -> None:
    class Item(BaseModel):
        name: str = Field(max_length=12)
        quantity: int = Field(ge=0, le=99)

    texts = ["two pears", "a much longer text about several apples and one lemon", "x", "42"]
    alone = [tiny_extractor.run(Item, t, share_prefix=False).raw_text for t in texts]
    results = list(
        tiny_extractor.extract_many(
            Item, texts, batch_size=2, batching=batching, share_prefix=share_prefix, progress=False
        )
    )
    assert [r.raw_text for r in results] == alone
    assert [r.index for r in results] == [0, 1, 2, 3] and all(r.ok for r in results)


def test_completion_order_gives_each_result_its_index(tokenizer: Any) -> None:
    extractor, _ = _scripted_extractor(tokenizer, _event_targets)
    texts = ["long one", "short", "long two", "brief", "iso long", "tiny"]
    stream = extractor.extract_many(Event, texts, batch_size=3, order="completion", progress=False)
    results = list(stream)
    order = [r.index for r in results]
    assert sorted(order) == list(range(6)) and order != list(range(6))
    by_index = {r.index: r for r in results}
    for i, text in enumerate(texts):
        assert by_index[i].raw_text == extractor.run(Event, text).raw_text
    assert by_index[4].attempts == 1 and by_index[4].history[0].field_rollbacks == 1
    in_order = list(extractor.extract_many(Event, texts, batch_size=3, progress=False))
    assert [r.index for r in in_order] == list(range(6))
    assert [r.raw_text for r in in_order] == [by_index[i].raw_text for i in range(6)]


def test_extract_many_reads_one_text_per_free_row(tokenizer: Any) -> None:
    extractor, model = _scripted_extractor(tokenizer, _event_targets)
    consumed: list[int] = []

    def texts() -> Iterator[str]:
        for i in range(9):
            consumed.append(i)
            yield f"text {i}" + (" long" if i % 3 == 0 else "")

    stream = extractor.extract_many(
        Event, texts(), batch_size=3, order="completion", progress=False
    )
    assert consumed == []  # nothing is read before the first result is asked for
    for k, result in enumerate(stream, start=1):
        assert result.ok
        assert len(consumed) <= 3 + k - 1  # a text is read only when a row is free
    assert consumed == list(range(9))
    assert max(rows for rows, _ in model.calls) <= 3  # the KV cache never holds more


def test_bad_items_become_their_own_results(tokenizer: Any) -> None:
    extractor, model = _scripted_extractor(tokenizer, ['{"company":"SHOP","total":7}'])
    model.config = SimpleNamespace(max_position_embeddings=1024)  # type: ignore[assignment]
    texts: list[Any] = [
        "SHOP TOTAL 7",
        "",
        "no number in this one",
        "SHOP TOTAL 7 " * 500,
        42,
        "SHOP paid 7 in total",
    ]
    results = list(extractor.extract_many(Copied, texts, batch_size=2, progress=False))
    assert [r.index for r in results] == list(range(6))
    assert [type(r.error).__name__ if r.error else None for r in results] == [
        None,
        "EmptyInputError",
        "NoTextValueError",
        "ContextLengthError",
        "InvalidOptionError",
        None,
    ]
    assert results[0].value == results[5].value == Copied(company="SHOP", total=7)


def test_retried_items_join_the_running_batch(tokenizer: Any) -> None:
    """A text whose output the validators reject goes back to the queue with the
    feedback in its prompt, and runs beside the texts read after it."""
    retried_at: list[int] = []  # model calls at which the retried prompt was scored

    def targets(prompt: str) -> list[str]:
        if "previous answer was rejected" in prompt:
            retried_at.append(len(model.calls))
            return [DMY]
        if "rejected" in prompt:
            return ['{"date":"2018","city":"Oslo"}']
        return [DMY.replace("Paris", "Lima " * 8)]  # long enough to run beside the retry

    extractor, model = _scripted_extractor(tokenizer, targets)
    texts = ["to be rejected", "b", "c", "d"]
    results = list(
        extractor.extract_many(Event, texts, batch_size=2, progress=False, max_field_retries=0)
    )
    assert [r.ok for r in results] == [True] * 4
    assert [r.attempts for r in results] == [2, 1, 1, 1]
    assert "dd/mm/yyyy" in str(results[0].history[0].error)
    assert retried_at and any(rows == 2 for rows, _ in model.calls[retried_at[0] :])


def test_prefix_is_kept_per_extractor_and_computed_once(tokenizer: Any) -> None:
    extractor, model = _scripted_extractor(tokenizer, _event_targets)
    first = list(extractor.extract_many(Event, ["a", "b"], batch_size=2, progress=False))
    second = list(extractor.extract_many(Event, ["c"], progress=False))
    assert all(r.ok for r in first + second)
    assert len(extractor._prefixes) == 1
    (prefix,) = extractor._prefixes.values()
    assert prefix.computed
    prefix_calls = [call for call in model.calls if call == (1, len(prefix))]
    assert len(prefix_calls) == 1
    plain = list(extractor.extract_many(Event, ["a"], share_prefix=False, progress=False))
    assert plain[0].raw_text == first[0].raw_text


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("order", "random"), ("batching", "dynamic"), ("share_prefix", "yes"), ("batch_size", 0)],
)
def test_bad_batching_options_are_rejected(
    keyword: str, value: Any, tiny_extractor: Extractor
) -> None:
    def never_read() -> Iterator[str]:
        raise AssertionError("items must not be read when the call is wrong")
        yield ""

    with pytest.raises(InvalidOptionError, match=keyword):
        tiny_extractor.extract_many(Event, never_read(), **{keyword: value})


@pytest.mark.slow
def test_shared_prefix_on_the_default_model(default_extractor: Extractor, sroie_dir: Any) -> None:
    from pathlib import Path

    class Receipt(BaseModel):
        company: str
        date: str
        total: float

    texts = [(Path(sroie_dir) / f"{n:03d}.txt").read_text() for n in range(3)]
    options: dict[str, Any] = {"max_new_tokens": 64, "progress": False, "batch_size": 2}
    shared = list(default_extractor.extract_many(Receipt, texts, **options))
    plain = list(default_extractor.extract_many(Receipt, texts, share_prefix=False, **options))
    alone = [
        default_extractor.run(Receipt, t, max_new_tokens=64, share_prefix=False) for t in texts
    ]
    assert (
        [r.raw_text for r in shared] == [r.raw_text for r in plain] == [r.raw_text for r in alone]
    )
    assert all(r.ok for r in shared)
