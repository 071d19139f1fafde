"""The one decision after a run: retry, give up, compact, or nothing (SPEC §1, R-12, R-15).

``decide`` is asked once per run, just before its ``agent_end`` (whose ``willRetry``
it fills in, R-45a), and its answer is what happens next: the controller acts on it,
and a chain that is already running reads it to go on or to end. It is the only place
the maximum is checked (R-13, R-15, R-27):

```text
retryable (R-4)?      retry.enabled off  → DONE      (R-12: no chain, no event)
                      attempt + 1 > max  → GIVE_UP   (R-15: the chain ends, attempt unchanged)
                      else               → RETRY
overflow (R-2, R-7)?  compaction off     → DONE
                      silent (R-7(b))    → COMPACT_ONLY
                      compacted already  → DONE      (R-50: continue once)
                      else               → COMPACT
anything else                            → DONE
```

Pure: a function of the message and the values handed in.
"""

from __future__ import annotations

import enum
from typing import Protocol

from .._messages import AssistantMessage
from .._settings_values import Settings
from .classify import Classifier


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

    @property
    def will_retry(self) -> bool:
        """The ``willRetry`` flag of ``agent_end`` (R-45a)."""
        return self in (Next.RETRY, Next.COMPACT)

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
) -> Next:
    """What follows a run whose last message is ``message`` (R-1, R-2).

    Args:
        message: the run's last assistant message.
        settings: the effective settings now (R-11: read at every decision).
        classifier: the session's classifier (``retry.classifier`` or its own).
        context_window: the model's context window, for a silent overflow (R-7(b)).
        attempt: the retry attempt in progress, 0 when no chain is alive (R-9).
        compacted: whether this prompt already compacted after an overflow error.

    Returns:
        The next step; its ``will_retry`` is the run's ``agent_end.willRetry``.
    """
    if classifier.is_retryable(message, context_window):
        retry = settings.retry
        if not retry.enabled:
            return Next.DONE
        if attempt + 1 > retry.max_retries:  # the one maximum check
            return Next.GIVE_UP
        return Next.RETRY
    if classifier.is_context_overflow(message, context_window):
        if not settings.compaction.enabled:
            return Next.DONE
        if message.stop_reason != "error":
            return Next.COMPACT_ONLY
        return Next.DONE if compacted else Next.COMPACT
    return Next.DONE
