"""Stream a reply in one call, across a retry:
``async with session.stream(...)``.

The provider fails once with 503, then answers in chunks. Runs on Trio's
MockClock, so the 2 s backoff takes no real time.
``python docs/examples/stream_reply.py``.
"""

from __future__ import annotations

import trio
import trio.testing

from trio_session import FauxProvider, FauxReply, open_session


async def main() -> None:
    provider = FauxProvider(
        [
            FauxReply(error="503 Service Unavailable"),
            FauxReply(
                text="Backoff waits 2 s, then 4 s, then 8 s.",
                chunks=(
                    "Backoff waits ",
                    "2 s, ",
                    "then 4 s, ",
                    "then 8 s.",
                ),
            ),
        ]
    )
    async with open_session(provider) as session:
        async with session.stream("How long does backoff wait?") as reply:
            async for delta in reply:
                print(f"t={trio.current_time():3.1f}s  {delta!r}")
        print(f"done at t={trio.current_time():3.1f}s: {reply.reply.text}")


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
