"""Extract the key fields of one scanned receipt (SROIE OCR text) with the default model.

    python examples/receipt.py          # receipt 000
    python examples/receipt.py 17       # receipt 017

The receipts live in the shared data folder next to the repository
(``<repo>/../shared/data/sroie``). The first run converts the default model into the
cache folder (about a minute); later runs load it in a second or two.

The class is the one that extracts receipts best with the default 135M model
(``ShapedReceipt`` in ``benchmarks/sroie.py``): such a small model rewrites or invents
values when it may write anything, so every field is copied from the text
(``FromText``), the date may only be a date written in it (a ``pattern``), and each
field's description tells the model which value to copy.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

import formcast
from formcast import FromText

SROIE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "sroie"


#: Day, month and year as receipts write them: 25/12/2018, 2018-12-25, 25.12.18, 25 DEC 2018.
DATE = r"^([0-9]{1,4}[/.-][0-9]{1,2}[/.-][0-9]{2,4}|[0-9]{1,2} [A-Za-z]{3,9} [0-9]{2,4})$"


class Receipt(BaseModel):
    company: Annotated[str, FromText()] = Field(
        description="name of the company that issued the receipt"
    )
    date: Annotated[str, FromText(), Field(pattern=DATE)] = Field(
        description="date of the receipt, as written on it"
    )
    address: Annotated[str, FromText()] = Field(description="address of the company")
    total: Annotated[float, FromText()] = Field(description="total amount paid")


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
    result = extractor.run(Receipt, text, max_new_tokens=200)
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
