"""The GBNF dialect (llama.cpp's grammars, as transformers-CFG also reads them).

Syntax read here::

    # a comment runs to the end of the line
    root  ::= greeting (", " name)+ "!"        # root is the start rule
    name  ::= [A-Z] [a-z]* | "you"
    greeting ::=
        "hello" | "hi"                         # after ::= or |, a rule may go on
    digits ::= [0-9]{1,3} ("." [0-9]{2})?       # {m} {m,} {m,n} {,n}, * + ?

* a rule is ``name ::= alternatives``; names are letters, digits, ``-`` and ``_``;
* a rule ends at a newline outside parentheses, except right after ``::=`` or ``|``
  (as in llama.cpp: a line that starts with ``|`` does not continue the rule above);
* string literals ``"..."`` and classes ``[a-z]``, ``[^"\\\\]`` take the escapes
  ``\\n \\t \\r \\\\ \\" \\[ \\] \\xNN \\uNNNN \\UNNNNNNNN``; any other escape is an error;
* ``.`` is any character (llama.cpp; transformers-CFG reads it as any byte but ``\\n``);
* llama.cpp's token references ``<[id]>`` / ``!<...>`` are refused by name.

Cost: linear in the text; nesting of parentheses is bounded by Python's recursion limit
(a few hundred levels), past which a :class:`GrammarError` says so.
"""

from __future__ import annotations

from formcast import charset
from formcast.errors import GrammarError
from formcast.grammar import nodes
from formcast.grammar.source import Source

__all__ = ["parse_gbnf"]

_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_HEX = frozenset("0123456789abcdefABCDEF")
_QUANTIFIERS: dict[str, tuple[int, int | None]] = {"*": (0, None), "+": (1, None), "?": (0, 1)}


def parse_gbnf(text: str, start: str | None = None) -> nodes.RuleSet:
    """Read GBNF ``text`` into rules; the start rule is ``start`` (default ``root``).

    Raises:
        GrammarError: a syntax error or a rule defined twice, with its line and column.
    """
    parser = _Parser(text)
    try:
        rules = parser.grammar()
    except RecursionError:
        raise GrammarError("expected fewer nested parentheses, found too many to read") from None
    return nodes.RuleSet(rules, start or "root")


def _is_name_char(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char in "-_")


class _Parser:
    def __init__(self, text: str) -> None:
        self.src = Source(text)

    # -- layout --------------------------------------------------------------------------
    def skip(self, newlines: bool) -> None:
        """Skip spaces, tabs and comments; newlines too when ``newlines``."""
        src = self.src
        while not src.at_end():
            char = src.peek()
            if char == "#":
                end = src.text.find("\n", src.pos)
                src.pos = len(src.text) if end < 0 else end
            elif char in " \t" or (newlines and char in "\r\n"):
                src.pos += 1
            else:
                return

    # -- rules ---------------------------------------------------------------------------
    def grammar(self) -> dict[str, nodes.Rule]:
        rules: dict[str, nodes.Rule] = {}
        self.skip(newlines=True)
        while not self.src.at_end():
            rule = self.rule()
            known = rules.get(rule.name)
            if known is not None:
                raise GrammarError(
                    f"expected each rule defined once, found {rule.name!r} defined again "
                    f"(first at {known.where})",
                    rule.where.line,
                    rule.where.column,
                )
            rules[rule.name] = rule
            self.skip(newlines=True)
        return rules

    def rule(self) -> nodes.Rule:
        src = self.src
        where = src.where()
        name = self.name()
        if not name:
            src.fail("a rule name followed by '::='")
        self.skip(newlines=False)
        if not src.startswith("::="):
            src.fail(f"'::=' after the rule name {name!r}")
        src.pos += 3
        self.skip(newlines=True)
        body = self.alternatives(nested=False)
        if not src.at_end() and src.peek() not in "\r\n":
            src.fail(
                f"the end of rule {name!r} (a newline), or an item of it; a rule ends at a "
                "newline outside parentheses"
            )
        return nodes.Rule(name, body, where)

    def name(self) -> str:
        src = self.src
        begin = src.pos
        while not src.at_end() and _is_name_char(src.text[src.pos]):
            src.pos += 1
        return src.text[begin : src.pos]

    # -- expressions ---------------------------------------------------------------------
    def alternatives(self, nested: bool) -> nodes.Node:
        where = self.src.where()
        options = [self.sequence(nested)]
        while self.src.peek() == "|":
            self.src.pos += 1
            self.skip(newlines=True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else nodes.Choice(where, tuple(options))

    def sequence(self, nested: bool) -> nodes.Node:
        src = self.src
        where = src.where()
        items: list[nodes.Node] = []
        while not src.at_end():
            char = src.peek()
            if char in _QUANTIFIERS or char == "{":
                if not items:
                    src.fail(f"an item before {char!r}")
                items[-1] = self.quantified(items[-1])
            else:
                item = self.item()
                if item is None:
                    break
                items.append(item)
            self.skip(newlines=nested)
        if len(items) == 1:
            return items[0]
        return nodes.Seq(where, tuple(items))

    def item(self) -> nodes.Node | None:
        """One item (literal, class, ``.``, reference, group), or None at a non-item."""
        src = self.src
        char = src.peek()
        where = src.where()
        if char == '"':
            return self.literal()
        if char == "[":
            return self.char_class()
        if char == ".":
            src.pos += 1
            return nodes.CharClass(where, charset.ANY)
        if char == "(":
            return self.group()
        if char == "<" or src.startswith("!<"):
            src.refuse(
                "a token reference (llama.cpp's <[id]> or !<...>)",
                "formcast constrains text, not token ids",
            )
        if _is_name_char(char):
            return nodes.RuleRef(where, self.name())
        return None

    def group(self) -> nodes.Node:
        src = self.src
        opened = src.pos
        src.pos += 1
        self.skip(newlines=True)
        inner = self.alternatives(nested=True)
        if src.peek() != ")":
            src.fail(f"')' closing the group opened at {src.where(opened)}, or an item")
        src.pos += 1
        return inner

    def quantified(self, item: nodes.Node) -> nodes.Node:
        src = self.src
        char = src.peek()
        if char in _QUANTIFIERS:
            src.pos += 1
            return nodes.Repeat(item.where, item, *_QUANTIFIERS[char])
        opened = src.pos
        src.pos += 1
        self.skip(newlines=False)
        low_text = self.digits()
        self.skip(newlines=False)
        high: int | None
        if src.peek() == ",":
            src.pos += 1
            self.skip(newlines=False)
            high_text = self.digits()
            high = int(high_text) if high_text else None
            if not low_text and high is None:
                src.fail("a count in '{m,n}'", opened)
        else:
            if not low_text:
                src.fail("a count in '{m}', '{m,}' or '{m,n}'", opened)
            high = int(low_text)
        self.skip(newlines=False)
        if src.peek() != "}":
            src.fail("'}' closing the count")
        src.pos += 1
        low = int(low_text) if low_text else 0
        if high is not None and high < low:
            src.fail(f"a count range with m <= n, found {{{low},{high}}}", opened, found="")
        return nodes.Repeat(item.where, item, low, high)

    def digits(self) -> str:
        src = self.src
        begin = src.pos
        while not src.at_end() and src.peek().isdigit() and src.peek().isascii():
            src.pos += 1
        return src.text[begin : src.pos]

    # -- terminals -----------------------------------------------------------------------
    def literal(self) -> nodes.Literal:
        src = self.src
        where = src.where()
        opened = src.pos
        src.pos += 1
        chars = []
        while src.peek() != '"':
            if src.at_end():
                src.fail(f"'\"' closing the string opened at {src.where(opened)}")
            chars.append(self.char())
        src.pos += 1
        return nodes.Literal(where, "".join(chars))

    def char_class(self) -> nodes.CharClass:
        src = self.src
        where = src.where()
        opened = src.pos
        src.pos += 1
        negated = src.peek() == "^"
        if negated:
            src.pos += 1
        ranges = []
        while src.peek() != "]":
            if src.at_end():
                src.fail(f"']' closing the class opened at {src.where(opened)}")
            char_at = src.pos
            low = ord(self.char())
            high = low
            if src.peek() == "-" and src.peek(2)[1:] not in ("", "]"):
                src.pos += 1
                high = ord(self.char())
                if high < low:
                    src.fail(
                        f"a range whose start is not after its end, found "
                        f"{chr(low)!r}-{chr(high)!r}",
                        char_at,
                        found="",
                    )
            ranges.append((low, high))
        src.pos += 1
        normalized = charset.normalize(ranges)
        return nodes.CharClass(where, charset.complement(normalized) if negated else normalized)

    def char(self) -> str:
        """One character of a literal or class, escapes decoded."""
        src = self.src
        char = src.peek()
        if char != "\\":
            src.pos += 1
            return char
        escape_at = src.pos
        kind = src.peek(2)[1:]
        if kind in _SIMPLE_ESCAPES:
            src.pos += 2
            return _SIMPLE_ESCAPES[kind]
        width = _HEX_ESCAPES.get(kind)
        if width is None:
            src.fail(
                'an escape among \\n \\t \\r \\\\ \\" \\[ \\] \\xNN \\uNNNN \\UNNNNNNNN',
                escape_at,
            )
        digits = src.text[escape_at + 2 : escape_at + 2 + width]
        if len(digits) < width or not set(digits) <= _HEX:
            src.fail(f"\\{kind} followed by {width} hexadecimal digits", escape_at)
        code = int(digits, 16)
        if code > charset.MAX_CODE_POINT or 0xD800 <= code <= 0xDFFF:
            src.fail("a Unicode scalar value (not a surrogate, at most U+10FFFF)", escape_at)
        src.pos = escape_at + 2 + width
        return chr(code)
