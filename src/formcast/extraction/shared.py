"""The continuous batch that an extractor's async calls share.

Each async call (:meth:`~formcast.Extractor.aextract`, ``aextract_many``, ``astream``)
becomes a :class:`Job`: its :class:`~formcast.extraction.scheduler.Scheduler`, its texts
and where its events go. A :class:`SharedBatch` runs every job in one worker thread, so the
event loop is never blocked. Jobs whose calls decode alike (the same budget, sampling,
jump-forward and loop guard) share one :class:`~formcast.decode.batching.BatchDecoder`:
their rows decode in the same forward passes, whatever their output types, the way the
rows of one ``extract_many`` do. Each turn of the worker:

1. drops the rows of cancelled jobs (their slots are free at once);
2. fills each decoder's free rows from its jobs in turn, one row each per round, so that
   a long ``aextract_many`` does not keep a single ``aextract`` waiting;
3. steps each decoder that has work (under the extractor's lock, so sync calls on the
   same extractor interleave their passes with these);
4. hands each ended row to its job, which gives its results and partials to its caller.

A job's own error (a bad text in ``arun``, a failing validator) fails that job alone; an
error of a decoder's step fails the jobs with rows in it. The worker stops when it has
had nothing to do for :data:`IDLE_SECONDS`, and a new call starts it again.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from formcast.decode.batching import BatchDecoder, Finished
from formcast.extraction.options import Batching, Order
from formcast.extraction.results import ExtractionResult
from formcast.extraction.scheduler import Ordering, Progress, Scheduler

__all__ = ["END", "IDLE_SECONDS", "Failure", "Job", "SharedBatch", "job_events"]

#: Seconds the worker waits for a new call before it stops.
IDLE_SECONDS = 5.0


class _End:
    def __repr__(self) -> str:
        return "END"


#: The last event of a job that finished.
END = _End()


@dataclass(frozen=True)
class Failure:
    """The event of a job that failed: the caller raises ``error``."""

    error: BaseException


@dataclass(eq=False)
class Job:
    """One async call: its scheduler, its texts, and ``deliver``, which takes each of its
    events (results, :class:`Progress`, a :class:`Failure`, then :data:`END`) from the
    worker thread to the caller; ``deliver`` must not block."""

    scheduler: Scheduler
    texts: Iterator[tuple[int, str]]
    order: Order
    batching: Batching
    every: int | None
    deliver: Callable[[Any], None]
    cancelled: bool = False
    finished: bool = False
    ordering: Ordering = field(init=False)

    def __post_init__(self) -> None:
        self.ordering = Ordering(self.order)

    def fill(self, most: int) -> bool:
        """Add at most ``most`` of the job's rows to its decoder; whether any text was
        read or added."""
        scheduler = self.scheduler
        before = scheduler.active
        failures = scheduler.fill(self.texts, self.batching, most)
        self.give(failures)
        return bool(failures) or scheduler.active > before

    def give(self, results: list[ExtractionResult[Any]]) -> None:
        for result in self.ordering.ready(results):
            self.deliver(result)

    def fail(self, error: BaseException) -> None:
        self.deliver(Failure(error))
        self.close()

    def close(self) -> None:
        if not self.finished:
            self.finished = True
            self.deliver(END)


class SharedBatch:
    """The worker thread of one extractor's async calls (see the module docstring).

    Args:
        lock: the extractor's lock, held around each decoder step.
        make_decoder: makes the decoder of a new key (the key is the job's).
    """

    def __init__(self, lock: threading.Lock, make_decoder: Callable[[Hashable], BatchDecoder]):
        self.lock = lock
        self.make_decoder = make_decoder
        self._condition = threading.Condition()
        self._incoming: list[Job] = []
        self._jobs: list[Job] = []
        self._decoders: dict[Hashable, BatchDecoder] = {}
        self._thread: threading.Thread | None = None

    def decoder(self, key: Hashable) -> BatchDecoder:
        """The decoder that jobs of ``key`` share (made on first use)."""
        with self._condition:
            found = self._decoders.get(key)
            if found is None:
                found = self._decoders[key] = self.make_decoder(key)
            return found

    def submit(self, job: Job) -> None:
        """Queue ``job``; the worker starts it at its next turn."""
        with self._condition:
            self._incoming.append(job)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="formcast-shared-batch", daemon=True
                )
                self._thread.start()
            self._condition.notify()

    def cancel(self, job: Job) -> None:
        """Stop ``job``: its rows are dropped at the worker's next turn."""
        with self._condition:
            job.cancelled = True
            self._condition.notify()

    # -- the worker thread ---------------------------------------------------------------
    def _work(self) -> None:
        while self._take_jobs():
            try:
                self._turn()
            except Exception as error:  # a fault of the worker itself: no call may hang
                for job in self._jobs:
                    self._drop(job, error)
                self._jobs = []
                with self._condition:
                    self._decoders.clear()

    def _take_jobs(self) -> bool:
        """Move the submitted jobs in; wait while there is nothing to do. False when the
        worker should stop (idle for :data:`IDLE_SECONDS`)."""
        with self._condition:
            if not self._jobs and not self._incoming:
                self._condition.wait(IDLE_SECONDS)
                if not self._incoming:
                    self._thread = None
                    self._decoders.clear()  # their caches go; a new call makes new ones
                    return False
            self._jobs.extend(self._incoming)
            self._incoming.clear()
            return True

    def _turn(self) -> None:
        for job in self._jobs:
            if job.cancelled and not job.finished:
                self._drop(job)
        self._jobs = [job for job in self._jobs if not job.finished]  # none gets new rows
        for jobs in self._by_decoder():
            decoder = jobs[0].scheduler.decoder
            self._fill(jobs)
            if decoder.busy:
                self._step(decoder, jobs)
        for job in self._jobs:
            if not job.finished and job.scheduler.done:
                job.close()
        self._jobs = [job for job in self._jobs if not job.finished]

    def _by_decoder(self) -> list[list[Job]]:
        """The jobs grouped by the decoder they share."""
        groups: dict[int, list[Job]] = {}
        for job in self._jobs:
            groups.setdefault(id(job.scheduler.decoder), []).append(job)
        return list(groups.values())

    def _fill(self, jobs: list[Job]) -> None:
        """One row per job per round, until the slots or the jobs' texts run out."""
        open_jobs = list(jobs)
        while open_jobs and open_jobs[0].scheduler.decoder.free_slots > 0:
            still = []
            for job in open_jobs:
                try:
                    if job.fill(1):
                        still.append(job)
                except Exception as error:  # this job's own error: only it fails
                    self._drop(job, error)
            open_jobs = still

    def _step(self, decoder: BatchDecoder, jobs: list[Job]) -> None:
        try:
            with self.lock:
                finished = decoder.step()
        except Exception as error:  # the pass itself failed: every job in it fails
            for job in jobs:
                self._drop(job, error)
            self._decoders = {k: d for k, d in self._decoders.items() if d is not decoder}
            return
        for job in jobs:
            if job.every is not None and not job.finished:
                for progress in job.scheduler.progress(job.every):
                    job.deliver(progress)
        for job, rows in _owners(finished, jobs):
            try:
                job.give(job.scheduler.finish_all(rows))
            except Exception as error:
                self._drop(job, error)

    def _drop(self, job: Job, error: BaseException | None = None) -> None:
        """Remove the job's rows from its decoder; end it (with ``error``, if any)."""
        scheduler = job.scheduler
        scheduler.decoder.remove(lambda key: getattr(key, "owner", None) is scheduler)
        if error is not None:
            job.fail(error)
        job.finished = True


def _owners(rows: list[Finished], jobs: list[Job]) -> Iterator[tuple[Job, list[Finished]]]:
    """The ended rows grouped by the job whose scheduler owns them (jobs gone skipped)."""
    by_scheduler = {id(job.scheduler): job for job in jobs if not job.finished}
    grouped: dict[int, list[Finished]] = {}
    for row in rows:
        grouped.setdefault(id(row.key.owner), []).append(row)
    for owner, owned in grouped.items():
        job = by_scheduler.get(owner)
        if job is not None:
            yield job, owned


async def job_events(
    shared: SharedBatch,
    scheduler: Scheduler,
    texts: Iterable[str],
    *,
    order: Order,
    batching: Batching,
    every: int | None,
) -> AsyncIterator[ExtractionResult[Any] | Progress]:
    """Run one call in ``shared`` and yield its events as the worker gives them: results
    (in ``order``) and, with ``every``, progress. The job's error is raised here. Leaving
    early (``break``, an exception, a cancelled task) cancels the job: its rows are
    dropped. ``texts`` is read in the worker thread, one text per free row."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()

    def deliver(event: Any) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, event)
        except RuntimeError:  # the caller's event loop has closed: nobody is waiting
            job.cancelled = True

    job = Job(
        scheduler,
        enumerate(texts),
        order,
        batching,
        every,
        deliver,
    )
    shared.submit(job)
    try:
        while (event := await queue.get()) is not END:
            if isinstance(event, Failure):
                raise event.error
            yield event
    finally:
        if not job.finished:
            shared.cancel(job)
