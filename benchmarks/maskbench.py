"""Compatibility and speed over the shared maskbench JSON Schemas.

For every schema in ``../shared/data/maskbench`` this runner compiles the schema in
specification mode for the default model's tokenizer (in a worker process with a time
limit and a memory cap, so no schema can hang or crash the run), then walks every test
instance through the public cursor API, token by token:

* each instance is serialized compactly, object keys in the schema's ``properties``
  order, and tokenized with the default model's tokenizer;
* a valid instance must have every token allowed and end accepting; an invalid one must
  be rejected somewhere (or not end accepting).

Each schema is classified: ``pass``, ``unsupported`` (UnsupportedSchemaError, with
keyword and pointer), ``schema_error`` (the document is not valid JSON Schema),
``validation_error`` (a valid instance rejected), ``invalidation_error`` (an invalid
instance accepted: a soundness bug), ``timeout``, ``crash``. Time to first mask
(compile plus the first mask) and the time of every mask along valid instances are
recorded.

The peer engines (llguidance, xgrammar, outlines-core; see ``peers.py``) run the same
protocol in the same worker harness, on the same schemas, tokenizer and machine, when they
are installed; a comparison block then gives each peer's figures as ratios to formcast's.
The engines take turns, ``--chunk`` schemas each (25), each in a worker of its own
(:func:`run_interleaved`), so that a machine whose speed drifts during the run slows
them alike.

    python benchmarks/maskbench.py                      # all schemas, every installed engine
    python benchmarks/maskbench.py --every 12           # a fixed sample
    python benchmarks/maskbench.py --engines formcast   # formcast alone
    python benchmarks/maskbench.py --engines formcast xgrammar --every 25
    python benchmarks/maskbench.py --out results.jsonl --timeout 10 --memory-mb 4096
    python benchmarks/maskbench.py --engines formcast --max-recursion-depth 3  # unrolled
    python benchmarks/maskbench.py --engines formcast --names recursive.txt  # listed files

``--max-recursion-depth`` (formcast only) sets ``compile``'s option of that name: an int
unrolls recursive ``$ref`` that many times, ``none`` makes recursion exact (a pushdown
automaton; the default); ``--any-value-depth`` sets ``Limits.any_value_depth`` the
same way for unconstrained values (default 12). ``--names`` reads the schema file names
to run, one per line, instead of taking every Nth.

Each worker calls ``gc.freeze()`` once it has loaded the tokenizer and the engine, as
``docs/pipelines.md`` advises a serving process to do after loading: the ~300,000 objects
that importing torch and transformers leaves are then out of CPython's full collections,
which otherwise take ~0.13 s each and land inside whichever mask tips the collector's
counts. ``--no-freeze`` keeps them in (the slowest masks are then those collections).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import multiprocessing as mp
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "maskbench"
_RECURSION_VARIABLE = "FORMCAST_MASKBENCH_RECURSION"
_ANY_VALUE_VARIABLE = "FORMCAST_MASKBENCH_ANY_VALUE"
_NO_FREEZE_VARIABLE = "FORMCAST_MASKBENCH_NO_FREEZE"
STATUSES = (
    "pass",
    "unsupported",
    "schema_error",
    "validation_error",
    "invalidation_error",
    "timeout",
    "crash",
)


@dataclass
class SchemaResult:
    """What happened to one schema."""

    name: str
    origin: str
    status: str
    detail: str = ""
    keyword: str = ""
    compile_ms: float = 0.0
    mask_us: list[float] = field(default_factory=list)
    instances: int = 0


def origin_of(name: str) -> str:
    """``Github_easy---o1.json`` -> ``Github_easy``; ``BFCL_java_11.json`` -> ``BFCL_java``."""
    stem = name.removesuffix(".json")
    if "---" in stem:
        return stem.split("---", 1)[0]
    return re.sub(r"_[0-9]+$", "", stem)


# -- serialization in the schema's property order ------------------------------------------
def _resolve(schema: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and depth < 32:
        ref = schema["$ref"]
        if not ref.startswith("#"):
            return schema
        target: Any = root
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit():
                target = target[int(part)]
            else:
                return schema
        schema, depth = target, depth + 1
    return schema


class _Order:
    """The order formcast writes an instance's keys in: each object's declared properties,
    then its required names that are not declared, through the schemas it combines (see
    :meth:`parts`; of ``anyOf``/``oneOf``, the first branch the value is valid against,
    by jsonschema), then undeclared keys in the instance's order. Below a key, the order
    follows that key's schema: its declared property schema, else the first matching
    ``patternProperties`` entry, else ``additionalProperties``; below an array, its
    ``prefixItems`` and ``items``."""

    def __init__(self, root: Any) -> None:
        self.root: Mapping[str, Any] = root if isinstance(root, Mapping) else {}
        self._validator: Any = None
        try:
            from jsonschema.validators import validator_for

            self._validator = validator_for(self.root)(self.root)
        except Exception:  # an unusual document: branches are then taken in order
            self._validator = None

    def _matches(self, branch: Any, value: Any) -> bool:
        if self._validator is None:
            return True
        try:
            return bool(self._validator.evolve(schema=branch).is_valid(value))
        except Exception:
            return False

    def parts(self, schema: Any, value: Any, depth: int = 0) -> list[Mapping[str, Any]]:
        """``schema`` and the schemas it combines for ``value``, in formcast's order: a
        ``$ref`` target, then the ``allOf`` parts, then the schema itself, then the chosen
        ``anyOf``/``oneOf`` branches (each expanded the same way)."""
        if not isinstance(schema, Mapping) or depth > 16:
            return []
        found: list[Mapping[str, Any]] = []
        if isinstance(schema.get("$ref"), str):
            target = _resolve({"$ref": schema["$ref"]}, self.root)
            if target is not schema and "$ref" not in target:
                found.extend(self.parts(target, value, depth + 1))
        for part in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
            found.extend(self.parts(part, value, depth + 1))
        found.append(schema)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list):
                chosen = [b for b in branches if self._matches(b, value)][:1] or branches
                for part in chosen:
                    found.extend(self.parts(part, value, depth + 1))
        return found

    def apply(self, value: Any, schema: Any) -> Any:
        """``value`` with every object's keys in formcast's order."""
        if not isinstance(value, dict | list):
            return value
        parts = self.parts(schema, value)
        if isinstance(value, list):
            return [self.apply(v, _item_schema(i, parts)) for i, v in enumerate(value)]
        declared: dict[str, Any] = {}
        for part in parts:
            properties = part.get("properties")
            for name, sub in properties.items() if isinstance(properties, Mapping) else []:
                declared.setdefault(name, sub)
        for part in parts:  # required names that are not declared come next, in order
            required = part.get("required")
            for name in required if isinstance(required, list) else []:
                if isinstance(name, str) and name not in declared:
                    declared[name] = _undeclared_schema(name, parts)
        keys = [k for k in declared if k in value] + [k for k in value if k not in declared]
        return {
            k: self.apply(value[k], declared[k] if k in declared else _undeclared_schema(k, parts))
            for k in keys
        }


def _undeclared_schema(key: str, parts: list[Mapping[str, Any]]) -> Any:
    """The schema of an undeclared property ``key``: the first ``patternProperties`` entry
    that matches it, else the first ``additionalProperties`` schema."""
    for part in parts:
        patterns = part.get("patternProperties")
        for pattern, sub in patterns.items() if isinstance(patterns, Mapping) else []:
            try:
                if re.search(pattern, key):
                    return sub
            except re.error:
                continue
    for part in parts:
        if isinstance(part.get("additionalProperties"), Mapping):
            return part["additionalProperties"]
    return {}


def _item_schema(position: int, parts: list[Mapping[str, Any]]) -> Any:
    """The schema of item ``position`` of an array: ``prefixItems`` (or a list ``items``),
    else ``items``, from the first part that has one."""
    for part in parts:
        prefix, items = part.get("prefixItems", []), part.get("items")
        if isinstance(items, list):
            prefix, items = items, None
        if isinstance(prefix, list) and position < len(prefix):
            return prefix[position]
        if isinstance(items, Mapping):
            return items
    return {}


def serialize(value: Any, schema: Any) -> str:
    """``value`` as compact JSON, keys in formcast's order (see :class:`_Order`)."""
    return json.dumps(
        _Order(schema).apply(value, schema), separators=(",", ":"), ensure_ascii=False
    )


# -- the worker ------------------------------------------------------------------------------
def check_schema(path: Path, tokenizer: Any, vocabulary: Any) -> SchemaResult:
    """Compile one schema and judge all its instances. Never raises for schema problems."""
    from formcast.compiler import compile as compile_index
    from formcast.cursor import Cursor
    from formcast.errors import SchemaError, UnsupportedSchemaError

    document = json.loads(path.read_text())
    schema, tests = document["schema"], document.get("tests", [])
    result = SchemaResult(path.name, origin_of(path.name), "pass", instances=len(tests))
    width = vocabulary.size
    started = time.perf_counter()
    try:
        index = compile_index(schema, vocabulary, mode="specification", **_recursion_options())
        Cursor(index).bitmask(width)
    except UnsupportedSchemaError as e:
        result.status, result.keyword, result.detail = "unsupported", e.keyword, str(e)
        return result
    except SchemaError as e:
        result.status, result.detail = "schema_error", str(e)[:300]
        return result
    result.compile_ms = (time.perf_counter() - started) * 1000
    buffer = Cursor(index).bitmask(width)
    return judge_instances(result, schema, tests, tokenizer, lambda: _CursorMatcher(index), buffer)


def _recursion_options() -> dict[str, Any]:
    """``compile``'s recursion options from ``$FORMCAST_MASKBENCH_RECURSION`` and
    ``$FORMCAST_MASKBENCH_ANY_VALUE`` (set by ``--max-recursion-depth`` and
    ``--any-value-depth`` for the worker processes): the defaults when unset."""
    from formcast.limits import Limits

    options: dict[str, Any] = {}
    depth = os.environ.get(_RECURSION_VARIABLE)
    if depth is not None:
        options["max_recursion_depth"] = None if depth == "none" else int(depth)
    any_depth = os.environ.get(_ANY_VALUE_VARIABLE)
    if any_depth is not None:
        options["limits"] = Limits(any_value_depth=None if any_depth == "none" else int(any_depth))
    return options


class Matcher(Protocol):
    """One instance's walk through an engine (formcast's or a peer's): a full mask, then
    the token."""

    def fill(self, out: Any) -> None:
        """Write the packed bitmask of allowed tokens into ``out``."""

    def advance(self, token: int) -> None:
        """Consume ``token`` (which ``fill`` allowed); raise if the engine fails on it."""

    def accepting(self) -> bool:
        """Whether the text consumed so far is a complete instance of the schema."""


class _CursorMatcher:
    """formcast's cursor as a :class:`Matcher`."""

    def __init__(self, index: Any) -> None:
        from formcast.cursor import Cursor

        self.cursor = Cursor(index)
        self.width = index.vocabulary.size

    def fill(self, out: Any) -> None:
        self.cursor.bitmask(self.width, out=out)

    def advance(self, token: int) -> None:
        self.cursor.advance(token)

    def accepting(self) -> bool:
        return self.cursor.is_accepting()


def judge_instances(
    result: SchemaResult,
    schema: Any,
    tests: list[dict[str, Any]],
    tokenizer: Any,
    new_matcher: Callable[[], Matcher],
    buffer: Any,
) -> SchemaResult:
    """Walk every instance token by token (full mask, timed for valid instances; is the
    token allowed?; advance) and classify the schema. ``buffer`` is the bitmask ``fill``
    writes (any shape, one bit per token id in order)."""
    words = buffer.reshape(-1)
    for number, test in enumerate(tests):
        text = serialize(test["data"], schema)
        tokens = tokenizer.encode(text, add_special_tokens=False)
        matcher = new_matcher()
        accepted = True
        for token in tokens:
            tick = time.perf_counter()
            matcher.fill(buffer)
            elapsed = time.perf_counter() - tick
            allowed = bool((int(words[token // 32]) >> (token % 32)) & 1)
            if test["valid"]:
                result.mask_us.append(elapsed * 1e6)
            if not allowed:
                accepted = False
                break
            matcher.advance(token)
        accepted = accepted and matcher.accepting()
        if test["valid"] and not accepted:
            result.status = "validation_error"
            result.detail = f"test {number}: valid instance rejected: {text[:200]}"
        elif not test["valid"] and accepted:
            result.status = "invalidation_error"
            result.detail = f"test {number}: invalid instance accepted: {text[:200]}"
            return result
    return result


def _worker(connection: Connection, memory_mb: int, engine: str = "formcast") -> None:
    import resource

    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if "OMP_NUM_THREADS" in os.environ:  # the Rust engines' thread pools follow it too
        os.environ.setdefault("RAYON_NUM_THREADS", os.environ["OMP_NUM_THREADS"])
    # time to first mask is measured from scratch: no index from an earlier run's disk cache
    os.environ.setdefault("FORMCAST_DISK_CACHE", "0")
    from transformers import AutoTokenizer

    from formcast.models import default_model_dir
    from formcast.vocabulary import Vocabulary

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    vocabulary.byte_matrix  # noqa: B018 - build the shared arrays before the first timing
    adapter: Any = None
    if engine != "formcast":
        if str(Path(__file__).resolve().parent) not in sys.path:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
        import peers

        adapter = peers.load(engine, tokenizer, vocabulary.token_bytes)
    if adapter is None:
        _warm_up(vocabulary)
    if not os.environ.get(_NO_FREEZE_VARIABLE):
        gc.collect()
        gc.freeze()  # what a serving process does once loaded (docs/pipelines.md)
    connection.send("ready")
    while True:
        path = connection.recv()
        if path is None:
            return
        try:
            if adapter is None:
                result = check_schema(Path(path), tokenizer, vocabulary)
            else:
                result = SchemaResult(**asdict(peers.check_schema(Path(path), tokenizer, adapter)))
        except MemoryError:
            result = SchemaResult(
                Path(path).name, origin_of(Path(path).name), "crash", "out of memory"
            )
        except Exception as e:  # an internal error is a crash: report it, keep going
            result = SchemaResult(
                Path(path).name,
                origin_of(Path(path).name),
                "crash",
                f"{type(e).__name__}: {e}"[:300],
            )
        if adapter is None:
            # one compile per schema: keep the worker's memory flat across the run
            from formcast.compiler import clear_memory_cache

            clear_memory_cache()
        connection.send(asdict(result))


def _warm_up(vocabulary: Any) -> None:
    """What a serving process has done before its first request: formcast's compile path
    imported (its modules' objects then fall under the freeze that follows, out of later
    full collections) and a vocabulary's shared tables built (its tries, its plain
    tokens' bits and templates), by one compile and first mask of a small schema."""
    from formcast.compiler import clear_memory_cache
    from formcast.compiler import compile as compile_index
    from formcast.cursor import Cursor

    index = compile_index(_WARM_UP_SCHEMA, vocabulary, mode="specification", cache=False)
    cursor = Cursor(index)
    for piece in ('{"a', '":"', "x", '","b":[1', ",2]}"):  # a key, a string, numbers
        cursor.bitmask(vocabulary.size)
        cursor.advance_bytes(piece.encode())
    clear_memory_cache()


_WARM_UP_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}},
}


class WorkerPool:
    """One worker process at a time, restarted after a timeout or a crash (so that one
    schema's failure, such as running out of memory, never spills into the next)."""

    def __init__(self, timeout: float, memory_mb: int, engine: str = "formcast") -> None:
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.engine = engine
        self._process: Any = None
        self._connection: Connection | None = None

    def _start(self) -> Connection:
        """A fresh worker; tries three times (a busy machine can stall one start)."""
        for _ in range(3):
            context = mp.get_context("spawn")
            parent, child = context.Pipe()
            self._process = context.Process(
                target=_worker, args=(child, self.memory_mb, self.engine), daemon=True
            )
            self._process.start()
            try:
                if parent.poll(300) and parent.recv() == "ready":
                    self._connection = parent
                    return parent
            except (EOFError, ConnectionError):
                pass
            self._stop()
        raise RuntimeError("the maskbench worker did not start in three tries of 300 s")

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join()
        self._process, self._connection = None, None

    def run(self, path: Path) -> SchemaResult:
        connection = self._connection or self._start()
        connection.send(str(path))
        try:
            if connection.poll(self.timeout):
                result = SchemaResult(**connection.recv())
                if result.status == "crash":  # e.g. out of memory: start the next one afresh
                    self._stop()
                return result
            self._stop()
            return SchemaResult(
                path.name, origin_of(path.name), "timeout", f"over {self.timeout:g} s"
            )
        except (EOFError, ConnectionError):
            self._stop()
            return SchemaResult(path.name, origin_of(path.name), "crash", "worker died")

    def close(self) -> None:
        if self._connection is not None:
            self._connection.send(None)
        self._stop()


def schema_files(every: int = 1, limit: int | None = None) -> list[Path]:
    files = sorted(DATA.glob("*.json"))[::every]
    return files[:limit] if limit else files


def run_all(
    files: Iterable[Path],
    timeout: float,
    memory_mb: int,
    progress: bool = False,
    engine: str = "formcast",
) -> Iterator[SchemaResult]:
    """Each schema's result by ``engine`` alone (:func:`run_interleaved` with it)."""
    for _, result in run_interleaved(list(files), timeout, memory_mb, [engine], progress=progress):
        yield result


def run_interleaved(
    files: list[Path],
    timeout: float,
    memory_mb: int,
    engines: list[str],
    chunk: int = 25,
    progress: bool = False,
) -> Iterator[tuple[str, SchemaResult]]:
    """``(engine, result)`` of every engine on every schema, the engines taking turns a
    ``chunk`` of schemas at a time (each with a worker of its own, kept between its
    turns), the first engine of a turn rotating. A machine whose speed drifts over a run
    (other work on a shared host) then slows every engine alike: run one after another,
    a few minutes apart, five runs' llguidance / formcast mask p95 ranged over 0.94-1.02."""
    pools = {engine: WorkerPool(timeout, memory_mb, engine) for engine in engines}
    try:
        for turn, start in enumerate(range(0, len(files), chunk)):
            part = files[start : start + chunk]
            for k in range(len(engines)):
                engine = engines[(turn + k) % len(engines)]
                for path in part:
                    yield engine, pools[engine].run(path)
            if progress and (start + chunk) // 100 > start // 100:
                print(f"  {min(start + chunk, len(files))} schemas", file=sys.stderr, flush=True)
    finally:
        for pool in pools.values():
            pool.close()


# -- reporting -------------------------------------------------------------------------------
def percentiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered_values = sorted(values)

    def at(q: float) -> float:
        return ordered_values[min(len(ordered_values) - 1, int(q * len(ordered_values)))]

    return (
        " / ".join(f"{at(q):,.1f}" for q in (0.5, 0.75, 0.95, 0.99))
        + f" / {ordered_values[-1]:,.1f}"
    )


def table(results: list[SchemaResult]) -> str:
    by_origin: dict[str, list[SchemaResult]] = collections.defaultdict(list)
    for result in results:
        by_origin[result.origin].append(result)
    short = {
        "pass": "pass",
        "unsupported": "unsup",
        "schema_error": "schema",
        "validation_error": "valid-err",
        "invalidation_error": "INVALID-ACC",
        "timeout": "timeout",
        "crash": "crash",
    }
    header = f"{'origin':<22}{'schemas':>8}" + "".join(f"{short[s]:>12}" for s in STATUSES)
    lines = [header, "-" * len(header)]
    groups = [*sorted(by_origin.items()), ("ALL", results)]
    for origin, group in groups:
        counts = collections.Counter(r.status for r in group)
        cells = "".join(f"{counts[s]:>12}" for s in STATUSES)
        lines.append(f"{origin:<22}{len(group):>8}{cells}")
    total = len(results)
    passed = sum(r.status == "pass" for r in results)
    lines.append(f"\npassing: {passed}/{total} = {passed / max(total, 1):.1%}")
    compiled = [
        r.compile_ms
        for r in results
        if r.status not in ("unsupported", "schema_error", "timeout", "crash")
    ]
    masks = [m for r in results for m in r.mask_us]
    lines.append(f"time to first mask, ms (p50/p75/p95/p99/max): {percentiles(compiled)}")
    mean = f"{statistics.fmean(masks):,.1f}" if masks else "n/a"
    lines.append(
        f"time per mask, us      (p50/p75/p95/p99/max): {percentiles(masks)}"
        f"  over {len(masks):,} masks, mean {mean}"
    )
    refusals = collections.Counter(r.keyword for r in results if r.status == "unsupported")
    lines.append(
        "most common refusals: " + ", ".join(f"{k} ({n})" for k, n in refusals.most_common(12))
    )
    return "\n".join(lines)


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered_values = sorted(values)
    return ordered_values[min(len(ordered_values) - 1, int(q * len(ordered_values)))]


def _figures(results: list[SchemaResult], names: set[str] | None = None) -> dict[str, Any]:
    """The comparison figures of one engine, over all its results or the schemas ``names``."""
    chosen = [r for r in results if names is None or r.name in names]
    compiled = [
        r.compile_ms
        for r in chosen
        if r.status not in ("unsupported", "schema_error", "timeout", "crash")
    ]
    masks = [m for r in chosen for m in r.mask_us]
    return {
        "schemas": len(chosen),
        "passing": sum(r.status == "pass" for r in chosen),
        "invalid": sum(r.status == "invalidation_error" for r in chosen),
        "failed": sum(r.status in ("timeout", "crash") for r in chosen),
        "compile_p50": _quantile(compiled, 0.5),
        "compile_p99": _quantile(compiled, 0.99),
        "mask_p50": _quantile(masks, 0.5),
        "mask_p95": _quantile(masks, 0.95),
        "mask_p99": _quantile(masks, 0.99),
        "mask_mean": statistics.fmean(masks) if masks else None,
        "mask_max_ms": max(masks) / 1000 if masks else None,
        "masks": len(masks),
    }


def _cell(value: float | None, base: float | None, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    text = f"{value:,.{digits}f}"
    if base is None:
        return text
    if base == 0:
        return text + (" (=)" if value == 0 else " (inf)")
    return f"{text} ({value / base:.3g}x)"


def _get(figures: Mapping[str, Any] | None, key: str) -> float | None:
    return None if figures is None else figures[key]


def comparison(by_engine: Mapping[str, list[SchemaResult]], versions: Mapping[str, str]) -> str:
    """Per engine: passing share, soundness, failures, time to first mask and per mask.

    Ratios are each engine's figure over formcast's in the same run (when formcast ran).
    The second block restricts the timings to the schemas every engine passes, so that all
    engines are timed on the same schemas and the same token sequences.
    """
    reference = "formcast" if "formcast" in by_engine else None
    everyone = set.intersection(
        *({r.name for r in results if r.status == "pass"} for results in by_engine.values())
    )
    header = (
        f"{'engine':<24}{'passing':>22}{'invalid-acc':>13}{'timeout+crash':>15}"
        f"{'first mask p50 ms':>22}{'p99 ms':>22}{'mask p50 us':>20}{'p95 us':>20}"
        f"{'p99 us':>22}{'mean us':>20}{'max ms':>20}"
    )
    lines: list[str] = []
    for title, names in (
        ("all schemas", None),
        (f"{len(everyone)} schemas every engine passes", everyone),
    ):
        lines += [f"comparison over {title} (ratio = engine / formcast)", header, "-" * len(header)]
        base = _figures(by_engine[reference], names) if reference else None
        for engine, results in by_engine.items():
            f = _figures(results, names)
            share = f["passing"] / max(f["schemas"], 1)
            passing = f"{f['passing']}/{f['schemas']} {share:.1%}"
            if base is not None and engine != reference:
                base_share = base["passing"] / max(base["schemas"], 1)
                passing += f" ({share / max(base_share, 1e-9):.3g}x)"
            ref = base if engine != reference else None
            label = f"{engine} {versions.get(engine, '')}".strip()
            lines.append(
                f"{label:<24}{passing:>22}{f['invalid']:>13}{f['failed']:>15}"
                f"{_cell(f['compile_p50'], _get(ref, 'compile_p50')):>22}"
                f"{_cell(f['compile_p99'], _get(ref, 'compile_p99')):>22}"
                f"{_cell(f['mask_p50'], _get(ref, 'mask_p50')):>20}"
                f"{_cell(f['mask_p95'], _get(ref, 'mask_p95')):>20}"
                f"{_cell(f['mask_p99'], _get(ref, 'mask_p99')):>22}"
                f"{_cell(f['mask_mean'], _get(ref, 'mask_mean')):>20}"
                f"{_cell(f['mask_max_ms'], _get(ref, 'mask_max_ms'), 2):>20}"
            )
        lines.append("")
    return "\n".join(lines).rstrip()


ENGINES = ("formcast", "llguidance", "xgrammar", "outlines-core")


def _engine_version(engine: str) -> str:
    import importlib.metadata

    distribution = "formcast" if engine == "formcast" else engine
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=1, help="take every Nth schema (sorted)")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per schema")
    parser.add_argument("--memory-mb", type=int, default=4096, help="worker memory cap")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/maskbench.jsonl"))
    parser.add_argument(
        "--engines",
        nargs="+",
        choices=ENGINES,
        default=None,
        help="engines to run (default: formcast and every installed peer)",
    )
    parser.add_argument(
        "--max-recursion-depth",
        default=None,
        help="formcast's max_recursion_depth: an int, or none for exact recursion",
    )
    parser.add_argument(
        "--any-value-depth",
        default=None,
        help="formcast's Limits.any_value_depth: an int, or none for any depth",
    )
    parser.add_argument("--names", type=Path, default=None, help="a file of schema names")
    parser.add_argument(
        "--chunk",
        type=int,
        default=25,
        help="schemas an engine runs before the next engine's turn (see run_interleaved)",
    )
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="leave the loaded objects in the garbage collector's full collections",
    )
    args = parser.parse_args()
    if args.no_freeze:
        os.environ[_NO_FREEZE_VARIABLE] = "1"  # read by the worker processes
    for value, variable in (
        (args.max_recursion_depth, _RECURSION_VARIABLE),
        (args.any_value_depth, _ANY_VALUE_VARIABLE),
    ):
        if value is not None:
            if value != "none" and not value.isdigit():
                sys.exit(f"expected an int or none, found {value!r}")
            os.environ[variable] = value  # read by the worker processes
    if not DATA.is_dir():
        sys.exit(f"maskbench data not found at {DATA}")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import peers

    engines: list[str] = []
    for engine in args.engines or ENGINES:
        reason = None if engine == "formcast" else peers.missing_reason(engine)
        if reason is None:
            engines.append(engine)
        else:
            print(f"{engine}: {reason}, skipped", flush=True)
    versions = {engine: _engine_version(engine) for engine in engines}
    files = schema_files(args.every, args.limit)
    if args.names is not None:
        names = set(args.names.read_text().split())
        files = [DATA / name for name in sorted(names)]
    print(f"{len(files)} schemas from {DATA}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    by_engine: dict[str, list[SchemaResult]] = {engine: [] for engine in engines}
    with args.out.open("w") as out:
        for engine, result in run_interleaved(
            files, args.timeout, args.memory_mb, engines, args.chunk, progress=True
        ):
            by_engine[engine].append(result)
            record: dict[str, Any] = {"engine": engine, **asdict(result)}
            masks = result.mask_us
            record["mask_us_p50"] = statistics.median(masks) if masks else None
            record["mask_us_max"] = max(masks) if masks else None
            record["mask_us_sum"] = sum(masks)
            record["masks"] = len(masks)
            del record["mask_us"]
            out.write(json.dumps(record) + "\n")
            out.flush()
    for engine, results in by_engine.items():
        if len(engines) > 1:
            print(f"\n== {engine} {versions[engine]} ==", flush=True)
        print(table(results))
        if len(engines) == 1:
            print(f"per-schema results: {args.out}")
        bad = [r for r in results if r.status in ("invalidation_error", "crash", "timeout")]
        for result in bad[:20]:
            print(f"  {result.status}: {result.name}: {result.detail[:160]}")
    if len(by_engine) > 1:
        print()
        print(comparison(by_engine, versions))
        print(f"per-schema results: {args.out}")


if __name__ == "__main__":
    main()
