"""Which maskbench schemas recurse, and whether the others' regexes change.

For every schema in ``../shared/data/maskbench`` this writes one JSON line: the schema's
name, the SHA-256 of its regex under ``schema_to_regex``'s defaults in specification mode
(or the error it raised), and whether the regex calls a recursive definition
(``(?&rN)``: the schema is compiled exactly, as a pushdown automaton). Run it under two
checkouts and compare the files: a schema that does not recurse must keep its regex byte
for byte when the recursion default changes.

    PYTHONPATH=/path/to/old/src python benchmarks/recursion_regexes.py --out before.jsonl
    PYTHONPATH=src python benchmarks/recursion_regexes.py --out after.jsonl
    python benchmarks/recursion_regexes.py --compare before.jsonl after.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "maskbench"
_RECURSIVE_CALL = re.compile(r"(?<!\\)\(\?&r\d+\)")


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def regex_record(path: Path, timeout: int, options: dict[str, Any]) -> dict[str, Any]:
    """One schema's regex digest (or error) and whether it recurses."""
    from formcast.regex.translator import schema_to_regex

    schema = json.loads(path.read_text())["schema"]
    record: dict[str, Any] = {"name": path.name}
    signal.alarm(timeout)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            regex = schema_to_regex(schema, mode="specification", **options)
    except _Timeout:
        record["error"] = "timeout"
        return record
    except Exception as error:  # the error's kind and text are the result
        record["error"] = f"{type(error).__name__}: {str(error)[:200]}"
        return record
    finally:
        signal.alarm(0)
    record["sha256"] = hashlib.sha256(regex.encode()).hexdigest()
    record["length"] = len(regex)
    record["recursive"] = bool(_RECURSIVE_CALL.search(regex))
    return record


def compare(before_path: Path, after_path: Path) -> None:
    """Print how the regexes of the schemas that do not recurse (after) changed: those
    compiled both times must be byte-identical; those refused both times are listed when
    the message changed (a recursive schema refused before reaching its recursion)."""
    before = {r["name"]: r for r in map(json.loads, before_path.read_text().splitlines())}
    after = {r["name"]: r for r in map(json.loads, after_path.read_text().splitlines())}
    recursive = sorted(name for name, r in after.items() if r.get("recursive"))
    plain = [name for name in sorted(after) if name not in recursive]
    compiled = [n for n in plain if "sha256" in before[n] and "sha256" in after[n]]
    changed = [n for n in compiled if before[n]["sha256"] != after[n]["sha256"]]
    refused = [n for n in plain if "error" in before[n] and "error" in after[n]]
    reworded = [n for n in refused if before[n]["error"] != after[n]["error"]]
    flipped = [n for n in plain if ("error" in before[n]) != ("error" in after[n])]
    print(f"{len(after)} schemas: {len(recursive)} recurse (after), {len(plain)} do not")
    print(f"compiled both times without recursion: {len(compiled)}, regex changed: {len(changed)}")
    print(f"refused both times: {len(refused)}, with another message: {len(reworded)}")
    print(f"compiled one time only: {len(flipped)}")
    for name in [*changed, *reworded, *flipped][:20]:
        print(f"  {name}: {before[name]} -> {after[name]}")
    fixed = sum("error" in before[n] and "error" not in after[n] for n in recursive)
    print(f"recursive schemas (after) refused before: {fixed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--timeout", type=int, default=30, help="seconds per schema")
    parser.add_argument("--compare", nargs=2, type=Path, default=None)
    parser.add_argument(
        "--max-recursion-depth", default=None, help="an int, or none (default: the default)"
    )
    args = parser.parse_args()
    if args.compare is not None:
        compare(*args.compare)
        return
    if args.out is None:
        sys.exit("expected --out FILE or --compare BEFORE AFTER")
    options: dict[str, Any] = {}
    if args.max_recursion_depth is not None:
        depth = args.max_recursion_depth
        options["max_recursion_depth"] = None if depth == "none" else int(depth)
    signal.signal(signal.SIGALRM, _on_alarm)
    with args.out.open("w") as out:
        for number, path in enumerate(sorted(DATA.glob("*.json")), 1):
            out.write(json.dumps(regex_record(path, args.timeout, options)) + "\n")
            out.flush()
            if number % 200 == 0:
                print(f"  {number} schemas", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
