"""Recursive regexes: compile and mask times of a pushdown index, against a lazy DFA.

Two grammars are written as recursive definitions (compiled to a
:class:`~formcast.automaton.PushdownAutomaton`): a JSON value (objects, arrays, strings,
numbers, literals) and arithmetic expressions. Each is also written *unrolled* to a fixed
depth (definitions ``d0..dN``, each calling the previous one: no recursion), which
compiles to a :class:`~formcast.automaton.LazyAutomaton` and is the baseline. Random
strings nested no deeper than that depth are accepted by both.

For each grammar and each of the two builds this prints, for the default model's
tokenizer:

* compile time (``formcast.compile`` of the regex, disk cache off, memory cache cleared;
  p50 over ``--repeats`` runs) and the time to the first mask;
* the time of every mask (``Cursor.bitmask``) along the random strings, token by token,
  from a fresh compile: p50 and p99, cold rows included, since a decoding step meets
  them too;

and the pushdown figures as ratios to the baseline's. The grammar front end can import
:func:`json_grammar`, :func:`arithmetic_grammar` and :func:`measure`.

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD/src python benchmarks/pushdown.py
    OMP_NUM_THREADS=1 PYTHONPATH=$PWD/src python benchmarks/pushdown.py --strings 200 --depth 5
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import formcast
from formcast.compiler import clear_memory_cache
from formcast.cursor import Cursor
from formcast.vocabulary import Vocabulary

STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"


def _json_value(call: Callable[[], str]) -> str:
    """A JSON value whose nested values are ``call()``."""
    inner = call()
    members = f"{STRING}:{inner}"
    return (
        rf"\{{(?:{members}(?:,{members})*)?\}}|\[(?:{inner}(?:,{inner})*)?\]"
        rf"|{STRING}|{NUMBER}|true|false|null"
    )


def json_grammar(depth: int | None) -> str:
    """A JSON value: recursive (``depth`` None) or unrolled ``depth`` levels deep."""
    if depth is None:
        return f"(?(DEFINE)(?P<value>{_json_value(lambda: '(?&value)')}))(?&value)"
    levels = [f"(?P<d0>{STRING}|{NUMBER}|true|false|null)"]
    for level in range(1, depth + 1):
        levels.append(f"(?P<d{level}>{_json_value(lambda level=level: f'(?&d{level - 1})')})")
    return f"(?(DEFINE){''.join(levels)})(?&d{depth})"


def _arithmetic(expr: str) -> str:
    return (
        r"(?P<term{k}>(?&factor{k})(?:[*/](?&factor{k}))*)"
        r"(?P<expr{k}>(?&term{k})(?:[-+](?&term{k}))*)"
    ).replace("{k}", expr)


def arithmetic_grammar(depth: int | None) -> str:
    """Arithmetic over integers with ``+ - * /``, parentheses and unary minus: recursive
    (``depth`` None) or with parentheses nested at most ``depth`` deep."""
    if depth is None:
        return (
            r"(?(DEFINE)(?P<expr>(?&term)(?:[-+](?&term))*)"
            r"(?P<term>(?&factor)(?:[*/](?&factor))*)"
            r"(?P<factor>-*(?:[0-9]+|\((?&expr)\))))(?&expr)"
        )
    levels = [r"(?P<factor0>-*[0-9]+)" + _arithmetic("0")]
    for level in range(1, depth + 1):
        factor = rf"(?P<factor{level}>-*(?:[0-9]+|\((?&expr{level - 1})\)))"
        levels.append(factor + _arithmetic(str(level)))
    return f"(?(DEFINE){''.join(levels)})(?&expr{depth})"


def random_json(rng: random.Random, depth: int) -> str:
    def value(level: int) -> Any:
        kind = rng.choice(["object", "array", "leaf", "leaf"] if level else ["leaf"])
        if kind == "object":
            keys = rng.sample(["id", "name", "tags", "x", "value", "ok"], rng.randint(0, 3))
            return {key: value(level - 1) for key in keys}
        if kind == "array":
            return [value(level - 1) for _ in range(rng.randint(0, 3))]
        return rng.choice([rng.randint(-999, 99999), rng.random() * 100, "abc déf", True, None])

    return json.dumps(value(depth), separators=(",", ":"), ensure_ascii=False)


def random_arithmetic(rng: random.Random, depth: int) -> str:
    def expr(level: int) -> str:
        terms = [term(level) for _ in range(rng.randint(1, 3))]
        return "".join(t if k == 0 else rng.choice("+-") + t for k, t in enumerate(terms))

    def term(level: int) -> str:
        factors = [factor(level) for _ in range(rng.randint(1, 2))]
        return "".join(f if k == 0 else rng.choice("*/") + f for k, f in enumerate(factors))

    def factor(level: int) -> str:
        sign = "-" if rng.random() < 0.1 else ""
        if level and rng.random() < 0.4:
            return f"{sign}({expr(level - 1)})"
        return sign + str(rng.randint(0, 999))

    return expr(depth)


@dataclass
class Figures:
    compile_ms: list[float] = field(default_factory=list)
    first_mask_ms: list[float] = field(default_factory=list)
    mask_us: list[float] = field(default_factory=list)
    automaton: str = ""


def measure(
    pattern: str, strings: list[str], tokenizer: Any, vocabulary: Vocabulary, repeats: int
) -> Figures:
    """Compile ``pattern`` ``repeats`` times (caches off), then time every mask along
    ``strings`` from the last compile (every string must be accepted)."""
    figures = Figures()
    width = vocabulary.size
    regex = formcast.Regex(pattern)
    index = None
    for _ in range(repeats):
        clear_memory_cache()
        started = time.perf_counter()
        index = formcast.compile(regex, vocabulary, cache=False)
        compiled = time.perf_counter()
        Cursor(index).bitmask(width)
        figures.compile_ms.append((compiled - started) * 1e3)
        figures.first_mask_ms.append((time.perf_counter() - compiled) * 1e3)
    assert index is not None
    figures.automaton = type(index.automaton).__name__
    buffer = Cursor(index).bitmask(width)
    for text in strings:
        cursor = Cursor(index)
        for token in tokenizer.encode(text, add_special_tokens=False):
            tick = time.perf_counter()
            cursor.bitmask(width, out=buffer)
            figures.mask_us.append((time.perf_counter() - tick) * 1e6)
            cursor.advance(token)
        if not cursor.is_accepting():
            raise AssertionError(f"{figures.automaton} rejected {text[:80]!r}")
    return figures


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--strings", type=int, default=100, help="random strings per grammar")
    parser.add_argument("--depth", type=int, default=4, help="nesting of strings and baseline")
    parser.add_argument("--repeats", type=int, default=7, help="compiles timed per build")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from formcast.models import default_model_dir

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    rng = random.Random(args.seed)
    cases = [
        ("json value", json_grammar, random_json),
        ("arithmetic", arithmetic_grammar, random_arithmetic),
    ]
    print(
        f"{args.strings} random strings per grammar, nested <= {args.depth}; "
        f"baseline: the grammar unrolled {args.depth} levels (a LazyAutomaton)"
    )
    header = f"{'grammar':<12}{'build':<20}{'compile p50 ms':>15}{'first mask ms':>15}"
    print(header + f"{'mask p50 us':>13}{'mask p99 us':>13}{'masks':>8}")
    for name, grammar, generate in cases:
        strings = [generate(rng, rng.randint(0, args.depth)) for _ in range(args.strings)]
        results = {}
        for build, depth in (("recursive", None), ("unrolled", args.depth)):
            figures = measure(grammar(depth), strings, tokenizer, vocabulary, args.repeats)
            results[build] = figures
            print(
                f"{name:<12}{figures.automaton:<20}"
                f"{statistics.median(figures.compile_ms):>15.2f}"
                f"{statistics.median(figures.first_mask_ms):>15.2f}"
                f"{_quantile(figures.mask_us, 0.5):>13.1f}{_quantile(figures.mask_us, 0.99):>13.1f}"
                f"{len(figures.mask_us):>8}"
            )
        pushdown, baseline = results["recursive"], results["unrolled"]
        ratios = [
            statistics.median(pushdown.compile_ms) / statistics.median(baseline.compile_ms),
            _quantile(pushdown.mask_us, 0.5) / _quantile(baseline.mask_us, 0.5),
            _quantile(pushdown.mask_us, 0.99) / _quantile(baseline.mask_us, 0.99),
        ]
        print(
            f"{name:<12}{'ratio (pushdown/lazy)':<20}{ratios[0]:>15.2f}{'':>15}"
            f"{ratios[1]:>13.2f}{ratios[2]:>13.2f}"
        )


if __name__ == "__main__":
    main()
