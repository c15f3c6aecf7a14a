"""Batched extraction over eight SROIE receipts: ``formcast.extract_many``.

Rows of a batch share every forward pass; results come back in input order, and an
item that fails carries its error instead of stopping the run.

    python examples/batch.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, Field

import formcast

SROIE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sroie"
COUNT = 8


class Receipt(BaseModel):
    company: str = Field(description="name of the shop or company that issued the receipt")
    date: str = Field(description="date of the purchase, as written on the receipt")
    address: str = Field(description="address of the shop")
    total: float = Field(description="total amount paid")


def main() -> int:
    paths = [SROIE / f"{i:03d}.txt" for i in range(COUNT)]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        print(
            f"receipt text not found: expected {missing[0]} (the shared SROIE data, "
            "see ../shared/data/README.md)",
            file=sys.stderr,
        )
        return 2
    texts = [p.read_text(encoding="utf-8") for p in paths]

    results = formcast.extract_many(Receipt, texts, batch_size=4, max_new_tokens=128)
    failures = 0
    for path, result in zip(paths, results, strict=True):
        if result.ok:
            print(f"{path.name}: {result.value!r}  [{result.finish_reason}]")
        else:
            failures += 1
            print(f"{path.name}: error: {result.error}")
    print(f"{COUNT - failures}/{COUNT} receipts extracted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
