"""Session events: what subscribers, extensions, RPC clients and the UI see (SPEC §8).

Every event is a frozen value with a ``type`` field spelled as in the reference
(``auto_retry_start``, ``message_end`` …). Field names are snake_case in Python;
``trio_session.event_to_json`` produces the reference's camelCase objects
(``maxAttempts``, ``delayMs``, ``finalError``, ``willRetry``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ._messages import AssistantMessage, Message, ToolResultMessage


@attrs.frozen
class AgentStart:
    """An agent run began (a prompt, a retry re-attempt, or a continuation)."""

    type: Literal["agent_start"] = "agent_start"


@attrs.frozen
class TurnStart:
    """One model request and its tool calls began."""

    type: Literal["turn_start"] = "turn_start"


@attrs.frozen
class MessageStart:
    """A message entered the conversation (user, assistant or tool result)."""

    message: Message
    type: Literal["message_start"] = "message_start"


def _text_delta(update: MessageUpdate) -> Mapping[str, Any]:
    return {"type": "text_delta", "delta": update.delta}


@attrs.frozen
class MessageUpdate:
    """The streaming assistant message grew by ``delta``.

    ``assistant_message_event`` repeats the delta in the reference's shape
    (``{"type": "text_delta", "delta": …}``) so its clients read streamed text as
    they always have.
    """

    message: AssistantMessage
    delta: str
    assistant_message_event: Mapping[str, Any] = attrs.field(
        default=attrs.Factory(_text_delta, takes_self=True)
    )
    type: Literal["message_update"] = "message_update"


@attrs.frozen
class MessageEnd:
    """A message is complete; for the assistant, ``stop_reason`` is now final."""

    message: Message
    type: Literal["message_end"] = "message_end"


@attrs.frozen
class ToolExecutionStart:
    """A tool call is about to run."""

    tool_call_id: str
    tool_name: str
    args: Mapping[str, Any] = attrs.field(factory=dict)
    type: Literal["tool_execution_start"] = "tool_execution_start"


@attrs.frozen
class ToolExecutionEnd:
    """A tool call finished (``is_error`` when it raised or was aborted)."""

    tool_call_id: str
    tool_name: str
    result: str
    is_error: bool = False
    type: Literal["tool_execution_end"] = "tool_execution_end"


@attrs.frozen
class TurnEnd:
    """A turn ended: the assistant message and the tool results it produced."""

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...] = ()
    type: Literal["turn_end"] = "turn_end"


@attrs.frozen
class AgentEnd:
    """An agent run ended.

    ``will_retry`` (R-45a) is true when the session is about to continue this
    logical run — a retry chain or an overflow compaction follows, and an
    ``auto_retry_*`` or ``auto_compaction_end`` event settles it. Consumers that
    show "idle" or notify the user should wait for an ``agent_end`` with
    ``will_retry`` false.
    """

    messages: tuple[Message, ...] = ()
    will_retry: bool = False
    type: Literal["agent_end"] = "agent_end"


@attrs.frozen
class AutoRetryStart:
    """A retryable error ended the run; a re-attempt follows after ``delay_ms`` (R-19)."""

    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str
    type: Literal["auto_retry_start"] = "auto_retry_start"


@attrs.frozen
class AutoRetryEnd:
    """A retry chain ended: succeeded, gave up, or was cancelled (R-15, R-23, R-30).

    ``final_error`` is set only when ``success`` is false.
    """

    success: bool
    attempt: int
    final_error: str | None = None
    type: Literal["auto_retry_end"] = "auto_retry_end"


@attrs.frozen
class CompactionResult:
    """What a compaction did to the runtime context."""

    summary: str
    tokens_before: int
    tokens_after: int
    messages_removed: int


@attrs.frozen
class AutoCompactionStart:
    """Compaction began; ``reason`` is ``"overflow"`` for a context-overflow error (R-50)."""

    reason: Literal["overflow", "threshold"]
    type: Literal["auto_compaction_start"] = "auto_compaction_start"


@attrs.frozen
class AutoCompactionEnd:
    """Compaction ended; ``will_retry`` says whether the run continues once more."""

    result: CompactionResult | None
    aborted: bool
    will_retry: bool
    type: Literal["auto_compaction_end"] = "auto_compaction_end"


@attrs.frozen
class ExtensionError:
    """An extension's handler raised, or ran past its time bound; the session went on.

    Attributes:
        extension: the extension's name (its module or entry-point name).
        event: the ``type`` of the event the handler was given.
        error: what went wrong, e.g. ``"ValueError: bad"`` or
            ``"handler did not finish within 5.0 s"``.
    """

    extension: str
    event: str
    error: str
    type: Literal["extension_error"] = "extension_error"


@attrs.frozen
class HistoryWriteFailed:
    """The session file could not be written (a full disk, a file-size limit …).

    The prompt ends at once — no request is sent with a context that is not on
    disk — and ``AgentSession.prompt`` raises the
    ``trio_session.HistoryError``. The entries that were not written stay
    staged in memory and are written by the next successful flush; nothing
    already in the file is changed.

    Attributes:
        path: the session file.
        error: what went wrong, e.g. ``"cannot write session file …: No space left on device"``.
    """

    path: str
    error: str
    type: Literal["history_write_failed"] = "history_write_failed"


AgentEvent: TypeAlias = (
    AgentStart
    | TurnStart
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionEnd
    | TurnEnd
    | AgentEnd
)
SessionEvent: TypeAlias = (
    AgentEvent
    | AutoRetryStart
    | AutoRetryEnd
    | AutoCompactionStart
    | AutoCompactionEnd
    | ExtensionError
    | HistoryWriteFailed
)

EVENT_TYPES: tuple[type[SessionEvent], ...] = (
    AgentStart,
    TurnStart,
    MessageStart,
    MessageUpdate,
    MessageEnd,
    ToolExecutionStart,
    ToolExecutionEnd,
    TurnEnd,
    AgentEnd,
    AutoRetryStart,
    AutoRetryEnd,
    AutoCompactionStart,
    AutoCompactionEnd,
    ExtensionError,
    HistoryWriteFailed,
)
