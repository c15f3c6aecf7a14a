"""The decoding loop's host work per step, apart from the model: does it fit in a pass?

A GPU pass of the default model takes a few milliseconds at batch 32 and tens at batch 256
(the reference of ``gpu.py``); the loop's host work per step (advancing each row's
cursor, jump-forward, the loop guard, the masks, a ``FromText`` row's first visits of its
states, choosing the tokens) must stay below that to be hidden. This script measures that
work on the CPU, without a GPU: ``extract_many`` runs on a scripted model (the test
suite's ``ScriptedModel``) that writes each receipt's gold fields as the output, so the
outputs, the states visited and the token counts are those of a good extraction, and the
time spent inside the model's ``forward`` is subtracted.

For ``Receipt`` and ``ShapedReceipt`` (``FromText``) from ``sroie.py``, per batch size, it
prints the decoding steps, output tokens, the host milliseconds per step and microseconds
per row and step. ``--profile`` adds the loop functions that took the most time.

    python benchmarks/host_work.py                        # batches 1 32 256
    python benchmarks/host_work.py --batch-sizes 32 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from sroie import Receipt, ShapedReceipt, load_receipts  # noqa: E402

from support.decoding_cases import ASSISTANT  # noqa: E402
from support.scripted_model import ScriptedModel, following  # noqa: E402


class TimedModel(ScriptedModel):
    """The scripted model, timing its own forward passes."""

    forward_seconds = 0.0
    passes = 0

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return super().forward(*args, **kwargs)
        finally:
            self.forward_seconds += time.perf_counter() - started
            self.passes += 1


def gold_output(gold: dict[str, str]) -> str:
    """The compact JSON of a receipt's gold fields, in the classes' field order."""
    total: Any = gold.get("total", "0")
    try:
        total = float(total)
    except ValueError:
        total = 0.0
    fields = {name: gold.get(name, "") for name in ("company", "date", "address")}
    return json.dumps({**fields, "total": total}, separators=(",", ":"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 256])
    parser.add_argument("--receipts", type=int, default=64, help="distinct receipts, cycled")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-gc", action="store_true", help="garbage collector off while timed")
    args = parser.parse_args()
    import torch

    # One thread: the few tensor operations of a step (stacking masks, the argmax) then
    # never wait on a second thread that another process has the core of.
    torch.set_num_threads(1)
    from formcast import Extractor
    from formcast.models import load_default_model

    _, tokenizer = load_default_model()
    receipts = load_receipts(0, args.receipts)
    by_start = {text[:60]: gold_output(gold) for text, gold in receipts}

    def targets(prompt: str) -> list[str]:
        return [output for start, output in by_start.items() if start in prompt]

    model = TimedModel(following(tokenizer, targets, ASSISTANT))
    extractor = Extractor(model, tokenizer, max_new_tokens=200)
    print("host work of extract_many per decoding step, the model's forward time left out")
    print(f"{'class':<15}{'batch':>6}{'steps':>7}{'tokens':>8}{'ms/step':>9}{'us/token':>10}")
    for output in (Receipt, ShapedReceipt):
        extractor.extract(output, receipts[0][0])  # compile; the shared prefix
        for batch in args.batch_sizes:
            texts = [receipts[i % len(receipts)][0] for i in range(max(batch, 4))]
            model.forward_seconds, model.passes = 0.0, 0
            profile = cProfile.Profile() if args.profile else None
            if args.no_gc:
                gc.collect()
                gc.disable()
            started = time.perf_counter()
            if profile is not None:
                profile.enable()
            results = list(extractor.extract_many(output, texts, batch_size=batch, progress=False))
            if profile is not None:
                profile.disable()
            host = time.perf_counter() - started - model.forward_seconds
            gc.enable()
            tokens = sum(r.generated_tokens for r in results)
            print(
                f"{output.__name__:<15}{batch:>6}{model.passes:>7}{tokens:>8}"
                f"{1000 * host / max(model.passes, 1):>9.2f}{1e6 * host / max(tokens, 1):>10.1f}"
            )
            if profile is not None:
                stats = pstats.Stats(profile)
                stats.sort_stats("tottime").print_stats(r"formcast[/\\]", 12)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
