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

from .classes import frozen

# pi 1.6.0's events live in events_pi16.py (this file's size); they are named here too.
from .events_pi16 import AgentSettled as AgentSettled
from .events_pi16 import CompactionReason as CompactionReason
from .events_pi16 import EntryAppended as EntryAppended
from .events_pi16 import SummarizationRetryAttemptStart as SummarizationRetryAttemptStart
from .events_pi16 import SummarizationRetryFinished as SummarizationRetryFinished
from .events_pi16 import SummarizationRetryScheduled as SummarizationRetryScheduled
from .events_pi16 import SummarySource as SummarySource
from .messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolResultMessage,
    Usage,
)

# The streaming views a message_update carries live in _partial; named here too.
from .partial import GrowingPart as GrowingPart
from .partial import PartialMessage as PartialMessage
from .partial import StreamEvent as StreamEvent


@frozen
class AgentStart:
    """An agent run began (a prompt, a retry re-attempt, or a continuation).

    Attributes:
        type: always ``"agent_start"``; the event's name on the wire.
    """

    type: Literal["agent_start"] = "agent_start"


@frozen
class TurnStart:
    """One model request and its tool calls began.

    Attributes:
        type: always ``"turn_start"``; the event's name on the wire.
    """

    type: Literal["turn_start"] = "turn_start"


@frozen
class MessageStart:
    """A message entered the conversation (user, assistant or tool result).

    Attributes:
        message: the message, as it entered the conversation.
        type: always ``"message_start"``; the event's name on the wire.
    """

    message: Message
    type: Literal["message_start"] = "message_start"


def _text_delta(update: MessageUpdate) -> Mapping[str, Any]:
    return {"type": "text_delta", "contentIndex": 0, "delta": update.delta}


def _as_message(message: AssistantMessage | PartialMessage) -> AssistantMessage:
    return message if isinstance(message, AssistantMessage) else message.message


@frozen(repr=False)
class MessageUpdate:
    """The streaming assistant message changed.

    ``assistant_message_event`` is the reference's stream event, as its clients
    read it: ``{"type": "text_start" | "text_delta" | "text_end" | "thinking_*" |
    "toolcall_start" | "toolcall_delta" | "toolcall_end", "contentIndex": i,
    "partial": <the message so far>}``, with ``delta`` on the ``*_delta`` kinds,
    ``content`` on ``text_end`` / ``thinking_end``, ``id`` and ``toolName`` on
    ``toolcall_start`` (pi 1.6.0's) and ``toolCall`` on ``toolcall_end``. ``delta``
    repeats the text a ``text_delta`` added (empty for the other kinds), for our own
    consumers that only append text.

    ``message`` is an ``AssistantMessage``. The agent passes a ``PartialMessage``
    instead, so that a chunk costs the same however long the answer already is:
    ``message`` (and ``"partial"``) is then made when first read — the same value
    it would have been, and later chunks never change it. A consumer that only
    appends ``delta`` never pays for it.

    Attributes:
        message: the assistant message so far: an ``AssistantMessage``, or the ``PartialMessage``
            view the agent passes (read back as the message).
        delta: the text a ``text_delta`` added; empty for the other kinds.
        assistant_message_event: the reference's stream event, as above; by default a
            ``text_delta`` at content index 0 carrying ``delta``.
        type: always ``"message_update"``; the event's name on the wire.
    """

    _message: AssistantMessage | PartialMessage = attrs.field(alias="message", eq=_as_message)
    delta: str
    assistant_message_event: Mapping[str, Any] = attrs.field(
        default=attrs.Factory(_text_delta, takes_self=True)
    )
    type: Literal["message_update"] = "message_update"

    @property
    def message(self) -> AssistantMessage:
        """The whole message so far."""
        return _as_message(self._message)

    def __repr__(self) -> str:
        return (
            f"MessageUpdate(message={self.message!r}, delta={self.delta!r}, "
            f"assistant_message_event={self.assistant_message_event!r}, type={self.type!r})"
        )


@frozen
class MessageEnd:
    """A message is complete; for the assistant, ``stop_reason`` is now final.

    Attributes:
        message: the complete message.
        type: always ``"message_end"``; the event's name on the wire.
    """

    message: Message
    type: Literal["message_end"] = "message_end"


@frozen
class ToolExecutionStart:
    """A tool call is about to run.

    Attributes:
        tool_call_id: the id of the tool call (the ``ToolCall.id`` the model gave).
        tool_name: the tool's name.
        args: the arguments the model passed.
        type: always ``"tool_execution_start"``; the event's name on the wire.
    """

    tool_call_id: str
    tool_name: str
    args: Mapping[str, Any] = attrs.field(factory=dict)
    type: Literal["tool_execution_start"] = "tool_execution_start"


@frozen
class ToolOutput:
    """What a tool answered, as pi's events carry it: ``{content, details}``.

    Attributes:
        content: the result's parts (text, images).
        details: what the tool adds for a user interface, not sent to the model
            (``{}`` for a failure, as pi's); ``None`` when it adds nothing.
    """

    content: tuple[TextContent | ImageContent, ...] = ()
    details: Mapping[str, Any] | None = None

    @property
    def text(self) -> str:
        """The text of every text part, joined."""
        return "".join(part.text for part in self.content if isinstance(part, TextContent))


def _tool_output(value: ToolOutput | str) -> ToolOutput:
    """A result given as its text is a ``ToolOutput`` of one text part."""
    return ToolOutput((TextContent(value),)) if isinstance(value, str) else value


@frozen
class ToolExecutionUpdate:
    """A running tool reported what it has so far (``bash``: its output), pi's
    ``tool_execution_update``.

    Attributes:
        tool_call_id: the id of the tool call.
        tool_name: the tool's name.
        args: the arguments the model passed.
        partial_result: the output so far, as ``{content, details}`` (``bash``: the tail
            of its output, within 2000 lines and 50 KB).
        type: always ``"tool_execution_update"``; the event's name on the wire.
    """

    tool_call_id: str
    tool_name: str
    args: Mapping[str, Any] = attrs.field(factory=dict)
    partial_result: ToolOutput = attrs.field(factory=lambda: ToolOutput(), converter=_tool_output)
    type: Literal["tool_execution_update"] = "tool_execution_update"


@frozen
class ToolExecutionEnd:
    """A tool call finished (``is_error`` when it raised or was aborted).

    Attributes:
        tool_call_id: the id of the tool call.
        tool_name: the tool's name.
        result: the tool's output, or the error text, as pi's ``{content, details}``
            (given as a string, it is that text).
        is_error: whether the tool raised or was aborted.
        duration_ms: how long the tool ran, in milliseconds (pi 1.6.0's ``durationMs``).
        type: always ``"tool_execution_end"``; the event's name on the wire.
    """

    tool_call_id: str
    tool_name: str
    result: ToolOutput = attrs.field(converter=_tool_output)
    is_error: bool = False
    duration_ms: int | None = None
    type: Literal["tool_execution_end"] = "tool_execution_end"


@frozen
class TurnEnd:
    """A turn ended: the assistant message and the tool results it produced.

    Attributes:
        message: the assistant message of the turn.
        tool_results: the results of the tool calls it made, in order.
        type: always ``"turn_end"``; the event's name on the wire.
    """

    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...] = ()
    type: Literal["turn_end"] = "turn_end"


@frozen
class AgentEnd:
    """An agent run ended.

    ``will_retry`` (R-45a) is true when the session is about to continue this
    logical run — a retry chain or an overflow compaction follows, and an
    ``auto_retry_*`` or ``compaction_end`` event settles it. Consumers that
    show "idle" or notify the user should wait for an ``agent_end`` with
    ``will_retry`` false.

    Attributes:
        messages: the messages the run added to the conversation.
        will_retry: whether the session continues this logical run, as above.
        type: always ``"agent_end"``; the event's name on the wire.
    """

    messages: tuple[Message, ...] = ()
    will_retry: bool = False
    type: Literal["agent_end"] = "agent_end"


@frozen
class AutoRetryStart:
    """A retryable error ended the run; a re-attempt follows after ``delay_ms`` (R-19).

    Attributes:
        attempt: which re-attempt this is, from 1.
        max_attempts: the most re-attempts the policy makes (``retry.maxRetries``).
        delay_ms: the wait before the re-attempt, in milliseconds.
        error_message: the error that ended the run.
        type: always ``"auto_retry_start"``; the event's name on the wire.
    """

    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str
    type: Literal["auto_retry_start"] = "auto_retry_start"


@frozen
class AutoRetryEnd:
    """A retry chain ended: succeeded, gave up, or was cancelled (R-15, R-23, R-30).

    ``final_error`` is set only when ``success`` is false.

    Attributes:
        success: whether a re-attempt succeeded.
        attempt: the number of the last re-attempt.
        final_error: the error the chain ended with, when it failed.
        type: always ``"auto_retry_end"``; the event's name on the wire.
    """

    success: bool
    attempt: int
    final_error: str | None = None
    type: Literal["auto_retry_end"] = "auto_retry_end"


@frozen
class ModelFallback:
    """The prompt moves to the next fallback model (R-65, ours): the retry policy had
    nothing left to try on the one it was on.

    Attributes:
        from_model: the model given up on, as ``"provider/id"``.
        to_model: the model the run continues on, as ``"provider/id"``.
        reason: ``"retries_exhausted"`` (a retry chain gave up on a retryable error) or
            ``"no_key_left"`` (pi-1.6: a usage limit, and no free key, R-53b).
        error_message: the error that ended the last attempt on ``from_model``.
        type: always ``"model_fallback"``; the event's name on the wire.
    """

    from_model: str
    to_model: str
    reason: Literal["retries_exhausted", "no_key_left"]
    error_message: str
    type: Literal["model_fallback"] = "model_fallback"


@frozen
class RateLimitWaitStart:
    """A request waits for its rate-limit permit (R-69, ours): the budget of
    ``rateLimit`` does not hold it yet. ``rate_limit_wait_end`` follows, also when the
    wait is aborted.

    Attributes:
        delay_ms: the wait the budget foresees, in milliseconds; ``None`` when the
            request is queued behind others of the same budget.
        model: the model the request is for, as ``"provider/id"``.
        type: always ``"rate_limit_wait_start"``; the event's name on the wire.
    """

    delay_ms: int | None
    model: str
    type: Literal["rate_limit_wait_start"] = "rate_limit_wait_start"


@frozen
class RateLimitWaitEnd:
    """The wait of ``rate_limit_wait_start`` is over: the permit was taken, or the wait
    was aborted (R-69, ours).

    Attributes:
        model: the model the request is for, as ``"provider/id"``.
        type: always ``"rate_limit_wait_end"``; the event's name on the wire.
    """

    model: str
    type: Literal["rate_limit_wait_end"] = "rate_limit_wait_end"


@frozen
class CompactionResult:
    """What a compaction did to the runtime context.

    On the wire (``compaction_end.result``, the ``compact`` command's data) it has
    the reference's fields — ``summary``, ``tokensBefore``, ``firstKeptEntryId``,
    ``details`` — and two of ours, ``tokensAfter`` and ``messagesRemoved``. Under
    ``retry.profile`` ``"pi-1.6"`` the default compactor adds pi 1.6.0's two,
    ``estimatedTokensAfter`` and ``usage`` (the summary requests').

    Attributes:
        summary: the summary that now stands for the removed messages.
        tokens_before: the estimated size of the context before.
        tokens_after: the estimated size after.
        messages_removed: how many messages left the context.
        first_kept_entry_id: the session-file entry of the first message kept
            (``None`` without a session file, or when none was kept).
        details: compactor-specific data (the reference's ``details``).
        estimated_tokens_after: pi 1.6.0's estimate of the context after (the sum of
            its messages' estimates), when the compactor made one.
        usage: what the summary requests used, added up, when the compactor says.
    """

    summary: str
    tokens_before: int
    tokens_after: int
    messages_removed: int
    first_kept_entry_id: str | None = None
    details: Mapping[str, Any] | None = None
    estimated_tokens_after: int | None = None
    usage: Usage | None = None


@frozen
class CompactionStart:
    """Compaction began (the reference's ``compaction_start``).

    ``reason`` is ``"overflow"`` after a context-overflow error (R-50),
    ``"threshold"`` when the context grew past its limit, ``"manual"`` for
    ``AgentSession.compact``.

    Attributes:
        reason: why compaction began, as above.
        type: always ``"compaction_start"``; the event's name on the wire.
    """

    reason: CompactionReason
    type: Literal["compaction_start"] = "compaction_start"


@frozen
class CompactionEnd:
    """Compaction ended (the reference's ``compaction_end``).

    ``result`` is ``None`` when nothing was compacted; ``aborted`` when it was
    cancelled; ``will_retry`` says whether the run continues once more;
    ``error_message`` says why it failed, when it did.

    Attributes:
        reason: why compaction began (as in ``CompactionStart``).
        result: what the compaction did, or ``None``.
        aborted: whether it was cancelled.
        will_retry: whether the run continues once more.
        error_message: why it failed, when it did.
        type: always ``"compaction_end"``; the event's name on the wire.
    """

    reason: CompactionReason
    result: CompactionResult | None
    aborted: bool
    will_retry: bool
    error_message: str | None = None
    type: Literal["compaction_end"] = "compaction_end"


#: The earlier names of ``CompactionStart`` / ``CompactionEnd`` (the events were
#: ``auto_compaction_start`` / ``auto_compaction_end`` before 0.73.1's names).
AutoCompactionStart = CompactionStart
AutoCompactionEnd = CompactionEnd


# -- queues --------------------------------------------------------------------


@frozen
class QueueUpdate:
    """The steering or follow-up queue changed (the reference's ``queue_update``).

    Sent when a message is queued (``steer``, ``follow_up``), when one leaves the
    queue to be delivered (just before its ``message_start``), and on
    ``clear_queue``. Each tuple holds the texts still waiting, oldest first.

    Attributes:
        steering: the steering messages still waiting.
        follow_up: the follow-up messages still waiting.
        type: always ``"queue_update"``; the event's name on the wire.
    """

    steering: tuple[str, ...] = ()
    follow_up: tuple[str, ...] = ()
    type: Literal["queue_update"] = "queue_update"


# -- session settings -------------------------------------------------------------


@frozen
class ThinkingLevelChanged:
    """The thinking level changed: set, cycled, or clamped by a model switch
    (the reference's ``thinking_level_changed``).

    Attributes:
        level: the new thinking level (``"off"``, ``"low"`` …).
        type: always ``"thinking_level_changed"``; the event's name on the wire.
    """

    level: str
    type: Literal["thinking_level_changed"] = "thinking_level_changed"


@frozen
class SessionInfoChanged:
    """The session's display name was set or cleared (the reference's ``session_info_changed``).

    Attributes:
        name: the new name; ``None`` when it was cleared.
        type: always ``"session_info_changed"``; the event's name on the wire.
    """

    name: str | None = None
    type: Literal["session_info_changed"] = "session_info_changed"


@frozen
class ExtensionError:
    """An extension's handler raised, or ran past its time bound; the session went on.

    On the wire ``{"type": "extension_error", "extensionPath", "event", "error"}``, as
    pi's.

    Attributes:
        extension_path: where the extension came from, as pi's ``extensionPath``: its
            Python file (the module's ``__file__``), else its name.
        event: the ``type`` of the event the handler was given.
        error: what went wrong, e.g. ``"ValueError: bad"`` or
            ``"handler did not finish within 5.0 s"``.
        type: always ``"extension_error"``; the event's name on the wire.
    """

    extension_path: str
    event: str
    error: str
    type: Literal["extension_error"] = "extension_error"

    @property
    def extension(self) -> str:
        """``extension_path``, by its name before issue 41 (it held the extension's name)."""
        return self.extension_path


@frozen
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
        type: always ``"history_write_failed"``; the event's name on the wire.
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
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | TurnEnd
    | AgentEnd
)
SessionEvent: TypeAlias = (
    AgentEvent
    | AgentSettled
    | AutoRetryStart
    | AutoRetryEnd
    | ModelFallback
    | RateLimitWaitStart
    | RateLimitWaitEnd
    | CompactionStart
    | CompactionEnd
    | QueueUpdate
    | ThinkingLevelChanged
    | SessionInfoChanged
    | ExtensionError
    | HistoryWriteFailed
    | SummarizationRetryScheduled
    | SummarizationRetryAttemptStart
    | SummarizationRetryFinished
    | EntryAppended
)
"""Every event a session emits: the agent's (``AgentStart`` … ``AgentEnd``) and the session's
own (``AgentSettled``, ``AutoRetryStart``, ``CompactionStart``, ``QueueUpdate`` …). Each has a
``type`` string, its name on the wire."""

EVENT_TYPES: tuple[type[SessionEvent], ...] = (
    AgentStart,
    TurnStart,
    MessageStart,
    MessageUpdate,
    MessageEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    ToolExecutionEnd,
    TurnEnd,
    AgentEnd,
    AgentSettled,
    AutoRetryStart,
    AutoRetryEnd,
    ModelFallback,
    RateLimitWaitStart,
    RateLimitWaitEnd,
    CompactionStart,
    CompactionEnd,
    QueueUpdate,
    ThinkingLevelChanged,
    SessionInfoChanged,
    ExtensionError,
    HistoryWriteFailed,
    SummarizationRetryScheduled,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    EntryAppended,
)
