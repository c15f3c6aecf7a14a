"""The loop guard and field-level steering inside the decoding loop.

Most tests use :class:`ScriptedModel`, a deterministic fake model that prefers to write
given target texts and checks the attention mask and position ids it is fed; one test
uses the tiny random Llama to show that a rolled-back row continues exactly as a fresh
run over the same tokens would.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import pytest
import torch
from pydantic import BaseModel, Field, field_validator, model_validator

from formcast.automaton import LazyAutomaton
from formcast.decode.jsonscan import JsonScanner
from formcast.decode.logits import FieldSteering, ForcedTokenizer, LoopGuard, generate
from formcast.decode.steering import RepeatCounter, RowText
from formcast.errors import InvalidOptionError, OutputValidationError
from formcast.extraction.extractor import Extractor
from formcast.index import TokenIndex
from formcast.text import FromText
from formcast.vocabulary import Vocabulary
from support.decoding_cases import ASSISTANT, DMY, EVENT, ISO, JSON_STRING, NAME, Event
from support.scripted_model import ScriptedModel, following

CHUNK = "DOMINOS.COM.MY/"
LOOP = '{"name":"' + CHUNK * 40 + '"}'
NUMBERS = r'\{"s":' + JSON_STRING + r',"n":\[(0|[1-9][0-9]*)(,(0|[1-9][0-9]*))*\]\}'


def _index(vocabulary: Vocabulary, pattern: str) -> TokenIndex:
    return TokenIndex(LazyAutomaton(pattern), vocabulary)


def _prompt(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text + " >>", add_special_tokens=False))


# ------------------------------------------------------------------ the scanner, the counts


def test_scanner_finds_strings_and_top_level_members() -> None:
    data = b'{"a":"x\\"}","b" : [1,{"c":"]"}] ,"d":{"e":"}"},"f":12}'
    members = JsonScanner().feed(data)
    assert [
        (data[m.key_start : m.key_end], data[m.value_start : m.value_end]) for m in members
    ] == [
        (b'"a"', b'"x\\"}"'),
        (b'"b"', b'[1,{"c":"]"}] '),
        (b'"d"', b'{"e":"}"}'),
        (b'"f"', b"12"),
    ]
    assert [data[m.content_start] for m in members] == [ord("x"), ord("["), ord("{"), ord("1")]
    one_by_one = JsonScanner()
    inside = []
    for i in range(len(data)):
        assert one_by_one.feed(data[i : i + 1]) == [m for m in members if m.value_end == i]
        inside.append(one_by_one.in_string)
    assert inside[data.index(b"x")] and inside[data.index(b'\\"') + 1]  # escaped quote
    assert not inside[data.index(b"12")]


def test_repeat_counter_counts_chunks_without_overlap() -> None:
    counter = RepeatCounter(ngram=2, max_repeats=2)
    for _ in range(5):
        assert counter.bans() == []
        counter.push(1)
    # 1 1 1 1 1 holds (1, 1) twice without overlap; a sixth 1 would make it three times.
    assert counter.bans() == [1]


def test_row_text_counts_only_inside_strings(tokenizer: Any, vocabulary: Vocabulary) -> None:
    text = RowText(vocabulary.token_bytes, (1, 2))
    seven = tokenizer.encode("7", add_special_tokens=False)[0]
    for token in tokenizer.encode('{"n":[7,7,7,7,7],"s":"77', add_special_tokens=False):
        assert text.loop_bans() == [] or text.scanner.in_string
        text.push(token)
    assert text.scanner.in_string and text.loop_bans() == [seven]


def test_loop_guard_rejects_bad_settings() -> None:
    with pytest.raises(InvalidOptionError, match="ngram"):
        LoopGuard(ngram=0)
    with pytest.raises(InvalidOptionError, match="max_repeats"):
        LoopGuard(max_repeats=0)


# ------------------------------------------------------------------ the loop guard


def test_loop_guard_ends_a_runaway_string(tokenizer: Any, vocabulary: Vocabulary) -> None:
    index = _index(vocabulary, NAME)
    model = ScriptedModel(following(tokenizer, [LOOP], ">>"))
    prompt = [_prompt(tokenizer, "shop")]
    free = generate(model, prompt, [index.cursor()], max_new_tokens=80)[0]
    assert free.finish_reason == "length"
    assert json.loads(free.text)["name"].count(CHUNK) >= 6
    guarded = generate(model, prompt, [index.cursor()], max_new_tokens=80, loop_guard=LoopGuard())
    result = guarded[0]
    name = json.loads(result.text)["name"]  # still valid JSON
    assert re.fullmatch(NAME, result.text)
    assert result.finish_reason == "stop" and result.guard_bans == 1
    assert (CHUNK * 40).startswith(name) and 3 * len(CHUNK) <= len(name) < 4 * len(CHUNK)


def test_loop_guard_never_acts_outside_strings(tokenizer: Any, vocabulary: Vocabulary) -> None:
    index = _index(vocabulary, NUMBERS)
    target = '{"s":"a\\"b","n":[' + "1,2," * 60
    model = ScriptedModel(following(tokenizer, [target], ">>"))
    prompt = [_prompt(tokenizer, "numbers")]
    forced = ForcedTokenizer(tokenizer, vocabulary)
    free = generate(model, prompt, [index.cursor()], max_new_tokens=60, forced_tokenizer=forced)
    guarded = generate(
        model,
        prompt,
        [index.cursor()],
        max_new_tokens=60,
        forced_tokenizer=forced,
        loop_guard=LoopGuard(ngram=2, max_repeats=1),
    )
    assert guarded[0].token_ids == free[0].token_ids
    assert guarded[0].guard_bans == 0
    assert guarded[0].text.count("1,2,") > 10


def test_loop_guard_keeps_batch_rows_independent(tokenizer: Any, vocabulary: Vocabulary) -> None:
    three_turns = '{"name":"' + CHUNK * 3 + '"}'

    def targets(prompt: str) -> list[str]:
        return [LOOP] if "loop" in prompt else [three_turns]

    index = _index(vocabulary, NAME)
    model = ScriptedModel(following(tokenizer, targets, ">>"))
    prompts = [_prompt(tokenizer, t) for t in ["loop one", "three", "a loop again", "three"]]

    def run(batch: list[list[int]]) -> list[str]:
        cursors = [index.cursor() for _ in batch]
        outputs = generate(model, batch, cursors, max_new_tokens=80, loop_guard=LoopGuard())
        return [g.text for g in outputs]

    together = run(prompts)
    assert together == [run([p])[0] for p in prompts]
    assert together[1] == together[3] == three_turns  # three turns are allowed
    assert together[0] == together[2] != LOOP


# ------------------------------------------------------------------ field-level steering


def _dates_with_slashes(key: str, value: str) -> bool:
    return key != "date" or "/" in json.loads(value)


@pytest.mark.parametrize("jump_forward", [False, True])
def test_rejected_field_is_rolled_back_and_written_again(
    tokenizer: Any, vocabulary: Vocabulary, jump_forward: bool
) -> None:
    index = _index(vocabulary, EVENT)
    model = ScriptedModel(following(tokenizer, [ISO, DMY], ">>"))
    prompt = _prompt(tokenizer, "event")
    forced = ForcedTokenizer(tokenizer, vocabulary) if jump_forward else None
    plain = generate(model, [prompt], [index.cursor()], max_new_tokens=60, forced_tokenizer=forced)
    assert plain[0].text == ISO
    steered = generate(
        model,
        [prompt],
        [index.cursor()],
        max_new_tokens=60,
        forced_tokenizer=forced,
        steering=[FieldSteering(_dates_with_slashes)],
    )[0]
    assert steered.text == DMY and steered.finish_reason == "stop"
    assert steered.rollbacks == 1
    assert steered.generated_tokens > steered.completion_tokens
    assert (steered.forced_tokens > 0) == jump_forward
    # What the model saw last is exactly the prompt and the kept output: no rejected token.
    visible = model.seen[0]
    assert visible[: len(prompt)] == prompt
    assert steered.token_ids[: len(visible) - len(prompt)] == visible[len(prompt) :]


def test_steering_gives_up_after_its_retries(tokenizer: Any, vocabulary: Vocabulary) -> None:
    index = _index(vocabulary, EVENT)
    model = ScriptedModel(following(tokenizer, [ISO, DMY], ">>"))
    seen: list[tuple[str, str]] = []

    def never(key: str, value: str) -> bool:
        seen.append((key, value))
        return key != "date"

    result = generate(
        model,
        [_prompt(tokenizer, "event")],
        [index.cursor()],
        max_new_tokens=60,
        steering=[FieldSteering(never, max_retries=2)],
    )[0]
    assert result.rollbacks == 2
    assert re.fullmatch(EVENT, result.text)
    dates = [value for key, value in seen if key == "date"]
    assert dates[:2] == ['"2018-03-12"', '"12/03/2018"'] and len(set(dates)) == 3


def test_steering_respects_its_token_limit(tokenizer: Any, vocabulary: Vocabulary) -> None:
    index = _index(vocabulary, EVENT)
    model = ScriptedModel(following(tokenizer, [ISO, DMY], ">>"))
    result = generate(
        model,
        [_prompt(tokenizer, "event")],
        [index.cursor()],
        max_new_tokens=60,
        steering=[FieldSteering(_dates_with_slashes, max_generated_tokens=60)],
    )[0]
    assert result.text == ISO and result.rollbacks == 0


def test_steered_rows_of_a_batch_are_independent(tokenizer: Any, vocabulary: Vocabulary) -> None:
    def targets(prompt: str) -> list[str]:
        return [ISO, DMY] if "iso" in prompt else [DMY.replace("Paris", "Oslo")]

    index = _index(vocabulary, EVENT)
    model = ScriptedModel(following(tokenizer, targets, ">>"))
    forced = ForcedTokenizer(tokenizer, vocabulary)
    prompts = [_prompt(tokenizer, t) for t in ["iso", "short", "iso again, longer prompt", "x"]]

    def run(batch: list[list[int]]) -> list[tuple[str, int]]:
        outputs = generate(
            model,
            batch,
            [index.cursor() for _ in batch],
            max_new_tokens=60,
            forced_tokenizer=forced,
            steering=[FieldSteering(_dates_with_slashes) for _ in batch],
        )
        return [(g.text, g.rollbacks) for g in outputs]

    together = run(prompts)
    assert together == [run([p])[0] for p in prompts]
    assert [rollbacks for _, rollbacks in together] == [1, 0, 1, 0]


def test_rolled_back_row_continues_as_a_fresh_run(
    tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    """On a real (random) Llama: after a rollback, every greedy choice equals the argmax
    of a fresh forward pass over the prompt and the kept tokens, except the one choice
    the ban changed."""
    index = _index(vocabulary, EVENT)
    dates: list[str] = []

    def reject_first_date(key: str, value: str) -> bool:
        if key == "date":
            dates.append(value)
        return key != "date" or len(dates) > 1

    prompt = _prompt(tokenizer, "event")
    result = generate(
        tiny_model,
        [prompt, _prompt(tokenizer, "a longer prompt than the other one")],
        [index.cursor(), index.cursor()],
        max_new_tokens=40,
        steering=[FieldSteering(reject_first_date), None],
    )[0]
    assert result.rollbacks == 1 and re.fullmatch(EVENT, result.text)
    content = result.text.index('"date":"') + len('"date":"')
    ends = [
        len(b"".join(vocabulary.token_bytes[t] for t in result.token_ids[: i + 1]))
        for i in range(len(result.token_ids))
    ]
    changed = next(i for i, end in enumerate(ends) if end > content)
    cursor = index.cursor()
    with torch.inference_mode():
        for p, token in enumerate(result.token_ids):
            logits = tiny_model(torch.tensor([prompt + result.token_ids[:p]])).logits[0, -1]
            mask = cursor.mask(logits.shape[-1], tokens_left=40 - p)
            best = int(logits.masked_fill(~mask, float("-inf")).argmax())
            assert (best == token) == (p != changed), p
            cursor.advance(token)


# ------------------------------------------------------------------ the extractor's options


class Span(BaseModel):
    start: int
    end: int

    @model_validator(mode="after")
    def ordered(self) -> Span:
        if self.end < self.start:
            raise ValueError("end must not be before start")
        return self


def _extractor(tokenizer: Any, targets: Any) -> Extractor:
    model = ScriptedModel(following(tokenizer, targets, ASSISTANT))
    return Extractor(model, tokenizer, max_new_tokens=60)


def test_field_validator_steers_the_extraction(tokenizer: Any) -> None:
    extractor = _extractor(tokenizer, [ISO, DMY])
    result = extractor.run(Event, "On 12/03/2018 in Paris")
    assert result.ok and result.value == Event(date="12/03/2018", city="Paris")
    assert result.raw_text == DMY and result.attempts == 1
    assert result.history[0].field_rollbacks == 1 and result.history[0].error is None
    assert result.generated_tokens > result.completion_tokens
    single = extractor.run(Event, "On 12/03/2018 in Paris", max_attempts=1, max_field_retries=0)
    assert isinstance(single.error, OutputValidationError) and single.raw_text == ISO
    assert single.attempts == 1 and single.error.attempts == single.history


def test_model_validator_gets_a_new_attempt_with_the_error(tokenizer: Any) -> None:
    prompts: list[str] = []

    def targets(prompt: str) -> list[str]:
        if prompt not in prompts:
            prompts.append(prompt)
        return ['{"start":3,"end":9}'] if "rejected" in prompt else ['{"start":9,"end":3}']

    result = _extractor(tokenizer, targets).run(Span, "from 3 to 9")
    assert result.ok and result.value == Span(start=3, end=9)
    assert result.attempts == 2 and isinstance(result.history[0].error, OutputValidationError)
    assert result.history[0].raw_text == '{"start":9,"end":3}'
    assert result.generated_tokens == sum(a.generated_tokens for a in result.history)
    assert "A previous answer was rejected" in prompts[-1]
    assert "end must not be before start" in prompts[-1]
    assert "rejected" not in prompts[0]


def test_validator_that_always_fails_ends_by_the_limits(tokenizer: Any) -> None:
    extractor = _extractor(tokenizer, ['{"date":"2018","city":"Oslo"}'])
    result = extractor.run(Event, "some day")
    assert result.attempts == 3 == len(result.history)
    assert all(isinstance(a.error, OutputValidationError) for a in result.history)
    assert result.history[0].field_rollbacks == 2
    with pytest.raises(OutputValidationError, match="dd/mm/yyyy") as raised:
        extractor.extract(Event, "some day", max_attempts=2)
    assert len(raised.value.attempts) == 2
    limited = extractor.run(Event, "some day", max_total_tokens=100)
    assert limited.generated_tokens <= 100 and limited.attempts < 3


def test_extract_many_retries_items_independently(tokenizer: Any) -> None:
    def targets(prompt: str) -> list[str]:
        if "iso" in prompt:
            return [ISO, DMY]
        if "never" in prompt:
            return ['{"date":"2018","city":"Oslo"}']
        return [DMY.replace("Paris", "Rome")]

    extractor = _extractor(tokenizer, targets)
    texts = ["iso one", "fine", "never", "", "iso two, longer"]
    results = list(extractor.extract_many(Event, texts, batch_size=5, progress=False))
    assert [r.ok for r in results] == [True, True, False, False, True]
    assert [r.attempts for r in results] == [1, 1, 3, 0, 1]
    for text, result in zip(texts, results, strict=True):
        if text:
            alone = extractor.run(Event, text)
            assert (alone.raw_text, alone.attempts) == (result.raw_text, result.attempts)


def test_loop_guard_option(tokenizer: Any) -> None:
    class Shop(BaseModel):
        name: str

    extractor = _extractor(tokenizer, [LOOP])
    guarded = extractor.run(Shop, "shop", max_new_tokens=80)
    assert guarded.ok and guarded.finish_reason == "stop"
    assert guarded.value.name.count(CHUNK) == 3
    free = extractor.run(Shop, "shop", max_new_tokens=80, loop_guard=False)
    assert free.finish_reason == "length" and free.value.name.count(CHUNK) > 3
    looser = extractor.run(Shop, "shop", max_new_tokens=80, loop_guard=LoopGuard(max_repeats=4))
    assert looser.value.name.count(CHUNK) == 4


@pytest.mark.parametrize(
    "options",
    [
        {"max_attempts": 0},
        {"max_attempts": 1.5},
        {"max_total_tokens": 10},
        {"max_field_retries": -1},
        {"loop_guard": "yes"},
    ],
)
def test_bad_steering_options_are_rejected(tokenizer: Any, options: dict[str, Any]) -> None:
    extractor = _extractor(tokenizer, [DMY])
    with pytest.raises(InvalidOptionError):
        extractor.run(Event, "text", **options)
    with pytest.raises(InvalidOptionError):
        extractor.extract_many(Event, iter(["text"]), **options)


# ------------------------------------------------------------------ on the default model


def _receipt_head(sroie_dir: Path, lines: int) -> str:
    with open(sroie_dir / "001.txt", encoding="utf-8") as file:
        return "".join(file.readlines()[:lines])


@pytest.mark.slow
def test_loop_guard_on_the_default_model(default_extractor: Extractor, sroie_dir: Path) -> None:
    class Place(BaseModel):
        address: str = Field(description="address of the shop")

    # Without the guard, this call writes "...JOHOR.JOHOR.JOHOR.JOHOR.JOHOR." until the
    # budget ends (finish_reason "length"); one run of that is left out to save time.
    guarded = default_extractor.run(Place, _receipt_head(sroie_dir, 9), max_new_tokens=64)
    assert guarded.ok and guarded.finish_reason == "stop"
    assert "JOHOR." * 3 in guarded.raw_text and "JOHOR." * 4 not in guarded.raw_text


@pytest.mark.slow
def test_field_validator_steers_the_default_model(
    default_extractor: Extractor, sroie_dir: Path
) -> None:
    class Dated(BaseModel):
        date: str = Field(description="date of the receipt", max_length=10)

        @field_validator("date")
        @classmethod
        def day_month_year(cls, value: str) -> str:
            if not re.fullmatch(r"[0-9]{2}/[0-9]{2}/[0-9]{4}", value):
                raise ValueError("expected the date written dd/mm/yyyy, as on the receipt")
            return value

    text = _receipt_head(sroie_dir, 9)  # ends with the line "19/10/2018 20:49:59 #01"
    once = default_extractor.run(
        Dated, text, max_new_tokens=24, max_attempts=1, max_field_retries=0
    )
    assert isinstance(once.error, OutputValidationError)
    steered = default_extractor.run(Dated, text, max_new_tokens=24)
    assert steered.ok and steered.value == Dated(date="19/10/2018")
    assert steered.history[-1].field_rollbacks >= 1


class CopiedEvent(BaseModel):
    date: Annotated[str, FromText()]
    city: Annotated[str, FromText()]

    @field_validator("date")
    @classmethod
    def day_month_year(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9]{2}/[0-9]{2}/[0-9]{4}", value):
            raise ValueError("expected a date written dd/mm/yyyy")
        return value


def test_field_steering_inside_values_copied_from_the_text(tokenizer: Any) -> None:
    """A rejected copied value rolls back to the start of the value; the new one is still
    copied from the text (the bound cursor replays like any other)."""
    text = "At 20:49:59 on 12/03/2018 in Paris"
    time_first = '{"date":"20:49:59","city":"Paris"}'
    extractor = _extractor(tokenizer, [time_first, '{"date":"12/03/2018","city":"Paris"}'])
    result = extractor.run(CopiedEvent, text)
    assert result.ok and result.value == CopiedEvent(date="12/03/2018", city="Paris")
    assert result.history[0].field_rollbacks == 1
    single = extractor.run(CopiedEvent, text, max_attempts=1, max_field_retries=0)
    assert isinstance(single.error, OutputValidationError) and single.raw_text == time_first
