"""A real model: one question to OpenAI's gpt-4.1-mini, the answer on stdout.

Reads the key from OPENAI_API_KEY and the endpoint from OPENAI_BASE_URL if it
is set (a local OpenAI-compatible server, a proxy). Each retry is told on
stderr while it waits; a failure the retries did not mend (a bad key, no
network) ends the program with one line on stderr and exit status 1.
``python docs/examples/real_model.py``.
"""

import os
import sys

import trio

from trio_session import (
    AutoRetryStart,
    OpenAIProvider,
    ProviderError,
    SessionEvent,
    open_session,
)


def first_line(error: str) -> str:
    """An error's first line: the headers it quotes follow on lines of their
    own (``reply.failure`` holds them as data)."""
    return error.partition("\n")[0]


def tell_retry(event: SessionEvent) -> None:
    if isinstance(event, AutoRetryStart):
        print(
            f"retry {event.attempt}/{event.max_attempts} in "
            f"{event.delay_ms / 1000:g} s after: "
            f"{first_line(event.error_message)}",
            file=sys.stderr,
        )


async def main() -> None:
    key = os.environ.get("OPENAI_API_KEY")  # none for a local server
    async with (
        OpenAIProvider(api_key=key) as provider,
        open_session(provider, "gpt-4.1-mini") as session,
    ):
        session.subscribe(tell_retry)
        reply = await session.prompt(
            "What does HTTP 429 mean?", raise_on_error=True
        )
        print(reply.text)


if __name__ == "__main__":
    try:
        trio.run(main)
    except ProviderError as exc:
        sys.exit(f"{type(exc).__name__}: {first_line(str(exc))}")
