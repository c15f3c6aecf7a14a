"""Tests of the reference eager automaton (tests/reference/fsm.py): regex -> byte DFA.

The oracle is Python's own ``re.fullmatch`` on the decoded string, under ``re.ASCII``
because formcast gives ``\\d \\w \\s`` their ASCII meaning. Exhaustive checks over all
1,112,064 Unicode scalar values are vectorised with numpy and take well under a second.
"""

from __future__ import annotations

import pickle
import re
import time
from functools import cache

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.errors import SchemaError, UserError
from reference.fsm import DEAD, ByteFSM, compile_regex

JSON_STRING = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
JSON_STRING_50 = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,50}"'
JSON_NUMBER = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"
JSON_INTEGER = r"-?(0|[1-9][0-9]*)"
JSON_OBJECT = (
    r'\{"name":' + JSON_STRING + r',"age":' + JSON_INTEGER + r'(,"score":' + JSON_NUMBER
    + r')?(,"tags":\[(' + JSON_STRING + r"(," + JSON_STRING + r")*)?\])?\}"
)  # fmt: skip


@cache
def fsm_of(pattern: str) -> ByteFSM:
    return compile_regex(pattern)


def oracle(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text, re.ASCII) is not None


# ----------------------------------------------------------------- agreement with re

POOL = [
    "",
    "a",
    "b",
    "ab",
    "abc",
    "abcabc",
    "aaaa",
    "A",
    "Z",
    "0",
    "9",
    "42",
    "007",
    "-1",
    "-0.5e+3",
    "1.",
    "1e5",
    " ",
    "\t",
    "\n",
    "\x00",
    "\x1f",
    "\x7f",
    '"',
    "\\",
    "-",
    "]",
    "{",
    "}",
    "x{}",
    "{}",
    '""',
    '"hi"',
    '"a\\"b"',
    '"\\u00e9"',
    '"\\x"',
    '"José Ñúñez"',
    "José Ñúñez",
    "José",
    "é",
    "è",
    "ÿ",
    "Ā",
    "日本語",
    "日本",
    "😀",
    "😀😀",
    "a😀b",
    "\u0080",
    "\u07ff",
    "\u0800",
    "\ud7ff",
    "\ue000",
    "\uffff",
    "\U00010000",
    "\U0010ffff",
    "ǅ",
    "٣",
    "\u00a0",
    "_",
    "foo_bar9",
    "hello world",
    "true",
    "false",
    "null",
    '{"name":"Ann","age":3}',
    '{"name":"Ñú","age":-12,"score":1.5e3,"tags":["a","😀"]}',
    '{"name":"x","age":01}',
]

CASES: list[tuple[str, list[str]]] = [
    ("abc", []),
    ("a|b|abc", []),
    ("(ab|c)*", ["abcab", "cc", "aba"]),
    ("a?b+c{2}", ["bcc", "abbcc", "abc", "abccc"]),
    ("a{2,4}", ["a" * k for k in range(7)]),
    ("a{3}", ["a" * k for k in range(6)]),
    ("a{2,}", ["a" * k for k in range(6)]),
    ("a{,2}", ["a" * k for k in range(5)]),
    ("(?:ab){1,3}c?", ["ab", "abab", "ababab", "abababab", "abc", "c"]),
    (".", []),
    (".*", ["a\nb", "日本\n"]),
    ("(?s).*", ["a\nb", "日本\n"]),
    ("(?s).{2}", ["é😀", "\n\n", "日本語"]),
    ("[^a]", []),
    ('[^"\\\\]*', ["日本語 😀", 'a"b', "a\\b"]),
    ('[^"\\\\\\x00-\\x1f]+', ["héllo", "tab\there", "\x7f\x80"]),
    ("[a-zé]+", ["josé", "JOSÉ", "è"]),
    ("[é-ü]", ["é", "ü", "ÿ", "ñ", "e"]),
    ("[日-語]", ["日", "本", "語", "誤", "a"]),
    ("[😀-😂]+", ["😀😁😂", "😃", "😀a"]),
    ("[^😀]", ["😀", "😁", "a"]),
    ("José|Ñúñez|日本語|😀+", ["Jose", "😀😀😀", "Ñunez"]),
    ("\\d+", ["123", "١٢٣", "12a"]),
    ("\\w+", ["abc_9", "héllo", "日本"]),
    ("\\s*x\\s*", [" x ", "\u00a0x", "\x1cx"]),
    ("\\D\\W\\S", ["a b", "a!b", "1!b", "é😀日"]),
    ("[\\w-]+", ["a-b", "é"]),
    ("\\x41\\x7f", ["A\x7f"]),
    ('\\.\\\\\\"', ['.\\"']),
    ("(?s:.)a(?-s:.)", ["\na\n", "\naé", "éa\n"]),
    ("(?s)a.b", ["a\nb"]),
    ("(?a)\\w+", ["abc", "é"]),
    ("(?P<first>ab)(?:c|(?P<second>d))", ["abc", "abd", "ab"]),
    # Wide ranges: interegular alone would enumerate them character by character.
    ("[\\u0080-\\U0010ffff]+", ["é日😀", "a", "\x7f", "\U0010ffff"]),
    ("[^\\u0000-\\u007f]*", ["é日😀", "a"]),
    ('[\\x7f-\\U0010ffff"-\\ud7ff]', ["\x7f", '"', "😀", "\ud7ff", "\ue000", "!"]),
    ("[一-鿿]{2,3}", ["日本", "日本語", "日", "日本語語"]),
    ("[a-日]|[\\d-]", ["z", "日", "5", "-", "語", "`"]),
    ("\\W[\\W\\d]\\S", ["!!x", "é5é", "a!x", "!! "]),
    (JSON_STRING, ['"\\q"', '"\\uD83D"', '"\x1f"', '"😀\\n"']),
    (JSON_NUMBER, ["0", "-0", "00", "1.0", "1e-3", ".5", "1E+10", "-"]),
    (JSON_OBJECT, []),
    # Constructs that interegular alone would read differently from re.
    ("[]a]+", ["]a]", "a"]),
    ("[^]a]", ["]", "a", "b", "😀"]),
    ("x{}", ["x{}", "x", ""]),
    ("x{", ["x{"]),
    ("x{a}", ["x{a}"]),
    ('\\{"k":x{1,2}\\}', ['{"k":x}', '{"k":xx}', '{"k":xxx}']),
    ("{}", ["{}"]),
    ("a(?#comment)*", ["", "a", "aaa"]),
    ("a(?#com\\)ment)b", ["ab"]),
    ("\\u00e9|\\U0001F600", ["é", "😀", "e"]),
    ("[\\u00e0-\\u00ff]+", ["àÿ", "é", "Ā"]),
    ("\\N{LATIN SMALL LETTER E WITH ACUTE}", ["é"]),
    ("\\0|[\\0-\\x02]b|\\01", ["\x00", "\x01b", "\x01", "\x03b"]),
    ("\\u002e\\u005b", [".[", "a["]),
    ("a*?b+?c??", ["b", "aabbc", "abcc"]),
]


@pytest.mark.parametrize(("pattern", "extra"), CASES, ids=[c[0][:40] for c in CASES])
def test_agrees_with_re_fullmatch(pattern: str, extra: list[str]) -> None:
    fsm = fsm_of(pattern)
    wrong = [
        text
        for text in [*POOL, *extra]
        if fsm.matches(text.encode("utf-8")) != oracle(pattern, text)
    ]
    assert not wrong, f"{pattern!r} disagrees with re.fullmatch on {wrong!r}"


# A handful of patterns for property tests: random text, and text generated to match.
PROPERTY_PATTERNS = [
    '[^"\\\\]*',
    "(?s).{0,3}",
    "(ab|日本|😀)*c?",
    "[a-zé😀]{1,4}",
    "\\w+( \\w+)*",
    JSON_STRING,
    JSON_NUMBER,
]
TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from('ab c"\\é日本😀0123456789.-+eE\nu'),
        st.characters(codec="utf-8"),
    ),
    max_size=8,
)


@pytest.mark.parametrize("pattern", PROPERTY_PATTERNS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_random_text(pattern: str, data: st.DataObject) -> None:
    text = data.draw(TEXT)
    assert fsm_of(pattern).matches(text.encode("utf-8")) == oracle(pattern, text)


@pytest.mark.parametrize("pattern", PROPERTY_PATTERNS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_matching_text_is_accepted(pattern: str, data: st.DataObject) -> None:
    # re.ASCII only where it matters: Hypothesis then refuses non-ASCII literals.
    flags = re.ASCII if re.search(r"\\[dwsDWS]", pattern) else 0
    strategy = st.from_regex(re.compile(pattern, flags), fullmatch=True)
    text = data.draw(strategy)
    encodable = not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    assert fsm_of(pattern).matches(text.encode("utf-8", "surrogatepass")) == encodable


# --------------------------------------------------------------------- UTF-8 exactness


@cache
def all_scalar_values() -> dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]]:
    """Code points grouped by UTF-8 length, with their encodings (by Python's encoder)."""
    bounds = {1: (0, 0x7F), 2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, 0x10FFFF)}
    out = {}
    for length, (lo, hi) in bounds.items():
        points = np.arange(lo, hi + 1, dtype=np.int64)
        points = points[(points < 0xD800) | (points > 0xDFFF)]
        encoded = "".join(map(chr, points.tolist())).encode("utf-8")
        out[length] = (points, np.frombuffer(encoded, dtype=np.uint8).reshape(-1, length))
    return out


def accepted_mask(fsm: ByteFSM, strings: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    """Vectorised ``matches`` over the rows of an (N, L) byte matrix."""
    state = np.full(strings.shape[0], fsm.initial, dtype=np.int64)
    for column in strings.T:
        state = fsm.transitions[state, column]  # DEAD is a sink: no special case
    return fsm.accepting[state]


def accepted_counts(fsm: ByteFSM, max_length: int) -> list[int]:
    """Number of accepted byte strings of each length 0..max_length (dynamic programming)."""
    counts = np.zeros(fsm.num_states, dtype=np.int64)
    counts[fsm.initial] = 1
    sources, _ = np.nonzero(fsm.transitions != DEAD)
    targets = fsm.transitions[fsm.transitions != DEAD]
    out = []
    for _ in range(max_length + 1):
        out.append(int(counts[fsm.accepting].sum()))
        counts = np.bincount(targets, weights=counts[sources], minlength=fsm.num_states)
        counts = counts.astype(np.int64)
    return out


@pytest.mark.parametrize(
    ("pattern", "excluded"),
    [
        ("(?s).", ""),
        (".", "\n"),
        ('[^"\\\\]', '"\\'),
        ("[^a-z😀日]", "abcdefghijklmnopqrstuvwxyz😀日"),
    ],
)
def test_single_character_classes_are_exact_over_all_of_unicode(
    pattern: str, excluded: str
) -> None:
    """Every scalar value outside ``excluded`` is accepted, and no other byte string is."""
    fsm = fsm_of(pattern)
    expected_counts = [0] * 9
    for length, (points, encoded) in all_scalar_values().items():
        want = ~np.isin(points, [ord(c) for c in excluded])
        got = accepted_mask(fsm, encoded)
        missing = points[want & ~got]
        extra = points[got & ~want]
        assert missing.size == 0, f"{pattern!r} rejects U+{int(missing[0]):04X}"
        assert extra.size == 0, f"{pattern!r} accepts U+{int(extra[0]):04X}"
        expected_counts[length] = int(want.sum())
    # Same number of accepted strings per length as valid characters: nothing else sneaks in.
    assert accepted_counts(fsm, 8) == expected_counts


@pytest.mark.parametrize(
    "data",
    [
        b"\xc3",  # truncated 2-byte
        b"\xc0\xaf",  # overlong '/'
        b"\xc1\xbf",  # overlong
        b"\xe0\x80\xaf",  # overlong 3-byte
        b"\xf0\x80\x80\xaf",  # overlong 4-byte
        b"\xed\xa0\x80",  # surrogate U+D800
        b"\xed\xbf\xbf",  # surrogate U+DFFF
        b"\xf4\x90\x80\x80",  # U+110000
        b"\xf5\x80\x80\x80",
        b"\xff",
        b"\x80",  # lone continuation
        b"a\xbf",
        b"\xe6\x97",  # truncated 日
        b"\xf0\x9f\x98",  # truncated 😀
        b"\xc3\xa9\xa9",  # é + stray continuation
    ],
)
def test_invalid_utf8_is_rejected(data: bytes) -> None:
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    assert not fsm_of('[^"]*').matches(data)
    assert not fsm_of("(?s).*").matches(data)


def test_valid_utf8_boundaries_are_accepted() -> None:
    fsm = fsm_of('[^"]*')
    for text in [
        "\u0080\u07ff\u0800\ud7ff\ue000\uffff\U00010000\U0010ffff",
        "José Ñúñez 日本語 😀",
    ]:
        assert fsm.matches(text.encode("utf-8"))


def test_prefix_of_a_multibyte_character_stays_alive() -> None:
    for pattern in [".*", "(?s).*", '[^"]*', "[😀-😂]", "a😀"]:
        fsm = fsm_of(pattern)
        start = fsm.walk(b"a") if pattern == "a😀" else fsm.initial
        assert start != DEAD
        partial = fsm.walk(b"\xf0\x9f", start)
        assert partial != DEAD, pattern
        assert not fsm.accepting[partial]
        end = fsm.walk(b"\x98\x80", partial)
        assert end != DEAD and fsm.accepting[end], pattern
    fsm = fsm_of("é")
    assert fsm.walk(b"\xc3") != DEAD
    assert fsm.walk(b"\xc3\xa8") == DEAD  # è shares the lead byte but is not allowed
    assert fsm.walk(b"\xc3\xa9") != DEAD
    assert fsm.walk(b"x", DEAD) == DEAD


def test_shared_lead_bytes_make_one_deterministic_state() -> None:
    fsm = fsm_of("é|è|ü")
    assert fsm.num_states == 4  # DEAD, initial, after 0xC3, accepting
    after_lead = fsm.walk(b"\xc3")
    allowed = np.flatnonzero(fsm.transitions[after_lead] != DEAD)
    assert allowed.tolist() == [0xA8, 0xA9, 0xBC]


# --------------------------------------------------------------- structural contract


STRUCTURE_PATTERNS = [
    "abc",
    "(ab)*",
    "a|😀",
    "é",
    "(?s).*",
    '[^"\\\\]*',
    "a{2,5}b?",
    JSON_STRING_50,
    JSON_NUMBER,
    JSON_OBJECT,
]


def brute_distances(fsm: ByteFSM) -> list[int]:
    """Fewest bytes to acceptance, by plain iteration to a fixed point."""
    big = 1 << 30
    dist = [0 if acc else big for acc in fsm.accepting.tolist()]
    rows = fsm.transitions.tolist()
    changed = True
    while changed:
        changed = False
        for state, row in enumerate(rows):
            best = min((dist[t] + 1 for t in row if t != DEAD), default=big)
            if best < dist[state]:
                dist[state] = best
                changed = True
    return [-1 if d == big else d for d in dist]


def is_minimal(fsm: ByteFSM) -> bool:
    """Table-filling check that no two states (DEAD included) accept the same language."""
    n = fsm.num_states
    ext = fsm.transitions
    accepting = fsm.accepting
    distinct = accepting[:, None] != accepting[None, :]
    while True:
        # States differ if some byte leads them to states already known to differ.
        step = np.zeros_like(distinct)
        for column in ext.T:
            step |= distinct[np.ix_(column, column)]
        fresh = distinct | step
        if np.array_equal(fresh, distinct):
            break
        distinct = fresh
    off_diagonal = ~np.eye(n, dtype=bool)
    return bool(distinct[off_diagonal].all())


@pytest.mark.parametrize("pattern", STRUCTURE_PATTERNS)
def test_structure_is_trim_compact_and_typed(pattern: str) -> None:
    fsm = fsm_of(pattern)
    assert fsm.transitions.dtype == np.int32
    assert fsm.transitions.shape == (fsm.num_states, 256)
    assert fsm.accepting.dtype == np.bool_
    assert fsm.accepting.shape == (fsm.num_states,)
    assert fsm.initial == 1
    assert fsm.pattern == pattern
    assert fsm.transitions.min() >= 0 and fsm.transitions.max() < fsm.num_states
    assert not fsm.transitions[DEAD].any() and not fsm.accepting[DEAD]  # the dead sink
    # Every state but DEAD is reachable from the initial state ...
    seen = {fsm.initial}
    todo = [fsm.initial]
    while todo:
        row = fsm.transitions[todo.pop()]
        for nxt in set(row[row != DEAD].tolist()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    assert seen == set(range(1, fsm.num_states))
    # ... and can reach an accepting state, in exactly distance_to_accept bytes.
    distance = fsm.distance_to_accept()
    assert distance.dtype == np.int32
    assert distance[DEAD] == -1 and (distance[1:] >= 0).all()
    assert distance.tolist() == brute_distances(fsm)
    assert ((distance == 0) == fsm.accepting).all()


@pytest.mark.parametrize("pattern", STRUCTURE_PATTERNS[:7])
def test_result_is_minimal(pattern: str) -> None:
    assert is_minimal(fsm_of(pattern))


def test_utf8_universe_minimal_size() -> None:
    # DEAD, start, 1 byte missing, 2 missing, 3 missing and the E0/ED/F0/F4 restricted states
    assert fsm_of("(?s).*").num_states == 9


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("abc", [3, 2, 1, 0]),
        ("é", [2, 1, 0]),
        ("(ab)*", [0, 1]),
        ("a|😀", [1, 0, 3, 2, 1]),
        ("x?", [0, 0]),
    ],
)
def test_distance_to_accept_small_examples(pattern: str, expected: list[int]) -> None:
    fsm = compile_regex(pattern)
    distance = fsm.distance_to_accept()
    assert sorted(distance.tolist()) == sorted([-1, *expected])  # -1: DEAD
    assert distance[fsm.initial] == expected[0]
    assert fsm.distance_to_accept() is distance  # cached
    assert not distance.flags.writeable


def test_distance_along_a_walk() -> None:
    fsm = fsm_of(JSON_STRING_50)
    assert fsm.distance_to_accept()[fsm.initial] == 2
    assert fsm.distance_to_accept()[fsm.walk(b'"\\u0')] == 4
    assert fsm.distance_to_accept()[fsm.walk(b'"\xf0')] == 4


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(", "re rejects it: missing ), unterminated subpattern at position 0"),
        ("a{2,1}", "min repeat greater than max repeat"),
        ("[]", "unterminated character set"),
        ("*a", "nothing to repeat"),
        ("(?<=a)b", "lookahead and lookbehind assertions (at position 0)"),
        ("a(?=b)", "lookahead and lookbehind assertions (at position 1)"),
        ("a(?!b)", "lookahead and lookbehind assertions"),
        ("^abc$", "anchors are not needed"),
        ("abc\\Z", "anchors are not needed"),
        ("(a)\\1", "backreferences"),
        ("(?P<n>a)(?P=n)", "backreferences"),
        ("\\bword", "word boundaries"),
        ("(?>ab)", "atomic groups"),
        ("(a)?(?(1)b|c)", "conditional groups"),
        ("(?i)abc", "case-insensitive"),
        ("a(?i:b)", "case-insensitive"),
        ("(?u)\\w", "ASCII meaning"),
        ("\\p{L}", "re rejects it"),
        ("a*+", "possessive"),
        ("(?:ab)++", "possessive"),
        ("a{1,2}+", "possessive"),
        ("(?x)a b", "verbose mode"),
        ("[^\\s\\S]", "matches no string"),
        ("a[^\\s\\S]b", "matches no string"),
    ],
)
def test_bad_regex_raises_schema_error(pattern: str, reason: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_regex(pattern)
    message = str(info.value)
    assert message.startswith("expected a regular expression formcast can compile, found ")
    assert repr(pattern) in message
    assert reason in message
    assert isinstance(info.value, ValueError)


def test_non_string_pattern_raises_schema_error() -> None:
    with pytest.raises(SchemaError, match="must be a str"):
        compile_regex(b"abc")  # type: ignore[arg-type]


def test_long_pattern_is_shortened_in_messages() -> None:
    pattern = "a" * 500 + "(?<=a)"
    with pytest.raises(SchemaError, match=r"\.\.\. \(506 characters\)"):
        compile_regex(pattern)


# ------------------------------------------------------------- immutability, pickling


def test_arrays_are_read_only_and_pickle_round_trips() -> None:
    fsm = fsm_of(JSON_STRING)
    assert not fsm.transitions.flags.writeable
    assert not fsm.accepting.flags.writeable
    fsm.distance_to_accept()
    clone = pickle.loads(pickle.dumps(fsm))
    assert np.array_equal(clone.transitions, fsm.transitions)
    assert np.array_equal(clone.accepting, fsm.accepting)
    assert clone.pattern == fsm.pattern and clone.initial == fsm.initial
    assert not clone.transitions.flags.writeable
    assert np.array_equal(clone.distance_to_accept(), fsm.distance_to_accept())
    assert clone.matches('"José 😀"'.encode())
    assert "num_states=" in repr(clone)


def test_hand_built_fsm_is_validated() -> None:
    table = np.full((3, 256), DEAD, dtype=np.int32)
    table[1, ord("a")] = 2
    no = np.zeros(3, dtype=np.bool_)
    wide = table.astype(np.int64)
    accepting = np.array([False, False, True])
    fsm = ByteFSM(transitions=wide, initial=1, accepting=accepting, pattern="a")  # type: ignore[arg-type]
    assert fsm.transitions.dtype == np.int32
    assert fsm.matches(b"a") and not fsm.matches(b"aa")
    wide[1, ord("b")] = 2  # the instance holds its own copy
    assert not fsm.matches(b"b")
    with pytest.raises(UserError, match="shape"):
        ByteFSM(transitions=table[:, :255], initial=1, accepting=no, pattern="")
    with pytest.raises(UserError, match="accepting"):
        ByteFSM(transitions=table, initial=1, accepting=np.zeros(4, dtype=np.bool_), pattern="")
    with pytest.raises(UserError, match="targets"):
        ByteFSM(transitions=table + 5, initial=1, accepting=no, pattern="")
    with pytest.raises(UserError, match="initial"):
        ByteFSM(transitions=table, initial=3, accepting=no, pattern="")
    leaky = table.copy()
    leaky[DEAD, 0] = 1
    with pytest.raises(UserError, match="dead sink"):
        ByteFSM(transitions=leaky, initial=1, accepting=no, pattern="")
    with pytest.raises(UserError, match="dead sink"):
        ByteFSM(transitions=table, initial=1, accepting=~no, pattern="")
    with pytest.raises(UserError, match="state"):
        fsm.walk(b"a", state=7)


# ------------------------------------------------------------------------------ cost


def test_json_string_with_bound_compiles_fast() -> None:
    start = time.perf_counter()
    fsm = compile_regex(JSON_STRING_50)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"{elapsed:.2f}s"  # typically ~0.1 s; generous for slow CI
    assert fsm.matches(('"' + "é" * 50 + '"').encode())
    assert not fsm.matches(('"' + "é" * 51 + '"').encode())
