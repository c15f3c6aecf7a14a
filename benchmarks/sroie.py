"""End-to-end extraction of SROIE receipts: quality and speed, with and without formcast.

For each receipt in ``../shared/data/sroie`` (default 000-039) and each mode, the same
model and the same prompt are used:

* ``free``      - unconstrained greedy generation (transformers ``generate``), then
                  ``Receipt.model_validate_json`` on the raw text;
* ``formcast``  - constrained decoding with jump-forward (the default);
* ``no-jump``   - constrained decoding with jump-forward off;
* ``no-guard``  - constrained decoding with the loop guard off (it is on by default);
* ``from-text`` - constrained decoding of ``CopiedReceipt``: the same fields and
                  descriptions, each ``FromText`` (its value copied from the receipt);
* ``from-text-no-guard`` - the same with the loop guard off;
* ``from-text-shaped`` - ``ShapedReceipt``: ``CopiedReceipt`` whose ``date`` also has a
                  ``pattern`` (:data:`DATE_PATTERN`, day, month and year as receipts
                  write them), so it is a date written in the text;
* ``from-text-lines`` - ``LinedReceipt``: ``ShapedReceipt`` whose company, address and
                  total are ``FromText(whole_lines=True)``: whole lines of the receipt, and
                  a total that stands alone on its line;
* ``from-text-validated`` - ``ValidatedReceipt``: ``CopiedReceipt`` plus a
                  ``field_validator`` that wants a date (day, month and year) in ``date``,
                  with validators that steer (``max_attempts=3``);
* ``from-text-unsteered`` - ``ValidatedReceipt`` with ``max_attempts=1``: a rejected
                  date fails the receipt;
* ``outlines``  - outlines (``outlines.Generator`` over the same transformers model and
                  tokenizer, the same ``Receipt`` class, its default outlines-core backend)
                  with greedy decoding, when outlines is installed; the index is compiled
                  and one receipt generated before timing, as formcast's warm-up does.

Printed per mode: share of outputs that validate, per-field exact match (company, date,
address, total; over the receipts whose gold has the field) and their mean, the number of
looping outputs (``looping``: a chunk of 3+ characters repeated 5+ times in a row in one
field value), median seconds per receipt, generated tokens per second, and the ratios of
the median time against free generation and against the ``formcast`` mode, measured in the same run.

``--receipt-models`` runs each mode once per output class, to measure what the prompt
gains from the class alone (its field lines and docstring are the only difference):
``current`` (``Receipt``, the default: a description per field), ``plain`` (the same
fields, no descriptions) and ``described`` (a docstring, longer descriptions and
invented ``examples`` that appear in no SROIE receipt).

    python benchmarks/sroie.py                       # receipts 000-039, batch size 1
    python benchmarks/sroie.py --count 16 --batch-sizes 1 4 16 --modes formcast
    python benchmarks/sroie.py --modes free formcast outlines
    python benchmarks/sroie.py --count 12 --modes formcast --receipt-models plain current described
    python benchmarks/sroie.py --modes formcast no-guard from-text from-text-no-guard \
        from-text-shaped from-text-validated from-text-unsteered

``--template text-first`` puts the receipt before the instructions and the field lines in
every mode's prompt (the default puts it last); it shortens the prefix that prompts share.

``--ceiling`` runs no model: it prints the share of gold values a ``FromText`` field
can write at all (``python benchmarks/sroie.py --ceiling --count 200``).

The ``from-text`` modes replace the output class (``--receipt-models`` does not apply to
them); their prompt differs from ``formcast``'s only by "copied exactly from the text" in
each field line.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationError, field_validator

import formcast
from formcast.automaton.text import number_candidates
from formcast.extraction.prompts import DEFAULT_USER

#: The receipts: ``FORMCAST_SROIE_DIR`` when set (a machine without the shared folder).
DATA = Path(
    os.environ.get("FORMCAST_SROIE_DIR")
    or Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sroie"
)
FIELDS = ("company", "date", "address", "total")


class Receipt(BaseModel):
    company: str = Field(description="name of the company that issued the receipt")
    date: str = Field(description="date of the receipt, as written on it")
    address: str = Field(description="address of the company")
    total: float = Field(description="total amount paid")


class CopiedReceipt(BaseModel):
    company: Annotated[str, formcast.FromText()] = Field(
        description="name of the company that issued the receipt"
    )
    date: Annotated[str, formcast.FromText()] = Field(
        description="date of the receipt, as written on it"
    )
    address: Annotated[str, formcast.FromText()] = Field(description="address of the company")
    total: Annotated[float, formcast.FromText()] = Field(description="total amount paid")


_DATE = re.compile(r"[0-9]{1,4}[/.-][0-9]{1,2}[/.-][0-9]{2,4}")
#: A date with day, month and year as receipts write it: digits with separators
#: (25/12/2018, 2018-12-25, 25.12.18) or a month's name (25 DEC 2018).
DATE_PATTERN = r"^([0-9]{1,4}[/.-][0-9]{1,2}[/.-][0-9]{2,4}|[0-9]{1,2} [A-Za-z]{3,9} [0-9]{2,4})$"


class ShapedReceipt(CopiedReceipt):
    date: Annotated[str, formcast.FromText(), Field(pattern=DATE_PATTERN)] = Field(
        description="date of the receipt, as written on it"
    )


class LinedReceipt(ShapedReceipt):
    """``ShapedReceipt`` whose company, address and total stand on lines of their own."""

    company: Annotated[str, formcast.FromText(whole_lines=True)] = Field(
        description="name of the company that issued the receipt"
    )
    address: Annotated[str, formcast.FromText(whole_lines=True)] = Field(
        description="address of the company"
    )
    total: Annotated[float, formcast.FromText(whole_lines=True)] = Field(
        description="total amount paid"
    )


class ValidatedReceipt(CopiedReceipt):
    @field_validator("date")
    @classmethod
    def _has_a_date(cls, value: str) -> str:
        if not _DATE.fullmatch(value):
            raise ValueError("expected a date with day, month and year, such as 25/12/2018")
        return value


#: --template -> the user message of the prompt (the system message is formcast's)
TEMPLATES = {
    "default": DEFAULT_USER,
    "text-first": "Text:\n{text}\n\n{instructions}\n\nFields:\n{fields}",
}

#: mode -> (output class, extraction options); None: the --receipt-models class
FORMCAST_MODES: dict[str, tuple[type[BaseModel] | None, dict[str, Any]]] = {
    "formcast": (None, {}),
    "no-jump": (None, {"jump_forward": False}),
    "no-guard": (None, {"loop_guard": False}),
    "from-text": (CopiedReceipt, {}),
    "from-text-no-guard": (CopiedReceipt, {"loop_guard": False}),
    "from-text-shaped": (ShapedReceipt, {}),
    "from-text-lines": (LinedReceipt, {}),
    "from-text-validated": (ValidatedReceipt, {"max_attempts": 3}),
    "from-text-unsteered": (ValidatedReceipt, {"max_attempts": 1}),
}


class PlainReceipt(BaseModel):
    company: str
    date: str
    address: str
    total: float


class DescribedReceipt(BaseModel):
    """A shop receipt from Malaysia, read by OCR. Copy each value as it is printed."""

    company: str = Field(
        description="name of the company that issued the receipt, near the top, often "
        "ending in SDN BHD",
        examples=["KEDAI MELATI JAYA SDN BHD"],
    )
    date: str = Field(
        description="date of the receipt, as written on it", examples=["14/06/2018", "03-09-2017"]
    )
    address: str = Field(
        description="address of the company, with its postcode and state",
        examples=["NO. 8, JALAN KENANGA 4, TAMAN MELATI, 68000 AMPANG, SELANGOR."],
    )
    total: float = Field(description="total amount paid, the number after TOTAL", examples=[12.5])


RECEIPT_MODELS: dict[str, type[BaseModel]] = {
    "current": Receipt,
    "plain": PlainReceipt,
    "described": DescribedReceipt,
}

# A chunk of at least 3 characters followed by 4 or more copies of itself.
_LOOP = re.compile(r"(.{3,}?)\1{4,}", re.DOTALL)


def looping(text: str) -> bool:
    """Whether ``text`` holds a chunk of 3 or more characters repeated 5 or more times in a
    row, the mark of a model stuck in a loop: ``"12, 12, 12, 12, 12, "`` does,
    ``"TAMAN DAYA, TAMAN DAYA"`` does not. A shorter period counts once the run is long
    enough (``"ab" * 10`` is ``"abab"`` five times), and so does a run of 15 or more equal
    characters (``"-" * 15``), which field values of receipts do not hold."""
    return _LOOP.search(text) is not None


def output_loops(value: BaseModel | None, raw_text: str) -> bool:
    """Whether an output loops: any field value of a validated output, or the whole raw
    text of one that did not validate (its field values are unknown)."""
    if value is None:
        return looping(raw_text)
    return any(looping(str(v)) for v in value.model_dump().values())


@dataclass
class Tally:
    """Results of one mode over all receipts."""

    valid: int = 0
    exact: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    #: receipts whose gold has the field (``104`` has no address, ``033`` an empty total)
    scored: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    seconds: list[float] = field(default_factory=list)
    tokens: int = 0
    count: int = 0
    loops: int = 0

    def add(self, value: Any, gold: dict[str, str], tokens: int, raw_text: str) -> None:
        self.count += 1
        self.tokens += tokens
        self.loops += output_loops(value, raw_text)
        for name in FIELDS:
            self.scored[name] += _has(gold, name)
        if value is None:
            return
        self.valid += 1
        for name in FIELDS:
            if _has(gold, name):
                self.exact[name] += _matches(name, getattr(value, name), gold[name])

    def share(self, name: str) -> float:
        """Exact matches of a field over the receipts whose gold has it."""
        return self.exact[name] / max(self.scored[name], 1)


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def _matches(name: str, predicted: Any, gold: str) -> bool:
    if name == "total":
        # a few gold totals keep the currency ("RM 3.90"): the amount is the number in it
        amounts = number_candidates(gold)
        try:
            return bool(amounts) and abs(float(predicted) - float(amounts[0])) < 0.005
        except ValueError:
            return False
    return _norm(predicted) == _norm(gold)


def _has(gold: dict[str, str], name: str) -> bool:
    """Whether the gold gives the field (a few leave it out or empty)."""
    return bool(gold.get(name, "").strip())


def load_receipts(start: int, count: int) -> list[tuple[str, dict[str, str]]]:
    if not DATA.is_dir():
        sys.exit(f"SROIE data not found at {DATA}")
    receipts = []
    for number in range(start, start + count):
        text = (DATA / f"{number:03d}.txt").read_text()
        gold = json.loads((DATA / f"{number:03d}.json").read_text())
        receipts.append((text, gold))
    return receipts


def run_formcast(
    extractor: formcast.Extractor,
    output: type[BaseModel],
    receipts: list[Any],
    batch_size: int,
    options: dict[str, Any],
    max_new_tokens: int,
) -> Tally:
    tally = Tally()
    texts = [text for text, _ in receipts]
    started = time.perf_counter()
    batch_started = started
    results = extractor.extract_many(
        output,
        texts,
        batch_size=batch_size,
        progress=False,
        max_new_tokens=max_new_tokens,
        **options,
    )
    for position, result in enumerate(results):
        tally.add(
            result.value if result.ok else None,
            receipts[position][1],
            result.completion_tokens,
            result.raw_text,
        )
        if (position + 1) % batch_size == 0 or position + 1 == len(receipts):
            now = time.perf_counter()
            in_batch = (position % batch_size) + 1
            tally.seconds.extend([(now - batch_started) / in_batch] * in_batch)
            batch_started = now
    return tally


def run_free(
    extractor: formcast.Extractor,
    output: type[BaseModel],
    receipts: list[Any],
    max_new_tokens: int,
) -> Tally:
    """Unconstrained greedy generation of the same prompt, one receipt at a time."""
    import torch

    from formcast.extraction.extractor import DEFAULT_INSTRUCTIONS

    tally = Tally()
    model, tokenizer = extractor.model, extractor.tokenizer
    schema = output.model_json_schema()
    eos = sorted(extractor.vocabulary.eos_token_ids)
    for text, gold in receipts:
        messages = extractor.prompt_template.render(
            text=text, schema=schema, instructions=DEFAULT_INSTRUCTIONS
        )
        prompt = extractor._encode(messages)
        started = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                torch.tensor([prompt]),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=eos[0],
            )
        generated = out[0, len(prompt) :].tolist()
        tally.seconds.append(time.perf_counter() - started)
        raw = tokenizer.decode(generated, skip_special_tokens=True)
        try:
            value: BaseModel | None = output.model_validate_json(raw)
        except ValidationError:
            value = None
        tally.add(value, gold, len([t for t in generated if t not in eos]), raw)
    return tally


def run_outlines(
    extractor: formcast.Extractor,
    output: type[BaseModel],
    receipts: list[Any],
    max_new_tokens: int,
) -> Tally:
    """outlines on the same model, prompt and class, one receipt at a time, greedy.

    Generated tokens are counted by re-tokenizing the returned text (outlines returns text).
    """
    import copy

    import outlines
    from outlines.inputs import Chat

    from formcast.extraction.extractor import DEFAULT_INSTRUCTIONS

    tally = Tally()
    # outlines sets padding side and pad token on the tokenizer it gets: give it a copy
    tokenizer = copy.deepcopy(extractor.tokenizer)
    model = outlines.from_transformers(extractor.model, tokenizer)
    generator = outlines.Generator(model, output)
    schema = output.model_json_schema()
    eos = sorted(extractor.vocabulary.eos_token_ids)
    options = {
        "max_new_tokens": max_new_tokens,
        "do_sample": False,
        "eos_token_id": eos,
        "pad_token_id": eos[0],
    }

    def prompt(text: str) -> Chat:
        messages = extractor.prompt_template.render(
            text=text, schema=schema, instructions=DEFAULT_INSTRUCTIONS
        )
        return Chat(messages)

    generator(prompt(receipts[0][0]), **options)  # warm-up, like formcast's
    for text, gold in receipts:
        started = time.perf_counter()
        raw = generator(prompt(text), **options)
        tally.seconds.append(time.perf_counter() - started)
        try:
            value: BaseModel | None = output.model_validate_json(raw)
        except ValidationError:
            value = None
        tally.add(value, gold, len(tokenizer.encode(raw, add_special_tokens=False)), raw)
    return tally


def report(
    name: str,
    tally: Tally,
    baseline: Tally | None,
    width: int = 16,
    reference: Tally | None = None,
) -> str:
    """One row: quality, looping, speed, and the median time against free generation and
    against the plain ``formcast`` mode of the same run (when they ran)."""
    median = statistics.median(tally.seconds)
    rate = tally.tokens / sum(tally.seconds)
    exact = " ".join(f"{tally.share(f):6.1%}" for f in FIELDS)
    mean = sum(tally.share(f) for f in FIELDS) / len(FIELDS)
    ratios = ""
    for other in (baseline, reference):
        ratios += f"{median / statistics.median(other.seconds):8.2f}x" if other else f"{'-':>9}"
    return (
        f"{name:<{width}} {tally.valid / tally.count:6.1%}  {exact}  {mean:6.1%}  "
        f"{tally.loops:>7}  {median:8.2f}s {rate:8.1f} tok/s {ratios}"
    )


def print_ceiling(receipts: list[tuple[str, dict[str, str]]]) -> None:
    """The share of gold values that ``FromText`` fields can write at all, with the default
    options and with ``whole_lines``: a gold string (whitespace runs as one space) walked
    through the receipt's text automaton, a gold total among the numbers the slot takes;
    over the receipts whose gold has the field. Also the mean count of numbers a total may
    be. No model runs."""
    import numpy as np

    from formcast.automaton.text import TextAutomaton
    from formcast.text import TextSlot

    usable = np.ones(256, dtype=bool)
    kinds = {"FromText()": formcast.FromText(), "whole_lines": formcast.FromText(whole_lines=True)}
    for label, options in kinds.items():
        reachable = dict.fromkeys(FIELDS, 0)
        scored = dict.fromkeys(FIELDS, 0)
        numbers = 0
        for text, gold in receipts:
            strings = TextAutomaton(text, TextSlot("string", options), usable)
            written = [float(n) for n in number_candidates(text, whole_lines=options.whole_lines)]
            numbers += len(written)
            for name in FIELDS:
                if not _has(gold, name):
                    continue
                scored[name] += 1
                if name == "total":
                    reachable[name] += any(_matches(name, n, gold[name]) for n in written)
                else:
                    value = json.dumps(_norm(gold[name]), ensure_ascii=False)[1:-1]
                    reachable[name] += bool(value) and _walks(strings, value)
        shares = " ".join(f"{n} {reachable[n] / max(scored[n], 1):.1%}" for n in FIELDS)
        print(
            f"{len(receipts)} receipts, {label}: values it can write: {shares}; "
            f"{numbers / len(receipts):.1f} numbers per receipt"
        )


def _walks(automaton: Any, value: str) -> bool:
    state = automaton.initial
    for byte in value.encode():
        state = int(automaton.row(state)[byte])
    return bool(automaton.is_accepting(state))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=40)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1])
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["free", "formcast", "no-jump", "outlines"],
        choices=["free", *FORMCAST_MODES, "outlines"],
        help="outlines runs when it is installed and imports "
        "(default: free, formcast, no-jump, outlines)",
    )
    parser.add_argument(
        "--receipt-models",
        nargs="+",
        default=["current"],
        choices=sorted(RECEIPT_MODELS),
        help="output classes, each run through every mode (default: current, i.e. Receipt)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument(
        "--template",
        choices=sorted(TEMPLATES),
        default="default",
        help="the prompt's user message: formcast's default (instructions, fields, text) "
        "or text-first (text, then instructions and fields)",
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="only print the share of gold values a FromText field can write at all",
    )
    args = parser.parse_args()
    if args.ceiling:
        print_ceiling(load_receipts(args.start, args.count))
        return

    receipts = load_receipts(args.start, args.count)
    extractor = formcast.get_default_extractor()
    extractor.prompt_template = formcast.PromptTemplate(user=TEMPLATES[args.template])
    extractor.run(Receipt, receipts[0][0], max_new_tokens=args.max_new_tokens)  # warm-up
    for name in args.receipt_models:
        extractor.compile(RECEIPT_MODELS[name])  # compiled before timing, as Receipt is
    for copied in (CopiedReceipt, ShapedReceipt, LinedReceipt, ValidatedReceipt):
        extractor.compile(copied)
    labelled = args.receipt_models != ["current"]
    width = 24 + labelled * (1 + max(len(name) for name in args.receipt_models))
    print(
        f"{len(receipts)} receipts {args.start:03d}-{args.start + args.count - 1:03d}, "
        f"max_new_tokens={args.max_new_tokens}"
    )
    print(
        f"{'mode':<{width}} {'valid':>6}  {'company':>6} {'date':>6} {'address':>6} "
        f"{'total':>6}  {'mean':>6}  {'looping':>7}  {'s/receipt':>9} {'throughput':>14} "
        f"{'vs free':>8} {'vs formcast':>8}"
    )
    first = args.receipt_models[0]
    for model_name in args.receipt_models:
        output = RECEIPT_MODELS[model_name]
        suffix = f" {model_name}" if labelled else ""
        baseline = None
        if "free" in args.modes:
            baseline = run_free(extractor, output, receipts, args.max_new_tokens)
            print(report("free" + suffix, baseline, None, width), flush=True)
        for batch_size in args.batch_sizes:
            reference: Tally | None = None
            for mode, (own_output, options) in FORMCAST_MODES.items():
                if mode not in args.modes or (own_output is not None and model_name != first):
                    continue
                tally = run_formcast(
                    extractor,
                    own_output or output,
                    receipts,
                    batch_size,
                    options,
                    args.max_new_tokens,
                )
                name = f"{mode} b={batch_size}" + ("" if own_output else suffix)
                if mode == "formcast":
                    reference = tally
                print(report(name, tally, baseline, width, reference), flush=True)
        if "outlines" in args.modes:
            reason = outlines_missing()
            if reason is None:
                tally = run_outlines(extractor, output, receipts, args.max_new_tokens)
                version = importlib.metadata.version("outlines")
                print(report(f"outlines {version}{suffix}", tally, baseline, width), flush=True)
            else:
                print(f"outlines: {reason}, skipped (see benchmarks/README.md to install it)")


def outlines_missing() -> str | None:
    """Why the outlines mode cannot run here (``None`` when it can)."""
    try:
        import outlines  # noqa: F401
        from outlines.inputs import Chat  # noqa: F401
    except ImportError as e:
        try:
            importlib.metadata.version("outlines")
        except importlib.metadata.PackageNotFoundError:
            return "not installed"
        return f"installed but does not import ({e})"
    return None


if __name__ == "__main__":
    main()
