"""Real HTTP providers under AgentSession: the retry policy sees what real servers send.

End to end, on pytest-trio's ``autojump_clock``: the session's backoff sleeps are
virtual, and the loopback HTTP exchanges take no virtual time at all — a byte written
to a 127.0.0.1 socket is readable at once, so trio never finds every task blocked with
I/O still pending, and never jumps the clock in the middle of an exchange. That is why
the HTTP run's schedule can be compared with the faux provider's to the exact second.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionStart,
    FauxProvider,
    FauxReply,
    Provider,
    SessionEvent,
    open_session,
)
from trio_session.providers._anthropic import AnthropicProvider
from trio_session.providers._openai import OpenAIProvider
from trio_session.testing import EventRecorder

from .http_server import ScriptedServer, event_stream, respond, sse

NGINX_503 = (
    "<html><head><title>503 Service Temporarily Unavailable</title></head><body><center>"
    "<h1>503 Service Temporarily Unavailable</h1></center><hr><center>nginx</center></body>"
    "</html>"
)
ERROR_503 = "503 Service Unavailable: 503 Service Temporarily Unavailable nginx"
USER_ONLY = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


def chunk(content: str | None = None, finish: str | None = None) -> str:
    """A Chat Completions chunk for choice 0."""
    delta = {} if content is None else {"content": content}
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, port 0, running in the test's nursery."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def openai(server: ScriptedServer) -> AsyncIterator[OpenAIProvider]:
    """An OpenAIProvider pointed at the server, closed after the test."""
    async with OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test") as provider:
        yield provider


async def prompt_once(provider: Provider) -> tuple[EventRecorder, AssistantMessage, list[Any]]:
    """Prompt "Hi" on a fresh session; return its events, reply and history."""
    async with open_session(provider, "gpt-test") as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("Hi")
        history = list(session.history)
    return recorder, reply, history


def relative(times: list[float]) -> list[float]:
    """Times relative to the first one."""
    return [t - times[0] for t in times]


async def test_two_503s_then_success_matches_faux(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """R-16, R-20a, R-22, R-28a, R-52: over HTTP, the same events and schedule as faux."""
    faux = FauxProvider(
        [FauxReply(error="503 Service Unavailable")] * 2 + [FauxReply(text="Hello")]
    )
    faux_events, faux_reply, _ = await prompt_once(faux)

    server.script(
        respond(503, NGINX_503, content_type="text/html"),
        respond(503, NGINX_503, content_type="text/html"),
        event_stream([chunk("Hello"), chunk(finish="stop"), "data: [DONE]\n\n"]),
    )
    http_events, http_reply, history = await prompt_once(openai)

    assert http_events.types == faux_events.types
    assert relative(http_events.times) == relative(faux_events.times)
    assert relative(http_events.times_of("agent_start")) == [0.0, 2.0, 6.0]
    assert (http_reply.text, http_reply.stop_reason) == (faux_reply.text, "stop")
    assert [e.error_message for e in http_events.of(AutoRetryStart)] == [ERROR_503] * 2
    assert http_events.of(AutoRetryEnd) == [AutoRetryEnd(success=True, attempt=2)]
    # The server saw exactly three requests, at t = 0, 2, 6; none carried a failed message.
    assert len(server.requests) == 3
    assert relative([r.time for r in server.requests]) == [0.0, 2.0, 6.0]
    assert [body["messages"] for body in server.bodies] == [USER_ONLY] * 3
    # History keeps both errors; they came from this provider.
    errors = [m for m in history if isinstance(m, AssistantMessage) and m.stop_reason == "error"]
    assert [(m.error_message, m.provider) for m in errors] == [(ERROR_503, "openai")] * 2


async def test_abort_mid_stream_disconnects_at_once(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """R-32: abort() while a response streams; the server sees the hang-up in the same pass."""
    server.script(event_stream([chunk("Hel")], after="wait_for_disconnect"))
    async with open_session(openai, "gpt-test") as session:
        streaming = trio.Event()

        def on_event(event: SessionEvent) -> None:
            if event.type == "message_update":
                streaming.set()

        session.subscribe(on_event)
        replies: list[AssistantMessage] = []

        async def prompt() -> None:
            replies.append(await session.prompt("Hi"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await streaming.wait()
            aborted_at = trio.current_time()
            await session.abort()
        await trio.testing.wait_all_tasks_blocked()
        assert server.disconnects == [aborted_at]  # no virtual time passed
        (reply,) = replies
        assert (reply.stop_reason, reply.text) == ("aborted", "Hel")
        assert session.history[-1] == reply
        assert not session.is_running


async def test_abort_retry_cancels_the_streaming_reattempt(
    server: ScriptedServer, openai: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """R-31: abort_retry() during the re-sent request closes its connection; chain ends."""
    server.script(
        respond(503, NGINX_503, content_type="text/html"),
        event_stream([chunk("Hel")], after="wait_for_disconnect"),
    )
    async with open_session(openai, "gpt-test") as session:
        recorder = EventRecorder.attach(session)

        def on_event(event: SessionEvent) -> None:
            if event.type == "message_update":
                session.abort_retry()

        session.subscribe(on_event)
        reply = await session.prompt("Hi")
    assert (reply.stop_reason, reply.text) == ("aborted", "Hel")
    assert recorder.of(AutoRetryEnd) == [
        AutoRetryEnd(success=False, attempt=1, final_error="Retry cancelled")
    ]
    assert len(server.disconnects) == 1
    assert len(server.requests) == 2


async def test_anthropic_overflow_goes_to_compaction(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """R-2, R-7: Anthropic's real "prompt is too long" 400 is an overflow, never retried."""
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 213462 tokens > 200000 maximum",
        },
    }
    server.script(respond(400, body))
    async with AnthropicProvider(base_url=server.url, api_key="sk-ant-test") as provider:
        events, reply, _ = await prompt_once(provider)
    assert events.of(AutoRetryStart) == []
    assert events.of(CompactionStart)[:1] == [CompactionStart(reason="overflow")]
    assert server.requests[0].path == "/v1/messages"
    assert reply.stop_reason == "error"
