"""The ``formcast`` command line: extract a value from every row of a corpus.

    formcast extract --output-type myproject.models:Receipt \
        --input receipts.jsonl --output out.jsonl
    formcast extract --output-type invoice.schema.json \
        --input docs/ --output out.jsonl --model ./qwen

Input: a JSON-lines file (``-`` for stdin) whose rows hold the text in ``--text-field``,
or a folder of ``.txt`` files (one row each). Output: JSON lines in input order, each
input row with formcast's output columns (:mod:`formcast.pipelines.rows`) added; ``value`` is
written as the JSON value itself. A row's id is its ``--id-field``, else its line number
(or its file name); rows whose id is already in the output are skipped, so an
interrupted run resumes where it stopped. ``--ray`` runs the same job through
:mod:`formcast.ray`.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from formcast.errors import FormcastError, InvalidRowError, UserError
from formcast.pipelines.rows import (
    ERROR,
    OUTPUT_COLUMNS,
    SPANS,
    VALUE,
    check_input_columns,
    error_columns,
    extract_columns,
    result_columns,
)

if TYPE_CHECKING:  # imported when a model loads: `formcast --help` needs no torch
    from formcast.extraction.extractor import Extractor

__all__ = ["InputRow", "load_output_type", "main", "read_rows"]

#: Rows handed to ``extract_many`` at a time, in batches of ``--batch-size``: also how
#: often the output is flushed (and so how much work an interruption can cost).
BATCHES_PER_CHUNK = 4
#: Error rows reported on stderr one by one; the others are counted.
REPORTED_ERRORS = 20


@dataclass(frozen=True)
class InputRow:
    """One row of the input.

    Attributes:
        where: its place in the input, for messages (``line 12``, ``file 007.txt``).
        id: its id (``--id-field``, else the line number or the file name).
        fields: the fields written to the output, the id field included.
        text: the text to extract from, or why the row has none (InvalidRowError).
    """

    where: str
    id: Any
    fields: dict[str, Any]
    text: str | Exception


_NUM_GPUS_HELP = "With --ray: GPUs per actor.  [default: 0]"


@click.group()
@click.version_option(package_name="formcast")
def main() -> None:
    """formcast: text in, validated JSON out, from a local language model."""


@main.command()
@click.option(
    "--output-type",
    "output_spec",
    required=True,
    metavar="MODULE:CLASS|SCHEMA.json",
    help="The output type: a Pydantic class as module:Class (imported from the current "
    "folder too), or a JSON Schema file.",
)
@click.option(
    "--input",
    "input_path",
    required=True,
    metavar="PATH",
    help="A JSON-lines file, a folder of .txt files (one row each), or - for stdin.",
)
@click.option(
    "--output",
    "output_path",
    required=True,
    metavar="PATH",
    help="The JSON-lines file to append to (rows whose id is there are skipped), or - for stdout.",
)
@click.option("--text-field", default="text", show_default=True, help="The field holding the text.")
@click.option(
    "--id-field",
    default="id",
    show_default=True,
    help="The field holding each row's id; without it, the line number or file name.",
)
@click.option("--model", default=None, help="A transformers folder or model id [default model].")
@click.option("--device", default=None, help="cpu, cuda, cuda:1, mps [the model's default].")
@click.option("--dtype", default=None, help="float32, bfloat16, float16 [the checkpoint's].")
@click.option("--batch-size", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--max-new-tokens", default=None, type=click.IntRange(min=1))
@click.option("--temperature", default=None, type=click.FloatRange(min=0.0))
@click.option("--seed", default=None, type=int)
@click.option("--instructions", default=None, help="The instruction shown before the fields.")
@click.option("--from-text", is_flag=True, help="Copy every plain string value from the text.")
@click.option("--mode", default=None, type=click.Choice(["generation", "specification"]))
@click.option(
    "--max-recursion-depth",
    default=None,
    type=click.IntRange(min=0),
    help="Unroll recursive output types this many times [default: exact at any depth].",
)
@click.option("--fail-fast", is_flag=True, help="Stop at the first row with an error (exit 1).")
@click.option(
    "--stream",
    is_flag=True,
    help="Also write each row's partial values to stdout as they are generated (JSON "
    'lines: the row\'s id field and "partial"); the output type must be a Pydantic class.',
)
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.option("--ray", "use_ray", is_flag=True, help="Run through formcast.ray (Ray Data).")
@click.option(
    "--concurrency",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="With --ray: the number of actors, each holding a copy of the model.",
)
@click.option("--num-gpus", default=0.0, type=click.FloatRange(min=0.0), help=_NUM_GPUS_HELP)
def extract(
    output_spec: str,
    input_path: str,
    output_path: str,
    text_field: str,
    id_field: str,
    model: str | None,
    device: str | None,
    dtype: str | None,
    batch_size: int,
    max_new_tokens: int | None,
    temperature: float | None,
    seed: int | None,
    instructions: str | None,
    from_text: bool,
    mode: str | None,
    max_recursion_depth: int | None,
    fail_fast: bool,
    stream: bool,
    progress: bool,
    use_ray: bool,
    concurrency: int,
    num_gpus: float,
) -> None:
    """Extract a value of the output type from every row of the input."""
    output = load_output_type(output_spec)
    options = {
        k: v
        for k, v in {
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "seed": seed,
            "instructions": instructions,
            "from_text": from_text or None,
            "mode": mode,
            "max_recursion_depth": max_recursion_depth,
        }.items()
        if v is not None
    }
    done = _done_ids(output_path, id_field)
    rows = (r for r in read_rows(input_path, text_field, id_field) if _key(r.id) not in done)
    job = _Job(output, model, device, dtype, batch_size, options, fail_fast, stream, id_field)
    tally = _Tally()
    try:
        if use_ray and stream:
            raise click.BadParameter("cannot stream with --ray", param_hint="--stream")
        if use_ray:
            written = _run_ray(job, rows, concurrency, num_gpus)
        else:  # the model loads before the progress bar starts, so that it shows rows/s
            written = _run_here(job, _load_extractor(job), rows)
        total = _count_rows(input_path)
        bar = _progress(None if total is None else max(total - len(done), 0), progress)
        try:
            with _open_output(output_path) as sink:
                _write_rows(written, sink, bar, tally, fail_fast)
        finally:
            bar.close()
    except UserError as error:
        raise click.ClickException(str(error)) from error
    except FormcastError as error:  # the model could not be loaded, say
        raise click.ClickException(f"{type(error).__name__}: {error}") from error
    skipped = f", skipped {len(done)} already there" if done else ""
    click.echo(
        f"formcast: wrote {tally.rows} rows to {output_path} ({tally.errors} with an error)"
        f"{skipped}",
        err=True,
    )


# -- the output type --------------------------------------------------------------------------
def load_output_type(spec: str) -> Any:
    """The output type named on the command line: ``module:Class`` (``module:Outer.Inner``
    too; the current folder is importable) or the path of a JSON Schema file.

    Raises:
        click.BadParameter: neither form, a module that does not import, a missing name,
            a file that is not JSON.
    """
    path = Path(spec)
    if path.suffix == ".json" or path.is_file():
        return _read_schema(path)
    module_name, colon, name = spec.partition(":")
    if not colon or not module_name or not name:
        raise click.BadParameter(
            f"expected module:Class (e.g. myproject.models:Receipt) or a JSON Schema file, "
            f"found {spec!r}",
            param_hint="--output-type",
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would: the user's own modules
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise click.BadParameter(
            f"expected an importable module {module_name!r}, found: {error}",
            param_hint="--output-type",
        ) from error
    for part in name.split("."):
        if not hasattr(value, part):
            raise click.BadParameter(
                f"expected {module_name!r} to define {name!r}, found no {part!r} there",
                param_hint="--output-type",
            )
        value = getattr(value, part)
    return value


def _read_schema(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise click.BadParameter(
            f"expected a JSON Schema file, found {str(path)!r}: {error}",
            param_hint="--output-type",
        ) from error


# -- reading the input ------------------------------------------------------------------------
def read_rows(source: str, text_field: str, id_field: str) -> Iterator[InputRow]:
    """The rows of ``source`` in order: a JSON-lines file, ``-`` (stdin, JSON lines) or a
    folder of ``.txt`` files (sorted by name). Lines holding only whitespace are not rows.

    A row that cannot be read (malformed JSON, not an object, no text field, a text that
    is not a string, a file that is not UTF-8) comes with an :class:`InvalidRowError`
    in place of its text, which says where it is.

    Raises:
        click.BadParameter: ``source`` does not exist, or is a folder without .txt files.
    """
    if source == "-":
        lines = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
        yield from _json_rows(lines, text_field, id_field)
        return
    path = Path(source)
    if path.is_dir():
        yield from _folder_rows(path, text_field, id_field)
        return
    try:
        handle = open(path, encoding="utf-8", errors="surrogateescape")  # noqa: SIM115
    except OSError as error:
        raise click.BadParameter(
            f"cannot read {source!r}: {error}", param_hint="--input"
        ) from error
    with handle:
        yield from _json_rows(handle, text_field, id_field)


def _json_rows(lines: Iterable[str], text_field: str, id_field: str) -> Iterator[InputRow]:
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield _json_row(number, line, text_field, id_field)


def _json_row(number: int, line: str, text_field: str, id_field: str) -> InputRow:
    where = f"line {number}"
    try:
        line.encode("utf-8")  # bytes that are not UTF-8 were read as lone surrogates
    except UnicodeEncodeError as error:
        problem = f"{where}: expected UTF-8 text, found bytes that are not ({error.reason})"
        return InputRow(where, number, {id_field: number}, InvalidRowError(problem))
    try:
        row = json.loads(line)
    except json.JSONDecodeError as error:
        problem = f"{where}: expected a JSON object, found malformed JSON ({error})"
        return InputRow(where, number, {id_field: number}, InvalidRowError(problem))
    if not isinstance(row, dict):
        problem = f"{where}: expected a JSON object, found a JSON {type(row).__name__}"
        return InputRow(where, number, {id_field: number}, InvalidRowError(problem))
    _check_fields(where, row)
    row_id = row.get(id_field, number)
    fields = {id_field: row_id, **row}
    text = row.get(text_field)
    if isinstance(text, str):
        return InputRow(where, row_id, fields, text)
    found = f"no field {text_field!r}" if text_field not in row else f"a {type(text).__name__}"
    problem = f"{where}: expected a str in field {text_field!r}, found {found}"
    return InputRow(where, row_id, fields, InvalidRowError(problem))


def _folder_rows(folder: Path, text_field: str, id_field: str) -> Iterator[InputRow]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".txt")
    others = sorted(p.name for p in folder.iterdir() if p not in files)
    if not files:
        raise click.BadParameter(
            f"expected .txt files in the folder {str(folder)!r}, found none", param_hint="--input"
        )
    if others:
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        click.echo(f"formcast: reading the .txt files only; not reading {shown}", err=True)
    for path in files:
        where = f"file {path.name}"
        fields: dict[str, Any] = {id_field: path.name}
        try:
            text: str | Exception = path.read_text(encoding="utf-8")
            fields[text_field] = text
        except (OSError, UnicodeDecodeError) as error:
            text = InvalidRowError(f"{where}: expected a readable UTF-8 text file, found {error}")
        yield InputRow(where, path.name, fields, text)


def _check_fields(where: str, row: dict[str, Any]) -> None:
    try:
        check_input_columns(row)
    except UserError as error:
        raise click.ClickException(f"{where}: {error}") from error


def _count_rows(source: str) -> int | None:
    """Rows in ``source`` for the progress bar (None for stdin)."""
    path = Path(source)
    if source == "-" or not path.exists():
        return None
    if path.is_dir():
        return sum(1 for p in path.iterdir() if p.is_file() and p.suffix == ".txt")
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())


# -- resuming ---------------------------------------------------------------------------------
def _key(row_id: Any) -> str:
    return json.dumps(row_id, sort_keys=True)


def _done_ids(output_path: str, id_field: str) -> set[str]:
    """The ids already in the output. An incomplete last line (a write that was cut off)
    is removed, so that appending starts on a line of its own."""
    path = Path(output_path)
    if output_path == "-" or not path.exists():
        return set()
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) < len(data):
        with open(path, "r+b") as handle:
            handle.truncate(len(complete))
        click.echo(f"formcast: removed an incomplete last line from {output_path}", err=True)
    done: set[str] = set()
    for number, line in enumerate(complete.decode("utf-8", "replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or id_field not in row:
            raise click.BadParameter(
                f"expected {output_path!r} to hold JSON lines written by formcast extract, "
                f"each with an {id_field!r} field; found line {number}: {line[:80]!r}",
                param_hint="--output",
            )
        done.add(_key(row[id_field]))
    return done


# -- extracting -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Job:
    output: Any
    model: str | None
    device: str | None
    dtype: str | None
    batch_size: int
    options: dict[str, Any]
    fail_fast: bool
    stream: bool = False
    id_field: str = "id"


def _load_extractor(job: _Job) -> Extractor:
    """The job's model, with the output type and the options checked (before any row)."""
    from formcast.extraction.extractor import Extractor

    if job.model is None:
        extractor = Extractor.default(device=job.device, dtype=job.dtype)
    else:
        extractor = Extractor.from_pretrained(job.model, device=job.device, dtype=job.dtype)
    list(extractor.extract_many(job.output, [], progress=False, **job.options))
    return extractor


def _run_here(
    job: _Job, extractor: Extractor, rows: Iterable[InputRow]
) -> Iterator[tuple[InputRow, dict[str, Any]]]:
    """Extract in this process, a chunk of rows at a time; yields in input order."""
    for chunk in _chunks(rows, job.batch_size * BATCHES_PER_CHUNK, job.fail_fast):
        texts = [row.text for row in chunk]
        if job.stream:
            for row, added in zip(chunk, _streamed_columns(job, extractor, chunk), strict=True):
                yield row, _output_row(row, added)
            continue
        columns = extract_columns(
            extractor, job.output, texts, batch_size=job.batch_size, **job.options
        )
        for row, added in zip(chunk, columns, strict=True):
            yield row, _output_row(row, added)


def _streamed_columns(
    job: _Job, extractor: Extractor, chunk: list[InputRow]
) -> list[dict[str, Any]]:
    """The output columns of each text, in order, writing every partial value to stdout
    as a JSON line (``{<id field>: row id, "partial": {...}}``, and ``"spans"`` of its
    copied values when there are any) as rows progress."""
    from formcast.extraction.partial import Partial

    columns: list[dict[str, Any] | None] = [None] * len(chunk)
    pending: list[tuple[int, str]] = []
    for position, row in enumerate(chunk):
        if isinstance(row.text, str):
            pending.append((position, row.text))
        else:
            columns[position] = error_columns(row.text)
    ids = [chunk[p].id for p, _ in pending]
    items = extractor.stream_many(
        job.output, [t for _, t in pending], batch_size=job.batch_size, **job.options
    )
    for index, item in items:
        if isinstance(item, Partial):
            partial = item.model_dump(mode="json", exclude_none=True)
            line = {job.id_field: ids[index], "partial": partial}
            if item.spans:
                line["spans"] = {k: [list(s) for s in v] for k, v in item.spans.items()}
            _write(sys.stdout, line)
        else:
            columns[pending[index][0]] = result_columns(item)
    return [c if c is not None else error_columns(RuntimeError("no result")) for c in columns]


def _chunks(rows: Iterable[InputRow], size: int, fail_fast: bool) -> Iterator[list[InputRow]]:
    """Rows in lists of ``size``; with ``fail_fast``, a row that could not be read ends its
    list, so that no row after it is extracted."""
    chunk: list[InputRow] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size or (fail_fast and isinstance(row.text, Exception)):
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _run_ray(
    job: _Job, rows: Iterable[InputRow], concurrency: int, num_gpus: float
) -> Iterator[tuple[InputRow, dict[str, Any]]]:
    """Extract through :mod:`formcast.ray`; yields in input order.

    The rows are read first (Ray gets the texts and their positions only, so that rows
    with different fields need no common schema), then written back in input order as
    their results arrive."""
    try:
        import ray

        import formcast.ray
    except ImportError as error:
        raise click.ClickException(str(error)) from error
    pending = list(rows)
    texts = [
        {"position": i, "text": row.text}
        for i, row in enumerate(pending)
        if isinstance(row.text, str)
    ]
    if not ray.is_initialized():
        ray.init()  # joins $RAY_ADDRESS when set, else starts a local cluster
    results: Iterator[dict[str, Any]] = iter(())
    if texts:
        dataset = formcast.ray.extract(
            ray.data.from_items(texts),
            job.output,
            model=job.model,
            batch_size=job.batch_size,
            concurrency=concurrency,
            num_gpus=num_gpus,
            device=job.device,
            dtype=job.dtype,
            **job.options,
        )
        results = iter(dataset.iter_rows())
    arrived: dict[int, dict[str, Any]] = {}
    for position, row in enumerate(pending):
        if isinstance(row.text, Exception):
            yield row, _output_row(row, error_columns(row.text))
            continue
        while position not in arrived:
            result = next(results, None)
            if result is None:
                raise click.ClickException(f"formcast.ray returned no result for {row.where}")
            arrived[result["position"]] = result
        result = arrived.pop(position)
        yield row, _output_row(row, {name: result[name] for name in OUTPUT_COLUMNS})


def _output_row(row: InputRow, added: dict[str, Any]) -> dict[str, Any]:
    """The row as written: its fields, then the output columns with ``value`` decoded
    (JSON lines hold nested values, see :mod:`formcast.pipelines.rows`)."""
    value, spans = added[VALUE], added[SPANS]
    return {
        **row.fields,
        **added,
        VALUE: None if value is None else json.loads(value),
        SPANS: None if spans is None else json.loads(spans),
    }


# -- writing ----------------------------------------------------------------------------------
class _open_output:
    def __init__(self, output_path: str) -> None:
        self._path = output_path
        self._handle: IO[str] | None = None

    def __enter__(self) -> IO[str]:
        if self._path == "-":
            return sys.stdout
        try:
            self._handle = open(self._path, "a", encoding="utf-8")
        except OSError as error:
            raise click.BadParameter(
                f"cannot write {self._path!r}: {error}", param_hint="--output"
            ) from error
        return self._handle

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()


def _write_rows(
    written: Iterable[tuple[InputRow, dict[str, Any]]],
    sink: IO[str],
    bar: Any,
    tally: _Tally,
    fail_fast: bool,
) -> None:
    for row, fields in written:
        if fields[ERROR] is not None and fail_fast:
            # not written: once the input is fixed, a new run picks the row up
            raise click.ClickException(f"stopped at {row.where} (--fail-fast): {fields[ERROR]}")
        _write(sink, fields)
        bar.update(1)
        tally.rows += 1
        if fields[ERROR] is not None:
            tally.error(row, fields[ERROR], bar)


def _write(sink: IO[str], fields: dict[str, Any]) -> None:
    sink.write(json.dumps(fields, ensure_ascii=False) + "\n")
    sink.flush()


class _Tally:
    """Counts rows and errors; reports the first errors on stderr with their place."""

    def __init__(self) -> None:
        self.rows = 0
        self.errors = 0

    def error(self, row: InputRow, message: str, bar: Any) -> None:
        self.errors += 1
        if self.errors <= REPORTED_ERRORS:
            where = "" if message.find(row.where) >= 0 else f"{row.where}: "
            bar.write(f"formcast: {where}{message}", file=sys.stderr)
        elif self.errors == REPORTED_ERRORS + 1:
            bar.write("formcast: more rows with an error; see the error column", file=sys.stderr)


def _progress(total: int | None, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(
        total=total, unit="row", desc="formcast", file=sys.stderr, disable=not enabled, leave=True
    )
