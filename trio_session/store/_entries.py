"""The records of a session file: its header, each entry type, and their JSON lines.

The shape is the reference's ("pi") session file, version 3 (see ``._history`` for the
format); ``encode_record`` and ``dump_line`` write one record as one line.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeAlias

import attrs

from .._core.classes import frozen
from .._core.codec import to_json
from .._core.errors import HistoryError as HistoryError
from .._core.messages import (
    BranchSummaryMessage,
    CustomMessage,
    Message,
    UserContent,
)

#: The format version this module writes: the reference's current one.
SESSION_VERSION = 3
#: The oldest version it reads (version 1 and 2 files are migrated on read).
OLDEST_READABLE_VERSION = 1
SUFFIX = ".jsonl"
#: The largest session file read, in bytes (512 MiB: pi, whose reader makes one
#: JavaScript string of the file, cannot read a larger one either).
MAX_SESSION_FILE_BYTES = 512 << 20


# -- the records ------------------------------------------------------------------------


@frozen(kw_only=True)
class SessionHeader:
    """The first line of a session file."""

    version: int = SESSION_VERSION
    id: str
    timestamp: str
    cwd: str
    parent_session: str | None = None
    type: Literal["session"] = "session"


@frozen(kw_only=True)
class MessageEntry:
    """A message of the conversation, failed attempts included."""

    id: str
    parent_id: str | None
    timestamp: str
    message: Message
    type: Literal["message"] = "message"


@frozen(kw_only=True)
class CompactionEntry:
    """A compaction: the summary stands for what came before ``first_kept_entry_id``.

    On resume the context is the summary (a ``CompactionSummaryMessage``), then
    the branch's messages from ``first_kept_entry_id`` up to this entry, then the
    ones after it (the reference's ``buildSessionContext``). ``first_kept_entry_id``
    is ``None`` when nothing before the compaction was kept. ``details`` and
    ``from_hook`` are the reference's optional fields; it writes no ``tokensAfter``
    / ``messagesRemoved`` (ours), which are then ``None``. pi 1.6.0 adds
    ``system_message`` (its system prompt and tools at the compaction, as its JSON
    object) and ``usage`` (the summary request's); we read both and write neither.
    """

    id: str
    parent_id: str | None
    timestamp: str
    summary: str
    tokens_before: int
    tokens_after: int | None = None
    messages_removed: int | None = None
    first_kept_entry_id: str | None
    details: Any = None
    from_hook: bool | None = None
    system_message: dict[str, Any] | None = None
    usage: Any = None
    type: Literal["compaction"] = "compaction"


@frozen(kw_only=True)
class SettingsChangeEntry:
    """A programmatic settings change made during the session (``retry.enabled`` …)."""

    id: str
    parent_id: str | None
    timestamp: str
    key: str
    value: Any
    type: Literal["settings_change"] = "settings_change"


@frozen(kw_only=True)
class ModelChangeEntry:
    """The session switched to another model (the reference's ``model_change``)."""

    id: str
    parent_id: str | None
    timestamp: str
    provider: str
    model_id: str
    type: Literal["model_change"] = "model_change"


@frozen(kw_only=True)
class ThinkingLevelChangeEntry:
    """The thinking level changed (the reference's ``thinking_level_change``)."""

    id: str
    parent_id: str | None
    timestamp: str
    thinking_level: str
    type: Literal["thinking_level_change"] = "thinking_level_change"


@frozen(kw_only=True)
class SessionInfoEntry:
    """The session's display name was set (the reference's ``session_info``)."""

    id: str
    parent_id: str | None
    timestamp: str
    name: str | None = None
    type: Literal["session_info"] = "session_info"


def _content(value: Any) -> str | tuple[UserContent, ...]:
    return value if isinstance(value, str) else tuple(value)


@frozen(kw_only=True)
class BranchSummaryEntry:
    """A summary of the branch the conversation came back from (the reference's ``branch_summary``).

    It reaches the context as a ``BranchSummaryMessage``.
    """

    id: str
    parent_id: str | None
    timestamp: str
    from_id: str
    summary: str
    details: Any = None
    from_hook: bool | None = None
    type: Literal["branch_summary"] = "branch_summary"


@frozen(kw_only=True)
class CustomEntry:
    """An extension's saved state (the reference's ``custom``); not part of the context."""

    id: str
    parent_id: str | None
    timestamp: str
    custom_type: str
    data: Any = None
    type: Literal["custom"] = "custom"


@frozen(kw_only=True)
class CustomMessageEntry:
    """A message an extension put into the context (the reference's ``custom_message``).

    It reaches the context as a ``CustomMessage``.
    """

    id: str
    parent_id: str | None
    timestamp: str
    custom_type: str
    content: str | tuple[UserContent, ...] = attrs.field(converter=_content)
    display: bool
    details: Any = None
    type: Literal["custom_message"] = "custom_message"


@frozen(kw_only=True)
class LabelEntry:
    """A bookmark on an entry (the reference's ``label``); ``None`` clears it."""

    id: str
    parent_id: str | None
    timestamp: str
    target_id: str
    label: str | None = None
    type: Literal["label"] = "label"


@frozen(kw_only=True)
class SystemMessageEntry:
    """pi 1.6.0's system prompt as a message entry (``message`` with role ``system``).

    pi stores its prompt sections and tool declarations this way (the first request's
    whole prompt, then patches). Ours come from the session's settings, so it plays no
    part in our context; it is kept whole, as its JSON object in ``message``.
    """

    id: str
    parent_id: str | None
    timestamp: str
    message: dict[str, Any] = attrs.field(eq=False, repr=False)
    type: Literal["message"] = "message"


@frozen(kw_only=True)
class ContextEditEntry:
    """pi 1.6.0's edit of one earlier entry's part in later context (``context_edit``).

    ``replacement`` ``None`` leaves the target (a message or custom message entry) out
    of the context; ``{"content": ...}`` replaces its content. The target itself is not
    changed, and the latest edit of a target on the branch wins. pi writes one to drop
    a failed attempt that was retried.
    """

    id: str
    parent_id: str | None
    timestamp: str
    target_id: str
    replacement: dict[str, Any] | None = None
    type: Literal["context_edit"] = "context_edit"


@frozen(kw_only=True)
class OtherEntry:
    """An entry of a type this version does not know (a newer writer's, an extension's).

    It is kept, with its JSON object in ``data``, and plays no part in the runtime context.
    """

    id: str
    parent_id: str | None
    timestamp: str
    type: str
    data: dict[str, Any] = attrs.field(eq=False, repr=False)


HistoryEntry: TypeAlias = (
    MessageEntry
    | CompactionEntry
    | SettingsChangeEntry
    | ModelChangeEntry
    | ThinkingLevelChangeEntry
    | SessionInfoEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SystemMessageEntry
    | ContextEditEntry
    | OtherEntry
)

ENTRY_TYPES: dict[str, type[Any]] = {
    "message": MessageEntry,
    "compaction": CompactionEntry,
    "settings_change": SettingsChangeEntry,
    "model_change": ModelChangeEntry,
    "thinking_level_change": ThinkingLevelChangeEntry,
    "session_info": SessionInfoEntry,
    "branch_summary": BranchSummaryEntry,
    "custom": CustomEntry,
    "custom_message": CustomMessageEntry,
    "label": LabelEntry,
    "context_edit": ContextEditEntry,
}


# -- encoding ---------------------------------------------------------------------------


def iso_time(epoch: float) -> str:
    """``2025-06-01T09:30:00.123Z``: UTC with milliseconds, as JavaScript's ``toISOString``."""
    moment = datetime.fromtimestamp(epoch, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def encode_record(record: SessionHeader | HistoryEntry) -> dict[str, Any]:
    """The record as the file's JSON object; ``parentId`` is written even when null."""
    data: dict[str, Any] = to_json(record)
    if isinstance(record, SessionHeader):
        return data
    if isinstance(record, SettingsChangeEntry):
        data["value"] = to_json(record.value)  # null is a value here (retry.maxDelayMs)
    if isinstance(record, ContextEditEntry):
        data["replacement"] = to_json(record.replacement)  # null: left out of context
    ordered = {"type": data.pop("type"), "id": data.pop("id"), "parentId": record.parent_id}
    data.pop("parentId", None)
    ordered.update(data)
    return ordered


def dump_line(data: dict[str, Any]) -> bytes:
    """One line of the file, newline included."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: let JSON escape it
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
        return text.encode("ascii") + b"\n"


# -- what an entry adds to the context ----------------------------------------------


def epoch_ms(timestamp: str) -> int:
    """An entry's ISO timestamp in epoch milliseconds (as JavaScript's ``Date``); 0 if bad."""
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def entry_message(entry: HistoryEntry) -> Message | None:
    """What a custom message or branch summary entry contributes to the context."""
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(
            entry.custom_type,
            entry.content,
            display=entry.display,
            details=entry.details,
            timestamp=epoch_ms(entry.timestamp),
        )
    if isinstance(entry, BranchSummaryEntry) and entry.summary:
        return BranchSummaryMessage(
            entry.summary, entry.from_id, timestamp=epoch_ms(entry.timestamp)
        )
    return None
