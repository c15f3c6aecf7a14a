"""Disk cache: time to first mask of a cold compile against a cache hit in a new process.

Over a fixed sample of ``../shared/data/maskbench`` (every 25th file by default), in
specification mode for the default model's tokenizer:

* ``cold``: ``formcast.compile(schema, ..., cache=False)`` then the first mask (regex,
  automaton, initial row), in-process memo cleared before each schema;
* ``cold+write``: the same with the disk cache on, which also writes the entry;
* ``warm``: a second Python process compiles the same schemas with the same cache
  folder: each compile is a disk hit (canonical key, read, plain arrays back into an
  index) then the first mask.

``--recursive`` measures recursive constraints instead, each compiled to a pushdown
automaton: the recursive grammars of ``../shared/data/grammars``, a recursive Pydantic
model (a tree of nodes) and the maskbench schemas of the sample that recurse, each
named with its cold and warm times and their ratio.

The tokenizer, its :class:`~formcast.Vocabulary` and the vocabulary's fingerprint are
built before timing in both processes (once per process, ~0.3 s, not per schema); one
throwaway schema warms the code paths. Timings are wall-clock to the first mask.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/cache.py            # every 25th file
    python benchmarks/cache.py --every 10 --root /tmp/formcast-bench  # keep the entries
    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/cache.py --recursive --every 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "maskbench"
GRAMMARS = DATA.parent / "grammars"
_WARMUP_SCHEMA = {"type": "object", "properties": {"warm": {"type": "integer"}}}
_TREE = "model:Tree"


def _tree_model() -> Any:
    """A recursive Pydantic model: a node with a list of nodes."""
    from pydantic import BaseModel

    class Tree(BaseModel):
        name: str
        weight: float | None = None
        children: list[Tree] = []

    return Tree


def _output(name: str) -> Any:
    """The output type a sample name stands for: ``maskbench:<file>``,
    ``grammar:<path under the grammars folder, without .ebnf>`` or :data:`_TREE`."""
    kind, _, rest = name.partition(":")
    if kind == "grammar":
        import formcast

        return formcast.Grammar((GRAMMARS / f"{rest}.ebnf").read_text(encoding="utf-8"))
    if name == _TREE:
        return _tree_model()
    return json.loads((DATA / rest).read_text())["schema"]


def _recursive_grammars() -> list[str]:
    """The shared grammars whose rules recurse, as sample names."""
    import formcast

    names = []
    for path in sorted(GRAMMARS.rglob("*.ebnf")):
        grammar = formcast.Grammar(path.read_text(encoding="utf-8"))
        if grammar.is_recursive:
            names.append("grammar:" + path.relative_to(GRAMMARS).with_suffix("").as_posix())
    return names


def _vocabulary() -> Any:
    from transformers import AutoTokenizer

    from formcast.models import default_model_dir
    from formcast.vocabulary import Vocabulary

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    _ = vocabulary.fingerprint
    return vocabulary


def _first_mask(output: Any, vocabulary: Any, cache: Any) -> tuple[float, Any]:
    """Milliseconds from ``compile`` to the first mask, and the index."""
    import formcast
    from formcast.compiler import clear_memory_cache

    clear_memory_cache()
    started = time.perf_counter()
    index = formcast.compile(output, vocabulary, mode="specification", cache=cache)
    index.cursor().bitmask(vocabulary.size)
    return (time.perf_counter() - started) * 1000, index


def _first_mask_ms(output: Any, vocabulary: Any, cache: Any) -> float:
    return _first_mask(output, vocabulary, cache)[0]


def _outputs(names: list[str]) -> list[tuple[str, Any]]:
    return [(name, _output(name)) for name in names]


def _warm(root: str, names: list[str]) -> dict[str, Any]:
    """Run in the second process: every compile should be a disk hit."""
    import formcast.cache

    vocabulary = _vocabulary()
    _first_mask_ms(_WARMUP_SCHEMA, vocabulary, root)
    before = formcast.cache.disk_cache_stats()
    times = {name: _first_mask_ms(output, vocabulary, root) for name, output in _outputs(names)}
    after = formcast.cache.disk_cache_stats()
    return {"ms": times, "hits": after["hits"] - before["hits"]}


def _summary(values: list[float]) -> str:
    return f"p50 {statistics.median(values):8.2f}  max {max(values):8.2f}"


def _cold_runs(
    names: list[str], vocabulary: Any, root: str, recursive: bool
) -> tuple[dict[str, float], dict[str, float]]:
    """``cold`` and ``cold+write`` times of the outputs that compile (with ``recursive``:
    of those that compile to a pushdown automaton only)."""
    from formcast.automaton import PushdownAutomaton
    from formcast.errors import FormcastError

    cold: dict[str, float] = {}
    written: dict[str, float] = {}
    for name, output in _outputs(names):
        try:
            elapsed, index = _first_mask(output, vocabulary, False)
            if recursive and not isinstance(index.automaton, PushdownAutomaton):
                continue
            cold[name] = elapsed
            written[name] = _first_mask_ms(output, vocabulary, root)
        except FormcastError:
            continue  # unsupported by formcast: nothing to cache
    return cold, written


def _warm_runs(root: str, names: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--root", root, "--warm-only", *names],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the second process failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=25, help="take every N-th schema file")
    parser.add_argument("--root", help="cache root to use (default: a temporary folder)")
    parser.add_argument(
        "--recursive", action="store_true", help="recursive grammars, a model and schemas"
    )
    parser.add_argument("--warm-only", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_only is not None:
        print(json.dumps(_warm(args.root, args.warm_only)))
        return

    if not DATA.is_dir():
        raise SystemExit(f"shared maskbench data not found at {DATA}")
    with tempfile.TemporaryDirectory(prefix="formcast-cache-bench-") as scratch:
        root = args.root or scratch
        vocabulary = _vocabulary()
        _first_mask_ms(_WARMUP_SCHEMA, vocabulary, root)
        names = ["maskbench:" + p.name for p in sorted(DATA.glob("*.json"))[:: args.every]]
        if args.recursive:
            names = [*_recursive_grammars(), _TREE, *names]
        cold, written = _cold_runs(names, vocabulary, root, args.recursive)
        compiled = sorted(cold)
        warm_run = _warm_runs(root, compiled)
        warm: dict[str, float] = warm_run["ms"]
        from formcast.cache import disk_cache_dir

        sizes = [p.stat().st_size / 1024 for p in disk_cache_dir(root).glob("*.fcidx")]
        if args.recursive:
            print(f"recursive constraints (pushdown automata): {len(compiled)}")
            print(f"  of them maskbench schemas, every {args.every}th file: ", end="")
            print(sum(name.startswith("maskbench:") for name in compiled))
        else:
            print(f"maskbench, every {args.every}th file: {len(names)} schemas")
            print(f"compiled (not unsupported): {len(compiled)}")
        print(f"disk hits in the second process: {warm_run['hits']}/{len(compiled)}")
        print("time to first mask, ms")
        print(f"  cold (no disk cache)       {_summary([cold[n] for n in compiled])}")
        print(f"  cold + write entry         {_summary([written[n] for n in compiled])}")
        print(f"  warm (hit, new process)    {_summary([warm[n] for n in compiled])}")
        ratios = [cold[n] / warm[n] for n in compiled]
        print(
            f"  cold/warm per schema       p50 {statistics.median(ratios):8.1f}x"
            f"  min {min(ratios):6.1f}x"
        )
        fast = sum(warm[n] <= 5.0 for n in compiled)
        print(f"  hits within 5 ms           {fast}/{len(compiled)}")
        print(f"entry size, KiB              {_summary(sizes)}")
        if args.recursive:
            print("per constraint: cold ms, warm ms, cold/warm")
            for name in compiled:
                ratio = cold[name] / warm[name]
                print(f"  {name:<48} {cold[name]:9.1f} {warm[name]:8.2f} {ratio:7.1f}x")
            return
        slowest = sorted(compiled, key=lambda n: -warm[n])[:3]
        for name in slowest:
            print(f"  slowest hit: {name} {warm[name]:.2f} ms (cold {cold[name]:.1f} ms)")


if __name__ == "__main__":
    main()
