"""The NFA invariants that keep virtual copies correct (tests/support/automaton_invariants.py):
they hold for every pattern the automaton tests compile, for random patterns, and for
schema regexes; and each check catches an NFA broken in its own way."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_automaton import _LONG_GROUP, CALL_CASES, PATTERNS, random_regexes

from formcast.automaton.nfa import VIRTUAL_BASE, Nfa
from formcast.automaton.parse import build_nfa
from formcast.errors import SchemaError
from formcast.limits import Limits
from support.automaton_invariants import check_names, violations

MASKBENCH = Path(__file__).resolve().parents[3] / "shared" / "data" / "maskbench"

NESTED_REPEATS = [
    r'\[(?:"[a-z]{0,32767}",){0,99}\]',
    r"(?:(?:ab){2,1000}c){3,500}d",
    r"(?:x(?:y{1,3000}z){2,}){0,4000}",
    r"(?:[^\"\\]{0,50}\"){1,20000}",
    r"(?:a{0,10000}b){2,3}",
    r"x(?:(?:ab){3,3000}c){2,500}d",
    rf"\{{{_LONG_GROUP}(?:,{_LONG_GROUP})*\}}",
]
CORPUS = [p for p in PATTERNS if p not in ("", "^", "$")]
CORPUS += [pattern for pattern, _ in CALL_CASES] + NESTED_REPEATS


def nfa_of(pattern: str, virtual: bool = False) -> Nfa:
    """The NFA of ``pattern``; ``virtual``: every counted repeat a virtual block."""
    if not virtual:
        return build_nfa(pattern)
    return build_nfa(pattern, Limits(concrete_copy_limit=0))


VIRTUAL = pytest.mark.parametrize("virtual", [False, True], ids=["concrete", "virtual"])


# -- the invariants hold -------------------------------------------------------------------


@VIRTUAL
@pytest.mark.parametrize("pattern", CORPUS)
def test_invariants_hold_for_the_test_patterns(pattern: str, virtual: bool) -> None:
    assert violations(nfa_of(pattern, virtual)) == []


def test_the_corpus_exercises_every_check() -> None:
    """Blocks nested in templates, calls, extras at copy starts and ends, virtual final
    states, and NFAs small enough to expand fully all occur in the corpus."""
    nfas = [nfa_of(pattern, virtual) for pattern in CORPUS for virtual in (False, True)]
    assert sum(len(nfa.blocks) >= 2 for nfa in nfas) > 20
    assert any(block.size_c == 0 for nfa in nfas for block in nfa.blocks)  # a call repeated
    assert any(not block.bounded for nfa in nfas for block in nfa.blocks)
    assert any(nfa.final >= VIRTUAL_BASE for nfa in nfas)
    starts = ends = 0
    for nfa in nfas:
        for source in nfa.extras:
            block = next(b for b in nfa.blocks if b.base <= source < b.base + b.copies * b.span)
            template = block.locate(source)[1]
            starts += template == block.x_start
            ends += template == block.x_end
    assert starts > 0 and ends > 0
    expanded = [nfa for nfa in nfas if nfa.concrete_states + nfa.virtual_states <= 50_000]
    assert len(expanded) > 0.8 * len(nfas)


@VIRTUAL
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(pattern=random_regexes())
def test_invariants_hold_for_random_patterns(pattern: str, virtual: bool) -> None:
    try:
        nfa = nfa_of(pattern, virtual)
    except SchemaError:  # e.g. a pattern that matches nothing
        return
    assert violations(nfa) == [], pattern


@cache
def _schema_regexes() -> list[str]:
    """Regexes of a fixed sample of maskbench schemas, in both modes."""
    from formcast.regex.translator import schema_to_regex

    files = sorted(MASKBENCH.glob("*.json"))[::400]
    for name in ("Github_easy---o9772.json", "Kubernetes---kb_1_Normalized.json"):
        files.append(MASKBENCH / name)
    regexes = []
    for path in files:
        if not path.exists():
            continue
        schema = json.loads(path.read_text())["schema"]
        for mode in ("generation", "specification"):
            try:
                regexes.append(schema_to_regex(schema, mode=mode))
            except SchemaError:
                continue
    return regexes


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_invariants_hold_for_schema_regexes() -> None:
    regexes = _schema_regexes()
    if not regexes:
        pytest.skip("the maskbench data is not here")
    assert len(regexes) >= 10
    for regex in regexes:
        for virtual in (False, True):
            assert violations(nfa_of(regex, virtual)) == [], (regex[:80], virtual)


# -- each check catches a broken NFA -------------------------------------------------------

# x, then 2 to 500 copies of (3 to 3000 copies of "ab", then "c"), then d: two nested
# blocks (the inner template is the concrete "ab" chain 2 -a-> 3 -b-> 4; the outer one
# holds the inner copies and the "c"); the final state is concrete.
NESTED = r"x(?:(?:ab){3,3000}c){2,500}d"
SMALL = r"x(?:ab|c){2,5}y"  # one small block (made virtual): the NFA expands


def _add_eps(nfa: Nfa, source: int, target: int) -> Nfa:
    return replace(
        nfa, eps_src=np.append(nfa.eps_src, source), eps_dst=np.append(nfa.eps_dst, target)
    )


def _add_byte(nfa: Nfa, source: int, byte: int, target: int) -> Nfa:
    return replace(
        nfa,
        byte_src=np.append(nfa.byte_src, source),
        byte_lo=np.append(nfa.byte_lo, byte).astype(np.int32),
        byte_hi=np.append(nfa.byte_hi, byte).astype(np.int32),
        byte_dst=np.append(nfa.byte_dst, target),
    )


def _inner(nfa: Nfa) -> tuple[int, int]:
    """The start and end of the inner template of :data:`NESTED` (both concrete)."""
    block = nfa.blocks[0]
    assert block.x_start < block.x_end < VIRTUAL_BASE and block.size_c == 3
    return block.x_start, block.x_end


def _reversed_blocks(nfa: Nfa) -> Nfa:
    return replace(nfa, blocks=nfa.blocks[::-1])


def _end_outside(nfa: Nfa) -> Nfa:
    inner = nfa.blocks[0]
    moved = inner._replace(x_end=inner.s0 + inner.size_c)
    return replace(nfa, blocks=(moved, *nfa.blocks[1:]))


def _empty_byte_range(nfa: Nfa) -> Nfa:
    return replace(nfa, byte_lo=nfa.byte_hi + 1)


def _lost_target(nfa: Nfa) -> Nfa:
    return replace(nfa, byte_dst=nfa.byte_dst[:-1])


def _target_past_the_blocks(nfa: Nfa) -> Nfa:
    byte_dst = nfa.byte_dst.copy()
    byte_dst[0] = VIRTUAL_BASE + nfa.virtual_states + 7
    return replace(nfa, byte_dst=byte_dst)


def _edge_out_of_a_template(nfa: Nfa) -> Nfa:
    start, _ = _inner(nfa)
    return _add_eps(nfa, start + 1, nfa.final)


def _edge_out_of_an_end(nfa: Nfa) -> Nfa:
    _, end = _inner(nfa)
    return _add_byte(nfa, end, ord("b"), end)


def _edge_into_a_start(nfa: Nfa) -> Nfa:
    start, _ = _inner(nfa)
    return _add_eps(nfa, start + 1, start)


def _extra_inside_a_copy(nfa: Nfa) -> Nfa:
    inner = nfa.blocks[0]
    middle = inner.copy_of(0, inner.x_start + 1)
    return replace(nfa, extras={**nfa.extras, middle: (inner.copy_of(0, inner.x_end),)})


def _edge_out_of_the_final_state(nfa: Nfa) -> Nfa:
    return _add_eps(nfa, nfa.final, nfa.start)


def _dead_end(nfa: Nfa) -> Nfa:
    stranded = nfa.concrete_states
    return _add_byte(replace(nfa, concrete_states=stranded + 1), nfa.start, ord("z"), stranded)


BREAKS: list[tuple[str, str, Callable[[Nfa], Nfa]]] = [
    ("edge_arrays", NESTED, _empty_byte_range),
    ("edge_arrays", NESTED, _lost_target),
    ("block_layout", NESTED, _reversed_blocks),
    ("block_layout", NESTED, _end_outside),
    ("edge_ends", NESTED, _target_past_the_blocks),
    ("closed_templates", NESTED, _edge_out_of_a_template),
    ("template_end_has_no_way_out", NESTED, _edge_out_of_an_end),
    ("template_start_has_no_way_in", NESTED, _edge_into_a_start),
    ("extras_at_copy_ends", NESTED, _extra_inside_a_copy),
    ("final_has_no_way_out", NESTED, _edge_out_of_the_final_state),
    ("trimmed", SMALL, _dead_end),
]


@pytest.mark.parametrize(
    ("check", "pattern", "breaking"), BREAKS, ids=[b[2].__name__.strip("_") for b in BREAKS]
)
def test_each_check_catches_its_broken_nfa(
    check: str, pattern: str, breaking: Callable[[Nfa], Nfa]
) -> None:
    sound = nfa_of(pattern, virtual=True)
    assert violations(sound) == []
    assert check_names(breaking(sound)) == {check}


def test_every_check_has_a_broken_nfa() -> None:
    from support.automaton_invariants import CHECKS

    assert {check for check, _, _ in BREAKS} == set(CHECKS)
