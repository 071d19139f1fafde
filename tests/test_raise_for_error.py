"""Failures that can't be missed: ``raise_for_error`` and ``prompt(raise_on_error=True)``."""

from __future__ import annotations

import socket

import pytest
import trio

from trio_session import (
    AssistantMessage,
    AuthenticationError,
    ContextOverflowError,
    FauxProvider,
    FauxReply,
    OpenAIProvider,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
    open_session,
)

from .conftest import retry_settings


@pytest.mark.parametrize(
    ("text", "cls", "status", "retryable"),
    [
        ("503 Service Unavailable: the server is overloaded", OverloadedError, 503, True),
        ("529 Overloaded", OverloadedError, 529, True),
        ("429 Too Many Requests: Rate limit reached; retry-after: 7", RateLimitError, 429, True),
        ("usage limit reached for this key", RateLimitError, None, True),
        ("401 Unauthorized: Incorrect API key provided", AuthenticationError, 401, False),
        ("403 Forbidden: permission denied for model", AuthenticationError, 403, False),
        (
            "400 prompt is too long: 213462 tokens > 200000 maximum",
            ContextOverflowError,
            400,
            False,
        ),
        ("500 Internal Server Error", ServerError, 500, True),
        ("502 Bad Gateway", ServerError, 502, True),
        (
            "Connection error: timed out after 30s waiting for api.example.com to respond",
            ProviderConnectionError,
            None,
            True,
        ),
        ("400 Bad Request: invalid 'messages' field", ProviderError, 400, False),
    ],
)
def test_raise_for_error_picks_the_class_from_the_text(
    text: str, cls: type[ProviderError], status: int | None, retryable: bool
) -> None:
    """R-52: the exception class, status and retryability are read from the error text."""
    reply = AssistantMessage(stop_reason="error", error_message=text, provider="p", model="m")
    with pytest.raises(cls) as caught:
        reply.raise_for_error()
    error = caught.value
    assert type(error) is cls
    assert str(error) == text
    assert error.status == status
    assert error.retryable is retryable
    assert error.provider == "p"
    assert error.model == "m"
    assert error.reply is reply


def test_the_retry_hint_is_carried() -> None:
    """A 429 with ``retry-after: 7`` carries ``retry_after_ms == 7000``."""
    reply = AssistantMessage(stop_reason="error", error_message="429 slow down; retry-after: 7")
    with pytest.raises(RateLimitError) as caught:
        reply.raise_for_error()
    assert caught.value.retry_after_ms == 7000


@pytest.mark.parametrize("stop_reason", ["stop", "length", "toolUse", "aborted"])
def test_replies_that_did_not_fail_are_returned(stop_reason: str) -> None:
    """Only ``stop_reason == "error"`` raises; an aborted reply is the caller's own doing."""
    reply = AssistantMessage(stop_reason=stop_reason)  # type: ignore[arg-type]
    assert reply.raise_for_error() is reply


async def test_prompt_raise_on_error_raises_after_the_retries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The retries run first (2 s + 4 s); the final error is raised, typed, at t = 6 s."""
    provider = FauxProvider([FauxReply(error="503 Service Unavailable")] * 3)
    async with open_session(provider, settings=retry_settings(maxRetries=2)) as session:
        with pytest.raises(OverloadedError, match=r"^503 Service Unavailable$"):
            await session.prompt("hi", raise_on_error=True)
        assert trio.current_time() == 2.0 + 4.0
        assert not session.is_running


async def test_prompt_without_raise_on_error_returns_the_error() -> None:
    """The default is unchanged: the error is a value on the returned reply."""
    provider = FauxProvider([FauxReply(error="401 Unauthorized: bad key")])
    async with open_session(provider) as session:
        reply = await session.prompt("hi")
    assert reply.stop_reason == "error"
    with pytest.raises(AuthenticationError):
        reply.raise_for_error()


async def test_an_unreachable_server_raises_a_connection_error() -> None:
    """A real OpenAI-compatible provider at a port nobody listens on: a typed error,
    not an empty line (the providers page example of issue 14)."""
    with socket.socket() as probe:  # a free port, then closed: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with (
        OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test") as provider,
        open_session(provider, "gpt-test", settings=retry_settings(maxRetries=0)) as session,
    ):
        with pytest.raises(ProviderConnectionError) as caught:
            await session.prompt("hi", raise_on_error=True)
    assert "Connection refused" in str(caught.value)
    assert "sk-test" not in str(caught.value)
    assert caught.value.provider == "openai"
