"""The parse loop of a regex into its byte NFA in C (``_regex_parse.c``); see
:meth:`formcast.automaton.parse._Builder.parse_body`."""

from typing import Any

def parse_body(
    builder: Any, pos: int, size: int, dotall: bool, context: tuple[Any, ...], /
) -> tuple[int, int, int, int, int, int]: ...
