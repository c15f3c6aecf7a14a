"""String formats: dates, times, durations, UUIDs, IP addresses, host names, e-mail
addresses, URLs, URIs and URI templates, as regexes over the decoded string (plain
characters only).

* :data:`STRING_FORMATS`: conservative regexes for ``format`` values; what they match
  passes jsonschema's format checker and the matching Pydantic type.
* :data:`SPEC_STRING_FORMATS`: the exact RFC 3986 grammars ``specification`` mode uses
  for ``uri`` and ``uri-reference``.
* :data:`PYDANTIC_FORMS`: what Pydantic writes and reads where its JSON Schema formats
  say otherwise (naive date-times, signed durations); :mod:`formcast.schema` puts them
  into the patterns of the schemas it generates, as it does :func:`url_regex` for URL
  types with allowed schemes.

Everything here is built once, at import (a few milliseconds).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from formcast.charset import from_chars, minus
from formcast.regex.dialect import alt, char_class, escape_literal, group, repeat
from formcast.regex.patterns import PatternParser, length_range


def _words_except(words: Iterable[str], low: int, high: int) -> str:
    """Regex for ``[a-z]{low,high}`` minus the given lowercase words."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = True

    def emit(node: dict[str, Any], depth: int) -> str | None:
        alts = []
        if low <= depth <= high and "" not in node:
            alts.append("")
        if depth < high:
            children = sorted(k for k in node if k)
            others = minus(from_chars("abcdefghijklmnopqrstuvwxyz"), from_chars("".join(children)))
            cls = char_class(others)
            if cls is not None:
                alts.append(cls + repeat("[a-z]", max(0, low - depth - 1), high - depth - 1))
            for child in children:
                sub = emit(node[child], depth + 1)
                if sub is not None:
                    alts.append(child + sub)
        return alt(alts)

    return emit(tree, 0) or ""


_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    f"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    f"|{_LEAP_YEAR}-02-29)"
)
_TIME = (
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
    "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
_N = "[0-9]{1,4}"
_DURATION = (
    f"P(?:(?:{_N}D|{_N}M(?:{_N}D)?|{_N}Y(?:{_N}M(?:{_N}D)?)?)"
    f"(?:T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S))?"
    f"|T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S)|{_N}W)"
)
_LOCAL_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"


def _ordered_parts(parts: Sequence[str]) -> str:
    """Regex for a non-empty subsequence of ``parts``, in order."""
    alts = [
        part + "".join(f"(?:{later})?" for later in parts[i + 1 :]) for i, part in enumerate(parts)
    ]
    return alt(alts) or ""


_DURATION_DATE = _ordered_parts([f"{_N}Y", f"{_N}M", f"{_N}W", f"{_N}D"])
_DURATION_TIME = _ordered_parts([f"{_N}H", f"{_N}M", rf"{_N}(?:\.[0-9]{{1,6}})?S"])
_PYDANTIC_DURATION = f"-?P(?:{_DURATION_DATE}(?:T{_DURATION_TIME})?|T{_DURATION_TIME})"

PYDANTIC_FORMS: dict[str, str] = {
    "date-time": f"{_DATE}T{_LOCAL_TIME}{_TIME[len(_LOCAL_TIME) :]}?",
    "naive-date-time": f"{_DATE}T{_LOCAL_TIME}",
    "time": f"{_LOCAL_TIME}{_TIME[len(_LOCAL_TIME) :]}?",
    "naive-time": _LOCAL_TIME,
    "duration": _PYDANTIC_DURATION,
}
"""Regexes for the forms Pydantic writes and reads where they differ from the JSON Schema
formats: ``datetime``/``time`` without an offset (naive values), ``timedelta`` with a sign,
weeks next to days and fractional seconds (``-P1D``, ``PT1.5S``, ``P1Y35DT0.000001S``).

:func:`formcast.schema.load_schema` puts them, anchored, into the ``pattern`` of the schema
it generates for a Pydantic model; ``specification`` mode never sees them."""

_UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


def _uuid_version(version: int) -> str:
    hex_ = "[0-9a-fA-F]"
    return f"{hex_}{{8}}-{hex_}{{4}}-{version}{hex_}{{3}}-[89abAB]{hex_}{{3}}-{hex_}{{12}}"


_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = "[0-9a-fA-F]{1,4}"


def _ipv6() -> str:
    alts = [f"(?:{_H16}:){{7}}{_H16}"]
    # "::" compression with i groups before and j after, i + j <= 7
    for before in range(0, 8):
        for after in range(0, 8 - before):
            head = (
                ""
                if before == 0
                else f"{_H16}" + ("" if before == 1 else f"(?::{_H16}){{{before - 1}}}")
            )
            tail = (
                ""
                if after == 0
                else f"{_H16}" + ("" if after == 1 else f"(?::{_H16}){{{after - 1}}}")
            )
            alts.append(f"{head}::{tail}")
    return alt(alts) or ""


_LABEL = "[a-zA-Z0-9]{1,20}(?:-[a-zA-Z0-9]{1,20})?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL}){{0,3}}"
_DOMAIN_LABEL = "[a-z0-9]{1,16}(?:-[a-z0-9]{1,16})?"
# email-validator refuses these special-use top-level domains
_TLD = _words_except(["arpa", "local", "onion", "test"], 2, 6)
_DOMAIN = rf"{_DOMAIN_LABEL}\.(?:{_DOMAIN_LABEL}\.)?{_TLD}"
_EMAIL_WORD = "[A-Za-z0-9_+-]{1,24}"
_EMAIL = rf"{_EMAIL_WORD}(?:\.{_EMAIL_WORD})?@{_DOMAIN}"
# URLs: an RFC 3986 subset that Pydantic's URL types (the WHATWG parser) also accept. Host
# labels never hold "--" (no "xn--" punycode) and the last starts with a letter (never
# read as an IPv4 number); "file" URLs (no user or port) are written as file:///path.
_URL_TOP_LABEL = "[a-z][a-z0-9]{0,15}(?:-[a-z0-9]{1,16})?"
_URL_USER = "[A-Za-z0-9._~-]{1,16}(?::[A-Za-z0-9._~-]{1,16})?@"
_URL_AUTHORITY = (
    rf"(?:{_URL_USER})?(?:{_DOMAIN_LABEL}\.){{0,4}}{_URL_TOP_LABEL}(?::[1-9][0-9]{{0,3}})?"
)
_URL_PCHAR = "[A-Za-z0-9._~!$&'()*+,;=:@-]"
_URL_PATH = rf"(?:/{_URL_PCHAR}{{0,20}}){{0,6}}"
_URL_TAIL = rf"(?:\?(?:{_URL_PCHAR}|[/?]){{0,40}})?(?:#(?:{_URL_PCHAR}|[/?]){{0,40}})?"


def url_regex(schemes: Sequence[str] | None) -> str:
    """Regex for absolute URLs ``scheme://[user[:password]@]host[:port][/path][?query][#fragment]``
    with one of ``schemes`` (lowercase; ``None``: any scheme of 2 to 10 letters)."""
    others = [s for s in schemes or () if s != "file"]
    scheme = _words_except(["file"], 2, 10) if schemes is None else alt(map(escape_literal, others))
    alts = [] if scheme is None else [f"{group(scheme)}://{_URL_AUTHORITY}{_URL_PATH}{_URL_TAIL}"]
    if schemes is None or "file" in schemes:
        alts.append(rf"file://(?:/{_URL_PCHAR}{{0,20}}){{1,6}}{_URL_TAIL}")
    return alt(alts) or ""


_URI = url_regex(None)

_PCT = "%[0-9A-Fa-f]{2}"
_URI_CHARS = "A-Za-z0-9._~!$&'()*+,;="  # unreserved and sub-delims (RFC 3986)
_PCHAR = f"(?:[{_URI_CHARS}:@-]|{_PCT})"
_URI_HOST = rf"(?:\[(?:{_ipv6()}|v[0-9A-Fa-f]+\.[{_URI_CHARS}:-]+)\]|(?:[{_URI_CHARS}-]|{_PCT})*)"
_URI_AUTHORITY = rf"(?:(?:[{_URI_CHARS}:-]|{_PCT})*@)?{_URI_HOST}(?::[0-9]*)?"
_URI_TAIL = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI_PATHS = rf"//{_URI_AUTHORITY}(?:/{_PCHAR}*)*|/?(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
_URI_RFC = rf"[A-Za-z][A-Za-z0-9+.-]*:(?:{_URI_PATHS}){_URI_TAIL}"
_URI_RELATIVE = (
    rf"(?://{_URI_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
    rf"|(?:(?:[{_URI_CHARS}@-]|{_PCT})+(?:/{_PCHAR}*)*)?){_URI_TAIL}"
)

# RFC 6570 URI templates, ASCII only: literals (and percent-encodings) and expressions
# "{" [operator] varspec *("," varspec) "}", a varspec a dotted name with ":n" or "*".
_TEMPLATE_LITERAL = rf"(?:[!#$&(-;=?-\[\]_a-z~]|{_PCT})"
_TEMPLATE_VARCHAR = f"(?:[A-Za-z0-9_]|{_PCT})"
_TEMPLATE_VARSPEC = rf"{_TEMPLATE_VARCHAR}(?:\.?{_TEMPLATE_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
_URI_TEMPLATE = (
    rf"(?:{_TEMPLATE_LITERAL}|\{{[+#./;?&=,!@|]?{_TEMPLATE_VARSPEC}(?:,{_TEMPLATE_VARSPEC})*\}})*"
)

SPEC_STRING_FORMATS: dict[str, str] = {
    "uri": _URI_RFC,
    "uri-reference": f"(?:{_URI_RFC}|{_URI_RELATIVE})",
}
"""Exact RFC 3986 grammars, used in ``specification`` mode in place of the conservative
``uri`` (the IRI forms, exact in both modes, are in :mod:`formcast.regex.more_formats`).

Unbounded in length: with ``maxLength`` the conservative regex is used instead."""

STRING_FORMATS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}T{_TIME}",
    "duration": _DURATION,
    "uuid": _UUID,
    **{f"uuid{v}": _uuid_version(v) for v in (1, 3, 4, 5)},
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "ipvanyaddress": f"(?:{_IPV4}|{_ipv6()})",
    "uri": _URI,
    "uri-template": _URI_TEMPLATE,
}
"""Regexes (over the decoded string; plain characters only) for the supported formats.

Each is conservative: what it matches passes jsonschema's format checker and the matching
Pydantic type (``date``, ``time``, ``datetime``, ``timedelta``, ``UUID``/``UUIDn``,
``EmailStr`` with email-validator, ``IPv4Address``/``IPv6Address``, ``AnyUrl``).
"""

FREE_STRING_FORMATS = frozenset({"binary", "password", "path"})
"""Formats Pydantic emits that accept any string (``bytes``, ``SecretStr``, ``Path``)."""


_FORMAT_ASSERTION_VOCABULARIES = (
    "https://json-schema.org/draft/2020-12/vocab/format-assertion",
    "https://json-schema.org/draft/2019-09/vocab/format",
)


def asserts_formats(root: Any) -> bool:
    """Whether the document's root declares, in ``$vocabulary``, the vocabulary that
    makes ``format`` an assertion (2020-12's format-assertion, or 2019-09's format vocabulary
    required with ``true``). Otherwise every draft reads a format a validator does not
    know as an annotation. A metaschema named only by ``$schema`` is not fetched, so its
    vocabularies are not known."""
    vocabulary = root.get("$vocabulary") if isinstance(root, dict) else None
    if not isinstance(vocabulary, dict):
        return False
    return any(
        uri.rstrip("#") == assertion and (value is True or uri.endswith("format-assertion"))
        for uri, value in vocabulary.items()
        if isinstance(uri, str)
        for assertion in _FORMAT_ASSERTION_VOCABULARIES
    )


@cache
def format_length_of(regex: str) -> tuple[int, float]:
    """The fewest and most characters a string matching the format ``regex`` has."""
    return length_range(PatternParser(regex).parse())


def format_length(name: str) -> tuple[int, float]:
    """:func:`format_length_of` the :data:`STRING_FORMATS` regex of format ``name``."""
    return format_length_of(STRING_FORMATS[name])
