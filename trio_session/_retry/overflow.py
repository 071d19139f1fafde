"""The overflow path's rules per profile, applied to ``decide``'s answer (SPEC R-56).

``decide`` says *that* a run overflowed (R-2, R-7); this says what the overflow path
does with it, before ``agent_end`` (whose ``willRetry`` must be true only when
something continues the run: R-45a, R-56):

```text
decide's step      profile   condition                                  step
COMPACT            both      nothing old enough to compact              DROP      R-56a
DONE               pi-1.6    a reply cut at its length limit below the  COMPACT   R-56b
                             model's maxTokens (pi's isRecoverableLength)
DONE               pi-1.6    an overflow error or a length cut, after   OVERFLOW_FAILED
                             this prompt's compaction                             R-56c
anything else                                                           unchanged
```

``can_compact`` asks the session's compactor, synchronously, whether it would find
anything to remove once the failure has left the context. Pure otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from .._core.messages import AssistantMessage
from .._settings.values import Settings
from .classify import Classifier
from .decide import Next
from .profile import is_pi16

#: pi 1.6.0's words when a second overflow follows its one compact-and-retry.
OVERFLOW_RECOVERY_FAILED = (
    "Context overflow recovery failed after one compact-and-retry attempt. Try reducing "
    "context or switching to a larger-context model."
)
LENGTH_RECOVERY_FAILED = "Truncated response recovery failed after one compact-and-retry attempt."


def is_recoverable_length(message: AssistantMessage, max_tokens: int) -> bool:
    """pi 1.6.0's ``isRecoverableLength``: cut at its length limit, below the model's own.

    Args:
        message: the run's last assistant message.
        max_tokens: the model's ``max_tokens``.
    """
    return message.stop_reason == "length" and max_tokens > 0 and message.usage.output < max_tokens


def overflow_step(
    step: Next,
    message: AssistantMessage,
    settings: Settings,
    classifier: Classifier,
    *,
    context_window: int | None,
    max_tokens: int,
    compacted: bool,
    can_compact: Callable[[], bool],
) -> Next:
    """``step`` as the overflow path's rules leave it (the table above).

    Args:
        step: what ``decide`` said.
        message: the run's last assistant message.
        settings: the effective settings now.
        classifier: the session's classifier.
        context_window: the model's context window.
        max_tokens: the model's ``max_tokens`` (R-56b).
        compacted: whether this prompt already compacted after an overflow.
        can_compact: whether the compactor would find anything to remove without
            ``message``.

    Returns:
        The step the controller acts on.
    """
    if step is Next.DONE and settings.compaction.enabled and is_pi16(settings.retry):
        length = is_recoverable_length(message, max_tokens)
        if compacted and (length or classifier.is_context_overflow(message, context_window)):
            return Next.OVERFLOW_FAILED
        if length:
            step = Next.COMPACT
    if step is Next.COMPACT and not can_compact():
        return Next.DROP
    return step
