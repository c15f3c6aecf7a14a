"""One call's texts through a :class:`~formcast.decode.batching.BatchDecoder`.

:class:`Scheduler` reads a call's texts one per free row of the decoder, prepares each
(its prompt, its cursor), gives it its own field steering and sampling seed, reads each
generation as the output type, puts a text whose output the validators rejected back in
the queue with the feedback in its prompt (ahead of the texts not read yet), and yields
every text's :class:`~formcast.extraction.results.ExtractionResult` in input order or as it ends.

* ``batching="continuous"``: a text joins as soon as a row is free;
  ``"static"``: the decoder is filled only when every row has ended.
* ``order="input"``: a result that ends before an earlier text's waits for it;
  ``"completion"``: each result as it ends (``result.index`` names its text).
* A text that cannot run (empty, too long for the context, no value for a ``FromText``
  field, a budget too small for its values) becomes its own error result, or raises when
  the scheduler serves a single call that raises item errors (``run``/``extract``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from formcast.automaton.bound import BoundAutomaton
from formcast.constraint import OutputSpec
from formcast.cursor import Cursor
from formcast.decode.batching import BatchDecoder, Finished, RowRequest
from formcast.decode.kvcache import SharedPrefix
from formcast.errors import FormcastError, InvalidOptionError
from formcast.extraction.attempts import (
    Outcome,
    Request,
    generated_tokens,
    next_attempt,
    outcome,
    steering_for,
    to_result,
)
from formcast.extraction.options import Batching, Order, Plan
from formcast.extraction.partial import read_prefix
from formcast.extraction.provenance import Span, text_spans
from formcast.extraction.results import ExtractionResult
from formcast.index import TokenIndex

__all__ = ["Ordering", "Prepare", "Progress", "Scheduler"]

#: Prepares one attempt at a text: ``(position, text, feedback or None) -> Request``.
Prepare = Callable[[int, str, str | None], Request]


@dataclass
class _Item:
    """A text in the decoder: its current attempt's request and the attempts so far."""

    text: str
    request: Request
    owner: Scheduler
    history: list[Outcome] = field(default_factory=list)
    streamed: Any = None  # the values of the last progress, when streaming
    streamed_tokens: int = 0  # the output tokens at the last progress


@dataclass(frozen=True)
class Progress:
    """A streamed row's output so far: its text's position, the values the JSON prefix
    holds (:func:`~formcast.extraction.partial.read_prefix`) and the bytes."""

    position: int
    data: Any
    raw: bytes
    spans: dict[str, tuple[Span, ...]] = field(default_factory=dict)


def _shape(data: Any) -> Any:
    """``data`` with every string leaf the same: what changes when a value closes, a
    member or item opens, or a value is taken back, but not while a string grows."""
    if isinstance(data, dict):
        return {k: _shape(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_shape(v) for v in data]
    return "" if isinstance(data, str) else data


class Ordering:
    """Results put in their call's order: ``"input"`` holds a result back until those of
    the texts before it have come; ``"completion"`` passes each on at once."""

    def __init__(self, order: Order) -> None:
        self.order = order
        self._waiting: dict[int, ExtractionResult[Any]] = {}  # ended before an earlier text
        self._next = 0

    def ready(self, results: Iterable[ExtractionResult[Any]]) -> Iterator[ExtractionResult[Any]]:
        """The results that may be given now, ``results`` among them."""
        if self.order == "completion":
            yield from results
            return
        for result in results:
            self._waiting[result.index] = result
        while self._next in self._waiting:
            yield self._waiting.pop(self._next)
            self._next += 1


def _spans(item: _Item, raw: str) -> dict[str, tuple[Span, ...]]:
    """The spans in the item's text of the ``FromText`` values of ``raw`` (an output, or
    a prefix of one: its closed values); empty without ``FromText``."""
    cursor = item.request.cursor
    bound = None if cursor is None else cursor.index.automaton
    if not isinstance(bound, BoundAutomaton):
        return {}
    slots = bound.slot_bytes(raw.encode("utf-8"))
    return text_spans(item.text, raw, slots, [slot.options for slot in bound.slots])


class Scheduler:
    """The scheduling of one call's texts (see the module docstring).

    Args:
        decoder: an idle decoder; its capacity is the batch size.
        index: the call's compiled constraint (each text's cursor comes from
            ``prepare`` when the constraint copies from the text).
        spec: the output type, read by its ``parse``.
        plan: the call's options.
        prepare: makes a text's request (its prompt, its bound cursor, or its error).
        compile_seconds: recorded in every result.
        lock: held around each decoder step (one model, one forward pass at a time).
        raise_item_errors: raise a text's error instead of returning it as a result.
        prefix: the shared prefix of the call's prompts, given with each row (a decoder
            shared by several calls has none of its own).
        max_rows: this call's rows in the decoder at most (None: as many as are free).
    """

    def __init__(
        self,
        decoder: BatchDecoder,
        *,
        index: TokenIndex,
        spec: OutputSpec,
        plan: Plan,
        prepare: Prepare,
        compile_seconds: float,
        lock: threading.Lock,
        raise_item_errors: bool,
        prefix: SharedPrefix | None = None,
        max_rows: int | None = None,
    ) -> None:
        self.decoder = decoder
        self.index = index
        self.spec = spec
        self.plan = plan
        self.prepare = prepare
        self.compile_seconds = compile_seconds
        self.lock = lock
        self.raise_item_errors = raise_item_errors
        self.prefix = prefix
        self.max_rows = max_rows
        self._active = 0  # this call's rows in the decoder
        self._retries: deque[_Item] = deque()
        self._exhausted = False  # every text has been read

    def results(
        self, texts: Iterable[str], order: Order, batching: Batching
    ) -> Iterator[ExtractionResult[Any]]:
        """Every text's result, in ``order``; a text is read only when a row is free."""
        for event in self.events(texts, order, batching, None):
            if isinstance(event, ExtractionResult):
                yield event

    def events(
        self, texts: Iterable[str], order: Order, batching: Batching, every: int | None
    ) -> Iterator[ExtractionResult[Any] | Progress]:
        """Every text's result, in ``order``; with ``every``, also each row's
        :class:`Progress` after a step, when a value closed or was taken back, or when
        ``every`` tokens were added since the row's last progress (results then come in
        completion order, each after its row's last progress)."""
        source = enumerate(texts)
        ordering = Ordering(order)
        while True:
            done = self.fill(source, batching)
            if self.decoder.busy:
                with self.lock:
                    finished = self.decoder.step()
                if every is not None:
                    yield from self.progress(every)
                done.extend(self.finish_all(finished))
            yield from ordering.ready(done)
            if self.done:
                return

    @property
    def active(self) -> int:
        """This scheduler's rows that joined the decoder and have not ended."""
        return self._active

    @property
    def done(self) -> bool:
        """Whether every text has been read and has its result."""
        return self._exhausted and not self._retries and not self._active

    def finish_all(self, rows: Iterable[Finished]) -> list[ExtractionResult[Any]]:
        """The results of this scheduler's rows that ended (those that go back to the
        queue for a new attempt give none)."""
        results = (self._finish(row) for row in rows)
        return [result for result in results if result is not None]

    def progress(self, every: int) -> Iterator[Progress]:
        """This scheduler's rows whose output moved enough since their last progress."""
        token_bytes = self.index.vocabulary.token_bytes
        for key, token_ids in self.decoder.outputs():
            item: _Item = key
            if item.owner is not self:
                continue  # another call's row in a shared batch
            count = len(token_ids)
            if count == item.streamed_tokens and item.streamed is not None:
                continue
            raw = b"".join(token_bytes[t] for t in token_ids)
            data = read_prefix(raw.decode("utf-8", errors="ignore"))
            if data is None and item.streamed is None:
                continue  # nothing to show yet
            if data == item.streamed and item.streamed is not None:
                continue
            moved = abs(count - item.streamed_tokens) >= every
            if moved or item.streamed is None or _shape(data) != _shape(item.streamed):
                item.streamed, item.streamed_tokens = data, count
                spans = _spans(item, raw.decode("utf-8", errors="ignore"))
                yield Progress(item.request.position, data, raw, spans)

    def fill(
        self, source: Iterator[tuple[int, str]], batching: Batching, most: int | None = None
    ) -> list[ExtractionResult[Any]]:
        """Fill the free rows (``most`` of them at most, and this call's ``max_rows``),
        retries first, then new texts; the texts that failed before running."""
        failures: list[ExtractionResult[Any]] = []
        if batching == "static" and self._active:
            return failures
        added = 0
        while self._has_room(added, most):
            if self._retries:
                self._add(self._retries.popleft())
            elif self._exhausted or (taken := next(source, None)) is None:
                self._exhausted = True
                break
            else:
                failed = self._admit(*taken)
                if failed is not None:
                    failures.append(failed)
                    continue
            added += 1
        return failures

    def _has_room(self, added: int, most: int | None) -> bool:
        """Whether one more row may join: a free slot, below ``max_rows`` and ``most``."""
        if self.decoder.free_slots < 1 or (most is not None and added >= most):
            return False
        return self.max_rows is None or self._active < self.max_rows

    def _admit(self, position: int, text: str) -> ExtractionResult[Any] | None:
        """Queue a new text; its error result when it cannot run."""
        request = self.prepare(position, text, None)
        if request.error is not None:
            return self._failed(position, request.error)
        try:
            self._add(_Item(text, request, self))
        except InvalidOptionError as error:  # a budget too small for this text's values
            return self._failed(position, error)
        return None

    def _add(self, item: _Item) -> None:
        """Queue the item's next attempt, with its own steering and seed."""
        request = item.request
        steering = steering_for(self.spec, self.plan, generated_tokens(item.history))
        seed = self.plan.seed_for(request.position, len(item.history))
        cursor = request.cursor or Cursor(self.index)
        row = RowRequest(item, request.prompt, cursor, steering, seed, self.prefix)
        self.decoder.add(row)
        self._active += 1

    def _finish(self, row: Finished) -> ExtractionResult[Any] | None:
        """The item's result, or None when it goes back to the queue for a new attempt."""
        item: _Item = row.key
        self._active -= 1
        item.history.append(outcome(row.generation, self.spec.parse))

        def reprompt(request: Request, feedback: str) -> Request:
            return self.prepare(request.position, item.text, feedback)

        again = next_attempt(item.request, item.history, self.plan, reprompt)
        if again is not None:
            item.request = again
            self._retries.append(item)
            return None
        result = to_result(item.history, self.compile_seconds, item.request.position)
        if result.error is not None:
            return result
        return dataclasses.replace(result, spans=_spans(item, result.raw_text))

    def _failed(self, position: int, error: FormcastError) -> ExtractionResult[Any]:
        if self.raise_item_errors:
            raise error
        return ExtractionResult(None, error, index=position)
