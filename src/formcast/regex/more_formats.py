"""The formats beyond dates, UUIDs, addresses and URLs: JSON pointers, regexes, URI
references and IRIs, internationalised host names and e-mail addresses, and the formats
Pydantic writes (base64, IP networks and interfaces, ``name-email``); and the regexes of
Pydantic's checks that are no format (dates relative to a day, byte sizes, the Luhn digit
of payment card numbers).

Each regex is over the decoded string unless it is listed in :data:`SPELLED_FORMATS`:
those hold ``"`` or ``\\`` and are written over the string's JSON spelling (each
character with one spelling, as :func:`~formcast.regex.dialect.encoded_set` writes it).

Exact or subset (the guide's format table repeats this):

* exact: ``json-pointer``, ``relative-json-pointer``, ``uri-reference``, ``iri``,
  ``iri-reference`` (RFC 3986 / 3987), ``ipv4network``, ``ipv4interface``;
* subset, every value of which validates: ``regex`` (patterns both Python's ``re`` and
  ECMA-262 read, groups nested at most :data:`REGEX_GROUP_DEPTH` deep), ``idn-hostname``
  and ``idn-email`` (lowercase Latin, Greek and Cyrillic letters beside ASCII, short
  labels), ``base64``/``base64url`` (canonical base64 of ASCII text, which both
  ``Base64Bytes`` and ``Base64Str`` decode), ``ipv6network`` (the prefix's groups and
  ``::``), ``ipv6interface`` (the ``ipv6`` address subset and an exact prefix), and
  their IPv6 halves in ``ipvanynetwork``/``ipvanyinterface``, ``name-email``, the
  payment card numbers (:data:`PAYMENT_CARD_REGEX`).

Built once, at import (about 30 ms, most of it the network regexes).
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from collections.abc import Iterable

from formcast import charset
from formcast.regex.dialect import alt, char_class, encoded_set
from formcast.regex.formats import (
    _EMAIL,
    _H16,
    _IPV4,
    _OCTET,
    _TLD,
    _URI_RFC,
    _ipv6,
)

__all__ = [
    "DECODED_FORMATS",
    "GENERATION_FORMATS",
    "JSON_SCHEMA_FORMATS",
    "PAYMENT_CARD_REGEX",
    "REGEX_GROUP_DEPTH",
    "SPELLED_FORMATS",
    "byte_size_regex",
    "date_range_regex",
]


def _digits(values: Iterable[str]) -> str:
    """A regex for a set of equally long strings (digits mostly), sharing prefixes and
    merging first characters whose rests read the same into one class."""
    words = sorted(set(values))
    if not words:
        raise ValueError("no strings")
    if len(words[0]) == 0:
        return ""
    rests: dict[str, list[str]] = {}
    for word in words:
        rests.setdefault(word[0], []).append(word[1:])
    by_rest: dict[str, list[str]] = {}
    for first, tails in rests.items():
        by_rest.setdefault(_digits(tails), []).append(first)
    parts = []
    for rest, firsts in by_rest.items():
        head = char_class(charset.from_chars("".join(firsts))) or ""
        parts.append(head + (rest if "|" not in rest else f"(?:{rest})"))
    return alt(parts) or ""


# ----------------------------------------------------------------------------- JSON pointers

_POINTER_CHAR = encoded_set(charset.minus(charset.ANY, charset.from_chars("/~")), False)
_JSON_POINTER = f"(?:/(?:{_POINTER_CHAR}|~[01])*)*"
_RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})"

# ----------------------------------------------------------------------------- regexes

REGEX_GROUP_DEPTH = 3
"""Most nesting of groups in a generated ``regex`` value."""

_RE_LITERAL = r"[A-Za-z0-9 _,:;!#%&'<=>@~/-]"
_RE_COUNT = "(?:[0-9]|[1-9][0-9])"
_RE_QUANTIFIER = (
    r"(?:[*+?]|\{" + f"(?:{_RE_COUNT},?|" + "|".join(f"{n},[{n}-9]" for n in range(10)) + r")\})\??"
)


def _regex_value(depth: int, backslash: str) -> str:
    """Patterns whose groups nest at most ``depth`` deep: alternatives of terms, a term
    an anchor or an atom with at most one quantifier (``*``, ``+``, ``?``, ``{n}``,
    ``{n,}``, ``{n,m}`` with ``n <= m``, each maybe lazy). ``backslash``: the regex of
    one backslash (its JSON spelling, or itself)."""
    escape = backslash + r"[dDwWsS.*+?()\[\]{}|^$/]"
    item = (
        r"(?:[A-Za-z0-9_ .,:;!#%@=<>'+*?(){}$/]|a-z|A-Z|0-9|a-f|A-F"
        rf"|{backslash}[dDwWsS]|{backslash}[\]^-]|{backslash}{backslash})"
    )
    atoms = [_RE_LITERAL, r"\.", escape, rf"\[\^?{item}{{1,8}}\]"]
    if depth > 0:
        inner = _regex_value(depth - 1, backslash)
        atoms.append(rf"\((?:\?:)?{inner}\)")
    atom = "(?:" + "|".join(atoms) + ")"
    term = rf"(?:{atom}(?:{_RE_QUANTIFIER})?|\^|\$)"
    return f"(?:{term}*(?:\\|{term}*)*)"


_REGEX = _regex_value(REGEX_GROUP_DEPTH, r"\\\\")  # a backslash as JSON spells it

# ----------------------------------------------------------------------------- IRIs

# RFC 3987 ucschar and iprivate, beside RFC 3986's characters
_UCS = (
    "\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef\U00010000-\U0001fffd\U00020000-\U0002fffd"
    "\U00030000-\U0003fffd\U00040000-\U0004fffd\U00050000-\U0005fffd\U00060000-\U0006fffd"
    "\U00070000-\U0007fffd\U00080000-\U0008fffd\U00090000-\U0009fffd\U000a0000-\U000afffd"
    "\U000b0000-\U000bfffd\U000c0000-\U000cfffd\U000d0000-\U000dfffd\U000e1000-\U000efffd"
)
_PRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"


def _iri(regex: str) -> str:
    """An RFC 3986 regex of :mod:`formcast.regex.formats` made into its RFC 3987 form:
    ``ucschar`` wherever an unreserved character may be, ``iprivate`` in the query."""
    unreserved = "A-Za-z0-9._~!$&'()*+,;="
    widened = regex.replace(unreserved, unreserved + _UCS)
    return widened.replace(r"(?:\?(?:", rf"(?:\?(?:[{_PRIVATE}]|")


_IRI = _iri(_URI_RFC)

# ----------------------------------------------------------------------------- IDN names


def _idn_letters() -> str:
    """Lowercase letters of Latin-1, Latin Extended-A, Greek and Cyrillic that IDNA 2008
    lets stand in a label alone (stable under NFKC and case folding, left-to-right, no
    combining mark): any string of them is in NFC and needs no Bidi rule."""
    chars = []
    for lo, hi in ((0xDF, 0x17F), (0x3AC, 0x3CE), (0x430, 0x45F)):
        for code in range(lo, hi + 1):
            char = chr(code)
            if (
                unicodedata.category(char) == "Ll"
                and unicodedata.bidirectional(char) == "L"
                and unicodedata.combining(char) == 0
                and unicodedata.normalize("NFKC", char.casefold()) == char
                and unicodedata.normalize("NFC", char) == char
            ):
                chars.append(char)
    return char_class(charset.from_chars("".join(chars))) or ""


_IDN_LETTER = _idn_letters()
_IDN_CHAR = f"(?:[a-z0-9]|{_IDN_LETTER})"
# at most 10 characters: the A-label (punycode) stays under 63
_IDN_LABEL = f"(?:{_IDN_CHAR}{{1,10}}|{_IDN_CHAR}{{1,5}}-{_IDN_CHAR}{{1,4}})"
_IDN_HOSTNAME = rf"{_IDN_LABEL}(?:\.{_IDN_LABEL}){{0,3}}"
_IDN_WORD = f"(?:[A-Za-z0-9_+-]|{_IDN_LETTER}){{1,16}}"
_IDN_EMAIL = rf"{_IDN_WORD}(?:\.{_IDN_WORD})?@{_IDN_LABEL}\.(?:{_IDN_LABEL}\.)?{_TLD}"

# ----------------------------------------------------------------------------- Pydantic's

_NAME = "[A-Za-z0-9]{1,16}(?: [A-Za-z0-9]{1,16}){0,2}"
_NAME_EMAIL = f"(?:{_NAME} <{_EMAIL}>|{_EMAIL})"


def _base64(last: str) -> str:
    """Canonical base64 of ASCII text (each byte's top bit 0, padding bits 0); ``last``:
    the two characters of values 62 and 63."""
    first = "[A-Za-f]"  # 0..31: the top bit of the first byte is 0
    second = "[A-HQ-Xg-nw-z0-3]"  # bit 3 clear: the top bit of the second byte is 0
    third = "[ABEFIJMNQRUVYZcdghklopstwx0145]"  # bit 1 clear: the third byte's top bit 0
    fourth = f"[A-Za-z0-9{last}]"
    one = f"{first}[AQgw]=="
    two = f"{first}{second}[AEIMQUYcgkosw048]="
    return f"(?:{first}{second}{third}{fourth})*(?:{one}|{two})?"


def _prefix(top: int) -> str:
    """A prefix length ``0..top`` as ``ipaddress`` reads it (ASCII digits, leading zeros
    allowed)."""
    return "0*" + _digits_range(0, top)


def _digits_range(low: int, high: int) -> str:
    """Decimal numbers ``low..high`` without leading zeros."""
    return (
        alt(
            _digits(str(n) for n in range(low, high + 1) if len(str(n)) == w)
            for w in {len(str(n)) for n in range(low, high + 1)}
        )
        or ""
    )


def _octets_multiple(step: int) -> str:
    """IPv4 octets that are multiples of ``step`` (no leading zeros)."""
    values = [str(v) for v in range(0, 256, step)]
    return (
        alt(
            _digits(v for v in values if len(v) == w)
            for w in (1, 2, 3)
            if any(len(v) == w for v in values)
        )
        or ""
    )


def _mask_text(bits: int) -> str:
    mask = (0xFFFFFFFF << (32 - bits)) & 0xFFFFFFFF if bits else 0
    return ".".join(str((mask >> s) & 0xFF) for s in (24, 16, 8, 0))


def _host_mask_text(bits: int) -> str:
    mask = (0xFFFFFFFF >> bits) if bits < 32 else 0
    return ".".join(str((mask >> s) & 0xFF) for s in (24, 16, 8, 0))


def _ipv4_prefix_forms(bits: int) -> str:
    """The suffixes ``/n`` that give prefix length ``bits``: the number (leading zeros
    allowed), the netmask, or the host mask when it is not read as a netmask."""
    forms = [r"0*" + str(bits) if bits else "0+", _mask_text(bits).replace(".", r"\.")]
    host = _host_mask_text(bits)
    netmasks = {_mask_text(b) for b in range(33)}
    if host not in netmasks:
        forms.append(host.replace(".", r"\."))
    return "/(?:" + "|".join(forms) + ")"


def _ipv4_network() -> str:
    """IPv4 networks as ``ipaddress.ip_network`` reads them (strict: no host bits set),
    with an optional prefix in any of its three forms."""
    alts = [_IPV4]  # no prefix: a /32 network
    for bits in range(33):
        whole, part = divmod(bits, 8)
        octets = [_OCTET] * whole
        if whole < 4:
            octets.append(_octets_multiple(2 ** (8 - part)) if part else "0")
            octets += ["0"] * (3 - whole)
        text = r"\.".join(f"(?:{o})" if "|" in o else o for o in octets)
        alts.append(text + _ipv4_prefix_forms(bits))
    return "(?:" + "|".join(alts) + ")"


_IPV4_ANY_PREFIX = (
    "/(?:"
    + "|".join(
        [
            _prefix(32),
            *sorted({_mask_text(b).replace(".", r"\.") for b in range(33)}),
            *sorted({_host_mask_text(b).replace(".", r"\.") for b in range(33)}),
        ]
    )
    + ")"
)
_IPV4_INTERFACE = f"{_IPV4}(?:{_IPV4_ANY_PREFIX})?"
_IPV6_INTERFACE = f"(?:{_ipv6()})(?:/{_prefix(128)})?"
_NIBBLE_MULTIPLES = {1: "[0-9a-fA-F]", 2: "[02468aceACE]", 4: "[048cC]", 8: "[08]"}


def _ipv6_network() -> str:
    """IPv6 networks ``g1:...:gk::/n`` (every group after the prefix's left out, the
    prefix's last group with its host bits clear and four hex digits), ``::/0``, and the
    eight groups in full for ``n > 112``."""
    alts = [f"(?:{_ipv6()})(?:/0*128)?"]
    for bits in range(129):
        groups = -(-bits // 16)
        written = []
        for g in range(groups):
            free = min(16, bits - 16 * g)
            if free == 16:
                written.append(_H16)
                continue
            nibbles = []
            for n in range(4):
                left = free - 4 * n
                if left >= 4:
                    nibbles.append("[0-9a-fA-F]")
                elif left <= 0:
                    nibbles.append("0")
                else:
                    nibbles.append(_NIBBLE_MULTIPLES[2 ** (4 - left)])
            written.append("".join(nibbles))
        suffix = "/" + ("0*" + str(bits) if bits else "0+")
        if groups == 8:
            alts.append(":".join(written) + suffix)
        else:
            alts.append(":".join(written) + "::" + suffix)
    return "(?:" + "|".join(alts) + ")"


_IPV6_NETWORK = _ipv6_network()

JSON_SCHEMA_FORMATS: dict[str, str] = {
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": _RELATIVE_JSON_POINTER,
    "regex": _REGEX,
    "uri-reference": "",  # filled below from formats.SPEC_STRING_FORMATS
    "iri": _IRI,
    "iri-reference": "",
    "idn-hostname": _IDN_HOSTNAME,
    "idn-email": _IDN_EMAIL,
}
"""Regexes of the JSON Schema 2020-12 formats :data:`formcast.regex.formats.STRING_FORMATS`
does not hold, enforced in both modes."""

GENERATION_FORMATS: dict[str, str] = {
    "base64": _base64("+/"),
    "base64url": _base64("_-"),
    "ipv4network": _ipv4_network(),
    "ipv6network": _IPV6_NETWORK,
    "ipvanynetwork": f"(?:{_ipv4_network()}|{_IPV6_NETWORK})",
    "ipv4interface": _IPV4_INTERFACE,
    "ipv6interface": _IPV6_INTERFACE,
    "ipvanyinterface": f"(?:{_IPV4_INTERFACE}|{_IPV6_INTERFACE})",
    "name-email": _NAME_EMAIL,
}
"""Regexes of the formats Pydantic writes that JSON Schema does not define; generation
mode enforces them, ``specification`` mode reads them as unknown (annotations)."""

SPELLED_FORMATS = frozenset({"json-pointer", "relative-json-pointer", "regex"})
"""Formats whose regex is over the JSON spelling of the string (they hold ``"`` or ``\\``)."""

_DECODED_POINTER = "(?:/(?:[^/~]|~[01])*)*"
DECODED_FORMATS: dict[str, str] = {
    "json-pointer": _DECODED_POINTER,
    "relative-json-pointer": f"(?:0|[1-9][0-9]*)(?:#|{_DECODED_POINTER})",
    "regex": _regex_value(0, r"\\"),  # no group: small enough to cross
}
"""The :data:`SPELLED_FORMATS` over the decoded string, as patterns (crossed with a
schema's ``pattern``)."""


def _fill_references() -> None:
    from formcast.regex.formats import SPEC_STRING_FORMATS

    JSON_SCHEMA_FORMATS["uri-reference"] = SPEC_STRING_FORMATS["uri-reference"]
    JSON_SCHEMA_FORMATS["iri-reference"] = _iri(SPEC_STRING_FORMATS["uri-reference"])


_fill_references()

# ----------------------------------------------------------------------------- Pydantic checks

_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _year_dates(years: range) -> str | None:
    """Every date of the years ``years`` (within 1..9999)."""
    if not years:
        return None
    texts = [f"{y:04d}" for y in years]
    leap = [f"{y:04d}" for y in years if _is_leap(y)]
    days = (
        "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
        "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    )
    alts = [f"(?:{_digits(texts)})-{days}"]
    if leap:
        alts.append(f"(?:{_digits(leap)})-02-29")
    return alt(alts)


def _month_days(year: int, month: int, first: int, last: int) -> str | None:
    """Days ``first..last`` of one month (clipped to its length)."""
    length = 29 if month == 2 and _is_leap(year) else _MONTH_DAYS[month - 1]
    days = [f"{d:02d}" for d in range(first, min(last, length) + 1)]
    if not days:
        return None
    return f"{year:04d}-{month:02d}-(?:{_digits(days)})"


def date_range_regex(low: dt.date | None, high: dt.date | None) -> str:
    """ISO dates ``YYYY-MM-DD`` from ``low`` to ``high`` (both included; ``None``: from
    0001-01-01, to 9999-12-31)."""
    low = low or dt.date(1, 1, 1)
    high = high or dt.date(9999, 12, 31)
    alts: list[str | None] = []
    if low.year == high.year:
        for month in range(low.month, high.month + 1):
            first = low.day if month == low.month else 1
            last = high.day if month == high.month else 31
            alts.append(_month_days(low.year, month, first, last))
    else:
        for month in range(low.month, 13):
            alts.append(_month_days(low.year, month, low.day if month == low.month else 1, 31))
        alts.append(_year_dates(range(low.year + 1, high.year)))
        for month in range(1, high.month + 1):
            alts.append(_month_days(high.year, month, 1, high.day if month == high.month else 31))
    return alt(a for a in alts if a is not None) or ""


_BYTE_UNITS = [
    "b",
    "kb",
    "mb",
    "gb",
    "tb",
    "pb",
    "eb",
    "kib",
    "mib",
    "gib",
    "tib",
    "pib",
    "eib",
    "bit",
    "kbit",
    "mbit",
    "gbit",
    "tbit",
    "pbit",
    "ebit",
    "kibit",
    "mibit",
    "gibit",
    "tibit",
    "pibit",
    "eibit",
    "k",
    "m",
    "g",
    "t",
    "p",
    "e",
]


def byte_size_regex() -> str:
    """Byte sizes as ``ByteSize`` reads them: a number, an optional space and one of its
    units (any case)."""
    units = []
    for unit in _BYTE_UNITS:
        units.append("".join(f"[{c.lower()}{c.upper()}]" for c in unit))
    return rf"(?:0|[1-9][0-9]{{0,11}})(?:\.[0-9]{{1,3}})? ?(?:{'|'.join(units)})"


def _luhn_value(digit: int, doubled: bool) -> int:
    if not doubled:
        return digit
    return digit * 2 - 9 if digit >= 5 else digit * 2


def _luhn_pairs(total: int, excluded: tuple[str, ...] = ()) -> str:
    """Two digits, the first doubled, whose Luhn values sum to ``total`` mod 10."""
    pairs = []
    for first in range(10):
        second = (total - _luhn_value(first, True)) % 10
        if f"{first}{second}" not in excluded:
            pairs.append(f"{first}{second}")
    return "(?:" + "|".join(pairs) + ")"


def _luhn_quad(excluded: tuple[str, ...] = ()) -> str:
    """Four digits whose Luhn values (the first and third doubled) sum to 0 mod 10."""
    return (
        "(?:" + "|".join(_luhn_pairs(s, excluded) + _luhn_pairs(-s % 10) for s in range(10)) + ")"
    )


PAYMENT_CARD_REGEX = _luhn_quad(("34", "37")) + _luhn_quad() * 3
"""Payment card numbers ``PaymentCardNumber`` accepts: 16 digits in four groups whose
Luhn values each sum to 0 mod 10 (so the whole number's do), not starting 34 or 37 (an
American Express number has 15). A subset: the Luhn language itself counts its sum mod
10 across the whole number, which no regex of reasonable size writes out."""
