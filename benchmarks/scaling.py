"""How compile cost grows with schema size.

For families of generated schemas (many properties, optional properties, deep nesting,
large enums, long string bounds) this prints, per size: the regex length, the time to
build the regex and the lazy automaton, the time to the first mask (first row built),
the time to walk one valid instance token by token, and the peak Python memory of all
that (tracemalloc, in a second run so that its overhead does not distort the timings).

    python benchmarks/scaling.py
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

from transformers import AutoTokenizer

from formcast.automaton import LazyAutomaton
from formcast.index import TokenIndex
from formcast.models import default_model_dir
from formcast.regex.translator import schema_to_regex
from formcast.vocabulary import Vocabulary

Family = Callable[[int], tuple[dict[str, Any], Any]]


def many_properties(n: int) -> tuple[dict[str, Any], Any]:
    props = {f"field_{i}": {"type": "integer"} for i in range(n)}
    schema = {"type": "object", "properties": props, "required": list(props)}
    return schema, {name: i for i, name in enumerate(props)}


def optional_properties(n: int) -> tuple[dict[str, Any], Any]:
    props = {f"field_{i}": {"type": "string"} for i in range(n)}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    return schema, {name: "x" for i, name in enumerate(props) if i % 3 == 0}


def nesting(depth: int) -> tuple[dict[str, Any], Any]:
    schema: dict[str, Any] = {"type": "integer"}
    value: Any = 7
    for level in range(depth):
        schema = {
            "type": "object",
            "properties": {f"level{level}": schema, "name": {"type": "string"}},
            "required": [f"level{level}", "name"],
        }
        value = {f"level{level}": value, "name": "n"}
    return schema, value


def big_enum(n: int) -> tuple[dict[str, Any], Any]:
    values = [f"value-{i:05d}" for i in range(n)]
    return {"enum": values}, values[n // 2]


def long_strings(n: int) -> tuple[dict[str, Any], Any]:
    schema = {
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": n // 2, "maxLength": n}},
        "required": ["text"],
    }
    return schema, {"text": "a" * (n // 2)}


FAMILIES: dict[str, tuple[Family, list[int]]] = {
    "properties (required)": (many_properties, [10, 100, 1000]),
    "properties (optional)": (optional_properties, [10, 30, 100]),
    "nesting depth": (nesting, [5, 20, 50]),
    "enum values": (big_enum, [10, 1000, 10000]),
    "string maxLength": (long_strings, [100, 1000, 10000]),
}


def run_once(
    vocabulary: Vocabulary, tokenizer: Any, schema: dict[str, Any], value: Any
) -> list[float]:
    """Regex length and the timestamps of each stage."""
    started = time.perf_counter()
    regex = schema_to_regex(schema, mode="generation")
    regex_done = time.perf_counter()
    index = TokenIndex(LazyAutomaton(regex), vocabulary)
    built = time.perf_counter()
    cursor = index.cursor()
    cursor.bitmask()
    first_mask = time.perf_counter()
    text = json.dumps(value, separators=(",", ":"))
    for token in tokenizer.encode(text, add_special_tokens=False):
        cursor.bitmask()
        cursor.advance(token)
    if not cursor.is_accepting():
        raise RuntimeError("the instance was not accepted")
    walked = time.perf_counter()
    return [len(regex), started, regex_done, built, first_mask, walked]


def measure(
    vocabulary: Vocabulary, tokenizer: Any, schema: dict[str, Any], value: Any
) -> Iterator[str]:
    length, started, regex_done, built, first_mask, walked = run_once(
        vocabulary, tokenizer, schema, value
    )
    tracemalloc.start()
    run_once(vocabulary, tokenizer, schema, value)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    yield f"{int(length):>10,}"
    yield f"{(regex_done - started) * 1000:>9.1f}"
    yield f"{(built - regex_done) * 1000:>11.1f}"
    yield f"{(first_mask - started) * 1000:>12.1f}"
    yield f"{(walked - first_mask) * 1000:>10.1f}"
    yield f"{peak / 2**20:>9.1f}"


def main() -> None:
    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    print(
        f"{'family':<24}{'size':>7}{'regex len':>10}{'regex ms':>9}{'automaton ms':>13}"
        f"{'1st mask ms':>12}{'walk ms':>10}{'peak MB':>9}"
    )
    for name, (family, sizes) in FAMILIES.items():
        for size in sizes:
            schema, value = family(size)
            cells = " ".join(measure(vocabulary, tokenizer, schema, value))
            print(f"{name:<24}{size:>7} {cells}", flush=True)


if __name__ == "__main__":
    main()
