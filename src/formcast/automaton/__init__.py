"""Regular expression -> *lazy* deterministic automaton over UTF-8 bytes.

The stage takes a regex in formcast's dialect (from :mod:`formcast.regex` or
:mod:`formcast.grammar`) and gives every byte automaton formcast reads: the lazy DFA
(:mod:`.lazy`), the pushdown automaton of recursive definitions (:mod:`.pushdown`), the
table both keep (:mod:`.table`), and per request the text automaton of a ``FromText``
slot (:mod:`.text`), its crossing with a slot's shape (:mod:`.shaped`) and the compiled
automaton with a text bound to its slots (:mod:`.bound`). :class:`ByteAutomaton` is what
a token index reads of any of them; :data:`DEAD`, :data:`~.table.UNBUILT` and
:data:`UNREACHABLE` are defined here once. It may import ``formcast.errors``,
``formcast.limits``, ``formcast.charset``, ``formcast.graphs`` and the slot encoding
of ``formcast.text``; nothing of the index, decoding or extraction.

The automaton reads bytes and accepts exactly the UTF-8 encodings of the strings the
pattern fully matches, but nothing is determinized up front: compiling costs time
linear in the pattern, and a DFA state's row of 256 transitions is computed the first
time a walk reaches that state.

Pipeline, and what each step costs (one module per step):

1. **Parse** (:mod:`formcast.automaton.parse`; our own iterative parser, no recursion,
   so nesting depth is unbounded) straight into a Thompson NFA over bytes. Character
   sets (literals, classes, shorthands, ``.``) become code point ranges, then UTF-8
   byte-range sequences (:func:`formcast.charset.utf8_sequences`), then a small
   deterministic byte trie that is cached per set and instantiated by offsetting state
   ids. ``[^"\\\\]`` costs ~10 NFA states, never an enumeration of code points. Runs of
   literal characters become one chain; a group that only alternates many literals
   (:data:`~formcast.automaton.choices.CHOICE_MIN_WORDS` or more) becomes the words'
   trie, built with numpy (:mod:`formcast.automaton.choices`).
2. **Counted repeats** ``X{m,n}``: ``n`` copies of ``X`` chained by epsilon edges, with
   an exit after each of copies ``m..n`` (never nested optionals, so linear in ``n``).
   Small ones (at most 4,096 added states) are copied concretely with numpy. Larger
   ones, and any repeat of a fragment that holds one, become a *virtual block*
   (:class:`formcast.automaton.nfa.Block`): ``X`` is kept once as a template and the
   copies are id ranges whose edges are derived on demand (template edges shifted into
   the copy, plus the repeat's own glue). Real schemas nest them (``maxLength: 32767``
   strings inside ``maxItems: 99`` arrays would be ~10^8 copied states); as blocks they
   cost O(1) to build.
3. **Trimmed by construction**: a sub-expression whose language is empty (a class with
   no encodable character, such as ``[\\ud800-\\udfff]``) is never linked in, so every
   NFA state reachable from the start can reach the accepting state. Hence every DFA
   state other than :data:`DEAD` can be completed to an accepted string. Concrete
   states whose only way out is one epsilon edge are then bypassed (pointer jumping).
   The result is a frozen :class:`formcast.automaton.nfa.Nfa`.
4. **Lazy subset construction** (:mod:`formcast.automaton.lazy`): a DFA state is the
   frozenset of the "important" NFA states (those with byte edges, plus the final
   state) in an epsilon closure; rows are built when first reached.
5. **Distances** (:mod:`formcast.automaton.distances`): the fewest (or cheapest) bytes
   from a state to acceptance, for budget-safe endings, searched backwards over the NFA
   with virtual copies summarized, never enumerated.
6. **Recursion** (only for patterns whose definitions call each other in cycles;
   :func:`compile_automaton` picks it): the definitions' call graph is split into
   strongly connected components (:mod:`formcast.automaton.definitions`); calls that are
   on no cycle stay copies as above, and calls into a cycle become *call markers* in a
   machine's bytes (:mod:`formcast.automaton.markers`). Each recursive definition and
   the main pattern is then a :class:`LazyAutomaton` over one shared NFA
   (:mod:`formcast.automaton.machines`), and a :class:`PushdownAutomaton`
   (:mod:`formcast.automaton.pushdown`) runs them as a lazily determinized automaton
   whose states are interned sets of stacks, with the same interface: an index, its
   cursors, masks, jump-forward and budget-safe endings work over either. Left
   recursion and definitions that match nothing are refused, by name.

Measured CPU time (one core of a shared 2-core machine, Python 3.11; 360 JSON-Schema
regexes from ``maskbench``, ``tests/automaton/test_automaton.py`` prints some): compiling
~0.1-0.2 us per pattern character with the C parse loop (a 200,000-character Kubernetes
pattern ~25 ms to its automaton), ~1-2 us without it; a row ~20-100 us (a few hundred
us for states with hundreds of NFA members);
:meth:`LazyAutomaton.step` over 49k (state, byte) pairs whose rows exist ~0.3 ms. The
first :meth:`LazyAutomaton.min_bytes_to_accept` call per ``usable`` mask runs a search
backwards over the concrete NFA (~0.05-0.1 s per 100,000 pattern characters; virtual copies
are summarized, never enumerated); later calls are O(members of the state).

Dialect (Python :mod:`re` syntax, full-match semantics): literals (any character),
escapes of punctuation, ``\\n \\t \\r \\f \\v \\a \\0``, octal, ``\\xNN \\uNNNN
\\UNNNNNNNN \\N{name}``, ``\\d \\w \\s`` with their ASCII meaning (as under
:data:`re.ASCII`) and ``\\D \\W \\S`` their complements over all of Unicode, ``.`` (any
character but ``\\n``; any character under ``(?s)``), classes with ranges, negation and
escapes, groups ``( )``, ``(?: )``, ``(?P<name> )``, comments ``(?#...)``, alternation
(empty branches included), greedy and lazy quantifiers ``? * + {m} {m,} {m,n} {,n}``,
the flags ``a m s`` (global at the start, or scoped ``(?s:...)``), ``^`` at the very
start and ``$`` at the very end (no-ops under full match). Also PCRE's definitions and
subroutine calls, which Python's ``re`` lacks: the pattern may open with
``(?(DEFINE)(?P<name>...)...)``, whose named groups match nothing there, and
``(?&name)`` anywhere matches what its body matches. :class:`LazyAutomaton` takes calls
to earlier definitions only (no recursion; it refuses the others with
:class:`~formcast.automaton.parse.UnresolvedCallError`); :func:`compile_automaton` also
takes calls to later definitions and recursion, exactly, through a
:class:`PushdownAutomaton` (left recursion excepted). A call to a definition of more
than 64 states is a virtual block of one copy, so nested calls cost their text once,
however large their expansion. Refused with :class:`~formcast.errors.SchemaError`
(message "expected a regular expression formcast can compile, found <pattern>: <reason>
at position N"):
lookarounds, backreferences, ``\\b \\B \\A \\Z``, anchors elsewhere, the flags ``i x u
L``, possessive quantifiers, atomic and conditional groups, and whatever Python's ``re``
itself rejects (unbalanced parentheses, ``a{3,1}``, bad escapes, nothing to repeat).
Text that is not valid UTF-8 (overlong forms, surrogates, beyond U+10FFFF, truncated) is
never accepted.

Thread safety: reads (:meth:`LazyAutomaton.step` on built rows) take no lock; building
rows is serialised by a lock with a double check, so concurrent walkers are safe.
Instances pickle with the rows built so far. The same holds for
:class:`PushdownAutomaton`.
"""

from __future__ import annotations

from formcast.automaton.definitions import EmptyDefinitionError, plan_recursion
from formcast.automaton.distances import UNREACHABLE
from formcast.automaton.lazy import DEAD, LazyAutomaton
from formcast.automaton.parse import UnresolvedCallError
from formcast.automaton.protocol import ByteAutomaton
from formcast.automaton.pushdown import PushdownAutomaton
from formcast.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "DEAD",
    "EMPTY_CLASS",
    "UNREACHABLE",
    "ByteAutomaton",
    "LazyAutomaton",
    "PushdownAutomaton",
    "compile_automaton",
]


EMPTY_CLASS = r"[^\x00-\U0010ffff]"
"""A character class that holds no character: a piece of a pattern that matches nothing."""


def compile_automaton(
    pattern: str, limits: Limits = DEFAULT_LIMITS, *, drop_empty_definitions: bool = False
) -> LazyAutomaton | PushdownAutomaton:
    """The byte automaton of ``pattern``: a :class:`LazyAutomaton` when its definitions
    do not recurse, else a :class:`PushdownAutomaton`.

    A pattern without recursion is built exactly as ``LazyAutomaton(pattern)``: the plain
    build runs first, and only a call it cannot resolve (one before or inside its
    definition) makes the definitions be planned (:mod:`formcast.automaton.definitions`).
    Calls to definitions written later, with no cycle among them, are then reordered and
    built as a :class:`LazyAutomaton` too.

    A recursive definition that matches no string (it cannot end without calling itself
    again) is refused, naming it, unless ``drop_empty_definitions``: then every call to
    such a definition is replaced by a piece that matches nothing, which keeps the
    language as it is (a translated schema whose recursive sub-schema has no finite
    value: the places that allow leaving it out still match). The pattern is then
    planned and its machines built a second time.

    Raises:
        SchemaError: as :class:`LazyAutomaton` and :class:`PushdownAutomaton`.
    """
    try:
        return LazyAutomaton(pattern, limits)
    except UnresolvedCallError:
        pass
    plan = plan_recursion(pattern)
    if not plan.recursive:
        return LazyAutomaton(plan.pattern, limits)
    try:
        return PushdownAutomaton(pattern, limits, plan)
    except EmptyDefinitionError as error:
        if not drop_empty_definitions:
            raise
        pruned = pattern
        for name in error.names:
            pruned = pruned.replace(f"(?&{name})", EMPTY_CLASS)
    return compile_automaton(pruned, limits)
