"""Where a lazy automaton's first visits spend their time, and two single-visit costs.

``split`` (the default): over every ``--every``-th maskbench schema whose automaton is a
``LazyAutomaton``, each valid instance is walked token by token three times and the
masks' total time printed for each walk:

* ``cold``: a fresh compile, as a new user pays it (first visits build DFA rows);
* ``rows built``: a fresh ``TokenIndex`` over the same automaton, whose DFA rows the cold
  walk built (first visits walk the vocabulary only);
* ``cached``: the same index again (every mask a cached copy).

``cold - rows built`` is the DFA rows' share, ``rows built - cached`` the token walks'
and the Python around them.

``string``: one free string's first visit, its DFA rows built (the Visitor's C call and
the automaton's lock around it), in us, and the tokens its row lists apart from its
template.

``small``: ``TokenIndex.packed_mask`` over 2,500 fresh states of a counted number (small
rows, their DFA rows built), in us a state, beside the visit alone (the C call under
the automaton's lock): the difference is the Python around a first visit, and the page
faults of its new masks (counted a state: where the allocator kept an earlier round's
memory, none).

``recursive``: over every ``--every``-th maskbench schema whose automaton is a
``PushdownAutomaton``, each valid instance walked cold by a fresh compile with the rows
of sets of stacks built in C (``formcast._pushdown``) and again with the Python rows
(``native_pushdown`` set to None): the masks' total time of each, their ratio, and
whether every mask is the same.

``excluded``: the first mask of a bounded string that leaves out a byte
(``"[^,\"]{1,255}"``, its DFA rows built), taken by the Visitor's way for such strings
and by a Visitor without it (the whole trie walked), in us.

``rows``: over every ``--every``-th maskbench schema whose automaton is a
``LazyAutomaton`` (or the schemas ``--names`` gives), up to ``--rows`` DFA rows built by
``formcast._subset`` (breadth-first rounds of the rows not built yet, each round one C
call), in us a row.

``growth``: over the same schemas, each valid instance walked cold: the masks' total
time, and the part of it spent growing the automata's tables
(``TableAutomaton._allocate``), in ms.

``slowest``: the four slowest masks of each schema in ``--names`` (comma-separated file
names; by default two whose key patterns match anywhere), every instance walked cold,
in us.

``faults``: over every ``--every``-th maskbench schema (every automaton kind), each valid
instance walked cold as maskbench does, the page faults taken inside the masks: in all,
a mask, and a mask of the p90-p98 band of mask times (where p95 lies), beside the masks'
mean and p95. A fault costs ~1.3 us (a page of memory new to the process, zeroed).

``band``: over every ``--every``-th maskbench schema (or those ``--names`` lists), each
valid instance walked cold as maskbench does, then again over a fresh ``TokenIndex`` of
the same automaton (the DFA rows the cold walk built, built). The masks of the p92-p98
band of the cold times (where p95 lies), by the way the Visitor took (its answer's kind;
``cached`` where the mask was kept, ``no visit`` where index.py made the row): their
count, mean cold time, the part of it inside the Visitor's C call (the rest is the
Python around the visit), and the mean with the rows built (cold minus it: the rows'
share), and the median of the (token, state) pairs the row lists (an object key's: those
not read off their first byte; a string's: those apart from its template). The C call is
timed from Python: ~0.1 us of the wrapper counts inside it.

``ways``: every mask of every ``--every``-th maskbench schema (or of those ``--names``
lists), walked cold and again with its rows built as ``band`` does, by the Visitor's way:
their count, mean cold time, mean time with the rows built, the DFA rows a cold mask
computed (a ``LazyAutomaton``'s, counted by ``formcast._subset``), and the cold masks'
total.

``keys``: over every ``--every``-th maskbench schema, each valid instance walked as
maskbench does, every object key's row the Visitor made compared with the row
index.py's own ways make on the same automaton: tokens, states, mask, and the steps of
300 random tokens; the rows compared and those that differ.

    OMP_NUM_THREADS=1 python benchmarks/first_visits.py \
        [split|string|small|recursive|excluded|rows|growth|slowest|faults|band|keys|ways]
        [--every N] [--names A.json,B.json]

Compare two commits by running it with ``PYTHONPATH=<worktree>/src`` (that worktree's C
modules built in place) and without.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("FORMCAST_DISK_CACHE", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import maskbench
import numpy as np
import numpy.typing as npt

from formcast import index as index_module
from formcast.automaton import pushdown as pushdown_module
from formcast.automaton.lazy import LazyAutomaton
from formcast.automaton.pushdown import PushdownAutomaton
from formcast.compiler import clear_memory_cache
from formcast.compiler import compile as compile_index
from formcast.cursor import Cursor
from formcast.index import TokenIndex
from formcast.vocabulary import Vocabulary

_STRING = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'


def _walk(
    index: TokenIndex,
    instances: list[list[int]],
    size: int,
    mask: Callable[[Cursor, npt.NDArray[np.uint32]], None],
) -> None:
    """Every instance walked token by token as maskbench does: ``mask(cursor, buffer)``
    writes each mask into ``buffer`` (timing it as it likes), until a token it refuses."""
    buffer = Cursor(index).bitmask(size)
    words = buffer.reshape(-1)
    for tokens in instances:
        cursor = Cursor(index)
        for token in tokens:
            mask(cursor, buffer)
            if not (int(words[token // 32]) >> (token % 32)) & 1:
                break
            cursor.advance(token)


def _walk_ms(
    index: TokenIndex, instances: list[list[int]], size: int, kept: list[Any] | None = None
) -> float:
    """The masks' total time, in ms, for every instance walked token by token (each mask
    appended to ``kept`` when given)."""
    total = [0.0]

    def timed(cursor: Cursor, buffer: npt.NDArray[np.uint32]) -> None:
        started = time.perf_counter()
        cursor.bitmask(size, out=buffer)
        total[0] += time.perf_counter() - started
        if kept is not None:
            kept.append(buffer.copy())

    _walk(index, instances, size, timed)
    return total[0] * 1e3


def _instances(tokenizer: Any, document: dict[str, Any]) -> list[list[int]]:
    schema = document["schema"]
    return [
        tokenizer.encode(maskbench.serialize(test["data"], schema), add_special_tokens=False)
        for test in document.get("tests", [])
        if test["valid"]
    ]


def split(tokenizer: Any, vocabulary: Vocabulary, every: int) -> None:
    totals = {"cold": 0.0, "rows built": 0.0, "cached": 0.0}
    masks = 0
    for path in maskbench.schema_files(every):
        document = json.loads(path.read_text())
        schema = document["schema"]
        try:
            index = compile_index(schema, vocabulary, mode="specification")
        except Exception:  # refused or unsupported: no masks to time
            continue
        if type(index.automaton) is not LazyAutomaton:
            continue
        instances = _instances(tokenizer, document)
        totals["cold"] += _walk_ms(index, instances, vocabulary.size)
        totals["rows built"] += _walk_ms(
            TokenIndex(index.automaton, vocabulary), instances, vocabulary.size
        )
        totals["cached"] += _walk_ms(index, instances, vocabulary.size)
        masks += sum(len(tokens) for tokens in instances)
        clear_memory_cache()
    print(f"every {every}th lazy schema, ~{masks:,} tokens walked; masks' total time, ms:")
    for name, total in totals.items():
        print(f"  {name:<11}{total:9.1f}")


def recursive(tokenizer: Any, vocabulary: Vocabulary, every: int) -> None:
    native = pushdown_module.native_pushdown
    if native is None:
        print("formcast._pushdown was not built: nothing to compare")
        return
    totals = {"C rows": 0.0, "Python rows": 0.0}
    schemas = differing = 0
    for path in maskbench.schema_files(every):
        document = json.loads(path.read_text())
        instances = _instances(tokenizer, document)
        masks: dict[str, list[Any]] = {}
        for name, module in (("C rows", native), ("Python rows", None)):
            pushdown_module.native_pushdown = module
            try:
                index = compile_index(document["schema"], vocabulary, mode="specification")
            except Exception:  # refused or unsupported: no masks to time
                break
            finally:
                pushdown_module.native_pushdown = native
            if type(index.automaton) is not PushdownAutomaton:
                break
            masks[name] = []
            totals[name] += _walk_ms(index, instances, vocabulary.size, masks[name])
            clear_memory_cache()
        if len(masks) == 2:
            schemas += 1
            first, second = masks.values()
            same = len(first) == len(second) and all(map(np.array_equal, first, second))
            differing += not same
    c_rows, python_rows = totals["C rows"], totals["Python rows"]
    print(f"every {every}th recursive schema: {schemas}; masks' total time, cold, ms:")
    print(f"  C rows      {c_rows:9.1f}")
    print(f"  Python rows {python_rows:9.1f}  ({python_rows / max(c_rows, 1e-9):.2f}x)")
    print(f"  schemas whose masks differ: {differing}")


def excluded(vocabulary: Vocabulary) -> None:
    automaton = LazyAutomaton(r'\{"a":"[^,"\\\x00-\x1f]{1,255}"\}')
    state = automaton.walk(b'{"a":"')
    templates = index_module._plain_templates(vocabulary)
    ways = {
        "the way for excluded bytes": index_module._visitor(vocabulary).visit,
        "the whole trie walked": index_module._new_visitor(vocabulary, templates.of).visit,
    }
    rows = []
    for visit in ways.values():
        rows.append(automaton.visit_building(visit, state))  # rows built, templates made
    timed = {}
    for name, visit in ways.items():

        def call(s: int, visit: Any = visit) -> object:
            return automaton.visit_building(visit, s)

        timed[name] = min(_per_call_us([state] * 20, call) for _ in range(5))
    (way, way_us), (walk, walk_us) = timed.items()
    print(f"a bounded string leaving out ',': {way} {way_us:.1f} us, {walk} {walk_us:.1f} us")
    print(f"  ({walk_us / way_us:.1f}x; the same bits: {rows[0][-1] == rows[1][-1]})")


def _per_call_us(states: list[int], call: Callable[[int], object]) -> float:
    started = time.perf_counter_ns()
    for state in states:
        call(state)
    return (time.perf_counter_ns() - started) / len(states) / 1e3


def string(vocabulary: Vocabulary) -> None:
    automaton = LazyAutomaton(r'\{"a":"' + _STRING + r'*"\}')
    state = automaton.walk(b'{"a":"')
    visit = index_module._visitor(vocabulary).visit
    TokenIndex(automaton, vocabulary).packed_mask(state, vocabulary.size)  # rows built
    best = min(
        _per_call_us([state] * 3_000, lambda s: automaton.visit_building(visit, s))
        for _ in range(5)
    )
    found = automaton.visit_building(visit, state)
    assert found is not None
    print(
        f"a free string's first visit, its DFA rows built: {best:.2f} us (best of 5); its row "
        f"lists {_listed(found)} tokens apart from its template"
    )


def small(vocabulary: Vocabulary) -> None:
    automaton = LazyAutomaton(r'\{"a":[0-9]{1,3000}\}')
    states = [automaton.walk(b'{"a":' + b"1" * k) for k in range(1, 2_500)]
    visit = index_module._visitor(vocabulary).visit
    for state in states:
        automaton.visit_building(visit, state)  # the DFA rows the visits read
    width = vocabulary.size

    faults: list[float] = []

    def fresh_index_round() -> float:  # every state a first visit of this index
        index = TokenIndex(automaton, vocabulary)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        spent = _per_call_us(states, lambda s: index.packed_mask(s, width))
        faults.append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / len(states))
        return spent

    masks = min(fresh_index_round() for _ in range(5))
    called = min(
        _per_call_us(states, lambda s: automaton.visit_building(visit, s)) for _ in range(5)
    )
    print(
        f"packed_mask of a fresh small row: {masks:.2f} us, the visit alone {called:.2f} us; "
        f"page faults a state in the last rounds {faults[-1]:.2f}, first round {faults[0]:.2f}"
    )


def _paths(every: int, names: str | None) -> list[Path]:
    """Every ``every``-th maskbench schema file, or those ``names`` lists."""
    if names is None:
        return maskbench.schema_files(every)
    return [maskbench.schema_files(1)[0].parent / name for name in names.split(",")]


def _compiled(
    paths: list[Path], vocabulary: Vocabulary, first_mask: bool = True
) -> Iterator[tuple[Path, dict[str, Any], TokenIndex]]:
    """``(path, document, index)`` of each schema file that compiles (with its first mask made,
    where ``first_mask``), as maskbench compiles it; a refused or unsupported one is
    skipped (nothing to time). Each index is dropped from the memory cache after its
    turn."""
    for path in paths:
        document = json.loads(path.read_text())
        try:
            index = compile_index(document["schema"], vocabulary, mode="specification")
            if first_mask:
                Cursor(index).bitmask(vocabulary.size)
        except Exception:
            continue
        yield path, document, index
        clear_memory_cache()


def _lazy_schemas(every: int, vocabulary: Vocabulary, names: str | None = None) -> Any:
    """``(document, index)`` of every ``every``-th maskbench schema (or of those
    ``names`` lists) compiled to a ``LazyAutomaton`` (see :func:`_compiled`)."""
    for _, document, index in _compiled(_paths(every, names), vocabulary):
        if type(index.automaton) is LazyAutomaton:
            yield document, index


def rows(vocabulary: Vocabulary, every: int, limit: int, names: str | None) -> None:
    seconds, built = 0.0, 0
    for _, index in _lazy_schemas(every, vocabulary, names):
        automaton = index.automaton
        assert isinstance(automaton, LazyAutomaton)
        native = automaton._native_rows()
        if native is None:
            print("formcast._subset was not built: nothing to time")
            return
        done = 0
        started = time.perf_counter()
        while done < limit:
            with automaton._lock:
                unbuilt = np.flatnonzero(automaton._table[: len(automaton._sets), 0] == -1)
                if not unbuilt.size:
                    break
                unbuilt = unbuilt[: limit - done]
                automaton._build_natively(native[0], unbuilt.tolist())
            done += unbuilt.size
        seconds += time.perf_counter() - started
        built += done
    print(f"{built:,} DFA rows built in C: {seconds / built * 1e6:.2f} us a row")


def growth(tokenizer: Any, vocabulary: Vocabulary, every: int, names: str | None) -> None:
    from formcast.automaton import table as table_module

    allocate = table_module.TableAutomaton._allocate
    spent = [0.0, 0]

    def timed(automaton: Any, capacity: int) -> None:
        started = time.perf_counter()
        allocate(automaton, capacity)
        spent[0] += time.perf_counter() - started
        spent[1] += 1

    masks = 0.0
    for document, index in _lazy_schemas(every, vocabulary, names):
        table_module.TableAutomaton._allocate = timed  # type: ignore[method-assign]
        try:
            masks += _walk_ms(index, _instances(tokenizer, document), vocabulary.size)
        finally:
            table_module.TableAutomaton._allocate = allocate  # type: ignore[method-assign]
    print(
        f"masks' total {masks:.1f} ms, of which growing tables {spent[0] * 1e3:.1f} ms "
        f"({spent[1]} growths)"
    )


_SLOWEST = "Github_hard---o57432.json,Github_medium---o71550.json"


def slowest(tokenizer: Any, vocabulary: Vocabulary, names: str) -> None:
    folder = maskbench.schema_files(1)[0].parent
    for name in names.split(","):
        document = json.loads((folder / name).read_text())
        index = compile_index(document["schema"], vocabulary, mode="specification")
        kept: list[float] = []
        buffer = Cursor(index).bitmask(vocabulary.size)
        words = buffer.reshape(-1)
        for tokens in _instances(tokenizer, document):
            cursor = Cursor(index)
            for token in tokens:
                started = time.perf_counter()
                cursor.bitmask(vocabulary.size, out=buffer)
                kept.append((time.perf_counter() - started) * 1e6)
                if not (int(words[token // 32]) >> (token % 32)) & 1:
                    break
                cursor.advance(token)
        top = ", ".join(f"{us:,.0f}" for us in sorted(kept, reverse=True)[:4])
        print(f"{name}: slowest masks {top} us (of {len(kept):,})")
        clear_memory_cache()


def faults(tokenizer: Any, vocabulary: Vocabulary, every: int) -> None:
    spent: list[float] = []
    taken: list[int] = []
    for _, document, index in _compiled(maskbench.schema_files(every), vocabulary, False):

        def counted(cursor: Cursor, buffer: npt.NDArray[np.uint32]) -> None:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            started = time.perf_counter()
            cursor.bitmask(vocabulary.size, out=buffer)
            spent.append((time.perf_counter() - started) * 1e6)
            taken.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)

        _walk(index, _instances(tokenizer, document), vocabulary.size, counted)
    times, counts = np.array(spent), np.array(taken)
    low, high = np.percentile(times, [90, 98])
    band = (times >= low) & (times <= high)
    print(
        f"every {every}th schema, {times.size:,} masks: mean {times.mean():.2f} us, "
        f"p95 {np.percentile(times, 95):.1f} us; page faults {counts.sum():,} "
        f"({counts.mean():.2f} a mask), in the p90-p98 band ({low:.1f}-{high:.1f} us) "
        f"{counts[band].mean():.2f} a mask"
    )


def _listed(found: tuple[Any, ...]) -> int:
    """The (token, state) pairs a visit's answer lists: a sorted row's, an object key's
    (those not read off their first byte), a string's apart from its template; 0 else."""
    at = {1: 1, 3: 1, 7: 3}.get(found[0])
    return 0 if at is None else len(found[at]) // 4


_VISIT_KINDS = {
    1: "sorted",
    3: "object key",
    4: "chain",
    5: "coded",
    6: "table",
    7: "string on template",
}


def _timed_visits(vocabulary: Vocabulary) -> tuple[list[float], list[str], list[int]]:
    """Every visit of this vocabulary's Visitor timed (seconds, added to ``[0]``), its
    kind and the pairs its row lists noted (``[0]``), by wrapping ``TokenIndex._visit`` and
    ``_row_of_visit``."""
    inside, kind, listed = [0.0], ["no visit"], [0]
    visit = index_module._visitor(vocabulary).visit
    clock = time.perf_counter

    def timed(table: Any, state: int, builder: Any) -> Any:
        started = clock()
        found = visit(table, state, builder)
        inside[0] += clock() - started
        return found

    row_of_visit = index_module._row_of_visit

    def noted(found: tuple[Any, ...], vocabulary: Vocabulary) -> Any:
        kind[0] = _VISIT_KINDS.get(found[0], str(found[0]))
        listed[0] = _listed(found)
        return row_of_visit(found, vocabulary)

    TokenIndex._visit = property(lambda self: timed)  # type: ignore[assignment]
    index_module._row_of_visit = noted
    return inside, kind, listed


# a mask walked cold then with its rows built: its cold time and the part inside the C
# visit (us), its way, the pairs its row lists, the DFA rows the cold mask computed, and
# its time with the rows built (us)
_Mask = tuple[float, float, str, int, int, float]


def _cold_and_built(tokenizer: Any, vocabulary: Vocabulary, paths: list[Path]) -> list[_Mask]:
    """Each schema's valid instances walked cold as maskbench does, then again over a
    fresh ``TokenIndex`` of the same automaton (its DFA rows built): every mask."""
    inside, kind, listed = _timed_visits(vocabulary)
    masks: list[_Mask] = []

    def walk(index: TokenIndex, instances: list[list[int]]) -> list[tuple[float, ...]]:
        out: list[tuple[Any, ...]] = []
        native = getattr(index.automaton, "_native", None)  # a LazyAutomaton's C rows

        def noted(cursor: Cursor, buffer: npt.NDArray[np.uint32]) -> None:
            inside[0], kind[0], listed[0] = 0.0, "no visit", 0
            cached = index.cached_packed_mask(cursor.state, vocabulary.size) is not None
            rows_before = 0 if native is None else native.rows_computed
            started = time.perf_counter()
            cursor.bitmask(vocabulary.size, out=buffer)
            spent = time.perf_counter() - started
            rows = 0 if native is None else native.rows_computed - rows_before
            way = "cached" if cached else kind[0]
            out.append((spent * 1e6, inside[0] * 1e6, way, listed[0], rows))

        _walk(index, instances, vocabulary.size, noted)
        return out

    for _, document, index in _compiled(paths, vocabulary):
        instances = _instances(tokenizer, document)
        cold = walk(index, instances)
        built = walk(TokenIndex(index.automaton, vocabulary), instances)
        masks += [(*c, b[0]) for c, b in zip(cold, built, strict=True)]  # type: ignore[misc]
    return masks


def _by_way(
    masks: list[_Mask], low: float = -np.inf, high: float = np.inf
) -> list[tuple[str, list[_Mask]]]:
    """The masks whose cold time lies in [low, high], by the Visitor's way, largest group
    first."""
    groups: dict[str, list[_Mask]] = {}
    for mask in masks:
        if low <= mask[0] <= high:
            groups.setdefault(mask[2], []).append(mask)
    return sorted(groups.items(), key=lambda item: -len(item[1]))


def ways(tokenizer: Any, vocabulary: Vocabulary, every: int, names: str | None) -> None:
    visitor = index_module._visitor(vocabulary)
    before = visitor.ways
    masks = _cold_and_built(tokenizer, vocabulary, _paths(every, names))
    times = np.array([mask[0] for mask in masks])
    print(
        f"{len(masks):,} masks: mean {times.mean():.2f} us, p95 {np.percentile(times, 95):.1f} "
        "us; every mask by the Visitor's way:"
    )
    print(
        f"  {'way':<20}{'masks':>7}{'cold us':>9}{'rows built':>12}{'DFA rows a mask':>17}"
        f"{'cold ms in all':>16}"
    )
    for name, group in _by_way(masks):
        cold_us, rows, built_us = (float(np.mean([m[i] for m in group])) for i in (0, 4, 5))
        print(
            f"  {name:<20}{len(group):>7,}{cold_us:>9.1f}{built_us:>12.1f}{rows:>17.1f}"
            f"{cold_us * len(group) / 1e3:>16.1f}"
        )
    made = {way: count - before[way] for way, count in visitor.ways.items()}
    print(f"rows the Visitor made, cold and with the rows built, by its own ways: {made}")


def band(tokenizer: Any, vocabulary: Vocabulary, every: int, names: str | None) -> None:
    masks = _cold_and_built(tokenizer, vocabulary, _paths(every, names))
    times = np.array([mask[0] for mask in masks])
    low, high = np.percentile(times, [92, 98])
    print(
        f"{times.size:,} masks: mean {times.mean():.2f} us, p95 {np.percentile(times, 95):.1f} "
        f"us; the p92-p98 band ({low:.1f}-{high:.1f} us), by the Visitor's way:"
    )
    print(
        f"  {'way':<20}{'masks':>7}{'cold us':>9}{'in C':>7}{'Python':>8}{'rows built':>12}"
        f"{'pairs (median)':>16}"
    )
    for name, group in _by_way(masks, low, high):
        cold_us, in_c, built_us = (float(np.mean([m[i] for m in group])) for i in (0, 1, 5))
        pairs = float(np.median([m[3] for m in group]))
        print(
            f"  {name:<20}{len(group):>7,}{cold_us:>9.1f}{in_c:>7.1f}{cold_us - in_c:>8.1f}"
            f"{built_us:>12.1f}{pairs:>16,.0f}"
        )


def _key_states(index: TokenIndex, instances: list[list[int]], kind: list[str]) -> list[int]:
    """The states whose first mask the Visitor made as an object key's row (``kind`` as
    :func:`_timed_visits` notes it), over the instances walked as maskbench does."""
    found: list[int] = []
    size = index.vocabulary.size

    def noted(cursor: Cursor, buffer: npt.NDArray[np.uint32]) -> None:
        kind[0] = "no visit"
        cursor.bitmask(size, out=buffer)
        if kind[0] == "object key":
            found.append(cursor.state)

    _walk(index, instances, size, noted)
    return found


def keys(tokenizer: Any, vocabulary: Vocabulary, every: int) -> None:
    _, kind, _ = _timed_visits(vocabulary)
    rng = np.random.default_rng(0)
    checked = differing = 0
    for path, document, index in _compiled(maskbench.schema_files(every), vocabulary, False):
        key_states = _key_states(index, _instances(tokenizer, document), kind)
        reference = TokenIndex(index.automaton, vocabulary)
        reference.__dict__["_visits"] = False  # index.py's own ways, one call at a time
        for state in key_states:
            mine, theirs = index._row(state), reference._row(state)
            probes = rng.integers(0, vocabulary.size, 300).tolist()
            same = (
                np.array_equal(mine.token_ids, theirs.token_ids)
                and np.array_equal(mine.next_states, theirs.next_states)
                and np.array_equal(
                    index.packed_mask(state, vocabulary.size),
                    reference.packed_mask(state, vocabulary.size),
                )
                and [index.next_state(state, t) for t in probes]
                == [reference.next_state(state, t) for t in probes]
            )
            checked += 1
            if not same:
                differing += 1
                print(f"{path.name}: state {state}'s row differs")
    print(f"every {every}th schema: {checked:,} object-key rows compared, {differing} differ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "what",
        nargs="?",
        default="split",
        choices=(
            "split",
            "string",
            "small",
            "recursive",
            "excluded",
            "rows",
            "growth",
            "slowest",
            "faults",
            "band",
            "keys",
            "ways",
        ),
    )
    parser.add_argument(
        "--every",
        type=int,
        default=4,
        help="take every Nth schema (split, recursive, rows, growth, faults, band, keys, ways)",
    )
    parser.add_argument("--rows", type=int, default=300, help="rows built a schema (rows)")
    parser.add_argument(
        "--names",
        help=f"schema files, comma-separated (slowest: {_SLOWEST}; rows, growth, band, ways)",
    )
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from formcast.models import default_model_dir

    tokenizer = AutoTokenizer.from_pretrained(default_model_dir())
    vocabulary = Vocabulary.from_tokenizer(tokenizer)
    vocabulary.byte_matrix  # noqa: B018 (built before the timings)
    gc.collect()
    gc.freeze()
    if args.what == "split":
        split(tokenizer, vocabulary, args.every)
    elif args.what == "recursive":
        recursive(tokenizer, vocabulary, args.every)
    elif args.what == "string":
        string(vocabulary)
    elif args.what == "excluded":
        excluded(vocabulary)
    elif args.what == "rows":
        rows(vocabulary, args.every, args.rows, args.names)
    elif args.what == "growth":
        growth(tokenizer, vocabulary, args.every, args.names)
    elif args.what == "slowest":
        slowest(tokenizer, vocabulary, args.names or _SLOWEST)
    elif args.what == "faults":
        faults(tokenizer, vocabulary, args.every)
    elif args.what == "band":
        band(tokenizer, vocabulary, args.every, args.names)
    elif args.what == "ways":
        ways(tokenizer, vocabulary, args.every, args.names)
    elif args.what == "keys":
        keys(tokenizer, vocabulary, args.every)
    else:
        small(vocabulary)


if __name__ == "__main__":
    main()
