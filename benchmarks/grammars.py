"""Reading, checking and compiling the shared GBNF grammars (../shared/data/grammars).

For each grammar: the time to read and check it (``formcast.Grammar(text)``) against
transformers-CFG's ``parse_ebnf`` in the same run (when installed), the time to write its
regex, and, for grammars without recursion, the time to the first mask over the default
tokenizer's vocabulary (automaton plus the initial state's row). Recursive grammars are
read and written; compiling them needs the automaton's pushdown calls.

    OMP_NUM_THREADS=1 python benchmarks/grammars.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

GRAMMARS = Path(__file__).resolve().parents[2] / "shared" / "data" / "grammars"


def best_of(repeat: int, action: Callable[[], object]) -> float:
    """The fastest of ``repeat`` runs, in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    if not GRAMMARS.is_dir():
        print(f"the shared grammars were not found at {GRAMMARS}", file=sys.stderr)
        return 2
    import formcast
    from formcast.automaton import LazyAutomaton
    from formcast.grammar import Grammar
    from formcast.grammar.emit import emit_regex
    from formcast.index import TokenIndex
    from formcast.models import default_model_dir
    from formcast.vocabulary import Vocabulary

    have_peer = importlib.util.find_spec("transformers_cfg") is not None
    if have_peer:
        from transformers_cfg.parser import parse_ebnf
    from transformers import AutoTokenizer

    vocabulary = Vocabulary.from_tokenizer(AutoTokenizer.from_pretrained(default_model_dir()))
    vocabulary.prepare()
    limits = formcast.Limits()
    print(f"formcast {formcast.__version__}; best of {args.repeat} runs; times in ms")
    columns = ("read", "tcfg", "ratio", "regex", "chars", "mask")
    print(f"{'grammar':<50}" + "".join(f"{c:>8}" for c in columns[:-1]) + f"{columns[-1]:>11}")
    ratios = []
    for path in sorted(GRAMMARS.rglob("*.ebnf")):
        text = path.read_text(encoding="utf-8")
        read = best_of(args.repeat, lambda text=text: Grammar(text))
        peer = float("nan")
        if have_peer:
            peer = best_of(args.repeat, lambda text=text: parse_ebnf(text))
        grammar = Grammar(text)
        regex = grammar.regex()
        rules = grammar.checked
        write = best_of(
            args.repeat,
            lambda rules=rules: emit_regex(
                rules, mode="generation", whitespace=False, limits=limits
            ),
        )
        if grammar.is_recursive:
            mask = "recursive"
        else:
            started = time.perf_counter()
            index = TokenIndex(LazyAutomaton(regex), vocabulary)
            index.row(index.initial_state)
            mask = f"{(time.perf_counter() - started) * 1000:.1f}"
        ratio = read / peer if have_peer else float("nan")
        ratios.append(ratio)
        name = str(path.relative_to(GRAMMARS))
        figures = f"{read:8.2f}{peer:8.2f}{ratio:8.2f}{write:8.2f}{len(regex):8d}{mask:>11}"
        print(f"{name:<50}{figures}")
    if have_peer:
        print(f"median read time, formcast / transformers-CFG: {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
