"""Which errors retry, which overflow, and what the server asked us to wait.

Classification is plain text matching on ``errorMessage`` (R-6, R-52): the
provider adapters put the HTTP status, the server's message and the retry
headers into that text, and these patterns decide. Everything here is pure.

Three classifiers ship, each built from its table of named patterns (``tables.py``):

* ``REFERENCE_CLASSIFIER`` — the seed profile: the contract's rules, exactly
  (R-4, R-5, R-7; ``SEED_PATTERNS``). It is the default.
* ``PI_1_6_CLASSIFIER`` — the pi-1.6 profile: pi 1.6.0's own lists, pattern for
  pattern (R-58; ``PI_1_6_PATTERNS``).
* ``STRICT_CLASSIFIER`` — ``retry.classifier: "strict"`` (R-8, R-60): status codes
  must stand alone (``0429`` inside a model name is not a 429), billing and quota
  errors are never retried, a per-minute token rate limit is not mistaken for a
  context overflow, and pi 1.6.0's wider transport wordings retry
  (``STRICT_PATTERNS``).

``classifier_for(profile)`` names them.

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
from .tables import PI_1_6_PATTERNS, SEED_PATTERNS, STRICT_PATTERNS, PatternTable

RETRYABLE_PATTERN = SEED_PATTERNS.joined(SEED_PATTERNS.retryable)
"""R-5: the reference's retryable pattern, searched anywhere, case-insensitive."""

OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(p.regex for p in SEED_PATTERNS.overflow)
"""R-7(a): context-overflow wordings of the major providers (the reference's list, plus
``request_too_large`` as the contract names it)."""

#: R-7(a): Cerebras-style "400 status code (no body)" / "413 (no body)" at the start.
NO_BODY_OVERFLOW_PATTERN = SEED_PATTERNS.bodyless_overflow.regex

USAGE_LIMIT_PATTERN = re.compile(r"usage.?limit|usage_limit_reached|limit_reached", re.IGNORECASE)
"""R-17: an error that means this credential hit its usage limit."""


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
    """A classifier made of regular expressions (R-4 … R-8, R-57 … R-60).

    An overflow by wording (R-7(a)) is a match of ``overflow`` or of ``bodyless_overflow``
    (for a message from one of ``bodyless_providers``, or any provider when that is
    ``None``) that ``not_overflow`` does not veto. ``classifier_for`` gives the shipped
    ones; ``from_table`` builds one from a ``PatternTable``.

    Attributes:
        name: shown in docs and errors (``"reference"``, ``"pi-1.6"``, ``"strict"``).
        retryable: searched in ``errorMessage``; a match means transient.
        overflow: any match means context overflow.
        non_retryable: if given, a match vetoes ``retryable``.
        not_overflow: if given, a match vetoes an overflow by wording.
        bodyless_overflow: a bare "400/413 status code (no body)" at the start of the text
            (R-7(a)); ``None`` for no such rule.
        bodyless_providers: if given, ``bodyless_overflow`` counts only for these providers.
        length_overflow: whether a ``length`` stop with no output whose input fills 99 % of
            the window is an overflow too (pi's third case; R-58).
    """

    name: str
    retryable: re.Pattern[str]
    overflow: tuple[re.Pattern[str], ...]
    non_retryable: re.Pattern[str] | None = None
    not_overflow: re.Pattern[str] | None = None
    bodyless_overflow: re.Pattern[str] | None = attrs.field(
        default=attrs.Factory(lambda: NO_BODY_OVERFLOW_PATTERN)
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
    def from_table(cls, table: PatternTable, name: str | None = None) -> PatternClassifier:
        """The classifier a table describes: its lists joined as pi joins them.

        Args:
            table: the patterns (``SEED_PATTERNS``, ``PI_1_6_PATTERNS``, ``STRICT_PATTERNS``
                or one of your own).
            name: the classifier's name; the table's by default.

        Returns:
            The classifier.
        """
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

    def _bodyless(self, message: AssistantMessage, text: str) -> bool:
        """Whether the no-body rule applies to this message and matches ``text``."""
        if self.bodyless_overflow is None:
            return False
        if self.bodyless_providers is not None and message.provider not in self.bodyless_providers:
            return False
        return self.bodyless_overflow.search(text) is not None

    def is_retryable(self, message: AssistantMessage, context_window: int | None = None) -> bool:
        """R-4: an error, with a message, not an overflow, not vetoed, matching the pattern.

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


#: What makes a list of patterns unsafe to join: a back-reference or a named group.
_NOT_JOINABLE = re.compile(r"\\[1-9]|\(\?P[<=]|\(\?<[A-Za-z]")


def _any_of(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str] | None:
    """The overflow patterns as one alternation: one search instead of one per pattern.

    Only when that means the same (same flags, no back-references or named groups, and
    it compiles); otherwise ``None``, and the tuple is searched pattern by pattern.
    """
    flags = {p.flags for p in patterns}
    if len(flags) != 1 or any(_NOT_JOINABLE.search(p.pattern) for p in patterns):
        return None
    try:
        return re.compile("|".join(f"(?:{p.pattern})" for p in patterns), flags.pop())
    except re.error:
        return None


REFERENCE_CLASSIFIER = PatternClassifier.from_table(SEED_PATTERNS, name="reference")
"""The reference's classifier (R-5, R-7): ``SEED_PATTERNS``, searched anywhere in the error
text. The default, and the seed profile's."""
PI_1_6_CLASSIFIER = PatternClassifier.from_table(PI_1_6_PATTERNS)
"""pi 1.6.0's classifier (R-58): ``PI_1_6_PATTERNS``, decided as pi 1.6.0's
``AgentSession._isRetryableError`` and ``isContextOverflow`` decide. The pi-1.6 profile's."""
STRICT_CLASSIFIER = PatternClassifier.from_table(STRICT_PATTERNS)
"""A stricter classifier (R-8, R-60): ``STRICT_PATTERNS``: status codes only as whole numbers,
pi 1.6.0's wider transport wordings, and texts that look retryable or like an overflow but
are not."""
CLASSIFIERS: dict[str, PatternClassifier] = {
    "reference": REFERENCE_CLASSIFIER,
    "seed": REFERENCE_CLASSIFIER,
    "pi-1.6": PI_1_6_CLASSIFIER,
    "strict": STRICT_CLASSIFIER,
}
"""The shipped classifiers by profile (``retry.profile``) or ``retry.classifier`` value."""


def classifier_for(profile: str) -> PatternClassifier:
    """The shipped classifier of a profile or ``retry.classifier`` value (R-57).

    Args:
        profile: ``"seed"`` (also ``"reference"``), ``"pi-1.6"`` or ``"strict"``.

    Returns:
        ``REFERENCE_CLASSIFIER``, ``PI_1_6_CLASSIFIER`` or ``STRICT_CLASSIFIER``.

    Raises:
        ValueError: ``profile`` names no shipped classifier.
    """
    try:
        return CLASSIFIERS[profile]
    except KeyError:
        names = ", ".join(repr(name) for name in CLASSIFIERS)
        msg = f"no classifier is named {profile!r} (one of {names})"
        raise ValueError(msg) from None


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
