"""The Lark dialect (as Lark, outlines and llguidance read it), into the one
representation of :mod:`formcast.grammar.nodes`.

The language a grammar denotes is the one Lark's Earley parser accepts with
``lexer="dynamic_complete"``: a terminal matches any string of its language (not only
the longest), and ``%ignore`` terminals may stand before, between and after the
terminals of the rules. Supported:

* rules ``name: ...`` (lowercase, ``?name`` and ``!name`` modifiers, ``_name``) and
  terminals ``NAME: ...`` (uppercase; they may use other terminals, not rules);
  priorities ``name.2:`` (they choose between parses, the language is the same);
  alternatives ``|``, also at the start of a continuation line; aliases ``-> name``;
* ``"literal"``, ``"literal"i`` (case-insensitive, as Python's ``re`` folds case),
  ``"a".."z"`` ranges, ``/regex/flags`` with the flags ``s`` (dot matches newline),
  ``m`` and ``u`` (no effect on formcast's dialect); the regex must be in formcast's
  dialect;
* ``( )`` groups, ``[x]`` and ``x?`` optional, ``x*``, ``x+``, ``x ~ n``, ``x ~ n..m``;
* ``%import common.NAME``, ``%import common.NAME -> ALIAS`` and
  ``%import common (A, B)`` for the terminals of :mod:`formcast.grammar.lark_common`;
* ``%ignore`` (terminals, literals or regexes), ``%override`` and ``%extend`` of a
  rule or terminal defined above;
* ``%json {...}``: a JSON Schema inline, standing for the compact JSON it validates.

Refused by name, with line and column: templates (``name{x}``), ``%declare``, imports
from other modules or of names ``common`` lacks, the regex flags ``i``, ``x``, ``l``,
and regexes outside formcast's dialect (lookarounds, backreferences, anchors).

Cost: linear in the text (a regex terminal is compiled once to check it).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field

from formcast import charset
from formcast.errors import GrammarError
from formcast.grammar import nodes
from formcast.grammar.embed import JsonSchemaText
from formcast.grammar.lark_common import COMMON_TERMINALS, COMMON_TEXT
from formcast.grammar.lark_terminals import check_regex, folded, with_ignored
from formcast.grammar.source import Source

__all__ = ["parse_lark"]

_RULE = re.compile(r"[_?!]*[a-z][_a-z0-9]*")
_TERMINAL = re.compile(r"_?[A-Z][_A-Z0-9]*")
_NAME = re.compile(r"_?[a-zA-Z][_a-zA-Z0-9]*")
_NUMBER = re.compile(r"-?[0-9]+")
_COUNT = re.compile(r"[0-9]+")
_KEYWORD = re.compile(r"%([a-z]+)")
_IMPORT_PATH = re.compile(r"[\w.]+")
_INLINE_FLAGS = re.compile(r"\(\?([a-zA-Z]+)\)")
_REGEX = re.compile(r"/((?:\\.|[^/\\\n])+)/([a-z]*)")  # Lark's /regex/flags, on one line
_OPERATORS: dict[str, tuple[int, int | None]] = {"*": (0, None), "+": (1, None), "?": (0, 1)}
_PYTHON_ESCAPES = {
    "\\": "\\",
    '"': '"',
    "'": "'",
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "0": "\0",
}
_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}
_EXACT_FLAGS = {"s": "s", "m": "", "u": ""}  # flag -> scoped flag it becomes
_REFUSED_FLAGS = {
    "i": 'a case-insensitive regex (write the cases in a class, or use "..."i literals)',
    "x": "a verbose regex",
    "l": "a locale-dependent regex",
}


def parse_lark(text: str, start: str | None = None) -> nodes.RuleSet:
    """Read Lark ``text`` into rules; the start rule is ``start`` (default ``start``).

    Raises:
        GrammarError: a syntax error, a refused feature, a terminal using a rule, a name
            defined twice, with its line and column.
    """
    parser = _Parser(Source(text))
    try:
        parser.grammar()
    except RecursionError:
        raise GrammarError("expected fewer nested groups, found too many to read") from None
    return parser.result(start or "start")


@dataclass
class _Parser:
    src: Source
    rules: dict[str, nodes.Rule] = field(default_factory=dict)
    ignored: list[nodes.Node] = field(default_factory=list)
    in_terminal: bool = False  # inside a terminal's body or %ignore: no rules allowed
    depth: int = 0  # open groups: inside one, newlines are layout

    # -- layout --------------------------------------------------------------------------
    def skip(self, newlines: bool = False) -> None:
        src = self.src
        while not src.at_end():
            char = src.peek()
            if char == "#" or src.startswith("//"):
                end = src.text.find("\n", src.pos)
                src.pos = len(src.text) if end < 0 else end
            elif char in " \t\f" or (newlines and char in "\r\n"):
                src.pos += 1
            elif char == "\\" and src.peek(2) in ("\\\n", "\\\r"):  # an escaped line end
                src.pos += 2
            else:
                return

    def continues_with_bar(self) -> bool:
        """Whether the next non-blank line starts with ``|`` (then skip to it)."""
        saved = self.src.pos
        self.skip(newlines=True)
        if self.src.peek() == "|":
            return True
        self.src.pos = saved
        return False

    def take(self, pattern: re.Pattern[str], what: str) -> str:
        """The text ``pattern`` matches here, consumed; fail saying ``what`` was expected."""
        match = pattern.match(self.src.text, self.src.pos)
        if match is None:
            self.src.fail(what)
        self.src.pos = match.end()
        return match.group()

    def expect(self, token: str, what: str) -> None:
        if not self.src.startswith(token):
            self.src.fail(what)
        self.src.pos += len(token)

    # -- items ---------------------------------------------------------------------------
    def grammar(self) -> None:
        src = self.src
        self.skip(newlines=True)
        while not src.at_end():
            if src.peek() == "%":
                self.statement()
            else:
                self.definition(mode="define")
            self.skip()
            if not src.at_end() and src.peek() not in "\r\n":
                src.fail("the end of the line after a definition or statement")
            self.skip(newlines=True)

    def definition(self, mode: str) -> None:
        """``name: expansions`` (``mode``: define, override or extend)."""
        src = self.src
        begin = src.pos
        where = src.where()
        match = _RULE.match(src.text, src.pos) or _TERMINAL.match(src.text, src.pos)
        if match is None:
            src.fail("a rule (lowercase) or terminal (UPPERCASE) name, or a %statement")
        src.pos = match.end()
        name = match.group().lstrip("?!")
        self.skip()
        if src.peek() == "{":
            src.refuse(f"the template {name!r}", "templates are not expanded by formcast", begin)
        if src.peek() == ".":
            src.pos += 1
            self.take(_NUMBER, "a priority number after '.'")
            self.skip()
        self.expect(":", f"':' after the name {name!r}")
        self.in_terminal = name.lstrip("_")[:1].isupper()
        self.skip()
        body = self.expansions()
        self.in_terminal = False
        self.store(nodes.Rule(name, body, where), mode)

    def store(self, rule: nodes.Rule, mode: str) -> None:
        known = self.rules.get(rule.name)
        where = rule.where
        if mode == "define" and known is not None:
            raise GrammarError(
                f"expected each rule and terminal defined once, found {rule.name!r} defined "
                f"again (first at {known.where}); use %override to replace it",
                where.line,
                where.column,
            )
        if mode != "define" and known is None:
            raise GrammarError(
                f"expected {rule.name!r} defined above for %{mode}, found no definition",
                where.line,
                where.column,
            )
        if mode == "extend" and known is not None:
            body = known.body
            options = body.alternatives if isinstance(body, nodes.Choice) else (body,)
            added = rule.body.alternatives if isinstance(rule.body, nodes.Choice) else (rule.body,)
            rule = nodes.Rule(rule.name, nodes.Choice(body.where, (*options, *added)), known.where)
        self.rules[rule.name] = rule

    def statement(self) -> None:
        src = self.src
        begin = src.pos
        match = _KEYWORD.match(src.text, src.pos)
        keyword = match.group(1) if match else ""
        src.pos = match.end() if match else src.pos + 1
        self.skip()
        if keyword == "ignore":
            self.in_terminal = True
            self.ignored.append(self.expansions())
            self.in_terminal = False
        elif keyword == "import":
            self.import_common(begin)
        elif keyword in ("override", "extend"):
            self.definition(mode=keyword)
        elif keyword == "declare":
            src.refuse("%declare", "declared terminals have no definition to enforce", begin)
        else:
            src.fail("%ignore, %import, %override, %extend or %declare", begin)

    def import_common(self, begin: int) -> None:
        src = self.src
        match = _IMPORT_PATH.match(src.text, src.pos)
        path = match.group() if match else ""
        src.pos = match.end() if match else src.pos
        module, _, name = path.rpartition(".") if "." in path else (path, "", "")
        if module != "common":
            src.refuse(
                f"%import {path}",
                "only the terminals of Lark's common.lark are bundled",
                begin,
            )
        self.skip()
        if not name:
            self.expect("(", "'(' and names, or '.NAME', after %import common")
            names = self.name_list()
            for each in names:
                self.add_common(each, each, begin)
            return
        alias = name
        if src.startswith("->"):
            src.pos += 2
            self.skip()
            found = _NAME.match(src.text, src.pos)
            if found is None:
                src.fail("a name after '->'")
            alias = found.group()
            src.pos = found.end()
        self.add_common(name, alias, begin)

    def name_list(self) -> list[str]:
        src = self.src
        names = []
        while True:
            self.skip(newlines=True)
            found = _NAME.match(src.text, src.pos)
            if found is None:
                src.fail("a name in the import list")
            names.append(found.group())
            src.pos = found.end()
            self.skip(newlines=True)
            if src.peek() == ")":
                src.pos += 1
                return names
            self.expect(",", "',' or ')' in the import list")

    def add_common(self, name: str, alias: str, begin: int) -> None:
        if name not in COMMON_TERMINALS:
            known = ", ".join(sorted(COMMON_TERMINALS))
            self.src.refuse(f"%import common.{name}", f"the bundled terminals are {known}", begin)
        where = self.src.where(begin)
        for rule in _common_rules(name):
            renamed = alias if rule.name == name else rule.name
            if renamed in self.rules and self.rules[renamed] != rule:
                raise GrammarError(
                    f"expected {renamed!r} defined once, found it both defined and imported",
                    where.line,
                    where.column,
                )
            self.rules[renamed] = nodes.Rule(renamed, rule.body, where)

    # -- expressions ---------------------------------------------------------------------
    def expansions(self) -> nodes.Node:
        src = self.src
        where = src.where()
        options = [self.alias()]
        while True:
            self.skip()
            if src.peek() == "|" or self.continues_with_bar():
                src.pos += 1
                self.skip(newlines=True)
                options.append(self.alias())
            else:
                break
        return options[0] if len(options) == 1 else nodes.Choice(where, tuple(options))

    def alias(self) -> nodes.Node:
        node = self.expansion()
        self.skip()
        if self.src.startswith("->"):
            self.src.pos += 2
            self.skip()
            self.take(_NAME, "an alias name after '->'")
        return node

    def expansion(self) -> nodes.Node:
        where = self.src.where()
        items: list[nodes.Node] = []
        while True:
            self.skip(newlines=self.depth > 0)
            item = self.expr()
            if item is None:
                break
            items.append(item)
        return items[0] if len(items) == 1 else nodes.Seq(where, tuple(items))

    def expr(self) -> nodes.Node | None:
        atom = self.atom()
        if atom is None:
            return None
        src = self.src
        while True:
            self.skip()
            char = src.peek()
            if char in _OPERATORS and not (char == "?" and src.peek(2)[1:].islower()):
                src.pos += 1
                atom = nodes.Repeat(atom.where, atom, *_OPERATORS[char])
            elif char == "~":
                atom = self.counted(atom)
            else:
                return atom

    def counted(self, atom: nodes.Node) -> nodes.Node:
        src = self.src
        src.pos += 1
        self.skip()
        low = high = int(self.take(_COUNT, "a count after '~'"))
        self.skip()
        if src.startswith(".."):
            src.pos += 2
            self.skip()
            high = int(self.take(_COUNT, "a count after '..'"))
            if high < low:
                src.fail(f"a range n..m with n <= m, found {low}..{high}", found="")
        return nodes.Repeat(atom.where, atom, low, high)

    def atom(self) -> nodes.Node | None:
        src = self.src
        if src.at_end():
            return None
        char = src.peek()
        where = src.where()
        if char in "([":
            return self.group(char)
        if char == '"':
            return self.literal()
        if char == "/" and not src.startswith("//"):
            return self.regex()
        if src.startswith("%json"):
            return self.inline_json()
        match = _NAME.match(src.text, src.pos)
        if match is None:
            return None
        name = match.group()
        src.pos = match.end()
        if src.peek() == "{":
            src.refuse(
                f"the template use {name!r}",
                "templates are not expanded by formcast",
                match.start(),
            )
        if self.in_terminal and not name.lstrip("_")[:1].isupper():
            src.fail("terminals only inside a terminal (UPPERCASE names)", src.pos - len(name))
        return nodes.RuleRef(where, name)

    def group(self, opening: str) -> nodes.Node:
        src = self.src
        opened = src.pos
        closing = ")" if opening == "(" else "]"
        src.pos += 1
        self.depth += 1
        self.skip(newlines=True)
        inner = self.expansions()
        self.skip(newlines=True)
        self.depth -= 1
        if src.peek() != closing:
            src.fail(f"{closing!r} closing the group opened at {src.where(opened)}")
        src.pos += 1
        return inner if opening == "(" else nodes.Repeat(inner.where, inner, 0, 1)

    def literal(self) -> nodes.Node:
        src = self.src
        where = src.where()
        first = self.string()
        insensitive = src.peek() == "i" and not _NAME.match(src.text, src.pos + 1)
        if insensitive:
            src.pos += 1
        self.skip()
        if not src.startswith(".."):
            return folded(where, first) if insensitive else nodes.Literal(where, first)
        src.pos += 2
        self.skip()
        if src.peek() != '"':
            src.fail("a string after '..'")
        last = self.string()
        if len(first) != 1 or len(last) != 1 or ord(first) > ord(last):
            src.fail(
                f"a range of two single characters in order, found {first!r}..{last!r}",
                found="",
            )
        return nodes.CharClass(where, ((ord(first), ord(last)),))

    def string(self) -> str:
        src = self.src
        opened = src.pos
        src.pos += 1
        chars: list[str] = []
        while src.peek() != '"':
            if src.at_end() or src.peek() == "\n":
                src.fail(f"'\"' closing the string opened at {src.where(opened)}")
            chars.append(self.char())
        src.pos += 1
        return "".join(chars)

    def char(self) -> str:
        """One character of a string literal, Python's escapes decoded (an unknown
        escape keeps its backslash, as in Python)."""
        src = self.src
        char = src.peek()
        src.pos += 1
        if char != "\\":
            return char
        kind = src.peek()
        if kind in _PYTHON_ESCAPES:
            src.pos += 1
            return _PYTHON_ESCAPES[kind]
        width = _HEX_WIDTH.get(kind)
        if width is None:
            return "\\"
        digits = src.text[src.pos + 1 : src.pos + 1 + width]
        if len(digits) < width or not re.fullmatch(r"[0-9a-fA-F]+", digits):
            src.fail(f"\\{kind} followed by {width} hexadecimal digits", src.pos - 1)
        code = int(digits, 16)
        if code > charset.MAX_CODE_POINT or 0xD800 <= code <= 0xDFFF:
            src.fail("a Unicode scalar value (not a surrogate, at most U+10FFFF)", src.pos - 1)
        src.pos += 1 + width
        return chr(code)

    def regex(self) -> nodes.Node:
        src = self.src
        where = src.where()
        begin = src.pos
        match = _REGEX.match(src.text, src.pos)
        if match is None:
            src.fail("a regex /.../ closed on the same line")
        src.pos = match.end()
        pattern, flags = match.groups()
        inline = _INLINE_FLAGS.match(pattern)  # "(?s)..." at the start: flags like /.../s
        if inline:
            flags += inline.group(1)
            pattern = pattern[inline.end() :]
        scoped = ""
        for flag in dict.fromkeys(flags):
            if flag in _REFUSED_FLAGS:
                src.refuse(f"the regex flag {flag!r}", _REFUSED_FLAGS[flag], begin)
            if flag not in _EXACT_FLAGS:
                src.fail("regex flags among s, m, u", begin)
            scoped += _EXACT_FLAGS[flag]
        text = f"(?{scoped}:{pattern})" if scoped else pattern
        check_regex(src, text, begin)
        return nodes.RegexTerminal(where, text)

    def inline_json(self) -> nodes.Node:
        src = self.src
        where = src.where()
        begin = src.pos
        src.pos += len("%json")
        self.skip()
        try:
            schema, end = json.JSONDecoder().raw_decode(src.text, src.pos)
        except json.JSONDecodeError as error:
            src.fail(f"a JSON Schema object after %json ({error.msg})", error.pos)
        if not isinstance(schema, dict):
            src.fail("a JSON Schema object after %json", begin)
        src.pos = end
        text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
        return nodes.Embedded(where, "%json", JsonSchemaText(text))

    # -- result --------------------------------------------------------------------------
    def result(self, start: str) -> nodes.RuleSet:
        for rule in self.rules.values():
            if _TERMINAL.fullmatch(rule.name):
                for ref in nodes.references(rule.body):
                    if not _TERMINAL.fullmatch(ref.name):
                        raise GrammarError(
                            f"expected terminals only inside terminal {rule.name!r}, found "
                            f"rule {ref.name!r}",
                            ref.where.line,
                            ref.where.column,
                        )
        if not self.ignored:
            return nodes.RuleSet(self.rules, start)
        return with_ignored(self.rules, self.ignored, start)


@functools.cache
def _common_parsed() -> dict[str, nodes.Rule]:
    parser = _Parser(Source(COMMON_TEXT))
    parser.grammar()
    return parser.rules


def _common_rules(name: str) -> list[nodes.Rule]:
    """Terminal ``name`` of common.lark and the terminals it uses."""
    rules = _common_parsed()
    needed = [name]
    found: list[nodes.Rule] = []
    while needed:
        rule = rules[needed.pop()]
        if rule not in found:
            found.append(rule)
            needed.extend(ref.name for ref in nodes.references(rule.body))
    return found
