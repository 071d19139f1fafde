"""What an error text says: the patterns, the status, the server's wait hint, and the
rules that read a failed reply with them.

The pure core under ``classify``: the public pattern constants live here and are
re-exported there, and the rules take any reply with the fields they read
(``FailedReply``), so that ``AssistantMessage.raise_for_error`` can use them without
``_messages`` and ``classify`` importing each other. ``classify`` keeps the public
functions and classes, typed with ``AssistantMessage``.
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Protocol

from .._errors import (
    AuthenticationError,
    ContextOverflowError,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
)


class _Tokens(Protocol):
    @property
    def context_tokens(self) -> int: ...


class FailedReply(Protocol):
    """The fields of an ``AssistantMessage`` the rules read."""

    @property
    def stop_reason(self) -> str: ...
    @property
    def error_message(self) -> str | None: ...
    @property
    def usage(self) -> _Tokens: ...
    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str: ...


RETRYABLE_PATTERN = re.compile(
    r"overloaded|rate.?limit|usage.?limit|too many requests|429|500|502|503|504"
    r"|service.?unavailable|server error|internal error|connection.?error|fetch failed"
    r"|retry delay",
    re.IGNORECASE,
)
"""R-5: the reference's retryable pattern, searched anywhere, case-insensitive."""

OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long",  # Anthropic
        r"input is too long for requested model",  # Amazon Bedrock
        r"exceeds the context window",  # OpenAI
        r"input token count.*exceeds the maximum",  # Google Gemini
        r"maximum prompt length is \d+",  # xAI
        r"reduce the length of the messages",  # Groq
        r"maximum context length is \d+ tokens",  # OpenRouter, vLLM
        r"exceeds the limit of \d+",  # GitHub Copilot
        r"exceeds the available context size",  # llama.cpp
        r"greater than the context length",  # LM Studio
        r"context window exceeds limit",  # MiniMax
        r"exceeded model token limit",  # Kimi
        r"too large for model with \d+ maximum context length",  # Mistral
        r"context[_ ]length[_ ]exceeded",  # generic
        r"too many tokens",  # generic
        r"token limit exceeded",  # generic
        r"request_too_large",  # Anthropic 413
    )
)
"""R-7(a): context-overflow wordings of the major providers (the reference's list, plus
``request_too_large`` as the contract names it)."""

#: R-7(a): Cerebras-style "400 status code (no body)" / "413 (no body)" at the start.
NO_BODY_OVERFLOW_PATTERN = re.compile(r"^4(00|13)\s*(status code)?\s*\(no body\)", re.IGNORECASE)

USAGE_LIMIT_PATTERN = re.compile(r"usage.?limit|usage_limit_reached|limit_reached", re.IGNORECASE)
"""R-17: an error that means this credential hit its usage limit."""

#: R-8 strict: status codes only as whole numbers, plus wordings the reference misses.
STRICT_RETRYABLE_PATTERN = re.compile(
    r"overloaded|rate.?limit|usage.?limit|too many requests|too many tokens|throttl"
    r"|(?<![\w.,\-])(?:429|500|502|503|504|529)(?![\w\-])"
    r"|service.?unavailable|server.?error|internal.?error|bad gateway|gateway time-?out"
    r"|connection.?(?:error|refused|reset)|fetch failed|retry delay|temporarily unavailable",
    re.IGNORECASE,
)

#: R-8 strict: errors that mention a retryable word but will not heal by waiting.
#: Not "billing" or "exceeded your current quota" alone: per-minute rate limits of
#: OpenAI, Groq and Gemini link to the billing page yet heal by waiting.
STRICT_NON_RETRYABLE_PATTERN = re.compile(
    r"insufficient_quota|insufficient.credits|credit balance|spending limit"
    r"|used all available credits|payment required"
    r"|invalid.?api.?key|authentication|unauthori[sz]ed|permission",
    re.IGNORECASE,
)

#: R-8 strict: wordings of a *rate* limit that some overflow patterns also match
#: (Bedrock's "Too many tokens, please wait", OpenAI's "tokens per min (TPM)").
STRICT_NOT_OVERFLOW_PATTERN = re.compile(
    r"per min|per minute|\bTPM\b|please wait|(?<![\w-])rate[ _]?limit(?!-)|throttl",
    re.IGNORECASE,
)


def overflow_search(
    patterns: tuple[re.Pattern[str], ...],
) -> re.Pattern[str] | tuple[re.Pattern[str], ...]:
    """The shipped overflow patterns as one alternation: one search instead of 17.

    Only for ``OVERFLOW_PATTERNS`` themselves, whose semantics under ``|`` are known
    (same flags, no back-references); any other tuple is returned as it is, to be
    searched pattern by pattern.

    Args:
        patterns: overflow wordings.
    """
    return _OVERFLOW_ANY if patterns == OVERFLOW_PATTERNS else patterns


_OVERFLOW_ANY = re.compile("|".join(f"(?:{p.pattern})" for p in OVERFLOW_PATTERNS), re.IGNORECASE)


def is_usage_limit_error(text: str) -> bool:
    """R-17: whether an error text says the credential hit its usage limit.

    Args:
        text: an error message.
    """
    return USAGE_LIMIT_PATTERN.search(text) is not None


#: The longest wait a hint is read as, in milliseconds (2**53 - 1).
MAX_HINT_MS = 2**53 - 1
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_RETRY_AFTER_MS = re.compile(r"retry-after-ms:\s*" + _NUMBER, re.IGNORECASE)
_RETRY_AFTER = re.compile(r"retry-after:\s*([^\n;]+?)\s*(?:$|[\n;])", re.IGNORECASE | re.MULTILINE)
_RESET_MS = re.compile(r"x-ratelimit-reset-ms:\s*" + _NUMBER, re.IGNORECASE)
_RESET = re.compile(r"x-ratelimit-reset:\s*" + _NUMBER, re.IGNORECASE)


def parse_retry_after_ms(text: str, *, now_ms: float | None = None) -> int | None:
    """Read the wait a server asked for from an error text (R-18), in milliseconds.

    The first of these that appears wins:

    1. ``retry-after-ms: N`` — N milliseconds.
    2. ``retry-after: N`` — N seconds; or ``retry-after: <HTTP date>`` — until then.
    3. ``x-ratelimit-reset-ms: N`` — epoch milliseconds if N > 1e12, else a duration.
    4. ``x-ratelimit-reset: N`` — epoch seconds if N > 1e9, else seconds.

    Negative results clamp to 0, and waits longer than ``MAX_HINT_MS``
    (``2**53 - 1``, about 285 000 years; ``retry-after: 1e999`` too) to that.
    ``now_ms`` (wall-clock epoch milliseconds) defaults to the current time; it only
    matters for dates and epoch values.

    Args:
        text: an error message, with the response headers the adapters append.
        now_ms: the current wall-clock time in epoch milliseconds.

    Returns:
        The wait in whole milliseconds, or ``None`` when the text carries no hint.
    """
    now = time.time() * 1000 if now_ms is None else now_ms
    ms: float | None = None
    if m := _RETRY_AFTER_MS.search(text):
        ms = float(m.group(1))
    elif m := _RETRY_AFTER.search(text):
        value = m.group(1)
        if number := re.match(_NUMBER + r"(?![\w:])", value):
            ms = float(number.group(1)) * 1000
        else:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                ms = None
            else:
                ms = when.timestamp() * 1000 - now
    if ms is None and (m := _RESET_MS.search(text)):
        value_ms = float(m.group(1))
        ms = value_ms - now if value_ms > 1e12 else value_ms
    if ms is None and (m := _RESET.search(text)):
        value_s = float(m.group(1))
        ms = value_s * 1000 - now if value_s > 1e9 else value_s * 1000
    if ms is None:
        return None
    return max(0, round(min(ms, MAX_HINT_MS)))


_STATUS = re.compile(
    r"^\s*(?:HTTP\s+)?([1-5]\d\d)(?!\d)|status(?: code)?:?\s*([1-5]\d\d)(?!\d)", re.I
)
_AUTH = re.compile(
    r"invalid.?api.?key|incorrect api key|authentication|unauthori[sz]ed|permission|forbidden"
    r"|api key not valid|no api key",
    re.IGNORECASE,
)
_RATE = re.compile(r"rate.?limit|too many requests|usage.?limit|quota|resource.?exhausted", re.I)
_OVERLOADED = re.compile(r"overloaded|service.?unavailable", re.IGNORECASE)
_SERVER = re.compile(r"server.?error|internal.?error|bad gateway|gateway time-?out", re.I)
_CONNECTION = re.compile(
    r"connection.?error|fetch failed|timed out|connection (?:refused|reset)", re.I
)


def error_status(text: str) -> int | None:
    """The HTTP status an error text gives (``"503 Service Unavailable: …"`` → 503).

    Args:
        text: an error message, as ``AssistantMessage.error_message`` holds it.

    Returns:
        The status, or ``None`` when the text does not start with one.
    """
    match = _STATUS.search(text)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def overflow_matches(text: str, overflow: re.Pattern[str] | tuple[re.Pattern[str], ...]) -> bool:
    """Whether any of the overflow wordings matches ``text``.

    Args:
        text: an error text.
        overflow: the wordings, as one pattern (``overflow_search``'s) or a tuple.
    """
    if isinstance(overflow, re.Pattern):
        return overflow.search(text) is not None
    return any(p.search(text) for p in overflow)


def overflows(
    message: FailedReply,
    context_window: int | None,
    overflow: re.Pattern[str] | tuple[re.Pattern[str], ...],
    not_overflow: re.Pattern[str] | None = None,
) -> bool:
    """R-7: an overflow error by wording, or a silent one by reported usage.

    Args:
        message: the reply that ended a run.
        context_window: the model's window in tokens; without it, a silent overflow is
            not seen.
        overflow: the overflow wordings, as one pattern or a tuple of them.
        not_overflow: if given, a match vetoes ``overflow`` (the no-body rule still applies).
    """
    text = message.error_message
    if message.stop_reason == "error" and text:
        if NO_BODY_OVERFLOW_PATTERN.search(text):
            return True
        vetoed = not_overflow is not None and not_overflow.search(text)
        if not vetoed and overflow_matches(text, overflow):
            return True
    return bool(
        context_window
        and message.stop_reason == "stop"
        and message.usage.context_tokens > context_window
    )


def is_retryable(
    message: FailedReply,
    context_window: int | None,
    retryable: re.Pattern[str],
    overflow: re.Pattern[str] | tuple[re.Pattern[str], ...] = _OVERFLOW_ANY,
    non_retryable: re.Pattern[str] | None = None,
    not_overflow: re.Pattern[str] | None = None,
) -> bool:
    """R-4: an error, with a message, not an overflow, matching ``retryable``.

    Args:
        message: the reply that ended a run.
        context_window: the model's window in tokens, for the overflow check.
        retryable: searched in the error text; a match means transient.
        overflow: the overflow wordings (an overflow is not retried).
        non_retryable: if given, a match vetoes ``retryable``.
        not_overflow: if given, a match vetoes ``overflow``.
    """
    text = message.error_message
    if message.stop_reason != "error" or not text:
        return False
    if overflows(message, context_window, overflow, not_overflow):
        return False
    if non_retryable is not None and non_retryable.search(text):
        return False
    return retryable.search(text) is not None


def reply_error(message: FailedReply, context_window: int | None = None) -> ProviderError:
    """The ``ProviderError`` for a failed reply, by the reference's rules (see
    ``classify.provider_error``, which is this function for an ``AssistantMessage``).

    Args:
        message: the reply that ended in an error.
        context_window: the model's window in tokens, for the overflow check.
    """
    text = message.error_message or "the model request failed"
    status = error_status(text)
    cls: type[ProviderError]
    if overflows(message, context_window, _OVERFLOW_ANY):
        cls = ContextOverflowError
    elif status in (401, 403) or (status is None and _AUTH.search(text)):
        cls = AuthenticationError
    elif status == 429 or _RATE.search(text):
        cls = RateLimitError
    elif status in (503, 529) or _OVERLOADED.search(text):
        cls = OverloadedError
    elif (status is not None and status >= 500) or _SERVER.search(text):
        cls = ServerError
    elif _CONNECTION.search(text):
        cls = ProviderConnectionError
    else:
        cls = ProviderError
    return cls(
        text,
        status=status,
        provider=message.provider,
        model=message.model,
        retry_after_ms=parse_retry_after_ms(text),
        retryable=is_retryable(message, context_window, RETRYABLE_PATTERN),
        reply=message,
    )
