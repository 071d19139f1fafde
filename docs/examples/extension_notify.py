"""An extension that notifies when a retry chain gives up, and a session that
loads it.

The ``activate`` function below is all an extension file needs; pass the file
with ``--extension FILE`` on the command line, or to
``open_session(extensions=[path])``.
Run this example with ``python docs/examples/extension_notify.py``.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from trio_session import (
    AutoRetryEnd,
    AutoRetryStart,
    ExtensionAPI,
    FauxProvider,
    FauxReply,
    SessionEvent,
    open_session,
)


def activate(api: ExtensionAPI) -> None:
    """Called once when the session opens: register handlers."""

    def on_start(event: SessionEvent) -> None:
        assert isinstance(event, AutoRetryStart)
        print(
            f"[notify] attempt {event.attempt}/{event.max_attempts} "
            f"in {event.delay_ms} ms"
        )

    async def on_end(event: SessionEvent) -> None:
        assert isinstance(event, AutoRetryEnd)
        if not event.success:
            await (
                trio.lowlevel.checkpoint()
            )  # e.g. a webhook call; bounded by the runner
            print(
                f"[notify] gave up after {event.attempt} attempts: "
                f"{event.final_error}"
            )

    api.on("auto_retry_start", on_start)
    api.on("auto_retry_end", on_end)


async def main() -> None:
    provider = FauxProvider(
        [FauxReply(error="529 overloaded_error: Overloaded")] * 3
    )
    settings = {"retry": {"maxRetries": 2}}
    this_file = Path(__file__)
    async with open_session(
        provider, settings=settings, extensions=[this_file]
    ) as session:
        reply = await session.prompt("Hello?")
    print(f"prompt() returned: {reply.error_message}")


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
