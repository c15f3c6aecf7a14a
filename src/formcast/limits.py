"""The tuning limits of compilation, in one documented object.

Every stage bounds its work so that no schema can make a compile run away: the regex
stage bounds the text it writes and the automata it builds for patterns, the automaton
bounds the states it copies. :class:`Limits` gathers those bounds; :func:`formcast.compile`
(and the extractor's ``compile``) take one as ``limits=``. The defaults are what the test
suite and the maskbench figures are measured with.

A limit is one of two kinds, said in each docstring:

* **refusal**: past it, the schema is refused with
  :class:`~formcast.errors.UnsupportedSchemaError` (or recursion is unrolled fewer times,
  with a warning). Raising it accepts more schemas at the cost of time and memory;
* **speed/memory trade**: past it, the same language is built another way (a shared
  definition, a virtual copy). Answers do not change, only costs.

Limits are part of a constraint's cache key: indexes compiled with other limits are other
entries.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from formcast.errors import InvalidOptionError

__all__ = ["DEFAULT_LIMITS", "Limits"]


@dataclass(frozen=True)
class Limits:
    """Bounds on the work of compiling one constraint. Every field is an int >= 0
    (``any_value_depth`` may also be None)."""

    # -- schema -> regex ----------------------------------------------------------------
    max_regex_length: int = 1_000_000
    """Refusal: characters of the regex of one schema. Recursion is unrolled fewer times
    to fit; a schema whose regex is longer even then is refused. Compile time and the
    automaton's size grow about linearly with it. A long ``enum``/``Literal`` list of
    strings, which the automaton builds as a trie, counts a quarter of its characters
    (:func:`formcast.automaton.choices.pattern_cost`): about 100,000 city names fit."""

    any_value_depth: int | None = 12
    """Refusal-free bound: levels of nesting of an unconstrained JSON value (schema ``true``
    or ``{}``) in ``specification`` mode. Each level is one definition of a few hundred
    characters. ``None``: any depth, exactly, through one recursive definition (the
    constraint then compiles to a pushdown automaton, whose indexes are not written to
    the disk cache)."""

    share_min_length: int = 400
    """Speed/memory: when a regex is rebuilt with sharing, sub-schema regexes at least this
    long become definitions called by ``(?&name)`` instead of being written out again."""

    share_repeated_min_length: int = 100
    """Speed/memory: the same, for sub-schema regexes written several times."""

    unshared_regex_length: int = 200_000
    """Speed/memory: a regex longer than this without sharing is built again with sharing.
    Calls resolve states more slowly than plain copies, so sharing waits until then. Long
    ``enum`` lists of strings do not count here (sharing cannot shorten one list; one
    written many times passes ``max_regex_length`` and is shared then)."""

    max_subschemas: int = 12_000
    """Refusal: sub-schemas translated for one document (``$ref`` expansions included)."""

    max_conditional_dependencies: int = 6
    """Refusal: ``dependentRequired``/``dependentSchemas`` entries whose conditions are
    expanded into the 2**n combinations of present and absent names."""

    # -- ECMAScript patterns --------------------------------------------------------------
    max_pattern_nfa_states: int = 4_000
    """Refusal: character NFA states of a ``pattern`` crossed with length bounds."""

    max_pattern_dfa_states: int = 400
    """Refusal: DFA states of such a pattern."""

    max_length_product: int = 8_000
    """Refusal: (DFA state, length) pairs written as definitions for a ``pattern`` with
    ``minLength``/``maxLength``."""

    max_eliminated_states: int = 300
    """Refusal: DFA states turned back into a regex by state elimination (pattern
    complements and differences)."""

    max_eliminated_regex_length: int = 60_000
    """Refusal: characters of any regex built while eliminating states."""

    # -- regex -> byte automaton ---------------------------------------------------------
    concrete_copy_limit: int = 4_096
    """Speed/memory: a counted repeat adding more NFA states than this becomes a virtual
    block (copies numbered arithmetically, built on demand) instead of concrete copies."""

    concrete_budget: int = 1_000_000
    """Speed/memory: past this many concrete NFA states, every repeat is virtual."""

    max_copies: int = 1_000_000
    """Refusal: copies of one repeated group (``x{0,n}`` with ``n`` larger is refused)."""

    call_copy_limit: int = 64
    """Speed/memory: definitions with at most this many states are copied concretely per
    call instead of shared as a virtual template."""

    memo_min_group: int = 40
    """Speed: groups at least this many characters long are parsed once per distinct
    text; an equal group written again copies the NFA built the first time."""

    # -- recursion (pushdown automata) ---------------------------------------------------
    max_pushdown_stacks: int = 4_096
    """Refusal: stacks (parses of a recursive pattern followed at once) in one state of a
    :class:`~formcast.automaton.pushdown.PushdownAutomaton`. Unambiguous grammars keep a
    few; a grammar ambiguous enough to exceed it fails with
    :class:`~formcast.errors.SchemaError` when a walk reaches such a state,
    instead of slowing every row down and eating memory: a row costs time linear in
    its stacks, and each stack's frames stay interned."""

    # -- grammars --------------------------------------------------------------------
    grammar_rows_at_compile: int = 4_096
    """Speed trade: rows of a grammar's byte automaton built when it compiles, breadth-first
    from its start (for a recursive grammar, rows of its rules' machines, shared among
    them), so that its first masks walk the vocabulary through rows already built instead
    of building them on the way: a grammar's masks keep their latency from the first
    token. Costs about 10-40 us a row at compile (the shared grammars: up to about 50 ms),
    and the disk cache stores those rows. 0: rows are built when a walk first reaches
    them, as for schemas and regexes, whose automata are larger and mostly never visited."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None and field.name in _OPTIONAL:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                allowed = " or None" if field.name in _OPTIONAL else ""
                raise InvalidOptionError(
                    f"expected Limits.{field.name} to be an int >= 0{allowed}, found {value!r}"
                )

    def key(self) -> str:
        """A canonical text of the limits that differ from the defaults (empty when none),
        for cache keys."""
        changed = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != field.default
        }
        return ",".join(f"{name}={value}" for name, value in sorted(changed.items()))

    def replace(self, **changes: Any) -> Limits:
        """A copy with ``changes`` applied (checked like the constructor)."""
        return dataclasses.replace(self, **changes)


_OPTIONAL = frozenset({"any_value_depth"})  # fields that may be None (unbounded)

DEFAULT_LIMITS = Limits()
"""The limits used when ``compile`` is given none."""
