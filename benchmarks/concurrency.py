"""Concurrent async calls against one ``extract_many``: do the calls share one batch?

On SROIE receipts and the default model (greedy, ``ShapedReceipt`` from ``sroie.py``),
in one process and one run:

* ``extract_many``   - the reference: ``Extractor.extract_many`` of the N texts at batch N;
* ``gather aextract`` - N ``Extractor.aextract`` calls under ``asyncio.gather``, which
                        join the extractor's shared continuous batch (``async_batch_size=N``);
* ``one call``       - a single ``aextract`` alone, times N: what N calls would cost if
                        each decoded alone.

Printed per path: seconds, decoding passes (forward calls of the model, prefills
included), and the ratio of seconds to ``extract_many``'s. The calls share the batch when
``gather aextract`` stays near 1.0x (the target is at most 1.2x) and far below ``one
call``. Also checked: the outputs of the two batched paths are the same values.

    python benchmarks/concurrency.py                 # 32 receipts
    python benchmarks/concurrency.py --count 8
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sroie import ShapedReceipt, load_receipts  # noqa: E402


class Passes:
    """Counts the model's forward calls."""

    def __init__(self, model: Any) -> None:
        self.count = 0
        model.register_forward_hook(self._seen)

    def _seen(self, *_: Any) -> None:
        self.count += 1


def timed(passes: Passes, run: Any) -> tuple[float, int, Any]:
    passes.count = 0
    started = time.perf_counter()
    found = run()
    return time.perf_counter() - started, passes.count, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=32, help="receipts (and batch size)")
    parser.add_argument("--max-new-tokens", type=int, default=200)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    texts = [text for text, _ in load_receipts(0, args.count)]
    from formcast import Extractor

    extractor = Extractor.default(async_batch_size=args.count)
    options: dict[str, Any] = {"max_new_tokens": args.max_new_tokens}
    extractor.extract(ShapedReceipt, texts[0], **options)  # compile, shared prefix, warm-up
    passes = Passes(extractor.model)

    def many() -> list[Any]:
        results = extractor.extract_many(
            ShapedReceipt, texts, batch_size=args.count, progress=False, **options
        )
        return [r.value for r in results]

    async def gathered() -> list[Any]:
        calls = (extractor.aextract(ShapedReceipt, text, **options) for text in texts)
        return list(await asyncio.gather(*calls, return_exceptions=True))

    async def alone() -> Any:
        return await extractor.aextract(ShapedReceipt, texts[0], **options)

    rows = [
        ("extract_many", *timed(passes, many)),
        ("gather aextract", *timed(passes, lambda: asyncio.run(gathered()))),
    ]
    one_seconds, one_passes, _ = timed(passes, lambda: asyncio.run(alone()))
    reference = rows[0][1]
    print(f"{args.count} SROIE receipts, default model, greedy, ShapedReceipt")
    print(f"{'path':<18}{'seconds':>9}{'passes':>8}{'ratio':>8}")
    for name, seconds, count, _ in rows:
        print(f"{name:<18}{seconds:>9.2f}{count:>8}{seconds / reference:>7.2f}x")
    estimate = one_seconds * args.count
    print(
        f"{'one call x' + str(args.count):<18}{estimate:>9.2f}{one_passes * args.count:>8}"
        f"{estimate / reference:>7.2f}x"
    )
    same = rows[0][3] == rows[1][3]
    print(f"same values from both batched paths: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
