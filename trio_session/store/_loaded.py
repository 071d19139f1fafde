"""A session file as read: its entries as a tree, and the contexts rebuilt from a branch.

``LoadedSession`` is what ``load_session`` returns; ``session_context`` and
``runtime_context`` rebuild, from one of its branches, the conversation the reference
would show and the context the model is sent next (R-20).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .._core.classes import frozen
from .._core.codec import message_from_json, message_to_json
from .._core.errors import CodecError
from .._core.messages import (
    AssistantMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    ToolResultMessage,
    UserMessage,
)
from ._entries import (
    CompactionEntry,
    ContextEditEntry,
    HistoryEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    SettingsChangeEntry,
    ThinkingLevelChangeEntry,
    entry_message,
    epoch_ms,
)


@frozen
class LoadedSession:
    """What ``load_session`` read.

    Attributes:
        path: the session file.
        header: its first line (``version`` is the current one after a migration).
        entries: every entry that could be read, in file order.
        warnings: one line per thing skipped or odd, each starting ``<path>:<line>:``.
        size: bytes read.
        torn_bytes: length of an incomplete last line that was skipped (0 if none).
        unterminated: the last line is complete but has no newline after it.
        raw: each entry's JSON object as read (after migration), by entry id: what a
            fork or clone copies, so fields this version does not model survive.
        migrated_from: the file's format version if it was older than the current
            one and was migrated in memory (``SessionFile.resume`` rewrites it).
    """

    path: Path
    header: SessionHeader
    entries: tuple[HistoryEntry, ...]
    warnings: tuple[str, ...] = ()
    size: int = 0
    torn_bytes: int = 0
    unterminated: bool = False
    raw: Mapping[str, dict[str, Any]] = attrs.field(factory=dict, eq=False, repr=False)
    migrated_from: int | None = None
    _made: dict[str, Message] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    def message_of(self, entry: HistoryEntry) -> Message | None:
        """What an entry puts into the context, as the reference converts it; else ``None``.

        A message entry gives its message; a ``custom_message`` a ``CustomMessage``; a
        ``branch_summary`` with a summary a ``BranchSummaryMessage`` (the same object
        every time, so a ``SessionFile`` can tell which entry a context message came from).

        Args:
            entry: an entry of this file.
        """
        if isinstance(entry, MessageEntry):
            return entry.message
        made = self._made.get(entry.id)
        if made is None:
            made = entry_message(entry)
            if made is not None:
                self._made[entry.id] = made
        return made

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every message entry in the file, in file order, all branches included (R-51)."""
        return tuple(e.message for e in self.entries if isinstance(e, MessageEntry))

    @property
    def last_entry_id(self) -> str | None:
        """The id of the last entry, which the next entry names as its parent."""
        return self.entries[-1].id if self.entries else None

    @property
    def leaf_id(self) -> str | None:
        """The current position in the tree: the last entry, as the reference resumes."""
        return self.last_entry_id

    def entry(self, entry_id: str) -> HistoryEntry | None:
        """The entry with this id, if the file has one.

        Args:
            entry_id: the entry's id.
        """
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        return None

    def branch(self, leaf_id: str | None = None) -> tuple[HistoryEntry, ...]:
        """The entries from the root to ``leaf_id`` (the leaf if omitted), in order.

        The reference's ``getBranch``: every entry type is included. Empty if
        ``leaf_id`` names no entry.

        Args:
            leaf_id: the last entry of the branch; the file's leaf if ``None``.
        """
        by_id = {e.id: e for e in self.entries}
        start = leaf_id if leaf_id is not None else self.leaf_id
        path: list[HistoryEntry] = []
        current = by_id.get(start) if start is not None else None
        seen: set[str] = set()
        while current is not None and current.id not in seen:
            seen.add(current.id)
            path.append(current)
            current = by_id.get(current.parent_id) if current.parent_id is not None else None
        path.reverse()
        return tuple(path)

    @property
    def branch_messages(self) -> tuple[Message, ...]:
        """The messages on the current branch, failed attempts included: the session's history."""
        return tuple(e.message for e in self.branch() if isinstance(e, MessageEntry))

    @property
    def thinking_level(self) -> str:
        """The last ``thinking_level_change`` on the branch; ``"off"`` if none."""
        level = "off"
        for entry in self.branch():
            if isinstance(entry, ThinkingLevelChangeEntry):
                level = entry.thinking_level
        return level

    @property
    def model(self) -> tuple[str, str] | None:
        """``(provider, model_id)`` last used on the branch (a model change or an answer)."""
        model: tuple[str, str] | None = None
        for entry in self.branch():
            if isinstance(entry, ModelChangeEntry):
                model = (entry.provider, entry.model_id)
            elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
                model = (entry.message.provider, entry.message.model)
        return model

    @property
    def session_name(self) -> str | None:
        """The name of the last ``session_info`` entry of the file (trimmed); ``None`` if unset."""
        for entry in reversed(self.entries):
            if isinstance(entry, SessionInfoEntry):
                return (entry.name or "").strip() or None
        return None

    def user_messages(self) -> list[tuple[str, str]]:
        """``(entry id, text)`` of every user message with text, in file order.

        The reference's ``getUserMessagesForForking``: what ``fork`` can start before.
        """
        return [
            (e.id, e.message.text)
            for e in self.entries
            if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage) and e.message.text
        ]

    def settings_changes(self) -> dict[str, Any]:
        """The last value of each key set by ``settings_change`` entries on the branch."""
        changes: dict[str, Any] = {}
        for entry in self.branch():
            if isinstance(entry, SettingsChangeEntry):
                changes[entry.key] = entry.value
        return changes


# -- the contexts -----------------------------------------------------------------------


def session_context(loaded: LoadedSession, leaf_id: str | None = None) -> list[Message]:
    """The conversation of a branch as the reference rebuilds it (its ``buildSessionContext``).

    Follow the tree from ``leaf_id`` (the file's leaf, its last entry, if omitted) to
    the root. Without a compaction on that path, every message, custom message
    (``CustomMessage``) and branch summary (``BranchSummaryMessage``) on it, in
    order. With one, the last compaction's summary first (a
    ``CompactionSummaryMessage``), then those of the path from its
    ``firstKeptEntryId`` up to the compaction, then those after it.

    pi 1.6.0's ``context_edit`` entries are applied as pi applies them: the latest edit
    of each selected entry drops it (``replacement`` ``None``, which pi writes for a
    failed attempt it retried) or replaces its content. Its ``system`` message entries
    (``SystemMessageEntry``) and a compaction's ``system_message`` are its system
    prompt, not messages of ours, so they are not in this list.

    Nothing else is dropped for retries here: see ``runtime_context``.

    Args:
        loaded: what ``load_session`` read.
        leaf_id: the last entry of the branch; the file's leaf if omitted.
    """
    path = loaded.branch(leaf_id)
    compaction: CompactionEntry | None = None
    at = -1
    for index, entry in enumerate(path):
        if isinstance(entry, CompactionEntry):
            compaction, at = entry, index
    if compaction is None:
        kept: list[HistoryEntry] = list(path)
        messages: list[Message] = []
    else:
        summary = CompactionSummaryMessage(
            compaction.summary,
            tokens_before=compaction.tokens_before,
            timestamp=epoch_ms(compaction.timestamp),
        )
        messages = [summary]
        ids = [e.id for e in path[:at]]
        first = compaction.first_kept_entry_id
        start = ids.index(first) if first in ids else at
        kept = [*path[start:at], *path[at + 1 :]]
    # pi 1.6.0's context edits: the latest one of each target among the selected entries.
    edits = {e.target_id: e for e in kept if isinstance(e, ContextEditEntry)}
    for entry in kept:
        message = loaded.message_of(entry)
        edit = edits.get(entry.id)
        if message is not None and edit is not None:
            message = _edited(message, edit)
        if message is not None:
            messages.append(message)
    return messages


def _edited(message: Message, edit: ContextEditEntry) -> Message | None:
    """``message`` as a ``context_edit`` leaves it: gone, or with its content replaced
    (a string is one text part for an assistant or tool result, as pi normalizes it)."""
    if edit.replacement is None:
        return None
    if not isinstance(message, UserMessage | AssistantMessage | ToolResultMessage | CustomMessage):
        return message
    content = edit.replacement.get("content")
    if isinstance(message, AssistantMessage | ToolResultMessage) and isinstance(content, str):
        content = [{"type": "text", "text": content}]
    try:
        return message_from_json({**message_to_json(message), "content": content})
    except CodecError:
        return message  # a replacement we cannot read changes nothing


def _retried(messages: list[Message], index: int) -> bool:
    """Whether another assistant message follows ``index`` before the next user message."""
    for later in messages[index + 1 :]:
        if isinstance(later, UserMessage):
            return False
        if isinstance(later, AssistantMessage):
            return True
    return False


def runtime_context(loaded: LoadedSession, leaf_id: str | None = None) -> list[Message]:
    """Rebuild the runtime context for a resumed session (R-20, R-51).

    ``session_context`` — the branch ending at the leaf, compactions and branch
    summaries applied as the reference applies them — with retried failures taken
    out: an assistant message that ended in ``error`` or ``aborted`` and is
    followed by another assistant message before the next user message was
    retried (or, for an overflow, compacted and continued); the live session
    removed it when the retry started (R-20), so it is dropped here too. The last
    failure of a turn stays, as it stayed live after a chain gave up (R-15a) or
    ended on a non-retryable error (R-25); it is never sent to the model anyway
    (R-20a).

    The file is not changed: the history keeps every error (R-51).

    Two cases differ from the live session, because the file cannot tell them
    apart from a chain that gave up: a retry cancelled during its backoff sleep
    (R-30), and an overflow error whose compaction found nothing to drop. Live,
    the error had already left the runtime context; here it is the last message
    of its turn and stays. Either way it is never sent to the model (R-20a).

    Args:
        loaded: what ``load_session`` read.
        leaf_id: the last entry of the branch; the file's leaf if omitted.
    """
    messages = session_context(loaded, leaf_id)
    return [
        message
        for i, message in enumerate(messages)
        if not (isinstance(message, AssistantMessage) and message.failed and _retried(messages, i))
    ]
