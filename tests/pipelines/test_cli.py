"""The ``formcast`` command line, through click's CliRunner, on the tiny random model
saved to a folder (``--model``); one slow test runs the installed entry point on the
default model.

The tiny model writes nonsense, but greedy decoding makes it deterministic: the rows must
equal what ``extract_many`` gives in this process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import formcast
from formcast.pipelines.cli import load_output_type, main
from formcast.pipelines.rows import OUTPUT_COLUMNS
from support.ray_support import Item

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str | Path, stdin: str | None = None) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], input=stdin, catch_exceptions=False)


def extract_args(model_dir: Path, source: Path | str, out: Path, *extra: str) -> list[Any]:
    return [
        "extract",
        "--output-type",
        "support.ray_support:Item",
        "--input",
        source,
        "--output",
        out,
        "--model",
        model_dir,
        "--max-new-tokens",
        "32",
        "--batch-size",
        "3",
        "--no-progress",
        *extra,
    ]


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def expected_values(extractor: Any, texts: list[str]) -> list[Any]:
    results = formcast.extract_many(
        Item, texts, model=extractor, batch_size=3, progress=False, max_new_tokens=32
    )
    return [r.value.model_dump(mode="json") if r.ok else None for r in results]


def test_jsonl_rows_keep_their_fields_and_order(
    tiny_model_dir: Path, tiny_extractor: Any, tmp_path: Path
) -> None:
    texts = [f"{n} crates of pears" for n in range(7)]
    source = write_lines(
        tmp_path / "in.jsonl",
        *(json.dumps({"id": f"r{n}", "text": t, "shop": n % 2}) for n, t in enumerate(texts)),
    )
    out = tmp_path / "out.jsonl"

    result = run(*extract_args(tiny_model_dir, source, out))

    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [r["id"] for r in rows] == [f"r{n}" for n in range(7)]
    assert list(rows[0]) == ["id", "text", "shop", *OUTPUT_COLUMNS]
    assert [r["value"] for r in rows] == expected_values(tiny_extractor, texts)
    assert all(r["error"] is None and r["finish_reason"] in ("stop", "length") for r in rows)
    assert all(r["prompt_tokens"] > 0 and r["generated_tokens"] > 0 for r in rows)
    assert "wrote 7 rows" in result.stderr and "(0 with an error)" in result.stderr


def test_stream_writes_partials_to_stdout(
    tiny_model_dir: Path, tiny_extractor: Any, tmp_path: Path
) -> None:
    texts = [f"{n} crates of pears" for n in range(3)]
    source = write_lines(
        tmp_path / "in.jsonl",
        *(json.dumps({"id": f"r{n}", "text": t}) for n, t in enumerate(texts)),
    )
    out = tmp_path / "out.jsonl"

    result = run(*extract_args(tiny_model_dir, source, out, "--stream"))

    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [r["value"] for r in rows] == expected_values(tiny_extractor, texts)
    partials = [json.loads(line) for line in result.stdout.splitlines()]
    assert partials and {p["id"] for p in partials} <= {"r0", "r1", "r2"}
    for partial in partials:
        final = next(r["value"] for r in rows if r["id"] == partial["id"])
        for key, value in partial["partial"].items():  # each a prefix of the final value
            assert key in final and str(final[key]).startswith(str(value)[:1])


def test_streamed_partials_give_the_spans_of_copied_values(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """With ``--from-text``, a partial line holds the spans of the names closed so far,
    each slicing the row's text to the value."""
    texts = {f"r{n}": f"pear{n} crates and plums" for n in range(2)}
    source = write_lines(
        tmp_path / "in.jsonl", *(json.dumps({"id": k, "text": t}) for k, t in texts.items())
    )
    out = tmp_path / "out.jsonl"

    result = run(*extract_args(tiny_model_dir, source, out, "--stream", "--from-text"))

    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in read_rows(out)}
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    spanned = [line for line in lines if "spans" in line]
    assert spanned, "no partial with a closed name"
    for line in spanned:
        text, name = texts[line["id"]], line["partial"]["name"]
        start, end = line["spans"]["/name"][0]
        assert text[start:end] == name
        assert line["spans"]["/name"] == rows[line["id"]]["spans"]["/name"]


def test_bad_rows_become_error_rows_that_say_where(tiny_model_dir: Path, tmp_path: Path) -> None:
    source = write_lines(
        tmp_path / "in.jsonl",
        json.dumps({"text": "three lemons"}),
        '{"text": "unterminated',
        json.dumps({"body": "no text field"}),
        "",  # a blank line is not a row
        json.dumps({"text": 42}),
        json.dumps({"text": "   "}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"text": "two limes"}),
    )
    with open(source, "ab") as handle:
        handle.write(b'{"text": "caf\xe9 latte"}\n')  # Latin-1, not UTF-8
    out = tmp_path / "out.jsonl"

    result = run(*extract_args(tiny_model_dir, source, out))

    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [r["id"] for r in rows] == [1, 2, 3, 5, 6, 7, 8, 9]  # line numbers: no id field
    errors = [r["error"] for r in rows]
    assert errors[0] is None and errors[-2] is None
    assert errors[-1].startswith("InvalidRowError: line 9: expected UTF-8 text, found bytes")
    assert errors[1].startswith("InvalidRowError: line 2: expected a JSON object, found malformed")
    assert (
        errors[2]
        == "InvalidRowError: line 3: expected a str in field 'text', found no field 'text'"
    )
    assert rows[2]["body"] == "no text field"  # the row's fields are kept
    assert errors[3] == "InvalidRowError: line 5: expected a str in field 'text', found a int"
    assert errors[4].startswith("EmptyInputError: ")
    assert errors[5] == "InvalidRowError: line 7: expected a JSON object, found a JSON list"
    assert all(rows[i]["value"] is None for i in range(1, 6))
    assert "formcast: line 6: EmptyInputError" in result.stderr  # reported with its place
    assert "(6 with an error)" in result.stderr


def test_fail_fast_stops_at_the_first_bad_row(tiny_model_dir: Path, tmp_path: Path) -> None:
    source = write_lines(
        tmp_path / "in.jsonl",
        json.dumps({"id": "a", "text": "one fig"}),
        json.dumps({"id": "b", "text": "two figs"}),
        json.dumps({"id": "c", "txt": "typo in the field name"}),
        json.dumps({"id": "d", "text": "four figs"}),
    )
    out = tmp_path / "out.jsonl"

    result = run(*extract_args(tiny_model_dir, source, out, "--fail-fast"))

    assert result.exit_code == 1
    assert "stopped at line 3 (--fail-fast): InvalidRowError: line 3: expected a str" in (
        result.stderr
    )
    assert [r["id"] for r in read_rows(out)] == ["a", "b"]  # not the bad row: fix it, rerun

    write_lines(
        source,
        *source.read_text().splitlines()[:2],
        json.dumps({"id": "c", "text": "three figs"}),
        json.dumps({"id": "d", "text": ""}),
    )
    again = run(*extract_args(tiny_model_dir, source, out, "--fail-fast"))
    assert again.exit_code == 1 and "stopped at line 4" in again.stderr
    assert "EmptyInputError" in again.stderr
    assert [r["id"] for r in read_rows(out)] == ["a", "b", "c"]


def test_a_rerun_skips_the_rows_already_written(
    tiny_model_dir: Path, tiny_extractor: Any, tmp_path: Path
) -> None:
    texts = [f"{n} jars of honey" for n in range(6)]
    lines = [json.dumps({"text": t}) for t in texts]  # ids: line numbers
    source = write_lines(tmp_path / "in.jsonl", *lines[:4])
    out = tmp_path / "out.jsonl"
    assert run(*extract_args(tiny_model_dir, source, out)).exit_code == 0
    first = out.read_text()
    with open(out, "a", encoding="utf-8") as handle:  # a write cut off by a crash
        handle.write('{"id": 5, "text": "5 jars')

    write_lines(source, *lines)
    result = run(*extract_args(tiny_model_dir, source, out))

    assert result.exit_code == 0, result.output
    assert out.read_text().startswith(first)
    rows = read_rows(out)
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["value"] for r in rows] == expected_values(tiny_extractor, texts)
    assert "removed an incomplete last line" in result.stderr
    assert "wrote 2 rows" in result.stderr and "skipped 4 already there" in result.stderr


def test_a_folder_of_text_files(tiny_model_dir: Path, tiny_extractor: Any, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "b.txt").write_text("nine plums", encoding="utf-8")
    (folder / "a.txt").write_text("six kiwis", encoding="utf-8")
    (folder / "c.txt").write_bytes(b"\xff\xfe not UTF-8")
    (folder / "notes.md").write_text("not a row", encoding="utf-8")
    out = tmp_path / "out.jsonl"

    result = run(*extract_args(tiny_model_dir, folder, out))

    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [r["id"] for r in rows] == ["a.txt", "b.txt", "c.txt"]
    assert [r["text"] for r in rows[:2]] == ["six kiwis", "nine plums"]
    assert [r["value"] for r in rows[:2]] == expected_values(
        tiny_extractor, ["six kiwis", "nine plums"]
    )
    assert rows[2]["error"].startswith(
        "InvalidRowError: file c.txt: expected a readable UTF-8 text file"
    )
    assert "not reading notes.md" in result.stderr


def test_stdin_with_an_id_field_and_a_json_schema_file(
    tiny_model_dir: Path, tiny_extractor: Any, tmp_path: Path
) -> None:
    schema = tmp_path / "item.schema.json"
    schema.write_text(json.dumps(Item.model_json_schema()), encoding="utf-8")
    stdin = "".join(
        json.dumps({"key": k, "body": t}) + "\n" for k, t in [(7, "one melon"), (3, "two kiwis")]
    )
    args = extract_args(tiny_model_dir, "-", tmp_path / "out.jsonl", "--id-field", "key")
    args[2] = schema
    args += ["--text-field", "body"]

    result = run(*args, stdin=stdin)

    assert result.exit_code == 0, result.output
    rows = read_rows(tmp_path / "out.jsonl")
    assert [r["key"] for r in rows] == [7, 3]
    assert [r["value"] for r in rows] == expected_values(tiny_extractor, ["one melon", "two kiwis"])


def test_help_starts_without_loading_torch() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom click.testing import CliRunner\n"
            "from formcast.pipelines.cli import main\n"
            "result = CliRunner().invoke(main, ['extract', '--help'])\n"
            "assert result.exit_code == 0 and '--output-type' in result.output, result.output\n"
            "assert 'torch' not in sys.modules and 'ray' not in sys.modules\n",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("Receipt", "expected module:Class"),
        ("no_such_module_here:Receipt", "expected an importable module 'no_such_module_here'"),
        ("support.ray_support:Receipt", "expected 'support.ray_support' to define 'Receipt'"),
        ("missing.schema.json", "expected a JSON Schema file"),
    ],
)
def test_a_bad_output_type_is_a_usage_error(spec: str, message: str, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", json.dumps({"text": "x"}))
    result = run("extract", "--output-type", spec, "--input", source, "--output", "o.jsonl")
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_schema_formcast_cannot_compile_fails_before_any_row(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    schema = tmp_path / "bad.schema.json"
    schema.write_text('{"type": "strnig"}', encoding="utf-8")
    args = extract_args(tiny_model_dir, write_lines(tmp_path / "in.jsonl", "{}"), tmp_path / "o")
    args[2] = schema
    result = run(*args)
    assert result.exit_code == 1
    assert "Error: " in result.stderr and "strnig" in result.stderr
    assert not (tmp_path / "o").exists()  # checked before the output is opened


def test_output_types_import_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shop_models_for_cli.py").write_text(
        "from pydantic import BaseModel\n\n"
        "class Outer:\n"
        "    class Fruit(BaseModel):\n"
        "        name: str\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # undo the CLI's insertion afterwards
    fruit = load_output_type("shop_models_for_cli:Outer.Fruit")
    assert fruit.__name__ == "Fruit" and list(fruit.model_fields) == ["name"]


def test_ray_writes_the_same_rows(ray_cluster: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    texts = [f"{n} bags of rice" for n in range(5)]
    lines = [json.dumps({"text": t, "n": n}) for n, t in enumerate(texts)]
    source = write_lines(tmp_path / "in.jsonl", *lines[:2], "{broken", *lines[2:])
    here, there = tmp_path / "here.jsonl", tmp_path / "there.jsonl"

    assert run(*extract_args(tiny_model_dir, source, here)).exit_code == 0
    result = run(*extract_args(tiny_model_dir, source, there, "--ray", "--concurrency", "2"))

    assert result.exit_code == 0, result.output
    assert read_rows(there) == read_rows(here)
    assert [r["id"] for r in read_rows(there)] == [1, 2, 3, 4, 5, 6]


@pytest.mark.slow
def test_the_installed_command_on_the_default_model(default_extractor: Any, tmp_path: Path) -> None:
    texts = ["ACME HARDWARE\nHammer x 2\nTOTAL 20.00", "KEDAI ALI\nKopi x 3\nTOTAL RM 5.50"]
    source = write_lines(tmp_path / "in.jsonl", *(json.dumps({"text": t}) for t in texts))
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [
            *(
                sys.executable,
                "-m",
                "formcast",
                "extract",
                "--output-type",
                "support.ray_support:Item",
            ),
            *("--input", str(source), "--output", str(out), "--max-new-tokens", "48"),
        ],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "row/s" in done.stderr  # the progress bar
    rows = read_rows(out)
    results = formcast.extract_many(
        Item, texts, model=default_extractor, progress=False, max_new_tokens=48
    )
    assert [r["value"] for r in rows] == [r.unwrap().model_dump(mode="json") for r in results]
