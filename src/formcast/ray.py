"""Extraction over a Ray Data dataset, on one machine or a cluster.

    import ray, formcast.ray
    ds = ray.data.read_json("receipts.jsonl")               # rows with an "id" and a "text"
    out = formcast.ray.extract(ds, Receipt, text_column="text", concurrency=2)
    out.write_json("extracted/")

Each row keeps its columns and gains formcast's output columns (:mod:`formcast.pipelines.rows`:
``value`` as JSON text, ``error``, ``finish_reason``, ``prompt_tokens``,
``generated_tokens``, ``spans`` as JSON text). The work runs in a pool of Ray actors
(``Dataset.map_batches`` with a callable class): each actor loads the model once and
extracts a batch of rows per call with :meth:`formcast.Extractor.extract_many`. The
constraint is compiled once, on the driver, and shipped to the actors with the job; they
never compile it.

Faults: a row without a usable text (null, not a string, empty, too long for the
context window) gets an ``error`` and the rest of its batch is unaffected. An actor
that dies (its process killed, a node lost) is restarted by Ray and the batch it held
is run again from the start, so no row is lost and none is written twice: Ray Data
starts map actors with ``max_restarts=-1`` and ``max_task_retries=-1``.

Requires the ``ray`` extra: ``pip install "formcast[ray]"``. ``import formcast`` never
imports Ray; only this module does.
"""

from __future__ import annotations

import os
import pickle
import warnings
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import Unpack

try:
    import pyarrow as pa
    import ray.data
except ImportError as error:  # pragma: no cover - exercised in a subprocess
    raise ImportError(
        f"formcast.ray needs Ray Data ({error.name or 'ray'} is missing); install it with: "
        'pip install "formcast[ray]"'
    ) from error

from formcast.compiler import adopt
from formcast.compiler import compile as compile_index
from formcast.constraint import CompileOptions
from formcast.errors import InvalidOptionError, InvalidRowError, ModelLoadError
from formcast.extraction.extractor import Extractor
from formcast.extraction.options import ExtractOptions
from formcast.pipelines.rows import (
    ERROR,
    FINISH_REASON,
    GENERATED_TOKENS,
    PROMPT_TOKENS,
    SPANS,
    VALUE,
    check_input_columns,
    extract_columns,
)

__all__ = ["OUTPUT_TYPES", "extract"]

#: The Arrow type of each output column, fixed so that every block has the same schema.
OUTPUT_TYPES: dict[str, pa.DataType] = {
    VALUE: pa.string(),
    ERROR: pa.string(),
    FINISH_REASON: pa.string(),
    PROMPT_TOKENS: pa.int64(),
    GENERATED_TOKENS: pa.int64(),
    SPANS: pa.string(),
}

# The options of extract_many that decide the compiled constraint.
_COMPILE_OPTIONS = ("mode", "whitespace", "max_recursion_depth", "from_text")


def extract(
    dataset: ray.data.Dataset,
    output: Any,
    *,
    text_column: str = "text",
    model: str | os.PathLike[str] | None = None,
    batch_size: int = 8,
    rows_per_call: int | None = None,
    concurrency: int | tuple[int, int] = 1,
    num_gpus: float = 0,
    num_cpus: float = 1,
    device: str | None = None,
    dtype: str | None = None,
    **options: Unpack[ExtractOptions],
) -> ray.data.Dataset:
    """Extract a value of type ``output`` from the ``text_column`` of every row.

    Lazy, like every Ray Data transform: nothing runs until the result is consumed
    (``write_json``, ``iter_rows``, ``take_all``...). Row order is Ray Data's: set
    ``DataContext.get_current().execution_options.preserve_order = True`` to keep the
    input order, and keep an id column to join on.

    Args:
        dataset: the rows; every column is kept in the result.
        output: the output type, as for :func:`formcast.extract`. A class from a module
            must be importable by the actors (on a cluster: installed on every node, or
            shipped with ``ray job submit --working-dir``); one defined in a script or a
            notebook travels by value, and so does a JSON Schema.
        text_column: the column holding the text to extract from.
        model: a transformers checkpoint folder or model id that every actor can load;
            ``None`` for the default model (SmolLM2-135M-Instruct, which each node
            converts once into its cache folder).
        batch_size: rows per forward pass (``extract_many``'s ``batch_size``).
        rows_per_call: rows handed to an actor per call (Ray's batch); default
            ``batch_size``. More lets ``extract_many`` keep its batch full; fewer lose
            less work when an actor dies.
        concurrency: the number of actors, or ``(min, max)`` for a pool that Ray scales
            between the two. Each actor holds one copy of the model.
        num_gpus: GPUs reserved per actor (``1`` for one GPU each, ``0.5`` to share).
        num_cpus: CPUs reserved per actor.
        device: where each actor puts the model; default ``"cuda"`` when ``num_gpus``
            is above 0, else the CPU.
        dtype: the model's dtype, e.g. ``"bfloat16"``; default: the checkpoint's.
        **options: the options of :meth:`formcast.Extractor.extract_many`
            (``max_new_tokens``, ``temperature``, ``seed``, ``mode``, ``from_text``...).

    Cost on the driver: loading the tokenizer (not the model) and compiling the
    constraint once (milliseconds to about a second). Each actor then loads the model
    once and unpickles the compiled constraint (~0.5 MB for a small model class and a
    49k-token vocabulary).

    Raises:
        InvalidOptionError: an argument is out of range, or the dataset's known columns
            lack ``text_column`` or clash with the output columns. Options of
            ``extract_many`` are checked by each actor when it starts, so a wrong one
            fails the job before the first batch.
        SchemaError: the output type cannot be compiled.
        ModelLoadError: the tokenizer of ``model`` cannot be loaded on the driver.
    """
    _check_arguments(text_column, batch_size, rows_per_call, num_gpus, num_cpus)
    compute = _actor_pool(concurrency)
    _check_known_columns(dataset, text_column)
    compile_options: dict[str, Any] = {
        k: v for k, v in options.items() if k in _COMPILE_OPTIONS and v is not None
    }
    index = compile_index(output, _load_tokenizer(model), **compile_options)
    job = _Job(
        output=output,
        index=ray.put(pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL)),
        model=None if model is None else os.fspath(model),
        device=device if device is not None or num_gpus <= 0 else "cuda",
        dtype=dtype,
        text_column=text_column,
        batch_size=batch_size,
        compile_options=compile_options,
        options=dict(options),
    )
    return dataset.map_batches(
        _ExtractBatch,
        fn_constructor_kwargs={"job": job},
        batch_size=rows_per_call or batch_size,
        batch_format="pyarrow",
        compute=compute,
        num_gpus=num_gpus,
        num_cpus=num_cpus,
    )


@dataclass(frozen=True)
class _Job:
    """What every actor needs: its constructor's one argument."""

    output: Any
    # The TokenIndex compiled on the driver, pickled by us (Ray would hand its numpy
    # arrays over as read-only views of its object store, and an index fills them in as
    # decoding reaches new states), put once in the object store: the actors' constructor
    # arguments stay small, so that Ray can always restart an actor.
    index: ray.ObjectRef[bytes]
    model: str | None
    device: str | None
    dtype: str | None
    text_column: str
    batch_size: int
    compile_options: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # checked as ExtractOptions


class _ExtractBatch:
    """The callable class of ``map_batches``: one per actor, holding the model."""

    def __init__(self, job: _Job) -> None:
        self._job = job
        if job.model is None:
            self._extractor = Extractor.default(device=job.device, dtype=job.dtype)
        else:
            self._extractor = Extractor.from_pretrained(
                job.model, device=job.device, dtype=job.dtype
            )
        index = pickle.loads(ray.get(job.index))
        adopt(index, job.output, self._extractor.tokenizer, CompileOptions(**job.compile_options))
        # Check the options now, so that a wrong one fails the job before any batch.
        list(self._extractor.extract_many(job.output, [], progress=False, **job.options))
        used = self._extractor.compile(
            job.output, **{k: job.options.get(k) for k in _COMPILE_OPTIONS}
        )
        if used is not index:
            warnings.warn(
                "formcast.ray: this actor compiled the output type again instead of using "
                "the index compiled on the driver",
                RuntimeWarning,
                stacklevel=1,
            )

    def __call__(self, batch: pa.Table) -> pa.Table:
        check_input_columns(batch.column_names)
        job = self._job
        rows = extract_columns(
            self._extractor,
            job.output,
            _texts(batch, job.text_column),
            batch_size=job.batch_size,
            **job.options,
        )
        for name, arrow_type in OUTPUT_TYPES.items():
            batch = batch.append_column(name, pa.array([r[name] for r in rows], arrow_type))
        return batch


def _texts(batch: pa.Table, column: str) -> list[str | Exception]:
    """The text of each row, or the :class:`InvalidRowError` of a row without one."""
    if column not in batch.column_names:
        missing = InvalidRowError(
            f"expected a column {column!r} holding the text, found the columns {batch.column_names}"
        )
        return [missing] * batch.num_rows
    return [_text(value, column) for value in batch.column(column).to_pylist()]


def _text(value: Any, column: str) -> str | Exception:
    if isinstance(value, str):
        return value
    found = "null" if value is None else f"a {type(value).__name__}"
    return InvalidRowError(f"expected a str in column {column!r}, found {found}")


def _check_arguments(
    text_column: str,
    batch_size: int,
    rows_per_call: int | None,
    num_gpus: float,
    num_cpus: float,
) -> None:
    if not isinstance(text_column, str) or not text_column:
        raise InvalidOptionError(f"expected text_column to be a column name, found {text_column!r}")
    for name, value in (("batch_size", batch_size), ("rows_per_call", rows_per_call)):
        if value is None and name == "rows_per_call":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidOptionError(f"expected {name} to be an int >= 1, found {value!r}")
    for name, amount in (("num_gpus", num_gpus), ("num_cpus", num_cpus)):
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise InvalidOptionError(f"expected {name} to be a number >= 0, found {amount!r}")


def _actor_pool(concurrency: int | tuple[int, int]) -> ray.data.ActorPoolStrategy:
    """A fixed pool of ``concurrency`` actors, or one that scales between ``(min, max)``."""
    if isinstance(concurrency, int) and not isinstance(concurrency, bool) and concurrency >= 1:
        return ray.data.ActorPoolStrategy(size=concurrency)
    if (
        isinstance(concurrency, tuple)
        and len(concurrency) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in concurrency)
        and 1 <= concurrency[0] <= concurrency[1]
    ):
        return ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    raise InvalidOptionError(
        f"expected concurrency to be an int >= 1 or a (min, max) pair with 1 <= min <= max, "
        f"found {concurrency!r}"
    )


def _check_known_columns(dataset: ray.data.Dataset, text_column: str) -> None:
    """Check the columns when the dataset knows them without running (else each actor
    checks its batches)."""
    schema = dataset.schema(fetch_if_missing=False)
    if schema is None:
        return
    names = list(schema.names)
    check_input_columns(names)
    if text_column not in names:
        raise InvalidOptionError(
            f"expected a column {text_column!r} holding the text, found the columns {names}"
        )


def _load_tokenizer(model: str | os.PathLike[str] | None) -> Any:
    """The tokenizer of ``model`` (the default model's when None), without the weights."""
    from transformers import AutoTokenizer

    from formcast.models import default_model_dir

    source = str(default_model_dir()) if model is None else os.fspath(model)
    try:
        return AutoTokenizer.from_pretrained(source)
    except Exception as error:
        raise ModelLoadError(
            f"expected a transformers checkpoint folder or model id whose tokenizer loads, "
            f"found {source!r}, which failed: {type(error).__name__}: {error}"
        ) from error
