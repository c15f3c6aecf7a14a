"""PushdownAutomaton: recursive definitions, checked against an independent recognizer.

Each grammar of ``GRAMMARS`` is written once (tests/reference/grammar.py) and gives both
the dialect regex formcast compiles and a reference recognizer built on Python's ``re``.
Properties: random derivations are accepted byte by byte and token by token through a
``Cursor``; mutated strings are accepted exactly when the reference accepts them; random
token decoding under a budget ends in a string the reference accepts; budget distances
are exact along a greedy completion.
"""

from __future__ import annotations

import dataclasses
import pickle
import random
from pathlib import Path

import numpy as np
import pytest

import formcast
from formcast.automaton import (
    DEAD,
    UNREACHABLE,
    LazyAutomaton,
    PushdownAutomaton,
    compile_automaton,
)
from formcast.automaton import pushdown as pushdown_module
from formcast.automaton.parse import build_nfa
from formcast.cache import disk_cache_stats
from formcast.compiler import clear_memory_cache
from formcast.index import TokenIndex
from formcast.limits import Limits
from formcast.vocabulary import Vocabulary
from reference.grammar import Alt, Call, Chars, Grammar, Lit, Opt, Star

DIGITS = "0123456789"

PARENS = Grammar({"p": (Lit("("), Star((Call("p"),)), Lit(")"))}, (Star((Call("p"),)),))

STRING = (Lit('"'), Chars("ab ", 0, 4), Lit('"'))
JSON = Grammar(
    {
        "value": (
            Alt(
                (
                    (Call("object"),),
                    (Call("array"),),
                    STRING,
                    (Opt((Lit("-"),)), Chars(DIGITS, 1, 3)),
                    (Lit("true"),),
                    (Lit("null"),),
                )
            ),
        ),
        "object": (
            Lit("{"),
            Opt((Call("member"), Star((Lit(","), Call("member"))))),
            Lit("}"),
        ),
        "member": (*STRING, Lit(":"), Call("value")),
        "array": (Lit("["), Opt((Call("value"), Star((Lit(","), Call("value"))))), Lit("]")),
    },
    (Call("value"),),
)

ARITHMETIC = Grammar(
    {
        "expr": (Call("term"), Star((Chars("+-"), Call("term")))),
        "term": (Call("factor"), Star((Chars("*/"), Call("factor")))),
        "factor": (
            Alt(
                (
                    (Chars(DIGITS, 1, 3),),
                    (Lit("("), Call("expr"), Lit(")")),
                    (Lit("-"), Call("factor")),
                )
            ),
        ),
    },
    (Call("expr"),),
)

# mutual recursion, written callers first (calls to definitions written later)
MUTUAL = Grammar(
    {
        "even": (Alt(((Lit("a"), Call("odd")), (Lit("."),))),),
        "odd": (Lit("b"), Call("even")),
    },
    (Call("even"), Opt((Lit("!"),))),
)

# nullable rules and right (tail) recursion
LISTS = Grammar(
    {
        "list": (Call("item"), Opt((Lit(","), Call("list")))),
        "item": (Opt((Chars("xy", 1, 2),)), Opt((Lit("<"), Call("list"), Lit(">")))),
        "tail": (Opt((Lit("n"), Call("tail"))),),
    },
    (Call("list"), Lit(";"), Call("tail")),
)

GRAMMARS = {
    "parens": PARENS,
    "json": JSON,
    "arithmetic": ARITHMETIC,
    "mutual": MUTUAL,
    "lists": LISTS,
}

ALPHABET = sorted(set('()[]{}",:-+*/;<>!.abnxytrue0123456789 '))
EOS = 0
TOKENS = [
    b"",  # EOS
    *(c.encode() for c in ALPHABET),
    b"((",
    b"))",
    b"[[",
    b"]]",
    b"],",
    b'{"',
    b'":',
    b'"a',
    b"true",
    b"null",
    b"12",
    b"1+",
    b"),",
    b"ab",
    b">,",
    b"<x",
    b"nn",
]


@pytest.fixture(scope="module")
def vocabulary() -> Vocabulary:
    return Vocabulary.from_token_bytes(TOKENS, [EOS])


@pytest.fixture(scope="module", params=sorted(GRAMMARS))
def grammar(request: pytest.FixtureRequest) -> tuple[str, Grammar, PushdownAutomaton]:
    chosen = GRAMMARS[request.param]
    automaton = compile_automaton(chosen.regex())
    assert isinstance(automaton, PushdownAutomaton)
    return request.param, chosen, automaton


def _tokenize(text: bytes) -> list[int]:
    """Greedy longest-match tokenization over TOKENS (every character is a token)."""
    ids = {token: k for k, token in enumerate(TOKENS) if token}
    out = []
    position = 0
    while position < len(text):
        for width in (4, 3, 2, 1):
            found = ids.get(text[position : position + width])
            if found is not None:
                out.append(found)
                position += width
                break
    return out


# -- hand-written cases ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "accepted", "rejected"),
    [
        ("parens", ["", "()", "(())()", "((()())())"], ["(", ")", "())", "(()", ")("]),
        (
            "json",
            ['{"a":[1,{"b":null}]}', "[[],[[]]]", '"ab"', "-12", '{"":true,"b":[]}'],
            ["[1,]", '{"a"}', "[[]", "01234", '{"a":1,}', "tru"],
        ),
        (
            "arithmetic",
            ["1", "1+2*3", "(1+2)*-3", "--1", "((((7))))/2-(3)"],
            ["", "1+", "(1", "1)", "*1", "1234"],
        ),
        ("mutual", [".", "ab.", "abab.!", "abababab."], ["a.", "b.", "aba.", "abab", ".!!"]),
        (
            "lists",
            [";", "x;", ",,;n", "<x,y>,x;nn", "<<>>;", "xy,<,>;"],
            ["x", "xyx;", "<;", "x;x"],
        ),
    ],
)
def test_hand_written_strings(name: str, accepted: list[str], rejected: list[str]) -> None:
    reference = GRAMMARS[name]
    automaton = compile_automaton(reference.regex())
    for text in accepted:
        assert reference.matches(text), text
        assert automaton.matches(text.encode()), text
    for text in rejected:
        assert not reference.matches(text), text
        assert not automaton.matches(text.encode()), text


def test_balanced_parentheses_at_depth_1000() -> None:
    automaton = compile_automaton(PARENS.regex())
    deep = "(" * 1000 + ")" * 1000
    assert automaton.matches(deep.encode())
    assert not automaton.matches(deep[:-1].encode())
    state = automaton.walk(b"(" * 1000)
    assert automaton.min_bytes_to_accept(state) == 1000
    # two stacks over the main pattern's frame and 1,000 open "p": one about to read
    # ")", one with a nested "p" called, about to read "("; they share their suffix
    stacks = sorted(automaton.stacks(state), key=len)
    assert [len(stack) for stack in stacks] == [1001, 1002]
    assert stacks[1][1:] == stacks[0]
    assert stacks[0][-1] == ("(main)", stacks[0][-1][1])


def test_arithmetic_at_depth_1000() -> None:
    automaton = compile_automaton(ARITHMETIC.regex())
    assert automaton.matches(("(" * 1000 + "1" + ")" * 1000).encode())
    assert automaton.matches(("-" * 1000 + "1").encode())


def test_tail_calls_keep_stacks_bounded() -> None:
    """Right recursion reuses the caller's frame: a list of 500 items is one frame deep."""
    automaton = compile_automaton(LISTS.regex())
    assert isinstance(automaton, PushdownAutomaton)
    state = automaton.walk(b"x," * 500)
    assert max(len(stack) for stack in automaton.stacks(state)) <= 3
    assert automaton.num_states < 40
    state = automaton.walk(b"x;" + b"n" * 500)
    assert max(len(stack) for stack in automaton.stacks(state)) == 1


def test_left_recursion_is_refused_with_the_definition_named() -> None:
    with pytest.raises(formcast.SchemaError, match="definition 'e' is left-recursive"):
        compile_automaton(r"(?(DEFINE)(?P<e>(?&e)\+(?&t)|(?&t))(?P<t>\d))(?&e)")
    # through a nullable prefix and another definition
    with pytest.raises(formcast.SchemaError, match=r"'a' is left-recursive.*a -> b -> a"):
        compile_automaton(r"(?(DEFINE)(?P<a>y?(?&b)x|z)(?P<b>q*(?&a)))(?&a)")


def test_definitions_matching_nothing_are_refused() -> None:
    with pytest.raises(formcast.SchemaError, match="definition 'a' matches no string"):
        compile_automaton(r"(?(DEFINE)(?P<a>x(?&a)))y|(?&a)")


@pytest.mark.parametrize(
    "pattern",
    [
        # c completes alone, b only through c, a only through b: three rounds
        r"(?(DEFINE)(?P<a>x(?&a)|y(?&b))(?P<b>z(?&b)|w(?&c))(?P<c>q(?&c)?))(?&a)",
        r"(?(DEFINE)(?P<v>\[(?:(?&v)(?:,(?&v))*)?\]|[0-9]{1,3}))(?&v)",
        r"(?(DEFINE)(?P<a>x(?&b))(?P<b>y(?&a)|z))(?&a)",
    ],
)
def test_the_productive_definitions_are_those_of_finite_completion_cost(pattern: str) -> None:
    """The compile-time check finds the definitions that can complete with calls costing
    nothing (round by round); they are exactly those of a finite cost in the least
    fixpoint of the exact costs (what budgets read)."""
    automaton = compile_automaton(pattern)
    assert isinstance(automaton, PushdownAutomaton)
    machines = automaton._machines
    exact = [cost < UNREACHABLE for cost in machines.completions(None)]
    assert machines._productive() == exact
    assert all(exact)


def test_a_definition_completing_only_through_an_empty_one_is_refused() -> None:
    with pytest.raises(formcast.SchemaError, match="matches no string"):
        compile_automaton(r"(?(DEFINE)(?P<a>x(?&b))(?P<b>y(?&a)))z|(?&a)")


def test_unknown_and_misplaced_definitions_are_refused() -> None:
    with pytest.raises(formcast.SchemaError, match="unknown subroutine 'zz'"):
        compile_automaton(r"(?(DEFINE)(?P<a>x(?&a)?))(?&zz)")
    with pytest.raises(formcast.SchemaError, match="must open the pattern"):
        compile_automaton(r"x(?(DEFINE)(?P<a>x(?&a)?))(?&a)")


def test_forward_calls_without_a_cycle_build_a_lazy_automaton() -> None:
    automaton = compile_automaton(r"(?(DEFINE)(?P<b>(?&a)y)(?P<a>[0-9]))(?&b)")
    assert isinstance(automaton, LazyAutomaton)
    assert automaton.matches(b"7y")
    assert not automaton.matches(b"y")


def test_patterns_without_recursion_build_the_same_lazy_automaton() -> None:
    pattern = r'(?(DEFINE)(?P<s>"[a-c]*")(?P<v>(?&s)|[0-9]+))\[(?&v)(?:,(?&v)){0,40}\]'
    built = compile_automaton(pattern)
    plain = LazyAutomaton(pattern)
    assert type(built) is LazyAutomaton
    assert built.nfa_size == plain.nfa_size
    for text in [b'["a",1]', b"[1" + b",2" * 40 + b"]", b"[]"]:
        assert built.matches(text) == plain.matches(text)
    assert built.num_states == plain.num_states


def test_too_many_stacks_fail_with_the_limit_named() -> None:
    # every "a" may close any of the open nestings: the parses multiply
    ambiguous = r"(?(DEFINE)(?P<s>a(?&s)?a?|b))(?&s)"
    automaton = compile_automaton(ambiguous, Limits(max_pushdown_stacks=8))
    with pytest.raises(formcast.SchemaError, match="max_pushdown_stacks"):
        automaton.walk(b"a" * 40)
    assert compile_automaton(ambiguous).matches(b"a" * 40 + b"b")


def test_pickles_with_its_states() -> None:
    automaton = compile_automaton(JSON.regex())
    state = automaton.walk(b'{"a":[[')
    copy = pickle.loads(pickle.dumps(automaton))
    assert copy.walk(b"1]]}", state) == automaton.walk(b"1]]}", state)
    assert copy.is_accepting(copy.walk(b"1]]}", state))


# -- properties against the reference ----------------------------------------------------
def test_random_derivations_are_accepted_byte_by_byte(
    grammar: tuple[str, Grammar, PushdownAutomaton],
) -> None:
    _, reference, automaton = grammar
    rng = random.Random(1)
    for _ in range(60):
        text = reference.sample(rng, depth=rng.randint(0, 6)).encode()
        state = automaton.initial
        for byte in text:
            state = int(automaton.step(np.array([state], np.int32), np.array([byte], np.uint8))[0])
            assert state != DEAD, text
        assert automaton.is_accepting(state), text


def test_mutations_are_accepted_exactly_when_the_reference_accepts(
    grammar: tuple[str, Grammar, PushdownAutomaton],
) -> None:
    _, reference, automaton = grammar
    rng = random.Random(2)
    agreed = {True: 0, False: 0}
    for _ in range(150):
        text = list(reference.sample(rng, depth=rng.randint(0, 5)))
        for _ in range(rng.randint(1, 2)):
            where = rng.randint(0, len(text))
            action = rng.choice(["insert", "delete", "replace"])
            if action == "insert" or not text:
                text.insert(where, rng.choice(ALPHABET))
            elif action == "delete":
                del text[min(where, len(text) - 1)]
            else:
                text[min(where, len(text) - 1)] = rng.choice(ALPHABET)
        mutated = "".join(text)
        expected = reference.matches(mutated)
        assert automaton.matches(mutated.encode()) == expected, mutated
        agreed[expected] += 1
    assert agreed[False] > 20  # the mutations do reach rejected strings


def test_distances_are_reached_by_a_greedy_completion(
    grammar: tuple[str, Grammar, PushdownAutomaton],
) -> None:
    """From a prefix, always taking a byte that lowers the distance by one reaches an
    accepted string in exactly the distance: the distance is exact, never a guess."""
    _, reference, automaton = grammar
    rng = random.Random(3)
    for _ in range(30):
        text = reference.sample(rng, depth=rng.randint(1, 5)).encode()
        prefix = text[: rng.randint(0, len(text))]
        state = automaton.walk(prefix)
        distance = automaton.min_bytes_to_accept(state)
        assert distance < UNREACHABLE
        completion = bytearray()
        while not automaton.is_accepting(state) or distance:
            row = automaton.row(state)
            closer = [
                b
                for b in np.flatnonzero(row).tolist()
                if automaton.min_bytes_to_accept(int(row[b])) == distance - 1
            ]
            assert closer, (prefix, bytes(completion))
            completion.append(closer[0])
            state = int(row[closer[0]])
            distance -= 1
        assert reference.matches((prefix + completion).decode()), prefix + completion


def test_derivations_are_accepted_token_by_token(
    grammar: tuple[str, Grammar, PushdownAutomaton], vocabulary: Vocabulary
) -> None:
    _, reference, automaton = grammar
    index = TokenIndex(automaton, vocabulary)
    rng = random.Random(4)
    for _ in range(25):
        text = reference.sample(rng, depth=rng.randint(0, 5)).encode()
        cursor = index.cursor()
        for token in _tokenize(text):
            assert token in cursor.allowed_token_ids().tolist(), (text, TOKENS[token])
            cursor.advance(token)
        assert cursor.is_accepting(), text
        assert EOS in cursor.allowed_token_ids().tolist()  # allowed once accepting


def test_random_token_decoding_ends_in_an_accepted_string(
    grammar: tuple[str, Grammar, PushdownAutomaton], vocabulary: Vocabulary
) -> None:
    """Tokens drawn at random from the mask, with a budget: the output always closes in
    time (budget rows use the pushdown distances) and the reference accepts it."""
    _, reference, automaton = grammar
    index = TokenIndex(automaton, vocabulary)
    rng = random.Random(5)
    for _ in range(25):
        budget = rng.randint(index.min_tokens_to_accept(index.initial_state), 40)
        cursor = index.cursor()
        out = bytearray()
        for tokens_left in range(budget, 0, -1):
            allowed = [t for t in cursor.allowed_token_ids(tokens_left).tolist() if t != EOS]
            if cursor.is_accepting() and (not allowed or rng.random() < 0.15):
                break  # EOS
            assert allowed, bytes(out)
            token = rng.choice(allowed)
            out += TOKENS[token]
            cursor.advance(token)
        assert cursor.is_accepting(), bytes(out)
        assert reference.matches(out.decode()), bytes(out)


def test_forced_bytes_follow_the_only_way_on(vocabulary: Vocabulary) -> None:
    index = TokenIndex(compile_automaton(MUTUAL.regex()), vocabulary)
    state = index.walk_bytes(index.initial_state, b"a")
    assert index.forced_bytes(state) == b"b"
    state = index.walk_bytes(index.initial_state, b"(")
    assert state == -1


def test_compile_stores_a_pushdown_index_on_disk(
    vocabulary: Vocabulary, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = formcast.Regex(ARITHMETIC.regex())
    index = formcast.compile(output, vocabulary, cache=tmp_path)
    assert isinstance(index.automaton, PushdownAutomaton)
    assert formcast.compile(output, vocabulary, cache=tmp_path) is index
    clear_memory_cache()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a disk-cache hit must not build the automaton")

    monkeypatch.setattr(formcast.compiler, "compile_automaton", refuse)
    before = disk_cache_stats()["hits"]
    loaded = formcast.compile(output, vocabulary, cache=tmp_path)
    assert disk_cache_stats()["hits"] == before + 1
    assert isinstance(loaded.automaton, PushdownAutomaton) and loaded is not index
    cursor = loaded.cursor()
    for token in _tokenize(b"(1+2)*-(3/45)"):
        cursor.advance(token)
    assert cursor.is_accepting()


def test_a_stored_index_is_an_exact_copy_that_answers_alike(
    grammar: tuple[str, Grammar, PushdownAutomaton], vocabulary: Vocabulary
) -> None:
    """``to_bytes``/``from_bytes`` of a pushdown index with rows, budget distances and
    deep states built: the copy has the same state ids, and both, walked in lockstep
    along random token paths (rows built after loading included), give the same rows,
    acceptance, budget distances, budget rows and forced bytes."""
    _, reference, _ = grammar
    written = TokenIndex(compile_automaton(reference.regex()), vocabulary)
    rng = random.Random(6)
    for _ in range(5):
        cursor = written.cursor()
        for token in _tokenize(reference.sample(rng, depth=rng.randint(2, 5)).encode()):
            cursor.advance(token)
            cursor.min_tokens_to_accept()
    loaded = TokenIndex.from_bytes(written.to_bytes(), vocabulary)
    automaton, copy = written.automaton, loaded.automaton
    assert isinstance(automaton, PushdownAutomaton) and isinstance(copy, PushdownAutomaton)
    assert copy.num_states == automaton.num_states and copy.initial == automaton.initial
    assert loaded.computed_rows == written.computed_rows
    stored_rows = loaded.computed_rows
    for state in range(1, automaton.num_states):
        assert copy.stacks(state) == automaton.stacks(state)
    for _ in range(30):
        state = written.initial_state
        for _ in range(rng.randint(1, 30)):
            ids, following = written.row(state)
            copied_ids, copied_following = loaded.row(state)
            assert ids.tolist() == copied_ids.tolist()
            assert following.tolist() == copied_following.tolist()
            assert written.is_accepting(state) == loaded.is_accepting(state)
            assert written.min_tokens_to_accept(state) == loaded.min_tokens_to_accept(state)
            assert written.forced_bytes(state) == loaded.forced_bytes(state)
            budget = rng.randint(1, 6)
            assert written.budget_row(state, budget)[0].tolist() == (
                loaded.budget_row(state, budget)[0].tolist()
            )
            if not ids.size:
                break
            state = int(following[rng.randrange(ids.size)])
    assert loaded.computed_rows > stored_rows  # the walks went on past what was stored
    assert copy.num_states == automaton.num_states


def test_more_definitions_than_one_marker_digit_numbers() -> None:
    """30 mutually recursive definitions: callees numbered with two marker digits."""
    count = 30
    letters = [chr(ord("a") + k % 26) for k in range(count)]
    definitions = "".join(f"(?P<r{k}>{letters[k]}(?&r{(k + 1) % count})?)" for k in range(count))
    automaton = compile_automaton(f"(?(DEFINE){definitions})(?&r0)")
    assert isinstance(automaton, PushdownAutomaton)
    text = "".join(letters[k % count] for k in range(75))
    for end in (1, 29, 30, 31, 75):
        assert automaton.matches(text[:end].encode())
    assert not automaton.matches(text[:40].encode() + b"a")
    assert not automaton.matches(b"b")


def test_an_automaton_over_the_same_edges_shares_their_index_and_others_are_refused() -> None:
    nfa = build_nfa("ab|c")
    first = LazyAutomaton.of_nfa(nfa)
    shifted = dataclasses.replace(nfa, final=nfa.start)  # same edges, another end
    sharing = LazyAutomaton.of_nfa(shifted, edges_of=first)
    assert sharing.matches(b"") and not sharing.matches(b"ab")
    assert first.matches(b"ab") and not first.matches(b"")  # its own end is kept
    with pytest.raises(ValueError, match="same NFA edges"):
        LazyAutomaton.of_nfa(build_nfa("ab|c"), edges_of=first)  # equal edges, other arrays


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?(DEFINE)(?P<v>\[(?:(?&v)(?:,(?&v)){0,40})?\]|[0-9]{1,3}(?:\.[0-9]{2,300})?))(?&v)",
        r"(?(DEFINE)(?P<a>x(?&a){2,5}|y(?&b))(?P<b>(?:zw){100}(?&b)|w(?&c))(?P<c>q{3,90}(?&c)?))(?&a)",
    ],
)
def test_machines_share_the_block_distances_and_answer_as_alone(pattern: str) -> None:
    """The machines of a pushdown automaton search their counted repeats' distances once
    (SharedScopes, per cost table) and only their own end each; every distance is the
    one an automaton of the machine alone finds."""
    automaton = compile_automaton(pattern, Limits(concrete_copy_limit=16))
    assert isinstance(automaton, PushdownAutomaton)
    machines = automaton._machines
    usable = np.ones(256, dtype=np.bool_)
    usable[ord("x")] = False
    for costs in (None, usable):
        completions = machines.completions(costs)
        for machine in machines.automata:
            alone = LazyAutomaton.of_nfa(machine._nfa)
            for state in range(1, min(machine.num_states, 40)):
                members = machine._members(state)
                expected = alone._distances.min_bytes(members, costs, None, completions)
                assert machine.min_bytes_to_accept(state, costs, call_costs=completions) == (
                    expected
                )
    shared = machines.automata[0]._edges.scopes
    assert all(m._edges.scopes is shared for m in machines.automata)
    assert machines.automata[0]._nfa.blocks, "expected counted repeats as blocks"
    assert len(shared.blocks) >= 2  # one entry per cost table, not per machine


@pytest.mark.parametrize("name", ["arithmetic", "json", "mutual"])  # the others: 2+ stacks
def test_a_single_stack_row_is_the_general_row(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row of a state of one stack (the usual case, built without grouping the
    tops) is the row the general construction gives that same set of stacks, over
    every state a breadth-first walk reaches (the Python rows: the C ones have no such
    split)."""
    monkeypatch.setattr(pushdown_module, "native_pushdown", None)
    automaton = compile_automaton(GRAMMARS[name].regex())
    assert isinstance(automaton, PushdownAutomaton)
    automaton.build_breadth_first(300)
    single = [sid for sid in range(1, automaton.num_states) if len(automaton._sets[sid]) == 1]
    assert len(single) >= 3
    for sid in single:
        stacks = automaton._sets[sid]
        with automaton._lock:
            general = automaton._stacks_row(stacks)
        assert np.array_equal(automaton.row(sid), general), sid


@pytest.mark.parametrize("stacks", [1, 2, 5])
def test_distinct_columns_group_equal_columns_in_order_of_appearance(stacks: int) -> None:
    from formcast.automaton.pushdown import _distinct_columns

    rng = np.random.default_rng(stacks)
    steps = rng.integers(0, 3, size=(stacks, 40)).astype(np.int32)
    columns, inverse = _distinct_columns(steps)
    assert len(set(columns)) == len(columns)
    assert [list(columns[k]) for k in inverse] == steps.T.tolist()
    firsts = [inverse.index(k) for k in range(len(columns))]
    assert firsts == sorted(firsts)
