"""Classification helpers: retry hints (R-18), usage limits (R-17), the basics of R-4/R-5."""

from __future__ import annotations

import email.utils

import pytest

from trio_session import (
    RETRYABLE_PATTERN,
    AssistantMessage,
    is_context_overflow,
    is_retryable_error,
    is_usage_limit_error,
    parse_retry_after_ms,
)

NOW_MS = 1_700_000_000_000.0  # a fixed "now" for dates and epoch values


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("429 Too Many Requests\nretry-after-ms: 1500", 1500),
        ("429 Too Many Requests\nretry-after: 30", 30_000),
        ("429 Too Many Requests\nRetry-After: 2.5", 2500),
        ("503\nretry-after: 30 seconds", 30_000),
        ("x-ratelimit-reset-ms: 800", 800),
        (f"x-ratelimit-reset-ms: {NOW_MS + 4000:.0f}", 4000),  # epoch ms above 1e12
        ("x-ratelimit-reset: 12", 12_000),
        (f"x-ratelimit-reset: {NOW_MS / 1000 + 9:.0f}", 9000),  # epoch seconds above 1e9
        ("retry-after: -5", 0),  # negative clamps to 0
        (f"x-ratelimit-reset: {NOW_MS / 1000 - 60:.0f}", 0),  # already past
        ("503 Service Unavailable", None),
        ("retry-after: soon", None),
    ],
)
def test_r18_retry_hints(text: str, expected: int | None) -> None:
    """R-18: each hint form, in milliseconds; negative results clamp to 0."""
    assert parse_retry_after_ms(text, now_ms=NOW_MS) == expected


def test_r18_http_date() -> None:
    """R-18: retry-after as an HTTP date waits until that date."""
    date = email.utils.formatdate((NOW_MS + 90_000) / 1000, usegmt=True)
    assert parse_retry_after_ms(f"429\nretry-after: {date}", now_ms=NOW_MS) == 90_000


def test_r18_first_match_wins() -> None:
    """R-18: retry-after-ms beats retry-after, which beats the x-ratelimit headers."""
    text = "x-ratelimit-reset: 50\nretry-after: 7\nretry-after-ms: 300"
    assert parse_retry_after_ms(text, now_ms=NOW_MS) == 300
    text = "x-ratelimit-reset-ms: 900\nx-ratelimit-reset: 50\nretry-after: 7"
    assert parse_retry_after_ms(text, now_ms=NOW_MS) == 7000
    text = "x-ratelimit-reset: 50\nx-ratelimit-reset-ms: 900"
    assert parse_retry_after_ms(text, now_ms=NOW_MS) == 900


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("429 usage_limit_reached", True),
        ("You have hit your usage limit for this month", True),
        ("Usage-Limit exceeded", True),
        ("quota limit_reached", True),
        ("429 rate limit exceeded", False),
        ("503 Service Unavailable", False),
    ],
)
def test_r17_usage_limit_pattern(text: str, expected: bool) -> None:
    """R-17: usage.?limit | usage_limit_reached | limit_reached, case-insensitive."""
    assert is_usage_limit_error(text) is expected


@pytest.mark.parametrize(
    "text",
    [
        "OVERLOADED",
        "Rate-Limit",
        "ratelimit",
        "usage limit",
        "Too Many Requests",
        "HTTP 429",
        "status 500",
        "502",
        "503",
        "504",
        "Service_Unavailable",
        "server error",
        "internal error",
        "connection error",
        "Connection-Error",
        "fetch failed",
        "exceeded retry delay",
    ],
)
def test_r5_each_alternative_matches(text: str) -> None:
    """R-5: every alternative of the retryable pattern matches, case-insensitively."""
    assert RETRYABLE_PATTERN.search(text)
    assert is_retryable_error(AssistantMessage(stop_reason="error", error_message=text))


def test_r4_stop_reason_must_be_error() -> None:
    """R-4: the same text on an aborted or successful message is not retryable."""
    for reason in ("stop", "aborted", "length", "toolUse"):
        message = AssistantMessage(stop_reason=reason, error_message="503")
        assert not is_retryable_error(message)


def test_r2_overflow_wins_over_retryable() -> None:
    """R-2: a text that is both an overflow and retryable-looking is an overflow only."""
    message = AssistantMessage(stop_reason="error", error_message="500: prompt is too long")
    assert is_context_overflow(message)
    assert not is_retryable_error(message)


@pytest.mark.parametrize(
    "text",
    ["400 status code (no body)", "413 (no body)", "400 (no body)", "413status code(no body)"],
)
def test_r7_no_body_overflow(text: str) -> None:
    """R-7: a bare 400/413 with no body at the start of the text is an overflow."""
    assert is_context_overflow(AssistantMessage(stop_reason="error", error_message=text))


def test_r7_no_body_must_lead() -> None:
    """R-7: the no-body rule is anchored at the start ("HTTP 400 (no body)" is not it)."""
    message = AssistantMessage(stop_reason="error", error_message="HTTP 400 (no body)")
    assert not is_context_overflow(message)
