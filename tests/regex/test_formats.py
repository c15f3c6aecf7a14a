"""Tests for formcast.regex.formats: the string formats, in both modes."""

from __future__ import annotations

import pytest
from regex_checks import (
    Case,
    Unsupported,
    case_tests,
    fullmatch,
    specification_tests,
    unsupported_tests,
)

from formcast.errors import UnknownFormatWarning, UnsupportedSchemaError
from formcast.regex.translator import schema_to_regex

CASES: list[Case] = [
    (
        "date",
        {"type": "string", "format": "date"},
        ["2024-02-29", "2023-12-31", "0001-01-01", "2000-02-29"],
        ["2023-02-29", "2023-13-01", "1900-02-29", "2023-04-31", "20230101"],
    ),
    (
        "time",
        {"type": "string", "format": "time"},
        ["12:30:00Z", "23:59:59.123+05:30"],
        ["24:00:00Z", "12:30", "12:60:00Z"],
    ),
    (
        "date-time",
        {"type": "string", "format": "date-time"},
        ["2024-01-01T00:00:00Z", "1999-12-31T23:59:59.5-08:00"],
        ["2024-01-01 00:00:00Z", "2024-01-01T00:00:00"],
    ),
    (
        "duration",
        {"type": "string", "format": "duration"},
        ["P1D", "PT1H30M", "P1Y2M3DT4H5M6S", "P2W"],
        ["P", "PT", "1D", "P1H"],
    ),
    (
        "uuid",
        {"type": "string", "format": "uuid"},
        ["123e4567-e89b-12d3-a456-426614174000"],
        ["123e4567e89b12d3a456426614174000", "xyz"],
    ),
    (
        "email",
        {"type": "string", "format": "email"},
        ["john.doe@example.com", "a+b@mail.co.uk"],
        ["john", "a@b", "x@host.test"],
    ),
    (
        "ipv4",
        {"type": "string", "format": "ipv4"},
        ["127.0.0.1", "255.255.255.255", "0.0.0.0"],
        ["256.1.1.1", "01.1.1.1", "1.1.1"],
    ),
    (
        "ipv6",
        {"type": "string", "format": "ipv6"},
        ["::1", "::", "fe80::1:2", "1:2:3:4:5:6:7:8", "1::"],
        ["1:2:3", ":::", "12345::"],
    ),
    (
        "uri-template",
        {"type": "string", "format": "uri-template"},
        ["http://example.com/{id}", "/search{?q,lang}", "{+path}/x", "{var:3}{list*}", "%20{a.b}"],
        ["http://example.com/resource/{", "{}", "{a b}", "}", "{a:0}", "{a..b}", "a b"],
    ),
    (
        "hostname",
        {"type": "string", "format": "hostname"},
        ["example.com", "a-b.c"],
        ["-ab.com", "a..b"],
    ),
    (
        "uri",
        {"type": "string", "format": "uri"},
        ["https://example.com/a/b", "http://a.b.io:8080/"],
        ["example.com", "ftp:/x"],
    ),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


SPEC_CASES: list[Case] = [
    # maskbench Github_easy---o51165, o78130: any RFC 3986 URI
    (
        "uri is RFC 3986",
        {"type": "string", "format": "uri"},
        [
            "file:///path/to/file1.js",
            "https://example.com/upload/0123456789abcdef0123456789abcdef",
            "urn:isbn:0451450523",
            "mailto:a@b.c",
            "http://[::1]:80/a?b=c#d",
            "a:",
        ],
        ["/relative", "http://a b", "1a:b", "http://%zz", "", "é:x"],
    ),
    (
        "uri-reference",
        {"type": "string", "format": "uri-reference"},
        ["/relative/path", "rel", "", "#frag", "?q", "http://x.y/z", "/a:b"],
        ["a b", "1a:b", "%g0"],
    ),
]


test_specification_mode_cases = specification_tests(SPEC_CASES)


UNSUPPORTED: list[Unsupported] = [
    ({"type": "string", "format": "date", "maxLength": 5}, "maxLength", "/", "generation"),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)


def test_unknown_format_is_refused_in_generation_mode() -> None:
    with pytest.raises(UnsupportedSchemaError, match="unknown format 'color'") as info:
        schema_to_regex({"type": "string", "format": "color"})
    assert (info.value.keyword, info.value.pointer) == ("format", "/")


def test_unknown_format_is_any_string_when_the_schema_says_so() -> None:
    regex = schema_to_regex({"type": "string", "format": "color", "x-formcast-any-string": True})
    assert fullmatch(regex, '"anything"')


COLOR = {"type": "object", "properties": {"c": {"type": "string", "format": "color"}}}


@pytest.mark.parametrize(
    "dialect",
    [
        None,
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-04/schema#",
    ],
)
def test_unknown_format_is_an_annotation_in_specification_mode(dialect: str | None) -> None:
    schema = dict(COLOR) if dialect is None else {"$schema": dialect, **COLOR}
    with pytest.warns(UnknownFormatWarning) as caught:
        regex = schema_to_regex(schema, mode="specification")
    (warning,) = [w.message for w in caught if isinstance(w.message, UnknownFormatWarning)]
    assert (warning.format, warning.pointer) == ("color", "/properties/c")
    assert "annotation" in str(warning)
    assert fullmatch(regex, '{"c":"any text at all"}')
    assert not fullmatch(regex, '{"c":1}')  # the type is still enforced


def test_unknown_format_is_refused_where_the_vocabulary_asserts_formats() -> None:
    vocabulary = {
        "https://json-schema.org/draft/2020-12/vocab/core": True,
        "https://json-schema.org/draft/2020-12/vocab/format-assertion": True,
    }
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex({"$vocabulary": vocabulary, **COLOR}, mode="specification")
    assert (info.value.keyword, info.value.pointer) == ("format", "/properties/c")
    assert "asserts formats" in info.value.reason


def test_unknown_format_on_enum_values_is_an_annotation() -> None:
    schema = {"type": "string", "format": "color", "enum": ["red", "not a color"]}
    with pytest.warns(UnknownFormatWarning):
        regex = schema_to_regex(schema, mode="specification")
    assert fullmatch(regex, '"not a color"') and not fullmatch(regex, '"blue"')
