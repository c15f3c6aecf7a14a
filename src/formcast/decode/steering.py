"""What the decoding loop knows about the text a row emitted: the loop guard's counts and
the field-level validation of a Pydantic output. Pure Python (no torch).

* :class:`RowText` reads a row's bytes as JSON as they come (:mod:`formcast.decode.jsonscan`)
  and keeps, for the JSON string being written, the counts the loop guard needs
  (:class:`RepeatCounter`).
* :class:`FieldSteer` decides, when a top-level value closes, whether it is rejected,
  where the row must roll back to, and which first tokens to ban when it writes that
  value again.
* :func:`field_checker` validates one field of a Pydantic model in isolation with the
  model's own validators; :func:`feedback_message` words a rejection for the next prompt.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

import pydantic

from formcast.decode.jsonscan import JsonScanner, Member

__all__ = ["FieldSteer", "RepeatCounter", "RowText", "feedback_message", "field_checker"]

#: A field check: (key as written in the JSON, value's JSON text) -> accepted.
FieldCheck = Callable[[str, str], bool]


class RepeatCounter:
    """Occurrences of each ``ngram``-token chunk in one JSON string, without overlap.

    :meth:`bans` lists the tokens that, appended, would make the string's last ``ngram``
    tokens one more occurrence of a chunk already seen ``max_repeats`` times.
    """

    __slots__ = ("_counts", "_tokens", "max_repeats", "ngram")

    def __init__(self, ngram: int, max_repeats: int) -> None:
        self.ngram = ngram
        self.max_repeats = max_repeats
        self._tokens: list[int] = []
        # (the chunk's first ngram - 1 tokens) -> its last token -> [count, end of last]
        self._counts: dict[tuple[int, ...], dict[int, list[int]]] = {}

    def push(self, token: int) -> None:
        tokens = self._tokens
        tokens.append(token)
        start = len(tokens) - self.ngram
        if start < 0:
            return
        follow = self._counts.setdefault(tuple(tokens[start:-1]), {})
        entry = follow.setdefault(token, [0, 0])
        if start >= entry[1]:  # does not overlap the last counted occurrence
            entry[0] += 1
            entry[1] = start + self.ngram

    def bans(self) -> list[int]:
        start = len(self._tokens) - (self.ngram - 1)
        if start < 0:
            return []
        follow = self._counts.get(tuple(self._tokens[start:]))
        if not follow:
            return []
        limit = self.max_repeats
        return [t for t, (count, end) in follow.items() if count >= limit and start >= end]


class RowText:
    """A row's emitted bytes, read as JSON; the loop guard's counts for the open string.

    Args:
        token_bytes: the vocabulary's bytes of each token id.
        guard: ``(ngram, max_repeats)`` of the loop guard, or None when it is off.
    """

    def __init__(self, token_bytes: Sequence[bytes], guard: tuple[int, int] | None) -> None:
        self._token_bytes = token_bytes
        self._guard = guard
        self.buffer = bytearray()
        self.ends: list[int] = []  # byte offset after each token
        self.scanner = JsonScanner()
        self._repeats: RepeatCounter | None = None

    def fresh(self) -> RowText:
        """An empty reader with the same settings."""
        return RowText(self._token_bytes, self._guard)

    def push(self, token: int) -> list[Member]:
        """Read one more emitted token; return the top-level members it closed."""
        data = self._token_bytes[token]
        before = self.scanner.offset
        closed = self.scanner.feed(data)
        self.buffer += data
        self.ends.append(len(self.buffer))
        if self._guard is not None:
            self._count(token, before)
        return closed

    def _count(self, token: int, before: int) -> None:
        scanner = self.scanner
        if not scanner.in_string:
            self._repeats = None
        elif scanner.string_start >= before or self._repeats is None:
            assert self._guard is not None
            self._repeats = RepeatCounter(*self._guard)  # the string opened in this token
        else:
            self._repeats.push(token)

    def loop_bans(self) -> list[int]:
        """Tokens the loop guard bans at this point (none outside strings)."""
        if self._repeats is None or not self.scanner.in_string:
            return []
        return self._repeats.bans()

    def token_at(self, offset: int) -> int:
        """Index of the emitted token that holds byte ``offset``."""
        return bisect_right(self.ends, offset)

    def text(self, start: int, end: int) -> str:
        return self.buffer[start:end].decode("utf-8", errors="replace")


class FieldSteer:
    """Field-level validation of one row during one generation.

    When a top-level value closes, :meth:`judge` checks it; a rejected value (or one
    equal to a value rejected before) asks for a rollback to the token holding the
    value's first byte, at most ``max_retries`` times per field. While the row writes
    that value again and no byte of it tells it apart yet, :meth:`bans` lists the first
    tokens of every value of that field rejected so far.
    """

    def __init__(self, check: FieldCheck, max_retries: int) -> None:
        self._check = check
        self.max_retries = max_retries
        self.rollbacks = 0
        self._retries: dict[str, int] = {}
        self._rejected: dict[str, set[str]] = {}
        self._first_tokens: dict[str, set[int]] = {}
        self._rewriting: str | None = None  # key whose value is being written again

    def judge(self, member: Member, text: RowText) -> int | None:
        """The number of tokens to keep when ``member`` is rejected and may be written
        again; None when it is accepted (or its retries are spent)."""
        key = _key_of(text.text(member.key_start, member.key_end))
        if key is None:
            return None
        if key == self._rewriting:
            self._rewriting = None
        value = text.text(member.value_start, member.value_end).strip()
        rejected = self._rejected.setdefault(key, set())
        if value not in rejected and self._check(key, value):
            return None
        rejected.add(value)
        if self._retries.get(key, 0) >= self.max_retries:
            return None
        return text.token_at(member.value_start)

    def rolled_back(self, member: Member, text: RowText, token_ids: Sequence[int]) -> None:
        """Record that the row rolls back to write ``member``'s value again (call before
        the row forgets the rejected tokens)."""
        key = _key_of(text.text(member.key_start, member.key_end))
        assert key is not None
        self._retries[key] = self._retries.get(key, 0) + 1
        self._first_tokens.setdefault(key, set()).add(
            token_ids[text.token_at(member.content_start)]
        )
        self.rollbacks += 1
        self._rewriting = key

    def bans(self, text: RowText) -> list[int]:
        """First tokens of the rejected values of the field being written again, until a
        byte of its new value tells it apart."""
        key = self._rewriting
        if key is None:
            return []
        scanner = text.scanner
        span = scanner.current_key()
        if span is not None and scanner.value_has_content() and _key_of(text.text(*span)) == key:
            self._rewriting = None
            return []
        return sorted(self._first_tokens.get(key, ()))


def _key_of(quoted: str) -> str | None:
    try:
        key = json.loads(quoted)
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def field_checker(model: type[pydantic.BaseModel]) -> FieldCheck:
    """A check of one top-level field of ``model`` at a time, for one output.

    Each accepted value is kept on a partial instance (``model_construct``), so later
    field validators see earlier fields in ``info.data`` as in a full validation. A value
    is rejected only when pydantic reports errors located at that field;
    ``model_validator``\\ s, which also run on assignment but cannot judge a partial
    object, never reject here (their errors have no field location) and are left to the
    validation of the whole output. Validation is lax (``strict=False``), so a strict
    model is never rejected here for a value its JSON validation accepts.
    """
    names = _field_names(model)
    partial = model.model_construct()
    validator = model.__pydantic_validator__

    def check(key: str, value_json: str) -> bool:
        name = names.get(key)
        if name is None:
            return True
        try:
            value = json.loads(value_json)
            validator.validate_assignment(partial, name, value, strict=False)
        except pydantic.ValidationError as e:
            return not all(error["loc"][:1] == (name,) for error in e.errors())
        except Exception:  # a validator that cannot judge a partial object
            return True
        return True

    return check


def _field_names(model: type[pydantic.BaseModel]) -> dict[str, str]:
    """JSON key -> attribute name, for the keys a generated object uses."""
    names: dict[str, str] = {}
    for name, info in model.model_fields.items():
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        names[alias or name] = name
    return names


def feedback_message(error: BaseException) -> str:
    """The retry note added to the prompt after an output was rejected."""
    cause = getattr(error, "validation_error", error)
    if isinstance(cause, pydantic.ValidationError):
        problems = "; ".join(_describe(e) for e in cause.errors())
    else:
        problems = str(cause)
    return f"A previous answer was rejected: {problems}. Answer again."


def _describe(error: Any) -> str:
    where = ".".join(str(part) for part in error.get("loc", ())) or "the answer"
    text = f"{where}: {error.get('msg', 'invalid')}"
    found = error.get("input")
    if isinstance(found, (str, int, float, bool)):
        shown = repr(found)
        text += f" (found {shown[:80]})"
    return text
