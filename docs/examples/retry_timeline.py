"""Print the default retry timeline: two 503s, then an answer.

Runs on Trio's MockClock, so the 2 s + 4 s of backoff take no real time and the
printed times are exact. Run it with ``python docs/examples/retry_timeline.py``.
"""

from __future__ import annotations

import trio
import trio.testing

from trio_session import (
    FauxProvider,
    FauxReply,
    SessionEvent,
    event_to_json,
    open_session,
)

SHOWN = {"agent_start", "agent_end", "auto_retry_start", "auto_retry_end"}


def show(event: SessionEvent) -> None:
    if event.type in SHOWN:
        fields = event_to_json(event)
        fields.pop("messages", None)
        print(f"t={trio.current_time():4.1f}s  {fields}")


async def main() -> None:
    provider = FauxProvider(
        [
            FauxReply(error="503 Service Unavailable"),
            FauxReply(error="503 Service Unavailable"),
            FauxReply(text="Hello!"),
        ]
    )
    async with open_session(provider) as session:
        session.subscribe(show)
        reply = await session.prompt("Say hello")
        print(
            f"t={trio.current_time():4.1f}s  prompt() returned: {reply.text!r}"
        )


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
