"""Extract the key fields of one scanned receipt (SROIE OCR text) with the default model.

    python examples/receipt.py          # receipt 000
    python examples/receipt.py 17       # receipt 017

The receipts live in the shared data folder next to the repository
(``<repo>/../shared/data/sroie``). The first run converts the default model into the
cache folder (about a minute); later runs load it in a second or two.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import BaseModel, Field

import formcast

SROIE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sroie"


class Receipt(BaseModel):
    company: str = Field(description="name of the shop or company that issued the receipt")
    date: str = Field(description="date of the purchase, as written on the receipt")
    address: str = Field(description="address of the shop")
    total: float = Field(description="total amount paid")


def main() -> int:
    number = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    path = SROIE / f"{number:03d}.txt"
    if not path.is_file():
        print(
            f"receipt text not found: expected {path} (the shared SROIE data, "
            "see ../shared/data/README.md)",
            file=sys.stderr,
        )
        return 2
    text = path.read_text(encoding="utf-8")

    extractor = formcast.Extractor.default()
    result = extractor.run(Receipt, text, max_new_tokens=128)
    receipt = result.unwrap()  # a Receipt; raises the item's error, if any

    print(f"receipt {path.name}:")
    print(receipt.model_dump_json(indent=2))
    print(
        f"finish_reason={result.finish_reason} prompt_tokens={result.prompt_tokens} "
        f"completion_tokens={result.completion_tokens} (forced: {result.forced_tokens}) "
        f"in {result.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
