"""GeminiProvider against a real HTTP server on 127.0.0.1: streamGenerateContent and faults.

Each test scripts :class:`~tests.http_server.ScriptedServer` with Gemini's SSE chunks
(``GenerateContentResponse`` objects) or Google's error bodies and asserts the whole
``errorMessage`` (R-52) and what the reference classifier makes of it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from trio_session import (
    AssistantMessage,
    GeminiProvider,
    Model,
    ProviderRequest,
    StreamEnd,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    builtin_model,
    parse_retry_after_ms,
)
from trio_session._core.messages import ImageContent, ThinkingContent
from trio_session.providers._error_text import STREAM_CUT_MESSAGE

from .http_server import ScriptedServer, event_stream, respond, sse
from .provider_support import RecordingSink, decision

KEY = "AIzaSyGeminiSecret0123456789abcdefXYZ"
MODEL = Model(id="gemini-2.5-flash", provider="gemini")
IMAGE_MODEL: Any = ("text", "image")  # Any: as providers/_models.py (Model.input's converter)
REQUEST = ProviderRequest(model=MODEL, messages=(UserMessage("Hi", timestamp=0),), api_key=KEY)
PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


def chunk(
    *parts: dict[str, Any],
    finish: str | None = None,
    usage: dict[str, int] | None = None,
    response_id: str = "resp-1",
    **extra: Any,
) -> str:
    """One SSE event holding a GenerateContentResponse with one candidate."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {
        "candidates": [candidate],
        "responseId": response_id,
        "modelVersion": "gemini-2.5-flash-001",
        **extra,
    }
    if usage is not None:
        body["usageMetadata"] = usage
    return sse(body)


def google_error(code: int, status: str, message: str, *details: dict[str, Any]) -> Any:
    """An error body in Google's shape."""
    return {"error": {"code": code, "message": message, "status": status, "details": list(details)}}


RETRY_INFO = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}
QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. "
    "Quota exceeded for metric: generate_content_free_tier_requests, limit: 10"
)


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, port 0, running in the test's nursery."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def provider(server: ScriptedServer) -> AsyncIterator[GeminiProvider]:
    """A GeminiProvider pointed at the server's /v1beta, 5 s timeouts, closed after."""
    async with GeminiProvider(base_url=f"{server.url}/v1beta", timeout=5.0) as provider:
        yield provider


async def ask(
    provider: GeminiProvider, request: ProviderRequest = REQUEST
) -> tuple[StreamEnd, RecordingSink]:
    """Stream one request; return how it ended and what was streamed."""
    sink = RecordingSink()
    end = await provider.stream(request, sink)
    return end, sink


# -- success ------------------------------------------------------------------------------


async def test_streamed_text_usage_and_the_request(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """Text parts stream as deltas; usageMetadata becomes Usage; the key is in a header only."""
    usage = {
        "promptTokenCount": 120,
        "candidatesTokenCount": 7,
        "thoughtsTokenCount": 5,
        "cachedContentTokenCount": 100,
        "totalTokenCount": 132,
    }
    server.script(
        event_stream([chunk({"text": "Hel"}), chunk({"text": "lo"}, finish="STOP", usage=usage)])
    )
    request = ProviderRequest(
        model=MODEL,
        messages=(UserMessage("Hi", timestamp=0),),
        system_prompt="Be brief.",
        api_key=KEY,
    )
    end, sink = await ask(provider, request)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="STOP")
    assert sink.deltas == ["Hel", "lo"]
    assert sink.last_usage == Usage(input=20, output=12, cache_read=100)
    assert sink.responses == [("resp-1", "gemini-2.5-flash-001")]
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", PATH)
    assert sent.headers["x-goog-api-key"] == KEY
    assert KEY not in sent.path
    assert sent.json() == {
        "contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
    }


async def test_thinking_parts_and_signature(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """``thought: true`` parts are thinking, with their signature; thinkingConfig is sent."""
    server.script(
        event_stream(
            [
                chunk({"text": "Let me see", "thought": True, "thoughtSignature": "c2lnMQ=="}),
                chunk({"text": "Four."}, finish="STOP"),
            ]
        )
    )
    model = Model(id="gemini-2.5-flash", provider="gemini", reasoning=True)
    request = ProviderRequest(
        model=model, messages=(UserMessage("2+2?", timestamp=0),), thinking_level="low"
    )
    end, sink = await ask(provider, request)
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="STOP")
    assert (sink.thoughts, sink.signatures) == (["Let me see"], ["c2lnMQ=="])
    assert sink.deltas == ["Four."]
    assert server.bodies[0]["generationConfig"] == {
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 2048}
    }


async def test_thinking_off_and_gemini_3_levels(server: ScriptedServer) -> None:
    """Off is ``thinkingBudget: 0`` on 2.5 Flash; Gemini 3 Pro takes a ``thinkingLevel``."""
    done = event_stream([chunk({"text": "ok"}, finish="STOP")])
    server.script(done, done)
    async with GeminiProvider(base_url=f"{server.url}/v1beta", timeout=5.0) as provider:
        flash = Model(id="gemini-2.5-flash", provider="gemini", reasoning=True)
        pro3 = Model(id="gemini-3-pro-preview", provider="gemini", reasoning=True)
        for model, level in ((flash, "off"), (pro3, "medium")):
            request = ProviderRequest(
                model=model, messages=(UserMessage("x", timestamp=0),), thinking_level=level
            )
            assert (await ask(provider, request))[0] == StreamEnd(
                stop_reason="stop", raw_stop_reason="STOP"
            )
    assert [b["generationConfig"]["thinkingConfig"] for b in server.bodies] == [
        {"thinkingBudget": 0},
        {"includeThoughts": True, "thinkingLevel": "HIGH"},
    ]
    assert server.requests[1].path.startswith("/v1beta/models/gemini-3-pro-preview:")


async def test_function_calls_get_stable_ids(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """Each functionCall part is one tool call; ids come from the responseId and order."""
    server.script(
        event_stream(
            [
                chunk({"text": "Reading."}),
                chunk({"functionCall": {"name": "read", "args": {"path": "a.txt"}}}),
                chunk(
                    {"functionCall": {"name": "ls"}},
                    {"functionCall": {"name": "read", "args": {"path": "b"}, "id": "given-7"}},
                    finish="STOP",
                ),
            ]
        )
    )
    tools = (ToolSpec("read", "Read a file", {"type": "object", "properties": {}}),)
    request = ProviderRequest(
        model=MODEL, messages=(UserMessage("go", timestamp=0),), tools=tools, api_key=KEY
    )
    end, sink = await ask(provider, request)
    assert end == StreamEnd(stop_reason="toolUse", raw_stop_reason="STOP")
    assert sink.tool_calls == [
        ToolCall(id="call_resp-1_0", name="read", arguments={"path": "a.txt"}),
        ToolCall(id="call_resp-1_1", name="ls", arguments={}),
        ToolCall(id="given-7", name="read", arguments={"path": "b"}),
    ]
    assert server.bodies[0]["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "read",
                    "description": "Read a file",
                    "parametersJsonSchema": {"type": "object", "properties": {}},
                }
            ]
        }
    ]


async def test_history_roles_tool_results_and_images(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """The context goes out as user/model turns: functionCall, functionResponse, inlineData."""
    server.script(event_stream([chunk({"text": "done"}, finish="STOP")]))
    messages = (
        UserMessage((TextContent("look"), ImageContent(data="aGk=", mime_type="image/png"))),
        AssistantMessage(
            content=(
                ThinkingContent("hmm", thinking_signature="c2ln"),
                TextContent("Reading both."),
                ToolCall(id="c1", name="read", arguments={"path": "a"}),
                ToolCall(id="c2", name="read", arguments={"path": "b"}),
            ),
            stop_reason="toolUse",
            provider="gemini",
            model="gemini-2.5-flash",
        ),
        ToolResultMessage("c1", "read", (TextContent("A"),)),
        ToolResultMessage("c2", "read", (TextContent("no such file"),), is_error=True),
        AssistantMessage(
            content=(ThinkingContent("other model", thinking_signature="eHg="),),
            provider="openai",
            model="gpt-4.1",
        ),
    )
    seeing = Model(id=MODEL.id, provider=MODEL.provider, input=IMAGE_MODEL)  # reads images
    end, _ = await ask(provider, ProviderRequest(model=seeing, messages=messages, api_key=KEY))
    assert end == StreamEnd(stop_reason="stop", raw_stop_reason="STOP")
    assert server.bodies[0]["contents"] == [
        {
            "role": "user",
            "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": "aGk="}}],
        },
        {
            "role": "model",
            "parts": [
                {"thought": True, "text": "hmm", "thoughtSignature": "c2ln"},
                {"text": "Reading both."},
                {"functionCall": {"name": "read", "args": {"path": "a"}}},
                {"functionCall": {"name": "read", "args": {"path": "b"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "A"}}},
                {"functionResponse": {"name": "read", "response": {"error": "no such file"}}},
            ],
        },
    ]


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("MAX_TOKENS", StreamEnd(stop_reason="length", raw_stop_reason="MAX_TOKENS")),
        (
            "SAFETY",
            StreamEnd.error(
                "Gemini stopped the answer (finishReason SAFETY): "
                "the answer was blocked by Gemini's safety filters"
            ),
        ),
        (
            "RECITATION",
            StreamEnd.error(
                "Gemini stopped the answer (finishReason RECITATION): "
                "the answer was stopped for reciting training data"
            ),
        ),
        (
            "MALFORMED_FUNCTION_CALL",
            StreamEnd.error(
                "Gemini stopped the answer (finishReason MALFORMED_FUNCTION_CALL): "
                "the model wrote a function call that could not be parsed"
            ),
        ),
        (
            "SOMETHING_NEW",
            StreamEnd.error(
                "Gemini stopped the answer (finishReason SOMETHING_NEW): the answer was stopped"
            ),
        ),
    ],
)
async def test_finish_reasons(
    server: ScriptedServer, provider: GeminiProvider, finish: str, expected: StreamEnd
) -> None:
    """MAX_TOKENS is "length"; SAFETY and the rest are errors that say why, not retried."""
    server.script(event_stream([chunk({"text": "partial"}), chunk(finish=finish)]))
    end, sink = await ask(provider)
    assert end == expected
    assert sink.joined == "partial"
    assert decision(end.error_message) == "none"


async def test_a_blocked_prompt_is_an_error(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """promptFeedback.blockReason with no candidates: an error naming the reason."""
    body = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "responseId": "r"}
    server.script(event_stream([sse(body)]))
    end, _ = await ask(provider)
    assert end == StreamEnd.error("Gemini blocked the prompt (blockReason PROHIBITED_CONTENT)")
    assert decision(end.error_message) == "none"


async def test_a_cut_stream_is_a_connection_error(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """The body ends before any finishReason: a cut stream, retried; the text stays."""
    server.script(event_stream([chunk({"text": "Hel"})], after="close"))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(STREAM_CUT_MESSAGE)
    assert sink.joined == "Hel"
    assert decision(end.error_message) == "retry"


# -- errors ----------------------------------------------------------------------------------


async def test_429_with_retry_info(server: ScriptedServer, provider: GeminiProvider) -> None:
    """429 RESOURCE_EXHAUSTED: retried, and RetryInfo's 7s is the hint (R-18)."""
    server.script(respond(429, google_error(429, "RESOURCE_EXHAUSTED", QUOTA, RETRY_INFO)))
    end, _ = await ask(provider)
    expected = f"429 Too Many Requests: {QUOTA} (RESOURCE_EXHAUSTED)\nretry-after: 7"
    assert end.error_message == expected
    assert decision(end.error_message) == "retry"
    assert parse_retry_after_ms(end.error_message) == 7000


async def test_429_header_hint_wins_over_retry_info(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """A retry-after header is the hint; RetryInfo adds no second one."""
    body = google_error(429, "RESOURCE_EXHAUSTED", "Slow down", RETRY_INFO)
    server.script(respond(429, body, [("retry-after", "3")]))
    end, _ = await ask(provider)
    expected = "429 Too Many Requests: Slow down (RESOURCE_EXHAUSTED)\nretry-after: 3"
    assert end.error_message == expected


@pytest.mark.parametrize(
    ("status", "body", "expected", "what"),
    [
        (
            503,
            google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
            "503 Service Unavailable: The model is overloaded. Please try again later. "
            "(UNAVAILABLE)",
            "retry",
        ),
        (
            500,
            google_error(500, "INTERNAL", "An internal error has occurred."),
            "500 Internal Server Error: An internal error has occurred.",  # STATUS said already
            "retry",
        ),
        (
            400,
            google_error(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1500000) exceeds the maximum number of tokens "
                "allowed (1048576).",
            ),
            "400 Bad Request: The input token count (1500000) exceeds the maximum number of "
            "tokens allowed (1048576). (INVALID_ARGUMENT)",
            "overflow",
        ),
        (
            400,
            [
                google_error(
                    400,
                    "INVALID_ARGUMENT",
                    "API key not valid. Please pass a valid API key.",
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                    },
                )
            ],
            "400 Bad Request: API key not valid. Please pass a valid API key. "
            "(INVALID_ARGUMENT, API_KEY_INVALID)",
            "none",
        ),
        (
            401,
            google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."),
            "401 Unauthorized: Request had invalid authentication credentials. (UNAUTHENTICATED)",
            "none",
        ),
        (
            403,
            google_error(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."),
            "403 Forbidden: Method doesn't allow unregistered callers. (PERMISSION_DENIED)",
            "none",
        ),
    ],
)
async def test_error_bodies(
    server: ScriptedServer,
    provider: GeminiProvider,
    status: int,
    body: Any,
    expected: str,
    what: str,
) -> None:
    """Google's error bodies (bare or in a list) as R-52 text: status, message, STATUS;
    a hint header on a 401 adds no hint line (waiting does not heal it)."""
    server.script(respond(status, body, [("retry-after", "1")] if status == 401 else ()))
    end, _ = await ask(provider)
    assert end == StreamEnd.error(expected)
    assert decision(end.error_message) == what


async def test_a_garbage_error_body(server: ScriptedServer, provider: GeminiProvider) -> None:
    """A body that is not Google's shape (an HTML 502 of a proxy) is worded as usual."""
    html = "<html><head><title>502 Bad Gateway</title></head><body>upstream down</body></html>"
    server.script(respond(502, html, content_type="text/html"))
    end, _ = await ask(provider)
    assert end == StreamEnd.error("502 Bad Gateway: upstream down")
    assert decision(end.error_message) == "retry"


async def test_an_error_inside_the_stream(server: ScriptedServer, provider: GeminiProvider) -> None:
    """An error object as an SSE event mid-answer: the same text as over HTTP; text kept."""
    error = google_error(503, "UNAVAILABLE", "The model is overloaded.", RETRY_INFO)
    server.script(event_stream([chunk({"text": "Hal"}), sse(error)], after="wait_for_disconnect"))
    end, sink = await ask(provider)
    assert end == StreamEnd.error(
        "503 Service Unavailable: The model is overloaded. (UNAVAILABLE)\nretry-after: 7"
    )
    assert sink.joined == "Hal"
    assert decision(end.error_message) == "retry"


async def test_garbage_in_the_stream(server: ScriptedServer, provider: GeminiProvider) -> None:
    """Event data that is not JSON: an invalid response, not retried."""
    server.script(event_stream([chunk({"text": "a"}), "data: {not json\n\n"]))
    end, _ = await ask(provider)
    assert end == StreamEnd.error(
        "Invalid response from server: event stream data is not valid JSON"
    )
    assert decision(end.error_message) == "none"


async def test_the_key_never_reaches_an_error(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """A server echoing the key in its error: redacted from the text."""
    body = google_error(400, "INVALID_ARGUMENT", f"API key {KEY} not valid.")
    server.script(respond(400, json.dumps(body), content_type="application/json"))
    end, _ = await ask(provider)
    assert end.error_message is not None
    assert KEY not in end.error_message
    assert "[redacted]" in end.error_message


# -- prices ------------------------------------------------------------------------------------


async def test_builtin_prices_fill_usage_cost(
    server: ScriptedServer, provider: GeminiProvider
) -> None:
    """builtin_model's prices turn a scripted usage into dollars ($0.30 / $2.50 / $0.03 per M)."""
    model = builtin_model("gemini", "gemini-2.5-flash")
    assert model is not None
    assert (model.context_window, model.api) == (1_048_576, "google-generative-ai")
    usage = {
        "promptTokenCount": 1_000_000,
        "candidatesTokenCount": 200_000,
        "cachedContentTokenCount": 500_000,
    }
    server.script(event_stream([chunk({"text": "x"}, finish="STOP", usage=usage)]))
    _, sink = await ask(provider, ProviderRequest(model=model, messages=REQUEST.messages))
    assert sink.last_usage is not None
    cost = model.priced(sink.last_usage).cost
    assert (cost.input, cost.output, cost.cache_read) == pytest.approx((0.15, 0.5, 0.015))
    assert cost.total == pytest.approx(0.665)


@pytest.mark.parametrize(
    ("model_id", "reads", "where"),
    [
        ("gemini-2.5-flash", IMAGE_MODEL, "after"),
        ("gemini-3-pro-preview", IMAGE_MODEL, "inside"),
        ("gemini-2.5-flash", ("text",), "none"),
    ],
)
async def test_tool_result_images(
    server: ScriptedServer, provider: GeminiProvider, model_id: str, reads: Any, where: str
) -> None:
    """A tool result's images as pi 1.6.0 sends them: inside the functionResponse for
    Gemini 3, in a user turn after it for older models, pi's text in their place for a
    model that reads no images; text parts joined by newlines, a placeholder for none."""
    server.script(event_stream([chunk({"text": "ok"}, finish="STOP")]))
    png = ImageContent(data="aW1n", mime_type="image/png")
    messages = (
        UserMessage("look", timestamp=0),
        AssistantMessage(
            content=(ToolCall("c1", "read", {}), ToolCall("c2", "read", {})),
            stop_reason="toolUse",
        ),
        ToolResultMessage("c1", "read", (TextContent("a"), TextContent("b"))),
        ToolResultMessage("c2", "read", (png,)),
    )
    model = Model(id=model_id, provider="gemini", input=reads)
    await ask(provider, ProviderRequest(model, messages))
    inline = {"inlineData": {"mimeType": "image/png", "data": "aW1n"}}
    second: dict[str, Any] = {
        "name": "read",
        "response": {
            "output": "(tool image omitted: model does not support images)"
            if where == "none"
            else "(see attached image)"
        },
    }
    if where == "inside":
        second["parts"] = [inline]
    turns = [
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "a\nb"}}},
                {"functionResponse": second},
            ],
        }
    ]
    if where == "after":
        turns.append({"role": "user", "parts": [{"text": "Tool result image:"}, inline]})
    assert server.requests[0].json()["contents"][2:] == turns
