"""A tool made from a plain function, and a model that gets its arguments
wrong once.

``@tool`` reads the JSON schema from the type hints and the descriptions from
the docstring. The scripted model first sends a unit the tool does not know; it
gets the problem back as an error result, and tries again. Run this example with
``python docs/examples/tools.py``.
"""

from __future__ import annotations

import json
from typing import Literal

import trio

from trio_session import (
    FauxProvider,
    FauxReply,
    ToolCall,
    ToolResultMessage,
    open_session,
    tool,
)


@tool
def get_weather(
    city: str, unit: Literal["c", "f"] = "c", days: int | None = None
) -> dict[str, object]:
    """Get the weather forecast for a city.

    Args:
        city: the city's name, in English.
        unit: Celsius or Fahrenheit.
        days: how many days ahead; today only if not given.
    """
    temperature = 21 if unit == "c" else 70
    return {
        "city": city,
        "temperature": temperature,
        "unit": unit,
        "days": days or 1,
    }


async def main() -> None:
    print(f"{get_weather.name}: {get_weather.description}")
    print(json.dumps(get_weather.parameters, indent=2))
    provider = FauxProvider(
        [
            FauxReply(
                tool_calls=[
                    ToolCall("1", "get_weather", {"city": "Oslo", "unit": "k"})
                ]
            ),
            FauxReply(
                tool_calls=[
                    ToolCall("2", "get_weather", {"city": "Oslo", "unit": "c"})
                ]
            ),
            FauxReply(text="It is 21 °C in Oslo."),
        ]
    )
    async with open_session(provider, tools=[get_weather]) as session:
        reply = await session.prompt("How warm is it in Oslo?")
        for message in session.history:
            if isinstance(message, ToolResultMessage):
                outcome = "error" if message.is_error else "ok"
                print(f"tool result ({outcome}): {message.text}")
    print(f"reply: {reply.text}")


if __name__ == "__main__":
    trio.run(main)
