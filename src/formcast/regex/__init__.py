"""Compile a JSON Schema into a regular expression over characters.

Second stage of the pipeline (see ``DESIGN.md``): ``schema -> regex -> fsm``. The regex
matches JSON *text*; every string it fully matches parses (``json.loads``) to a value that
validates against the schema. The converse does not hold: the regex deliberately accepts
only one spelling of each document shape (see "Restrictions" below).

Contract
--------
``schema_to_regex(schema, mode=..., whitespace=..., max_recursion_depth=...) -> str``
(:func:`formcast.regex.translator.schema_to_regex`, also ``formcast.schema_to_regex``)

* **Sound.** Whenever a keyword cannot be enforced exactly, :class:`UnsupportedSchemaError`
  is raised naming the keyword and the JSON pointer of the schema object holding it.
  Keywords are never skipped silently; only annotations (``title``, ``description``, ...)
  and unknown non-standard keywords (which JSON Schema defines as annotations) are ignored.
* **Dialect.** Literal characters escaped with ``\\``, ASCII controls as ``\\xNN``,
  character classes with ranges, ``(?:...)``, ``|``, ``? * + {m} {m,} {m,n}``. Never
  ``\\d \\w \\s \\uXXXX``, lookarounds or backreferences; non-ASCII characters appear
  literally. Plus **definitions**: the regex may open with ``(?(DEFINE)(?P<d0>...)
  (?P<d1>...)...)`` and call them with ``(?&d0)`` (PCRE's syntax; a body calls only
  earlier definitions, so nothing recurses, except with ``max_recursion_depth=None``:
  then recursive ``$ref`` targets are definitions ``(?P<rN>...)`` that call themselves,
  read exactly by :class:`formcast.automaton.PushdownAutomaton`).
  :func:`inline_definitions` turns such a regex (without recursion) into one that
  ``interegular.parse_pattern`` and Python's ``re`` read, as every regex without
  definitions already is.

Keywords
--------
Enforced exactly: ``type`` (and lists, OpenAPI ``nullable``), ``enum``/``const`` of any
JSON value (values are filtered with jsonschema against every sibling keyword, so any
keyword is exact on an enumeration), ``properties``/``required``, ``additionalProperties``
(boolean or schema), ``patternProperties``, ``propertyNames``, ``$ref`` (local pointers,
``$anchor``, ``$id``/``id`` bases, ``definitions``), ``allOf`` (merged), ``anyOf``,
``oneOf`` (branches proven disjoint, types both leave free removed from both, or made
disjoint by negating the others), ``not`` (of types, values, ``required``,
``properties``, bounds, lengths, ``pattern``, ``anyOf``/``allOf``/``oneOf``...),
``if``/``then``/``else`` (when ``if`` can be negated), ``dependentRequired``,
``dependentSchemas`` and ``dependencies``, ``items`` (schema or array form),
``prefixItems``, ``additionalItems``, ``minItems``/``maxItems``, ``contains`` (one schema,
no length bounds), ``minLength``/``maxLength`` (in characters; with a ``pattern``, fitted
to one repetition of it or of each option of an alternation, or else a ``maxLength``
crossed with the pattern's character DFA, one definition per state and length),
``pattern`` (ECMAScript, unanchored unless ``^``/``$``; several patterns and negated ones
crossed as character DFAs, :mod:`formcast.regex.string_sets`),
``minProperties``/``maxProperties`` over declared properties alone (one alternative per
allowed set of optional properties), integer ``minimum``/``maximum``/``exclusive*`` (digit-range
regexes, draft 4 booleans too), ``multipleOf`` for integers (small ranges, divisors of
1000 with sign bounds, or steps up to 100 whose automaton of remainders writes within the
pattern limits: 3, 6, 7, 12, not 13) and fractional steps that divide 1 (0.01, 0.25),
``not: {multipleOf: k}`` for whole ``k`` (remainders again), ``number`` bounds, ``format``
date, time, date-time, duration, uuid
(and uuid1/3/4/5), email, hostname, ipv4, ipv6, uri (``specification`` mode: the whole
RFC 3986 grammar, also for uri-reference, and the ASCII IRIs for iri and iri-reference),
and the OpenAPI integer formats (int32, int64, ...).

Refused with :class:`UnsupportedSchemaError`: lookarounds, backreferences, ``\\b`` and
Unicode property escapes in patterns; a pattern combined with a format, or with lengths
whose product with the pattern's automaton is too large (see ``bounded_pattern`` and
``long_pattern``), or patterns whose product is too large; a fractional ``multipleOf``
that does not divide 1 (``2.5``, ``0.3``);
``uniqueItems`` (``specification`` mode) except over at most 512 arrangements of
enumerated values; unknown formats where the document's root
declares the format-assertion vocabulary (``$vocabulary``);
``patternProperties`` overlapping declared names past the same limits;
``minContains`` > 1, ``maxContains``; ``minProperties``/``maxProperties`` that would need
counting extra properties, or more than 256 sets of optional ones; ``oneOf`` branches
that can be neither proven disjoint nor negated; ``$dynamicRef``; references outside the
document; recursion that cannot stop within ``max_recursion_depth``; regexes longer than
:data:`MAX_REGEX_LENGTH`.

Restrictions (each keeps the output valid, none loosens a constraint)
--------------------------------------------------------------------
* Object keys appear in declaration order (``properties`` order, merged parts in order,
  required-but-undeclared names last, extra properties after all declared ones).
* Compact JSON by default; ``whitespace=N`` allows at most ``N`` of ``[ \\n\\t]`` at each
  place inside arrays and objects where JSON allows whitespace (``True`` means
  :data:`WHITESPACE_DEFAULT`). No whitespace before or after the top-level value.
* Strings use one spelling per character: ``\\u`` escapes never denote surrogates; inside
  ``pattern``-constrained strings and extra keys each character has exactly one spelling.
* Extra property names escape only what JSON requires (``\\"``, ``\\\\``, controls), and
  not at all when a declared name holds such a character; unconstrained values (schema
  ``true`` / ``{}``, and the extra properties a ``specification``-mode schema tolerates)
  nest at most :data:`ANY_VALUE_DEPTH` levels in ``specification`` mode and one level in
  ``generation`` mode.
* Unbounded numbers are written as ``repr(float)`` writes them and stay finite: at most 16
  integer digits with an optional two-digit exponent, or one integer digit with a
  three-digit exponent up to ``e+307`` (:data:`NUMBER`); in ``specification`` mode
  also whole numbers of any length without fraction or exponent
  (:data:`SPECIFICATION_NUMBER`). Integers
  without bounds have any number of digits (Python and Pydantic ints are unbounded).
  Numbers with bounds have no exponent and stay within +-10**15 on an open side, except
  that a one-sided range holding all non-negative (``minimum <= 0``) or all non-positive
  (``maximum >= 0``) numbers also allows exponents of that sign (``6.02e+23``);
  exclusive bounds on ``number`` are enforced as the nearest inclusive bound that float
  parsing cannot round across (the excluded gap is below one part in 10**15 of the bound);
  bounds are rounded inwards to 20 decimals. ``multipleOf`` makes numbers whole: integers,
  and for ``type: number`` also ``4.0``-style fractions ``.0+`` on up to 15 digits; a
  fractional step that divides 1 (``0.01``, ``0.25``) keeps the digits after the point a
  multiple of it, with no exponent and at most ``15 - decimals`` integer digits.
* Values a ``not`` excludes from an unconstrained string are avoided by spelling strings
  without escapes.
* Recursive ``$ref`` is exact by default (``max_recursion_depth=None``): it becomes a
  recursive definition, read by a pushdown automaton. A recursive reference combined with
  other keywords (``allOf`` parts, siblings of ``$ref``) is then unrolled three times (no
  call stands for a conjunction), and recursion inside a name pattern
  (``propertyNames``) is refused. With an int ``max_recursion_depth`` recursion is
  unrolled that many times instead (a definition may be nested inside itself that many
  times); deeper, the reference is dropped where the schema allows (optional property,
  empty array, ``anyOf`` branch) and otherwise ``$ref`` is refused. A schema without
  recursion gets the same regex either way.
  ``Limits.any_value_depth=None`` makes unconstrained values exact at any depth too.
  With an int ``max_recursion_depth``, when the regex would exceed
  :data:`MAX_REGEX_LENGTH`, or its definitions inlined would
  exceed 2**56 characters (the automaton numbers the states of every copy), recursion is
  unrolled fewer times (with a warning).
* An ``anyOf`` branch that cannot be enforced is dropped with a warning when another branch
  can be (e.g. the ``Decimal`` string branch of Pydantic before 2.14, whose pattern has a
  lookahead).
* The negation of ``type: integer`` excludes all numbers.
* ``generation`` mode: a schema without ``type`` takes the types its keywords constrain
  (``properties`` -> object, ...); ``uniqueItems`` is not enforced (Pydantic's ``set`` and
  ``frozenset`` accept and collapse duplicates; for a Pydantic ``set`` of a small enum or
  ``Literal``, :func:`~formcast.schema.load_schema` lists the arrays without repeats, so
  it is exact there); ``binary``, ``password`` and ``path`` formats accept any string
  silently, as Pydantic does. ``specification`` mode refuses ``uniqueItems``.
* Formats: every format JSON Schema 2020-12 defines or Pydantic writes is enforced in
  ``generation`` mode, exactly or as a subset whose every value validates
  (:mod:`formcast.regex.formats`, :mod:`formcast.regex.more_formats`); an unknown
  ``format`` is refused there, unless ``"x-formcast-any-string": true`` stands beside
  it. ``specification`` mode accepts any string for an unknown format (and for the
  formats only Pydantic writes) with a :class:`~formcast.errors.UnknownFormatWarning`:
  every draft reads a format the validator does not know as an annotation (2019-09 and
  2020-12 unless the format-assertion vocabulary is declared, which is refused instead).
* Large ``enum``/``const`` lists of strings (:data:`~formcast.automaton.choices.CHOICE_MIN_WORDS`
  or more) are written as one flat alternation that the automaton builds as a trie, and
  count at a quarter of their characters against ``max_regex_length``.
* ``patternProperties``: extra names are produced from the patterns only; names that match
  no pattern are not produced.
* Pydantic models (``generation`` mode) are read through
  :func:`~formcast.schema.load_schema`, whose schema follows what Pydantic accepts and
  writes where its JSON Schema says less or otherwise: ``datetime``/``time`` with or
  without an offset (:data:`PYDANTIC_FORMS`), ``timedelta`` as Pydantic writes it
  (``-P1D``, ``PT1.5S``, weeks and days together), ``Decimal`` as a JSON number or a
  string (``"1.5"``), with ``max_digits``/``decimal_places`` as integers and strings only
  (and with bounds, integers only), ``HttpUrl`` and other URL types with their schemes,
  ``dict`` keys of type ``int``/``float``/``bool`` spelled as Pydantic parses them. URLs
  are an RFC 3986 subset: ``scheme://[user[:password]@]host[:port][/path][?query][#frag]``
  with up to five host labels, six path segments of 20 characters and 40-character
  queries and fragments, no percent-escapes.

Definitions
-----------
Each level of an unconstrained value (in ``specification`` mode) becomes a definition.
When the regex would still exceed 200,000 characters, it is built again with every
sub-schema regex of at least :data:`SHARE_MIN_LENGTH` characters as a definition too
(100 for optional members and extra properties, which are written several times).
Each definition is written once however many places use it, and the automaton copies
it virtually per call (:mod:`formcast.automaton`), so the text and the automaton grow
with the schema, not with its expansion: ten nested arrays of a ``$ref`` no longer
write it 2**10 times, and a value nesting 12 levels costs 12 short definitions where
the inlined regex would be ~4**12 times the scalar's. (Smaller regexes keep their
sub-schemas inline: the automaton walks plain states faster than called ones.)

Costs
-----
Pure string work: milliseconds for Pydantic models, up to a few seconds for the largest
real-world schemas (the first pattern using ``\\D`` or ``[^\\d]`` builds a Unicode table,
~0.1 s). A sub-schema reached through many ``$ref`` is translated once per recursion
context. The output size is linear in the schema for most keywords; ``k`` optional
properties cost ``O(k log k)`` copies of calls to the property regexes (the minimal
automaton stays linear), arrays and repeated extra properties write a call to their
item regex twice, ``anyOf``/``oneOf`` distribute the sibling keywords into each branch,
and unrolled recursion multiplies all of this by the depth.

Modules
-------
* :mod:`~formcast.regex.dialect`: the regex text (escaping, ``alt``/``repeat``...,
  definitions, the JSON token regexes, the size constants);
* :mod:`~formcast.regex.patterns`: ECMAScript patterns, their character DFAs, state
  elimination; :mod:`~formcast.regex.numbers`: integer and decimal ranges,
  ``multipleOf``; :mod:`~formcast.regex.formats`: the string formats;
* one module per keyword family: :mod:`~formcast.regex.strings`,
  :mod:`~formcast.regex.arrays`, :mod:`~formcast.regex.objects`,
  :mod:`~formcast.regex.combinators` (``anyOf``/``oneOf``/``not``/``if``, disjointness),
  :mod:`~formcast.regex.enums` (``enum``/``const``), :mod:`~formcast.regex.text_values`
  (values copied from the text), :mod:`~formcast.regex.references` (``$ref``/``allOf``,
  recursion, definitions);
* :mod:`~formcast.regex.translator`: :func:`~formcast.regex.translator.schema_to_regex`
  and the dispatch. The families reach the translator only through the protocol in
  :mod:`~formcast.regex.context`; :mod:`~formcast.regex.parts` holds the values they
  pass around.

The leaf modules (dialect, patterns, numbers, formats, parts) import no schema code:
:mod:`formcast.schema` imports them to write the patterns of the schemas it generates for
Pydantic models, and the translator imports :mod:`formcast.schema`. This package's top
level therefore re-exports the leaf names only, not ``schema_to_regex``.
"""

from __future__ import annotations

from formcast.regex import dialect
from formcast.regex.dialect import *  # noqa: F403 (the leaf names: dialect.__all__)
from formcast.regex.formats import PYDANTIC_FORMS

__all__ = ["PYDANTIC_FORMS", "dialect"]
__all__ += dialect.__all__
