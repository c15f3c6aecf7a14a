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
from formcast.extraction.provenance import text_spans
from formcast.extraction.results import ExtractionResult
from formcast.index import TokenIndex

__all__ = ["Prepare", "Progress", "Scheduler"]

#: Prepares one attempt at a text: ``(position, text, feedback or None) -> Request``.
Prepare = Callable[[int, str, str | None], Request]


@dataclass
class _Item:
    """A text in the decoder: its current attempt's request and the attempts so far."""

    text: str
    request: Request
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


def _shape(data: Any) -> Any:
    """``data`` with every string leaf the same: what changes when a value closes, a
    member or item opens, or a value is taken back, but not while a string grows."""
    if isinstance(data, dict):
        return {k: _shape(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_shape(v) for v in data]
    return "" if isinstance(data, str) else data


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
    ) -> None:
        self.decoder = decoder
        self.index = index
        self.spec = spec
        self.plan = plan
        self.prepare = prepare
        self.compile_seconds = compile_seconds
        self.lock = lock
        self.raise_item_errors = raise_item_errors
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
        decoder = self.decoder
        source = enumerate(texts)
        waiting: dict[int, ExtractionResult[Any]] = {}  # ended before an earlier text
        next_index = 0
        while True:
            done = self._fill(source, batching)
            if decoder.busy:
                with self.lock:
                    finished = decoder.step()
                if every is not None:
                    yield from self._progress(every)
                for row in finished:
                    result = self._finish(row)
                    if result is not None:
                        done.append(result)
            if order == "completion":
                yield from done
            else:
                for result in done:
                    waiting[result.index] = result
                while next_index in waiting:
                    yield waiting.pop(next_index)
                    next_index += 1
            if self._exhausted and not self._retries and not decoder.busy:
                return

    def _progress(self, every: int) -> Iterator[Progress]:
        """The rows whose output moved enough since their last progress."""
        token_bytes = self.index.vocabulary.token_bytes
        for key, token_ids in self.decoder.outputs():
            item: _Item = key
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
                yield Progress(item.request.position, data, raw)

    def _fill(
        self, source: Iterator[tuple[int, str]], batching: Batching
    ) -> list[ExtractionResult[Any]]:
        """Fill the free rows, retries first, then new texts; the texts that failed
        before running."""
        decoder = self.decoder
        failures: list[ExtractionResult[Any]] = []
        if batching == "static" and decoder.rows:
            return failures
        while decoder.free_slots > 0:
            if self._retries:
                self._add(self._retries.popleft())
                continue
            taken = None if self._exhausted else next(source, None)
            if taken is None:
                self._exhausted = True
                break
            failed = self._admit(*taken)
            if failed is not None:
                failures.append(failed)
        return failures

    def _admit(self, position: int, text: str) -> ExtractionResult[Any] | None:
        """Queue a new text; its error result when it cannot run."""
        request = self.prepare(position, text, None)
        if request.error is not None:
            return self._failed(position, request.error)
        try:
            self._add(_Item(text, request))
        except InvalidOptionError as error:  # a budget too small for this text's values
            return self._failed(position, error)
        return None

    def _add(self, item: _Item) -> None:
        """Queue the item's next attempt, with its own steering and seed."""
        request = item.request
        steering = steering_for(self.spec, self.plan, generated_tokens(item.history))
        seed = self.plan.seed_for(request.position, len(item.history))
        cursor = request.cursor or Cursor(self.index)
        self.decoder.add(RowRequest(item, request.prompt, cursor, steering, seed))

    def _finish(self, row: Finished) -> ExtractionResult[Any] | None:
        """The item's result, or None when it goes back to the queue for a new attempt."""
        item: _Item = row.key
        item.history.append(outcome(row.generation, self.spec.parse))

        def reprompt(request: Request, feedback: str) -> Request:
            return self.prepare(request.position, item.text, feedback)

        again = next_attempt(item.request, item.history, self.plan, reprompt)
        if again is not None:
            item.request = again
            self._retries.append(item)
            return None
        result = to_result(item.history, self.compile_seconds, item.request.position)
        cursor = item.request.cursor
        if cursor is None or result.error is not None:
            return result
        bound = cursor.index.automaton
        if not isinstance(bound, BoundAutomaton):
            return result
        raw = result.raw_text
        slots = bound.slot_bytes(raw.encode("utf-8"))
        spans = text_spans(item.text, raw, slots, [slot.options for slot in bound.slots])
        return dataclasses.replace(result, spans=spans)

    def _failed(self, position: int, error: FormcastError) -> ExtractionResult[Any]:
        if self.raise_item_errors:
            raise error
        return ExtractionResult(None, error, index=position)
