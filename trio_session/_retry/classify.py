"""Which errors retry, which overflow, and what the server asked us to wait.

Classification is plain text matching on ``errorMessage`` (R-6, R-52): the
provider adapters put the HTTP status, the server's message and the retry
headers into that text, and these patterns decide. Everything here is pure.

Two classifiers ship:

* ``REFERENCE_CLASSIFIER`` — the reference's rules, exactly (R-4, R-5, R-7).
  It is the default.
* ``STRICT_CLASSIFIER`` — ``retry.classifier: "strict"`` (R-8): status codes
  must stand alone (``0429`` inside a model name is not a 429), billing and quota
  errors are never retried, and a per-minute token rate limit is not mistaken
  for a context overflow.

An application can build its own ``PatternClassifier`` or pass any object
with the two methods of ``Classifier``.
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Protocol

import attrs

from .._errors import (
    AuthenticationError,
    ContextOverflowError,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
)
from .._messages import AssistantMessage

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


class Classifier(Protocol):
    """Decides what happens to an assistant message that ended a run."""

    def is_context_overflow(
        self, message: AssistantMessage, context_window: int | None = None
    ) -> bool:
        """Whether the message means the context no longer fits (goes to compaction).

        Args:
            message: the assistant message that ended the run.
            context_window: the model's window in tokens; with it, a reply whose usage
                is past the window counts as an overflow too.
        """
        ...

    def is_retryable(self, message: AssistantMessage, context_window: int | None = None) -> bool:
        """Whether the message is a transient error the retry policy should handle.

        Args:
            message: the assistant message that ended the run.
            context_window: the model's window in tokens (an overflow is not retried).
        """
        ...


@attrs.frozen
class PatternClassifier:
    """A classifier made of regular expressions (R-4 … R-8).

    Attributes:
        name: shown in docs and errors (``"reference"``, ``"strict"``).
        retryable: searched in ``errorMessage``; a match means transient.
        overflow: any match means context overflow.
        non_retryable: if given, a match vetoes ``retryable``.
        not_overflow: if given, a match vetoes ``overflow`` (the no-body rule still applies).
    """

    name: str
    retryable: re.Pattern[str]
    overflow: tuple[re.Pattern[str], ...]
    non_retryable: re.Pattern[str] | None = None
    not_overflow: re.Pattern[str] | None = None
    _overflow_any: re.Pattern[str] | None = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda self: _any_of(self.overflow), takes_self=True),
    )

    def is_context_overflow(
        self, message: AssistantMessage, context_window: int | None = None
    ) -> bool:
        """R-7: an overflow error by wording, or a silent one by reported usage.

        Args:
            message: the assistant message.
            context_window: the model's context window in tokens; without it, a silent overflow is
                not seen.
        """
        text = message.error_message
        if message.stop_reason == "error" and text:
            if NO_BODY_OVERFLOW_PATTERN.search(text):
                return True
            vetoed = self.not_overflow is not None and self.not_overflow.search(text)
            if not vetoed and self._overflows(text):
                return True
        return bool(
            context_window
            and message.stop_reason == "stop"
            and message.usage.context_tokens > context_window
        )

    def _overflows(self, text: str) -> bool:
        """Whether any of the ``overflow`` patterns matches ``text``."""
        if self._overflow_any is not None:
            return self._overflow_any.search(text) is not None
        return any(p.search(text) for p in self.overflow)

    def is_retryable(self, message: AssistantMessage, context_window: int | None = None) -> bool:
        """R-4: an error, with a message, not an overflow, matching the pattern.

        Args:
            message: the assistant message.
            context_window: the model's context window in tokens, for the overflow check.
        """
        text = message.error_message
        if message.stop_reason != "error" or not text:
            return False
        if self.is_context_overflow(message, context_window):
            return False
        if self.non_retryable is not None and self.non_retryable.search(text):
            return False
        return self.retryable.search(text) is not None


def _any_of(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str] | None:
    """The shipped overflow patterns as one alternation: one search instead of 17.

    Only for ``OVERFLOW_PATTERNS`` themselves, whose semantics under ``|`` are known
    (same flags, no back-references); any other tuple is searched pattern by pattern.
    """
    return _OVERFLOW_ANY if patterns == OVERFLOW_PATTERNS else None


_OVERFLOW_ANY = re.compile("|".join(f"(?:{p.pattern})" for p in OVERFLOW_PATTERNS), re.IGNORECASE)


REFERENCE_CLASSIFIER = PatternClassifier(
    name="reference", retryable=RETRYABLE_PATTERN, overflow=OVERFLOW_PATTERNS
)
"""The reference's classifier (R-5, R-7): its retryable pattern and overflow wordings,
searched anywhere in the error text. The default."""
STRICT_CLASSIFIER = PatternClassifier(
    name="strict",
    retryable=STRICT_RETRYABLE_PATTERN,
    overflow=OVERFLOW_PATTERNS,
    non_retryable=STRICT_NON_RETRYABLE_PATTERN,
    not_overflow=STRICT_NOT_OVERFLOW_PATTERN,
)
"""A stricter classifier (R-8): status codes only as whole numbers, wordings the reference
misses, and texts that look retryable or like an overflow but are not."""
CLASSIFIERS: dict[str, PatternClassifier] = {
    "reference": REFERENCE_CLASSIFIER,
    "strict": STRICT_CLASSIFIER,
}


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """The reference's overflow check (R-7).

    Args:
        message: the assistant message that ended the run.
        context_window: the model's window in tokens; with it, a reply whose usage
            is past the window counts as an overflow too.
    """
    return REFERENCE_CLASSIFIER.is_context_overflow(message, context_window)


def is_retryable_error(message: AssistantMessage, context_window: int | None = None) -> bool:
    """The reference's retryable check (R-4, R-5).

    Args:
        message: the assistant message that ended the run.
        context_window: the model's window in tokens (an overflow is not retried).
    """
    return REFERENCE_CLASSIFIER.is_retryable(message, context_window)


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


def provider_error(message: AssistantMessage, context_window: int | None = None) -> ProviderError:
    """The ``ProviderError`` for a failed reply, its class read from the error text (R-52).

    In order: context overflow (R-7's patterns); authentication (401, 403, "invalid api
    key"); rate limit (429, "rate limit", "usage limit", quota); overloaded (503, 529,
    "overloaded"); other server errors (5xx); connection errors ("Connection error",
    timeouts); anything else is a plain ``ProviderError``.

    Args:
        message: the assistant message that ended in an error.
        context_window: the model's window in tokens, for the overflow check.
    """
    text = message.error_message or "the model request failed"
    status = error_status(text)
    cls: type[ProviderError]
    if is_context_overflow(message, context_window):
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
        retryable=is_retryable_error(message, context_window),
        reply=message,
    )
