"""AnthropicProvider against a real HTTP server on 127.0.0.1: Messages streaming and faults.

Each test scripts :class:`~tests.http_server.ScriptedServer` with the Messages API's
named events or error bodies and asserts the whole ``errorMessage`` (R-52).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    AssistantMessage,
    ImageContent,
    Model,
    ProviderRequest,
    StreamEnd,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    parse_retry_after_ms,
)
from trio_session._core.rate_headers import RateDimension, RateLimitHeaders
from trio_session.providers._anthropic import AnthropicProvider
from trio_session.providers._error_text import STREAM_CUT_MESSAGE

from .http_server import ScriptedServer, closed_port, event_stream, respond, sse
from .provider_support import RecordingSink, decision
from .wording import reason

KEY = "sk-ant-api03-Secret0123456789abcdef"
MODEL = Model(id="claude-test", provider="anthropic")
REQUEST = ProviderRequest(model=MODEL, messages=(UserMessage("Hi", timestamp=0),), api_key=KEY)


def event(kind: str, **fields: Any) -> str:
    """One named Messages API event, its ``type`` repeated in the data as the API does."""
    return sse({"type": kind, **fields}, event=kind)


def message_start(input_tokens: int = 25, cache_read: int = 0, cache_write: int = 0) -> str:
    """``message_start`` with the initial usage."""
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": 1,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
    }
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-test",
        "stop_reason": None,
        "usage": usage,
    }
    return event("message_start", message=message)


def text_block(index: int, *pieces: str) -> list[str]:
    """A text content block streamed in ``pieces``."""
    return [
        event("content_block_start", index=index, content_block={"type": "text", "text": ""}),
        *(
            event("content_block_delta", index=index, delta={"type": "text_delta", "text": p})
            for p in pieces
        ),
        event("content_block_stop", index=index),
    ]


def tool_block(index: int, id: str, name: str, *json_parts: str) -> list[str]:
    """A tool_use content block whose input streams as ``input_json_delta`` parts."""
    start = {"type": "tool_use", "id": id, "name": name, "input": {}}
    return [
        event("content_block_start", index=index, content_block=start),
        *(
            event(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": part},
            )
            for part in json_parts
        ),
        event("content_block_stop", index=index),
    ]


def message_end(stop_reason: str, output_tokens: int) -> list[str]:
    """``message_delta`` with the stop reason and final output tokens, then ``message_stop``."""
    return [
        event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        event("message_stop"),
    ]


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    """An error body in Anthropic's shape."""
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_01"}


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, port 0, running in the test's nursery."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def provider(server: ScriptedServer) -> AsyncIterator[AnthropicProvider]:
    """An AnthropicProvider pointed at the server, 5 s timeouts, closed after the test."""
    async with AnthropicProvider(base_url=server.url, timeout=5.0, max_tokens=1024) as provider:
        yield provider


async def ask(
    provider: AnthropicProvider, request: ProviderRequest = REQUEST
) -> tuple[StreamEnd, RecordingSink]:
    """Stream one request; return how it ended and what was streamed."""
    sink = RecordingSink()
    end = await provider.stream(request, sink)
    return end, sink


# -- success ------------------------------------------------------------------------------


async def test_streamed_text_and_usage(server: ScriptedServer, provider: AnthropicProvider) -> None:
    """Text deltas stream; usage has input, output, cache read and cache write; pings ignored."""
    server.script(
        event_stream(
            [
                message_start(input_tokens=30, cache_read=1000, cache_write=200),
                event("ping"),
                *text_block(0, "Hel", "lo!"),
                *message_end("end_turn", output_tokens=6),
            ]
        )
    )
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="end_turn")
    assert sink.deltas == ["Hel", "lo!"]
    assert sink.last_usage == Usage(input=30, output=6, cache_read=1000, cache_write=200)
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.json() == {
        "model": "claude-test",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
    }


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length")],
)
async def test_stop_reasons(
    server: ScriptedServer, provider: AnthropicProvider, stop_reason: str, expected: str
) -> None:
    """end_turn and stop_sequence stop; max_tokens is "length"."""
    server.script(
        event_stream([message_start(), *text_block(0, "x"), *message_end(stop_reason, 1)])
    )
    end, _ = await ask(provider)
    assert end == StreamEnd(stop_reason=expected, raw_stop_reason=stop_reason)  # type: ignore[arg-type]


async def test_tool_use(server: ScriptedServer, provider: AnthropicProvider) -> None:
    """A tool_use block's input_json_delta parts become one tool call: toolUse."""
    server.script(
        event_stream(
            [
                message_start(),
                *text_block(0, "Reading."),
                *tool_block(1, "toolu_01", "read", '{"pa', 'th": "a.txt"}'),
                *tool_block(2, "toolu_02", "ls"),
                *message_end("tool_use", 40),
            ]
        )
    )
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="toolUse", raw_stop_reason="tool_use")
    assert sink.joined == "Reading."
    assert sink.tool_calls == [
        ToolCall(id="toolu_01", name="read", arguments={"path": "a.txt"}),
        ToolCall(id="toolu_02", name="ls", arguments={}),
    ]


async def test_context_and_tools_on_the_wire(
    server: ScriptedServer, provider: AnthropicProvider
) -> None:
    """System prompt, tool_use / tool_result blocks (results merged), tools with input_schema."""
    server.script(
        event_stream([message_start(), *text_block(0, "ok"), *message_end("end_turn", 1)])
    )
    messages = (
        UserMessage("Read both", timestamp=0),
        AssistantMessage(
            content=(
                TextContent("Reading."),
                ToolCall("toolu_a", "read", {"path": "a"}),
                ToolCall("toolu_b", "read", {"path": "b"}),
            ),
            stop_reason="toolUse",
        ),
        ToolResultMessage("toolu_a", "read", (TextContent("A"),)),
        ToolResultMessage("toolu_b", "read", (TextContent("no such file"),), is_error=True),
    )
    tool = ToolSpec("read", "Read a file", {"type": "object", "properties": {}})
    request = ProviderRequest(MODEL, messages, system_prompt="Be brief.", tools=(tool,))
    end, _ = await ask(provider, request)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="end_turn")
    body = server.requests[0].json()
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {"role": "user", "content": "Read both"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read", "input": {"path": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "no such file",
                    "is_error": True,
                },
            ],
        },
    ]
    assert body["tools"] == [
        {
            "name": "read",
            "description": "Read a file",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    assert "x-api-key" not in server.requests[0].headers  # no key anywhere: none sent


async def test_tool_results_with_images(
    server: ScriptedServer, provider: AnthropicProvider
) -> None:
    """Tool results as pi 1.6.0 sends them: text parts joined by newlines; with images,
    text and image blocks, ``(see attached image)`` first when there is no text."""
    server.script(
        event_stream([message_start(), *text_block(0, "ok"), *message_end("end_turn", 1)])
    )
    png = ImageContent("aW1n", "image/png")
    calls = tuple(ToolCall(f"toolu_{n}", "read", {}) for n in "abc")
    messages = (
        UserMessage("look", timestamp=0),
        AssistantMessage(content=calls, stop_reason="toolUse"),
        ToolResultMessage("toolu_a", "read", (TextContent("one"), TextContent("two"))),
        ToolResultMessage("toolu_b", "read", (TextContent("Read image file [image/png]"), png)),
        ToolResultMessage("toolu_c", "read", (png,)),
    )
    reads: Any = ("text", "image")  # Any: as providers/_models.py (Model.input's converter)
    await ask(
        provider,
        ProviderRequest(Model(id="claude-test", provider="anthropic", input=reads), messages),
    )
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aW1n"},
    }
    assert server.requests[0].json()["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "one\ntwo"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": [{"type": "text", "text": "Read image file [image/png]"}, image],
        },
        {
            "type": "tool_result",
            "tool_use_id": "toolu_c",
            "content": [{"type": "text", "text": "(see attached image)"}, image],
        },
    ]


# -- HTTP errors (R-52) ---------------------------------------------------------------------

RATE_LIMIT = (
    "This request would exceed the rate limit for your organization"
    " (7d8c1b2a-ffee-4c1d-9d1e-abcdefabcdef) of 30,000 input tokens per minute. For details,"
    " refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers"
    " for current usage. Please reduce the prompt length or the maximum tokens requested, or"
    " try again later."
)

HTTP_ERRORS = [
    pytest.param(
        respond(529, anthropic_error("overloaded_error", "Overloaded")),
        "529: Overloaded (overloaded_error)",
        "retry",
        id="529-overloaded",
    ),
    pytest.param(
        respond(
            429,
            anthropic_error("rate_limit_error", RATE_LIMIT),
            [("retry-after", "14"), ("anthropic-ratelimit-input-tokens-remaining", "0")],
        ),
        f"429 Too Many Requests: {RATE_LIMIT} (rate_limit_error)\nretry-after: 14",
        "retry",
        id="429-retry-after",
    ),
    pytest.param(
        respond(500, anthropic_error("api_error", "Internal server error")),
        "500 Internal Server Error (api_error)",
        "retry",
        id="500-api-error",
    ),
    pytest.param(
        respond(
            400,
            anthropic_error(
                "invalid_request_error", "prompt is too long: 213462 tokens > 200000 maximum"
            ),
        ),
        "400 Bad Request: prompt is too long: 213462 tokens > 200000 maximum"
        " (invalid_request_error)",
        "overflow",
        id="400-prompt-too-long",
    ),
    pytest.param(
        respond(413, anthropic_error("request_too_large", "Request exceeds the maximum size")),
        f"413 {reason(413)}: Request exceeds the maximum size (request_too_large)",
        "overflow",
        id="413-request-too-large",
    ),
    pytest.param(
        respond(401, anthropic_error("authentication_error", "invalid x-api-key")),
        "401 Unauthorized: invalid x-api-key (authentication_error)",
        "none",
        id="401",
    ),
    pytest.param(
        respond(
            404, anthropic_error("not_found_error", "model: claude-none"), [("retry-after", "1")]
        ),
        "404 Not Found: model: claude-none (not_found_error)",
        "none",
        id="404",
    ),
]


@pytest.mark.parametrize(("step", "expected", "decided"), HTTP_ERRORS)
async def test_http_error_becomes_message(
    server: ScriptedServer,
    provider: AnthropicProvider,
    step: Any,
    expected: str,
    decided: str,
) -> None:
    """R-52: status, the API's error message and type, retry hints where waiting helps."""
    server.script(step)
    end, _ = await ask(provider)
    assert end == StreamEnd.error(expected)
    assert decision(end.error_message) == decided
    assert len(server.requests) == 1  # R-28a: the adapter never retries by itself


async def test_429_hint_is_parsed() -> None:
    """R-18: a 429's retry-after line is read by parse_retry_after_ms."""
    assert parse_retry_after_ms(str(HTTP_ERRORS[1].values[1])) == 14_000


async def test_401_echoed_key_is_redacted(
    server: ScriptedServer, provider: AnthropicProvider
) -> None:
    """The key never reaches errorMessage, even when the server repeats it."""
    server.script(respond(401, anthropic_error("authentication_error", f"invalid x-api-key {KEY}")))
    end, _ = await ask(provider)
    assert end == StreamEnd.error(
        "401 Unauthorized: invalid x-api-key [redacted] (authentication_error)"
    )
    assert decision(end.error_message) == "none"


# -- faults inside the stream and below HTTP --------------------------------------------------


async def test_overloaded_error_event_mid_stream(
    server: ScriptedServer, provider: AnthropicProvider
) -> None:
    """An SSE error event (overloaded mid-answer) ends the stream, retryable, text kept."""
    server.script(
        event_stream(
            [
                message_start(),
                *text_block(0, "Hel")[:2],
                event("error", error={"type": "overloaded_error", "message": "Overloaded"}),
            ]
        )
    )
    end, sink = await ask(provider)
    assert end == StreamEnd.error("529 overloaded_error: Overloaded")
    assert sink.joined == "Hel"
    assert decision(end.error_message) == "retry"


async def test_stream_cut_before_message_stop(
    server: ScriptedServer, provider: AnthropicProvider
) -> None:
    """Reset after a few events: a connection error, retried; the partial text stays."""
    server.script(event_stream([message_start(), *text_block(0, "Hel", "lo")[:3]], after="reset"))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(STREAM_CUT_MESSAGE)
    assert sink.joined == "Hello"
    assert decision(end.error_message) == "retry"


async def test_clean_end_without_message_stop(
    server: ScriptedServer, provider: AnthropicProvider
) -> None:
    """A body that ends cleanly but before any stop_reason was cut upstream."""
    server.script(event_stream([message_start(), *text_block(0, "Hel")]))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(STREAM_CUT_MESSAGE)
    assert sink.joined == "Hel"


async def test_invalid_json_event(server: ScriptedServer, provider: AnthropicProvider) -> None:
    """An event whose data is not JSON: a clear error, not retried."""
    server.script(event_stream([message_start(), "event: content_block_delta\ndata: {oops\n\n"]))
    end, _ = await ask(provider)
    assert end == StreamEnd.error(
        "Invalid response from server: event stream data is not valid JSON"
    )
    assert decision(end.error_message) == "none"


async def test_connection_refused() -> None:
    """Nothing listening: "Connection error", which R-5 retries."""
    port = closed_port()
    async with AnthropicProvider(base_url=f"http://127.0.0.1:{port}") as provider:
        end, _ = await ask(provider)
    assert end == StreamEnd.error(
        f"Connection error: could not connect to 127.0.0.1:{port} (Connection refused)"
    )
    assert decision(end.error_message) == "retry"


async def test_slow_server_times_out(
    server: ScriptedServer, provider: AnthropicProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """Headers sent, then nothing for longer than the read timeout: retried, at t+5 exactly."""
    server.script(event_stream([message_start()], after="silence"))
    start = trio.current_time()
    end, _ = await ask(provider)
    assert trio.current_time() - start == 5.0
    assert end == StreamEnd.error(
        "Connection error: timed out after 5s waiting for more of the response from"
        f" 127.0.0.1:{server.port}"
    )
    assert decision(end.error_message) == "retry"


async def test_pings_keep_a_slow_answer_alive(
    server: ScriptedServer, provider: AnthropicProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """Pings every 4 s keep the read timeout (5 s) from firing during a long think."""
    server.script(
        event_stream(
            [
                message_start(),
                event("ping"),
                event("ping"),
                *text_block(0, "done"),
                *message_end("end_turn", 1),
            ],
            delay=4,
        )
    )
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="end_turn")
    assert sink.joined == "done"


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        (
            "tool_use",
            StreamEnd.error(
                "Invalid response from server: the input of tool call 'read' is not a JSON object"
            ),
        ),
        ("max_tokens", StreamEnd(stop_reason="length", raw_stop_reason="max_tokens")),
    ],
)
async def test_tool_input_that_is_not_json(
    server: ScriptedServer, provider: AnthropicProvider, stop_reason: str, expected: StreamEnd
) -> None:
    """Broken tool input is an error, unless max_tokens cut it off (then just "length")."""
    server.script(
        event_stream(
            [
                message_start(),
                *tool_block(0, "toolu_1", "read", '{"pa'),
                *message_end(stop_reason, 9),
            ]
        )
    )
    end, sink = await ask(provider)
    assert end == expected
    assert sink.tool_calls == []


# -- reasoning (issue 12: pi's thinking_* events) ---------------------------------------------


def thinking_block(index: int, signature: str, *pieces: str) -> list[str]:
    """A thinking content block streamed in ``pieces``, then its signature."""
    start = {"type": "thinking", "thinking": ""}
    return [
        event("content_block_start", index=index, content_block=start),
        *(
            event(
                "content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": p}
            )
            for p in pieces
        ),
        event(
            "content_block_delta",
            index=index,
            delta={"type": "signature_delta", "signature": signature},
        ),
        event("content_block_stop", index=index),
    ]


async def test_thinking_streams_and_goes_back_signed(
    server: ScriptedServer, provider: AnthropicProvider
) -> None:
    """Thinking blocks stream as pi's thinking_start/delta/end into a ThinkingContent with
    its signature, and the next request sends the block back first and verbatim (the API
    wants it before the turn's tool_use); an unsigned one is left out."""
    from trio_session import open_session
    from trio_session._core.messages import ThinkingContent
    from trio_session.providers._anthropic import anthropic_messages

    server.script(
        event_stream(
            [
                message_start(),
                *thinking_block(0, "sig-1", "Let me ", "think."),
                *text_block(1, "Done."),
                *message_end("end_turn", 9),
            ]
        ),
        event_stream([message_start(), *text_block(0, "Again."), *message_end("end_turn", 3)]),
    )
    async with open_session(provider, MODEL) as session:
        events: list[Any] = []
        session.subscribe(events.append)
        first = await session.prompt("Think")
        await session.prompt("More")
    assert first.content == (
        ThinkingContent("Let me think.", thinking_signature="sig-1"),
        TextContent("Done."),
    )
    updates = [e.assistant_message_event for e in events if e.type == "message_update"]
    kinds = [(u["type"], u["contentIndex"]) for u in updates]
    assert kinds[:5] == [
        ("thinking_start", 0),
        ("thinking_delta", 0),
        ("thinking_delta", 0),
        ("thinking_end", 0),
        ("text_start", 1),
    ]
    assert updates[3]["content"] == "Let me think."
    sent = server.requests[1].json()["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "sig-1"},
            {"type": "text", "text": "Done."},
        ],
    }
    unsigned = AssistantMessage([ThinkingContent("private"), TextContent("ok")])
    assert anthropic_messages((unsigned,)) == [
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    ]


async def test_rate_limit_headers_ride_on_every_answer(
    server: ScriptedServer, provider: AnthropicProvider
) -> None:
    """R-69: Anthropic's ``anthropic-ratelimit-*`` headers are read from a success and from
    a 429 alike, the reset counted from the response's ``date``; none sent, none read."""
    stated = (
        ("date", "Sun, 06 Dec 2026 08:00:00 GMT"),
        ("anthropic-ratelimit-requests-limit", "50"),
        ("anthropic-ratelimit-requests-remaining", "49"),
        ("anthropic-ratelimit-requests-reset", "2026-12-06T08:00:01Z"),
        ("anthropic-ratelimit-tokens-limit", "40000"),
        ("anthropic-ratelimit-tokens-remaining", "0"),
        ("anthropic-ratelimit-tokens-reset", "2026-12-06T08:00:30Z"),
    )
    server.script(
        event_stream(
            [message_start(), *text_block(0, "Hi"), *message_end("end_turn", 1)],
            headers=stated,
        ),
        respond(429, anthropic_error("rate_limit_error", "Slow down"), stated),
        event_stream([message_start(), *text_block(0, "Hi"), *message_end("end_turn", 1)]),
    )
    expected = RateLimitHeaders(RateDimension(50, 49, 1_000), RateDimension(40_000, 0, 30_000))
    answered, _ = await ask(provider)
    refused, _ = await ask(provider)
    silent, _ = await ask(provider)
    assert (answered.stop_reason, answered.rate_limits) == ("stop", expected)
    assert (refused.stop_reason, refused.rate_limits) == ("error", expected)
    assert (silent.stop_reason, silent.rate_limits) == ("stop", None)
