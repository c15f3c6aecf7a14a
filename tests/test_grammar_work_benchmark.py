"""``benchmarks/grammar_work.py``: the saved work replays, and names it lacks are refused."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import grammar_work
import grammars

pytestmark = pytest.mark.skipif(
    not grammars.GRAMMARS.is_dir(), reason="the shared grammars are not here"
)


def test_saved_work_replays_and_unknown_grammars_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "work.pkl"
    grammar_work.save(path, ["json", "arithmetic"], strings=2, max_tokens=6, seed=1)
    with path.open("rb") as source:
        vocabulary, work = pickle.load(source)
    assert [name for name, _, _ in work] == ["arithmetic", "json"]
    assert all(len(sequences) == 2 and all(sequences) for _, _, sequences in work)
    assert vocabulary.size > 40_000  # the default tokenizer's
    grammar_work.replay(path, ["json"], imports_only=False)
    grammar_work.replay(path, None, imports_only=True)
    with pytest.raises(SystemExit, match="expected grammar names"):
        grammar_work.replay(path, ["no-such-grammar"], imports_only=False)
