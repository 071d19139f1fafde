"""How long to wait before a re-attempt (R-16, R-28), the one cap on any wait, and the
one stop rule (R-13, R-15, R-27, R-61).

Pure functions, no I/O.

The reference formula is ``exponential_delay_ms``:

```text
delay = baseDelayMs * 2 ** (attempt - 1)        # 2000, 4000, 8000 with defaults
```

Under ``retry.profile: "pi-1.6"`` the exponential delay is capped at
``retry.maxAgentDelayMs`` (60 000 by default), as pi 1.6.0's ``retryDelayMs`` does:
the wait is cut to the cap, the chain goes on (R-53a, ``agent_delay_cap``). Under
``"seed"`` there is no such cap.

``plan_delay`` adds the optional extras of R-28, all off by default so the
reference schedule is exact: a cap (``maxDelayMs``), jitter, and honouring a
server's ``Retry-After`` hint — up to ``retry.provider.maxRetryDelayMs`` when
``maxDelayMs`` is unset.

Whatever the settings and the server say, no planned wait exceeds
``MAX_WAIT_MS``, so a delay always converts to seconds as a float and to
JSON as an integer every client reads exactly.
"""

from __future__ import annotations

import math
import random
from typing import Literal

from .._core.classes import frozen
from .._settings.values import RetrySettings
from .classify import MAX_HINT_MS
from .profile import is_pi16

#: Why a chain may not make its next re-attempt (``stop``).
Stop = Literal["max", "budget"]

#: The longest wait ever planned, in milliseconds: 2**53 - 1 (about 285 000 years),
#: the largest integer a JSON client reading doubles holds exactly.
MAX_WAIT_MS = MAX_HINT_MS


#: Jitter's source when the caller gives none: one per process (seeding a fresh
#: ``random.Random`` reads the OS's entropy pool, which costs more than the rest of a plan).
_RANDOM = random.Random()


def exponential_delay_ms(attempt: int, base_delay_ms: int) -> int:
    """R-16: ``base_delay_ms * 2 ** (attempt - 1)`` for a 1-based ``attempt``.

    Args:
        attempt: the re-attempt about to be made, 1 for the first.
        base_delay_ms: the settings' ``retry.baseDelayMs``.
    """
    if attempt < 1:
        msg = f"attempt must be 1 or more, not {attempt!r}"
        raise ValueError(msg)
    return int(base_delay_ms * 2 ** (attempt - 1))


@frozen
class DelayPlan:
    """The wait before a re-attempt, or why there is none.

    Attributes:
        delay_ms: milliseconds to sleep; ``None`` when the chain must end instead.
        refusal: when ``delay_ms`` is ``None``: the final error, naming the wait
            the server asked for and the cap it exceeds.
    """

    delay_ms: int | None
    refusal: str | None = None


def plan_delay(
    attempt: int,
    settings: RetrySettings,
    *,
    hint_ms: int | None = None,
    rng: random.Random | None = None,
) -> DelayPlan:
    """The wait before re-attempt number ``attempt`` (1-based).

    1. ``d = min(baseDelayMs * 2 ** (attempt - 1), MAX_WAIT_MS)`` (R-16); under
       ``"pi-1.6"`` at most ``maxAgentDelayMs`` too (R-53a, ``agent_delay_cap``).
    2. With ``maxDelayMs``: ``d = min(d, maxDelayMs)``.
    3. Jitter: ``"full"`` draws from ``[0, d]``; ``"equal"`` from ``[d/2, d]``.
    4. With ``respectRetryAfter`` and a server hint ``h``: ``d = max(d, h)`` — jitter
       never shortens a server-requested wait. A hint above the cap is not slept:
       the plan has no delay and a ``refusal`` naming both numbers. The cap is
       ``maxDelayMs``, or when that is unset ``provider.maxRetryDelayMs`` (``0``:
       none; the hint is then slept, at most ``MAX_WAIT_MS``).

    Args:
        attempt: the attempt about to be made, 1 for the first re-attempt.
        settings: the ``retry`` group.
        hint_ms: what the server asked for (R-18), if anything.
        rng: source of jitter; a seeded ``random.Random`` makes it repeatable.
    """
    delay = min(exponential_delay_ms(attempt, settings.base_delay_ms), MAX_WAIT_MS)
    agent_cap = agent_delay_cap(settings)
    if agent_cap is not None:
        delay = min(delay, agent_cap)
    cap = settings.max_delay_ms
    if cap is not None:
        delay = min(delay, cap)
    if settings.jitter != "none":
        delay = _jittered(delay, settings.jitter, rng or _RANDOM)
    if settings.respect_retry_after and hint_ms is not None:
        hint_cap = wait_cap(settings)
        if hint_cap is not None and hint_ms > hint_cap[0]:
            refusal = (
                f"server asked to wait {hint_ms} ms before retrying, "
                f"more than {hint_cap[1]} ({hint_cap[0]} ms)"
            )
            return DelayPlan(delay_ms=None, refusal=refusal)
        delay = max(delay, min(hint_ms, MAX_WAIT_MS))
    return DelayPlan(delay_ms=delay)


def stop(
    attempt: int, settings: RetrySettings, *, spent_ms: int | None = None, delay_ms: int = 0
) -> Stop | None:
    """The one stop rule: whether re-attempt number ``attempt`` may not be made.

    ```text
    attempt > retry.maxRetries                          → "max"     (R-13, R-15, R-27)
    spent_ms + delay_ms > retry.maxTotalMs (when set)   → "budget"  (R-61)
    otherwise                                           → None: the re-attempt is made
    ```

    The maximum and the time budget are one condition, as in stamina's stop rule: a run's
    end (``decide``), a chain before its wait, and a compaction's summary request all ask
    it. The budget is only judged where time is counted (``spent_ms`` given): the chain's.

    Args:
        attempt: the 1-based re-attempt about to be made.
        settings: the ``retry`` group (R-11: read at the decision).
        spent_ms: milliseconds since the chain's first error; ``None`` where no time is
            counted (the budget is then not judged).
        delay_ms: the wait planned before that re-attempt.
    """
    if attempt > settings.max_retries:
        return "max"
    budget = settings.max_total_ms
    if spent_ms is not None and budget is not None and spent_ms + delay_ms > budget:
        return "budget"
    return None


def over_budget(spent_ms: int, delay_ms: int, settings: RetrySettings, error: str) -> str | None:
    """R-61: the ``finalError`` of a chain whose next wait would pass ``retry.maxTotalMs``.

    The budget is the time since the chain's first error: the waits slept and the
    re-attempts made. The chain gives up before a wait that would end past it, rather
    than sleep and give up after (``stop``'s ``"budget"``); ``None`` when there is no
    budget or the wait fits.

    Args:
        spent_ms: milliseconds since the chain began (its first error).
        delay_ms: the wait planned before the next re-attempt.
        settings: the ``retry`` group.
        error: the last error's text; its first line ends the message.

    Returns:
        One line naming the budget, the wait and the last error, or ``None``.
    """
    budget = settings.max_total_ms
    if budget is None or stop(0, settings, spent_ms=spent_ms, delay_ms=delay_ms) is None:
        return None
    last = error.strip().splitlines()[0] if error.strip() else "none"
    return (
        f"retry budget spent: waiting {delay_ms} ms more would take this chain to "
        f"{spent_ms + delay_ms} ms, past retry.maxTotalMs ({budget} ms); last error: {last}"
    )


#: pi 1.6.0's cap on one summary-request delay (its ``DEFAULT_MAX_AGENT_RETRY_DELAY_MS``).
MAX_SUMMARY_DELAY_MS = 60_000


def summary_delay_ms(attempt: int, settings: RetrySettings) -> int:
    """R-56f: the wait before a compaction's summary request is sent again (pi-1.6).

    ``min(baseDelayMs * 2 ** (attempt - 1), 60 000)``: pi 1.6.0 caps it with its fixed
    default, not the setting, and honours no server hint, jitter or ``maxDelayMs`` there.

    Args:
        attempt: the 1-based re-attempt about to be made.
        settings: the ``retry`` group.
    """
    return min(exponential_delay_ms(attempt, settings.base_delay_ms), MAX_SUMMARY_DELAY_MS)


def agent_delay_cap(settings: RetrySettings) -> int | None:
    """The cap on the exponential wait of R-16, by profile: the one rule of R-53a.

    pi 1.6.0 (``retryDelayMs`` in pi-ai's ``utils/retry``) cuts the computed delay to
    ``retry.maxAgentDelayMs`` and retries anyway: with ``baseDelayMs`` 40 000 the
    waits are 40 000, 60 000, 60 000. It does not give up because the delay would be
    longer, and ``0`` means no wait at all. Under ``"seed"`` (pi 0.73.1) there is no cap.

    Args:
        settings: the ``retry`` group.

    Returns:
        The cap in milliseconds, or ``None`` for none.
    """
    if is_pi16(settings):
        return settings.max_agent_delay_ms
    return None


def wait_cap(settings: RetrySettings) -> tuple[int, str] | None:
    """The longest a server's hint (or a shared cooldown) may make us wait, and its key.

    The one cap rule of R-28 and R-28b: ``retry.maxDelayMs`` when set, else
    ``retry.provider.maxRetryDelayMs`` when it is not ``0``, else none.

    Args:
        settings: the ``retry`` group.

    Returns:
        ``(milliseconds, the settings key that set them)``, or ``None`` for no cap.
    """
    if settings.max_delay_ms is not None:
        return settings.max_delay_ms, "retry.maxDelayMs"
    if settings.provider.max_retry_delay_ms > 0:
        return settings.provider.max_retry_delay_ms, "retry.provider.maxRetryDelayMs"
    return None


def _jittered(delay: int, jitter: Literal["none", "full", "equal"], rng: random.Random) -> int:
    if jitter == "full":
        return round(rng.uniform(0, delay))
    if jitter == "equal":
        return max(math.ceil(delay / 2), round(delay / 2 + rng.uniform(0, delay / 2)))
    return delay
