"""The rules that read a failed reply, below ``_messages``: typed by ``FailedReply``.

``AssistantMessage.raise_for_error`` (in ``_messages``) turns a failed reply into its
``ProviderError`` with ``reply_error``, and ``.classify``'s ``PatternClassifier``, whose
public methods take an ``AssistantMessage``, decides with ``PatternRules``. Both read
the reply through the ``FailedReply`` Protocol, which ``AssistantMessage`` satisfies, so
this module needs nothing from ``_messages`` and the two do not import each other.
Everything here is pure: the patterns' rules (R-4, R-7), the error's class (R-52) and
the server's wait hint (R-18).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from typing import Protocol, Self

import attrs

from .._core.classes import frozen
from .._core.errors import (
    AuthenticationError,
    ContextOverflowError,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
)
from .tables import SEED_PATTERNS, PatternTable


class ReplyUsage(Protocol):
    """The token counts of a reply the rules read (``Usage`` has them)."""

    @property
    def output(self) -> int:
        """Output tokens."""
        ...

    @property
    def context_tokens(self) -> int:
        """The tokens the reply's context held."""
        ...


class FailedReply(Protocol):
    """What the rules read of a reply (``AssistantMessage`` has it)."""

    @property
    def stop_reason(self) -> str:
        """Why the answer ended (``"error"`` for a failure)."""
        ...

    @property
    def error_message(self) -> str | None:
        """What went wrong."""
        ...

    @property
    def provider(self) -> str:
        """The provider's name."""
        ...

    @property
    def model(self) -> str:
        """The model id."""
        ...

    @property
    def usage(self) -> ReplyUsage:
        """The tokens the request used."""
        ...


@frozen
class PatternRules:
    """The patterns of a ``PatternClassifier`` (``.classify``, which describes each field)
    and their rules, on any ``FailedReply``."""

    name: str
    retryable: re.Pattern[str]
    overflow: tuple[re.Pattern[str], ...]
    non_retryable: re.Pattern[str] | None = None
    not_overflow: re.Pattern[str] | None = None
    bodyless_overflow: re.Pattern[str] | None = attrs.field(
        default=attrs.Factory(lambda: SEED_PATTERNS.bodyless_overflow.regex)
    )
    bodyless_providers: frozenset[str] | None = None
    length_overflow: bool = False
    _overflow_any: re.Pattern[str] | None = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda self: _any_of(self.overflow), takes_self=True),
    )

    @classmethod
    def _from_table(cls, table: PatternTable, name: str | None = None) -> Self:
        """The rules a table describes: its lists joined as pi joins them."""
        return cls(
            name=table.name if name is None else name,
            retryable=table.joined(table.retryable),
            overflow=tuple(p.regex for p in table.overflow),
            non_retryable=table.joined(table.never_retry) if table.never_retry else None,
            not_overflow=table.joined(table.not_overflow) if table.not_overflow else None,
            bodyless_overflow=table.bodyless_overflow.regex,
            bodyless_providers=table.bodyless_overflow.providers,
            length_overflow=table.length_overflow,
        )

    def _overflow_of(self, message: FailedReply, context_window: int | None) -> bool:
        """R-7: an overflow error by wording, or a silent one by reported usage."""
        text = message.error_message
        if message.stop_reason == "error" and text:
            vetoed = self.not_overflow is not None and self.not_overflow.search(text)
            if not vetoed and (self._overflows(text) or self._bodyless(message, text)):
                return True
        if not context_window:
            return False
        if message.stop_reason == "stop":
            return message.usage.context_tokens > context_window
        return bool(
            self.length_overflow
            and message.stop_reason == "length"
            and message.usage.output == 0
            and message.usage.context_tokens >= context_window * 0.99
        )

    def _overflows(self, text: str) -> bool:
        """Whether any of the ``overflow`` patterns matches ``text``."""
        if self._overflow_any is not None:
            return self._overflow_any.search(text) is not None
        return any(p.search(text) for p in self.overflow)

    def _bodyless(self, message: FailedReply, text: str) -> bool:
        """Whether the no-body rule applies to this message and matches ``text``."""
        if self.bodyless_overflow is None:
            return False
        if self.bodyless_providers is not None and message.provider not in self.bodyless_providers:
            return False
        return self.bodyless_overflow.search(text) is not None

    def _retryable(self, message: FailedReply, overflows: Callable[[], bool]) -> bool:
        """R-4: an error, with a message, not an overflow (``overflows()``, asked only for
        an error with a message), not vetoed, matching the pattern."""
        text = message.error_message
        if message.stop_reason != "error" or not text:
            return False
        if overflows():
            return False
        if self.non_retryable is not None and self.non_retryable.search(text):
            return False
        return self.retryable.search(text) is not None


#: What makes a list of patterns unsafe to join: a back-reference or a named group.
_NOT_JOINABLE = r"\\[1-9]|\(\?P[<=]|\(\?<[A-Za-z]"


def _any_of(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str] | None:
    """The overflow patterns as one alternation: one search instead of one per pattern.

    Only when that means the same (same flags, no back-references or named groups, and
    it compiles); otherwise ``None``, and the tuple is searched pattern by pattern.
    """
    flags = {p.flags for p in patterns}
    if len(flags) != 1 or any(re.search(_NOT_JOINABLE, p.pattern) for p in patterns):
        return None
    try:
        return re.compile("|".join(f"(?:{p.pattern})" for p in patterns), flags.pop())
    except re.error:
        return None


@functools.cache
def _seed_rules() -> PatternRules:
    """The reference's rules (R-5, R-7), as ``REFERENCE_CLASSIFIER`` has them:
    ``reply_error``'s; compiled when first asked for, not on import."""
    return PatternRules._from_table(SEED_PATTERNS, name="reference")


#: The longest wait a hint is read as, in milliseconds (2**53 - 1).
MAX_HINT_MS = 2**53 - 1
_NUMBER = r"(-?\d+(?:\.\d+)?)"
# The patterns of this module are text with inline flags, searched with ``re.search``: ``re``
# compiles each the first time and keeps it in its cache, so importing compiles nothing.
_RETRY_AFTER_MS = r"(?i)retry-after-ms:\s*" + _NUMBER
_RETRY_AFTER = r"(?im)retry-after:\s*([^\n;]+?)\s*(?:$|[\n;])"
_RESET_MS = r"(?i)x-ratelimit-reset-ms:\s*" + _NUMBER
_RESET = r"(?i)x-ratelimit-reset:\s*" + _NUMBER


def parse_retry_after_ms(text: str, *, now_ms: float | None = None) -> int | None:
    """Read the wait a server asked for from an error text (R-18), in milliseconds.

    The first of these that appears wins:

    1. ``retry-after-ms: N`` — N milliseconds.
    2. ``retry-after: N`` — N seconds; or ``retry-after: <HTTP date>`` — until then.
    3. ``x-ratelimit-reset-ms: N`` — epoch milliseconds if N > 1e12, else a duration.
    4. ``x-ratelimit-reset: N`` — epoch seconds if N > 1e9, else seconds.

    Negative results clamp to 0, and waits longer than ``MAX_HINT_MS``
    (``2**53 - 1``, about 285 000 years; ``retry-after: 1e999`` too) to that, however
    many digits the number has (``retry-after: -99…9`` of 400 digits is 0). It never
    raises: a text is the server's, and anything it says is a hint or none.
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
    if m := re.search(_RETRY_AFTER_MS, text):
        ms = float(m.group(1))
    elif m := re.search(_RETRY_AFTER, text):
        value = m.group(1)
        if number := re.match(_NUMBER + r"(?![\w:])", value):
            ms = float(number.group(1)) * 1000
        else:
            import email.utils  # only for an HTTP date: the package costs a session's import

            try:
                ms = email.utils.parsedate_to_datetime(value).timestamp() * 1000 - now
            except (TypeError, ValueError, OverflowError):
                ms = None
    if ms is None and (m := re.search(_RESET_MS, text)):
        value_ms = float(m.group(1))
        ms = value_ms - now if value_ms > 1e12 else value_ms
    if ms is None and (m := re.search(_RESET, text)):
        value_s = float(m.group(1))
        ms = value_s * 1000 - now if value_s > 1e9 else value_s * 1000
    if ms is None or ms != ms:  # no hint; NaN (inf - inf) is none either
        return None
    # Clamped as a float first: ``round`` of an infinity (a 400-digit number) raises.
    return round(min(max(ms, 0.0), MAX_HINT_MS))


_STATUS = r"(?i)^\s*(?:HTTP\s+)?([1-5]\d\d)(?!\d)|status(?: code)?:?\s*([1-5]\d\d)(?!\d)"
_AUTH = (
    r"(?i)invalid.?api.?key|incorrect api key|authentication|unauthori[sz]ed|permission"
    r"|forbidden|api key not valid|no api key"
)
_RATE = r"(?i)rate.?limit|too many requests|usage.?limit|quota|resource.?exhausted"
_OVERLOADED = r"(?i)overloaded|service.?unavailable"
_SERVER = r"(?i)server.?error|internal.?error|bad gateway|gateway time-?out"
_CONNECTION = r"(?i)connection.?error|fetch failed|timed out|connection (?:refused|reset)"


def error_status(text: str) -> int | None:
    """The HTTP status an error text gives (``"503 Service Unavailable: …"`` → 503).

    Args:
        text: an error message, as ``AssistantMessage.error_message`` holds it.

    Returns:
        The status, or ``None`` when the text does not start with one.
    """
    match = re.search(_STATUS, text)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def reply_error(message: FailedReply, context_window: int | None = None) -> ProviderError:
    """The ``ProviderError`` for a failed reply, its class read from the error text (R-52);
    ``provider_error`` (``.classify``) is this, typed ``AssistantMessage``.

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
    rules = _seed_rules()
    if rules._overflow_of(message, context_window):
        cls = ContextOverflowError
    elif status in (401, 403) or (status is None and re.search(_AUTH, text)):
        cls = AuthenticationError
    elif status == 429 or re.search(_RATE, text):
        cls = RateLimitError
    elif status in (503, 529) or re.search(_OVERLOADED, text):
        cls = OverloadedError
    elif (status is not None and status >= 500) or re.search(_SERVER, text):
        cls = ServerError
    elif re.search(_CONNECTION, text):
        cls = ProviderConnectionError
    else:
        cls = ProviderError
    return cls(
        text,
        status=status,
        provider=message.provider,
        model=message.model,
        retry_after_ms=parse_retry_after_ms(text),
        retryable=rules._retryable(message, lambda: rules._overflow_of(message, context_window)),
        reply=message,
    )
