"""An extraction web service: concurrent requests decode together in one batch.

``make_app`` builds a small Starlette app whose ``POST /contact`` endpoint awaits
``extractor.aextract``. Requests that arrive together join the extractor's shared
continuous batch: sixteen concurrent requests cost about as many decoding passes as one
``extract_many`` of the same sixteen texts, not sixteen times one request's. The event
loop keeps serving while the model decodes (decoding runs in the extractor's worker
thread).

Serve it with any ASGI server (``uvicorn examples.asgi_service:app``), or run this file:
it sends sixteen concurrent requests to the app in-process, with httpx.

    pip install starlette httpx        # not needed by formcast itself
    python examples/asgi_service.py
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel, Field
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import formcast


class Contact(BaseModel):
    name: str = Field(description="the person's full name")
    city: str = Field(description="the city the person lives in")
    age: int = Field(description="the person's age in years")


def make_app(extractor: formcast.Extractor) -> Starlette:
    """The service: ``POST /contact`` with ``{"text": ...}`` returns the contact's JSON, or
    a 422 response naming the error."""

    async def contact(request: Request) -> JSONResponse:
        body = await request.json()
        try:
            found = await extractor.aextract(Contact, body.get("text", ""), max_new_tokens=48)
        except formcast.FormcastError as error:
            return JSONResponse({"error": str(error)}, status_code=422)
        return JSONResponse(found.model_dump())

    return Starlette(routes=[Route("/contact", contact, methods=["POST"])])


PEOPLE = [
    ("Ana Lima", "Porto", 34),
    ("Bo Chen", "Taipei", 27),
    ("Carla Ruiz", "Sevilla", 45),
    ("Dev Patel", "Leeds", 31),
    ("Eva Novak", "Brno", 52),
    ("Femi Ade", "Lagos", 29),
    ("Gus Berg", "Malmo", 61),
    ("Hana Sato", "Osaka", 38),
]
TEXTS = [f"{name} ({age}) moved to {city} last year." for name, city, age in PEOPLE] * 2


async def demo(app: Starlette) -> list[Any]:
    """Sixteen concurrent requests to ``app``, in-process; their JSON bodies."""
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://formcast") as client:
        replies = await asyncio.gather(
            *(client.post("/contact", json={"text": text}, timeout=600) for text in TEXTS)
        )
    return [reply.json() for reply in replies]


def main() -> int:
    started = time.perf_counter()
    bodies = asyncio.run(demo(make_app(formcast.get_default_extractor())))
    for text, body in zip(TEXTS, bodies, strict=True):
        print(f"{text}\n  -> {body}")
    print(f"{len(bodies)} concurrent requests in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
