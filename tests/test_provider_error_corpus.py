"""Real error bodies, pinned: what each becomes over HTTP, and what the classifiers decide.

Each row is an error response in the shape a real server sends it — OpenAI, Anthropic,
OpenRouter, llama.cpp, vLLM, Ollama, LM Studio, and the proxies in front of them — served
by the test server to the matching adapter. The row pins the whole ``errorMessage``
the adapter makes of it (R-52) and the decision of the reference and strict
classifiers ("retry", "overflow" for compaction, "none" to just end).

Rows worth reading:

* ``openai-401-masked-key`` — OpenAI masks the key itself; ours is redacted anyway.
* ``openrouter-402-credits`` — the reference retries a payment error because "1500"
  contains "500" (R-8's trap); strict does not.
* ``cloudflare-524-html`` — an origin timeout behind Cloudflare: the reference does not
  know 524, so it is not retried (faithful to R-5, a known gap); strict does (R-60).
* ``openai-400-empty`` — "400 status code (no body)" is the reference's overflow rule (R-7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs
import pytest
import trio

from trio_session import (
    REFERENCE_CLASSIFIER,
    STRICT_CLASSIFIER,
    AssistantMessage,
    Model,
    PatternClassifier,
    ProviderRequest,
    StreamEnd,
    UserMessage,
)
from trio_session.providers._anthropic import AnthropicProvider
from trio_session.providers._http import HttpProvider
from trio_session.providers._openai import OpenAIProvider

from .http_server import ScriptedServer, respond
from .provider_support import Decision, RecordingSink

KEY = "sk-proj-Corpus0123456789abcdef"


@attrs.frozen
class Fault:
    """One real error response and what it must become."""

    id: str
    api: Literal["openai", "anthropic"]
    status: int
    body: Any
    expected: str
    reference: Decision
    strict: Decision
    headers: tuple[tuple[str, str], ...] = ()
    reason: str | None = None
    content_type: str | None = None


def oai(message: str, type: str | None = None, code: Any = None, **extra: Any) -> dict[str, Any]:
    """OpenAI's error shape (also OpenRouter's and llama.cpp's, with extra fields)."""
    return {"error": {"message": message, "type": type, "param": None, "code": code, **extra}}


def ant(type: str, message: str) -> dict[str, Any]:
    """Anthropic's error shape."""
    return {"type": "error", "error": {"type": type, "message": message}, "request_id": "req_1"}


OPENAI_CONTEXT = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more"
    " information on this error, read the docs:"
    " https://platform.openai.com/docs/guides/error-codes/api-errors."
)
OVERLOADED_MODEL = (
    "That model is currently overloaded with other requests. You can retry your request, or"
    " contact us through our help center at help.openai.com if the error persists."
)
OPENROUTER_UPSTREAM = (
    "deepseek/deepseek-chat-v3-0324:free is temporarily rate-limited upstream. Please retry"
    " shortly, or add your own key to accumulate your rate limits:"
    " https://openrouter.ai/settings/integrations"
)
OPENROUTER_CREDITS = (
    "This request requires more credits, or fewer max_tokens. You requested up to 16384"
    " tokens, but can only afford 1500. To increase, visit https://openrouter.ai/settings/credits"
    " and upgrade to a paid account"
)
OPENROUTER_CONTEXT = (
    "This endpoint's maximum context length is 163840 tokens. However, you requested about"
    " 170912 tokens (154528 of text input, 16384 in the output). Please reduce the length of"
    ' either one, or use the "middle-out" transform to compress your prompt automatically.'
)
VLLM_CONTEXT = (
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens"
    " (8000 in the messages, 1000 in the completion). Please reduce the length of the"
    " messages or completion."
)
LMSTUDIO_CONTEXT = (
    "The number of tokens to keep from the initial prompt is greater than the context length."
    " Try to load the model with a larger context length, or provide a shorter input"
)
CLOUDFLARE_524 = (
    "<!DOCTYPE html><html><head><title>api.example.com | 524: A timeout occurred</title>"
    "<style>body{font-family:sans-serif}</style></head><body><h1>A timeout occurred</h1>"
    "<p>Error code 524</p><p>Visit <a href='https://www.cloudflare.com/'>cloudflare.com</a>"
    " for more information.</p></body></html>"
)

CORPUS: tuple[Fault, ...] = (
    # --- OpenAI -----------------------------------------------------------------------
    Fault(
        "openai-400-context-window",
        "openai",
        400,
        oai(OPENAI_CONTEXT, "invalid_request_error", "context_length_exceeded"),
        f"400 Bad Request: {OPENAI_CONTEXT} (context_length_exceeded)",
        "overflow",
        "overflow",
    ),
    Fault(
        "openai-429-insufficient-quota",
        "openai",
        429,
        oai(QUOTA, "insufficient_quota", "insufficient_quota"),
        f"429 Too Many Requests: {QUOTA} (insufficient_quota)",
        "retry",
        "none",
    ),
    Fault(
        "openai-401-masked-key",
        "openai",
        401,
        oai(
            "Incorrect API key provided: sk-proj-********************cdef. You can find your API"
            " key at https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        ),
        "401 Unauthorized: Incorrect API key provided: sk-proj-********************cdef. You"
        " can find your API key at https://platform.openai.com/account/api-keys."
        " (invalid_api_key)",
        "none",
        "none",
        headers=(("x-ratelimit-reset-requests", "1s"),),
    ),
    Fault(
        "openai-503-model-overloaded",
        "openai",
        503,
        oai(OVERLOADED_MODEL, "server_error"),
        f"503 Service Unavailable: {OVERLOADED_MODEL} (server_error)",
        "retry",
        "retry",
    ),
    Fault(
        "openai-400-empty",
        "openai",
        400,
        "",
        "400 status code (no body)",
        "overflow",
        "overflow",
    ),
    # --- Anthropic --------------------------------------------------------------------
    Fault(
        "anthropic-529-overloaded",
        "anthropic",
        529,
        ant("overloaded_error", "Overloaded"),
        "529: Overloaded (overloaded_error)",
        "retry",
        "retry",
    ),
    Fault(
        "anthropic-400-credit-balance",
        "anthropic",
        400,
        ant(
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans &"
            " Billing to upgrade or purchase credits.",
        ),
        "400 Bad Request: Your credit balance is too low to access the Anthropic API. Please go"
        " to Plans & Billing to upgrade or purchase credits. (invalid_request_error)",
        "none",
        "none",
    ),
    Fault(
        "anthropic-400-usage-limits",
        "anthropic",
        400,
        ant(
            "invalid_request_error",
            "You have reached your specified API usage limits. You will regain access on"
            " 2025-08-01 at 00:00 UTC.",
        ),
        "400 Bad Request: You have reached your specified API usage limits. You will regain"
        " access on 2025-08-01 at 00:00 UTC. (invalid_request_error)\nretry-after: 3600",
        "retry",
        "retry",
        headers=(("retry-after", "3600"),),
    ),
    Fault(
        "anthropic-403-permission",
        "anthropic",
        403,
        ant(
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        "403 Forbidden: Your API key does not have permission to use the specified resource."
        " (permission_error)",
        "none",
        "none",
    ),
    # --- OpenRouter -------------------------------------------------------------------
    Fault(
        "openrouter-429-upstream",
        "openai",
        429,
        oai("Provider returned error", code=429, metadata={"raw": OPENROUTER_UPSTREAM}),
        f"429 Too Many Requests: Provider returned error: {OPENROUTER_UPSTREAM}",
        "retry",
        "retry",
    ),
    Fault(
        "openrouter-402-credits",
        "openai",
        402,
        oai(OPENROUTER_CREDITS, code=402),
        f"402 Payment Required: {OPENROUTER_CREDITS}",
        "retry",
        "none",
    ),
    Fault(
        "openrouter-400-context",
        "openai",
        400,
        oai(OPENROUTER_CONTEXT, code=400),
        f"400 Bad Request: {OPENROUTER_CONTEXT}",
        "overflow",
        "overflow",
    ),
    # --- local servers ----------------------------------------------------------------
    Fault(
        "llamacpp-400-context-size",
        "openai",
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 5120,
                "n_ctx": 4096,
            }
        },
        "400 Bad Request: the request exceeds the available context size, try increasing it"
        " (exceed_context_size_error)",
        "overflow",
        "overflow",
    ),
    Fault(
        "llamacpp-503-loading",
        "openai",
        503,
        {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
        "503 Service Unavailable: Loading model (unavailable_error)",
        "retry",
        "retry",
    ),
    Fault(
        "vllm-400-context",
        "openai",
        400,
        {
            "object": "error",
            "message": VLLM_CONTEXT,
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        f"400 Bad Request: {VLLM_CONTEXT} (BadRequestError)",
        "overflow",
        "overflow",
    ),
    Fault(
        "ollama-404-model",
        "openai",
        404,
        {"error": 'model "qwen2.5-coder:32b" not found, try pulling it first'},
        '404 Not Found: model "qwen2.5-coder:32b" not found, try pulling it first',
        "none",
        "none",
    ),
    Fault(
        "ollama-500-runner",
        "openai",
        500,
        {"error": "llama runner process has terminated: exit status 2"},
        "500 Internal Server Error: llama runner process has terminated: exit status 2",
        "retry",
        "retry",
    ),
    Fault(
        "lmstudio-400-context",
        "openai",
        400,
        {"error": LMSTUDIO_CONTEXT},
        f"400 Bad Request: {LMSTUDIO_CONTEXT}",
        "overflow",
        "overflow",
    ),
    # --- proxies ----------------------------------------------------------------------
    Fault(
        "envoy-503-plain-text",
        "openai",
        503,
        "upstream connect error or disconnect/reset before headers. reset reason: connection"
        " termination",
        "503 Service Unavailable: upstream connect error or disconnect/reset before headers."
        " reset reason: connection termination\nretry-after: 5",
        "retry",
        "retry",
        headers=(("retry-after", "5"),),
    ),
    Fault(
        "cloudflare-524-html",
        "openai",
        524,
        CLOUDFLARE_524,
        "524: api.example.com | 524: A timeout occurred A timeout occurred Error code 524 Visit"
        " cloudflare.com for more information.",
        "none",
        "retry",
        reason="",
        content_type="text/html; charset=UTF-8",
    ),
)


def decide(classifier: PatternClassifier, text: str | None) -> Decision:
    """What ``classifier`` does with a run ending in this error."""
    message = AssistantMessage(stop_reason="error", error_message=text)
    if classifier.is_context_overflow(message):
        return "overflow"
    return "retry" if classifier.is_retryable(message) else "none"


PROVIDERS: dict[str, Callable[[str], HttpProvider]] = {
    "openai": lambda url: OpenAIProvider(base_url=f"{url}/v1"),
    "anthropic": lambda url: AnthropicProvider(base_url=url),
}


@pytest.mark.parametrize("fault", CORPUS, ids=[f.id for f in CORPUS])
async def test_error_body_becomes_pinned_message(nursery: trio.Nursery, fault: Fault) -> None:
    """R-52, R-7, R-8: a real error body → the pinned errorMessage → the pinned decisions."""
    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(
        respond(
            fault.status,
            fault.body,
            fault.headers,
            reason=fault.reason,
            content_type=fault.content_type,
        )
    )
    request = ProviderRequest(Model("m", fault.api), (UserMessage("Hi", timestamp=0),), api_key=KEY)
    async with PROVIDERS[fault.api](server.url) as provider:
        end = await provider.stream(request, RecordingSink())
    assert end == StreamEnd.error(fault.expected)
    assert (
        decide(REFERENCE_CLASSIFIER, fault.expected),
        decide(STRICT_CLASSIFIER, fault.expected),
    ) == (
        fault.reference,
        fault.strict,
    )
