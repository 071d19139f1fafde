"""Quick start (offline): the first reply fails with 503; the session waits,
then asks again."""

import trio

from trio_session import (
    AutoRetryStart,
    FauxProvider,
    FauxReply,
    SessionEvent,
    open_session,
)


def show(event: SessionEvent) -> None:
    if isinstance(event, AutoRetryStart):
        print(
            f"retry {event.attempt} of {event.max_attempts} "
            f"in {event.delay_ms} ms"
        )


async def main() -> None:
    provider = FauxProvider(
        [FauxReply(error="503 Service Unavailable"), FauxReply(text="Hi!")]
    )
    async with open_session(
        provider, settings={"retry": {"baseDelayMs": 100}}
    ) as session:
        session.subscribe(show)
        reply = await session.prompt("Say hello")
        print(reply.text)


if __name__ == "__main__":
    trio.run(main)
