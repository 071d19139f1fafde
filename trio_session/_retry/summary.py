"""A compaction's summary request, retried under the retry policy (SPEC R-56f, "pi-1.6").

pi 1.6.0 sends a summary request again when it fails with a retryable error, under
the same ``retry`` settings as a run (``retry.enabled``, ``retry.maxRetries``,
``retry.baseDelayMs``; the delay capped at 60 s), and says so with three events:

```text
summary request → retryable error, attempt < maxRetries?
    summarization_retry_scheduled {attempt, maxAttempts, delayMs, errorMessage}
    sleep(delayMs)                       abort() cancels it: finished, then Cancelled
    summarization_retry_attempt_start {source: "compaction", reason}
    summary request again …
summarization_retry_finished             once, after a retry, however it ended
```

An answer that is not an error (an empty one included), a non-retryable error, or
the last allowed attempt is handed back as it is: the compactor decides what to do
with it. No retry, no event. Under ``"seed"`` none of this runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import trio

from .._core.classes import frozen
from .._core.events import (
    CompactionReason,
    SessionEvent,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
)
from .._core.messages import AssistantMessage, Message
from .policy import RetryPolicy


@frozen
class RetryingAsk:
    """``ask`` with pi 1.6.0's summary-request retries around each call.

    Attributes:
        ask: asks the model once (``Agent.complete``).
        policy: the policy in effect, resolved fresh at each call (R-11): its classifier,
            its stop rule and its summary delay.
        emit: where the three events go.
        reason: the compaction's reason, for ``summarization_retry_attempt_start``.
        context_window: the model's context window, for the classifier.
    """

    ask: Callable[..., Awaitable[AssistantMessage]]
    policy: Callable[[], RetryPolicy]
    emit: Callable[[SessionEvent], None]
    reason: CompactionReason
    context_window: int | None = None

    async def __call__(
        self, messages: Sequence[Message], *, system_prompt: str | None = None
    ) -> AssistantMessage:
        """The model's reply, after as many retries as the policy allows.

        Args:
            messages: the messages to send.
            system_prompt: the system prompt to send with them.
        """
        policy = self.policy()
        most = policy.retry.max_retries if policy.retry.enabled else 0
        attempt = 0
        try:
            while True:
                reply = await self.ask(messages, system_prompt=system_prompt)
                if not policy.retries_summary(reply, attempt + 1, self.context_window):
                    return reply
                attempt += 1
                delay = policy.summary_delay(attempt)
                text = reply.error_message or "Unknown error"
                self.emit(SummarizationRetryScheduled(attempt, most, delay, text))
                await trio.sleep(delay / 1000)
                self.emit(SummarizationRetryAttemptStart("compaction", self.reason))
        finally:
            if attempt:  # once, after a retry: success, failure or cancellation
                self.emit(SummarizationRetryFinished())
