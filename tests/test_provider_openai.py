"""OpenAIProvider against a real HTTP server on 127.0.0.1: streaming, and every fault (R-52).

Each test scripts :class:`~tests.http_server.ScriptedServer` and asserts the whole
``errorMessage`` a fault becomes, and what the reference classifier decides about it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from trio_session import (
    AssistantMessage,
    Model,
    ModelCost,
    ProviderRequest,
    StreamEnd,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    message_to_json,
    open_session,
    parse_retry_after_ms,
)
from trio_session.providers._error_text import STREAM_CUT_MESSAGE
from trio_session.providers._openai import OpenAIProvider

from .http_server import Exchange, ScriptedServer, closed_port, event_stream, respond, sse
from .provider_support import RecordingSink, decision

KEY = "sk-test-Secret0123456789abcdef"
MODEL = Model(id="gpt-test", provider="openai")
REQUEST = ProviderRequest(model=MODEL, messages=(UserMessage("Hi", timestamp=0),), api_key=KEY)
DONE = "data: [DONE]\n\n"


def chunk(
    content: str | None = None,
    *,
    finish: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> str:
    """One ``chat.completion.chunk`` event for choice 0."""
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if tool_calls is not None:
        delta["tool_calls"] = tool_calls
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def usage_chunk(prompt: int, completion: int, cached: int | None = None) -> str:
    """The final usage chunk that ``stream_options.include_usage`` asks for."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return sse(
        {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage}
    )


@pytest.mark.parametrize(
    ("usage", "reasoning"),
    [
        ({"completion_tokens_details": {"reasoning_tokens": 30}}, 30),
        ({"reasoning_tokens": 7}, 7),  # some compatible servers send it at the top level
        ({"completion_tokens_details": {"reasoning_tokens": "many"}}, 0),
        ({}, 0),
    ],
)
async def test_reasoning_tokens_and_the_reply_pi16_fields(
    server: ScriptedServer, usage: dict[str, Any], reasoning: int
) -> None:
    """pi 1.6.0's fields, as a session's reply carries them: ``usage.reasoning`` (a part of
    ``output``), ``rawStopReason`` (the finish_reason as sent), ``thinkingLevel`` (the level
    the request went with), ``durationMs`` on the run's clock, and a cost priced from the
    model's rates, so ``totalFromProvider`` false."""
    body = {"prompt_tokens": 10, "completion_tokens": 40, **usage}
    server.script(
        event_stream(
            [
                chunk("ok"),
                chunk(finish="length"),
                sse({"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": body}),
                DONE,
            ]
        )
    )
    model = Model(id="m", provider="openai", reasoning=True, cost=ModelCost(input=1, output=2))
    provider = OpenAIProvider(base_url=f"{server.url}/v1", api_key=KEY)
    async with provider, open_session(provider, model, thinking_level="low") as session:
        reply = await session.prompt("hi")
    assert (reply.usage.output, reply.usage.reasoning) == (40, reasoning)
    assert (reply.raw_stop_reason, reply.stop_reason) == ("length", "length")
    assert reply.thinking_level == "low"
    assert isinstance(reply.duration_ms, int)
    assert reply.duration_ms >= 0
    wire = message_to_json(reply)
    assert wire["usage"]["reasoning"] == reasoning
    assert wire["usage"]["cost"]["totalFromProvider"] is False
    assert (wire["rawStopReason"], wire["thinkingLevel"]) == ("length", "low")
    assert wire["durationMs"] == reply.duration_ms


def openai_error(message: str, type: str, code: str | None = None) -> dict[str, Any]:
    """An error body in OpenAI's shape."""
    return {"error": {"message": message, "type": type, "param": None, "code": code}}


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, port 0, running in the test's nursery."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def provider(server: ScriptedServer) -> AsyncIterator[OpenAIProvider]:
    """An OpenAIProvider pointed at the server, 5 s timeouts, closed after the test."""
    async with OpenAIProvider(
        base_url=f"{server.url}/v1", api_key="sk-unused", timeout=5.0
    ) as provider:
        yield provider


async def ask(
    provider: OpenAIProvider, request: ProviderRequest = REQUEST
) -> tuple[StreamEnd, RecordingSink]:
    """Stream one request; return how it ended and what was streamed."""
    sink = RecordingSink()
    end = await provider.stream(request, sink)
    return end, sink


# -- success ------------------------------------------------------------------------------


async def test_streamed_text_and_usage(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """Text deltas stream as they come; usage splits cached prompt tokens into cacheRead."""
    server.script(
        event_stream(
            [
                chunk("Hel"),
                chunk("lo!"),
                chunk(finish="stop"),
                usage_chunk(prompt=120, completion=5, cached=100),
                DONE,
            ]
        )
    )
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="stop")
    assert sink.deltas == ["Hel", "lo!"]
    assert sink.last_usage == Usage(input=20, output=5, cache_read=100, reasoning=0)
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json() == {  # as pi 1.6.0 sends it (test_provider_openai_body.py)
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "store": False,
        "max_completion_tokens": 16_384,
    }


async def test_finish_reason_length(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """finish_reason "length" ends the message with stopReason "length"."""
    server.script(event_stream([chunk("Once upon"), chunk(finish="length"), DONE]))
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="length", raw_stop_reason="length")
    assert sink.joined == "Once upon"


async def test_tool_calls_accumulate_by_index(
    server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """Two interleaved tool calls are joined by index and handed over whole: toolUse."""
    server.script(
        event_stream(
            [
                chunk("Let me look."),
                chunk(
                    tool_calls=[
                        {
                            "index": 0,
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "read", "arguments": ""},
                        }
                    ]
                ),
                chunk(tool_calls=[{"index": 0, "function": {"arguments": '{"pa'}}]),
                chunk(
                    tool_calls=[
                        {
                            "index": 1,
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{}"},
                        }
                    ]
                ),
                chunk(tool_calls=[{"index": 0, "function": {"arguments": 'th": "a.txt"}'}}]),
                chunk(finish="tool_calls"),
                DONE,
            ]
        )
    )
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="toolUse", raw_stop_reason="tool_calls")
    assert sink.joined == "Let me look."
    assert sink.tool_calls == [
        ToolCall(id="call_a", name="read", arguments={"path": "a.txt"}),
        ToolCall(id="call_b", name="ls", arguments={}),
    ]


async def test_context_and_tools_on_the_wire(
    server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """System prompt, assistant tool calls, tool results and tools in Chat Completions form."""
    server.script(event_stream([chunk("done", finish="stop"), DONE]))
    messages = (
        UserMessage("Read a.txt", timestamp=0),
        AssistantMessage(
            content=(TextContent("Reading."), ToolCall("call_a", "read", {"path": "a.txt"})),
            stop_reason="toolUse",
        ),
        ToolResultMessage("call_a", "read", (TextContent("hello"),)),
    )
    tool = ToolSpec(
        "read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}
    )
    request = ProviderRequest(MODEL, messages, system_prompt="Be brief.", tools=(tool,))
    end, _ = await ask(provider, request)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="stop")
    body = server.requests[0].json()
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read a.txt"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"a.txt"}'},  # as pi's
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "hello"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    # The constructor's key is the fallback when the request carries none.
    assert server.requests[0].headers["authorization"] == "Bearer sk-unused"


async def test_local_server_gaps_are_tolerated(server: ScriptedServer) -> None:
    """llama.cpp/Ollama style: no usage, no [DONE], no tool index, "stop" beside a tool call."""
    server.script(
        event_stream(
            [
                sse({"choices": [{"delta": {"role": "assistant", "content": None}}]}),
                sse(
                    {
                        "choices": [
                            {
                                "delta": {
                                    "tool_calls": [
                                        {"function": {"name": "ls", "arguments": {"dir": "."}}}
                                    ]
                                }
                            }
                        ]
                    }
                ),
                sse({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
            ]
        )
    )
    async with OpenAIProvider(base_url=f"{server.url}/v1", name="llama.cpp") as local:
        assert local.name == "llama.cpp"
        end, sink = await ask(local, ProviderRequest(MODEL, (UserMessage("ls", timestamp=0),)))
    assert end == StreamEnd(stop_reason="toolUse", raw_stop_reason="stop")
    assert sink.tool_calls == [ToolCall(id="call_0", name="ls", arguments={"dir": "."})]
    assert sink.usages == []
    assert "authorization" not in server.requests[0].headers


async def test_model_base_url_wins(server: ScriptedServer) -> None:
    """A Model's own base_url overrides the provider's; provider.model() fills it in."""
    server.script(event_stream([chunk("hi", finish="stop"), DONE]))
    async with OpenAIProvider(base_url="http://127.0.0.1:9/unused", name="vllm") as provider:
        model = provider.model("qwen", context_window=32_768)
        assert model == Model(
            "qwen", "vllm", context_window=32_768, base_url="http://127.0.0.1:9/unused"
        )
        moved = Model("qwen", "vllm", base_url=f"{server.url}/v2/")
        end, _ = await ask(provider, ProviderRequest(moved, (UserMessage("x", timestamp=0),)))
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="stop")
    assert server.requests[0].path == "/v2/chat/completions"


# -- HTTP errors (R-52) ---------------------------------------------------------------------

RATE_LIMIT = (
    "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit"
    " 30000, Used 29500, Requested 1200. Please try again in 2.4s. Visit"
    " https://platform.openai.com/account/rate-limits to learn more."
)
CONTEXT = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted"
    " in 130542 tokens. Please reduce the length of the messages."
)
NGINX_503 = (
    "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n"
    "<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx"
    "</center>\r\n</body>\r\n</html>\r\n"
)
RATELIMIT_HEADERS = [("x-ratelimit-reset-requests", "120ms"), ("x-ratelimit-reset-tokens", "2.4s")]

HTTP_ERRORS = [
    pytest.param(
        respond(
            429,
            openai_error(RATE_LIMIT, "tokens", "rate_limit_exceeded"),
            [("retry-after", "2"), *RATELIMIT_HEADERS],
        ),
        f"429 Too Many Requests: {RATE_LIMIT} (rate_limit_exceeded)\nretry-after: 2"
        "\nx-ratelimit-reset-requests: 120ms\nx-ratelimit-reset-tokens: 2.4s",
        "retry",
        id="429-retry-after",
    ),
    pytest.param(
        respond(503, NGINX_503, content_type="text/html"),
        "503 Service Unavailable: 503 Service Temporarily Unavailable nginx",
        "retry",
        id="503-html",
    ),
    pytest.param(
        respond(
            500,
            openai_error(
                "The server had an error while processing your request. Sorry about that!",
                "server_error",
            ),
        ),
        "500 Internal Server Error: The server had an error while processing your request."
        " Sorry about that! (server_error)",
        "retry",
        id="500-json",
    ),
    pytest.param(
        respond(
            503,
            openai_error("Service Unavailable", "server_error"),
            [("retry-after", "3")],
        ),
        "503 Service Unavailable (server_error)\nretry-after: 3",
        "retry",
        id="503-json-repeats-status",
    ),
    pytest.param(
        respond(502, ""),
        "502 status code (no body)",
        "retry",
        id="502-no-body",
    ),
    pytest.param(
        respond(
            400,
            openai_error(CONTEXT, "invalid_request_error", "context_length_exceeded"),
            RATELIMIT_HEADERS,
        ),
        f"400 Bad Request: {CONTEXT} (context_length_exceeded)",
        "overflow",
        id="400-context-length",
    ),
    pytest.param(
        respond(400, ""),
        "400 status code (no body)",
        "overflow",
        id="400-no-body",
    ),
    pytest.param(
        respond(
            403,
            openai_error(
                "Project `proj_Xk2f` does not have access to model `o3-pro`",
                "invalid_request_error",
                "model_not_found",
            ),
        ),
        "403 Forbidden: Project `proj_Xk2f` does not have access to model `o3-pro`"
        " (model_not_found)",
        "none",
        id="403",
    ),
    pytest.param(
        respond(
            404,
            openai_error(
                "The model `gpt-9` does not exist or you do not have access to it.",
                "invalid_request_error",
                "model_not_found",
            ),
            RATELIMIT_HEADERS,
        ),
        "404 Not Found: The model `gpt-9` does not exist or you do not have access to it."
        " (model_not_found)",
        "none",
        id="404",
    ),
    pytest.param(
        respond(307, "", [("location", "https://api.example.test/v1/chat/completions")]),
        "307 status code (no body)\nlocation: https://api.example.test/v1/chat/completions",
        "none",
        id="307-not-followed",
    ),
]


@pytest.mark.parametrize(("step", "expected", "decided"), HTTP_ERRORS)
async def test_http_error_becomes_message(
    server: ScriptedServer,
    provider: OpenAIProvider,
    step: Any,
    expected: str,
    decided: str,
) -> None:
    """R-52: status, the server's message and retry hints (only where waiting helps)."""
    server.script(step)
    end, sink = await ask(provider)
    assert end == StreamEnd.error(expected)
    assert decision(end.error_message) == decided
    assert sink.deltas == []
    assert len(server.requests) == 1  # R-28a: no retry, no redirect followed


async def test_429_hint_is_parsed() -> None:
    """R-18: the retry-after line of a 429 is what parse_retry_after_ms reads."""
    text = str(HTTP_ERRORS[0].values[1])
    assert parse_retry_after_ms(text) == 2000


async def test_401_echoed_key_is_redacted(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """A 401 is not retryable, and a key the server echoes never reaches errorMessage."""
    server.script(
        respond(
            401,
            openai_error(
                f"Incorrect API key provided: {KEY}. You can find your API key at"
                " https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            ),
            [("x-ratelimit-reset-requests", "1s"), ("www-authenticate", f"Bearer {KEY}")],
        )
    )
    end, _ = await ask(provider)
    assert end == StreamEnd.error(
        "401 Unauthorized: Incorrect API key provided: [redacted]. You can find your API key at"
        " https://platform.openai.com/account/api-keys. (invalid_api_key)"
    )
    assert decision(end.error_message) == "none"


# -- faults below HTTP -----------------------------------------------------------------------


async def test_connection_refused() -> None:
    """Nothing listening: a "Connection error", which R-5 retries."""
    port = closed_port()
    async with OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1") as provider:
        end, _ = await ask(provider)
    assert end == StreamEnd.error(
        f"Connection error: could not connect to 127.0.0.1:{port} (Connection refused)"
    )
    assert decision(end.error_message) == "retry"


async def test_disconnect_before_response(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """The server reads the request and hangs up without answering: retried."""

    async def hang_up(exchange: Exchange) -> None:
        await exchange.close()

    server.script(hang_up)
    end, _ = await ask(provider)
    assert end == StreamEnd.error(
        f"Connection error: 127.0.0.1:{server.port} closed the connection before responding"
        " (Server disconnected without sending a response.)"
    )
    assert decision(end.error_message) == "retry"


@pytest.mark.parametrize("after", ["reset", "close"])
async def test_stream_cut_keeps_partial_text(
    server: ScriptedServer, provider: OpenAIProvider, after: Any
) -> None:
    """A reset (RST) or close (FIN) after 2 chunks: retried; the partial text stays."""
    server.script(event_stream([chunk("Hel"), chunk("lo")], after=after))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(STREAM_CUT_MESSAGE)
    assert sink.joined == "Hello"
    assert decision(end.error_message) == "retry"


async def test_reset_right_after_headers(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """Headers, then RST: the stream was cut before any event."""
    server.script(event_stream([], after="reset"))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(STREAM_CUT_MESSAGE)
    assert sink.deltas == []


async def test_clean_end_without_finish_is_a_cut(
    server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """A body that ends properly but with no finish_reason and no [DONE] was cut upstream."""
    server.script(event_stream([chunk("Hel")]))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(STREAM_CUT_MESSAGE)
    assert sink.joined == "Hel"


async def test_error_chunk_mid_stream(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """An {"error": …} chunk inside a 200 stream ends it with that error, text kept."""
    server.script(
        event_stream(
            [
                chunk("Hel"),
                sse({"error": {"message": "Provider returned error", "code": 502}}),
            ],
            after="wait_for_disconnect",
        )
    )
    end, sink = await ask(provider)
    assert end == StreamEnd.error("502 Bad Gateway: Provider returned error")
    assert sink.joined == "Hel"
    assert decision(end.error_message) == "retry"


async def test_invalid_json_chunk(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """A data line that is not JSON: a clear error, not retried, no crash."""
    server.script(event_stream([chunk("Hel"), "data: {not json 500\n\n", chunk("lo")]))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(
        "Invalid response from server: event stream data is not valid JSON"
    )
    assert sink.joined == "Hel"
    assert decision(end.error_message) == "none"


async def test_bad_tool_arguments(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """Tool arguments that are not a JSON object: an error, not a half-made call."""
    bad = [{"index": 0, "id": "c", "function": {"name": "read", "arguments": '{"pa'}}]
    server.script(event_stream([chunk(tool_calls=bad), chunk(finish="tool_calls"), DONE]))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(
        "Invalid response from server: the arguments of tool call 'read' are not a JSON object"
    )
    assert sink.tool_calls == []


async def test_200_that_is_not_an_event_stream(
    server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """A 200 HTML page (a captive portal, the wrong URL) is an invalid response."""
    server.script(
        respond(200, "<html>Welcome</html>", content_type="text/html"),
        respond(200, {"error": {"message": "model not loaded"}}),
    )
    end, _ = await ask(provider)
    assert end == StreamEnd.error(
        "Invalid response from server: expected an event stream, got 'text/html'"
    )
    end, _ = await ask(provider)
    assert end == StreamEnd.error("200 OK: model not loaded")


# -- timeouts (virtual time) -------------------------------------------------------------------


async def test_slow_server_times_out(
    server: ScriptedServer, provider: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """No response head within the read timeout: "Connection error: timed out …" at t+5."""

    async def slow(exchange: Exchange) -> None:
        await trio.sleep(10)
        await exchange.respond(200, "late")

    server.script(slow)
    start = trio.current_time()
    end, _ = await ask(provider)
    assert trio.current_time() - start == 5.0
    assert end == StreamEnd.error(
        f"Connection error: timed out after 5s waiting for 127.0.0.1:{server.port} to respond"
    )
    assert decision(end.error_message) == "retry"


async def test_stalled_stream_times_out(
    server: ScriptedServer, provider: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """A stream that goes silent mid-answer times out; the partial text stays."""
    server.script(event_stream([chunk("Hel")], after="silence"))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(
        "Connection error: timed out after 5s waiting for more of the response from"
        f" 127.0.0.1:{server.port}"
    )
    assert sink.joined == "Hel"


async def test_slow_but_steady_stream_is_fine(
    server: ScriptedServer, provider: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """The read timeout bounds each silence, not the whole answer: 3 × 4 s is fine."""
    server.script(event_stream([chunk("a"), chunk("b"), chunk("c", finish="stop"), DONE], delay=4))
    start = trio.current_time()
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="stop")
    assert sink.joined == "abc"
    assert trio.current_time() - start == 12.0


# -- lifetime and cancellation -------------------------------------------------------------------


async def test_cancel_closes_the_response(
    server: ScriptedServer, provider: OpenAIProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """Cancelled mid-stream: Cancelled passes through and the server sees the hang-up at once."""
    server.script(event_stream([chunk("Hel")], after="wait_for_disconnect"))
    with trio.CancelScope() as scope:
        sink = RecordingSink(on_text=scope.cancel)
        await provider.stream(REQUEST, sink)
    assert scope.cancelled_caught
    cancelled_at = trio.current_time()
    await trio.testing.wait_all_tasks_blocked()
    assert server.disconnects == [cancelled_at]
    assert sink.joined == "Hel"


async def test_aclose_is_idempotent_and_final(server: ScriptedServer) -> None:
    """aclose() twice is fine; a closed provider answers with an error, not a crash."""
    provider = OpenAIProvider(base_url=server.url)
    await provider.aclose()
    await provider.aclose()
    end, _ = await ask(provider)
    assert end == StreamEnd.error("the openai provider is closed; make a new one")
    assert server.requests == []


async def test_client_passed_in_stays_open(server: ScriptedServer) -> None:
    """R-28a: a caller's client never follows redirects for us, and aclose() leaves it open."""
    moved = f"{server.url}/v1/chat/completions"
    server.script(
        respond(307, "", [("location", moved)]),
        event_stream([chunk("hi", finish="stop"), DONE]),
    )
    async with httpx.AsyncClient(follow_redirects=True) as client:
        async with OpenAIProvider(base_url=f"{server.url}/v1", client=client) as provider:
            redirected, _ = await ask(provider)
            end, _ = await ask(provider)
        assert redirected == StreamEnd.error(f"307 status code (no body)\nlocation: {moved}")
        assert end == StreamEnd(stop_reason="stop", raw_stop_reason="stop")
        assert len(server.requests) == 2
        assert not client.is_closed


async def test_unsendable_key_is_not_echoed(provider: OpenAIProvider) -> None:
    """A key with characters no header can carry fails clearly, without showing the key."""
    request = ProviderRequest(MODEL, REQUEST.messages, api_key="sk-ключ-12345")
    end, _ = await ask(provider, request)
    assert end == StreamEnd.error(
        "Invalid API key: it contains characters that cannot be sent in an HTTP header"
    )


async def test_tool_call_cut_by_max_tokens(
    server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """Arguments cut off by finish_reason "length" are an unfinished call, not an error."""
    cut = [{"index": 0, "id": "c", "function": {"name": "read", "arguments": '{"pa'}}]
    server.script(event_stream([chunk(tool_calls=cut), chunk(finish="length"), DONE]))
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="length", raw_stop_reason="length")
    assert sink.tool_calls == []


def reasoning_chunk(field: str, text: str, *, also: str | None = None) -> str:
    """A chunk whose delta streams reasoning in ``field`` (and the same in ``also``)."""
    delta = {field: text} | ({also: text} if also else {})
    data = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return sse(data)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning", "reasoning_text"])
async def test_reasoning_fields_stream_as_thinking(
    server: ScriptedServer, provider: OpenAIProvider, field: str
) -> None:
    """Reasoning comes as thinking, from whichever field an OpenAI-compatible server uses
    (as pi reads them); a server that repeats it in two fields is read once."""
    server.script(
        event_stream(
            [
                reasoning_chunk(
                    field, "Hmm, ", also="reasoning_text" if field != "reasoning_text" else None
                ),
                reasoning_chunk(field, "let me see."),
                chunk("Answer."),
                chunk(finish="stop"),
                DONE,
            ]
        )
    )
    end, sink = await ask(provider)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="stop")
    assert (sink.thoughts, sink.deltas) == (["Hmm, ", "let me see."], ["Answer."])
    assert sink.responses[0] == ("chatcmpl-1", "gpt-test")
