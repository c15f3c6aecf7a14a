"""The cost of binding a request's text to a compiled ``FromText`` constraint.

For SROIE receipt texts cut or repeated to several lengths, with the default tokenizer:

* ``bind``: ``index.cursor(text=...)`` (the text automata and the weighted distances),
  the median of 7;
* ``first row``: the first mask inside the first copied value (every token that starts
  a word of the text is walked), the median over 7 requests, each bound afresh;
* ``request``: the two together, what a request pays before its first copied token;
* ``next rows``: the median mask time for the rest of a gold-like output, token by token;
* the ratio of ``bind`` to the same constraint compiled without ``FromText`` and reused
  (``cursor()`` on a cached index: the baseline a request pays without a text).

    python benchmarks/from_text.py
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel

import formcast
from formcast import FromText
from formcast.models import default_model_dir

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sroie"
LENGTHS = (500, 2_000, 8_000)


class Copied(BaseModel):
    company: Annotated[str, FromText()]
    date: Annotated[str, FromText()]
    address: Annotated[str, FromText()]
    total: Annotated[float, FromText()]


class Plain(BaseModel):
    company: str
    date: str
    address: str
    total: float


def _text(length: int) -> str:
    corpus = "\n".join((DATA / f"{n:03d}.txt").read_text() for n in range(20))
    return (corpus * (1 + length // len(corpus)))[:length]


def _median_ms(run: object, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def main() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    copied = formcast.compile(Copied, tokenizer, cache=False)
    plain = formcast.compile(Plain, tokenizer, cache=False)
    baseline = _median_ms(plain.cursor)
    print(f"cursor() without a text: {baseline * 1e3:.1f} us")
    header = ("chars", "bind ms", "first row ms", "request ms", "next rows ms", "bind/base")
    print(" ".join(f"{name:>{len(name) + 2}}" for name in header))
    for length in LENGTHS:
        text = _text(length)
        bind = _median_ms(lambda text=text: copied.cursor(text=text))
        firsts = []
        for _ in range(7):
            cursor = copied.cursor(text=text)
            cursor.advance_bytes(cursor.forced_bytes())
            started = time.perf_counter()
            cursor.allowed_token_ids()
            firsts.append((time.perf_counter() - started) * 1e3)
        first = statistics.median(firsts)
        words = " ".join(text.split()).split(" ")
        value = json.dumps(words[1], ensure_ascii=False)[1:-1] if len(words) > 1 else ""
        rest = tokenizer.encode(value + '","date":"', add_special_tokens=False)
        steps = []
        for token in rest:
            started = time.perf_counter()
            allowed = cursor.allowed_token_ids()
            steps.append((time.perf_counter() - started) * 1e3)
            if token not in allowed:
                break
            cursor.advance(token)
        following = statistics.median(steps) if steps else float("nan")
        ratio = bind / baseline
        request = bind + first
        print(
            f"{length:>7} {bind:>9.2f} {first:>14.2f} {request:>12.2f} {following:>14.3f}"
            f" {ratio:>10.0f}x"
        )


if __name__ == "__main__":
    main()
