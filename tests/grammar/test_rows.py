"""Token rows of grammar automata (pushdown and lazy) against brute force: every token
walked byte by byte through the automaton, on states reached by random walks.

The vocabulary is a slice of the real one (every 7th token, all single bytes): the
index's shortcuts (live nodes only, whole subtrees kept where a state loops on every byte
below them, narrow rows sorted, plain tokens skipped where no plain byte is allowed) see
real token shapes, and the brute force stays fast.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import formcast
from formcast.automaton import DEAD, PushdownAutomaton
from formcast.index import TokenIndex
from formcast.vocabulary import Vocabulary
from support.index_oracle import brute_force_row, index_row, walk_rows_randomly

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "grammars"
SHARED_NAMES = ["balanced_parentheses", "arithmetic", "json", "PDDL/depot", "SMILES/generic"]

GRAMMARS = {
    "parentheses": 'root ::= "(" root ")" root | ""',
    "arithmetic": """
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")" | "-" factor
""",
    "lists": r"""
root  ::= value
value ::= "[" ( value ("," " "? value)* )? "]" | [a-z_][a-z0-9_]* | "\"" [^"\\]* "\""
""",
    "plan": """
root   ::= action (" " action)*
action ::= "(" ("move" " " object " " object | "stack" " " object " " object " " object) ")"
object ::= "block" [0-9] | "table" | "hand" [a-c]
""",
}


@pytest.fixture(scope="module")
def sliced_vocabulary(vocabulary: Vocabulary) -> Vocabulary:
    tokens = list(vocabulary.token_bytes[::7])
    tokens += [bytes([b]) for b in range(256)] + [b"((", b"))", b"()", b"(("]  # a repeat
    return Vocabulary.from_token_bytes(tokens, [0])


def _check_rows(text: str, vocabulary: Vocabulary, walks: int = 6, depth: int = 12) -> int:
    """Compare rows with brute force along random walks; return how many were checked."""
    index = formcast.compile(formcast.Grammar(text), vocabulary, cache=False)
    rng = random.Random(7)
    checked = 0
    for _ in range(walks):
        state = index.initial_state
        for _ in range(depth):
            ids, following = index.row(state)
            assert np.all(np.diff(ids) > 0)  # ascending, each token once
            assert index_row(index, state) == brute_force_row(index, state)
            checked += 1
            if not ids.size:
                break
            state = int(following[rng.randrange(ids.size)])
    return checked


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_rows_match_brute_force(name: str, sliced_vocabulary: Vocabulary, trie_walk: str) -> None:
    assert _check_rows(GRAMMARS[name], sliced_vocabulary) >= 6


@pytest.mark.parametrize("name", SHARED_NAMES)
def test_rows_match_brute_force_on_shared_grammars(
    name: str, sliced_vocabulary: Vocabulary
) -> None:
    path = SHARED / f"{name}.ebnf"
    if not path.is_file():
        pytest.skip(f"the shared grammars are not at {SHARED}")
    assert _check_rows(path.read_text(encoding="utf-8"), sliced_vocabulary, walks=3) >= 3


def test_deep_nesting_rows_match_brute_force(sliced_vocabulary: Vocabulary, trie_walk: str) -> None:
    """States one level deeper each time (new stacks), and their rows."""
    index = formcast.compile(
        formcast.Grammar(GRAMMARS["parentheses"]), sliced_vocabulary, cache=False
    )
    assert isinstance(index.automaton, PushdownAutomaton)
    state = index.initial_state
    for _ in range(10):
        state = index.walk_bytes(state, b"(")
        assert index_row(index, state) == brute_force_row(index, state)
    assert len(index.automaton.stacks(state)[0]) >= 10


def test_whole_subtrees_keep_their_state(vocabulary: Vocabulary) -> None:
    """Inside an identifier, every token of letters stays in the identifier's state
    (kept as whole subtrees of the trie), and the row still matches brute force on the
    tokens it holds and on some it refuses."""
    index = formcast.compile(formcast.Regex(r"[a-z]+\(\)"), vocabulary, cache=False)
    state = index.walk_bytes(index.initial_state, b"abc")
    ids, following = index.row(state)
    letters = [
        t for t, raw in enumerate(vocabulary.token_bytes) if raw and raw.isalpha() and raw.islower()
    ]
    row = dict(zip(ids.tolist(), following.tolist(), strict=True))
    assert all(row[t] == state for t in letters)
    for token_id in [*letters[:50], *range(0, vocabulary.size, 97)]:
        raw = vocabulary.token_bytes[token_id]
        if raw:
            reached = index.automaton.walk(raw, state)
            assert row.get(token_id, DEAD) == reached


@pytest.mark.parametrize("name", ["json", "SMILES/generic", "arithmetic"])
def test_a_stored_index_of_a_shared_grammar_answers_alike(
    name: str, sliced_vocabulary: Vocabulary
) -> None:
    """A pushdown index written with ``to_bytes`` after some walks and read back: along
    random walks made in lockstep (rows built after loading included), the same rows,
    acceptance, budget distances and forced bytes."""
    path = SHARED / f"{name}.ebnf"
    if not path.is_file():
        pytest.skip(f"the shared grammars are not at {SHARED}")
    grammar = formcast.Grammar(path.read_text(encoding="utf-8"))
    written = formcast.compile(grammar, sliced_vocabulary, cache=False)
    assert isinstance(written.automaton, PushdownAutomaton)
    rng = random.Random(8)
    walk_rows_randomly(written, rng, walks=2, depth=10)
    loaded = TokenIndex.from_bytes(written.to_bytes(), sliced_vocabulary)
    stored_rows = loaded.computed_rows
    for _ in range(4):
        state = written.initial_state
        for _ in range(16):
            ids, following = written.row(state)
            assert ids.tolist() == loaded.row(state)[0].tolist()
            assert following.tolist() == loaded.row(state)[1].tolist()
            assert written.is_accepting(state) == loaded.is_accepting(state)
            assert written.min_tokens_to_accept(state) == loaded.min_tokens_to_accept(state)
            assert written.forced_bytes(state) == loaded.forced_bytes(state)
            if not ids.size:
                break
            state = int(following[rng.randrange(ids.size)])
    assert loaded.computed_rows > stored_rows
