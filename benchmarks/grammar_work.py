"""The first walks of ``grammars.py`` as a fixed workload, for counting instructions.

On a shared machine, CPU time varies twofold from one minute to the next, more than most
changes to a first visit's cost. The number of instructions a fixed piece of work takes
varies far less (up to about 15 million of 3,300-5,000 million between repeated runs):
this script saves the work once (the default tokenizer's vocabulary and the
random valid token sequences of ``grammars.py``, same seed and sizes), then replays it
(for each grammar: a cold compile up to the first mask, then the full mask and the
advance along every sequence, as formcast's first walk in ``grammars.py``) under
valgrind's ``callgrind``, which counts the instructions executed. The same replay with
``--imports-only`` (load the saved work, import formcast, compile nothing) is the part
every run shares; the workload is the difference. Run both for each version compared.

    python benchmarks/grammar_work.py save /tmp/work.pkl
    PY=$(python -c 'import sys; print(sys.executable)')   # not a pyenv shim
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        $PY benchmarks/grammar_work.py replay /tmp/work.pkl
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        $PY benchmarks/grammar_work.py replay /tmp/work.pkl --imports-only

Each prints ``Collected : N``; the first minus the second is the workload. ``--grammars``
replays some grammars only (names as in ``grammars.py``: ``json``, ``PDDL/depot``).
"""

from __future__ import annotations

import argparse
import pickle
import random
from pathlib import Path
from typing import Any


def save(path: Path, names: list[str] | None, strings: int, max_tokens: int, seed: int) -> None:
    """Sample the sequences as ``grammars.py`` does (all grammars, or ``names``) and write
    them with the vocabulary."""
    import grammars  # next to this script, on the path when it runs
    from transformers import AutoTokenizer

    from formcast.models import default_model_dir
    from formcast.vocabulary import Vocabulary

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    rng = random.Random(seed)
    work = []
    for grammar in grammars.select(names):
        text = grammar.read_text(encoding="utf-8")
        name = str(grammar.relative_to(grammars.GRAMMARS)).removesuffix(".ebnf")
        sequences = grammars.sample_sequences(text, vocabulary, tokenizer, rng, strings, max_tokens)
        work.append((name, text, sequences))
    with path.open("wb") as out:
        pickle.dump((vocabulary, work), out)
    print(f"saved {len(work)} grammars to {path}")


def replay(path: Path, names: list[str] | None, imports_only: bool) -> None:
    """Compile each grammar cold and walk its sequences: mask, then advance."""
    import numpy as np

    import formcast
    from formcast.compiler import clear_memory_cache

    with path.open("rb") as source:
        vocabulary, work = pickle.load(source)
    vocabulary.prepare()
    if imports_only:
        return
    width = (vocabulary.size + 31) // 32 * 32
    buffer = np.zeros(width // 32, dtype=np.uint32)
    replayed = 0
    for name, text, sequences in work:
        if names and name not in names:
            continue
        clear_memory_cache()
        index = formcast.compile(formcast.Grammar(text), vocabulary, cache=False)
        index.cursor().bitmask(width, out=buffer)
        for tokens in sequences:
            cursor = index.cursor()
            for token in tokens:
                cursor.bitmask(width, out=buffer)
                cursor.advance(token)
        replayed += 1
    if not replayed:
        raise SystemExit(f"expected grammar names among {[w[0] for w in work]}, found {names}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    saving = commands.add_parser("save", help="sample the sequences and save the work")
    saving.add_argument("path", type=Path)
    saving.add_argument("--grammars", nargs="*")
    saving.add_argument("--strings", type=int, default=4)
    saving.add_argument("--max-tokens", type=int, default=40)
    saving.add_argument("--seed", type=int, default=0)
    replaying = commands.add_parser("replay", help="replay saved work (under valgrind)")
    replaying.add_argument("path", type=Path)
    replaying.add_argument("--grammars", nargs="*")
    replaying.add_argument("--imports-only", action="store_true")
    args: Any = parser.parse_args()
    if args.command == "save":
        save(args.path, args.grammars, args.strings, args.max_tokens, args.seed)
    else:
        replay(args.path, args.grammars, args.imports_only)


if __name__ == "__main__":
    main()
