"""Rows per second on SROIE receipts through the pipelines, on the default model.

Paths, each run in a process of its own so that its start-up is the one a user sees:

* ``extract_many`` - the reference: load the model, then ``Extractor.extract_many`` over
  the receipts in this process;
* ``cli``          - ``python -m formcast extract`` on a JSON-lines file of the receipts
                     (one process, timed end to end);
* ``ray-1``, ``ray-2`` - ``formcast.ray.extract`` with 1 or 2 actors (one CPU each) on a
                     local Ray cluster of 2 CPUs started by the run.

Printed per path: the receipts, the start-up seconds (model load for ``extract_many``,
cluster start for Ray; the command line's is inside its total), the job's seconds (for
Ray: from the dataset's creation to its last row, actor start-up and model loads
included), rows per second over the job and end to end, and the share of rows with a
value. Greedy decoding, the same ``Receipt`` class as ``sroie.py``, compiled constraints
from formcast's disk cache when it holds them (as a second run of a user's job would).

Every child runs with ``OMP_NUM_THREADS=--threads`` (default 1), the torch threads Ray
gives an actor of one CPU: so ``ray-1`` compares with ``extract_many`` and ``cli`` thread
for thread, and ``ray-2`` shows what a second model copy adds. Give ``--count`` at least
two batches (``2 * --batch-size``) for the second actor to get work.

    python benchmarks/pipeline.py --count 8 --batch-size 4
    python benchmarks/pipeline.py --count 40 --paths extract_many ray-2 --batch-size 8
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PATHS = ("extract_many", "cli", "ray-1", "ray-2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of each child")
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--run", choices=PATHS, help=argparse.SUPPRESS)  # one path, in a child
    parser.add_argument("--input", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_path(args.run, Path(args.input), args)))
        return

    sys.path.insert(0, str(HERE))
    from sroie import load_receipts

    receipts = load_receipts(args.start, args.count)
    folder = Path(tempfile.mkdtemp(prefix="formcast-pipeline-"))
    source = folder / "receipts.jsonl"
    with open(source, "w", encoding="utf-8") as handle:
        for number, (text, _) in enumerate(receipts, start=args.start):
            handle.write(json.dumps({"id": f"{number:03d}", "text": text}) + "\n")
    last = args.start + args.count - 1
    print(
        f"SROIE receipts {args.start:03d}-{last:03d}, default model, greedy, "
        f"batch_size={args.batch_size}, max_new_tokens={args.max_new_tokens}, "
        f"OMP_NUM_THREADS={args.threads}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the start"
    )
    print(
        "| path | rows | start-up s | job s | rows/s (job) | rows/s (end to end) | with a value |"
    )
    print("|---|---|---|---|---|---|---|")
    for path in args.paths:
        print(table_row(path, measure(path, source, args)), flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def measure(path: str, source: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run one path in a child process; its timings (for the command line, the child's
    wall time)."""
    if path == "cli":
        return measure_cli(source, args)
    command = [sys.executable, __file__, "--run", path, "--input", str(source)]
    command += ["--batch-size", str(args.batch_size), "--max-new-tokens", str(args.max_new_tokens)]
    done = subprocess.run(command, env=child_env(args), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{path} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure_cli(source: Path, args: argparse.Namespace) -> dict[str, Any]:
    output = source.with_name("cli-out.jsonl")
    output.unlink(missing_ok=True)
    command = [sys.executable, "-m", "formcast", "extract", "--output-type", "sroie:Receipt"]
    command += ["--input", str(source), "--output", str(output), "--no-progress"]
    command += ["--batch-size", str(args.batch_size), "--max-new-tokens", str(args.max_new_tokens)]
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=HERE, env=child_env(args), capture_output=True, text=True, check=False
    )
    total = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"cli failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    return {"rows": len(rows), "startup": None, "job": None, "total": total, "ok": ok(rows)}


def child_env(args: argparse.Namespace) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(args.threads)}


def run_path(path: str, source: Path, args: argparse.Namespace) -> dict[str, Any]:
    """In the child: run ``path`` over the receipts of ``source`` and time it."""
    sys.path.insert(0, str(HERE))
    from sroie import Receipt

    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    options = {"batch_size": args.batch_size, "max_new_tokens": args.max_new_tokens}
    started = time.perf_counter()
    if path == "extract_many":
        import formcast

        extractor = formcast.Extractor.default()
        ready = time.perf_counter()
        texts = [row["text"] for row in rows]
        results = list(extractor.extract_many(Receipt, texts, progress=False, **options))
        out = [{"value": r.value if r.ok else None} for r in results]
    else:
        import ray

        import formcast.ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ready = time.perf_counter()
        dataset = ray.data.from_items(rows)
        actors = int(path.split("-")[1])
        out = formcast.ray.extract(dataset, Receipt, concurrency=actors, **options).take_all()
    finished = time.perf_counter()
    return {
        "rows": len(out),
        "startup": ready - started,
        "job": finished - ready,
        "total": finished - started,
        "ok": ok(out),
    }


def ok(rows: list[dict[str, Any]]) -> float:
    return sum(row["value"] is not None for row in rows) / max(len(rows), 1)


def table_row(path: str, m: dict[str, Any]) -> str:
    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    job_rate = "-" if m["job"] is None else f"{m['rows'] / m['job']:.3f}"
    return (
        f"| {path} | {m['rows']} | {seconds(m['startup'])} | {seconds(m['job'])} | "
        f"{job_rate} | {m['rows'] / m['total']:.3f} | {m['ok']:.0%} |"
    )


if __name__ == "__main__":
    main()
