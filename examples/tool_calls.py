"""Tool calls in the style of Llama 3.1's custom tools: ``<function=NAME>{...}</function>``.

A GBNF grammar fixes the call's frame and the tool names; each tool's arguments are a
Pydantic model embedded with ``rules=``, so the JSON between the tags always validates.

    python examples/tool_calls.py
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel

import formcast


class WeatherArguments(BaseModel):
    city: str
    unit: Literal["celsius", "fahrenheit"]


class ReminderArguments(BaseModel):
    text: str
    minutes: int


TOOLS = {"get_weather": WeatherArguments, "set_reminder": ReminderArguments}

CALL = formcast.Grammar(
    """
root           ::= weather-call | reminder-call
weather-call   ::= "<function=get_weather>" weather-args "</function>"
reminder-call  ::= "<function=set_reminder>" reminder-args "</function>"
""",
    rules={"weather-args": WeatherArguments, "reminder-args": ReminderArguments},
)

INSTRUCTIONS = (
    "Call one tool for the request: get_weather(city, unit) for a weather question, "
    "set_reminder(text, minutes) to be reminded of something later. Answer with "
    "<function=NAME>{JSON arguments}</function>."
)

REQUESTS = [
    "What's the weather like in Lisbon today? I prefer celsius.",
    "Remind me to call my sister in 20 minutes.",
]

_CALL = re.compile(r"<function=(\w+)>(.*)</function>", re.DOTALL)


def main() -> int:
    for request in REQUESTS:
        text = formcast.extract(CALL, request, instructions=INSTRUCTIONS, max_new_tokens=96)
        match = _CALL.fullmatch(text)
        assert match is not None  # the grammar guarantees the frame
        name, arguments = match.groups()
        parsed = TOOLS[name].model_validate_json(arguments)  # and valid arguments
        print(f"{request!r}\n  -> {name} {parsed!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
