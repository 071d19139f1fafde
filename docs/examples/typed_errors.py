"""Failures you can't miss: typed exceptions instead of an error value.

An OpenAI-compatible server that nobody runs (a closed port on 127.0.0.1): with
``raise_on_error=True`` the prompt raises ``ProviderConnectionError`` — a
``ProviderError`` — instead of returning an empty reply.
``python docs/examples/typed_errors.py``.
"""

from __future__ import annotations

import socket

import trio

from trio_session import (
    OpenAIProvider,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    open_session,
)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def main() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    settings = {
        "retry": {"maxRetries": 1, "baseDelayMs": 100}
    }  # one quick retry
    async with (
        OpenAIProvider(base_url=url, api_key="sk-example") as provider,
        open_session(provider, "gpt-4o-mini", settings=settings) as session,
    ):
        try:
            await session.prompt("hello?", raise_on_error=True)
        except RateLimitError as exc:
            print(
                f"rate limited; the server asks to wait {exc.retry_after_ms} ms"
            )
        except ProviderConnectionError as exc:
            print(f"{type(exc).__name__} from {exc.provider}: {exc}")
            print(f"retryable: {exc.retryable}")
        except ProviderError as exc:
            print(f"the provider said {exc.status}: {exc}")


if __name__ == "__main__":
    trio.run(main)
