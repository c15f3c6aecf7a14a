"""Code that the Ray workers of the tests import: this folder is on their PYTHONPATH.

- The output types the Ray tests extract (an actor unpickles a class by importing it).
- :func:`setup_worker`, the tests' ``worker_process_setup_hook``: it runs first in every
  worker process and instruments formcast there, for the tests to observe:
  * each constraint compiled (each byte automaton built) appends the worker's pid to the
    file named by ``$FORMCAST_TEST_COMPILE_LOG``;
  * while the file named by ``$FORMCAST_TEST_CRASH_FLAG`` exists and holds a text, the
    first worker asked to extract from a batch holding that text renames the file (so
    that it happens once) and exits on the spot, as a killed process would.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field

COMPILE_LOG_ENV = "FORMCAST_TEST_COMPILE_LOG"
CRASH_FLAG_ENV = "FORMCAST_TEST_CRASH_FLAG"
CRASHED_SUFFIX = ".crashed"


class Item(BaseModel):
    name: str = Field(max_length=12)
    quantity: int = Field(ge=0, le=99)


def compile_here(model_dir: str) -> int:
    """Compile :class:`Item` in this process, without the disk cache; returns the pid.
    (Run as a Ray task, it shows that the compile counter works in workers.)"""
    from transformers import AutoTokenizer

    import formcast

    formcast.compile(Item, AutoTokenizer.from_pretrained(model_dir), cache=False)
    return os.getpid()


def setup_worker() -> None:
    if os.environ.get(COMPILE_LOG_ENV):
        _count_compiles(os.environ[COMPILE_LOG_ENV])
    if os.environ.get(CRASH_FLAG_ENV):
        _crash_once(os.environ[CRASH_FLAG_ENV])


def _count_compiles(log: str) -> None:
    from formcast.automaton import LazyAutomaton

    build = LazyAutomaton.__init__

    def counted(self: LazyAutomaton, *args: Any, **kwargs: Any) -> None:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
        build(self, *args, **kwargs)

    LazyAutomaton.__init__ = counted  # type: ignore[method-assign]


def _crash_once(flag: str) -> None:
    from formcast.extraction.extractor import Extractor

    extract_many = Extractor.extract_many

    def crashing(self: Extractor, output: Any, texts: Any, **kwargs: Any) -> Any:
        texts = list(texts)
        try:
            with open(flag, encoding="utf-8") as handle:
                trigger = handle.read()
        except FileNotFoundError:
            trigger = ""
        if trigger and trigger in texts:
            try:
                os.rename(flag, flag + CRASHED_SUFFIX)  # atomic: one worker wins
            except FileNotFoundError:
                pass
            else:
                os._exit(17)
        return extract_many(self, output, texts, **kwargs)

    Extractor.extract_many = crashing  # type: ignore[method-assign]
