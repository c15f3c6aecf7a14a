"""The parse loop in C (``formcast/_regex_parse.c``) against the Python loop of
:mod:`formcast.automaton.parse`, its reference: the very same NFA (every state count, id,
edge and block) on the automaton tests' patterns, random patterns, schema regexes,
recursive machines, long repeated groups, literal alternations and patterns near the
concrete budget; and the same error, word for word, on every refused pattern."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_automaton import _LONG_GROUP, CALL_CASES, PATTERNS, random_regexes
from test_nfa_invariants import NESTED_REPEATS, _schema_regexes

import formcast.automaton.parse as parse_module
from formcast.automaton.definitions import plan_recursion
from formcast.automaton.nfa import Nfa
from formcast.limits import DEFAULT_LIMITS, Limits

native_parse = parse_module.native_parse
pytestmark = [
    pytest.mark.skipif(native_parse is None, reason="formcast._regex_parse was not built"),
    pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning"),
]

_WORDS = "|".join(f"w{k}x" for k in range(40))
_ESCAPED_WORDS = "|".join(f"a\\.{k}\\x41" for k in range(40))
CONSTRUCTS = [
    r"abc\.\*d",  # a literal run with escaped punctuation
    "ab*c+d?e{2}f{2,}g{,3}h{1,4}?",  # the last character of a run takes the quantifier
    "a{}b{x}c{1,2",  # braces that are literals
    "[a-c][^a-c][]a][^]a][a\\]b][\\d\\w-][\\x00-\\x7f][^\\s\\S]x",  # classes, one empty
    "[abc][abc][abc]",  # a class from the cache
    "é€😀[é€😀]\\u00e9\\U0001F600\\N{BULLET}",  # multi-byte characters
    "a\ud800b|c[\ud800-\udfff]d|e",  # lone surrogates: branches with no string
    ".(?s:.)(?-s:.)(?s).",  # dot, scoped flags
    "(?s)a.b",
    "^(?:ab|cd|)$",
    "a(?#a comment)b(?#with \\) inside)c",
    "(?P<name>ab)+(?:cd)*(e|f|)?",
    "a{0}b{0,0}c{1}d{1,1}(?:){3}",
    "(?:a|b){1000}",  # a virtual block
    "(?:ab{2,3}){2000}c",  # a virtual block around concrete copies
    "(?:a{1000}){1000}",  # a virtual block of a virtual block
    "x(?:a*?|b+?|c??)",
    "\\d\\D\\s\\S\\w\\W\\n\\t\\r\\f\\v\\a\\0\\012\\x41\\(",
    f"(?:{_WORDS})",  # a literal alternation built as a trie
    f"(?:{_ESCAPED_WORDS})-(?:{_WORDS})",
    f"(?:{_WORDS}|a*)",  # not one: a quantifier inside
    f"{_LONG_GROUP}{_LONG_GROUP}x(?s:{_LONG_GROUP}){_LONG_GROUP}",  # copies of a group
    rf"(?P<first>{_LONG_GROUP[3:]}-{_LONG_GROUP}",
    "(?(DEFINE)(?P<a>x|y)(?P<b>(?&a)+z))(?&b)(?&a)(?&b)",
    "(?(DEFINE)(?P<big>(?:ab|cd){100}))(?&big)-(?&big)",  # calls made virtual blocks
    "(?(DEFINE)(?P<e>))(?&e)a",
    "(?(DEFINE)(?P<n>[\ud800-\udfff]))a|(?&n)",  # a definition with no string
]
REFUSED = [
    "a(?=b)",
    "(?!a)b",
    "(?<=a)b",
    "(?<!a)b",
    r"(a)\1",
    "(?P<n>a)(?P=n)",
    r"\bword",
    r"\Aa",
    "(?i)abc",
    "a(?i:b)",
    "(?x)a b",
    "(?u)a",
    "(?-a:b)",
    "(?q)",
    "(ab",
    "a(b(c)",
    "ab)",
    "a{3,1}",
    "*a",
    "a|*",
    "a**",
    "a{2}{3}",
    "a++",
    "[abc",
    "[z-a]",
    r"[\d-z]",
    "\\",
    "ab\\",
    r"\q",
    r"\x4",
    r"\U00110000",
    r"\N{NO SUCH NAME}",
    "(?>a)",
    "(?(1)a|b)",
    "a^b",
    "a$b",
    "(a$)",
    "a(?s)b",
    "(?P<1a>x)",
    "(?P<n>a)(?P<n>b)",
    "(?P<n",
    "(?#unterminated",
    "a{2000000}",
    "[\ud800-\udfff]",
    "(?&a)",
    "(?(DEFINE)(?P<a>(?&a)x))(?&a)",
    "x(?(DEFINE)(?P<a>x))",
    "(?(DEFINE)(?P<a>x)y)(?&a)",
    "(?(DEFINE)(?P<a>x)(?P<a>y))(?&a)",
    "(?(DEFINE)(?P<a>x))(?&a",
    "(?(DEFINE)(?P<a>x))*",
    ")(",
]


def _built(pattern: str, native: bool, limits: Limits = DEFAULT_LIMITS) -> Any:
    """The NFA of ``pattern`` built by one loop, or the error it raised."""
    saved = parse_module.native_parse
    parse_module.native_parse = native_parse if native else None
    try:
        return parse_module.build_nfa(pattern, limits)
    except Exception as error:  # both loops must raise the same error
        return (type(error), str(error))
    finally:
        parse_module.native_parse = saved


def _differences(python: Any, native: Any) -> list[str]:
    if not isinstance(python, Nfa) or not isinstance(native, Nfa):
        return [] if python == native else [f"{python!r} against {native!r}"]
    found = []
    for field in ("concrete_states", "virtual_states", "start", "final", "blocks", "extras"):
        if getattr(python, field) != getattr(native, field):
            found.append(field)
    for field in ("byte_src", "byte_lo", "byte_hi", "byte_dst", "eps_src", "eps_dst"):
        if not np.array_equal(getattr(python, field), getattr(native, field)):
            found.append(field)
    return found


def _assert_same(pattern: str, limits: Limits = DEFAULT_LIMITS) -> None:
    python = _built(pattern, False, limits)
    native = _built(pattern, True, limits)
    assert not _differences(python, native), (pattern[:200], _differences(python, native))


@pytest.mark.parametrize("pattern", CONSTRUCTS + PATTERNS + NESTED_REPEATS)
def test_the_same_nfa_as_the_python_loop(pattern: str) -> None:
    _assert_same(pattern)


@pytest.mark.parametrize("pattern", CONSTRUCTS + NESTED_REPEATS)
def test_the_same_nfa_near_the_concrete_budget(pattern: str) -> None:
    """Small budgets make repeats and calls virtual part way through a pattern, and make
    the memo's copies differ from what parsing again would give: both loops agree."""
    for budget in (8, 40, 200):
        limits = Limits(concrete_budget=budget, concrete_copy_limit=budget, call_copy_limit=budget)
        _assert_same(pattern, limits)
    _assert_same(pattern, Limits(memo_min_group=4))


@pytest.mark.parametrize("pattern", REFUSED)
def test_the_same_error_as_the_python_loop(pattern: str) -> None:
    python = _built(pattern, False)
    assert isinstance(python, tuple), f"expected {pattern!r} to be refused"
    assert _built(pattern, True) == python


@pytest.mark.parametrize(("pattern", "alphabet"), CALL_CASES)
def test_the_same_machines_as_the_python_loop(pattern: str, alphabet: str) -> None:
    """The machines of a recursive pattern (build_machines): calls to recursive
    definitions are call markers, calls to others copies."""
    plan = plan_recursion(pattern)
    if not plan.recursive:
        _assert_same(pattern)
        return
    built = []
    for native in (False, True):
        saved = parse_module.native_parse
        parse_module.native_parse = native_parse if native else None
        try:
            built.append(parse_module.build_machines(plan.pattern, plan.recursive))
        finally:
            parse_module.native_parse = saved
    (python, python_ends), (native, native_ends) = built
    assert python_ends == native_ends
    assert not _differences(python, native)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_same_nfa_for_schema_regexes() -> None:
    regexes = _schema_regexes()
    if not regexes:
        pytest.skip("the maskbench data is not here")
    for pattern in regexes:
        _assert_same(pattern)


@settings(
    max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)
@given(pattern=random_regexes())
def test_the_same_nfa_for_random_regexes(pattern: str) -> None:
    _assert_same(pattern)


@pytest.mark.parametrize(
    "arguments",
    [
        (0, 5, False, ()),  # a context of the wrong shape
        (-1, 5, False, parse_module._NATIVE_CONTEXT),
        (0, 99, False, parse_module._NATIVE_CONTEXT),
        (4, 2, False, parse_module._NATIVE_CONTEXT),
    ],
)
def test_bad_arguments_are_refused(arguments: tuple[Any, ...]) -> None:
    builder = parse_module._Builder("abcde")
    with pytest.raises((TypeError, ValueError)):
        native_parse.parse_body(builder, *arguments)  # type: ignore[union-attr]


def test_int64_list_reads_like_a_list_and_exports_its_items() -> None:
    """The C loop's edge list: the reads the builder's Python methods make (len, items,
    slices as lists, iteration), appends of any int iterable, and a read-only int64
    buffer that numpy copies; it refuses to grow while that buffer is exported."""
    int64_list = native_parse.Int64List  # type: ignore[union-attr]
    values = int64_list()
    reference: list[int] = []
    for chunk in ([3, -1, 2**40], range(5, 9), b"\x00\xff", (7,), np.arange(3), int64_list()):
        values.extend(chunk)
        reference.extend(int(v) for v in chunk)
    values.append(-(2**62))
    reference.append(-(2**62))
    copy = int64_list()
    copy.extend(values)
    copy.extend(copy)  # its own items, doubled
    assert len(values) == len(reference) and list(values) == reference
    assert list(copy) == reference * 2
    assert values[2:6] == reference[2:6] and values[::-3] == reference[::-3]
    assert values[-1] == reference[-1] and values[0] == reference[0]
    with pytest.raises(IndexError):
        values[len(reference)]
    with pytest.raises(TypeError):
        values.append("1")
    with pytest.raises(OverflowError):
        values.append(2**70)
    assert np.array_equal(np.array(values, dtype=np.int64), reference)
    view = np.asarray(memoryview(values))
    assert view.dtype == np.int64 and not view.flags.writeable
    with pytest.raises(BufferError):
        values.append(1)
    del view
    values.append(1)
    assert len(values) == len(reference) + 1
