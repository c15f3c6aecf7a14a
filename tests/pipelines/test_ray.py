"""formcast.ray: extraction over Ray Data, on one local cluster for the whole session.

Most tests load the tiny random model from a folder (every actor loads it by path) and
compare with ``extract_many`` in this process: greedy decoding gives the same output
whichever process and batch a row goes through. Starting actors is slow (each imports
torch and transformers), so each job checks several things.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from formcast import InvalidOptionError
from support.ray_support import CRASHED_SUFFIX, Item, compile_here

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason='ray is not installed: pip install "formcast[ray]"',
)

ROOT = Path(__file__).resolve().parents[2]
OUTPUT_COLUMNS = [
    "value",
    "error",
    "finish_reason",
    "prompt_tokens",
    "generated_tokens",
    "spans",
]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )


def test_import_formcast_does_not_import_ray() -> None:
    done = _python(
        "import sys, formcast, formcast.pipelines.rows, formcast.pipelines.cli\n"
        "formcast.Extractor, formcast.extract_many\n"
        "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if 'ray' in m)\n"
    )
    assert done.returncode == 0, done.stderr


def test_without_ray_the_error_says_how_to_install_it() -> None:
    done = _python(
        "import sys\n"
        "sys.modules['ray'] = None  # what Python does for a package that is not there\n"
        "try:\n"
        "    import formcast.ray\n"
        "except ImportError as error:\n"
        "    print(error)\n"
        "else:\n"
        "    raise SystemExit('expected an ImportError')\n"
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install "formcast[ray]"' in done.stdout


@needs_ray
def test_rows_match_extract_many_and_bad_rows_get_an_error(
    ray_cluster: Any, tiny_model_dir: Path, tiny_extractor: Any, tmp_path: Path
) -> None:
    import ray

    import formcast.ray

    texts = [f"{n} boxes of {name}" for n, name in enumerate("abcdefghij")]
    bad = {10: "", 11: None, 12: "word " * 1200}  # empty, missing, longer than the context
    rows = [{"id": i, "text": t, "shop": f"shop {i % 3}"} for i, t in enumerate(texts)]
    rows += [{"id": i, "text": t, "shop": "shop 0"} for i, t in bad.items()]
    ray_cluster.compile_log.unlink(missing_ok=True)

    dataset = ray.data.from_items(rows)
    out = formcast.ray.extract(
        dataset, Item, model=tiny_model_dir, batch_size=3, concurrency=2, max_new_tokens=40
    ).materialize()
    got = {row["id"]: row for row in out.take_all()}

    assert sorted(got) == list(range(13))  # none lost, none twice
    assert set(got[0]) == {"id", "text", "shop", *OUTPUT_COLUMNS}
    expected = list(
        formcast.extract_many(
            Item, texts, model=tiny_extractor, batch_size=3, progress=False, max_new_tokens=40
        )
    )
    for i, result in enumerate(expected):
        row = got[i]
        assert (row["text"], row["shop"]) == (texts[i], f"shop {i % 3}")
        assert row["error"] is None and result.ok
        assert Item.model_validate_json(row["value"]) == result.value
        assert row["finish_reason"] == result.finish_reason
        assert row["prompt_tokens"] == result.prompt_tokens > 0
        assert row["generated_tokens"] == result.generated_tokens > 0
    assert got[10]["error"].startswith("EmptyInputError: ")
    assert got[11]["error"] == "InvalidRowError: expected a str in column 'text', found null"
    assert got[12]["error"].startswith("ContextLengthError: ")
    for i in bad:
        assert got[i]["value"] is None and got[i]["finish_reason"] is None

    # The constraint was compiled on the driver only: the actors compiled nothing ...
    compiles = ray_cluster.compile_log
    assert not compiles.exists(), compiles.read_text()
    # ... and a worker that does compile is counted, so the silence above means something.
    pid = ray.get(ray.remote(compile_here).remote(str(tiny_model_dir)))
    assert compiles.read_text().split() == [str(pid)]

    # The value column is JSON text, so that every block has the same schema on write.
    out.write_json(str(tmp_path / "out"))
    written = [
        json.loads(line)
        for path in sorted((tmp_path / "out").glob("*.json"))
        for line in path.read_text().splitlines()
    ]
    assert sorted(r["id"] for r in written) == list(range(13))
    assert all(isinstance(r["value"], str) for r in written if r["error"] is None)


@needs_ray
def test_an_actor_killed_mid_job_loses_no_row_and_repeats_none(
    ray_cluster: Any, tiny_model_dir: Path, tiny_extractor: Any
) -> None:
    import ray

    import formcast.ray

    texts = [f"parcel {n}" for n in range(12)]
    flag = ray_cluster.crash_flag
    flag.write_text(texts[7])  # the actor that gets row 7 exits in the middle of the job
    crashed = flag.with_name(flag.name + CRASHED_SUFFIX)
    crashed.unlink(missing_ok=True)

    dataset = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
    out = formcast.ray.extract(
        dataset, Item, model=tiny_model_dir, batch_size=2, concurrency=1, max_new_tokens=24
    )
    rows = out.take_all()

    assert crashed.exists() and not flag.exists()  # the actor did exit
    assert sorted(row["id"] for row in rows) == list(range(12))
    expected = formcast.extract_many(
        Item, texts, model=tiny_extractor, batch_size=2, progress=False, max_new_tokens=24
    )
    by_id = {row["id"]: row for row in rows}
    for i, result in enumerate(expected):
        assert by_id[i]["error"] is None
        assert Item.model_validate_json(by_id[i]["value"]) == result.value


@needs_ray
def test_the_call_is_checked_on_the_driver(ray_cluster: Any, tiny_model_dir: Path) -> None:
    import ray

    import formcast.ray

    rows = ray.data.from_items([{"id": 1, "text": "two pens"}])
    with pytest.raises(InvalidOptionError, match="concurrency"):
        formcast.ray.extract(rows, Item, model=tiny_model_dir, concurrency=0)
    with pytest.raises(InvalidOptionError, match="batch_size"):
        formcast.ray.extract(rows, Item, model=tiny_model_dir, batch_size=0)
    with pytest.raises(InvalidOptionError, match=r"'body'.*'id', 'text'"):
        formcast.ray.extract(rows, Item, model=tiny_model_dir, text_column="body")
    clashing = ray.data.from_items([{"text": "two pens", "value": 3}])
    with pytest.raises(InvalidOptionError, match=r"output columns.*\['value'\]"):
        formcast.ray.extract(clashing, Item, model=tiny_model_dir)
    with pytest.raises(formcast.SchemaError):
        formcast.ray.extract(rows, {"type": "strnig"}, model=tiny_model_dir)


@needs_ray
@pytest.mark.slow
def test_default_model_matches_extract_many(ray_cluster: Any, default_extractor: Any) -> None:
    import ray

    import formcast.ray

    texts = [
        "ACME HARDWARE\nHammer x 2\nTOTAL 20.00",
        "KEDAI ALI\nKopi x 3\nTOTAL RM 5.50",
    ]
    dataset = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
    rows = formcast.ray.extract(dataset, Item, concurrency=1, max_new_tokens=48).take_all()
    expected = list(
        formcast.extract_many(
            Item, texts, model=default_extractor, progress=False, max_new_tokens=48
        )
    )
    by_id = {row["id"]: row for row in rows}
    assert sorted(by_id) == [0, 1]
    for i, result in enumerate(expected):
        assert result.ok and by_id[i]["error"] is None
        assert Item.model_validate_json(by_id[i]["value"]) == result.value
        assert by_id[i]["generated_tokens"] == result.generated_tokens
