"""Numbers: integer and decimal ranges, ``multipleOf``, and the numeric keywords.

* :func:`int_range` writes the canonical JSON integers in a range, digit by digit;
  ``_int_multiple`` the multiples of ``k`` it can write exactly (small ranges, and
  divisors of 1000 with sign bounds; otherwise, for ``k <= 100``, the automaton of
  remainders by ``k`` crossed with the range, while its regex stays within the pattern
  limits); ``_fraction_multiples`` the multiples of a fractional step that divides 1.
* :func:`number_range` writes the decimals ``I(.F)?`` in a range. Bounds are first moved
  to the nearest short decimal that float parsing cannot round across (``_at_most``,
  ``_below`` ...), and rounded inwards to ``_FRACTION_DIGITS`` decimals.
* :func:`numeric_regex` reads ``minimum``/``maximum``/``exclusive*`` (draft 4 booleans
  too), ``multipleOf`` and the OpenAPI integer formats of a conjunction.

Pure string and ``Decimal`` work; the regexes are linear in the number of digits.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from typing import Any

from formcast.charset import Ranges
from formcast.errors import SchemaError, UnsupportedSchemaError
from formcast.regex.dialect import EXPONENT_FORMS, INTEGER, NUMBER, alt, group, repeat, trie
from formcast.regex.parts import REFUSED_KEYWORDS, VALIDATION_KEYWORDS, Never, Part, Result
from formcast.regex.patterns import DfaTooLarge, dfa_regex
from formcast.regex.string_sets import CharDfa, intersection, pattern_language

_NUMBER_LIMIT = Decimal(10) ** 15
"""One-sided bounds on ``number`` get this as the other side, so values stay finite."""

_INTEGER_FORMATS: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
"""OpenAPI integer formats, enforced as ranges on integers (they do not constrain strings)."""


def is_number(value: Any) -> bool:
    """Whether ``value`` is a JSON number (``bool`` is not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ----------------------------------------------------------------------------- integers


def _digits_between(lo: str, hi: str) -> str:
    """Regex for digit strings ``s`` of the same length with ``lo <= s <= hi``."""
    if lo == hi:
        return lo
    i = 0
    while lo[i] == hi[i]:
        i += 1
    prefix, lo, hi = lo[:i], lo[i:], hi[i:]
    rest = len(lo) - 1
    if rest == 0:
        return prefix + _digit_class(lo[0], hi[0])
    alts = []
    first = lo[0]
    if lo[1:] != "0" * rest:
        alts.append(lo[0] + _digits_between(lo[1:], "9" * rest))
        first = chr(ord(lo[0]) + 1)
    last = hi[0]
    tail = None
    if hi[1:] != "9" * rest:
        tail = hi[0] + _digits_between("0" * rest, hi[1:])
        last = chr(ord(hi[0]) - 1)
    if first <= last:
        alts.append(_digit_class(first, last) + repeat("[0-9]", rest, rest))
    if tail is not None:
        alts.append(tail)
    return prefix + (alt(alts) or "")


def _digit_class(lo: str, hi: str) -> str:
    if lo == hi:
        return lo
    if (lo, hi) == ("0", "9"):
        return "[0-9]"
    return f"[{lo}{hi}]" if ord(hi) == ord(lo) + 1 else f"[{lo}-{hi}]"


def _nonneg_range(lo: int, hi: int | None) -> str | None:
    """Regex for canonical decimal integers in ``lo..hi`` (``lo >= 0``; ``hi=None``: no bound)."""
    if hi is not None and hi < lo:
        return None
    alts = []
    len_lo = len(str(lo))
    len_hi = len(str(hi)) if hi is not None else len_lo
    for n in range(len_lo, len_hi + 1):
        a = lo if n == len_lo else 10 ** (n - 1)
        b = hi if (hi is not None and n == len_hi) else 10**n - 1
        alts.append(_digits_between(str(a), str(b)))
    if hi is None:
        alts.append("[1-9]" + repeat("[0-9]", len_lo, None))
    return alt(alts)


def int_range(lo: int | None, hi: int | None) -> str | None:
    """Regex for JSON integer literals in ``lo..hi`` (``None``: unbounded side)."""
    if lo is not None and hi is not None and lo > hi:
        return None
    if lo is None and hi is None:
        return INTEGER
    alts = []
    if lo is None or lo < 0:
        top = -1 if hi is None or hi >= 0 else hi
        magnitudes = _nonneg_range(-top, None if lo is None else -lo)
        if magnitudes is not None:
            alts.append("-" + group(magnitudes))
    if hi is None or hi >= 0:
        positive = _nonneg_range(max(lo, 0) if lo is not None else 0, hi)
        if positive is not None:
            alts.append(positive)
    return alt(alts)


def _int_multiple(
    k: int, lo: int | None, hi: int | None, digits: int | None = None
) -> str | bool | None:
    """Integers in ``lo..hi`` divisible by ``k``; ``False`` when not expressible here.

    Exact for ``k == 1``, for small bounded ranges (enumerated), and for ``k`` dividing
    1000 when each bound is absent or within ``k`` of zero (e.g. ``>= 0``, ``> 0``).
    ``digits`` limits the magnitude to that many digits.
    """
    top = None if digits is None else 10**digits - 1
    if k == 1:
        if top is not None:
            lo = -top if lo is None else max(lo, -top)
            hi = top if hi is None else min(hi, top)
        return int_range(lo, hi)
    if lo is not None and hi is not None:
        first = -((-lo) // k) * k
        if first > hi:
            return None
        if (hi - first) // k < 2000:
            values = [v for v in range(first, hi + 1, k) if top is None or abs(v) <= top]
            return trie([str(v) for v in values])
    power = next((j for j in range(1, 4) if 10**j % k == 0), None)
    if (
        power is None
        or (lo is not None and not -k < lo <= k)
        or (hi is not None and not -k <= hi < k)
    ):
        return _remainder_integers(k, frozenset({0}), lo, hi, top)
    short = [str(v) for v in range(k, 10**power, k)]
    suffixes = [str(v).zfill(power) for v in range(0, 10**power, k)]
    longer = ""
    if digits is None or digits > power:
        lead = "[1-9]" + repeat("[0-9]", 0, None if digits is None else digits - power - 1)
        longer = lead + group(trie(suffixes) or "")
    magnitude = alt([m for m in (trie(short), longer) if m])
    alts = []
    if lo is None and magnitude is not None:
        alts.append("-" + group(magnitude))
    if (lo is None or lo <= 0) and (hi is None or hi >= 0):
        alts.append("0")
    if hi is None and magnitude is not None:
        alts.append(magnitude)
    return alt(alts)


def _remainder_integers(
    modulus: int, remainders: frozenset[int], lo: int | None, hi: int | None, top: int | None
) -> str | bool | None:
    """Integers in ``lo..hi`` (and within ``+-top``) whose remainder by ``modulus`` is one
    of ``remainders`` (a negative integer's remainder is its magnitude's), from the
    automaton that reads decimal digits keeping the remainder (``modulus + 3`` states),
    crossed with the range's automaton and written back as a regex (``None``: no such
    integer). ``False`` when ``modulus`` is past 100 or the regex is past the pattern
    limits (a remainder by 7 writes long)."""
    if modulus > 100:
        return False
    # state 0 starts; state 1 + r: the digits so far leave remainder r; then "0" and "-"
    zero, minus = modulus + 1, modulus + 2

    def digits(remainder: int) -> tuple[tuple[Ranges, int], ...]:
        return tuple((((c, c),), 1 + (remainder * 10 + c - 48) % modulus) for c in range(48, 58))

    leading = tuple((((c, c),), 1 + (c - 48) % modulus) for c in range(49, 58))
    moves: list[tuple[tuple[Ranges, int], ...]] = [
        ((((48, 48),), zero), *leading, (((45, 45),), minus))
    ]
    moves += [digits(r) for r in range(modulus)]
    moves.append(())  # "0": nothing may follow
    moves.append(leading)  # after "-": no "-0"
    accepting = (False, *(r in remainders for r in range(modulus)), 0 in remainders, False)
    kept = [CharDfa(tuple(moves), accepting)]
    if top is not None:
        lo = -top if lo is None else max(lo, -top)
        hi = top if hi is None else min(hi, top)
    bounded = None if lo is None and hi is None else int_range(lo, hi)
    if bounded is None and (lo is not None or hi is not None):
        return None
    try:
        if bounded is not None:
            kept.append(pattern_language(f"^(?:{bounded})$", False))
        crossed = intersection(kept, [])
        return dfa_regex(crossed.moves, crossed.accepting, plain=True)
    except DfaTooLarge:
        return False


def multiple_exclusion(schema: Any) -> int | None:
    """The step of ``{"not": {"multipleOf": k}}``'s inner schema (a whole ``k`` and no
    other keyword that validates), else ``None``. Such a ``not`` stays in the conjunction: it means
    a number that is not a multiple of ``k``, which :func:`numeric_regex` writes."""
    if not isinstance(schema, dict) or any(
        k != "multipleOf" and (k in VALIDATION_KEYWORDS or k in REFUSED_KEYWORDS) for k in schema
    ):
        return None
    step: Any = schema.get("multipleOf")
    if is_number(step) and step > 0 and float(step).is_integer():
        return int(step)
    return None


_NON_INTEGER = r"-?(?:0|[1-9][0-9]{0,8})\.[0-9]{0,5}[1-9]0*"
"""Numbers that stay fractional once parsed as a float: below 10**9, with a digit that
is not zero among the first six decimals and none after (``1.9999999999999999`` and
``394481282446561.01`` parse to whole floats, which validators read as integers)."""


def _non_multiples(
    step: int,
    excluded: list[int],
    integer_only: bool,
    bounds: tuple[int | None, int | None, Decimal | None, Decimal | None],
    pointer: str,
) -> str | None:
    """The numbers (``integer_only``: the integers) that are multiples of ``step`` and of
    no step of ``excluded``, within the bounds ``(int_lo, int_hi, dec_lo, dec_hi)``:
    integers by their remainder by the least common multiple (at most 100), and, with no
    step, the numbers with a fraction that is not zero (none is a multiple of a whole
    number). Raises UnsupportedSchemaError past 100."""
    int_lo, int_hi, dec_lo, dec_hi = bounds
    modulus = step
    for k in excluded:
        modulus = modulus * k // math.gcd(modulus, k)
    kept = frozenset(r for r in range(modulus) if r % step == 0 and all(r % k for k in excluded))
    whole = _remainder_integers(modulus, kept, int_lo, int_hi, None)
    if whole is False:
        raise UnsupportedSchemaError(
            "not",
            pointer,
            f"cannot exclude the multiples of {', '.join(map(str, excluded))} here "
            f"(remainders by {modulus} past 100, or a regex past the pattern limits)",
        )
    found = [] if whole is None else [str(whole)]
    if not integer_only and step == 1:
        if dec_lo is None and dec_hi is None:
            found.append(_NON_INTEGER)
        else:
            bounded = number_range(dec_lo, dec_hi)
            if bounded is not None:
                try:
                    shaped = intersection(
                        [
                            pattern_language(f"^(?:{_NON_INTEGER})$", False),
                            pattern_language(f"^(?:{bounded})$", False),
                        ],
                        [],
                    )
                    fractions = dfa_regex(shaped.moves, shaped.accepting, plain=True)
                except DfaTooLarge:
                    raise UnsupportedSchemaError(
                        "not",
                        pointer,
                        "the numbers with a fraction in these bounds are past the pattern limits",
                    ) from None
                if fractions is not None:
                    found.append(fractions)
    return alt(found)


# ----------------------------------------------------------------------------- numbers


def _exact_decimal(value: int | float) -> Decimal:
    return Decimal(value)


def _int_digits(value: Decimal) -> int:
    magnitude = abs(value)
    return 0 if magnitude < 1 else len(str(int(magnitude)))


def _at_most(bound: int | float) -> Decimal:
    """Largest short decimal ``T`` such that ``s <= T`` implies ``s <= bound`` after parsing.

    Parsing means Python's exact ``int`` for integer literals and correctly rounded
    ``float`` otherwise.
    """
    if isinstance(bound, int):
        if abs(bound) < 2**53:
            return Decimal(bound)
        value = float(bound)
        if value > bound:
            value = math.nextafter(value, -math.inf)
        return Decimal(value)
    exact = Decimal(bound)
    short = Decimal(repr(bound))
    if short <= exact or short.to_integral_value(ROUND_FLOOR) <= exact:
        return short
    return exact


def _at_least(bound: int | float) -> Decimal:
    return -_at_most(-bound)


def _below(bound: int | float) -> Decimal:
    """A short decimal ``T < bound`` such that ``s <= T`` implies ``parse(s) < bound``."""
    exact = _exact_decimal(bound)
    digits = _int_digits(exact)
    if digits <= 15:
        step = Decimal(1).scaleb(-(15 - digits))
        with localcontext() as ctx:
            ctx.prec = 2000
            candidate = (exact / step).to_integral_value(ROUND_CEILING) * step - step
            while not (candidate < exact and float(candidate) < bound):
                candidate -= step
        return candidate.normalize() if candidate != 0 else Decimal(0)
    value = math.nextafter(float(bound), -math.inf)
    while not (Decimal(value) < exact and value < bound):
        value = math.nextafter(value, -math.inf)
    return Decimal(value)


def _above(bound: int | float) -> Decimal:
    return -_below(-bound)


_FRACTION_DIGITS = 20
"""Bounds on ``number`` are rounded inwards to this many decimals (keeps regexes shallow)."""


_MAX_STEP_FRACTIONS = 1000
"""Most fractional parts a fractional ``multipleOf`` allows (0.001 allows 1,000)."""


def _fractional_step(steps: list[Decimal], whole: int | None, pointer: str) -> tuple[int, int]:
    """The least common multiple of the fractional ``steps`` and the ``whole`` step (if
    any), as ``(places, units)``: the step is ``units / 10**places``.

    Raises UnsupportedSchemaError for a combined step that is neither whole nor a divisor
    of 1 with at most 1,000 fractional parts (0.01, 0.25 and 0.125 are enforced; 2.5,
    0.3 and 0.0001 are not)."""
    places = max(-int(s.as_tuple().exponent) for s in steps)
    scale = 10**places
    units = 1 if whole is None else whole * scale
    for s in steps:
        unit = int(s * scale)
        units = units * unit // math.gcd(units, unit)
    if units % scale and (scale % units or scale // units > _MAX_STEP_FRACTIONS):
        shown = ", ".join(str(s) for s in steps)
        raise UnsupportedSchemaError(
            "multipleOf",
            pointer,
            f"multipleOf {shown} (combined step {Decimal(units).scaleb(-places)}): only "
            "whole steps and steps that divide 1 into at most "
            f"{_MAX_STEP_FRACTIONS} parts (0.01, 0.25) can be enforced",
        )
    return places, units


def _fraction_multiples(
    places: int, units: int, lo: Decimal | None, hi: Decimal | None
) -> str | None:
    """Regex for the numbers that are multiples of ``units / 10**places`` (a step that
    divides 1) within ``lo..hi``: whole numbers with a fractional part whose first
    ``places`` digits are a multiple of ``units`` and whose further digits are zeros
    (``12.50`` for 0.25). No exponent; at most ``15 - places`` integer digits, so that a
    float holds the value exactly enough for Pydantic's check. ``None`` if there is none.

    The range is cut by sign and by integer part: the first and last integer parts take
    the fractions on their side of the bound, those between take every fraction."""
    step = Decimal(units).scaleb(-places)
    top = Decimal(10) ** (15 - places) - step
    low = -top if lo is None else max(lo, -top)
    high = top if hi is None else min(hi, top)
    low = (low / step).to_integral_value(ROUND_CEILING) * step
    high = (high / step).to_integral_value(ROUND_FLOOR) * step
    if low > high:
        return None
    found = []
    if high >= 0:
        found.append(_fraction_magnitudes(max(low, Decimal(0)), high, step, places))
    if low < 0:
        negative = _fraction_magnitudes(max(-high, step), -low, step, places)
        found.append(None if negative is None else "-" + group(negative))
    return alt([f for f in found if f is not None])


def _fraction_magnitudes(low: Decimal, high: Decimal, step: Decimal, places: int) -> str | None:
    """Regex for the multiples of ``step`` in ``low..high`` (both multiples, ``0 <= low``):
    integer part, then its fractions (see :func:`_fraction_multiples`)."""
    if low > high:
        return None

    def fractions(first: Decimal, last: Decimal) -> str | None:
        spelled = []
        value = first
        while value <= last:
            digits = format(value, f".{places}f").partition(".")[2].rstrip("0")
            spelled.append(rf"\.{digits}0*" if digits else r"(?:\.0+)?")
            value += step
        return alt([group(x) for x in spelled]) if spelled else None

    whole_low, whole_high = int(low), int(high)
    full = fractions(Decimal(0), 1 - step)
    if whole_low == whole_high:
        pieces = [(str(whole_low), fractions(low - whole_low, high - whole_high))]
    else:
        pieces = [(str(whole_low), fractions(low - whole_low, 1 - step))]
        middle = int_range(whole_low + 1, whole_high - 1) if whole_high - whole_low > 1 else None
        if middle is not None:
            pieces.append((group(middle), full))
        pieces.append((str(whole_high), fractions(Decimal(0), high - whole_high)))
    return alt([whole + group(frac) for whole, frac in pieces if frac is not None])


def _split_decimal(value: Decimal) -> tuple[int, str]:
    text = format(value, "f")
    whole, _, fraction = text.partition(".")
    return int(whole), fraction.rstrip("0")


def _fraction(lo: str | None, lo_strict: bool, hi: str | None, hi_strict: bool) -> str | None:
    """Regex for an optional fractional part ``(\\.[0-9]+)?`` with ``lo <= 0.F <= hi``.

    ``lo``/``hi`` are digit strings without trailing zeros (``""`` is 0), ``None`` for no
    bound; ``*_strict`` makes the bound exclusive.
    """
    bounds = _FractionBounds(lo, lo_strict, hi, hi_strict)
    tl0, th0 = lo is not None, hi is not None
    options = []
    if bounds.end_ok(0, tl0, th0):
        options.append("")
    dotted = bounds.digits(0, tl0, th0)
    if dotted is not None:
        options.append(r"\." + dotted)
    return alt(options)


class _FractionBounds:
    """The digit-by-digit walk of :func:`_fraction`: ``tl`` / ``th`` say whether the
    digits so far equal the low / high bound's (a tight bound). Methods rather than
    nested functions: nested functions that call each other are reference cycles, which
    only the garbage collector frees."""

    def __init__(self, lo: str | None, lo_strict: bool, hi: str | None, hi_strict: bool) -> None:
        self.lo, self.lo_strict, self.hi, self.hi_strict = lo, lo_strict, hi, hi_strict

    def end_ok(self, i: int, tl: bool, th: bool) -> bool:
        lo, hi = self.lo, self.hi
        if tl and lo is not None and (i < len(lo) or self.lo_strict):
            return False
        return not (th and hi is not None and i >= len(hi) and self.hi_strict)

    def digits(self, i: int, tl: bool, th: bool) -> str | None:
        """At least one more digit, from position ``i``."""
        lo, hi = self.lo, self.hi
        groups: dict[tuple[bool, bool], list[int]] = {}
        for d in range(10):
            if tl and lo is not None and d < _digit_at(lo, i):
                continue
            if th and hi is not None and d > _digit_at(hi, i):
                continue
            state = (
                tl and lo is not None and d == _digit_at(lo, i),
                th and hi is not None and d == _digit_at(hi, i),
            )
            groups.setdefault(state, []).append(d)
        alts = []
        for (ntl, nth), ds in groups.items():
            rest = self.remainder(i + 1, ntl, nth)
            if rest is None:
                continue
            cls = (
                _digit_class(str(ds[0]), str(ds[-1]))
                if ds == list(range(ds[0], ds[-1] + 1))
                else ("[" + "".join(map(str, ds)) + "]")
            )
            alts.append(cls + rest)
        return alt(alts)

    def remainder(self, i: int, tl: bool, th: bool) -> str | None:
        """Zero or more digits from position ``i``."""
        lo, hi = self.lo, self.hi
        if not tl and not th:
            return "[0-9]*"
        lo_done = not tl or lo is None or i >= len(lo)
        hi_done = not th or hi is None or i >= len(hi)
        if lo_done and hi_done:
            if tl and th:
                return "0*" if not (self.lo_strict or self.hi_strict) else None
            if tl:
                return "0*[1-9][0-9]*" if self.lo_strict else "[0-9]*"
            return None if self.hi_strict else "0*"
        more = self.digits(i, tl, th)
        options = ([""] if self.end_ok(i, tl, th) else []) + ([more] if more is not None else [])
        return alt(options)


def _digit_at(bound: str, i: int) -> int:
    return int(bound[i]) if i < len(bound) else 0


def _magnitude(a: Decimal, a_strict: bool, c: Decimal | None, c_strict: bool) -> str | None:
    """Regex for unsigned decimals ``I(.F)?`` with value in ``a..c`` (``a >= 0``)."""
    if c is not None and (c < a or (c == a and (a_strict or c_strict))):
        return None
    ia, fa = _split_decimal(a)
    ic: int | None = None
    fc = ""
    if c is not None:
        ic, fc = _split_decimal(c)
        if ia == ic:
            fraction = _fraction(fa, a_strict, fc, c_strict)
            return None if fraction is None else str(ia) + fraction
    alts = []
    low_fraction = _fraction(fa, a_strict, None, False)
    if low_fraction is not None:
        alts.append(str(ia) + low_fraction)
    middle = _nonneg_range(ia + 1, None if ic is None else ic - 1)
    if middle is not None:
        alts.append(group(middle) + r"(?:\.[0-9]+)?")
    if ic is not None:
        high_fraction = _fraction(None, False, fc, c_strict)
        if high_fraction is not None:
            alts.append(str(ic) + high_fraction)
    return alt(alts)


def number_range(lo: Decimal | None, hi: Decimal | None) -> str | None:
    """Regex for JSON numbers with ``lo <= value <= hi``.

    No exponent, except on a one-sided range that holds every non-negative number
    (``lo <= 0``, no ``hi``) or every non-positive one (``hi >= 0``, no ``lo``): there the
    exponent forms of :data:`EXPONENT_FORMS` of that sign are allowed too.
    """
    with localcontext() as context:
        context.prec = 2000
        regex = _number_range_exact(lo, hi)
    if regex is None or (lo is None) == (hi is None):
        return regex
    if hi is None and lo is not None and lo <= 0:
        return alt([regex, EXPONENT_FORMS])
    if lo is None and hi is not None and hi >= 0:
        return alt([regex, f"-(?:{EXPONENT_FORMS})"])
    return regex


def _number_range_exact(lo: Decimal | None, hi: Decimal | None) -> str | None:
    if lo is None and hi is None:
        return NUMBER
    if hi is None:
        hi = max(_NUMBER_LIMIT, lo or _NUMBER_LIMIT)
    if lo is None:
        lo = min(-_NUMBER_LIMIT, hi)
    if lo is not None and hi is not None and lo > hi:
        return None
    alts = []
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            negative = _magnitude(Decimal(0), True, None if lo is None else -lo, False)
        else:
            negative = _magnitude(-hi, False, None if lo is None else -lo, False)
        if negative is not None:
            alts.append("-" + group(negative))
    if hi is None or hi >= 0:
        positive = _magnitude(
            max(lo, Decimal(0)) if lo is not None else Decimal(0), False, hi, False
        )
        if positive is not None:
            alts.append(positive)
    return alt(alts)


# ----------------------------------------------------------------------------- the keywords


def numeric_regex(flat: list[Part], integer_only: bool, excluded: list[Any]) -> Result:
    """Regex for the numbers (``integer_only``: the integers) satisfying the bounds,
    ``multipleOf`` and integer formats of every part, minus the ``excluded`` values; a
    Never when none does.

    Raises UnsupportedSchemaError for a fractional ``multipleOf``, a ``multipleOf`` the
    bounds make inexpressible, and excluded values inside the range."""
    with localcontext() as context:
        context.prec = 2000  # exact arithmetic on any bound JSON can spell
        return _numeric(flat, integer_only, excluded)


def _numeric(flat: list[Part], integer_only: bool, excluded: list[Any]) -> Result:
    int_lo: int | None = None
    int_hi: int | None = None
    dec_lo: Decimal | None = None
    dec_hi: Decimal | None = None
    multiples: list[int] = []
    fractional: list[Decimal] = []
    not_multiples = [k for p in flat if (k := multiple_exclusion(p.schema.get("not"))) is not None]
    bound_pointer = flat[0].pointer
    multiple_pointer = flat[0].pointer
    for part in flat:
        schema = part.schema
        lower = schema.get("minimum")
        upper = schema.get("maximum")
        lower_strict = upper_strict = False
        ex_lower = schema.get("exclusiveMinimum")
        ex_upper = schema.get("exclusiveMaximum")
        bounds: list[tuple[Any, bool, bool]] = []  # (value, is_lower, strict)
        if isinstance(ex_lower, bool):
            lower_strict = ex_lower
        elif ex_lower is not None:
            bounds.append((ex_lower, True, True))
        if isinstance(ex_upper, bool):
            upper_strict = ex_upper
        elif ex_upper is not None:
            bounds.append((ex_upper, False, True))
        if lower is not None:
            bounds.append((lower, True, lower_strict))
        if upper is not None:
            bounds.append((upper, False, upper_strict))
        if integer_only and isinstance(schema.get("format"), str):
            fmt_range = _INTEGER_FORMATS.get(schema["format"])
            if fmt_range is not None:
                bounds += [(fmt_range[0], True, False), (fmt_range[1], False, False)]
        for value, is_lower, strict in bounds:
            if not is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
                raise SchemaError(f"expected a number bound at {part.pointer or '/'}")
            bound_pointer = part.pointer
            exact = Decimal(value)
            if is_lower:
                int_value = (
                    int(exact.to_integral_value(ROUND_FLOOR)) + 1
                    if strict
                    else int(exact.to_integral_value(ROUND_CEILING))
                )
                int_lo = int_value if int_lo is None else max(int_lo, int_value)
                dec = _above(value) if strict else _at_least(value)
                dec_lo = dec if dec_lo is None else max(dec_lo, dec)
            else:
                int_value = (
                    int(exact.to_integral_value(ROUND_CEILING)) - 1
                    if strict
                    else int(exact.to_integral_value(ROUND_FLOOR))
                )
                int_hi = int_value if int_hi is None else min(int_hi, int_value)
                dec = _below(value) if strict else _at_most(value)
                dec_hi = dec if dec_hi is None else min(dec_hi, dec)
        if "multipleOf" in schema:
            step = schema["multipleOf"]
            multiple_pointer = part.pointer
            if not is_number(step) or step <= 0:
                raise SchemaError(f"expected a positive multipleOf at {part.pointer or '/'}")
            if isinstance(step, float) and not step.is_integer():
                fractional.append(Decimal(repr(step)))
            else:
                multiples.append(int(step))
    # keep at most _FRACTION_DIGITS decimals (rounding inwards: a restriction, still sound)
    quantum = Decimal(1).scaleb(-_FRACTION_DIGITS)
    if dec_lo is not None:
        dec_lo = dec_lo.quantize(quantum, rounding=ROUND_CEILING)
    if dec_hi is not None:
        dec_hi = dec_hi.quantize(quantum, rounding=ROUND_FLOOR)
    step = 1
    for m in multiples:
        step = step * m // math.gcd(step, m)
    numbers = [v for v in excluded if is_number(v)]
    if not_multiples:
        if fractional or numbers:
            raise UnsupportedSchemaError(
                "not",
                bound_pointer,
                "cannot exclude multiples together with a fractional multipleOf or values",
            )
        interval = (int_lo, int_hi, dec_lo, dec_hi)
        found = _non_multiples(step, not_multiples, integer_only, interval, bound_pointer)
        if found is None:
            return Never("not", bound_pointer, "every number in the bounds is excluded")
        return found
    if fractional:
        places, units = _fractional_step(fractional, step if multiples else None, multiple_pointer)
        if units % 10**places == 0:
            multiples.append(units // 10**places)  # 0.5 and 4: a whole step after all
            step = step * multiples[-1] // math.gcd(step, multiples[-1])
        elif not integer_only:  # every integer is a multiple of a step that divides 1
            if numbers:
                raise UnsupportedSchemaError(
                    "not", bound_pointer, "cannot exclude values from multipleOf"
                )
            fractions = _fraction_multiples(places, units, dec_lo, dec_hi)
            if fractions is None:
                return Never("multipleOf", multiple_pointer, "no multiple within the bounds")
            return fractions
    if multiples or integer_only:
        regex = _int_multiple(step, int_lo, int_hi)
        if regex is False:
            raise UnsupportedSchemaError(
                "multipleOf",
                multiple_pointer,
                f"multipleOf {step} cannot be expressed together with these bounds",
            )
        if numbers and regex is not None:
            inside = sorted(
                {
                    int(v)
                    for v in numbers
                    if float(v).is_integer()
                    and (int_lo is None or v >= int_lo)
                    and (int_hi is None or v <= int_hi)
                }
            )
            if inside and step > 1:
                raise UnsupportedSchemaError(
                    "not", bound_pointer, "cannot exclude values from multipleOf"
                )
            if inside:
                pieces = []
                start = int_lo
                for v in [*inside, None]:
                    end = None if v is None else v - 1
                    if v is None:
                        end = int_hi
                    piece = int_range(start, end)
                    if piece is not None:
                        pieces.append(piece)
                    start = None if v is None else v + 1
                regex = alt(pieces)
    else:
        regex = number_range(dec_lo, dec_hi)
        if regex is not None and any(
            (dec_lo is None or Decimal(v) >= dec_lo) and (dec_hi is None or Decimal(v) <= dec_hi)
            for v in numbers
        ):
            raise UnsupportedSchemaError(
                "not", bound_pointer, "cannot exclude single values from numbers"
            )
    if regex is None:
        return Never("minimum", bound_pointer, "no number satisfies the bounds")
    assert isinstance(regex, str)
    if multiples and not integer_only:
        # a whole multiple may be written as a float (4.0, as repr(float) writes it)
        # while it has at most 15 digits, so that it parses to exactly that float
        floats = _int_multiple(step, int_lo, int_hi, 15)
        if isinstance(floats, str) and not numbers:
            regex = alt([regex, group(floats) + r"\.0+"]) or regex
    return regex
