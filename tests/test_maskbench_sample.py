"""A fixed sample of the shared maskbench schemas, judged through the public cursor API.

Every 50th schema (sorted by file name, 69 schemas across all origins) is compiled in
specification mode in a worker process with a time limit and a memory cap; every test
instance is walked token by token. Soundness is absolute: no invalid instance may be
accepted, and no schema may crash the compiler. The full run is
``python benchmarks/maskbench.py``.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import maskbench


@pytest.mark.slow
def test_sample_has_no_invalidation_errors_and_no_crash(maskbench_dir: Path) -> None:
    files = maskbench.schema_files(every=50)
    assert len(files) > 60
    results = list(maskbench.run_all(files, timeout=20.0, memory_mb=4096))
    print("\n" + maskbench.table(results))
    counts = collections.Counter(r.status for r in results)
    accepted_invalid = [
        f"{r.name}: {r.detail}" for r in results if r.status == "invalidation_error"
    ]
    crashed = [f"{r.name}: {r.detail}" for r in results if r.status == "crash"]
    assert accepted_invalid == []
    assert crashed == []
    assert counts["pass"] >= 0.75 * len(results), counts


def test_serialization_follows_property_order() -> None:
    schema = {
        "type": "object",
        "properties": {"b": {"type": "object", "properties": {"y": {}, "x": {}}}, "a": {}},
    }
    value = {"a": 1, "b": {"x": 2, "y": 3}, "extra": True}
    assert maskbench.serialize(value, schema) == '{"b":{"y":3,"x":2},"a":1,"extra":true}'


def test_origin_names() -> None:
    assert maskbench.origin_of("Github_easy---o1.json") == "Github_easy"
    assert maskbench.origin_of("BFCL_java_11.json") == "BFCL_java"
