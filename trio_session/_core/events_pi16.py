"""The events pi 1.6.0 added that trio_session emits (SPEC R-54, R-56), and the compaction
reason.

Kept beside ``trio_session._core.events`` (which names them in ``SessionEvent`` and
``EVENT_TYPES``) so that neither file grows past its size. Same conventions: frozen
values, a ``type`` spelled as on the wire, camelCase through ``event_to_json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from .classes import frozen

#: Why a compaction runs: on demand, past a threshold, or after an overflow (R-50).
CompactionReason: TypeAlias = Literal["manual", "threshold", "overflow"]


#: What a summary request was for (pi 1.6.0's ``source``).
SummarySource: TypeAlias = Literal["compaction", "branchSummary"]


@frozen
class AgentSettled:
    """A session-level run is over: nothing follows it by itself (pi 1.6.0's ``agent_settled``).

    Emitted exactly once per ``prompt()``, after its last ``agent_end``, once no retry,
    compaction recovery or queued message will continue it, and once the session is
    idle again (R-54). ``agent_end`` closes one low-level run; this closes them all.

    Attributes:
        aborted: whether the run ended because it was aborted (``abort()``, or the
            prompt's caller cancelled it); ``abort_retry`` alone is not an abort.
        type: always ``"agent_settled"``; the event's name on the wire.
    """

    aborted: bool = False
    type: Literal["agent_settled"] = "agent_settled"


@frozen
class SummarizationRetryScheduled:
    """A compaction's summary request failed with a retryable error; it is sent again
    after ``delay_ms`` (pi 1.6.0's ``summarization_retry_scheduled``, R-56f).

    Attributes:
        attempt: which re-attempt this is, from 1.
        max_attempts: the most re-attempts (``retry.maxRetries``).
        delay_ms: the wait before the re-attempt, in milliseconds.
        error_message: the error the summary request ended with.
        type: always ``"summarization_retry_scheduled"``; the event's name on the wire.
    """

    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str
    type: Literal["summarization_retry_scheduled"] = "summarization_retry_scheduled"


@frozen
class SummarizationRetryAttemptStart:
    """The wait is over: the summary request is sent again
    (pi 1.6.0's ``summarization_retry_attempt_start``, R-56f).

    Attributes:
        source: what the summary is for: ``"compaction"`` (or pi's ``"branchSummary"``).
        reason: the compaction's reason; absent for a branch summary.
        type: always ``"summarization_retry_attempt_start"``; the event's name on the wire.
    """

    source: SummarySource = "compaction"
    reason: CompactionReason | None = None
    type: Literal["summarization_retry_attempt_start"] = "summarization_retry_attempt_start"


@frozen
class SummarizationRetryFinished:
    """The summary request's retries are over: it succeeded, failed for good, or was
    cancelled (pi 1.6.0's ``summarization_retry_finished``, which says no more, R-56f).

    Attributes:
        type: always ``"summarization_retry_finished"``; the event's name on the wire.
    """

    type: Literal["summarization_retry_finished"] = "summarization_retry_finished"


@frozen
class EntryAppended:
    """An entry was appended to the session file outside the conversation's messages
    (pi 1.6.0's ``entry_appended``): under ``retry.profile`` ``"pi-1.6"``, the
    ``context_edit`` that leaves a retried failure out of later context (R-56e).

    Attributes:
        entry: the entry as written to the file (``{"type": "context_edit", "id", "parentId",
            "timestamp", "targetId", "replacement": null}``).
        type: always ``"entry_appended"``; the event's name on the wire.
    """

    entry: Mapping[str, Any]
    type: Literal["entry_appended"] = "entry_appended"
