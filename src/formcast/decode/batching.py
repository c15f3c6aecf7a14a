"""Continuous batching: the masked decoding loop over rows that come and go.

A :class:`BatchDecoder` runs up to ``capacity`` rows at once. :meth:`~BatchDecoder.add`
queues a row (its prompt, its own cursor, its own steering); each
:meth:`~BatchDecoder.step` prefills the rows that joined, runs one forward pass for the
others, chooses one token per row and returns the rows that finished, whose places the
caller may fill at once. So a short output never waits for a long one, and the batch
stays full while there is work. Greedy outputs are those of each row decoded alone (up
to float noise in exact ties): each row sees only its own tokens, at its own positions
(:mod:`formcast.decode.kvcache`).

Per row, as in :func:`formcast.decode.logits.generate`: the constraint's mask (budget-safe
near the end), jump-forward of forced bytes, the loop guard, field-level steering with
rollback. Rows may use different constraints, texts (``FromText``) and output types.

With a :class:`~formcast.decode.kvcache.SharedPrefix`, the leading tokens a prompt shares with
it (compared id by id) are not prefilled: their keys and values, computed once, are
copied into the row.

Device work: the masks of the automaton states are cached on the model's device (one
boolean tensor per state and width, and per count of tokens left where the budget binds);
a step uploads the input ids, the new mask columns and position ids without waiting
(pinned memory on a GPU), launches the forward passes, and only then does the host work
that does not need their result: first visits of states (a state's row of the index),
the budget check, loop-guard and steering bans, the masks. On a GPU that work overlaps
the forward pass. Reading the chosen token ids is the only synchronisation of a step;
what follows it is the next step's input and cannot overlap: advancing the cursors,
jump-forward, judging closed fields (a rollback), the bookkeeping of rows that end
(device copies, queued without a read). On the CPU all of this runs in order and costs
nothing extra.

With a :class:`~formcast.decode.engine.SlotEngine` (the default on CUDA) the running rows
live in a :class:`~formcast.decode.slotcache.SlotCache`: fixed buffers and a few pass
shapes, each replayed from a captured CUDA graph. Prompts are prefilled in chunks of at
most ``prefill_tokens`` tokens per step, between the decoding passes of the running rows,
so that a long prompt joining does not stall them.

torch is imported here; :mod:`formcast.decode.logits` builds on this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from formcast.automaton import UNREACHABLE
from formcast.cursor import Cursor
from formcast.decode.engine import SlotEngine
from formcast.decode.forcing import ForcedTokenizer
from formcast.decode.forward import attention_kernels, call_model
from formcast.decode.jsonscan import Member
from formcast.decode.kvcache import RowCache, SharedPrefix, upload
from formcast.decode.masks import (
    allowed_mask,
    budget_narrows,
    budget_restricts,
    model_device,
)
from formcast.decode.records import (
    FieldSteering,
    Generation,
    LoopGuard,
    SamplingOptions,
)
from formcast.decode.slotcache import SlotCache
from formcast.decode.steering import FieldSteer, RowText
from formcast.errors import ExtractionRuntimeError, InvalidOptionError

__all__ = ["BatchDecoder", "Finished", "RowRequest", "check_budget"]

#: A prefill group may hold this share of padding tokens at most (rows of similar
#: prompt lengths are prefilled together; padding costs as much as a real token).
PREFILL_PADDING = 0.25
#: Hidden columns (padding, rolled-back tokens) that make the cache compact itself,
#: at least; and as a share of its width.
COMPACT_MIN_COLUMNS = 64
COMPACT_SHARE = 0.33
#: Prompt tokens prefilled per step at most (all rows of a group together), by default.
PREFILL_TOKENS = 4096
#: Steps a row added while others decode waits at most for ``join_rows`` rows to join it.
JOIN_STEPS = 8


@dataclass(frozen=True)
class RowRequest:
    """One sequence to decode.

    Attributes:
        key: the caller's handle, returned with the row's :class:`Generation`.
        prompt: the prompt's token ids (chat template applied), at least one.
        cursor: a fresh cursor of the row's own constraint; advanced in place (a
            steered row that rolls back continues on a replayed copy).
        steering: field-level validation with rollback for this row, or None.
        seed: the row's sampling seed (with a temperature): a row's samples then
            depend on its seed alone, not on the rows it shares the batch with.
        prefix: the shared prefix of this row's prompt, in place of the decoder's (rows
            of different output types in one batch each have their own).
    """

    key: Any
    prompt: Sequence[int]
    cursor: Cursor
    steering: FieldSteering | None = None
    seed: int | None = None
    prefix: SharedPrefix | None = None


@dataclass(frozen=True)
class Finished:
    """A row that ended: its request's key and what it generated."""

    key: Any
    generation: Generation


@dataclass
class _Row:
    """Bookkeeping of one sequence."""

    key: Any
    cursor: Cursor
    pending: list[int]  # tokens to feed in the next forward pass
    prompt_length: int
    generation: Generation
    started: float
    rng: torch.Generator | None = None
    budget_bound: bool = False  # the budget changed a token the model would have chosen
    text: RowText | None = None  # the emitted bytes read as JSON (guard or steering)
    steer: FieldSteer | None = None
    limit: int | None = None  # FieldSteering.max_generated_tokens
    start: Cursor | None = None  # the cursor before any output token (for replays)
    start_token: int = 0  # the prompt's last token (fed again on a rollback to the start)
    forced: list[bool] = field(default_factory=list)  # per output token (with text only)
    closed: list[Member] = field(default_factory=list)  # members closed, not yet judged
    prefix: SharedPrefix | None = None  # the prefix whose KV the row's prefill may copy


@dataclass
class _Prefill:
    """Joining rows prefilled together, and the cache their prompts are fed into."""

    rows: list[_Row]
    cache: RowCache


class BatchDecoder:
    """Constrained decoding of up to ``capacity`` rows at once, rows joining as others end.

    Args:
        model: a transformers causal LM (``forward`` takes ``input_ids``,
            ``attention_mask``, ``position_ids``, ``past_key_values`` and returns
            ``logits``); it must use the ``past_key_values`` it is given.
        capacity: rows in the KV cache at most (the batch size).
        max_new_tokens: generation budget per row, forced tokens included.
        forced_tokenizer: enables jump-forward when given.
        sampling: greedy by default; with a temperature, each row samples with its own
            generator (``RowRequest.seed``).
        pad_token_id: any valid id; pad positions are masked out.
        loop_guard: the loop guard of every row (off when None).
        prefix: the prompt prefix whose KV is computed once and copied into each row
            whose prompt starts with (some of) its token ids; None to prefill whole
            prompts.
        engine: keep the running rows in the engine's fixed slots and run their passes
            through it (CUDA graphs, ``torch.compile`` or eagerly); None for a cache
            that grows with the rows. Prefills run eagerly either way.
        prefill_tokens: prompt tokens prefilled per step at most; a group of joining
            rows whose prompts hold more is prefilled over several steps, right-aligned
            chunks of ``prefill_tokens // rows`` tokens per row, while the running rows
            keep decoding. None prefills each group in one pass.

    Memory: the KV cache holds at most ``capacity`` rows (fewer when an engine's slots
    do not fit in the device's free memory); its width is the longest row's tokens plus
    the hidden columns (left padding, a row's padding in steps where another row is fed
    forced tokens, rolled-back tokens), compacted away when they exceed a third of it.
    One decoder serves one thread.
    """

    def __init__(
        self,
        model: Any,
        *,
        capacity: int,
        max_new_tokens: int,
        forced_tokenizer: ForcedTokenizer | None = None,
        sampling: SamplingOptions | None = None,
        pad_token_id: int = 0,
        loop_guard: LoopGuard | None = None,
        prefix: SharedPrefix | None = None,
        engine: SlotEngine | None = None,
        prefill_tokens: int | None = PREFILL_TOKENS,
        join_rows: int = 1,
    ) -> None:
        if capacity < 1:
            raise InvalidOptionError(f"expected capacity >= 1, found {capacity}")
        if max_new_tokens < 1:
            raise InvalidOptionError(f"expected max_new_tokens >= 1, found {max_new_tokens}")
        if join_rows < 1:
            raise InvalidOptionError(f"expected join_rows >= 1, found {join_rows}")
        if prefill_tokens is not None and prefill_tokens < 1:
            raise InvalidOptionError(f"expected prefill_tokens >= 1, found {prefill_tokens}")
        self.model = model
        self.capacity = capacity
        self.max_new_tokens = max_new_tokens
        self.forced_tokenizer = forced_tokenizer
        self.sampling = sampling or SamplingOptions()
        self.pad_token_id = pad_token_id
        self.loop_guard = loop_guard
        self.prefix = prefix
        self.engine = engine
        self.prefill_tokens = prefill_tokens
        self.join_rows = join_rows
        self.device = model_device(model)
        self._running: list[_Row] = []
        self._cache: RowCache | SlotCache = RowCache.empty_rows(0, self.device)
        self._limit = capacity  # rows at once: fewer where an engine's slots hold fewer
        self._waiting: list[_Row] = []  # added, not yet prefilling
        self._prefilling: list[_Prefill] = []  # groups whose prompts are partly fed
        self._done: list[_Row] = []  # ended before any forward pass
        self._waited = 0  # steps the waiting rows have waited to join

    # -- the caller's side ---------------------------------------------------------------
    @property
    def rows(self) -> int:
        """Rows running, prefilling or waiting for their prefill."""
        prefilling = sum(len(group.rows) for group in self._prefilling)
        return len(self._running) + prefilling + len(self._waiting)

    @property
    def free_slots(self) -> int:
        return self._limit - self.rows

    @property
    def holds_rows(self) -> bool:
        """Whether rows are in the KV cache (running, or partly prefilled)."""
        return bool(self._running or self._prefilling)

    @property
    def busy(self) -> bool:
        """Whether :meth:`step` has work (rows to run or results to return)."""
        return bool(self._running or self._waiting or self._prefilling or self._done)

    def outputs(self) -> Iterator[tuple[Any, Sequence[int]]]:
        """Each row's key and the output token ids it holds so far (the rows that have
        not produced a token yet included); for streaming. The lists are the rows' own:
        read them before the next :meth:`step`."""
        for row in self._running:
            yield row.key, row.generation.token_ids
        for group in self._prefilling:
            for row in group.rows:
                yield row.key, row.generation.token_ids
        for row in self._waiting:
            yield row.key, row.generation.token_ids

    def add(self, request: RowRequest) -> None:
        """Queue a row; it is prefilled by the next :meth:`step`.

        Raises:
            InvalidOptionError: no free slot, an empty prompt, or a budget smaller than the
                fewest tokens a complete output of the row's constraint needs.
        """
        if self.free_slots < 1:
            raise InvalidOptionError(f"expected a free slot, found all {self.capacity} taken")
        if not request.prompt:
            raise InvalidOptionError("expected a prompt of at least one token, found none")
        check_budget(request.cursor, self.max_new_tokens)
        row = self._new_row(request)
        _jump_forward(row, self.forced_tokenizer, self.max_new_tokens)
        if _is_done(row, self.max_new_tokens):
            self._done.append(row)  # needs no forward pass, hence no slot
        else:
            self._waiting.append(row)

    def remove(self, unwanted: Callable[[Any], bool]) -> int:
        """Drop the rows whose key ``unwanted`` accepts, wherever they are (waiting,
        prefilling, running, or ended and not yet returned): their slots are free at
        once. Returns how many were dropped. Cost: one copy of the cache's kept rows when
        running rows go."""
        count = self.rows + len(self._done)
        self._done = [row for row in self._done if not unwanted(row.key)]
        self._waiting = [row for row in self._waiting if not unwanted(row.key)]
        groups = []
        for group in self._prefilling:
            keep = [i for i, row in enumerate(group.rows) if not unwanted(row.key)]
            if keep and len(keep) < len(group.rows):
                group.cache.keep_rows(keep)
                group.rows = [group.rows[i] for i in keep]
            if keep:
                groups.append(group)
        self._prefilling = groups
        keep = [i for i, row in enumerate(self._running) if not unwanted(row.key)]
        if len(keep) < len(self._running):
            with torch.inference_mode():
                self._drop_running(keep)
        return count - self.rows - len(self._done)

    def step(self) -> list[Finished]:
        """Prefill the rows that joined, run one forward pass for the others, choose one
        token per row; return the rows that ended (their slots are free again)."""
        with torch.inference_mode():
            ended = self._done
            self._done = []
            if self._running or self._waiting or self._prefilling:
                ended.extend(self._decode_step())
        return [Finished(row.key, _finish(row)) for row in ended]

    def run(self, requests: Iterable[RowRequest]) -> Iterator[Finished]:
        """Decode every request, keeping the batch full; yields rows as they end
        (completion order). ``requests`` is read lazily, one item per free slot."""
        source = iter(requests)
        exhausted = False
        while True:
            while not exhausted and self.free_slots > 0:
                request = next(source, None)
                if request is None:
                    exhausted = True
                else:
                    self.add(request)
            if not self.busy:
                return
            yield from self.step()

    # -- one step ------------------------------------------------------------------------
    def _decode_step(self) -> list[_Row]:
        self._start_prefills()
        # Launch every forward pass before any host-side mask work (GPU overlap).
        logits = []
        with attention_kernels(self.device):
            if self._running:
                logits.append(self._forward(self._cache, self._running))
            for rows, cache, first_logits in self._prefill_chunks():
                logits.append(first_logits)
                self._cache.append(cache)
                self._running.extend(rows)
        if not logits:
            return []  # the joining prompts are still being prefilled
        scores = torch.cat(logits) if len(logits) > 1 else logits[0]
        width = scores.shape[-1]
        masks, free = zip(*(self._row_mask(row, width) for row in self._running), strict=True)
        chosen = self._choose(scores, torch.stack(masks), free)  # the step's one synchronisation
        ended: list[_Row] = []
        keep: list[int] = []
        for i, (row, token) in enumerate(zip(self._running, chosen, strict=True)):
            _accept(row, token, self.forced_tokenizer, self.max_new_tokens)
            self._steer(row, i)
            if _is_done(row, self.max_new_tokens):
                ended.append(row)
            else:
                keep.append(i)
        if ended:
            self._drop_running(keep)
        waste = self._cache.waste()
        if waste > max(COMPACT_MIN_COLUMNS, COMPACT_SHARE * self._cache.width):
            self._cache.compact()
        return ended

    def _drop_running(self, keep: list[int]) -> None:
        """Keep only the running rows ``keep`` (ascending), the fewest moved."""
        order = fill_from_end(len(self._running), keep)
        self._running = [self._running[i] for i in order]
        self._cache.keep_rows(order)

    def _start_prefills(self) -> None:
        """Group the waiting rows that have room for prefilling (the first time with an
        engine, its slot cache is made first: its size may bound the room)."""
        if not self._waiting or not self._may_join():
            return
        self._waited = 0
        engine = self.engine
        if engine is not None and not self.holds_rows and not engine.serves(self):
            columns = max(len(row.pending) for row in self._waiting) + self.max_new_tokens
            slots = engine.slots(self.capacity, columns, self)
            # None: another decoder's rows are in the slots; this one grows a cache
            self._cache = slots or RowCache.empty_rows(0, self.device)
            self._limit = self.capacity if slots is None else min(self.capacity, slots.slots)
        room = self.free_slots + len(self._waiting)  # slots not running nor prefilling
        joining, self._waiting = self._waiting[:room], self._waiting[room:]
        for rows, cache in self._prefill_groups(joining):
            self._prefilling.append(_Prefill(rows, cache))

    def _may_join(self) -> bool:
        """Whether the waiting rows start their prefill now: at once when nothing else
        runs or ``join_rows`` rows wait, else after ``JOIN_STEPS`` steps of waiting (so a
        prefill pass, which runs eagerly, serves several rows)."""
        if not self._running or len(self._waiting) >= self.join_rows:
            return True
        self._waited += 1
        return self._waited > JOIN_STEPS

    def _prefill_chunks(self) -> Iterator[tuple[list[_Row], RowCache, torch.Tensor]]:
        """Feed the prefilling groups at most ``prefill_tokens`` prompt tokens in all;
        yields each group whose prompts are now fed whole, with its cache and its rows'
        first logits."""
        budget = self.prefill_tokens
        while self._prefilling:
            group = self._prefilling[0]
            remaining = max(len(row.pending) for row in group.rows)
            per_row = remaining if budget is None else max(1, budget // len(group.rows))
            if per_row < remaining:
                self._forward(group.cache, group.rows, chunk=per_row)  # no logits needed yet
                return
            first_logits = self._forward(group.cache, group.rows)
            self._prefilling.pop(0)
            yield group.rows, group.cache, first_logits
            if budget is not None:
                budget -= remaining * len(group.rows)
                if budget <= 0:
                    return

    def _prefill_groups(self, rows: list[_Row]) -> Iterator[tuple[list[_Row], RowCache]]:
        """The joining rows in groups prefilled together, each with its cache: rows that
        share as many prefix tokens, of similar lengths (padding within
        ``PREFILL_PADDING``)."""
        by_shared: dict[tuple[int, int], list[_Row]] = {}
        for row in rows:
            shared = self._shared_length(row)
            row.pending = row.pending[shared:]
            by_shared.setdefault((shared, id(row.prefix) if shared else 0), []).append(row)
        for (shared, _), group in sorted(by_shared.items()):
            group.sort(key=lambda r: len(r.pending))
            prefix = group[0].prefix
            for part in _similar_lengths(group):
                if shared:
                    assert prefix is not None
                    yield part, prefix.rows(len(part), shared, self.device)
                else:
                    yield part, RowCache.empty_rows(len(part), self.device)

    def _shared_length(self, row: _Row) -> int:
        if row.prefix is None:
            return 0
        prompt = row.pending[: row.prompt_length]
        shared = row.prefix.usable_length(prompt)
        if shared > 0:
            row.prefix.compute(self.model, self.device)
        return shared

    def _forward(
        self, cache: RowCache | SlotCache, rows: list[_Row], chunk: int | None = None
    ) -> torch.Tensor:
        """Feed the rows' pending tokens, left-padded to one width; the last logits.

        With ``chunk``, only the first ``chunk`` columns of the pending tokens aligned on
        the right are fed (a row whose tokens all lie further right is fed padding), so
        that the chunks of a group lay out its columns as one pass would."""
        remaining = max(len(row.pending) for row in rows)
        width = remaining if chunk is None else min(chunk, remaining)
        counts = [max(0, len(row.pending) - (remaining - width)) for row in rows]
        ids = np.full((len(rows), width), self.pad_token_id, dtype=np.int64)
        for i, (row, count) in enumerate(zip(rows, counts, strict=True)):
            if count:
                ids[i, width - count :] = row.pending[:count]
                row.pending = row.pending[count:]
        input_ids = torch.from_numpy(ids)
        if isinstance(cache, SlotCache):
            assert self.engine is not None
            return cache.run(input_ids, cache.feed(counts), self.engine)
        attention, positions = cache.feed(counts)
        out = call_model(
            self.model,
            cache.cache,
            input_ids=upload(input_ids, self.device),
            attention_mask=attention,
            position_ids=upload(positions, self.device),
        )
        return out.logits[:, -1, :]  # type: ignore[no-any-return]

    def _row_mask(self, row: _Row, width: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The row's allowed tokens on the device: the constraint's (budget-safe) mask,
        less the loop guard's and the field steering's bans unless they would leave
        nothing allowed; and, where the budget removes a token that could still end well,
        the same mask without the budget (what the model would choose from), else None.
        Decided on the host (no synchronisation)."""
        tokens_left = self.max_new_tokens - row.generation.completion_tokens
        restricted = budget_restricts(row.cursor, tokens_left)
        mask = allowed_mask(row.cursor, width, self.device, tokens_left)
        free = None
        if budget_narrows(row.cursor, tokens_left):
            free = allowed_mask(row.cursor, width, self.device, UNREACHABLE)
        if row.text is None:
            return mask, free
        looping = row.text.loop_bans()
        banned = looping + (row.steer.bans(row.text) if row.steer is not None else [])
        if not banned:
            return mask, free
        mask = self._trim(row, mask, banned, looping, tokens_left if restricted else None)
        if free is not None:
            free = self._trim(row, free, banned, [], UNREACHABLE)
        return mask, free

    def _trim(
        self,
        row: _Row,
        mask: torch.Tensor,
        banned: list[int],
        looping: list[int],
        tokens_left: int | None,
    ) -> torch.Tensor:
        """``mask`` less the banned tokens, unless that would leave nothing allowed."""
        allowed = row.cursor.allowed_token_ids(tokens_left)  # sorted
        hit = _members(np.unique(np.asarray(banned, dtype=np.int64)), allowed)
        if hit.size == 0 or hit.size == allowed.size:
            return mask  # nothing to remove, or validity first: keep the last allowed
        if looping and _members(np.asarray(looping, dtype=np.int64), allowed).size:
            row.generation.guard_bans += 1
        trimmed = mask.clone()
        trimmed[upload(torch.from_numpy(hit.astype(np.int64)), self.device)] = False
        return trimmed

    def _choose(
        self,
        logits: torch.Tensor,
        allowed: torch.Tensor,
        free: Sequence[torch.Tensor | None],
    ) -> list[int]:
        """One token id per running row from the masked logits (host ints).

        A row whose budget narrowed its mask (``free`` holds its mask without the budget)
        is marked budget-bound when the budget changed its token: greedily, when the
        argmax without the budget is not the argmax with it; sampling, when a sample
        drawn without the budget is one the budget removes (that row then takes a sample
        drawn under the budget: the pair draws from the budget-safe distribution
        exactly)."""
        masked = logits.masked_fill(~allowed, float("-inf"))
        narrowed = [i for i, f in enumerate(free) if f is not None]
        unbudgeted: torch.Tensor | None = None
        if narrowed:
            free_masks = torch.stack([f for f in free if f is not None])
            unbudgeted = logits[narrowed].masked_fill(~free_masks, float("-inf"))
        options = self.sampling
        if options.temperature == 0:
            picks = masked.argmax(dim=-1)
            if unbudgeted is None:
                return [int(t) for t in picks.tolist()]
            both = torch.cat([picks, unbudgeted.argmax(dim=-1)]).tolist()
            chosen = [int(t) for t in both[: len(picks)]]
            for i, best in zip(narrowed, both[len(picks) :], strict=True):
                if chosen[i] != int(best):
                    self._running[i].budget_bound = True
            return chosen
        probs = self._probabilities(masked)
        wanted: list[torch.Tensor] = []
        if unbudgeted is not None:
            free_probs = self._probabilities(unbudgeted)
            for k, i in enumerate(narrowed):
                rng = self._running[i].rng
                wanted.append(torch.multinomial(free_probs[k], 1, generator=rng))
        samples = [
            torch.multinomial(probs[i], 1, generator=row.rng) for i, row in enumerate(self._running)
        ]
        picks = torch.cat(samples)
        if not wanted:
            return [int(t) for t in picks.tolist()]
        rows = torch.tensor(narrowed, device=picks.device)
        free_picks = torch.cat(wanted)
        kept = allowed[rows, free_picks]  # the budget left the unbudgeted sample allowed
        picks[rows] = torch.where(kept, free_picks, picks[rows])
        both = torch.cat([picks, kept.long()]).tolist()  # one synchronisation
        for i, ok in zip(narrowed, both[len(samples) :], strict=True):
            if not ok:
                self._running[i].budget_bound = True
        return [int(t) for t in both[: len(samples)]]

    def _probabilities(self, masked: torch.Tensor) -> torch.Tensor:
        """The sampling distribution of masked logits (temperature, then top-p)."""
        options = self.sampling
        probs = torch.softmax(masked.float() / options.temperature, dim=-1)
        if options.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            drop = sorted_probs.cumsum(dim=-1) - sorted_probs > options.top_p
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs.masked_fill(drop, 0))
        return probs

    # -- rows ----------------------------------------------------------------------------
    def _new_row(self, request: RowRequest) -> _Row:
        prompt = [int(t) for t in request.prompt]
        generation = Generation(prompt_tokens=len(prompt))
        started = time.perf_counter()
        row = _Row(request.key, request.cursor, prompt, len(prompt), generation, started)
        row.prefix = request.prefix or self.prefix
        if request.seed is not None and self.sampling.temperature > 0:
            row.rng = torch.Generator(device=self.device).manual_seed(request.seed)
        guard, steering = self.loop_guard, request.steering
        if guard is not None or steering is not None:
            rule = None if guard is None else (guard.ngram, guard.max_repeats)
            row.text = RowText(request.cursor.index.vocabulary.token_bytes, rule)
        if steering is not None:
            row.steer = FieldSteer(steering.check, steering.max_retries)
            row.limit = steering.max_generated_tokens
            row.start = request.cursor.copy()
            row.start_token = prompt[-1]
        return row

    def _steer(self, row: _Row, i: int) -> None:
        """Judge the top-level values the last tokens closed; roll back to the first one
        rejected (when its field has retries left and the token limit allows)."""
        closed, row.closed = row.closed, []
        if row.steer is None or row.text is None:
            return
        for member in closed:
            keep = row.steer.judge(member, row.text)
            if keep is None:
                continue
            spent = row.generation.generated_tokens + self.max_new_tokens - keep
            if row.limit is not None and spent > row.limit:
                continue
            row.steer.rolled_back(member, row.text, row.generation.token_ids)
            self._rollback(row, i, keep)
            return

    def _rollback(self, row: _Row, i: int, keep: int) -> None:
        """Forget all but the first ``keep`` output tokens of running row ``i``.

        The last kept token (or the prompt's last) is fed again, at its own position, so
        the next logits are those after it; its old cache column and those of every
        forgotten token are hidden by the row's attention mask."""
        generation = row.generation
        refeed = generation.prompt_tokens + keep - 1
        self._cache.hide_from(i, refeed)
        assert row.start is not None and row.text is not None
        row.pending = [generation.token_ids[keep - 1] if keep else row.start_token]
        del generation.token_ids[keep:]
        del row.forced[keep:]
        generation.forced_tokens = sum(row.forced)
        generation.rollbacks += 1
        row.cursor = row.start.copy()
        row.text = row.text.fresh()
        for token in generation.token_ids:
            row.cursor.advance(token)
            row.text.push(token)


def fill_from_end(count: int, keep: Sequence[int]) -> list[int]:
    """The order of the kept rows (indices in ``range(count)``, ascending) that moves the
    fewest of them into ``range(len(keep))``: a row already there stays, and each place
    of a row that ended takes a kept row from the end."""
    size = len(keep)
    kept = set(keep)
    movers = [i for i in keep if i >= size]
    return [i if i in kept else movers.pop() for i in range(size)]


def _members(
    ids: npt.NDArray[np.int64], sorted_ids: npt.NDArray[np.int32]
) -> npt.NDArray[np.int64]:
    """The ``ids`` that ``sorted_ids`` holds: a binary search each, no pass over the
    (often vocabulary-wide) sorted array."""
    if not sorted_ids.size:
        return ids[:0]
    at = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
    found: npt.NDArray[np.int64] = ids[sorted_ids[at] == ids]
    return found


def _similar_lengths(rows: list[_Row]) -> Iterator[list[_Row]]:
    """Rows sorted by pending length, cut into runs whose padding stays within
    ``PREFILL_PADDING`` of their tokens."""
    part: list[_Row] = []
    tokens = 0
    for row in rows:
        length = len(row.pending)
        if part and length * (len(part) + 1) > (1 + PREFILL_PADDING) * (tokens + length):
            yield part
            part, tokens = [], 0
        part.append(row)
        tokens += length
    if part:
        yield part


def check_budget(cursor: Cursor, max_new_tokens: int) -> None:
    """Raise :class:`InvalidOptionError` when no complete output can be reached from the
    cursor within ``max_new_tokens`` tokens."""
    needed = cursor.min_tokens_to_accept()
    if needed >= UNREACHABLE:
        raise InvalidOptionError(
            f"expected a constraint this vocabulary can complete, found "
            f"{cursor.index.description[:80]!r}, whose every completion needs bytes that "
            "no single token carries"
        )
    if needed > max_new_tokens:
        raise InvalidOptionError(
            f"expected max_new_tokens >= {needed} (the fewest tokens a complete output of "
            f"{cursor.index.description[:80]!r} needs), found max_new_tokens={max_new_tokens}"
        )


def _jump_forward(row: _Row, forced_tokenizer: ForcedTokenizer | None, budget: int) -> None:
    """Queue the tokens of the bytes the constraint forces, without sampling them.

    The last token of the forced text is left to the model (token healing): what follows
    may merge with it (after ``","date":"`` the model may write the token ``"0``), and a
    token boundary forced there pushes the model off the tokenization it was trained on.
    The constraint still allows only tokens that start with the forced bytes."""
    if forced_tokenizer is None:
        return
    forced = forced_tokenizer(row.cursor.forced_bytes())[:-1]
    tokens_left = budget - row.generation.completion_tokens
    if not forced or len(forced) > tokens_left:
        return
    for token in forced:
        row.cursor.advance(token)
    row.pending.extend(forced)
    _emit(row, forced, forced=True)
    row.generation.forced_tokens += len(forced)


def _accept(row: _Row, token: int, forced: ForcedTokenizer | None, budget: int) -> None:
    row.cursor.advance(token)
    if row.cursor.is_finished:  # EOS: not part of the output text
        return
    _emit(row, [token], forced=False)
    row.pending = [token]
    _jump_forward(row, forced, budget)


def _emit(row: _Row, tokens: list[int], *, forced: bool) -> None:
    """Append output tokens; read them as JSON when the row tracks its text."""
    row.generation.token_ids.extend(tokens)
    row.generation.generated_tokens += len(tokens)
    if row.text is not None:
        row.forced.extend([forced] * len(tokens))
        for token in tokens:
            row.closed.extend(row.text.push(token))


def _is_done(row: _Row, budget: int) -> bool:
    cursor = row.cursor
    if cursor.is_finished:
        return True
    if row.generation.completion_tokens >= budget:
        return True
    # Accepting with nothing that could follow: the output is complete without EOS.
    return cursor.is_accepting() and cursor.index.row(cursor.state)[0].size == 0


def _finish(row: _Row) -> Generation:
    generation = row.generation
    cursor = row.cursor
    closed = cursor.is_finished or cursor.index.row(cursor.state)[0].size == 0
    generation.finish_reason = "stop" if closed and not row.budget_bound else "length"
    vocabulary = cursor.index.vocabulary
    generation.text_bytes = b"".join(vocabulary.token_bytes[t] for t in generation.token_ids)
    generation.seconds = time.perf_counter() - row.started
    if not cursor.is_finished and not cursor.is_accepting():
        raise ExtractionRuntimeError(
            "expected generation to end in an accepting state (the budget guarantees it), "
            f"found state {cursor.state} after {generation.completion_tokens} tokens"
        )
    return generation
