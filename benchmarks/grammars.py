"""The shared GBNF grammars: compile and mask times of formcast against transformers-CFG,
llguidance and xgrammar, with ratios in the same run.

For every grammar of ``../shared/data/grammars`` (``*.ebnf``, subfolders included) and the
default model's tokenizer (SmolLM2's):

* random valid strings: random-token decoding through formcast's own cursor (a separate
  index, so that the timed one starts cold), seeded, ending at an accepting state after a
  random target length and within ``--max-tokens`` (budget-safe). Each string is decoded
  to text and tokenized again with the tokenizer; that token sequence (the same for every
  engine) must be accepted by formcast, or the string is drawn again;
* compile: GBNF text to the first mask ready, cold (median of ``--repeats``; see
  ``grammar_peers.py`` for what each engine does);
* mask: along every token sequence, for each prefix, the full mask of the vocabulary
  (timed), is the next token allowed, then the advance (timed apart). p50 and p99 per
  grammar and over all masks of all grammars. transformers-CFG walks only the first
  ``--tcfg-tokens`` tokens of each string (it takes tens of milliseconds a mask), and its
  ratio compares the same positions;
* ratios of mask p50 (and p99 over all): transformers-CFG / formcast, formcast /
  llguidance, formcast / xgrammar, each over the masks both engines computed.

A peer that refuses a grammar is ``unsupported`` in its column; a peer that refuses a
token of a valid string stops that string (its masks so far count) and the grammar's row
says how many strings it refused.

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD/src python benchmarks/grammars.py
    ... benchmarks/grammars.py --grammars json arithmetic PDDL/blocks --strings 10 --seed 1
    ... benchmarks/grammars.py --engines formcast xgrammar --max-tokens 80
    ... benchmarks/grammars.py --engines formcast llguidance --cpu-time  # on a busy machine
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grammar_peers  # next to this script, on the path when it runs
from grammar_peers import ENGINES, Engine, Matcher, Unsupported

GRAMMARS = Path(__file__).resolve().parents[2] / "shared" / "data" / "grammars"
SHORT = {"formcast": "fc", "transformers-cfg": "tcfg", "llguidance": "llg", "xgrammar": "xgr"}
Key = tuple[str, int, int]  # (grammar, string, position)

# the clock of every timing: wall time, or with --cpu-time this process's CPU time (on a
# machine shared with other jobs, it leaves out the time spent waiting for a core)
clock = time.perf_counter

# the targets this benchmark checks (formcast's own figures, and two ratios)
MASK_P50_US, MASK_P99_US, COMPILE_P50_MS = 20.0, 1000.0, 20.0
TCFG_RATIO, LLGUIDANCE_RATIO = 100.0, 2.0


@dataclass
class EngineRun:
    """One engine on one grammar."""

    status: str = "ok"  # ok, unsupported, crash
    detail: str = ""
    compile_ms: float = float("nan")
    mask_us: dict[Key, float] = field(default_factory=dict)
    advance_us: list[float] = field(default_factory=list)
    again_us: dict[Key, float] = field(default_factory=dict)  # formcast's second walks
    refused: int = 0  # strings the engine refused a token of


@dataclass
class GrammarRun:
    name: str
    recursive: bool
    sequences: list[list[int]]
    texts: list[str]
    runs: dict[str, EngineRun] = field(default_factory=dict)


# -- random valid strings ----------------------------------------------------------------------
def sample_sequences(
    text: str, vocabulary: Any, tokenizer: Any, rng: random.Random, count: int, max_tokens: int
) -> list[list[int]]:
    """``count`` token sequences of random valid strings (see the module docstring)."""
    import formcast

    index = formcast.compile(formcast.Grammar(text), vocabulary, cache=False)
    sequences: list[list[int]] = []
    for _ in range(count * 20):  # a redraw when the tokenizer does not give the text back
        if len(sequences) == count:
            break
        tokens = _retokenized(_random_decode(index, rng, max_tokens), index, tokenizer)
        if tokens:
            sequences.append(tokens)
    return sequences


def _random_decode(index: Any, rng: random.Random, max_tokens: int) -> bytes:
    """Random allowed tokens until an accepting state at or past a random target length,
    ending within ``max_tokens`` (more if the grammar needs more) through the budget-safe
    rows."""
    cursor = index.cursor()
    budget = max(max_tokens, cursor.min_tokens_to_accept())
    target = rng.randint(1, budget)
    pieces = []
    for step in range(budget):
        allowed = cursor.allowed_token_ids(budget - step).tolist()
        tokens = [t for t in allowed if t not in index.eos_token_ids]
        if cursor.is_accepting() and (step >= target or not tokens):
            break
        token = rng.choice(tokens)
        cursor.advance(token)
        pieces.append(index.vocabulary.token_bytes[token])
    return b"".join(pieces)


def _retokenized(data: bytes, index: Any, tokenizer: Any) -> list[int] | None:
    """The tokenizer's tokens of ``data`` when they give it back and formcast accepts them
    (SmolLM2's tokenizer drops some control characters), else ``None``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    tokens: list[int] = tokenizer.encode(text, add_special_tokens=False)
    if not tokens or tokenizer.decode(tokens) != text:
        return None
    cursor = index.cursor()
    for token in tokens:
        if index.next_state(cursor.state, token) < 0:
            return None
        cursor.advance(token)
    return tokens if cursor.is_accepting() else None


# -- one engine on one grammar -----------------------------------------------------------------
def run_engine(
    engine: Engine, grammar: GrammarRun, text: str, repeats: int, token_cap: int | None
) -> EngineRun:
    """Compile ``text`` ``repeats`` times, then walk every sequence of ``grammar`` (its
    first ``token_cap`` tokens) from the last compile; formcast walks them twice."""
    run = EngineRun()
    gc.collect()
    new_matcher = None
    times = []
    try:
        for _ in range(repeats):
            started = clock()
            new_matcher = engine.compile(text)
            times.append((clock() - started) * 1e3)
    except Unsupported as e:
        run.status, run.detail = "unsupported", " ".join(str(e).split())[:200]
        return run
    except Exception as e:  # an internal error of the engine: report it, keep going
        run.status, run.detail = "crash", f"compile: {type(e).__name__}: {e}"[:200]
        return run
    assert new_matcher is not None
    run.compile_ms = statistics.median(times)
    for number, tokens in enumerate(grammar.sequences):
        key = (grammar.name, number)
        try:
            _walk(new_matcher(), key, tokens[:token_cap], run.mask_us, run.advance_us)
            if engine.name == "formcast":  # again, every state's row now built
                _walk(new_matcher(), key, tokens[:token_cap], run.again_us, [])
        except RuntimeError as e:
            run.refused += 1
            shown = grammar.texts[number][:60]
            message = " ".join(str(e).split())
            run.detail = run.detail or f"string {number} ({shown!r}...): {message}"[:300]
        except Exception as e:  # an internal error of the engine: report it, keep going
            run.status, run.detail = "crash", f"{type(e).__name__}: {e}"[:200]
            return run
    return run


def _walk(
    walk: Matcher,
    key: tuple[str, int],
    tokens: list[int],
    masks: dict[Key, float],
    advances: list[float],
) -> None:
    """For each token: the full mask (timed into ``masks``), is the token allowed (a
    ``RuntimeError`` if not), the advance (timed into ``advances``)."""
    for position, token in enumerate(tokens):
        tick = clock()
        walk.fill()
        masks[(*key, position)] = (clock() - tick) * 1e6
        if not walk.allows(token):
            raise RuntimeError(f"its mask refuses token {token} at position {position}")
        tick = clock()
        walk.advance(token)
        advances.append((clock() - tick) * 1e6)


# -- figures -----------------------------------------------------------------------------------
def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ratio(numerator: dict[Key, float], denominator: dict[Key, float], q: float = 0.5) -> float:
    """Quantile ``q`` of ``numerator``'s masks over that of ``denominator``'s, both taken
    over the positions both engines timed."""
    common = numerator.keys() & denominator.keys()
    below = quantile([denominator[k] for k in common], q)
    return quantile([numerator[k] for k in common], q) / below if common else float("nan")


def engine_ratio(name: str, fc: dict[Key, float], peer: dict[Key, float], q: float = 0.5) -> float:
    """The ratio the targets speak of: transformers-CFG / formcast, formcast / the others."""
    return ratio(peer, fc, q) if name == "transformers-cfg" else ratio(fc, peer, q)


def _cell(run: EngineRun | None, value: str) -> str:
    if run is None:
        return "-"
    if run.status != "ok":
        return run.status
    return value + (f" r{run.refused}" if run.refused else "")


def print_tables(results: list[GrammarRun], engines: list[str]) -> None:
    width = max(len(r.name) for r in results) + 2
    print("\ncompile: GBNF text -> first mask ready, ms (r<n>: refused n of the strings)")
    print(f"{'grammar':<{width}}{'rec':>4}{'str':>4}{'toks':>6}", end="")
    print("".join(f"{name:>18}" for name in engines))
    for result in results:
        tokens = sum(len(s) for s in result.sequences)
        row = f"{result.name:<{width}}{'yes' if result.recursive else '':>4}"
        row += f"{len(result.sequences):>4}{tokens:>6}"
        for name in engines:
            run = result.runs.get(name)
            row += f"{_cell(run, f'{run.compile_ms:.1f}' if run else ''):>18}"
        print(row)

    peers = [name for name in engines if name != "formcast"]
    print("\nmask per token, us: p50/p99; ratios of p50 (tcfg/fc, fc/llg, fc/xgr)")
    print(f"{'grammar':<{width}}", end="")
    print("".join(f"{name:>18}" for name in engines), end="")
    print("".join(f"{SHORT[p] + ' ratio':>11}" for p in peers))
    for result in results:
        row = f"{result.name:<{width}}"
        for name in engines:
            run = result.runs.get(name)
            values = list(run.mask_us.values()) if run else []
            figures = f"{quantile(values, 0.5):.1f}/{quantile(values, 0.99):.0f}"
            row += f"{_cell(run, figures):>18}"
        fc = result.runs.get("formcast")
        for name in peers:
            run = result.runs.get(name)
            ok = fc and run and fc.status == run.status == "ok"
            value = engine_ratio(name, fc.mask_us, run.mask_us) if ok else float("nan")
            row += f"{value:>11.2f}" if ok else f"{'-':>11}"
        print(row)


def pooled(results: list[GrammarRun], name: str, second: bool = False) -> dict[Key, float]:
    """Every mask time of engine ``name`` over the grammars it ran (``second``:
    formcast's second walks)."""
    masks: dict[Key, float] = {}
    for result in results:
        run = result.runs.get(name)
        if run and run.status == "ok":
            masks.update(run.again_us if second else run.mask_us)
    return masks


def compiles(results: list[GrammarRun], name: str) -> list[float]:
    runs = [result.runs.get(name) for result in results]
    return [run.compile_ms for run in runs if run and run.status == "ok"]


def print_summary(results: list[GrammarRun], engines: list[str], tcfg_tokens: int) -> None:
    print("\nover all grammars")
    header = f"{'engine':<24}{'grammars':>9}{'compile p50 ms':>16}{'masks':>8}"
    print(header + f"{'mask p50 us':>13}{'mask p99 us':>13}{'advance p50 us':>16}")
    rows = [(name, name, False) for name in engines]
    rows.insert(1, ("formcast, second walk", "formcast", True))
    for label, name, second in rows:
        masks = list(pooled(results, name, second).values())
        advances = [
            t
            for result in results
            if (run := result.runs.get(name)) and run.status == "ok"
            for t in run.advance_us
        ]
        compile_p50 = "" if second else f"{quantile(compiles(results, name), 0.5):.1f}"
        advance_p50 = "" if second else f"{quantile(advances, 0.5):.1f}"
        print(
            f"{label:<24}{len(compiles(results, name)):>5}/{len(results):<3}"
            f"{compile_p50:>16}{len(masks):>8}"
            f"{quantile(masks, 0.5):>13.1f}{quantile(masks, 0.99):>13.1f}{advance_p50:>16}"
        )
    fc = pooled(results, "formcast")
    for name in engines[1:]:
        tcfg = name == "transformers-cfg"
        label = "transformers-CFG / formcast" if tcfg else f"formcast / {name}"
        peer = pooled(results, name)
        note = f" (the first {tcfg_tokens} tokens of each string)" if tcfg else ""
        print(
            f"mask time, {label}: p50 {engine_ratio(name, fc, peer):.2f}, "
            f"p99 {engine_ratio(name, fc, peer, 0.99):.2f}, "
            f"over the {len(fc.keys() & peer.keys())} masks both computed{note}"
        )


def print_targets(results: list[GrammarRun], engines: list[str]) -> None:
    fc = pooled(results, "formcast")
    masks = list(fc.values())
    checks = [
        ("formcast mask p50 <= 20 us", quantile(masks, 0.5), MASK_P50_US, "<="),
        ("formcast mask p99 <= 1 ms", quantile(masks, 0.99), MASK_P99_US, "<="),
        (
            "formcast compile p50 <= 20 ms",
            quantile(compiles(results, "formcast"), 0.5),
            COMPILE_P50_MS,
            "<=",
        ),
    ]
    if "transformers-cfg" in engines:
        value = engine_ratio("transformers-cfg", fc, pooled(results, "transformers-cfg"))
        checks.append(("transformers-CFG / formcast mask p50 >= 100x", value, TCFG_RATIO, ">="))
    if "llguidance" in engines:
        value = engine_ratio("llguidance", fc, pooled(results, "llguidance"))
        checks.append(("formcast / llguidance mask p50 <= 2x", value, LLGUIDANCE_RATIO, "<="))
    print("\ntargets (formcast's first walks; us, ms or a ratio)")
    for label, value, bound, sense in checks:
        met = value <= bound if sense == "<=" else value >= bound
        print(f"  {label:<48}{value:>10.2f}  {'met' if met else 'NOT met'}")
    slow = sum(t > MASK_P99_US for t in masks)
    print(
        f"  formcast masks over {MASK_P99_US / 1000:g} ms: {slow} of {len(masks)} "
        f"({slow / max(len(masks), 1):.1%}; the p99 target allows 1%)"
    )


# -- the run -----------------------------------------------------------------------------------
def select(names: list[str] | None) -> list[Path]:
    """The grammar files, all or those whose path (without ``.ebnf``) matches a name."""
    paths = sorted(GRAMMARS.rglob("*.ebnf"))
    if not names:
        return paths
    chosen = [p for p in paths if str(p.relative_to(GRAMMARS)).removesuffix(".ebnf") in names]
    known = {str(p.relative_to(GRAMMARS)).removesuffix(".ebnf") for p in paths}
    unknown = sorted(set(names) - known)
    if unknown:
        raise SystemExit(f"expected grammar names among {sorted(known)}, found {unknown}")
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grammars", nargs="*", help="names such as json or PDDL/blocks")
    parser.add_argument("--engines", nargs="*", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--strings", type=int, default=4, help="random strings per grammar")
    parser.add_argument("--max-tokens", type=int, default=40, help="length cap of a string")
    parser.add_argument("--tcfg-tokens", type=int, default=6, help="tokens transformers-CFG walks")
    parser.add_argument("--repeats", type=int, default=3, help="compiles timed per engine")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cpu-time", action="store_true", help="time with this process's CPU time, not wall"
    )
    args = parser.parse_args()
    if args.cpu_time:
        global clock
        clock = time.process_time
    if not GRAMMARS.is_dir():
        print(f"the shared grammars were not found at {GRAMMARS}", file=sys.stderr)
        return 2
    if "OMP_NUM_THREADS" in os.environ:  # the Rust engines' thread pools follow it too
        os.environ.setdefault("RAYON_NUM_THREADS", os.environ["OMP_NUM_THREADS"])
    from transformers import AutoTokenizer

    import formcast
    from formcast.models import default_model_dir
    from formcast.vocabulary import Vocabulary

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    vocabulary.prepare()
    engines: dict[str, Engine] = {}
    for name in ["formcast"] + [e for e in args.engines if e != "formcast"]:
        reason = grammar_peers.missing_reason(name)
        if reason:
            print(f"{name}: {reason}, left out")
            continue
        engines[name] = grammar_peers.load(name, tokenizer, vocabulary)
    print(
        ", ".join(f"{e.name} {e.version}" for e in engines.values())
        + f"; tokenizer {default_model_dir().name}; {args.strings} strings per grammar of"
        f" <= {args.max_tokens} tokens, seed {args.seed}; compile: median of {args.repeats};"
        f" transformers-CFG walks the first {args.tcfg_tokens} tokens of each string;"
        f" {'CPU' if args.cpu_time else 'wall'} time"
    )
    rng = random.Random(args.seed)
    results = []
    for path in select(args.grammars):
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(GRAMMARS)).removesuffix(".ebnf")
        try:
            sequences = sample_sequences(
                text, vocabulary, tokenizer, rng, args.strings, args.max_tokens
            )
        except formcast.SchemaError as e:  # no strings to walk: the grammar is left out
            print(f"  {name}: left out, formcast refuses it: {e}")
            continue
        texts = [tokenizer.decode(tokens) for tokens in sequences]
        result = GrammarRun(name, formcast.Grammar(text).is_recursive, sequences, texts)
        for engine in engines.values():
            cap = args.tcfg_tokens if engine.name == "transformers-cfg" else None
            result.runs[engine.name] = run_engine(engine, result, text, args.repeats, cap)
        results.append(result)
        print(
            f"  {name}: " + ", ".join(f"{n} {r.status}" for n, r in result.runs.items()), flush=True
        )
    names = list(engines)
    print_tables(results, names)
    print_summary(results, names, args.tcfg_tokens)
    print_targets(results, names)
    for result in results:
        for name, run in result.runs.items():
            if run.detail:
                status = "refused" if run.status == "ok" else run.status
                print(f"  {result.name} / {name}: {status}: {run.detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
