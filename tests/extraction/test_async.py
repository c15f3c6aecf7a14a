"""Async calls: ``aextract``, ``aextract_many``, ``astream``, sharing one continuous batch.

The tiny random Llama writes valid but arbitrary outputs; greedy decoding makes them
repeatable, so each async result is compared with the sync call's. Decoding passes are
counted with a forward hook on the model.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import formcast
from formcast import Extractor, Partial
from formcast.errors import EmptyInputError, InvalidOptionError

ROOT = Path(__file__).resolve().parents[2]


class Person(BaseModel):
    name: str
    age: int


TEXTS = [f"Person {i} is called Ann{i} and is {20 + i} years old." for i in range(12)]


class Passes:
    """Counts the model's forward calls while active."""

    def __init__(self, model: Any) -> None:
        self.count = 0
        self._handle = model.register_forward_hook(self._seen)

    def _seen(self, *_: Any) -> None:
        self.count += 1

    def close(self) -> None:
        self._handle.remove()


@pytest.fixture
def passes(tiny_extractor: Extractor) -> Iterator[Passes]:
    counter = Passes(tiny_extractor.model)
    yield counter
    counter.close()


@pytest.fixture(scope="module")
def sync_outputs(tiny_extractor: Extractor) -> list[Person]:
    return [tiny_extractor.extract(Person, text, max_new_tokens=40) for text in TEXTS]


def _shared_rows(extractor: Extractor) -> int:
    """Rows in the decoders of the extractor's shared batch."""
    return sum(decoder.rows for decoder in extractor._shared._decoders.values())


def _row_owners(extractor: Extractor) -> set[int]:
    """The schedulers (ids) whose rows are in the extractor's shared decoders."""
    decoders = list(extractor._shared._decoders.values())
    return {id(key.owner) for decoder in decoders for key, _ in decoder.outputs()}


async def _wait_for(condition: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the worker did not get there in time"
        await asyncio.sleep(0.01)


def test_concurrent_calls_decode_together(
    tiny_extractor: Extractor, sync_outputs: list[Person], passes: Passes
) -> None:
    """Twelve gathered ``aextract`` calls give the sync outputs in about the passes of
    one batch: far fewer than twelve calls one after the other."""
    for text in TEXTS:
        tiny_extractor.extract(Person, text, max_new_tokens=40)
    one_by_one, passes.count = passes.count, 0

    async def gathered() -> list[Any]:
        calls = (tiny_extractor.aextract(Person, t, max_new_tokens=40) for t in TEXTS)
        return await asyncio.gather(*calls)

    assert asyncio.run(gathered()) == sync_outputs
    assert passes.count * 4 < one_by_one, (passes.count, one_by_one)


def test_aextract_many_matches_extract_many(
    tiny_extractor: Extractor, sync_outputs: list[Person]
) -> None:
    async def collect(**options: Any) -> list[Any]:
        many = tiny_extractor.aextract_many(Person, TEXTS, max_new_tokens=40, **options)
        return [result async for result in many]

    in_order = asyncio.run(collect(batch_size=5))
    assert [r.index for r in in_order] == list(range(len(TEXTS)))
    assert [r.value for r in in_order] == sync_outputs
    done = asyncio.run(collect(order="completion"))
    assert sorted(r.index for r in done) == list(range(len(TEXTS)))
    assert {r.index: r.value for r in done} == dict(enumerate(sync_outputs))
    with pytest.raises(InvalidOptionError, match="progress"):
        asyncio.run(collect(progress=True))


def test_module_level_async_calls(tiny_extractor: Extractor, sync_outputs: list[Person]) -> None:
    async def calls() -> tuple[Any, list[Any], list[Any]]:
        one = await formcast.aextract(Person, TEXTS[0], model=tiny_extractor, max_new_tokens=40)
        many = formcast.aextract_many(Person, TEXTS[:3], model=tiny_extractor, max_new_tokens=40)
        streamed = formcast.astream(Person, TEXTS[1], model=tiny_extractor, max_new_tokens=40)
        return one, [r.value async for r in many], [p async for p in streamed]

    one, many, streamed = asyncio.run(calls())
    assert one == sync_outputs[0] and many == sync_outputs[:3]
    assert streamed[-1] == sync_outputs[1]


def test_astream_yields_partials_then_the_value(
    tiny_extractor: Extractor, sync_outputs: list[Person]
) -> None:
    async def collect() -> list[Any]:
        return [p async for p in tiny_extractor.astream(Person, TEXTS[2], max_new_tokens=40)]

    items = asyncio.run(collect())
    assert items[-1] == sync_outputs[2] and isinstance(items[-1], Person)
    assert len(items) > 2 and all(isinstance(p, Partial[Person]) for p in items[:-1])
    assert items[:-1] == list(tiny_extractor.stream(Person, TEXTS[2], max_new_tokens=40))[:-1]


def test_a_bad_call_fails_alone(tiny_extractor: Extractor, sync_outputs: list[Person]) -> None:
    async def gathered() -> list[Any]:
        calls = [
            tiny_extractor.aextract(Person, "   ", max_new_tokens=40),
            tiny_extractor.aextract(Person, TEXTS[0], max_new_tokens=40),
            tiny_extractor.aextract(Person, TEXTS[1], max_new_tokens=1),
        ]
        return await asyncio.gather(*calls, return_exceptions=True)

    empty, good, tiny_budget = asyncio.run(gathered())
    assert isinstance(empty, EmptyInputError)
    assert good == sync_outputs[0]
    assert isinstance(tiny_budget, InvalidOptionError)


def test_cancelling_a_call_frees_its_rows(
    tiny_extractor: Extractor, sync_outputs: list[Person]
) -> None:
    """A cancelled ``aextract`` and an ``aextract_many`` left early drop their rows at the
    worker's next turn; the calls beside them finish as if alone."""

    async def scenario() -> Any:
        many = tiny_extractor.aextract_many(Person, TEXTS * 4, max_new_tokens=40, batch_size=6)
        first = await anext(many)
        task = asyncio.create_task(tiny_extractor.aextract(Person, TEXTS[3], max_new_tokens=40))
        other = asyncio.create_task(tiny_extractor.aextract(Person, TEXTS[4], max_new_tokens=40))
        await _wait_for(lambda: _shared_rows(tiny_extractor) >= 7)
        shared = tiny_extractor._shared
        cancelled = {id(job.scheduler) for job in list(shared._jobs) if job.scheduler.max_rows}
        assert len(cancelled) == 1  # aextract_many's (batch_size=6)
        task.cancel()
        await many.aclose()
        # once the worker has let the cancelled call go, none of its rows is left
        await _wait_for(lambda: not cancelled & {id(job.scheduler) for job in shared._jobs})
        assert not cancelled & _row_owners(tiny_extractor)
        assert await other == sync_outputs[4]
        with pytest.raises(asyncio.CancelledError):
            await task
        await _wait_for(lambda: _shared_rows(tiny_extractor) == 0)
        return first

    assert asyncio.run(scenario()).value == sync_outputs[0]


def test_sync_and_async_calls_mix(tiny_extractor: Extractor, sync_outputs: list[Person]) -> None:
    from_thread: list[Any] = []

    def sync_calls() -> None:
        results = tiny_extractor.extract_many(Person, TEXTS, max_new_tokens=40, progress=False)
        from_thread.extend(r.value for r in results)

    async def both() -> list[Any]:
        thread = threading.Thread(target=sync_calls)
        thread.start()
        calls = (tiny_extractor.aextract(Person, t, max_new_tokens=40) for t in TEXTS)
        found = await asyncio.gather(*calls)
        await asyncio.to_thread(thread.join)
        return found

    assert asyncio.run(both()) == sync_outputs
    assert from_thread == sync_outputs


def test_the_event_loop_is_never_blocked(tiny_extractor: Extractor) -> None:
    """A ticker coroutine keeps running while calls decode (in the worker thread)."""

    async def scenario() -> tuple[int, float]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        running = asyncio.create_task(ticker())
        started = time.perf_counter()
        calls = (tiny_extractor.aextract(Person, t, max_new_tokens=40) for t in TEXTS)
        await asyncio.gather(*calls)
        elapsed = time.perf_counter() - started
        stop.set()
        await running
        return ticks, elapsed

    ticks, elapsed = asyncio.run(scenario())
    assert ticks >= max(3, int(elapsed / 0.005 / 4)), (ticks, elapsed)


def test_a_decorated_async_function_awaits_the_shared_batch(
    tiny_extractor: Extractor, sync_outputs: list[Person]
) -> None:
    @tiny_extractor.function(max_new_tokens=40)
    async def person(text: str) -> Person:
        """Extract the person."""
        raise NotImplementedError

    @tiny_extractor.function(max_new_tokens=40)
    def person_sync(text: str) -> Person:
        """Extract the person."""
        raise NotImplementedError

    async def calls() -> tuple[list[Any], list[Any]]:
        values = await asyncio.gather(*(person(t) for t in TEXTS[:3]))
        return values, [p async for p in person.stream(TEXTS[0])]

    values, streamed = asyncio.run(calls())
    assert values == [person_sync(t) for t in TEXTS[:3]]
    assert streamed[-1] == values[0] and isinstance(streamed[0], Partial[Person])


def test_the_asgi_example_decodes_concurrent_requests_together(
    tiny_extractor: Extractor, passes: Passes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen concurrent HTTP requests to ``examples/asgi_service.py``'s app all get a
    valid contact, in far fewer passes than sixteen requests one at a time."""
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    sys.modules.pop("asgi_service", None)
    import asgi_service

    app = asgi_service.make_app(tiny_extractor)
    single = asyncio.run(_requests(asgi_service, app, asgi_service.TEXTS[:1]))
    one_request, passes.count = passes.count, 0
    bodies = asyncio.run(asgi_service.demo(app))
    assert len(bodies) == 16
    for body in [*single, *bodies]:
        asgi_service.Contact.model_validate(body)
    assert passes.count * 4 < 16 * one_request, (passes.count, one_request)


async def _requests(module: Any, app: Any, texts: list[str]) -> list[Any]:
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://formcast") as client:
        replies = [await client.post("/contact", json={"text": t}) for t in texts]
    assert all(reply.status_code == 200 for reply in replies)
    return [reply.json() for reply in replies]


class City(BaseModel):
    city: str


def test_calls_of_different_output_types_share_the_batch(
    tiny_extractor: Extractor, sync_outputs: list[Person], passes: Passes
) -> None:
    """Each call's rows bring their own prompt prefix, so calls of different output types
    decode in the same passes."""
    city = tiny_extractor.extract(City, TEXTS[1], max_new_tokens=40)
    tiny_extractor.extract(Person, TEXTS[0], max_new_tokens=40)
    apart, passes.count = passes.count, 0

    async def gathered() -> list[Any]:
        return await asyncio.gather(
            tiny_extractor.aextract(Person, TEXTS[0], max_new_tokens=40),
            tiny_extractor.aextract(City, TEXTS[1], max_new_tokens=40),
        )

    assert asyncio.run(gathered()) == [sync_outputs[0], city]
    assert passes.count < apart, (passes.count, apart)


@pytest.mark.slow
def test_the_default_model_answers_concurrent_calls(default_extractor: Extractor) -> None:
    texts = [
        "Ana Lima (34) moved to Porto last year.",
        "Bo Chen, 27, lives in Taipei.",
        "Carla Ruiz is 45 and lives in Sevilla.",
    ]

    async def gathered() -> list[Any]:
        return await asyncio.gather(*(default_extractor.aextract(Person, t) for t in texts))

    found = asyncio.run(gathered())
    many = [r.value for r in default_extractor.extract_many(Person, texts, progress=False)]
    assert found == many
    assert all(person.name.strip() in text for person, text in zip(found, texts, strict=True))
