"""The SROIE benchmark's loop detector and its receipt classes (no model is run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import sroie

from formcast.constraint import output_spec
from formcast.extraction.extractor import (
    DEFAULT_INSTRUCTIONS,
    describe_fields,
    describe_instructions,
)


@pytest.mark.parametrize(
    ("text", "loops"),
    [
        ("12, 12, 12, 12, 12, ", True),  # "12, " five times
        ("12, 12, 12, 12, ", False),  # four times only
        ("TAMAN DAYA TAMAN DAYA TAMAN DAYA TAMAN DAYA TAMAN DAYA ", True),
        ("SDN BHD SDN BHD", False),
        ("ab" * 9, False),  # a 2-character period, too short a run to hold 5 chunks of 3+
        ("ab" * 10, True),  # ... until it is "abab" five times
        ("-" * 14, False),
        ("-" * 15, True),
        ("NO.53 55,57 & 59, JALAN SAGU 18, TAMAN DAYA, 81100 JOHOR BAHRU, JOHOR.", False),
        ("25/12/2018", False),
        ("", False),
        ("line\nline\nline\nline\nline\n", True),
    ],
)
def test_looping(text: str, loops: bool) -> None:
    assert sroie.looping(text) is loops


def test_output_loops_reads_field_values_or_the_raw_text() -> None:
    stuck = sroie.Receipt(company="A", date="1/1", address="JALAN " * 5, total=1.0)
    fine = sroie.Receipt(company="A", date="1/1", address="JALAN 1", total=1.0)
    assert sroie.output_loops(stuck, "")
    assert not sroie.output_loops(fine, "x, x, x, x, x, x, ")  # the value decides
    assert sroie.output_loops(None, '{"company":"' + "ABC" * 5)
    assert not sroie.output_loops(None, '{"company":"ABC"')


def test_receipt_classes_share_fields_and_differ_in_prompt_only() -> None:
    prompts = {}
    for name, output in sroie.RECEIPT_MODELS.items():
        assert list(output.model_fields) == list(sroie.FIELDS)
        schema = output_spec(output).json_schema
        prompts[name] = (
            describe_instructions(DEFAULT_INSTRUCTIONS, schema),
            describe_fields(schema),
        )
    assert prompts["plain"][0] == prompts["current"][0] == DEFAULT_INSTRUCTIONS
    assert prompts["plain"][1].splitlines()[0] == "- company (string)"
    described_instructions, described_fields = prompts["described"]
    assert described_instructions.startswith(DEFAULT_INSTRUCTIONS + "\nA shop receipt")
    assert "e.g." in described_fields


def test_described_examples_are_no_receipts_gold(sroie_dir: Path) -> None:
    """The invented examples must not leak an answer of any receipt."""
    examples = {
        str(v) for info in sroie.DescribedReceipt.model_fields.values() for v in info.examples or []
    }
    golds = " ".join(p.read_text() for p in sorted(sroie_dir.glob("*.json")))
    assert examples and not [e for e in examples if f'"{e}"' in golds]


def test_a_field_missing_from_the_gold_is_not_scored() -> None:
    tally = sroie.Tally()
    value = sroie.Receipt(company="ACME", date="1/1/2019", address="JALAN 1", total=9.0)
    full = {"company": "ACME", "date": "1/1/2019", "address": "JALAN 2", "total": "9.00"}
    no_address = {"company": "ACME", "date": "2/2/2019", "total": "9.00"}
    tally.add(value, full, 10, "")
    tally.add(value, no_address, 10, "")
    assert tally.scored == {"company": 2, "date": 2, "address": 1, "total": 2}
    assert [tally.share(name) for name in sroie.FIELDS] == [1.0, 0.5, 0.0, 1.0]


def test_a_gold_total_is_read_as_the_amount_written_in_it() -> None:
    assert sroie._matches("total", 3.9, "RM 3.90")
    assert sroie._matches("total", 1234.5, "1,234.50")
    assert not sroie._matches("total", 3.9, "RM 3.95")
    tally = sroie.Tally()
    value = sroie.Receipt(company="ACME", date="1/1/2019", address="JALAN 1", total=9.0)
    tally.add(value, {"company": "ACME", "date": "1/1/2019", "address": "", "total": " "}, 1, "")
    assert tally.scored == {"company": 1, "date": 1, "address": 0, "total": 0}
