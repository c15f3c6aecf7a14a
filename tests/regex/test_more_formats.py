"""Tests for formcast.regex.more_formats: the formats beyond dates and addresses, each in
both directions, against validators that share nothing with formcast.

* sampled values (random walks of the format's automaton) pass the independent checks:
  jsonschema's format checker (``jsonpointer``, ``idna``), ``ipaddress``, ``base64``,
  ``email-validator``, ``rfc3987`` (when installed), Python's ``re`` and Pydantic's type;
* hand-written valid values are accepted and invalid ones rejected;
* for the exact formats, mutations of the samples (a character dropped, doubled or
  replaced) are accepted exactly when the independent check accepts them; for the
  subsets, a mutation accepted must pass the check.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import random
import re
import warnings
from collections.abc import Callable
from typing import Any

import email_validator
import jsonpointer  # type: ignore[import-untyped, unused-ignore]
import jsonschema  # type: ignore[import-untyped, unused-ignore]
import pydantic
import pytest

from formcast.automaton import compile_automaton
from formcast.errors import UnknownFormatWarning, UnsupportedSchemaError
from formcast.regex.dialect import json_dumps
from formcast.regex.more_formats import (
    GENERATION_FORMATS,
    JSON_SCHEMA_FORMATS,
    PAYMENT_CARD_REGEX,
    byte_size_regex,
    date_range_regex,
)
from formcast.regex.translator import schema_to_regex

_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER


def _jsonschema(name: str) -> Callable[[str], bool]:
    return lambda value: bool(_CHECKER.conforms(value, name))


def _pydantic(annotation: Any) -> Callable[[str], bool]:
    adapter = pydantic.TypeAdapter(annotation)

    def check(value: str) -> bool:
        try:
            adapter.validate_json(json.dumps(value))
        except pydantic.ValidationError:
            return False
        return True

    return check


def _raises_not(function: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            function(value)
        except (ValueError, TypeError, UnicodeError, re.error, jsonpointer.JsonPointerException):
            return False
        return True

    return check


def _base64(altchars: bytes) -> Callable[[str], bool]:
    def decode(value: str) -> None:
        base64.b64decode(value.encode("ascii"), altchars=altchars, validate=True).decode("ascii")

    return _raises_not(decode)


def _rfc3987(rule: str) -> Callable[[str], bool]:
    rfc3987 = pytest.importorskip("rfc3987")
    return lambda value: rfc3987.match(value, rule) is not None


def _email(value: str) -> None:
    email_validator.validate_email(value, check_deliverability=False)


def _relative_pointer(value: str) -> None:
    """The relative JSON pointer draft's grammar, with ``jsonpointer`` reading the rest
    (jsonschema's checker also refuses a digit after a 0, as in ``100/a``)."""
    number = re.match("0|[1-9][0-9]*", value)
    if number is None:
        raise ValueError(value)
    rest = value[number.end() :]
    if rest != "#":
        jsonpointer.JsonPointer(rest)


def _regex(value: str) -> None:
    with_warnings = re.compile(value)  # Pydantic's check (and jsonschema's)
    del with_warnings


# name -> (exact?, independent checks)
CHECKS: dict[str, tuple[bool, list[Callable[[], Callable[[str], bool]]]]] = {
    "json-pointer": (True, [lambda: _jsonschema("json-pointer")]),
    "relative-json-pointer": (True, [lambda: _raises_not(_relative_pointer)]),
    "regex": (
        False,
        [lambda: _jsonschema("regex"), lambda: _pydantic(re.Pattern), lambda: _raises_not(_regex)],
    ),
    "uri-reference": (True, [lambda: _rfc3987("URI_reference")]),
    "iri": (True, [lambda: _rfc3987("IRI")]),
    "iri-reference": (True, [lambda: _rfc3987("IRI_reference")]),
    "idn-hostname": (False, [lambda: _jsonschema("idn-hostname")]),
    "idn-email": (False, [lambda: _jsonschema("idn-email"), lambda: _raises_not(_email)]),
    "base64": (
        False,
        [
            lambda: _base64(b"+/"),
            lambda: _pydantic(pydantic.Base64Str),
            lambda: _pydantic(pydantic.Base64Bytes),
        ],
    ),
    "base64url": (
        False,
        [
            lambda: _base64(b"-_"),
            lambda: _pydantic(pydantic.Base64UrlStr),
            lambda: _pydantic(pydantic.Base64UrlBytes),
        ],
    ),
    "ipv4network": (
        True,
        [lambda: _raises_not(ipaddress.IPv4Network), lambda: _pydantic(ipaddress.IPv4Network)],
    ),
    "ipv6network": (
        False,
        [lambda: _raises_not(ipaddress.IPv6Network), lambda: _pydantic(ipaddress.IPv6Network)],
    ),
    "ipvanynetwork": (
        False,
        [lambda: _raises_not(ipaddress.ip_network), lambda: _pydantic(pydantic.IPvAnyNetwork)],
    ),
    "ipv4interface": (
        True,
        [
            lambda: _raises_not(ipaddress.IPv4Interface),
            lambda: _pydantic(ipaddress.IPv4Interface),
        ],
    ),
    "ipv6interface": (
        False,
        [
            lambda: _raises_not(ipaddress.IPv6Interface),
            lambda: _pydantic(ipaddress.IPv6Interface),
        ],
    ),
    "ipvanyinterface": (
        False,
        [lambda: _raises_not(ipaddress.ip_interface), lambda: _pydantic(pydantic.IPvAnyInterface)],
    ),
    "name-email": (False, [lambda: _pydantic(pydantic.NameEmail)]),
}

FORMATS = sorted(CHECKS)
assert set(FORMATS) == set(JSON_SCHEMA_FORMATS) | set(GENERATION_FORMATS), "a format untested"

HAND_WRITTEN: dict[str, tuple[list[str], list[str]]] = {
    "json-pointer": (
        ["", "/", "/a", "/a~0b/~1c", '/"quoted"\\', "/é/0"],
        ["a", "/~2", "/~", "#/a"],
    ),
    "relative-json-pointer": (["0", "1#", "0/a", "12/b~1c"], ["01", "", "#", "-1", "1/~"]),
    "regex": (
        [
            "^[a-z]+$",
            "a{2,3}?",
            "(a|b)*c",
            r"\d+\.\d",
            "(?:x)|",
            r"[^\]]",
            r"^\$[0-9a-f]{1,}$",
            "((a)(b))",
        ],
        ["*", "\\", "a**", "(", "[", "a{3,2}", ")", "a(?P<n>b)", "+a"],
    ),
    "uri-reference": (["/x", "#f", "", "http://a.b/c?d#e", "../a"], ["a b", "é", "%zz"]),
    "iri": (["http://é.com/ü?q=ä", "urn:x", "mailto:ü@x.y"], ["é", "http://a b", "/x"]),
    "iri-reference": (["/é", "a/ü", "", "#ä"], ["a b", "%zz"]),
    "idn-hostname": (["münchen.de", "a-b.example", "пример.рф", "xn"], ["-a", "A.com", "a..b"]),
    "idn-email": (["jörg@münchen.de", "a.b@example.com"], ["a", "a@", "@b.de"]),
    "base64": (["", "aGk=", "aGVsbG8=", "YWJj"], ["aGk", "a===", "////", "aGk==", "YW=j"]),
    "base64url": (["", "aGk=", "YWJj"], ["aGk", "+/==", "a==="]),
    "ipv4network": (
        ["10.0.0.0/8", "10.0.0.0/255.0.0.0", "1.2.3.4", "0.0.0.0/0", "10.0.0.0/0.255.255.255"],
        ["10.0.0.1/8", "256.0.0.0/8", "1.2.3.4/33", "01.0.0.0/8"],
    ),
    "ipv6network": (["2001:0db8::/32", "::/0", "::1", "ff00::/8"], ["2001:db8::1/32", "::/129"]),
    "ipvanynetwork": (["10.0.0.0/8", "::/0"], ["10.0.0.1/8", "x"]),
    "ipv4interface": (["10.0.0.1/8", "1.2.3.4", "1.2.3.4/255.255.0.0"], ["1.2.3.4/33", "1.2.3"]),
    "ipv6interface": (["::1/64", "fe80::1"], ["::1/129", "1.2.3.4"]),
    "ipvanyinterface": (["10.0.0.1/8", "::1/64"], ["10.0.0.1/33"]),
    "name-email": (
        ["John Doe <john@example.com>", "john@example.com", "Ann <a.b@mail.co.uk>"],
        ["<>", "John Doe", "John <john>"],
    ),
}


def _schema(name: str) -> dict[str, Any]:
    return {"type": "string", "format": name}


_automata: dict[str, Any] = {}


def _accepts(name: str, value: str) -> bool:
    if name not in _automata:
        _automata[name] = compile_automaton(schema_to_regex(_schema(name)))
    return bool(_automata[name].matches(json_dumps(value).encode()))


def _checks(name: str) -> list[Callable[[str], bool]]:
    return [make() for make in CHECKS[name][1]]


def _samples(name: str, count: int, seed: int, max_len: int = 60) -> list[str]:
    """Random values of the format: walks of its byte automaton that may stop in any
    accepting state and head for the nearest one after ``max_len`` bytes."""
    if name not in _automata:
        _automata[name] = compile_automaton(schema_to_regex(_schema(name)))
    automaton = _automata[name]
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        state, data = automaton.initial, bytearray()
        stop = rng.choice([0.05, 0.2, 0.5])
        while not (automaton.is_accepting(state) and rng.random() < stop):
            options = [int(b) for b in automaton.live_bytes(state)]
            if len(data) >= max_len:
                here = automaton.min_bytes_to_accept(state)
                options = [
                    b
                    for b in options
                    if automaton.min_bytes_to_accept(automaton.walk(bytes([b]), state)) < here
                ]
            if not options:
                break
            byte = rng.choice(options)
            state = automaton.walk(bytes([byte]), state)
            data.append(byte)
        out.append(json.loads(data.decode()))
    return out


@pytest.mark.parametrize("name", FORMATS)
def test_hand_written_values(name: str) -> None:
    checks = _checks(name)
    valid, invalid = HAND_WRITTEN[name]
    for value in valid:
        assert all(check(value) for check in checks), f"test bug: {value!r} is not valid"
        assert _accepts(name, value), f"valid {value!r} rejected"
    for value in invalid:
        assert not _accepts(name, value), f"invalid {value!r} accepted"


@pytest.mark.parametrize("name", FORMATS)
def test_samples_pass_independent_checks(name: str) -> None:
    checks = _checks(name)
    for value in _samples(name, 40, seed=len(name)):
        failed = [i for i, check in enumerate(checks) if not check(value)]
        assert not failed, f"sample {value!r} fails check {failed}"


def _mutations(value: str, rng: random.Random, alphabet: str) -> list[str]:
    out = []
    for _ in range(6):
        where = rng.randrange(len(value) + 1)
        char = rng.choice(alphabet)
        out += [
            value[:where] + char + value[where:],
            value[:where] + value[where + 1 :],
            value[:where] + char + value[where + 1 :],
            value[:where] + value[where:][:1] + value[where:],
        ]
    return out


@pytest.mark.parametrize("name", FORMATS)
def test_mutations_agree_with_independent_checks(name: str) -> None:
    """Exact formats: a near miss is accepted exactly when the checks accept it; subsets:
    an accepted near miss passes the checks."""
    exact = CHECKS[name][0]
    checks = _checks(name)
    rng = random.Random(7)
    alphabet = 'aZ09./:-_~%@<>[]()*+?{}|^$ #\\"é'
    wrong = []
    for value in _samples(name, 15, seed=11) + HAND_WRITTEN[name][0]:
        for mutant in _mutations(value, rng, alphabet):
            accepted = _accepts(name, mutant)
            valid = all(check(mutant) for check in checks)
            if (accepted and not valid) or (exact and valid and not accepted):
                wrong.append((mutant, accepted, valid))
    assert not wrong, wrong[:10]


def test_regex_values_are_also_ecma_patterns() -> None:
    """What ECMA-262 refuses that Python reads never appears: named groups in Python's
    spelling, possessive quantifiers, inline flags, ``\\A``/``\\Z``, a lone ``{``/``}``
    or ``]`` outside a class."""
    for value in _samples("regex", 200, seed=3):
        assert "(?P" not in value and "(?i" not in value, value
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "possible nested set"
            re.compile(value)
        stripped = re.sub(r"\\.", "", value)
        stripped = re.sub(r"\[\^?\]?[^\]]*\]", "", stripped)
        assert not re.search(r"[*+?}]\+", stripped), value
        stripped = re.sub(r"\{[0-9]+(,[0-9]*)?\}", "", stripped)
        assert not re.search(r"[{}\]]", stripped), value


def test_specification_mode_reads_pydantic_formats_as_annotations() -> None:
    with pytest.warns(UnknownFormatWarning, match="base64"):
        regex = schema_to_regex(_schema("base64"), mode="specification")
    assert compile_automaton(regex).matches(b'"not base64!"')


def test_specification_mode_enforces_json_schema_formats() -> None:
    automaton = compile_automaton(schema_to_regex(_schema("regex"), mode="specification"))
    assert automaton.matches(b'"^a+$"')
    assert not automaton.matches(b'"*"') and not automaton.matches(b'"\\\\"')


@pytest.mark.parametrize("name", ["color", "file-path", "directory-path", "my_format"])
def test_unknown_format_is_refused_in_generation_mode(name: str) -> None:
    schema = {"type": "object", "properties": {"c": _schema(name)}}
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema)
    assert (info.value.keyword, info.value.pointer) == ("format", "/properties/c")
    assert repr(name) in info.value.reason and "x-formcast-any-string" in info.value.reason


def test_unknown_format_accepts_any_string_when_asked() -> None:
    schema = {"type": "string", "format": "color", "x-formcast-any-string": True}
    automaton = compile_automaton(schema_to_regex(schema))
    assert automaton.matches(b'"anything at all"')


def test_spelled_format_with_lengths_is_refused() -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex({"type": "string", "format": "regex", "minLength": 2})
    assert info.value.keyword == "minLength"


def test_json_string_holds_the_inner_json() -> None:
    schema = {
        "type": "string",
        "contentMediaType": "application/json",
        "contentSchema": {"type": "array", "items": {"type": "integer"}},
    }
    automaton = compile_automaton(schema_to_regex(schema))
    assert automaton.matches(b'"[1,2]"') and automaton.matches(b'"[]"')
    assert not automaton.matches(b'"[1,"') and not automaton.matches(b"[1]")


def test_json_string_of_strings_is_refused() -> None:
    schema = {
        "type": "object",
        "properties": {
            "j": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"type": "string"},
            }
        },
    }
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema)
    assert (info.value.keyword, info.value.pointer) == (
        "contentSchema",
        "/properties/j/contentSchema",
    )


def test_format_and_pattern_are_crossed() -> None:
    schema = {"type": "string", "format": "date", "pattern": "^2"}
    automaton = compile_automaton(schema_to_regex(schema))
    assert automaton.matches(b'"2024-02-29"')
    assert not automaton.matches(b'"1999-01-01"') and not automaton.matches(b'"2023-02-29"')


def test_pattern_within_the_format_is_kept_alone() -> None:
    schema = {"type": "string", "format": "regex", "pattern": "^[0-9]+(:[0-9]+)?$", "minLength": 1}
    automaton = compile_automaton(schema_to_regex(schema, mode="specification"))
    assert automaton.matches(b'"12:30"') and not automaton.matches(b'"a"')


@pytest.mark.parametrize(
    ("low", "high"),
    [
        (None, dt.date(2024, 2, 28)),
        (dt.date(2024, 2, 29), None),
        (dt.date(2023, 12, 31), dt.date(2024, 3, 1)),
        (dt.date(2024, 3, 5), dt.date(2024, 3, 5)),
        (dt.date(1999, 11, 30), dt.date(2000, 3, 1)),
    ],
)
def test_date_ranges_hold_exactly_the_days_between(
    low: dt.date | None, high: dt.date | None
) -> None:
    regex = re.compile(date_range_regex(low, high))
    day = dt.date(1999, 1, 1)
    while day < dt.date(2025, 6, 1):
        inside = (low is None or low <= day) and (high is None or day <= high)
        assert bool(regex.fullmatch(day.isoformat())) == inside, day
        day += dt.timedelta(days=1)
    assert not regex.fullmatch("2023-02-29") and not regex.fullmatch("2024-04-31")
    assert bool(regex.fullmatch("0001-01-01")) == (low is None)
    assert bool(regex.fullmatch("9999-12-31")) == (high is None)


def test_byte_sizes_read_as_pydantic_reads_them() -> None:
    adapter = pydantic.TypeAdapter(pydantic.ByteSize)
    regex = re.compile(byte_size_regex())
    for text in ["1.5 KiB", "20mb", "0b", "7 EiBit", "123456789012.999 k"]:
        assert regex.fullmatch(text), text
        adapter.validate_python(text)
    for text in ["1.5 KX", "KB", "1..5kb", ".5kb"]:
        assert not regex.fullmatch(text), text


def test_payment_card_numbers_pass_luhn_and_brand_lengths() -> None:
    regex = re.compile(PAYMENT_CARD_REGEX)
    rng = random.Random(5)
    adapter = pydantic.TypeAdapter(pydantic.PaymentCardNumber)
    found = 0
    while found < 200:
        number = "".join(rng.choice("0123456789") for _ in range(16))
        if regex.fullmatch(number):
            found += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", pydantic.PydanticDeprecatedSince20)
                adapter.validate_python(number)
    assert regex.fullmatch("4242424242424242") and not regex.fullmatch("4242424242424241")
    assert not regex.fullmatch("3400000000000000")  # American Express has 15 digits
