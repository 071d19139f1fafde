"""The rate limits a provider states in its response headers, as data (R-69, ours).

OpenAI and Anthropic send, with every response, what the account may still send the
model: a limit, what remains of it, and when it is whole again, for requests and for
tokens. ``read_rate_limits`` reads them into a ``RateLimitHeaders``; the rate budget
learns its limits from it when the settings name none (``_agent.rate_budget``).

```text
OpenAI     x-ratelimit-limit-requests      x-ratelimit-limit-tokens       an integer
           x-ratelimit-remaining-requests  x-ratelimit-remaining-tokens   an integer
           x-ratelimit-reset-requests      x-ratelimit-reset-tokens       a duration: 6m0s, 1s, 20ms
Anthropic  anthropic-ratelimit-requests-limit / -remaining / -reset       an RFC 3339 time
           anthropic-ratelimit-tokens-limit / -remaining / -reset         (the most restrictive
                                                                           token limit in effect)
```

A server's numbers are bounded before any arithmetic, as every number a server sends
is: a limit is an integer of at most ``MAX_LIMIT`` (0 or less: none), what remains is
at most the limit, a reset at most ``MAX_RESET_MS`` away. A value that is not what its
header's format says — a word, a negative, 400 digits, a time with no zone — is
ignored, never raised: a dimension with no usable limit is ``None``. Anthropic's
``input-tokens`` and ``output-tokens`` families are not read: the budget has one token
dimension, and ``tokens-*`` is the most restrictive of them.

Pure: a function of the headers and the time they were read at, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime

from .classes import frozen

#: The largest limit (and remaining) kept: the settings' largest ``tokensPerMinute``.
MAX_LIMIT = 100_000_000_000
#: The longest reset kept, in ms: a day.
MAX_RESET_MS = 86_400_000
#: The longest header value looked at; a longer one is garbage.
_MAX_CHARS = 64

_DURATION = re.compile(
    r"(?:(?P<h>\d{1,6}(?:\.\d{1,9})?)h)?"
    r"(?:(?P<m>\d{1,6}(?:\.\d{1,9})?)m(?!s))?"
    r"(?:(?P<s>\d{1,6}(?:\.\d{1,9})?)s)?"
    r"(?:(?P<ms>\d{1,9}(?:\.\d{1,9})?)ms)?"
)
_UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}


@frozen
class RateDimension:
    """One dimension of a provider's limit, as its headers state it.

    Attributes:
        limit: what the account may send a minute (``1`` … ``MAX_LIMIT``).
        remaining: what it may still send now (``0`` … ``limit``); ``None``: not said.
        reset_ms: in how many ms it is whole again (``0`` … ``MAX_RESET_MS``);
            ``None``: not said.
    """

    limit: int
    remaining: int | None = None
    reset_ms: int | None = None


@frozen
class RateLimitHeaders:
    """What a response's rate-limit headers state (``read_rate_limits``).

    Attributes:
        requests: the request dimension; ``None``: no usable limit was sent.
        tokens: the token dimension, the same way.
    """

    requests: RateDimension | None = None
    tokens: RateDimension | None = None


def _integer(value: str | None) -> int | None:
    """A non-negative integer header, bounded to ``MAX_LIMIT``; ``None`` for anything else."""
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > _MAX_CHARS or not (value.isascii() and value.isdigit()):
        return None
    return min(int(value), MAX_LIMIT)


def duration_ms(value: str | None) -> int | None:
    """OpenAI's reset duration (``"6m0s"``, ``"1s"``, ``"20ms"``, ``"1h2m3.5s"``) in ms,
    rounded up, at most ``MAX_RESET_MS``; ``None`` for anything else.

    Args:
        value: the header's value.
    """
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > _MAX_CHARS:
        return None
    found = _DURATION.fullmatch(value)
    if found is None or not any(found.groups()):
        return None
    total = sum(float(part) * _UNIT_MS[unit] for unit, part in found.groupdict().items() if part)
    return min(math.ceil(total), MAX_RESET_MS)


def _instant(value: str | None) -> float | None:
    """An RFC 3339 time with its zone, as POSIX seconds; ``None`` for anything else."""
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > _MAX_CHARS or not value.isascii():
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp()


def _http_date(value: str | None) -> float | None:
    """A ``date`` header as POSIX seconds; ``None`` when it is not an HTTP date."""
    if value is None or len(value) > _MAX_CHARS:
        return None
    from email.utils import parsedate_to_datetime  # only with Anthropic's headers

    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _dimension(
    limit: str | None, remaining: str | None, reset_ms: int | None
) -> RateDimension | None:
    bound = _integer(limit)
    if not bound:
        return None
    left = _integer(remaining)
    return RateDimension(bound, None if left is None else min(left, bound), reset_ms)


def _until(reset: str | None, now: float) -> int | None:
    when = _instant(reset)
    seconds = None if when is None else when - now
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(math.ceil(min(max(seconds, 0.0), MAX_RESET_MS / 1000) * 1000), MAX_RESET_MS)


def read_rate_limits(headers: Mapping[str, str], now: float) -> RateLimitHeaders | None:
    """The rate limits ``headers`` state; ``None`` when they state none.

    Args:
        headers: the response's headers (names looked up lower-cased, as httpx does).
        now: when the response came, POSIX seconds (Anthropic's reset is a time); the
            response's own ``date`` header wins when it is a valid HTTP date, so a
            clock that differs from the server's does not move the reset.
    """
    get = headers.get
    requests = _dimension(
        get("x-ratelimit-limit-requests"),
        get("x-ratelimit-remaining-requests"),
        duration_ms(get("x-ratelimit-reset-requests")),
    )
    tokens = _dimension(
        get("x-ratelimit-limit-tokens"),
        get("x-ratelimit-remaining-tokens"),
        duration_ms(get("x-ratelimit-reset-tokens")),
    )
    if requests is None and tokens is None:
        served = _http_date(get("date"))
        at = now if served is None else served
        requests = _dimension(
            get("anthropic-ratelimit-requests-limit"),
            get("anthropic-ratelimit-requests-remaining"),
            _until(get("anthropic-ratelimit-requests-reset"), at),
        )
        tokens = _dimension(
            get("anthropic-ratelimit-tokens-limit"),
            get("anthropic-ratelimit-tokens-remaining"),
            _until(get("anthropic-ratelimit-tokens-reset"), at),
        )
    if requests is None and tokens is None:
        return None
    return RateLimitHeaders(requests, tokens)
