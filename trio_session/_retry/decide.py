"""The one decision after a run: retry, give up, compact, or nothing (SPEC §1, R-12, R-15).

``decide`` is asked once per run, just before its ``agent_end`` (whose ``willRetry``
it fills in, R-45a), and its answer is what happens next: the controller acts on it,
and a chain that is already running reads it to go on or to end. The maximum is
``backoff.stop``'s (the one stop rule, R-13, R-15, R-27):

```text
store asked (R-53b)?  a free key         → RETRY     (pi-1.6: a usage limit, R-55)
                      none left          → DONE      (pi-1.6: no exponential wait)
retryable (R-4)?      retry.enabled off  → DONE      (R-12: no chain, no event)
                      attempt + 1 > max  → GIVE_UP   (R-15: the chain ends, attempt unchanged)
                      else               → RETRY
overflow (R-2, R-7)?  compaction off     → DONE
                      silent (R-7(b))    → COMPACT_ONLY
                      compacted already  → DONE      (R-50: continue once)
                      else               → COMPACT
anything else                            → DONE
```

With fallback models (R-65) the controller turns pi-1.6's "none left" into ``FALLBACK``
while a fallback model is left, and acts on a chain's ``GIVE_UP`` the same way once the
chain has ended; ``decide`` itself knows nothing of them.

Under ``retry.profile: "pi-1.6"`` a usage-limit error (R-17) that may be retried is a
question for the credential store before it is a decision (``asks_for_a_key``): the
controller asks before ``agent_end`` and hands the answer in as ``rotated``, so that
``willRetry`` is true only when a free key takes the re-attempt (R-53b, R-56).

Pure: a function of the message and the values handed in.
"""

from __future__ import annotations

import enum
from typing import Protocol

from .._core.messages import AssistantMessage
from .._settings.values import Settings
from .backoff import stop
from .classify import Classifier, is_usage_limit_error
from .profile import is_pi16, retry_profile


class SettingsSource(Protocol):
    """Where the effective settings are read, fresh each time (``SettingsStore``)."""

    @property
    def current(self) -> Settings:
        """The effective settings now."""
        ...


class Next(enum.Enum):
    """What the session does after a run ends, decided just before ``agent_end``."""

    DONE = "done"  #: nothing; the prompt is over (or the error stays, R-15a)
    RETRY = "retry"  #: a retryable error within the budget: start or go on with a chain
    GIVE_UP = "give_up"  #: retryable, but the next attempt would exceed maxRetries
    COMPACT = "compact"  #: context overflow error: compact, then continue once (R-50)
    COMPACT_ONLY = "compact_only"  #: silent overflow on an answer: compact, don't continue
    #: overflow, nothing old enough to compact: the failure leaves the context, the
    #: prompt ends (R-56a; ``trio_session._retry.overflow``)
    DROP = "drop"
    #: a second overflow after this prompt's compaction: "recovery failed" (R-56c, pi-1.6)
    OVERFLOW_FAILED = "overflow_failed"
    #: nothing left to try on this model, and a fallback model is left: the run goes on
    #: there (R-65); the controller's answer, never ``decide``'s
    FALLBACK = "fallback"

    @property
    def will_retry(self) -> bool:
        """The ``willRetry`` flag of ``agent_end`` (R-45a)."""
        return self in (Next.RETRY, Next.COMPACT, Next.FALLBACK)

    @property
    def retries(self) -> bool:
        """Whether a retry chain acts on it: start, go on (``RETRY``) or end (``GIVE_UP``)."""
        return self in (Next.RETRY, Next.GIVE_UP)


def decide(
    message: AssistantMessage,
    settings: Settings,
    classifier: Classifier,
    *,
    context_window: int | None,
    attempt: int,
    compacted: bool,
    rotated: bool | None = None,
) -> Next:
    """What follows a run whose last message is ``message`` (R-1, R-2).

    Args:
        message: the run's last assistant message.
        settings: the effective settings now (R-11: read at every decision).
        classifier: the session's classifier (``retry.classifier`` or its own).
        context_window: the model's context window, for a silent overflow (R-7(b)).
        attempt: the retry attempt in progress, 0 when no chain is alive (R-9).
        compacted: whether this prompt already compacted after an overflow error.
        rotated: when the credential store was asked about this message
            (``asks_for_a_key``): whether it moved the session to a free key;
            ``None`` when it was not asked.

    Returns:
        The next step; its ``will_retry`` is the run's ``agent_end.willRetry``.
    """
    if rotated is not None:  # R-53b, R-55: pi-1.6 retries a usage limit only on a free key
        return Next.RETRY if rotated else Next.DONE
    if classifier.is_retryable(message, context_window):
        retry = settings.retry
        if not retry.enabled:
            return Next.DONE
        if stop(attempt + 1, retry) is not None:  # the one stop rule
            return Next.GIVE_UP
        return Next.RETRY
    if classifier.is_context_overflow(message, context_window):
        if not settings.compaction.enabled:
            return Next.DONE
        if message.stop_reason != "error":
            return Next.COMPACT_ONLY
        return Next.DONE if compacted else Next.COMPACT
    return Next.DONE


def asks_for_a_key(
    message: AssistantMessage,
    settings: Settings,
    classifier: Classifier,
    *,
    context_window: int | None,
    attempt: int,
) -> bool:
    """R-53b: under ``"pi-1.6"``, whether the credential store decides what follows.

    True for a usage-limit error (R-17's pattern, not an overflow) when a retry may
    follow at all (``retry.enabled``, and the next attempt within ``maxRetries``): a
    free key retries it at once, as under ``"seed"`` (R-17); with none left pi 1.6.0's
    rule holds and nothing is retried (R-55). Under ``"seed"`` always False: the chain
    rotates after deciding, and waits the exponential delay when no key is free.

    Args:
        message: the run's last assistant message.
        settings: the effective settings now.
        classifier: the session's classifier (an overflow is compaction's, R-2).
        context_window: the model's context window.
        attempt: the retry attempt in progress, 0 when no chain is alive.
    """
    retry = settings.retry
    text = message.error_message
    return (
        is_pi16(retry)
        and message.stop_reason == "error"
        and bool(text)
        and is_usage_limit_error(text or "", profile=retry_profile(retry))
        and retry.enabled
        and stop(attempt + 1, retry) is None
        and not classifier.is_context_overflow(message, context_window)
    )
