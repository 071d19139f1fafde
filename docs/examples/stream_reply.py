"""Stream a reply in one call, across a dropped answer:
``async with session.stream(...)``.

The first attempt streams "Backoff waits 2 s, " and then fails (a dropped
connection reads as this 503); the retry answers in full. Plain iteration
yields only the answer that stands; ``items()`` yields the text live and says
when to take back what it showed. Runs on Trio's MockClock, so the 2 s backoff
takes no real time.
``python docs/examples/stream_reply.py``.
"""

from __future__ import annotations

import trio
import trio.testing

from trio_session import FauxProvider, FauxReply, ReplyRestart, open_session

ANSWER = ("Backoff waits ", "2 s, ", "then 4 s, ", "then 8 s.")


def script() -> list[FauxReply]:
    """One attempt that fails half-way, then the whole answer."""
    dropped = ANSWER[:2]
    return [
        FauxReply(
            text="".join(dropped),
            chunks=dropped,
            chunk_delay=0.5,
            error="503 Service Unavailable",
        ),
        FauxReply(text="".join(ANSWER), chunks=ANSWER, chunk_delay=0.5),
    ]


def now(start: float) -> str:
    """Seconds since ``start``, as the docs print them."""
    return f"t={trio.current_time() - start:3.1f}s"


async def main() -> None:
    start = trio.current_time()
    async with open_session(FauxProvider(script())) as session:
        print("plain iteration: the text that stands")
        async with session.stream("How long does backoff wait?") as reply:
            async for text in reply:
                print(f"  {now(start)}  {text!r}")

    start = trio.current_time()
    async with open_session(FauxProvider(script())) as session:
        print("items(): live, with a restart mark")
        async with session.stream("How long does backoff wait?") as live:
            async for item in live.items():
                if isinstance(item, ReplyRestart):
                    print(
                        f"  {now(start)}  restart: take back {item.discarded!r}"
                    )
                else:
                    print(f"  {now(start)}  {item!r}")
    print(f"done at {now(start)}: {live.reply.text}")


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
