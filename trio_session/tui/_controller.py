"""Session events → what the terminal shows and what Esc does (SPEC §9). Pure: no I/O.

The ``EventController`` is fed every session event and the current time; the
terminal app asks it what to draw (``EventController.loader_text``, ``status``)
and calls ``EventController.press_esc`` when Esc arrives.

* ``auto_retry_start`` (R-46): remember the Esc handler that was bound *before the
  chain* — once per chain, so attempt 2 does not save attempt 1's retry handler (a bug
  users of the reference hit) — bind Esc to ``abort_retry``, and show
  ``Retrying (<attempt>/<maxAttempts>) in <N>s… (esc to cancel)``, N counting down
  (rounded up, so never "in 0s" while the wait lasts).
* ``auto_retry_end`` (R-47): restore that handler, clear the loader, and when the chain
  failed show ``Retry failed after <attempt> attempts: <finalError>``. An end with no
  start before it (``maxRetries: 0``) restores nothing.
* A run aborted after retries (R-48) shows ``Aborted after N retry attempt(s)``.
* A compaction's summary request retried (``summarization_retry_scheduled``, R-56f,
  ``retry.profile`` ``"pi-1.6"``) shows as a retry does: the same loader and countdown;
  Esc is then what it is during any compaction, abort (which ends the wait and the
  compaction). ``summarization_retry_attempt_start`` goes back to the compaction's own
  loader; ``summarization_retry_finished`` or the compaction's end clears it.
* A request waiting for its ``rateLimit`` permit (``rate_limit_wait_start``, R-69) shows
  ``Waiting for the rate limit (<N>s)… (esc to cancel)``, N counting down (no N when it
  is queued behind other requests), until ``rate_limit_wait_end``; Esc does what it
  does then (abort, or ``abort_retry`` during a retry), which ends the wait.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from .._core.classes import define
from .._core.events import (
    AgentEnd,
    AgentStart,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    MessageEnd,
    RateLimitWaitEnd,
    RateLimitWaitStart,
    SessionEvent,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from .._core.messages import AssistantMessage, UserMessage

EscHandler = Callable[[], None]
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def js_round(x: float) -> int:
    """Round half up, as JavaScript's ``Math.round`` does (the reference's N)."""
    return math.floor(x + 0.5)


def loader_text(
    attempt: int, max_attempts: int, remaining_ms: float, *, delay_ms: float | None = None
) -> str:
    """R-46: ``Retrying (2/3) in 4s… (esc to cancel)``; once the wait is over and the
    re-attempt is in flight, ``Retrying (2/3)… (esc to cancel)``.

    N starts at R-46's ``round(delayMs / 1000)`` (``delay_ms``; ``remaining_ms`` when
    not given) and then counts down *rounded up*, so it never reads "in 0s" while
    there is still a wait: N = max(1, min(round(delay), ceil(remaining))). The one
    place this differs from the letter of R-46 is a delay under half a second, which
    shows "in 1s" rather than "in 0s".
    """
    if remaining_ms <= 0:
        return f"Retrying ({attempt}/{max_attempts})… (esc to cancel)"
    start = remaining_ms if delay_ms is None else delay_ms
    seconds = max(1, min(js_round(start / 1000), math.ceil(remaining_ms / 1000)))
    return f"Retrying ({attempt}/{max_attempts}) in {seconds}s… (esc to cancel)"


@define(eq=False)
class EventController:
    """Turns session events into UI state and owns the Esc binding.

    Args:
        abort_retry: what Esc does during a retry (``session.abort_retry``).
        esc: what Esc does otherwise (typically: abort the running prompt).
    """

    abort_retry: EscHandler
    esc: EscHandler
    status: str | None = None
    busy: bool = False
    _saved_esc: EscHandler | None = attrs.field(default=None, init=False)
    _retry: AutoRetryStart | None = attrs.field(default=None, init=False)
    _retry_started_at: float = attrs.field(default=0.0, init=False)
    _retries_this_prompt: int = attrs.field(default=0, init=False)
    _compacting: bool = attrs.field(default=False, init=False)
    _summary_retry: SummarizationRetryScheduled | None = attrs.field(default=None, init=False)
    _summary_retry_at: float = attrs.field(default=0.0, init=False)
    #: The rate-limit wait going on (R-69), and when it began.
    _rate_wait: tuple[RateLimitWaitStart, float] | None = attrs.field(default=None, init=False)
    #: The name of the tool that runs (its output shows above: ``_tool_view``).
    _tool: str | None = attrs.field(default=None, init=False)

    @property
    def retrying(self) -> bool:
        """Whether a retry loader is showing."""
        return self._retry is not None

    def press_esc(self) -> None:
        """Esc was pressed: call whatever it is bound to now."""
        self.esc()

    def loader_text(self, now: float) -> str | None:
        """The loader line at time ``now`` (seconds, same clock as ``handle``)."""
        if self._rate_wait is not None:
            wait, since = self._rate_wait
            if wait.delay_ms is None:
                return "Waiting for the rate limit… (esc to cancel)"
            seconds = max(1, math.ceil(wait.delay_ms / 1000 - (now - since)))
            return f"Waiting for the rate limit ({seconds}s)… (esc to cancel)"
        if self._retry is not None:
            elapsed_ms = (now - self._retry_started_at) * 1000
            retry = self._retry
            return loader_text(
                retry.attempt,
                retry.max_attempts,
                retry.delay_ms - elapsed_ms,
                delay_ms=retry.delay_ms,
            )
        summary = self._summary_retry
        if summary is not None:
            elapsed_ms = (now - self._summary_retry_at) * 1000
            return loader_text(
                summary.attempt,
                summary.max_attempts,
                summary.delay_ms - elapsed_ms,
                delay_ms=summary.delay_ms,
            )
        if self._compacting:
            return "Compacting the conversation…"
        if self._tool is not None:
            return f"running {self._tool}… (esc to abort)"
        return None

    def spinner(self, now: float) -> str:
        """A spinner frame for time ``now`` (10 frames a second)."""
        return SPINNER[int(now * 10) % len(SPINNER)]

    def handle(self, event: SessionEvent, now: float) -> None:
        """Update the state for one event that arrived at time ``now``."""
        if isinstance(event, AutoRetryStart):
            if self._retry is None and self._saved_esc is None:
                self._saved_esc = self.esc  # once per chain
            self.esc = self.abort_retry
            self._retry = event
            self._retry_started_at = now
            self._retries_this_prompt = max(self._retries_this_prompt, event.attempt)
            self.status = None
        elif isinstance(event, AutoRetryEnd):
            if self._saved_esc is not None:
                self.esc = self._saved_esc
                self._saved_esc = None
            self._retry = None
            if not event.success:
                self.status = f"Retry failed after {event.attempt} attempts: {event.final_error}"
        elif isinstance(event, RateLimitWaitStart):
            self._rate_wait = (event, now)
        elif isinstance(event, RateLimitWaitEnd):
            self._rate_wait = None
        elif isinstance(event, CompactionStart):
            self._compacting = True
        elif isinstance(event, CompactionEnd):
            self._compacting = False
            self._summary_retry = None
        elif isinstance(event, SummarizationRetryScheduled):
            self._summary_retry = event
            self._summary_retry_at = now
        elif isinstance(event, SummarizationRetryAttemptStart | SummarizationRetryFinished):
            self._summary_retry = None
        elif isinstance(event, MessageEnd) and isinstance(event.message, UserMessage):
            self._retries_this_prompt = 0
            self.status = None
        elif isinstance(event, ToolExecutionStart):
            self._tool = event.tool_name
        elif isinstance(event, ToolExecutionEnd):
            self._tool = None
        elif isinstance(event, AgentStart):
            self.busy = True
        elif isinstance(event, AgentEnd):
            self._tool = None
            self.busy = event.will_retry
            last = event.messages[-1] if event.messages else None
            aborted = isinstance(last, AssistantMessage) and last.stop_reason == "aborted"
            if aborted and self._retry is None and self.status is None:
                n = self._retries_this_prompt
                self.status = f"Aborted after {n} retry attempt(s)" if n else "Aborted"
