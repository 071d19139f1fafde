"""What OpenAIProvider sends beside the messages, and how it sends them, as pi 1.6.0 does:
``store: false``, the answer's cap fitted into the window and its field name per host,
the system prompt's role, user messages as parts, tool results and their images."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from trio_session import (
    AssistantMessage,
    ImageContent,
    Model,
    ProviderRequest,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)
from trio_session.providers._openai import OpenAIProvider
from trio_session.providers._openai_compat import context_estimate, openai_compat, output_cap

from .http_server import ScriptedServer, event_stream, sse
from .provider_support import RecordingSink

LOCAL = Model(id="local", provider="interop")  # sent to the test server
READ = ToolCall("call_1", "read", {"path": "a.png"})


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, port 0, running in the test's nursery."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def provider(server: ScriptedServer) -> AsyncIterator[OpenAIProvider]:
    """An OpenAIProvider pointed at the server, closed after the test."""
    async with OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-x", timeout=5.0) as p:
        yield p


async def body_of(
    server: ScriptedServer, provider: OpenAIProvider, request: ProviderRequest
) -> dict[str, Any]:
    """The JSON body the server received for ``request``."""
    done = sse({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]})
    server.script(event_stream([done, "data: [DONE]\n\n"]))
    await provider.stream(request, RecordingSink())
    body: dict[str, Any] = server.requests[-1].json()
    return body


async def test_user_parts_are_sent_as_parts(
    server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """A user message of parts goes as a list of parts (empty text parts left out, an
    empty message left out); a string goes as a string — as pi sends them."""
    messages = (
        UserMessage.of("Fix it."),
        UserMessage((TextContent(""), TextContent("two"))),
        UserMessage((TextContent(""),)),
        UserMessage("plain"),
    )
    body = await body_of(server, provider, ProviderRequest(LOCAL, messages))
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Fix it."}]},
        {"role": "user", "content": [{"type": "text", "text": "two"}]},
        {"role": "user", "content": "plain"},
    ]


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        (LOCAL, {"store": False, "max_completion_tokens": 16_384}),
        (Model(id="m", provider="openai"), {"store": False, "max_completion_tokens": 16_384}),
        (Model(id="m", provider="deepseek"), {"max_tokens": 16_384}),
        (Model(id="m", provider="xai"), {"max_completion_tokens": 16_384}),
        (
            Model(id="m", provider="deepseek", compat={"supportsStore": True}),
            {"store": False, "max_tokens": 16_384},
        ),
        (
            Model(
                id="m",
                provider="interop",
                compat={"supportsStore": False, "maxTokensField": "max_tokens"},
            ),
            {"max_tokens": 16_384},
        ),
    ],
)
async def test_store_and_the_cap_per_host(
    server: ScriptedServer, provider: OpenAIProvider, model: Model, extra: dict[str, Any]
) -> None:
    """``store: false`` and ``max_completion_tokens`` unless pi 1.6.0 knows the host to
    reject them (then no store, ``max_tokens``); the model's ``compat`` decides first."""
    body = await body_of(server, provider, ProviderRequest(model, (UserMessage("hi"),)))
    assert {
        k: v for k, v in body.items() if k in ("store", "max_tokens", "max_completion_tokens")
    } == extra


@pytest.mark.parametrize(
    ("model", "role"),
    [
        (Model(id="o", provider="openai", reasoning=True), "developer"),
        (Model(id="o", provider="openai"), "system"),
        (Model(id="o", provider="interop", reasoning=True), "system"),
        (
            Model(
                id="o", provider="openai", reasoning=True, compat={"supportsDeveloperRole": False}
            ),
            "system",
        ),
    ],
)
async def test_the_system_prompts_role(
    server: ScriptedServer, provider: OpenAIProvider, model: Model, role: str
) -> None:
    """The system prompt is a developer message for a reasoning model on OpenAI's API,
    else a system message (pi 1.6.0's rule; ``compat.supportsDeveloperRole`` decides first)."""
    request = ProviderRequest(model, (UserMessage("hi"),), system_prompt="Be brief.")
    body = await body_of(server, provider, request)
    assert body["messages"][0] == {"role": role, "content": "Be brief."}


def tool_turn(*results: ToolResultMessage) -> tuple[Any, ...]:
    """A user message, the model's tool calls, their results, and the user again."""
    calls = tuple(ToolCall(r.tool_call_id, r.tool_name, {}) for r in results)
    return (
        UserMessage("look", timestamp=0),
        AssistantMessage(content=calls, stop_reason="toolUse"),
        *results,
        UserMessage("thanks"),
    )


PNG = ImageContent(data="aW1n", mime_type="image/png")


@pytest.mark.parametrize("images", [True, False])
async def test_tool_results_and_their_images(
    server: ScriptedServer, provider: OpenAIProvider, images: bool
) -> None:
    """Tool results as pi sends them: text parts joined by newlines, a placeholder when
    there is no text; their images after the run of results in one user message — or,
    for a model that does not read images, a text saying they were left out."""
    reads: Any = ("text", "image") if images else ("text",)  # Any: as providers/_models.py
    model = Model(id="m", provider="interop", input=reads)
    messages = tool_turn(
        ToolResultMessage("c1", "read", (TextContent("a"), TextContent("b"))),
        ToolResultMessage("c2", "read", (TextContent("Read image file [image/png]"), PNG)),
        ToolResultMessage("c3", "read", (PNG,)),
        ToolResultMessage("c4", "bash", ()),
    )
    body = await body_of(server, provider, ProviderRequest(model, messages))
    attached = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Attached image(s) from tool result:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,aW1n"}},
        ],
    }
    omitted = "(tool image omitted: model does not support images)"
    assert body["messages"][2:] == [
        {"role": "tool", "content": "a\nb", "tool_call_id": "c1"},
        {
            "role": "tool",
            "content": "Read image file [image/png]" + ("" if images else f"\n{omitted}"),
            "tool_call_id": "c2",
        },
        {
            "role": "tool",
            "content": "(see attached image)" if images else omitted,
            "tool_call_id": "c3",
        },
        {"role": "tool", "content": "(no tool output)", "tool_call_id": "c4"},
        *([attached] if images else []),
        {"role": "user", "content": "thanks"},
    ]


def test_the_cap_is_fitted_into_the_window() -> None:
    """pi 1.6.0's clampMaxTokensToContext: a 15 % margin while 32768 tokens are left,
    else 4096 and at most 32768; never below 1; no window, no fitting."""
    assert (
        output_cap(Model(id="m", provider="p", context_window=64_000, max_tokens=64_000), 21_002)
        == 38_902
    )
    assert (
        output_cap(Model(id="m", provider="p", context_window=200_000, max_tokens=8_000), 21_002)
        == 8_000
    )
    huge = Model(id="m", provider="p", context_window=1_000_000, max_tokens=128_000)
    assert output_cap(huge, 900_000) == 32_768
    assert (
        output_cap(Model(id="m", provider="p", context_window=32_000, max_tokens=32_000), 45)
        == 27_859
    )
    assert (
        output_cap(Model(id="m", provider="p", context_window=8_000, max_tokens=4_000), 9_000) == 1
    )
    assert (
        output_cap(Model(id="m", provider="p", context_window=0, max_tokens=4_000), 9_000) == 4_000
    )


def test_the_context_estimate() -> None:
    """pi 1.6.0's estimateContextTokens: 3.5 characters a token for all of it (the system
    prompt and the tools too) before an answer; after one, its usage plus what followed."""
    tool = ToolSpec("read", "d", {})  # [{"name":"read","description":"d","parameters":{}}]: 51
    before = (UserMessage("x" * 35, timestamp=0),)
    assert context_estimate(before, "s" * 70, (tool,)) == 10 + 20 + 15
    answered = (
        *before,
        AssistantMessage(content=(READ,), usage=Usage(input=20_000, output=1_000)),
        ToolResultMessage("call_1", "read", (TextContent("y" * 7),)),
    )
    assert context_estimate(answered, "s" * 70, (tool,)) == 21_000 + 2


async def test_the_cap_sent_is_fitted(server: ScriptedServer, provider: OpenAIProvider) -> None:
    """The cap on the wire is the model's max_tokens fitted to the estimate of the request."""
    model = Model(id="m", provider="interop", context_window=32_000, max_tokens=32_000)
    request = ProviderRequest(
        model,
        (UserMessage("x" * 35, timestamp=0),),
        system_prompt="s" * 70,
        tools=(ToolSpec("read", "d", {}),),
    )
    body = await body_of(server, provider, request)
    assert body["max_completion_tokens"] == 27_859


def test_compat_reads_only_known_values() -> None:
    """A ``compat`` value of the wrong kind is ignored: the detected one stands."""
    model = Model(
        id="m",
        provider="deepseek",
        compat={"supportsStore": "yes", "maxTokensField": "tokens", "supportsDeveloperRole": 1},
    )
    compat = openai_compat(model)
    assert (compat.store, compat.max_tokens_field, compat.developer_role) == (
        False,
        "max_tokens",
        False,
    )


async def test_user_images_for_a_text_model(
    server: ScriptedServer, provider: OpenAIProvider
) -> None:
    """A text-only model gets pi's placeholder where a user message had images."""
    message = UserMessage((TextContent("what is it?"), PNG, PNG))
    body = await body_of(server, provider, ProviderRequest(LOCAL, (message,)))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is it?"},
                {"type": "text", "text": "(image omitted: model does not support images)"},
            ],
        }
    ]
