"""Disk cache: time to first mask of a cold compile against a cache hit in a new process.

Over a fixed sample of ``../shared/data/maskbench`` (every 25th file by default), in
specification mode for the default model's tokenizer:

* ``cold``: ``formcast.compile(schema, ..., cache=False)`` then the first mask (regex,
  automaton, initial row), in-process memo cleared before each schema;
* ``cold+write``: the same with the disk cache on, which also writes the entry;
* ``warm``: a second Python process compiles the same schemas with the same cache
  folder: each compile is a disk hit (canonical key, read, unpickle) then the first mask.

The tokenizer, its :class:`~formcast.Vocabulary` and the vocabulary's fingerprint are
built before timing in both processes (once per process, ~0.3 s, not per schema); one
throwaway schema warms the code paths. Timings are wall-clock to the first mask.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/cache.py            # every 25th file
    python benchmarks/cache.py --every 10 --root /tmp/formcast-bench  # keep the entries
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
_WARMUP_SCHEMA = {"type": "object", "properties": {"warm": {"type": "integer"}}}


def _vocabulary() -> Any:
    from transformers import AutoTokenizer

    from formcast.models import default_model_dir
    from formcast.vocabulary import Vocabulary

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    _ = vocabulary.fingerprint
    return vocabulary


def _first_mask_ms(schema: Any, vocabulary: Any, cache: Any) -> float:
    import formcast
    from formcast.compiler import clear_memory_cache

    clear_memory_cache()
    started = time.perf_counter()
    index = formcast.compile(schema, vocabulary, mode="specification", cache=cache)
    index.cursor().bitmask(vocabulary.size)
    return (time.perf_counter() - started) * 1000


def _schemas(names: list[str]) -> list[tuple[str, Any]]:
    return [(name, json.loads((DATA / name).read_text())["schema"]) for name in names]


def _warm(root: str, names: list[str]) -> dict[str, Any]:
    """Run in the second process: every compile should be a disk hit."""
    import formcast.cache

    vocabulary = _vocabulary()
    _first_mask_ms(_WARMUP_SCHEMA, vocabulary, root)
    before = formcast.cache.disk_cache_stats()
    times = {name: _first_mask_ms(schema, vocabulary, root) for name, schema in _schemas(names)}
    after = formcast.cache.disk_cache_stats()
    return {"ms": times, "hits": after["hits"] - before["hits"]}


def _summary(values: list[float]) -> str:
    return f"p50 {statistics.median(values):8.2f}  max {max(values):8.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=25, help="take every N-th schema file")
    parser.add_argument("--root", help="cache root to use (default: a temporary folder)")
    parser.add_argument("--warm-only", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.warm_only is not None:
        print(json.dumps(_warm(args.root, args.warm_only)))
        return

    from formcast.errors import FormcastError

    if not DATA.is_dir():
        raise SystemExit(f"shared maskbench data not found at {DATA}")
    with tempfile.TemporaryDirectory(prefix="formcast-cache-bench-") as scratch:
        root = args.root or scratch
        vocabulary = _vocabulary()
        _first_mask_ms(_WARMUP_SCHEMA, vocabulary, root)
        names = [p.name for p in sorted(DATA.glob("*.json"))[:: args.every]]
        cold: dict[str, float] = {}
        written: dict[str, float] = {}
        for name, schema in _schemas(names):
            try:
                cold[name] = _first_mask_ms(schema, vocabulary, False)
                written[name] = _first_mask_ms(schema, vocabulary, root)
            except FormcastError:
                continue  # unsupported by formcast: nothing to cache
        compiled = sorted(cold)
        done = subprocess.run(
            [sys.executable, __file__, "--root", root, "--warm-only", *compiled],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"the second process failed:\n{done.stderr[-3000:]}")
        warm_run = json.loads(done.stdout.strip().splitlines()[-1])
        warm: dict[str, float] = warm_run["ms"]
        from formcast.cache import disk_cache_dir

        sizes = [p.stat().st_size / 1024 for p in disk_cache_dir(root).glob("*.fcidx")]
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
        slowest = sorted(compiled, key=lambda n: -warm[n])[:3]
        for name in slowest:
            print(f"  slowest hit: {name} {warm[name]:.2f} ms (cold {cold[name]:.1f} ms)")


if __name__ == "__main__":
    main()
