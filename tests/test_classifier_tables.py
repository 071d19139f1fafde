"""The classifier tables as data (R-57), and one sample text per pattern of pi's tables.

``PI16_SAMPLES`` holds, for every pattern of pi 1.6.0's lists (``PI_1_6_PATTERNS``, by list
and name), texts with the decision pi 1.6.0 reaches, plus the traps (digits inside ids and
byte counts, quota wordings) and texts where JavaScript and Python read a regex
differently. ``PI073_SAMPLES`` holds, for every alternative of pi 0.73.1's retryable regex
and every overflow pattern of its ``isContextOverflow``, texts with 0.73.1's decision and,
where the seed decides otherwise on purpose, the seed's and the rule that says so (R-59).

This file checks our classifiers against those columns; ``tests/interop/
test_pi_classifiers.py`` feeds the same texts to pi's own functions under node 22 and
checks pi against the same columns, so the two agree on every text.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from typing import Literal, TypeAlias

import attrs
import pytest

from trio_session import (
    PI_1_6_CLASSIFIER,
    PI_1_6_PATTERNS,
    REFERENCE_CLASSIFIER,
    RETRYABLE_PATTERN,
    SEED_PATTERNS,
    STRICT_CLASSIFIER,
    STRICT_PATTERNS,
    AssistantMessage,
    NamedPattern,
    PatternClassifier,
    PatternTable,
    Usage,
    classifier_for,
)
from trio_session._retry.tables import js_regex

Decision: TypeAlias = Literal["retry", "overflow", "none"]
StopReason: TypeAlias = Literal["stop", "length", "error"]


@attrs.frozen
class Sample:
    """A text (or a usage), and the decision pi reaches; ``seed`` if the seed differs."""

    text: str | None
    pi: Decision
    seed: Decision | None = None
    rule: str | None = None  # the rule that makes the seed differ
    provider: str = ""
    stop_reason: StopReason = "error"
    input: int = 0
    output: int = 0
    cache_read: int = 0
    context_window: int | None = None

    def message(self) -> AssistantMessage:
        """The assistant message the sample stands for."""
        usage = Usage(input=self.input, output=self.output, cache_read=self.cache_read)
        return AssistantMessage(
            stop_reason=self.stop_reason,
            error_message=self.text,
            provider=self.provider,
            usage=usage,
        )

    def case(self) -> dict[str, object]:
        """The sample as ``pi_classify.mjs`` reads it."""
        return {
            "stopReason": self.stop_reason,
            "errorMessage": self.text,
            "provider": self.provider,
            "usage": {"input": self.input, "output": self.output, "cacheRead": self.cache_read},
            "contextWindow": self.context_window or 0,
        }


def _r(*texts: str) -> tuple[Sample, ...]:
    return tuple(Sample(text, "retry") for text in texts)


def _n(*texts: str) -> tuple[Sample, ...]:
    return tuple(Sample(text, "none") for text in texts)


def _o(*texts: str) -> tuple[Sample, ...]:
    return tuple(Sample(text, "overflow") for text in texts)


#: pi 1.6.0: (list, pattern name) → samples. Every pattern of PI_1_6_PATTERNS has one.
PI16_SAMPLES: dict[tuple[str, str], tuple[Sample, ...]] = {
    ("retryable", "overloaded"): _r(
        '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    ),
    ("retryable", "server-busy"): _r('{"error":{"code":"server_busy"}}'),
    ("retryable", "servers-busy"): _r("Servers are currently busy. Please try again later."),
    ("retryable", "high-demand"): _r("We're currently experiencing high demand"),
    ("retryable", "at-capacity"): _r("Selected model is at capacity."),
    ("retryable", "rate-limit"): _r("Rate limit exceeded", "rate_limit_error", "ratelimited"),
    ("retryable", "too-many-requests"): _r("Too Many Requests"),
    ("retryable", "status-code"): _r(
        "429", "HTTP 500", "502 Bad Gateway", "status 503", "(504)", "520", "error code: 524"
    )
    + _n("req_a4293c", "5029441 bytes", "id 1504x", "model-4290", "v2500"),
    ("retryable", "service-unavailable"): _r(
        "Service Unavailable", "The service is temporarily unavailable", "serviceunavailable"
    ),
    ("retryable", "server-error"): _r("server_error", "Internal Server Error"),
    ("retryable", "internal-error"): _r("internal_error"),
    ("retryable", "provider-returned-error"): _r(
        "Provider returned error", "The upstream provider returned an error"
    ),
    ("retryable", "request-buffer"): _r("exceeded request buffer limit while retrying upstream"),
    ("retryable", "unable-to-forward"): _r("Unable to forward upstream stream"),
    ("retryable", "upstream-request-failed"): _r("upstream_request_failed"),
    ("retryable", "upstream-stream-read-error"): _r("upstream_stream_read_error"),
    ("retryable", "stream-interrupted"): _r("The stream was interrupted"),
    ("retryable", "http2-stream-failed"): _r("HTTP/2 stream failed", "http2 stream failed"),
    ("retryable", "network-error"): _r("network_error"),
    ("retryable", "connection-error"): _r("Connection error."),
    ("retryable", "connection-refused"): _r("Connection refused"),
    ("retryable", "connection-lost"): _r("Network connection lost."),
    ("retryable", "connection-closed"): _r(
        '{"type":"error","error":{"type":"api_error","message":"Connection closed."}}'
    ),
    ("retryable", "other-side-closed"): _r("other side closed"),
    ("retryable", "fetch-failed"): _r("TypeError: fetch failed"),
    ("retryable", "request-failed"): _r(
        "request to https://oauth2.googleapis.com/token failed, reason: "
    )
    + _n("request to failed, reason:"),
    ("retryable", "getaddrinfo"): _r("getaddrinfo failed"),
    ("retryable", "socket-error-code"): _r(
        "read ECONNRESET",
        "write EPIPE",
        "connect ETIMEDOUT 104.18.32.47:443",
        "ECONNABORTED",
        "connect ECONNREFUSED 127.0.0.1:8080",
    )
    + _n("XECONNRESET", "EPIPE_2", "ETIMEDOUTS"),
    ("retryable", "connection-reset-by-peer"): _r("[Errno 104] Connection reset by peer"),
    ("retryable", "enotfound"): _r("ENOTFOUND"),
    ("retryable", "eai-again"): _r("EAI_AGAIN"),
    ("retryable", "upstream-connect"): _r("upstream connect error or disconnect"),
    ("retryable", "reset-before-headers"): _r("reset before headers"),
    ("retryable", "socket-hang-up"): _r("socket hang up"),
    ("retryable", "socket-closed"): _r("The socket connection was closed unexpectedly."),
    ("retryable", "timed-out"): _r("Request timed out", "time out"),
    ("retryable", "timeout"): _r("Request timeout"),
    ("retryable", "terminated"): _r("terminated"),
    ("retryable", "websocket-closed"): _r("WebSocket closed"),
    ("retryable", "websocket-error"): _r("websocket_error"),
    ("retryable", "websocket-limit"): _r("websocket_connection_limit_reached"),
    ("retryable", "ended-without"): _r("request ended without sending any chunks"),
    ("retryable", "ended-before-message-stop"): _r("Anthropic stream ended before message_stop"),
    ("retryable", "ended-before-terminal-event"): _r(
        "OpenAI stream ended before a terminal response event"
    ),
    ("retryable", "http2-no-response"): _r("http2 request did not get a response"),
    ("retryable", "stream-disconnected"): _r(
        "stream disconnected before completion: stream closed before response.completed"
    ),
    ("retryable", "cut-short"): _r(
        "Claude Code's stream from Anthropic was cut short after the reply had begun"
    ),
    ("retryable", "pending-stream-canceled"): _r("The pending stream has been canceled"),
    ("retryable", "retry-delay"): _r("Server requested 120s retry delay (max: 60s)."),
    ("retryable", "you-can-retry"): _r("An error occurred. You can retry your request."),
    ("retryable", "try-again"): _r("Please try your request again."),
    ("retryable", "please-retry"): _r("Something went wrong, please retry your request"),
    ("retryable", "resource-exhausted"): _r("grpc: ResourceExhausted"),
    ("retryable", "subscription-usage-unavailable"): _r("subscription_sharing_usage_unavailable"),
    ("retryable", "subscription-user-unavailable"): _r("subscription_sharing_user_unavailable"),
    # The never-retry list beats the retryable one: each text says 429 too.
    ("never_retry", "go-usage-limit"): _n('429 {"type":"GoUsageLimitError"}'),
    ("never_retry", "free-usage-limit"): _n("429 FreeUsageLimitError"),
    ("never_retry", "monthly-usage-limit"): _n("429 Monthly usage limit reached"),
    ("never_retry", "available-balance"): _n("429 Enable available balance usage"),
    ("never_retry", "insufficient-quota"): _n("429 insufficient_quota"),
    ("never_retry", "out-of-budget"): _n("429 team is out of budget"),
    ("never_retry", "quota-exceeded"): _n("429 Quota exceeded for metric"),
    ("never_retry", "billing"): _n("429 Rate limit: check your plan and billing details"),
    ("never_retry", "subscription-usage-limit"): _n(
        "429 subscription_sharing_usage_limit_exceeded"
    ),
    ("never_retry", "workplace-usage-limit"): _n(
        "429 subscription_sharing_workplace_individual_usage_limit_exceeded"
    ),
    ("never_retry", "zai-1308"): _n('429 {"code":1308}', '429 {"code" : "1308"}')
    + _r('429 {"code":"13080"}'),
    ("overflow", "anthropic"): _o("prompt is too long: 213462 tokens > 200000", "prompt too long"),
    ("overflow", "zai-cn"): _o("prompt exceeds max length"),
    ("overflow", "request-too-large"): _o('{"type":"request_too_large"}'),
    ("overflow", "bedrock"): _o("Input is too long for requested model."),
    ("overflow", "openai"): _o("Your input exceeds the context window of this model."),
    ("overflow", "litellm-maximum-context-length"): _o(
        "This request exceeds the model's maximum context length of 128,000 tokens",
        "exceeds maximum context length (8192)",
    ),
    ("overflow", "litellm-context-window-exceeded"): _o(
        "ContextWindowExceededError: context window exceeded"
    ),
    ("overflow", "gemini"): _o("The input token count (1196265) exceeds the maximum number"),
    ("overflow", "xai"): _o("This model's maximum prompt length is 131072"),
    ("overflow", "groq"): _o("Please reduce the length of the messages or completion."),
    ("overflow", "openrouter"): _o("This endpoint's maximum context length is 163840 tokens."),
    ("overflow", "poolside"): _o("Input exceeds maximum allowed input length of 32,000 tokens"),
    ("overflow", "together"): _o(
        "Input (40960 tokens) is longer than the model's context length (32768 tokens)"
    ),
    ("overflow", "copilot"): _o("prompt token count of 130000 exceeds the limit of 128000"),
    ("overflow", "llama-cpp"): _o("the request exceeds the available context size"),
    ("overflow", "lm-studio"): _o("tokens to keep is greater than the context length"),
    ("overflow", "minimax"): _o("invalid params, context window exceeds limit"),
    ("overflow", "kimi"): _o("Your request exceeded model token limit: 262144"),
    ("overflow", "mistral"): _o("too large for model with 32768 maximum context length"),
    ("overflow", "ds4"): _o(
        "prompt has 70,000 tokens, but the configured context size is 65,536 tokens"
    ),
    ("overflow", "zai-finish-reason"): _o("model_context_window_exceeded"),
    ("overflow", "ollama"): _o("prompt too long; exceeded max context length by 12 tokens"),
    ("overflow", "dashscope"): _o("Range of input length should be [1, 129024]"),
    ("overflow", "context-length-exceeded"): _o(
        "context_length_exceeded", "context length exceeded"
    ),
    ("overflow", "too-many-tokens"): _o("Too many tokens"),
    ("overflow", "token-limit-exceeded"): _o("Token limit exceeded"),
    ("overflow", "status-413"): _o(
        "413 Payload Too Large",
        "413: request entity too large",
        "Anthropic API error (413): too big",
        "413",
        "413 status code (no body)",
    )
    + _n("400 Bad Request: a limit of 413 items", "4130 things"),
    # The veto: an overflow wording with a throttling one is not an overflow.
    ("not_overflow", "bedrock-prefix"): _n("Throttling error: Too many tokens, please wait")
    + _r("Service unavailable: too many tokens"),
    ("not_overflow", "rate-limit"): _r("rate limit: too many tokens"),
    ("not_overflow", "too-many-requests"): _r("Too many requests: context_length_exceeded"),
    ("bodyless", "cerebras-no-body"): (
        Sample("400 status code (no body)", "overflow", provider="cerebras"),
        Sample("413 (no body)", "overflow", provider="cerebras"),
        Sample("400 status code (no body)", "none", provider="openai"),
    ),
    ("length", "length-stop"): (
        Sample(None, "overflow", stop_reason="length", input=198_000, context_window=200_000),
        Sample(
            None,
            "overflow",
            stop_reason="length",
            input=98_000,
            cache_read=100_000,
            context_window=200_000,
        ),
        Sample(None, "none", stop_reason="length", input=198_000, output=5, context_window=200_000),
        Sample(None, "none", stop_reason="length", input=197_000, context_window=200_000),
        Sample(
            None,
            "overflow",
            stop_reason="stop",
            input=150_000,
            cache_read=50_001,
            context_window=200_000,
        ),
        Sample(None, "none", stop_reason="stop", input=200_000, context_window=200_000),
    ),
    # Where JavaScript and Python read a regex differently, pi's reading wins.
    ("dialect", "javascript"): (
        *_r("ratexlimit", "OVERLOADED", "ECONNRESET\u0131"),
        *_o("413\xa0Payload", "413\ufeff"),
        *_n("rate\rlimit", "rate\u2028limit", "\u017focket hang up", "networ\u212a error"),
        *_n("413\x1c"),
    ),
}

#: pi 0.73.1: (list, pattern source) → samples; ``seed`` and ``rule`` where the seed differs.
PI073_SAMPLES: dict[tuple[str, str], tuple[Sample, ...]] = {
    ("retryable", "overloaded"): _r("Overloaded"),
    ("retryable", "provider.?returned.?error"): (
        Sample("Provider returned error", "retry", "none", "R-5"),
    ),
    ("retryable", "rate.?limit"): _r("Rate limit exceeded"),
    ("retryable", "too many requests"): _r("Too Many Requests"),
    ("retryable", "429"): _r("status 429"),
    ("retryable", "500"): _r("HTTP 500"),
    ("retryable", "502"): _r("502"),
    ("retryable", "503"): _r("503"),
    ("retryable", "504"): _r("504"),
    ("retryable", "service.?unavailable"): _r("Service Unavailable"),
    ("retryable", "server.?error"): (
        *_r("Internal server error"),
        Sample("server_error", "retry", "none", "R-5"),
    ),
    ("retryable", "internal.?error"): (Sample("internal_error", "retry", "none", "R-5"),),
    ("retryable", "network.?error"): (Sample("Network error", "retry", "none", "R-5"),),
    ("retryable", "connection.?error"): _r("Connection error."),
    ("retryable", "connection.?refused"): (Sample("Connection refused", "retry", "none", "R-5"),),
    ("retryable", "connection.?lost"): (
        Sample("Network connection lost.", "retry", "none", "R-5"),
    ),
    ("retryable", "websocket.?closed"): (Sample("WebSocket closed 1006", "retry", "none", "R-5"),),
    ("retryable", "websocket.?error"): (Sample("websocket_error", "retry", "none", "R-5"),),
    ("retryable", "other side closed"): (Sample("other side closed", "retry", "none", "R-5"),),
    ("retryable", "fetch failed"): _r("fetch failed"),
    ("retryable", "upstream.?connect"): (
        Sample("upstream connect error or disconnect", "retry", "none", "R-5"),
    ),
    ("retryable", "reset before headers"): (
        Sample("reset before headers", "retry", "none", "R-5"),
    ),
    ("retryable", "socket hang up"): (Sample("socket hang up", "retry", "none", "R-5"),),
    ("retryable", "ended without"): (
        Sample("request ended without sending any chunks", "retry", "none", "R-5"),
    ),
    ("retryable", "http2 request did not get a response"): (
        Sample("http2 request did not get a response", "retry", "none", "R-5"),
    ),
    ("retryable", "timed? out"): (Sample("Request timed out", "retry", "none", "R-5"),),
    ("retryable", "timeout"): (Sample("Request timeout", "retry", "none", "R-5"),),
    ("retryable", "terminated"): (Sample("terminated", "retry", "none", "R-5"),),
    ("retryable", "retry delay"): _r("Server requested 120s retry delay (max: 60s)."),
    # R-5's own words that are not 0.73.1's: two it has more widely, one it lacks.
    ("seed", "server error"): _r("Internal server error"),
    ("seed", "internal error"): _r("An internal error has occurred"),
    ("seed", "usage.?limit"): (
        Sample("You have reached your specified API usage limits", "none", "retry", "R-5"),
    ),
    ("overflow", "prompt is too long"): _o("prompt is too long: 213462 tokens > 200000 maximum"),
    ("overflow", "request_too_large"): _o('413 {"type":"request_too_large"}'),
    ("overflow", "input is too long for requested model"): _o(
        "Input is too long for requested model."
    ),
    ("overflow", "exceeds the context window"): _o("Your input exceeds the context window"),
    ("overflow", "input token count.*exceeds the maximum"): _o(
        "The input token count (1196265) exceeds the maximum number of tokens allowed"
    ),
    ("overflow", r"maximum prompt length is \d+"): _o("maximum prompt length is 131072"),
    ("overflow", "reduce the length of the messages"): _o(
        "Please reduce the length of the messages"
    ),
    ("overflow", r"maximum context length is \d+ tokens"): _o(
        "maximum context length is 8192 tokens"
    ),
    ("overflow", r"exceeds the limit of \d+"): _o("prompt token count of 9 exceeds the limit of 8"),
    ("overflow", "exceeds the available context size"): _o("exceeds the available context size"),
    ("overflow", "greater than the context length"): _o("greater than the context length"),
    ("overflow", "context window exceeds limit"): _o("context window exceeds limit"),
    ("overflow", "exceeded model token limit"): _o("Your request exceeded model token limit: 9"),
    ("overflow", r"too large for model with \d+ maximum context length"): _o(
        "too large for model with 32768 maximum context length"
    ),
    ("overflow", "model_context_window_exceeded"): (
        Sample("model_context_window_exceeded", "overflow", "none", "R-7(a)"),
    ),
    ("overflow", "prompt too long; exceeded (?:max )?context length"): (
        Sample(
            "prompt too long; exceeded max context length by 12 tokens",
            "overflow",
            "none",
            "R-7(a)",
        ),
    ),
    ("overflow", "context[_ ]length[_ ]exceeded"): _o("context_length_exceeded"),
    ("overflow", "too many tokens"): _o("Too many tokens"),
    ("overflow", "token limit exceeded"): _o("token limit exceeded"),
    ("overflow", r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)"): _o(
        "400 status code (no body)", "413 (no body)"
    ),
    ("not_overflow", "^(Throttling error|Service unavailable):"): (
        Sample("Throttling error: Too many tokens, please wait", "none", "overflow", "R-7(a)"),
        Sample("Service unavailable: too many tokens", "retry", "overflow", "R-7(a)"),
    ),
    ("not_overflow", "rate limit"): (
        Sample("rate limit: too many tokens", "retry", "overflow", "R-7(a)"),
    ),
    ("not_overflow", "too many requests"): (
        Sample("429 Too many requests: too many tokens", "retry", "overflow", "R-7(a)"),
    ),
    ("length", "length-stop"): (
        Sample(
            None,
            "overflow",
            "none",
            "R-7(b)",
            stop_reason="length",
            input=198_000,
            context_window=200_000,
        ),
        Sample(
            None,
            "overflow",
            stop_reason="stop",
            input=150_000,
            cache_read=50_001,
            context_window=200_000,
        ),
    ),
}


def decide(classifier: PatternClassifier, sample: Sample) -> Decision:
    """What the classifier does with the sample: retry, else overflow, else nothing."""
    message = sample.message()
    if classifier.is_retryable(message, sample.context_window):
        return "retry"
    if classifier.is_context_overflow(message, sample.context_window):
        return "overflow"
    return "none"


def _flat(samples: dict[tuple[str, str], tuple[Sample, ...]]) -> list[pytest.ParameterSet]:
    return [
        pytest.param(sample, id=f"{kind}:{name}:{i}")
        for (kind, name), group in samples.items()
        for i, sample in enumerate(group)
    ]


@pytest.mark.parametrize("sample", _flat(PI16_SAMPLES))
def test_pi16_classifier_on_every_sample(sample: Sample) -> None:
    """R-58: PI_1_6_CLASSIFIER decides each sample as pi 1.6.0 does (the interop test
    checks pi's own decision)."""
    assert decide(PI_1_6_CLASSIFIER, sample) == sample.pi


@pytest.mark.parametrize("sample", _flat(PI073_SAMPLES))
def test_seed_classifier_on_every_pi073_sample(sample: Sample) -> None:
    """R-59: the seed decides each of pi 0.73.1's samples as 0.73.1 does, except where it
    declares otherwise, by rule."""
    assert (sample.seed is None) == (sample.rule is None)
    assert sample.seed != sample.pi
    assert decide(REFERENCE_CLASSIFIER, sample) == (sample.seed or sample.pi)


def test_every_pi16_pattern_has_a_sample() -> None:
    """R-57, R-58: each pattern of each PI_1_6_PATTERNS list is exercised by name."""
    table = PI_1_6_PATTERNS
    names = {("retryable", p.name) for p in table.retryable}
    names |= {("never_retry", p.name) for p in table.never_retry}
    names |= {("overflow", p.name) for p in table.overflow}
    names |= {("not_overflow", p.name) for p in table.not_overflow}
    names |= {("bodyless", table.bodyless_overflow.name)}
    assert names <= set(PI16_SAMPLES)
    assert {kind for kind, _ in set(PI16_SAMPLES) - names} == {"length", "dialect"}


def test_tables_are_named_versioned_and_sourced() -> None:
    """R-57: each table has a version, a provenance naming pi's file and function, and
    uniquely named patterns whose regex is their source compiled."""
    for table in (SEED_PATTERNS, PI_1_6_PATTERNS, STRICT_PATTERNS):
        lists = (table.retryable, table.never_retry, table.overflow, table.not_overflow)
        for patterns in lists:
            assert len({p.name for p in patterns}) == len(patterns)
            for pattern in patterns:
                assert isinstance(pattern, NamedPattern)
                assert pattern.name
                assert pattern.family
                assert pattern.source
        assert table.version
    assert "dist/utils/retry.js" in PI_1_6_PATTERNS.provenance
    assert "isRetryableAssistantError" in PI_1_6_PATTERNS.provenance
    assert "dist/utils/overflow.js" in PI_1_6_PATTERNS.provenance
    assert "isContextOverflow" in PI_1_6_PATTERNS.provenance
    assert "_isRetryableError" in SEED_PATTERNS.provenance
    assert PI_1_6_PATTERNS.version == "@earendil-works/pi-ai 1.6.0"


def test_seed_table_is_r5_word_for_word() -> None:
    """R-5, R-57: the seed table's retryable list, joined, is RETRYABLE_PATTERN."""
    assert SEED_PATTERNS.joined(SEED_PATTERNS.retryable).pattern == RETRYABLE_PATTERN.pattern
    assert SEED_PATTERNS.never_retry == ()
    assert PatternClassifier.from_table(SEED_PATTERNS, name="reference") == REFERENCE_CLASSIFIER


def test_classifier_for_each_profile() -> None:
    """R-57: classifier_for names the seed, pi-1.6 and strict classifiers."""
    assert classifier_for("seed") is REFERENCE_CLASSIFIER
    assert classifier_for("reference") is REFERENCE_CLASSIFIER
    assert classifier_for("pi-1.6") is PI_1_6_CLASSIFIER
    assert classifier_for("strict") is STRICT_CLASSIFIER
    assert PatternClassifier.from_table(PI_1_6_PATTERNS) == PI_1_6_CLASSIFIER
    with pytest.raises(
        ValueError,
        match=(
            r"^no classifier is named 'pi-2' "
            r"\(one of 'reference', 'seed', 'pi-1\.6', 'strict'\)$"
        ),
    ):
        classifier_for("pi-2")


def test_the_shipped_classifiers_read_as_a_whole_mapping_in_a_fresh_interpreter() -> None:
    """The table of shipped classifiers builds each on first use, yet reads as every one
    of them, whatever was built before: its keys, values, items, get and len agree."""
    code = textwrap.dedent(
        """
        from trio_session._retry.classify import CLASSIFIERS
        print(len(CLASSIFIERS.values()), sorted(CLASSIFIERS.keys()))
        print(sorted(k for k, v in CLASSIFIERS.items() if v.name))
        print(CLASSIFIERS.get("strict").name, CLASSIFIERS.get("pi-2"), len(CLASSIFIERS))
        print(CLASSIFIERS["seed"] is CLASSIFIERS["reference"], CLASSIFIERS == dict(CLASSIFIERS))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    names = "['pi-1.6', 'reference', 'seed', 'strict']"
    assert result.stdout.splitlines() == [f"4 {names}", names, "strict None 4", "True True"]


def test_joining_an_empty_list_is_refused() -> None:
    """R-57: an empty alternation would match everything, so it is refused."""
    empty = attrs.evolve(SEED_PATTERNS, name="empty", retryable=())
    with pytest.raises(ValueError, match=r"^the empty table has no patterns to join$"):
        empty.joined(empty.retryable)
    assert isinstance(empty, PatternTable)


@pytest.mark.parametrize(
    ("source", "text", "matches"),
    [
        ("a.b", "a\rb", False),
        ("a.b", "a\u2029b", False),
        ("a.b", "a-b", True),
        (r"a\sb", "a\ufeffb", True),
        (r"a\sb", "a\x1cb", False),
        (r"a\Sb", "a\ufeffb", False),
        (r"a[\s,]b", "a\xa0b", True),
        ("x$", "x\n", False),
        ("x$", "x", True),
        ("sock", "\u017fOCK", False),
        ("k", "\u212a", False),
        (r"\w", "\u00e9", False),
    ],
)
def test_js_regex_reads_as_node_does(source: str, text: str, matches: bool) -> None:
    """R-58: js_regex compiles JavaScript's `.`, `\\s`, `$` and case folding as node reads them."""
    assert (js_regex(source).search(text) is not None) is matches


def test_js_regex_refuses_what_it_does_not_translate() -> None:
    """R-57: a back-reference or a unicode escape in a table is an error, not a guess."""
    with pytest.raises(
        ValueError, match=r"^unsupported JavaScript regex escape '\\\\1' in '\(a\)\\\\1'$"
    ):
        js_regex(r"(a)\1")
    assert re.compile(js_regex("a|b").pattern, re.ASCII | re.IGNORECASE).search("B")
