"""The classifiers against a corpus of real provider error texts (R-4 … R-8, R-57 … R-60).

Every row is an ``errorMessage`` as our HTTP adapters format it (HTTP status first, then
the server's own message, then retry headers as ``name: value`` lines), with the
decision each classifier should reach: ``"overflow"`` (goes to compaction), ``"retry"``
(the retry policy takes it) or ``"none"`` (the run just ends in that error).

* The ``reference`` column is R-4/R-5/R-7 applied by hand, traps included: the
  reference matches bare ``429``/``50x`` anywhere, so model names, image sizes, key
  fragments, request ids and token counts trip it.
* The ``strict`` column is the documented intent of ``retry.classifier: "strict"``:
  status codes only as whole numbers, billing/quota/auth errors never retried, a
  per-minute rate limit never taken for an overflow, pi 1.6.0's transport wordings.
* The ``pi16`` column is what pi 1.6.0 itself decides (the ``"pi-1.6"`` profile);
  ``tests/interop/test_pi_classifiers.py`` feeds every row to pi 1.6.0's own function
  under node 22 and checks the column.

Rows where the code disagrees with that intent can be listed in
:data:`STRICT_SUSPECTED_BUGS` and run as strict xfails, so fixing the classifier turns
them into failures that ask for the entry to be removed. (The four found when the
corpus was written — "billing" links in OpenAI/Groq/Gemini rate limits, xAI's spending
limit — are fixed.)

:func:`render_difference_table` renders, row by row, where the three classifiers differ;
docs/spec.md holds it between markers, and a test checks it is the live one
(``python -m tests.test_classify_corpus`` rewrites it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal, TypeAlias

import attrs
import pytest

from trio_session import (
    PI_1_6_CLASSIFIER,
    REFERENCE_CLASSIFIER,
    RETRYABLE_PATTERN,
    STRICT_CLASSIFIER,
    AssistantMessage,
    PatternClassifier,
    Usage,
)

Decision: TypeAlias = Literal["retry", "overflow", "none"]
StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]

#: SPEC R-5, copied verbatim from the contract (not from the code), so drift is caught.
R5 = (
    r"overloaded|rate.?limit|usage.?limit|too many requests|429|500|502|503|504"
    r"|service.?unavailable|server error|internal error|connection.?error|fetch failed"
    r"|retry delay"
)


@attrs.frozen
class Row:
    """One corpus entry: an error text and what each classifier should decide."""

    id: str
    text: str | None
    reference: Decision
    strict: Decision
    pi16: Decision
    stop_reason: StopReason = "error"
    provider: str = ""

    def message(self) -> AssistantMessage:
        """The assistant message that ended the run with this error text."""
        return AssistantMessage(
            stop_reason=self.stop_reason, error_message=self.text, provider=self.provider
        )


CORPUS: tuple[Row, ...] = (
    # --- OpenAI -----------------------------------------------------------------------
    Row(
        "openai-429-tpm-rate-limit",
        "429 Too Many Requests: Rate limit reached for gpt-4o in organization org-abc on"
        " tokens per min (TPM): Limit 30000, Used 29500, Requested 1200. Please try again"
        " in 2.4s. Visit https://platform.openai.com/account/rate-limits to learn more."
        "\nretry-after: 2",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        # A per-minute limit that heals in 20 s; the upsell link mentions "billing".
        "openai-429-rpm-add-payment-method",
        "429 Too Many Requests: Rate limit reached for gpt-4o-mini in organization org-abc on"
        " requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s."
        " Visit https://platform.openai.com/account/rate-limits to learn more. You can"
        " increase your rate limit by adding a payment method to your account at"
        " https://platform.openai.com/account/billing.\nretry-after: 20",
        "retry",
        "retry",
        "none",
    ),
    Row(
        # "Request too large", not "request_too_large": no overflow pattern; 429 retries.
        "openai-429-request-too-large-tpm",
        "429 Too Many Requests: Request too large for gpt-4o in organization org-abc on"
        " tokens per min (TPM): Limit 30000, Requested 45210. The input or output tokens"
        " must be reduced in order to run successfully. Visit"
        " https://platform.openai.com/account/rate-limits to learn more.",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "openai-429-insufficient-quota",
        "429 Too Many Requests: You exceeded your current quota, please check your plan and"
        " billing details. For more information on this error, read the docs:"
        " https://platform.openai.com/docs/guides/error-codes/api-errors."
        " (insufficient_quota)",
        "retry",
        "none",
        "none",
    ),
    Row(
        # Trap: "502" inside the key fragment.
        "openai-401-api-key-fragment",
        "401 Unauthorized: Incorrect API key provided: sk-proj-abc502xyz. You can find your"
        " API key at https://platform.openai.com/account/api-keys.",
        "retry",
        "none",
        "none",
    ),
    Row(
        # Trap: "429" inside the model name.
        "openai-404-model-name-digits",
        "404 Not Found: The model `gpt-5.5-preview-0429` does not exist or you do not have"
        " access to it.",
        "retry",
        "none",
        "none",
    ),
    Row(
        "openai-400-context-length-exceeded",
        "400 Bad Request: This model's maximum context length is 128000 tokens. However,"
        " your messages resulted in 131072 tokens. Please reduce the length of the"
        " messages. (context_length_exceeded)",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "openai-400-exceeds-context-window",
        "400 Bad Request: Your input exceeds the context window of this model. Please adjust"
        " your input and try again.",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "openai-500-server-error",
        "500 Internal Server Error: The server had an error while processing your request."
        " Sorry about that!",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "openai-503-engine-overloaded",
        "503 Service Unavailable: The engine is currently overloaded, please try again"
        " later.\nretry-after: 1",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        # Trap: "504" inside the image size.
        "openai-400-image-1504x1504",
        "400 Bad Request: Invalid image in messages[4].content[1]: the decoded image"
        " (1504x1504, 31 MB) is larger than the 20 MB limit.",
        "retry",
        "none",
        "none",
    ),
    Row(
        "openai-400-unsupported-parameter",
        "400 Bad Request: Unsupported parameter: 'max_tokens' is not supported with this"
        " model. Use 'max_completion_tokens' instead.",
        "none",
        "none",
        "none",
    ),
    Row(
        "openai-403-project-model-access",
        "403 Forbidden: Project `proj_Xk2f` does not have access to model `o3-pro`",
        "none",
        "none",
        "none",
    ),
    # --- Anthropic --------------------------------------------------------------------
    Row(
        "anthropic-529-overloaded-error",
        '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},'
        '"request_id":"req_011CVx3qJ8"}',
        "retry",
        "retry",
        "retry",
    ),
    Row(
        # 529 is not in R-5 and there is no "overloaded" to catch it.
        "anthropic-529-no-body",
        "529 status code (no body)",
        "none",
        "retry",
        "none",
    ),
    Row(
        "anthropic-429-rate-limit-error",
        '429 {"type":"error","error":{"type":"rate_limit_error","message":"This request'
        " would exceed the rate limit for your organization"
        " (7d8c1b2a-ffee-4c1d-9d1e-abcdefabcdef) of 30,000 input tokens per minute. For"
        " details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the"
        " response headers for current usage. Please reduce the prompt length or the"
        " maximum tokens requested, or try again later. You may also contact sales at"
        " https://www.anthropic.com/contact-sales to discuss your options for a rate limit"
        ' increase."}}\nretry-after: 14',
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "anthropic-413-request-too-large",
        '413 {"type":"error","error":{"type":"request_too_large","message":"Request exceeds'
        ' the maximum size"}}',
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "anthropic-400-prompt-too-long",
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is'
        ' too long: 213462 tokens > 200000 maximum"}}',
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "anthropic-500-api-error",
        '500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "anthropic-401-authentication-error",
        '401 {"type":"error","error":{"type":"authentication_error","message":"invalid'
        ' x-api-key"}}',
        "none",
        "none",
        "none",
    ),
    Row(
        "anthropic-400-credit-balance-too-low",
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"Your credit'
        " balance is too low to access the Anthropic API. Please go to Plans & Billing to"
        ' upgrade or purchase credits."}}',
        "none",
        "none",
        "none",
    ),
    Row(
        "anthropic-403-permission-error",
        '403 {"type":"error","error":{"type":"permission_error","message":"Your API key'
        ' does not have permission to use the specified resource."}}',
        "none",
        "none",
        "none",
    ),
    Row(
        # Trap: "500" inside the token count 64500.
        "anthropic-400-max-tokens-digits",
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"max_tokens:'
        " 64500 > 64000, which is the maximum allowed number of output tokens for"
        ' claude-sonnet-4-5-20250929"}}',
        "retry",
        "none",
        "none",
    ),
    Row(
        # Trap: "502" inside a tool_use id.
        "anthropic-400-tool-use-id-digits",
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"messages.2:'
        " `tool_use` ids were found without `tool_result` blocks immediately after:"
        " toolu_01A5029XbQ. Each `tool_use` block must have a corresponding `tool_result`"
        ' block in the next message."},"request_id":"req_011CV8a5mQ"}',
        "retry",
        "none",
        "none",
    ),
    Row(
        # R-17 usage limit: retried (credential rotation decides the delay).
        "anthropic-400-api-usage-limits",
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"You have'
        " reached your specified API usage limits. You will regain access on 2025-08-01 at"
        ' 00:00 UTC."}}',
        "retry",
        "retry",
        "none",
    ),
    # --- Google Gemini ----------------------------------------------------------------
    Row(
        "gemini-429-resource-exhausted",
        "429 RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota).",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        # Free-tier per-minute limit: worded as a quota, but the server says when to retry.
        "gemini-429-free-tier-quota-retry-in",
        "429 RESOURCE_EXHAUSTED: You exceeded your current quota, please check your plan and"
        " billing details. For more information on this error, head to:"
        " https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage,"
        " head to: https://ai.dev/usage?tab=rate-limit.\n* Quota exceeded for metric:"
        " generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 10,"
        " model: gemini-2.5-flash\nPlease retry in 43.2s.",
        "retry",
        "retry",
        "none",
    ),
    Row(
        "gemini-400-input-token-count",
        "400 INVALID_ARGUMENT: The input token count (1196265) exceeds the maximum number of"
        " tokens allowed (1048575).",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "gemini-500-internal",
        "500 INTERNAL: An internal error has occurred. Please retry or report in"
        " https://developers.generativeai.google/guide/troubleshooting",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "gemini-503-unavailable",
        "503 UNAVAILABLE: The model is overloaded. Please try again later.",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "gemini-400-api-key-invalid",
        "400 INVALID_ARGUMENT: API key not valid. Please pass a valid API key. (API_KEY_INVALID)",
        "none",
        "none",
        "none",
    ),
    Row(
        "gemini-403-permission-denied",
        "403 PERMISSION_DENIED: Generative Language API has not been used in project"
        " 861123456789 before or it is disabled. Enable it by visiting"
        " https://console.developers.google.com/apis/api/generativelanguage.googleapis.com"
        "/overview?project=861123456789 then retry.",
        "none",
        "none",
        "none",
    ),
    # --- OpenRouter -------------------------------------------------------------------
    Row(
        "openrouter-429-upstream-rate-limited",
        "429 Too Many Requests: Provider returned error: deepseek/deepseek-chat-v3-0324:free"
        " is temporarily rate-limited upstream. Please retry shortly, or add your own key"
        " to accumulate your rate limits: https://openrouter.ai/settings/integrations",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        # Trap: "500" inside "1500"; a payment problem never heals by waiting.
        "openrouter-402-insufficient-credits",
        "402 Payment Required: This request requires more credits, or fewer max_tokens. You"
        " requested up to 16384 tokens, but can only afford 1500. To increase, visit"
        " https://openrouter.ai/settings/credits and upgrade to a paid account",
        "retry",
        "none",
        "none",
    ),
    Row(
        "openrouter-400-maximum-context-length",
        "400 Bad Request: This endpoint's maximum context length is 163840 tokens. However,"
        " you requested about 170912 tokens (154528 of text input, 16384 in the output)."
        ' Please reduce the length of either one, or use the "middle-out" transform to'
        " compress your prompt automatically.",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "openrouter-502-provider-returned-error",
        "502 Bad Gateway: Provider returned error",
        "retry",
        "retry",
        "retry",
    ),
    # --- Groq -------------------------------------------------------------------------
    Row(
        # A per-minute limit that heals in 5.9 s; the upsell link mentions "billing".
        "groq-429-tpm-billing-link",
        "429 Too Many Requests: Rate limit reached for model `llama-3.3-70b-versatile` in"
        " organization `org_01jxk3` service tier `on_demand` on tokens per minute (TPM):"
        " Limit 12000, Used 9870, Requested 3310. Please try again in 5.9s. Need more"
        " tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing"
        "\nretry-after: 6",
        "retry",
        "retry",
        "none",
    ),
    Row(
        "groq-400-reduce-length-of-messages",
        "400 Bad Request: Please reduce the length of the messages or completion.",
        "overflow",
        "overflow",
        "overflow",
    ),
    # --- Mistral ----------------------------------------------------------------------
    Row(
        "mistral-400-too-large-for-model",
        "400 Bad Request: Prompt contains 40520 tokens and 0 draft tokens, too large for"
        " model with 32768 maximum context length",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "mistral-429-requests-rate-limit",
        "429 Too Many Requests: Requests rate limit exceeded",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "mistral-401-unauthorized",
        "401 Unauthorized: Unauthorized",
        "none",
        "none",
        "none",
    ),
    Row(
        "mistral-413-no-body",
        "413 status code (no body)",
        "overflow",
        "overflow",
        "overflow",
    ),
    # --- xAI --------------------------------------------------------------------------
    Row(
        "xai-400-maximum-prompt-length",
        "400 Bad Request: This model's maximum prompt length is 131072 but the request"
        " contains 145210 tokens.",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        # A spending limit / exhausted credits behind a 429: will not heal by waiting.
        "xai-429-credits-spending-limit",
        "429 Too Many Requests: Your team 0b1f7e3c has either used all available credits or"
        " reached its monthly spending limit. To continue making API requests, please"
        " purchase more credits or raise your spending limit.",
        "retry",
        "none",
        "retry",
    ),
    # --- llama.cpp, vLLM, Ollama, LM Studio -------------------------------------------
    Row(
        "llamacpp-400-exceeds-available-context-size",
        "400 Bad Request: the request exceeds the available context size, try increasing it",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "llamacpp-503-loading-model",
        "503 Service Unavailable: Loading model",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "vllm-400-maximum-context-length",
        "400 Bad Request: This model's maximum context length is 8192 tokens. However, you"
        " requested 9000 tokens (8000 in the messages, 1000 in the completion). Please"
        " reduce the length of the messages or completion.",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "ollama-404-model-not-found",
        '404 Not Found: model "qwen2.5-coder:32b" not found, try pulling it first',
        "none",
        "none",
        "none",
    ),
    Row(
        "ollama-500-runner-terminated",
        "500 Internal Server Error: llama runner process has terminated: exit status 2",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        # Server not (yet) listening: R-5 has only "connection error".
        "ollama-connection-refused",
        "[Errno 111] Connection refused",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "lmstudio-400-greater-than-context-length",
        "400 Bad Request: The number of tokens to keep from the initial prompt is greater"
        " than the context length. Try to load the model with a larger context length, or"
        " provide a shorter input",
        "overflow",
        "overflow",
        "overflow",
    ),
    # --- AWS Bedrock ------------------------------------------------------------------
    Row(
        # The R-8 trap: a throttle that the reference's "too many tokens" calls an overflow.
        "bedrock-429-throttling-too-many-tokens",
        "429 ThrottlingException: Too many tokens, please wait before trying again.",
        "overflow",
        "retry",
        "overflow",
    ),
    Row(
        "bedrock-400-input-too-long",
        "400 ValidationException: Input is too long for requested model.",
        "overflow",
        "overflow",
        "overflow",
    ),
    Row(
        "bedrock-429-throttling-too-many-requests",
        "429 ThrottlingException: Too many requests, please wait before trying again.",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "bedrock-503-service-unavailable",
        "503 ServiceUnavailableException: Bedrock is unable to process your request.",
        "retry",
        "retry",
        "retry",
    ),
    Row(
        "bedrock-403-access-denied",
        "403 AccessDeniedException: You don't have access to the model with the specified"
        " model ID.",
        "none",
        "none",
        "none",
    ),
    # --- Cerebras ---------------------------------------------------------------------
    Row(
        "cerebras-400-no-body",
        "400 status code (no body)",
        "overflow",
        "overflow",
        "overflow",
        provider="cerebras",
    ),
    Row(
        # Per-minute token limit worded "too many tokens": the reference calls it overflow.
        "cerebras-429-tokens-per-minute",
        "429 Too Many Requests: Tokens per minute limit exceeded - too many tokens processed.",
        "overflow",
        "retry",
        "retry",
        provider="cerebras",
    ),
    # --- Network and proxies ----------------------------------------------------------
    Row("network-connection-error", "Connection error.", "retry", "retry", "retry"),
    Row("network-fetch-failed", "fetch failed", "retry", "retry", "retry"),
    Row(
        "network-connection-reset-by-peer",
        "[Errno 104] Connection reset by peer",
        "none",
        "retry",
        "retry",
    ),
    Row(
        # R-5 knows no timeouts; pi 1.6.0 and strict do ("timed? out").
        "network-read-timeout",
        "The read operation timed out",
        "none",
        "retry",
        "retry",
    ),
    Row(
        # httpx's wording; strict's own addition.
        "network-server-disconnected",
        "Server disconnected without sending a response.",
        "none",
        "retry",
        "none",
    ),
    Row(
        "proxy-504-gateway-timeout-html",
        "504 Gateway Time-out: <html><head><title>504 Gateway Time-out</title></head><body>"
        "<center><h1>504 Gateway Time-out</h1></center></body></html>",
        "retry",
        "retry",
        "retry",
    ),
    # --- pi 1.6.0's incidents (its CHANGELOG 0.76 … 1.5) -------------------------------
    Row(
        "gateway-api-error-connection-closed",
        '{"type":"error","error":{"type":"api_error","message":"Connection closed."}}',
        "none",
        "retry",
        "retry",
    ),
    Row("node-read-econnreset", "read ECONNRESET", "none", "retry", "retry"),
    Row("node-write-epipe", "write EPIPE", "none", "retry", "retry"),
    Row("node-connect-etimedout", "connect ETIMEDOUT 104.18.32.47:443", "none", "retry", "retry"),
    Row("node-socket-hang-up", "socket hang up", "none", "retry", "retry"),
    Row("undici-terminated", "terminated", "none", "retry", "retry"),
    Row("undici-other-side-closed", "other side closed", "none", "retry", "retry"),
    Row("network-connection-lost", "Network connection lost.", "none", "retry", "retry"),
    Row(
        "dns-getaddrinfo-enotfound",
        "getaddrinfo ENOTFOUND api.anthropic.com",
        "none",
        "retry",
        "retry",
    ),
    Row("dns-eai-again", "getaddrinfo EAI_AGAIN api.openai.com", "none", "retry", "retry"),
    Row(
        "vertex-oauth-request-failed",
        "request to https://oauth2.googleapis.com/token failed, reason: ",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "bun-socket-connection-closed",
        "The socket connection was closed unexpectedly. For more information, pass `verbose:"
        " true` in the second argument to fetch()",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "stream-ended-without-chunks",
        "request ended without sending any chunks",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "anthropic-stream-ended-before-message-stop",
        "Anthropic stream ended before message_stop",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "codex-proxy-stream-disconnected",
        "stream disconnected before completion: stream closed before response.completed",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "magpie-cut-short",
        "Claude Code's stream from Anthropic was cut short after the reply had begun",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "bedrock-http2-no-response",
        "http2 request did not get a response",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "bedrock-pending-stream-canceled",
        "The pending stream has been canceled (caused by: NGHTTP2_REFUSED_STREAM)",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "codex-websocket-connection-limit",
        "Responses websocket connection limit reached (websocket_connection_limit_reached)",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "gateway-unable-to-forward-upstream",
        "Unable to forward upstream stream",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "gateway-upstream-provider-returned-an-error",
        "The upstream provider returned an error",
        "none",
        "retry",
        "retry",
    ),
    Row(
        # R-5's service.?unavailable allows one character between the words.
        "service-is-temporarily-unavailable",
        "The service is temporarily unavailable",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "deepseek-server-busy",
        '{"error":{"code":"server_busy","message":"Servers are currently busy. Please try'
        ' again later."}}',
        "none",
        "retry",
        "retry",
    ),
    Row(
        "model-at-capacity",
        "Selected model is at capacity. Please try a different model.",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "azure-high-demand",
        "We're currently experiencing high demand, which may cause temporary errors.",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "cloudflare-520-unknown-error",
        "520 <unknown status code>: Web server is returning an unknown error",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "openai-responses-you-can-retry",
        "An error occurred while processing your request. You can retry your request, or"
        " contact us through our help center at help.openai.com if the error persists."
        " Please include the request ID req_7f3e1d2c in your message.",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "nvidia-grpc-resource-exhausted",
        "grpc error: ResourceExhausted: the model is out of capacity",
        "none",
        "retry",
        "retry",
    ),
    Row(
        "dashscope-400-range-of-input-length",
        "400 InvalidParameter: Range of input length should be [1, 129024]",
        "none",
        "overflow",
        "overflow",
    ),
    Row(
        "copilot-413-failed-to-parse",
        "413 failed to parse request",
        "none",
        "overflow",
        "overflow",
    ),
    Row(
        "together-400-input-longer-than-context",
        "400 Bad Request: Input (40960 tokens) is longer than the model's context length"
        " (32768 tokens)",
        "none",
        "overflow",
        "overflow",
    ),
    Row(
        # pi 1.6.0 reads a bodyless 400 as an overflow only from Cerebras.
        "openai-400-no-body-not-cerebras",
        "400 status code (no body)",
        "overflow",
        "overflow",
        "none",
        provider="openai",
    ),
    # --- Traps of pi 1.6.0: digits inside ids and byte counts (#11057), quota (#4991) ---
    Row(
        "trap-request-id-and-length-digits",
        "400 Bad Request: Invalid 'messages[3].content': string too long. Expected a string"
        " with maximum length 1048576, but got a string with length 5029441 instead."
        " (request id: req_a4293c500f)",
        "retry",
        "none",
        "none",
    ),
    Row(
        "trap-image-byte-count",
        "400 Bad Request: image exceeds 5 MB maximum: 5503504 bytes > 5242880 bytes",
        "retry",
        "none",
        "none",
    ),
    Row(
        # A daily quota: pi 1.6.0's "quota exceeded" and strict's "per day" never retry it.
        "gemini-429-daily-quota-exceeded",
        "429 RESOURCE_EXHAUSTED: Quota exceeded for quota metric 'Generate Content API"
        " requests per day' and limit 'GenerateContent request limit per day' of service"
        " 'generativelanguage.googleapis.com'",
        "retry",
        "none",
        "none",
    ),
    Row(
        "litellm-429-out-of-budget",
        "429 Too Many Requests: team is out of budget (spend 50.12 > max budget 50.0)",
        "retry",
        "none",
        "none",
    ),
    Row(
        # Plan usage limits: pi 1.6.0 never retries them (#11537); seed and strict retry,
        # so that R-17 rotates the credential first (the profile decides when none is left).
        "zai-429-code-1308",
        '429 {"error":{"code":"1308","message":"Usage limit reached for 5 hour. Your limit'
        ' will reset at 2026-01-12 18:04:07"}}',
        "retry",
        "retry",
        "none",
    ),
    Row(
        "opencode-go-usage-limit",
        '429 {"type":"error","error":{"type":"GoUsageLimitError","message":"Monthly usage'
        ' limit reached. Enable available balance usage to continue."}}',
        "retry",
        "retry",
        "none",
    ),
    Row(
        "chatgpt-subscription-usage-limit",
        '{"error":{"type":"usage_limit_reached","code":"subscription_sharing_usage_limit'
        '_exceeded","message":"You have hit your ChatGPT usage limit (plus plan). Try again'
        ' in ~158 min."}}',
        "retry",
        "retry",
        "none",
    ),
    Row(
        # pi 1.6.0's bare "timeout" retries a parameter error; strict's does not.
        "trap-unsupported-parameter-timeout",
        "400 Bad Request: Unsupported parameter: 'timeout' is not supported with this model.",
        "none",
        "none",
        "retry",
    ),
    Row(
        # pi 1.6.0's bare "terminated" retries a closed account; strict never does.
        "trap-account-terminated",
        "403 Forbidden: This account has been terminated for violating the usage policies.",
        "none",
        "none",
        "retry",
    ),
    # --- No error message, or not an error (R-4) --------------------------------------
    Row("no-error-message-none", None, "none", "none", "none"),
    Row("no-error-message-empty", "", "none", "none", "none"),
    Row(
        "stop-with-stale-503", "503 Service Unavailable", "none", "none", "none", stop_reason="stop"
    ),
    Row(
        "aborted-connection-error",
        "Connection error.",
        "none",
        "none",
        "none",
        stop_reason="aborted",
    ),
    Row("length-without-error", None, "none", "none", "none", stop_reason="length"),
    Row(
        "stop-with-overflow-wording",
        "prompt is too long: 213462 tokens > 200000 maximum",
        "none",
        "none",
        "none",
        stop_reason="stop",
    ),
)

#: Rows where the strict classifier's code disagrees with its documented intent.
#: Each runs as a strict xfail; when the classifier is fixed, remove the entry.
STRICT_SUSPECTED_BUGS: dict[str, str] = {}

#: The page that holds the difference table, between these two markers.
DOCS_PAGE = Path(__file__).parent.parent / "docs" / "spec.md"
TABLE_BEGIN = "<!-- classifier-differences: begin (tests/test_classify_corpus.py writes it) -->"
TABLE_END = "<!-- classifier-differences: end -->"

#: The three classifiers, in the table's column order, with their corpus column.
COLUMNS: tuple[tuple[str, PatternClassifier, str], ...] = (
    ("seed", REFERENCE_CLASSIFIER, "reference"),
    ("pi-1.6", PI_1_6_CLASSIFIER, "pi16"),
    ("strict", STRICT_CLASSIFIER, "strict"),
)


def decide(
    classifier: PatternClassifier, message: AssistantMessage, context_window: int | None = None
) -> Decision:
    """What the classifier does with the message: overflow, retry, or nothing."""
    if classifier.is_context_overflow(message, context_window):
        return "overflow"
    if classifier.is_retryable(message, context_window):
        return "retry"
    return "none"


def _excerpt(text: str | None, width: int = 60) -> str:
    if text is None:
        return "(no errorMessage)"
    flat = " ".join(text.split())
    if len(flat) > width:
        flat = flat[: width - 1] + "…"
    return flat.replace("`", "'").replace("|", "\\|") or "(empty)"


def differences(rows: Sequence[Row] = CORPUS) -> Iterator[tuple[Row, tuple[Decision, ...]]]:
    """The rows where the three classifiers, as shipped, do not all decide alike."""
    for row in rows:
        message = row.message()
        decisions = tuple(decide(classifier, message) for _, classifier, _ in COLUMNS)
        if len(set(decisions)) > 1:
            yield row, decisions


def render_difference_table(rows: Sequence[Row] = CORPUS) -> str:
    """A Markdown table of the rows where seed, pi-1.6 and strict differ (R-8, R-60)."""
    names = " | ".join(name for name, _, _ in COLUMNS)
    lines = [f"| id | text excerpt | {names} |", "| --- | --- | --- | --- | --- |"]
    lines.extend(
        f"| {row.id} | {_excerpt(row.text)} | {' | '.join(decisions)} |"
        for row, decisions in differences(rows)
    )
    return "\n".join(lines) + "\n"


def documented_table() -> str:
    """The difference table as the docs page holds it, between its markers."""
    text = DOCS_PAGE.read_text(encoding="utf-8")
    return text.split(TABLE_BEGIN + "\n", 1)[1].split("\n" + TABLE_END, 1)[0].strip() + "\n"


def write_documented_table() -> None:
    """Write the live difference table into the docs page.

    Run as ``python -m tests.test_classify_corpus``.
    """
    text = DOCS_PAGE.read_text(encoding="utf-8")
    head, rest = text.split(TABLE_BEGIN + "\n", 1)
    _old, tail = rest.split("\n" + TABLE_END, 1)
    table = render_difference_table()
    DOCS_PAGE.write_text(f"{head}{TABLE_BEGIN}\n\n{table}\n{TABLE_END}{tail}", encoding="utf-8")


def _params(column: Literal["reference", "strict", "pi16"]) -> list[pytest.ParameterSet]:
    params: list[pytest.ParameterSet] = []
    for row in CORPUS:
        reason = STRICT_SUSPECTED_BUGS.get(row.id) if column == "strict" else None
        marks = [pytest.mark.xfail(reason=f"suspected bug: {reason}", strict=True)]
        params.append(pytest.param(row, id=row.id, marks=marks if reason else ()))
    return params


def test_corpus_is_well_formed() -> None:
    """R-8: the corpus is big enough, and its ids are unique and known to the bug list."""
    ids = [row.id for row in CORPUS]
    assert len(ids) >= 100
    assert len(set(ids)) == len(ids)
    assert set(STRICT_SUSPECTED_BUGS).issubset(ids)


@pytest.mark.parametrize("row", _params("reference"))
def test_reference_classifier(row: Row) -> None:
    """R-4, R-5, R-7: the reference (seed) classifier on one provider error text."""
    assert decide(REFERENCE_CLASSIFIER, row.message()) == row.reference


@pytest.mark.parametrize("row", _params("strict"))
def test_strict_classifier(row: Row) -> None:
    """R-8, R-60: the strict classifier on one provider error text."""
    assert decide(STRICT_CLASSIFIER, row.message()) == row.strict


@pytest.mark.parametrize("row", _params("pi16"))
def test_pi16_classifier(row: Row) -> None:
    """R-58: the pi-1.6 classifier on one provider error text (tests/interop checks the
    column against pi 1.6.0's own function)."""
    assert decide(PI_1_6_CLASSIFIER, row.message()) == row.pi16


def test_reference_pattern_is_spec_r5() -> None:
    """R-5: the shipped retryable pattern is the SPEC's, verbatim and case-insensitive."""
    assert RETRYABLE_PATTERN.pattern == R5
    assert RETRYABLE_PATTERN.flags & re.IGNORECASE


@pytest.mark.parametrize("row", CORPUS, ids=[row.id for row in CORPUS])
def test_reference_retryable_is_spec_r5_on_every_row(row: Row) -> None:
    """R-4, R-5: reference is_retryable == error, text, not overflow, and R-5 matches."""
    message = row.message()
    text = row.text
    expected = bool(
        row.stop_reason == "error"
        and text
        and not REFERENCE_CLASSIFIER.is_context_overflow(message)
        and re.search(R5, text, re.IGNORECASE)
    )
    assert REFERENCE_CLASSIFIER.is_retryable(message) is expected


def test_overflow_is_never_retryable() -> None:
    """R-2: for every classifier, no row is both an overflow and retryable."""
    for _name, classifier, _column in COLUMNS:
        for row in CORPUS:
            message = row.message()
            assert not (
                classifier.is_context_overflow(message) and classifier.is_retryable(message)
            ), (classifier.name, row.id)


def test_difference_table_row_by_row() -> None:
    """R-8, R-60: seed vs pi-1.6 vs strict, row by row, as the columns say."""
    intended = {row.id for row in CORPUS if len({row.reference, row.pi16, row.strict}) > 1}
    live = {row.id for row, _ in differences()}
    # Each suspected strict bug may flip whether its row differs.
    assert live ^ intended <= set(STRICT_SUSPECTED_BUGS)

    table = render_difference_table()
    lines = table.splitlines()
    assert lines[0] == "| id | text excerpt | seed | pi-1.6 | strict |"
    assert lines[1] == "| --- | --- | --- | --- | --- |"
    assert len(lines) == 2 + len(live)
    assert {line.split(" | ")[0].removeprefix("| ") for line in lines[2:]} == live
    assert "| bedrock-429-throttling-too-many-tokens | 429 ThrottlingException" in table
    assert all(line.endswith(" |") and line.count(" | ") == 4 for line in lines[2:])


def test_the_docs_hold_the_difference_table() -> None:
    """R-60: docs/spec.md shows the live table (python -m tests.test_classify_corpus writes it)."""
    assert documented_table() == render_difference_table()


def test_difference_table_escapes_cells() -> None:
    """R-8: excerpts stay on one line and cannot break the table's columns."""
    text = "key sk-abc502 a|b `c`\n" + "x" * 80
    row = Row("pipe-and-newline", text, "retry", "none", "none")
    table = render_difference_table([row])
    assert table.splitlines()[2] == (
        "| pipe-and-newline | key sk-abc502 a\\|b 'c' " + "x" * 37 + "… | retry | none | none |"
    )
    assert render_difference_table([]) == (
        "| id | text excerpt | seed | pi-1.6 | strict |\n| --- | --- | --- | --- | --- |\n"
    )


def _silent(
    input_tokens: int, cache_read: int, stop_reason: StopReason = "stop"
) -> AssistantMessage:
    return AssistantMessage(
        stop_reason=stop_reason, usage=Usage(input=input_tokens, cache_read=cache_read)
    )


@pytest.mark.parametrize(
    "classifier", [REFERENCE_CLASSIFIER, STRICT_CLASSIFIER], ids=["reference", "strict"]
)
def test_silent_overflow_above_window(classifier: PatternClassifier) -> None:
    """R-7(b): a "stop" message whose input + cacheRead exceeds the window is an overflow."""
    message = _silent(150_000, 50_001)
    assert classifier.is_context_overflow(message, 200_000)
    assert not classifier.is_retryable(message, 200_000)
    assert decide(classifier, message, 200_000) == "overflow"


@pytest.mark.parametrize(
    "classifier", [REFERENCE_CLASSIFIER, STRICT_CLASSIFIER], ids=["reference", "strict"]
)
def test_silent_overflow_boundary_and_below(classifier: PatternClassifier) -> None:
    """R-7(b): usage equal to or below the window, or no window known, is not an overflow."""
    assert not classifier.is_context_overflow(_silent(150_000, 50_000), 200_000)
    assert not classifier.is_context_overflow(_silent(100_000, 20_000), 200_000)
    assert not classifier.is_context_overflow(_silent(300_000, 0), None)
    assert not classifier.is_context_overflow(_silent(300_000, 0), 0)


@pytest.mark.parametrize(
    "classifier", [REFERENCE_CLASSIFIER, STRICT_CLASSIFIER], ids=["reference", "strict"]
)
def test_silent_overflow_counts_input_and_cache_read_only(classifier: PatternClassifier) -> None:
    """R-7(b): only input + cacheRead count; output and cacheWrite do not."""
    message = AssistantMessage(
        stop_reason="stop",
        usage=Usage(input=150_000, output=60_000, cache_read=40_000, cache_write=90_000),
    )
    assert not classifier.is_context_overflow(message, 200_000)
    assert classifier.is_context_overflow(
        AssistantMessage(stop_reason="stop", usage=Usage(input=1, cache_read=200_000)), 200_000
    )


if __name__ == "__main__":
    write_documented_table()
