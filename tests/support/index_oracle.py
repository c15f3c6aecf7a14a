"""The oracle for token rows: every token walked byte by byte through the automaton.

Shared by the tests of the index over regexes (``test_index``), choice lists
(``test_choices``) and grammars (``grammar/test_rows``).
"""

from __future__ import annotations

import random

from formcast.automaton import DEAD
from formcast.index import TokenIndex


def brute_force_row(index: TokenIndex, state: int) -> dict[int, int]:
    """Each token's state from ``state``, walked byte by byte (empty tokens and tokens
    that die left out)."""
    row = {}
    for token_id, raw in enumerate(index.vocabulary.token_bytes):
        if raw:
            reached = index.automaton.walk(raw, state)
            if reached != DEAD:
                row[token_id] = reached
    return row


def index_row(index: TokenIndex, state: int) -> dict[int, int]:
    """The index's row of ``state`` as token -> next state."""
    ids, following = index.row(state)
    return dict(zip(ids.tolist(), following.tolist(), strict=True))


def walk_rows_randomly(index: TokenIndex, rng: random.Random, walks: int, depth: int) -> None:
    """Build rows along ``walks`` random walks of up to ``depth`` tokens from the start
    (each next state drawn from the row of the one before)."""
    for _ in range(walks):
        state = index.initial_state
        for _ in range(depth):
            ids, following = index.row(state)
            if not ids.size:
                break
            state = int(following[rng.randrange(ids.size)])
