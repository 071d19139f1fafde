"""The retry policy as one value: ``RetryPolicy`` (SPEC §1–§6, §12).

Everything the settings and the profile change about a decision is resolved here, once
per decision (R-11: the settings are read at every one), into a frozen value; every
part of the session that decides something asks it — a run's end, the retry chain
before each wait, a compaction's summary request, the overflow path, the tracer's
labels — so no two of them can choose differently:

```text
RetryPolicy.resolve(settings, own)
├── classifier              profile.py:classifier_of   the one choice (R-8, R-53, R-57)
├── pi16                    profile.py:is_pi16          the one reader of retry.profile
├── decide(reply, …)        decide.py:decide            retry / give up / compact / done
├── stop(attempt, …)        backoff.py:stop             the one stop rule: max and budget
├── delay(attempt, hint)    backoff.py:plan_delay       the one delay function, every cap
└── summary_delay(attempt)  backoff.py:summary_delay_ms pi 1.6.0's summary-request wait
```

The rules themselves stay plain functions in their modules, each with its formula in
its docstring (and tested as such); this value binds them to the settings in effect.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .._core.classes import frozen
from .._core.messages import AssistantMessage
from .._settings.values import RetrySettings, Settings
from .backoff import DelayPlan, Stop, over_budget, plan_delay, stop, summary_delay_ms
from .classify import Classifier, is_usage_limit_error
from .decide import Next, asks_for_a_key, decide
from .overflow import overflow_step
from .profile import classifier_of, is_pi16, retry_profile


@frozen
class RetryPolicy:
    """The policy in effect for one decision: the settings and the classifier.

    Make one with ``resolve``. Frozen: a decision made with it cannot change it.

    Attributes:
        settings: the effective settings the decision reads (R-11).
        classifier: the classifier in effect (``profile.classifier_of``).
    """

    settings: Settings
    classifier: Classifier

    @classmethod
    def resolve(cls, settings: Settings, own: Classifier | None = None) -> RetryPolicy:
        """The policy of ``settings`` (and the session's own classifier, if any).

        Args:
            settings: the effective settings now.
            own: the session's own classifier (``open_session(classifier=...)``).
        """
        return cls(settings, classifier_of(settings.retry, own))

    @property
    def retry(self) -> RetrySettings:
        """The ``retry`` group."""
        return self.settings.retry

    @property
    def pi16(self) -> bool:
        """Whether pi 1.6.0's rules apply (``retry.profile: "pi-1.6"``, R-53)."""
        return is_pi16(self.settings.retry)

    # -- after a run (SPEC §1) ------------------------------------------------------

    def decide(
        self,
        message: AssistantMessage,
        *,
        context_window: int | None,
        max_tokens: int,
        attempt: int,
        compacted: bool,
        rotated: bool | None,
        can_compact: Callable[[], bool],
    ) -> Next:
        """What follows a run ending in ``message``: ``decide``, then the overflow path.

        Args:
            message: the run's last assistant message.
            context_window: the model's context window (R-7(b)).
            max_tokens: the model's ``max_tokens`` (R-56b).
            attempt: the retry attempt in progress, 0 when no chain is alive.
            compacted: whether this prompt already compacted after an overflow.
            rotated: the credential store's answer when it was asked (R-53b).
            can_compact: whether the compactor would find anything to remove.
        """
        step = decide(
            message,
            self.settings,
            self.classifier,
            context_window=context_window,
            attempt=attempt,
            compacted=compacted,
            rotated=rotated,
        )
        if step.retries:
            return step
        return overflow_step(
            step,
            message,
            self.settings,
            self.classifier,
            context_window=context_window,
            max_tokens=max_tokens,
            compacted=compacted,
            can_compact=can_compact,
        )

    def asks_for_a_key(
        self, message: AssistantMessage, *, context_window: int | None, attempt: int
    ) -> bool:
        """R-53b: whether the credential store decides what follows ``message``."""
        return asks_for_a_key(
            message, self.settings, self.classifier, context_window=context_window, attempt=attempt
        )

    def is_usage_limit(self, text: str) -> bool:
        """R-17: whether an error text is a usage limit, under this profile's rule."""
        return is_usage_limit_error(text, profile=retry_profile(self.settings.retry))

    def label(self, message: AssistantMessage, context_window: int | None) -> str:
        """``"retryable"``, ``"overflow"`` or ``"fatal"``: the tracer's word for a failure."""
        if self.classifier.is_retryable(message, context_window):
            return "retryable"
        if self.classifier.is_context_overflow(message, context_window):
            return "overflow"
        return "fatal"

    # -- the chain's waits (SPEC §3) -------------------------------------------------

    def stop(self, attempt: int, *, spent_ms: int | None = None, delay_ms: int = 0) -> Stop | None:
        """The one stop rule (``backoff.stop``): max and budget together."""
        return stop(attempt, self.settings.retry, spent_ms=spent_ms, delay_ms=delay_ms)

    def delay(
        self, attempt: int, *, hint_ms: int | None = None, rng: random.Random | None = None
    ) -> DelayPlan:
        """The wait before re-attempt ``attempt`` (``backoff.plan_delay``: every cap)."""
        return plan_delay(attempt, self.settings.retry, hint_ms=hint_ms, rng=rng)

    def over_budget(self, spent_ms: int, delay_ms: int, error: str) -> str | None:
        """R-61's ``finalError`` when ``stop`` says ``"budget"``, else ``None``."""
        return over_budget(spent_ms, delay_ms, self.settings.retry, error)

    # -- a compaction's summary request (R-56f) ---------------------------------------

    def retries_summary(self, reply: AssistantMessage, attempt: int, window: int | None) -> bool:
        """Whether a summary request's ``reply`` is sent again as re-attempt ``attempt``.

        pi-1.6 only: a retryable error, with ``retry.enabled`` and the re-attempt within
        the maximum (the one stop rule; no time budget there, as in pi 1.6.0).

        Args:
            reply: what the summary request answered.
            attempt: the 1-based re-attempt that would be made.
            window: the model's context window, for the classifier.
        """
        return (
            self.pi16
            and reply.stop_reason == "error"
            and self.settings.retry.enabled
            and self.stop(attempt) is None
            and self.classifier.is_retryable(reply, window)
        )

    def summary_delay(self, attempt: int) -> int:
        """The wait before summary re-attempt ``attempt`` (``backoff.summary_delay_ms``)."""
        return summary_delay_ms(attempt, self.settings.retry)
