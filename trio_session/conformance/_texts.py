"""The classifier's texts (issue 29): one error text per pattern of each profile's tables.

For each pattern of ``SEED_PATTERNS`` (R-5, R-7(a)) and ``PI_1_6_PATTERNS`` (R-58) — its
retryable, never-retry and overflow lists — a text that pattern matches, with whether the
profile retries it; then traps: digits inside request ids, model names, sizes and keys,
and words that pi 1.6.0 reads as transport failures. The kit serves each as an HTTP error
(``status``, ``{"error": {"message": text}}``), so the agent's message reads
``"<status> <text>"``; 400 matches no pattern of either table, 413 is the one status an
overflow wording starts with. Pure data: tests/test_conformance_rows.py checks each text
against its pattern and its profile's classifier.
"""

from __future__ import annotations

import json

from .._core.classes import frozen


@frozen
class Text:
    """An error text the kit serves, and what the profile does with it."""

    #: The row it belongs to: the pattern's family, ``never-retry``, ``overflow`` or ``trap``.
    family: str
    #: The name of the pattern it stands for (``trap`` for a trap).
    pattern: str
    status: int
    text: str
    #: Whether the profile retries it.
    retried: bool
    #: The response body, where the provider sends the text in a shape of its own (Z.ai's
    #: ``{"error": {"code": "1308", …}}``); ``None``: ``{"error": {"message": text}}``.
    body: str | None = None


SEED_TEXTS: tuple[Text, ...] = (
    Text(
        "load",
        "overloaded",
        400,
        '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        True,
    ),
    Text("rate", "rate-limit", 400, "Rate limit exceeded", True),
    Text("rate", "usage-limit", 400, "Usage limit reached for this plan.", True),
    Text("rate", "too-many-requests", 400, "Too Many Requests", True),
    Text("status", "status-429", 400, "429", True),
    Text("status", "status-500", 400, "HTTP 500", True),
    Text("status", "status-502", 400, "502 Bad Gateway", True),
    Text("status", "status-503", 400, "status 503", True),
    Text("status", "status-504", 400, "(504)", True),
    Text("server", "service-unavailable", 400, "Service Unavailable", True),
    Text("server", "server-error", 400, "Internal Server Error", True),
    Text("server", "internal-error", 400, "An internal error has occurred", True),
    Text("transport", "connection-error", 400, "Connection error.", True),
    Text("transport", "fetch-failed", 400, "TypeError: fetch failed", True),
    Text("retry-hint", "retry-delay", 400, "Server requested 120s retry delay (max: 60s).", True),
    Text("overflow", "anthropic", 400, "prompt is too long: 213462 tokens > 200000", False),
    Text("overflow", "bedrock", 400, "Input is too long for requested model.", False),
    Text("overflow", "openai", 400, "Your input exceeds the context window of this model.", False),
    Text(
        "overflow",
        "gemini",
        400,
        "The input token count (1196265) exceeds the maximum number",
        False,
    ),
    Text("overflow", "xai", 400, "This model's maximum prompt length is 131072", False),
    Text("overflow", "groq", 400, "Please reduce the length of the messages or completion.", False),
    Text(
        "overflow",
        "openrouter",
        400,
        "This endpoint's maximum context length is 163840 tokens.",
        False,
    ),
    Text(
        "overflow",
        "copilot",
        400,
        "prompt token count of 130000 exceeds the limit of 128000",
        False,
    ),
    Text("overflow", "llama-cpp", 400, "the request exceeds the available context size", False),
    Text("overflow", "lm-studio", 400, "tokens to keep is greater than the context length", False),
    Text("overflow", "minimax", 400, "invalid params, context window exceeds limit", False),
    Text("overflow", "kimi", 400, "Your request exceeded model token limit: 262144", False),
    Text(
        "overflow", "mistral", 400, "too large for model with 32768 maximum context length", False
    ),
    Text("overflow", "context-length-exceeded", 400, "context_length_exceeded", False),
    Text("overflow", "too-many-tokens", 400, "Too many tokens", False),
    Text("overflow", "token-limit-exceeded", 400, "Token limit exceeded", False),
    Text("overflow", "request-too-large", 400, '{"type":"request_too_large"}', False),
    Text(
        "trap",
        "trap",
        400,
        "Invalid 'messages[3].content': string too long (request req_5035004a)",
        True,
    ),
    Text("trap", "trap", 400, "The model 'gpt-5.5-preview-0429' does not exist", True),
    Text("trap", "trap", 400, "Invalid image: 1504x1504 exceeds the maximum", True),
    Text("trap", "trap", 400, "image exceeds 5 MB maximum: 5503504 bytes", True),
    Text("trap", "trap", 400, "Incorrect API key provided: sk-proj-abc502xyz", True),
    Text(
        "trap",
        "trap",
        400,
        "Unsupported parameter: 'timeout' is not supported with this model.",
        False,
    ),
    Text("trap", "trap", 400, "This account has been terminated for violating our terms", False),
)
PI_1_6_TEXTS: tuple[Text, ...] = (
    Text(
        "load",
        "overloaded",
        400,
        '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
        True,
    ),
    Text("load", "server-busy", 400, '{"error":{"code":"server_busy"}}', True),
    Text("load", "servers-busy", 400, "Servers are currently busy. Please try again later.", True),
    Text("load", "high-demand", 400, "We're currently experiencing high demand", True),
    Text("load", "at-capacity", 400, "Selected model is at capacity.", True),
    Text("rate", "rate-limit", 400, "Rate limit exceeded", True),
    Text("rate", "too-many-requests", 400, "Too Many Requests", True),
    Text("status", "status-code", 400, "429", True),
    Text("server", "service-unavailable", 400, "Service Unavailable", True),
    Text("server", "server-error", 400, "server_error", True),
    Text("server", "internal-error", 400, "internal_error", True),
    Text("gateway", "provider-returned-error", 400, "Provider returned error", True),
    Text(
        "gateway",
        "request-buffer",
        400,
        "exceeded request buffer limit while retrying upstream",
        True,
    ),
    Text("gateway", "unable-to-forward", 400, "Unable to forward upstream stream", True),
    Text("gateway", "upstream-request-failed", 400, "upstream_request_failed", True),
    Text("gateway", "upstream-stream-read-error", 400, "upstream_stream_read_error", True),
    Text("gateway", "stream-interrupted", 400, "The stream was interrupted", True),
    Text("gateway", "http2-stream-failed", 400, "HTTP/2 stream failed", True),
    Text("transport", "network-error", 400, "network_error", True),
    Text("transport", "connection-error", 400, "Connection error.", True),
    Text("transport", "connection-refused", 400, "Connection refused", True),
    Text("transport", "connection-lost", 400, "Network connection lost.", True),
    Text(
        "transport",
        "connection-closed",
        400,
        '{"type":"error","error":{"type":"api_error","message":"Connection closed."}}',
        True,
    ),
    Text("transport", "other-side-closed", 400, "other side closed", True),
    Text("transport", "fetch-failed", 400, "TypeError: fetch failed", True),
    Text(
        "transport",
        "request-failed",
        400,
        "request to https://oauth2.googleapis.com/token failed, reason: ",
        True,
    ),
    Text("dns", "getaddrinfo", 400, "getaddrinfo failed", True),
    Text("transport", "socket-error-code", 400, "read ECONNRESET", True),
    Text(
        "transport", "connection-reset-by-peer", 400, "[Errno 104] Connection reset by peer", True
    ),
    Text("dns", "enotfound", 400, "ENOTFOUND", True),
    Text("dns", "eai-again", 400, "EAI_AGAIN", True),
    Text("transport", "upstream-connect", 400, "upstream connect error or disconnect", True),
    Text("transport", "reset-before-headers", 400, "reset before headers", True),
    Text("transport", "socket-hang-up", 400, "socket hang up", True),
    Text("transport", "socket-closed", 400, "The socket connection was closed unexpectedly.", True),
    Text("timeout", "timed-out", 400, "Request timed out", True),
    Text("timeout", "timeout", 400, "Request timeout", True),
    Text("transport", "terminated", 400, "terminated", True),
    Text("transport", "websocket-closed", 400, "WebSocket closed", True),
    Text("transport", "websocket-error", 400, "websocket_error", True),
    Text("transport", "websocket-limit", 400, "Responses websocket connection limit reached", True),
    Text("stream", "ended-without", 400, "request ended without sending any chunks", True),
    Text(
        "stream",
        "ended-before-message-stop",
        400,
        "Anthropic stream ended before message_stop",
        True,
    ),
    Text(
        "stream",
        "ended-before-terminal-event",
        400,
        "OpenAI stream ended before a terminal response event",
        True,
    ),
    Text("stream", "http2-no-response", 400, "http2 request did not get a response", True),
    Text(
        "stream",
        "stream-disconnected",
        400,
        "stream disconnected before completion: stream closed before response.completed",
        True,
    ),
    Text(
        "stream",
        "cut-short",
        400,
        "Claude Code's stream from Anthropic was cut short after the reply had begun",
        True,
    ),
    Text("stream", "pending-stream-canceled", 400, "The pending stream has been canceled", True),
    Text("retry-hint", "retry-delay", 400, "Server requested 120s retry delay (max: 60s).", True),
    Text(
        "retry-hint", "you-can-retry", 400, "An error occurred. You can retry your request.", True
    ),
    Text("retry-hint", "try-again", 400, "Please try your request again.", True),
    Text(
        "retry-hint", "please-retry", 400, "Something went wrong, please retry your request", True
    ),
    Text("grpc", "resource-exhausted", 400, "grpc: ResourceExhausted", True),
    Text(
        "subscription",
        "subscription-usage-unavailable",
        400,
        "subscription_sharing_usage_unavailable",
        True,
    ),
    Text(
        "subscription",
        "subscription-user-unavailable",
        400,
        "subscription_sharing_user_unavailable",
        True,
    ),
    Text("never-retry", "go-usage-limit", 400, '429 {"type":"GoUsageLimitError"}', False),
    Text("never-retry", "free-usage-limit", 400, "429 FreeUsageLimitError", False),
    Text("never-retry", "monthly-usage-limit", 400, "429 Monthly usage limit reached", False),
    Text("never-retry", "available-balance", 400, "429 Enable available balance usage", False),
    Text("never-retry", "insufficient-quota", 400, "429 insufficient_quota", False),
    Text("never-retry", "out-of-budget", 400, "429 team is out of budget", False),
    Text("never-retry", "quota-exceeded", 400, "429 Quota exceeded for metric", False),
    Text(
        "never-retry", "billing", 400, "429 Rate limit: check your plan and billing details", False
    ),
    Text(
        "never-retry",
        "subscription-usage-limit",
        400,
        "429 subscription_sharing_usage_limit_exceeded",
        False,
    ),
    Text(
        "never-retry",
        "workplace-usage-limit",
        400,
        "429 subscription_sharing_workplace_individual_usage_limit_exceeded",
        False,
    ),
    Text(
        "never-retry",
        "zai-1308",
        429,
        '429 {"code":"1308"}',
        False,
        body=json.dumps(
            {"error": {"code": "1308", "message": "Usage limit reached for 5 hour."}},
            separators=(",", ":"),
        ),
    ),
    Text("overflow", "anthropic", 400, "prompt is too long: 213462 tokens > 200000", False),
    Text("overflow", "zai-cn", 400, "prompt exceeds max length", False),
    Text("overflow", "request-too-large", 400, '{"type":"request_too_large"}', False),
    Text("overflow", "bedrock", 400, "Input is too long for requested model.", False),
    Text("overflow", "openai", 400, "Your input exceeds the context window of this model.", False),
    Text(
        "overflow",
        "litellm-maximum-context-length",
        400,
        "This request exceeds the model's maximum context length of 128,000 tokens",
        False,
    ),
    Text(
        "overflow",
        "litellm-context-window-exceeded",
        400,
        "ContextWindowExceededError: context window exceeded",
        False,
    ),
    Text(
        "overflow",
        "gemini",
        400,
        "The input token count (1196265) exceeds the maximum number",
        False,
    ),
    Text("overflow", "xai", 400, "This model's maximum prompt length is 131072", False),
    Text("overflow", "groq", 400, "Please reduce the length of the messages or completion.", False),
    Text(
        "overflow",
        "openrouter",
        400,
        "This endpoint's maximum context length is 163840 tokens.",
        False,
    ),
    Text(
        "overflow",
        "poolside",
        400,
        "Input exceeds maximum allowed input length of 32,000 tokens",
        False,
    ),
    Text(
        "overflow",
        "together",
        400,
        "Input (40960 tokens) is longer than the model's context length (32768 tokens)",
        False,
    ),
    Text(
        "overflow",
        "copilot",
        400,
        "prompt token count of 130000 exceeds the limit of 128000",
        False,
    ),
    Text("overflow", "llama-cpp", 400, "the request exceeds the available context size", False),
    Text("overflow", "lm-studio", 400, "tokens to keep is greater than the context length", False),
    Text("overflow", "minimax", 400, "invalid params, context window exceeds limit", False),
    Text("overflow", "kimi", 400, "Your request exceeded model token limit: 262144", False),
    Text(
        "overflow", "mistral", 400, "too large for model with 32768 maximum context length", False
    ),
    Text(
        "overflow",
        "ds4",
        400,
        "prompt has 70,000 tokens, but the configured context size is 65,536 tokens",
        False,
    ),
    Text("overflow", "zai-finish-reason", 400, "model_context_window_exceeded", False),
    Text(
        "overflow",
        "ollama",
        400,
        "prompt too long; exceeded max context length by 12 tokens",
        False,
    ),
    Text("overflow", "dashscope", 400, "Range of input length should be [1, 129024]", False),
    Text("overflow", "context-length-exceeded", 400, "context_length_exceeded", False),
    Text("overflow", "too-many-tokens", 400, "Too many tokens", False),
    Text("overflow", "token-limit-exceeded", 400, "Token limit exceeded", False),
    Text("overflow", "status-413", 413, "Payload Too Large", False),
    Text(
        "trap",
        "trap",
        400,
        "Invalid 'messages[3].content': string too long (request req_5035004a)",
        False,
    ),
    Text("trap", "trap", 400, "The model 'gpt-5.5-preview-0429' does not exist", False),
    Text("trap", "trap", 400, "Invalid image: 1504x1504 exceeds the maximum", False),
    Text("trap", "trap", 400, "image exceeds 5 MB maximum: 5503504 bytes", False),
    Text("trap", "trap", 400, "Incorrect API key provided: sk-proj-abc502xyz", False),
    Text(
        "trap",
        "trap",
        400,
        "Unsupported parameter: 'timeout' is not supported with this model.",
        True,
    ),
    Text("trap", "trap", 400, "This account has been terminated for violating our terms", True),
)
