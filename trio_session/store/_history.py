"""Session history: one append-only JSON-lines file per session (R-20, R-51).

The history is what happened; the runtime context is what the model is sent
next. A retried error leaves the runtime context (R-20) but stays here, and
``runtime_context`` rebuilds the runtime context from the file on resume.

Format
------
The shape is the reference's ("pi") session file, version 3, so either tool can
read the other's files. The first line is a header; every other line is one entry
whose ``parentId`` is the id of the entry before it:

```text
{"type":"session","version":3,"id":"5f0c…","timestamp":"2025-06-01T09:30:00.000Z",
 "cwd":"/src/app"}
{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2025-06-01T09:30:01.250Z",
 "message":{"role":"user","content":"Hi","timestamp":1748770201250}}
{"type":"message","id":"e5f60718","parentId":"a1b2c3d4","timestamp":"…",
 "message":{"role":"assistant","content":[],"stopReason":"error",
            "errorMessage":"503 Service Unavailable",…}}
{"type":"compaction","id":"…","parentId":"e5f60718","timestamp":"…","summary":"…",
 "tokensBefore":9000,"tokensAfter":3000,"messagesRemoved":6,"firstKeptEntryId":"…"}
{"type":"settings_change","id":"…","parentId":"…","timestamp":"…",
 "key":"retry.enabled","value":false}
```

(Each record is one line in the file; they are wrapped here.)

Messages are encoded by the package's one JSON codec (``message_to_json``).
Timestamps are ISO-8601 UTC with milliseconds, as JavaScript writes them. Entry
ids are 8 hex digits, unique within the file. Every entry type of the reference
is read and written (``message``, ``model_change``, ``thinking_level_change``,
``compaction``, ``branch_summary``, ``custom``, ``custom_message``, ``label``,
``session_info``), plus our own ``settings_change``; an entry of any other type is
kept as an ``OtherEntry`` (never dropped, also when a file is forked) and plays
no part in the runtime context.

The entries form a tree through ``parentId``; the *leaf* is the last entry of
the file, and the conversation is the path from the root to it (``branch``).
Files of format versions 1 and 2 are migrated on read as the reference does
(ids and parents given to version 1 entries, ``hookMessage`` renamed ``custom``).

Writing
-------
``._session_file.SessionFile`` appends entries durably (write + fsync per
entry, or per batch); see ``._session_file``.

Reading
-------
``load_session`` never loses a complete entry to a broken one: a line that is
not valid JSON, or not a valid entry, is skipped with a warning naming its line
number; an incomplete last line (a crash in the middle of a write) is skipped
with a warning, and ``SessionFile.resume`` cuts it off before appending.
Only a missing or broken header is an error (``HistoryError``). An entry whose
``parentId`` names no earlier entry (its parent was on a skipped line) is
attached to the entry before it, with a warning, so a broken line never cuts
the conversation in two.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs

from .._codec import _decode_attrs, message_from_json, message_to_json, to_json
from .._dirs import user_data_dir
from .._errors import CodecError, TrioSessionError
from .._files import open_regular, read_fd
from .._messages import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    Message,
    ToolResultMessage,
    UserContent,
    UserMessage,
)
from .._text import valid_json_value

#: The format version this module writes: the reference's current one.
SESSION_VERSION = 3
#: The oldest version it reads (version 1 and 2 files are migrated on read).
OLDEST_READABLE_VERSION = 1
SUFFIX = ".jsonl"
#: The largest session file read, in bytes (512 MiB: pi, whose reader makes one
#: JavaScript string of the file, cannot read a larger one either).
MAX_SESSION_FILE_BYTES = 512 << 20
#: How much of a file is read to find its header (``list_sessions``, ``latest_session``).
_HEADER_PEEK_BYTES = 1 << 20


class HistoryError(TrioSessionError):
    """A session file cannot be created, read or written; the message names the file.

    Attributes:
        path: the session file.

    Args:
        message: what went wrong, naming the file.
    """

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


# -- the records ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionHeader:
    """The first line of a session file."""

    version: int = SESSION_VERSION
    id: str
    timestamp: str
    cwd: str
    parent_session: str | None = None
    type: Literal["session"] = "session"


@attrs.frozen(kw_only=True)
class MessageEntry:
    """A message of the conversation, failed attempts included."""

    id: str
    parent_id: str | None
    timestamp: str
    message: Message
    type: Literal["message"] = "message"


@attrs.frozen(kw_only=True)
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


@attrs.frozen(kw_only=True)
class SettingsChangeEntry:
    """A programmatic settings change made during the session (``retry.enabled`` …)."""

    id: str
    parent_id: str | None
    timestamp: str
    key: str
    value: Any
    type: Literal["settings_change"] = "settings_change"


@attrs.frozen(kw_only=True)
class ModelChangeEntry:
    """The session switched to another model (the reference's ``model_change``)."""

    id: str
    parent_id: str | None
    timestamp: str
    provider: str
    model_id: str
    type: Literal["model_change"] = "model_change"


@attrs.frozen(kw_only=True)
class ThinkingLevelChangeEntry:
    """The thinking level changed (the reference's ``thinking_level_change``)."""

    id: str
    parent_id: str | None
    timestamp: str
    thinking_level: str
    type: Literal["thinking_level_change"] = "thinking_level_change"


@attrs.frozen(kw_only=True)
class SessionInfoEntry:
    """The session's display name was set (the reference's ``session_info``)."""

    id: str
    parent_id: str | None
    timestamp: str
    name: str | None = None
    type: Literal["session_info"] = "session_info"


def _content(value: Any) -> str | tuple[UserContent, ...]:
    return value if isinstance(value, str) else tuple(value)


@attrs.frozen(kw_only=True)
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


@attrs.frozen(kw_only=True)
class CustomEntry:
    """An extension's saved state (the reference's ``custom``); not part of the context."""

    id: str
    parent_id: str | None
    timestamp: str
    custom_type: str
    data: Any = None
    type: Literal["custom"] = "custom"


@attrs.frozen(kw_only=True)
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


@attrs.frozen(kw_only=True)
class LabelEntry:
    """A bookmark on an entry (the reference's ``label``); ``None`` clears it."""

    id: str
    parent_id: str | None
    timestamp: str
    target_id: str
    label: str | None = None
    type: Literal["label"] = "label"


@attrs.frozen(kw_only=True)
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


@attrs.frozen(kw_only=True)
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


@attrs.frozen(kw_only=True)
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

_ENTRY_TYPES: dict[str, type[Any]] = {
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


@attrs.frozen
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
            made = _entry_message(entry)
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


# -- encoding ---------------------------------------------------------------------------


def _iso(epoch: float) -> str:
    """``2025-06-01T09:30:00.123Z``: UTC with milliseconds, as JavaScript's ``toISOString``."""
    moment = datetime.fromtimestamp(epoch, UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _encode(record: SessionHeader | HistoryEntry) -> dict[str, Any]:
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


def _dump(data: dict[str, Any]) -> bytes:
    """One line of the file, newline included."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: let JSON escape it
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
        return text.encode("ascii") + b"\n"


# -- reading ----------------------------------------------------------------------------


def load_session(path: str | os.PathLike[str]) -> LoadedSession:
    """Read a session file, skipping what is broken and saying so.

    Only a regular file (or a link to one) of at most ``MAX_SESSION_FILE_BYTES`` is
    read: a named pipe, a device or a directory is refused at once, without waiting
    for a writer or reading without end.

    Blocks on disk I/O; from Trio code, call it with ``trio.to_thread.run_sync``
    (or use ``open_history``).

    Args:
        path: the session file.

    Raises:
        HistoryError: the file cannot be read, is not a regular file, is larger than
            ``MAX_SESSION_FILE_BYTES``, or has no valid session header.
    """
    path = Path(path)
    try:
        fd = open_regular(path, os.O_RDONLY, max_bytes=MAX_SESSION_FILE_BYTES)
    except FileNotFoundError as exc:
        msg = f"session file {path} does not exist"
        raise HistoryError(msg, path=path) from exc
    except OSError as exc:
        msg = f"cannot read session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc
    try:
        return _load_fd(path, fd)
    finally:
        os.close(fd)


def _load_fd(path: Path, fd: int) -> LoadedSession:
    """``load_session`` of a file ``open_regular`` opened for reading (``SessionFile.resume``)."""
    try:
        data = read_fd(fd, path, MAX_SESSION_FILE_BYTES)
    except OSError as exc:
        msg = f"cannot read session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc
    return _parse(path, data)


def _lines(data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number, bytes, terminated)`` for each line; only the last may be unterminated."""
    parts = data.split(b"\n")
    last = parts.pop()
    for number, part in enumerate(parts, 1):
        yield number, part, True
    if last:
        yield len(parts) + 1, last, False


def _json_line(raw: bytes) -> Any:
    """Decode one line; raises ``ValueError`` with a short reason.

    Besides malformed JSON and UTF-8, that covers what a hostile or damaged file
    can hold and ``json`` refuses late: nesting deeper than Python's recursion
    limit, and integers longer than ``sys.get_int_max_str_digits()``.
    """
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):
            raise
        raise ValueError("a number too long to read") from None


def _reason(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {exc.start + 1}"
    return str(exc)


# A JSON escape of a surrogate code point: the only way a lone one gets into a line
# (raw surrogates are not valid UTF-8, and fail to decode).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


_NO_NEWLINE = "no newline at the end of the file; the last line is kept"


def _parse(path: Path, data: bytes) -> LoadedSession:
    lines = [line for line in _lines(data) if line[1].strip()]
    if not lines:
        msg = f"session file {path} is empty: it has no session header"
        raise HistoryError(msg, path=path)
    warnings: list[str] = []
    header, version = _parse_header(path, *lines[0], warnings)
    unterminated = not lines[0][2]  # a header-only file without its newline
    migration = _Migration(version) if version < SESSION_VERSION else None
    entries: list[HistoryEntry] = []
    raw: dict[str, dict[str, Any]] = {}
    seen: dict[str, int] = {}
    torn_bytes = 0
    tail = data[data.rfind(b"\n") + 1 :]
    if tail and not tail.strip():
        torn_bytes = len(tail)  # blanks after the last newline: nothing to keep
    for number, raw_line, terminated in lines[1:]:
        where = f"{path}:{number}"
        try:
            obj = _json_line(raw_line)
        except ValueError as exc:
            if terminated:
                warnings.append(f"{where}: not valid JSON ({_reason(exc)}); skipped")
            else:
                torn_bytes = len(raw_line)
                warnings.append(
                    f"{where}: incomplete last line ({len(raw_line)} bytes, no newline at the "
                    "end), probably cut off by a crash while writing; skipped"
                )
            continue
        if not terminated:
            unterminated = True
            warnings.append(f"{where}: {_NO_NEWLINE}")
        if migration is not None and isinstance(obj, dict):
            migration.apply(obj)
        repair = _SURROGATE_ESCAPE.search(raw_line) is not None
        entry = _parse_entry(where, obj, warnings, repair=repair)
        if entry is None:
            continue
        previous = entries[-1].id if entries else None
        if entry.id in seen:
            warnings.append(
                f"{where}: entry id {entry.id} repeats the one on line {seen[entry.id]}; "
                "skipped (a duplicated line)"
            )
            continue
        record = entry.data if isinstance(entry, OtherEntry) else obj
        if entry.parent_id is not None and entry.parent_id not in seen:
            warnings.append(
                f"{where}: entry {entry.id} names parent {entry.parent_id!r}, which is not an "
                f"earlier entry (a skipped line?); attached to the entry before it, {previous!r}"
            )
            record = {**record, "parentId": previous}
            if isinstance(entry, OtherEntry):
                entry = attrs.evolve(entry, parent_id=previous, data=record)
            else:
                entry = attrs.evolve(entry, parent_id=previous)
        if (
            isinstance(entry, CompactionEntry)
            and entry.first_kept_entry_id is not None
            and entry.first_kept_entry_id not in seen
        ):
            warnings.append(
                f"{where}: compaction keeps from entry {entry.first_kept_entry_id!r}, which is "
                "not an earlier entry; nothing before it stays in the runtime context"
            )
        seen[entry.id] = number
        raw[entry.id] = record
        entries.append(entry)
    if migration is not None:
        header = attrs.evolve(header, version=SESSION_VERSION)
    return LoadedSession(
        path=path,
        header=header,
        entries=tuple(entries),
        warnings=tuple(warnings),
        size=len(data),
        torn_bytes=torn_bytes,
        unterminated=unterminated,
        raw=raw,
        migrated_from=version if migration is not None else None,
    )


@attrs.define
class _Migration:
    """The reference's migrations, applied to each entry object as it is read.

    Version 1 → 2: entries get ids, each the parent of the next, and a compaction's
    ``firstKeptEntryIndex`` (an index into the file's objects, header first) becomes
    ``firstKeptEntryId``. Version 2 → 3: the ``hookMessage`` role is renamed ``custom``.
    """

    version: int
    ids: list[str | None] = attrs.field(factory=lambda: [None])  # index 0: the header
    taken: set[str] = attrs.field(factory=set)
    previous: str | None = None

    def apply(self, obj: dict[str, Any]) -> None:
        if self.version < 2 and obj.get("type") != "session":
            entry_id = _fresh_id(self.taken)
            self.taken.add(entry_id)
            obj["id"], obj["parentId"] = entry_id, self.previous
            self.previous = entry_id
            index = obj.pop("firstKeptEntryIndex", None)
            if (
                obj.get("type") == "compaction"
                and isinstance(index, int)
                and 0 < index < len(self.ids)
                and self.ids[index] is not None
            ):
                obj["firstKeptEntryId"] = self.ids[index]
            self.ids.append(entry_id)
        message = obj.get("message")
        if (
            obj.get("type") == "message"
            and isinstance(message, dict)
            and message.get("role") == "hookMessage"
        ):
            message["role"] = "custom"


def _fresh_id(taken: set[str]) -> str:
    """A new 8-hex-digit entry id not in ``taken``."""
    for _ in range(100):
        candidate = uuid.uuid4().hex[:8]
        if candidate not in taken:
            return candidate
    return uuid.uuid4().hex  # pragma: no cover - 100 collisions in 2**32


def _parse_header(
    path: Path, number: int, raw: bytes, terminated: bool, warnings: list[str]
) -> tuple[SessionHeader, int]:
    """The header, and the format version the file was written in."""
    try:
        obj = _json_line(raw)
    except ValueError as exc:
        if not terminated:
            msg = (
                f"session file {path} has no complete session header: line {number} was cut "
                f"off ({len(raw)} bytes, no newline at the end)"
            )
        else:
            msg = (
                f"session file {path} does not start with a session header: line {number} "
                f"is not valid JSON ({_reason(exc)})"
            )
        raise HistoryError(msg, path=path) from exc
    kind = obj.get("type") if isinstance(obj, dict) else None
    if kind != "session":
        found = f"type {kind!r}" if isinstance(obj, dict) else f"a JSON {type(obj).__name__}"
        msg = (
            f"session file {path} does not start with a session header: line {number} "
            f"has {found}, not type 'session'"
        )
        raise HistoryError(msg, path=path)
    assert isinstance(obj, dict)
    version = obj.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        msg = (
            f"session file {path} has an invalid session header on line {number}: "
            f"header.version must be an integer, not {version!r}"
        )
        raise HistoryError(msg, path=path)
    if version < OLDEST_READABLE_VERSION:
        msg = (
            f"session file {path} has format version {version}; this reader needs "
            f"version {OLDEST_READABLE_VERSION} or later"
        )
        raise HistoryError(msg, path=path)
    if version > SESSION_VERSION:
        warnings.append(
            f"{path}:{number}: format version {version} is newer than this reader's "
            f"({SESSION_VERSION}); reading the entries it knows"
        )
    try:
        header: SessionHeader = _decode_attrs(obj, SessionHeader, "header")
    except CodecError as exc:
        msg = f"session file {path} has an invalid session header on line {number}: {exc}"
        raise HistoryError(msg, path=path) from exc
    if not terminated:
        warnings.append(
            f"{path}:{number}: no newline at the end of the file; the last line is kept"
        )
    return header, version


def _parse_entry(where: str, obj: Any, warnings: list[str], *, repair: bool) -> HistoryEntry | None:
    """Decode one entry, lone surrogates repaired first if ``repair``; None if skipped."""
    try:
        if repair:
            obj, replaced = valid_json_value(obj)
            if replaced:
                warnings.append(
                    f"{where}: {replaced} lone surrogate code point(s) (half of a character) "
                    "replaced with U+FFFD"
                )
        return _decode_entry(where, obj, warnings)
    except (ValueError, OverflowError, RecursionError) as exc:
        # Values json accepts but no entry can hold: an integer beyond a float, a
        # structure too deep to decode. The line is skipped like any invalid entry.
        reason = "nested too deeply" if isinstance(exc, RecursionError) else "a number out of range"
        warnings.append(f"{where}: not a valid entry ({reason}); skipped")
        return None


def _decode_entry(where: str, obj: Any, warnings: list[str]) -> HistoryEntry | None:
    if not isinstance(obj, dict):
        warnings.append(f"{where}: a JSON {type(obj).__name__}, not an entry object; skipped")
        return None
    kind = obj.get("type")
    cls = _ENTRY_TYPES.get(kind) if isinstance(kind, str) else None
    message = obj.get("message")
    if kind == "message" and isinstance(message, dict) and message.get("role") == "system":
        cls = SystemMessageEntry
    if cls is not None:
        try:
            entry: HistoryEntry = _decode_attrs(obj, cls, "entry")
        except CodecError as exc:
            warnings.append(f"{where}: {exc}; skipped")
            return None
        return entry
    if kind == "session":
        warnings.append(f"{where}: a second session header; skipped")
        return None
    entry_id, parent_id, timestamp = obj.get("id"), obj.get("parentId"), obj.get("timestamp", "")
    if (
        not isinstance(kind, str)
        or not isinstance(entry_id, str)
        or not (parent_id is None or isinstance(parent_id, str))
        or not isinstance(timestamp, str)
    ):
        warnings.append(f"{where}: not an entry (it needs a string type and id); skipped")
        return None
    return OtherEntry(id=entry_id, parent_id=parent_id, timestamp=timestamp, type=kind, data=obj)


# -- the runtime context ----------------------------------------------------------------


def _epoch_ms(timestamp: str) -> int:
    """An entry's ISO timestamp in epoch milliseconds (as JavaScript's ``Date``); 0 if bad."""
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _entry_message(entry: HistoryEntry) -> Message | None:
    """What a custom message or branch summary entry contributes to the context."""
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(
            entry.custom_type,
            entry.content,
            display=entry.display,
            details=entry.details,
            timestamp=_epoch_ms(entry.timestamp),
        )
    if isinstance(entry, BranchSummaryEntry) and entry.summary:
        return BranchSummaryMessage(
            entry.summary, entry.from_id, timestamp=_epoch_ms(entry.timestamp)
        )
    return None


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
            timestamp=_epoch_ms(compaction.timestamp),
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


# -- where session files live -------------------------------------------------------------


def _encode_cwd(cwd: str) -> str:
    """The reference's directory name for a working directory: ``/src/app`` → ``--src-app--``."""
    return "--" + re.sub(r"[/\\:]", "-", re.sub(r"^[/\\]", "", cwd)) + "--"


def default_sessions_dir(
    cwd: str | os.PathLike[str] | None = None, *, data_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Where sessions started in ``cwd`` are kept: ``<user data dir>/sessions/--src-app--``.

    On Linux that is ``~/.local/share/trio-session/sessions/--src-app--`` for
    ``/src/app`` (see ``trio_session._dirs`` for the other platforms); the
    working directory is encoded into one directory name as the reference does.

    Args:
        cwd: the working directory; the current one unless given.
        data_dir: replaces the user data directory (tests, portable setups).
    """
    base = Path(data_dir) if data_dir is not None else user_data_dir()
    where = str(Path(cwd).absolute()) if cwd is not None else os.getcwd()
    return base / "sessions" / _encode_cwd(where)


def session_file_name(header: SessionHeader) -> str:
    """``2025-06-01T09-30-00-000Z_<id>.jsonl``: sorts by creation time, as the reference's."""
    stamp = re.sub(r"[:.]", "-", header.timestamp)
    return f"{stamp}_{re.sub(r'[^A-Za-z0-9_-]', '-', header.id)}{SUFFIX}"


def _has_header(path: Path) -> bool:
    """Whether ``path`` is a regular file whose first line is a session header."""
    try:
        fd = open_regular(path, os.O_RDONLY)
        try:
            first = os.read(fd, _HEADER_PEEK_BYTES).partition(b"\n")[0]
        finally:
            os.close(fd)
        obj = _json_line(first)
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deeply
        return False
    return isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str)


def latest_session(directory: str | os.PathLike[str]) -> Path | None:
    """The most recently written session file in ``directory``, for ``--continue``.

    Only ``*.jsonl`` files whose first line is a session header count; the newest
    modification time wins (ties: the later name). ``None`` if there is none or
    the directory does not exist.

    Args:
        directory: the directory to look in (see ``default_sessions_dir``).

    Raises:
        HistoryError: ``directory`` exists but cannot be listed.
    """
    directory = Path(directory)
    try:
        names = sorted(directory.iterdir())
    except FileNotFoundError:
        return None
    except OSError as exc:
        msg = f"cannot list session directory {directory}: {exc.strerror or exc}"
        raise HistoryError(msg, path=directory) from exc
    best: tuple[int, str, Path] | None = None
    for path in names:
        if path.suffix != SUFFIX or not _has_header(path):
            continue
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            continue
        if best is None or (mtime, path.name) > best[:2]:
            best = (mtime, path.name, path)
    return None if best is None else best[2]


@attrs.frozen
class SessionSummary:
    """One session file as a picker lists it (``/resume`` in the chat).

    Attributes:
        path: the file.
        modified: its modification time (seconds since the epoch).
        first_message: the text of its first user message (one line, shortened).
        name: its display name (the last ``session_info``), if it has one.
        messages: how many messages it holds.
    """

    path: Path
    modified: float
    first_message: str
    name: str | None = None
    messages: int = 0


def list_sessions(directory: str | os.PathLike[str]) -> list[SessionSummary]:
    """The session files in ``directory`` that hold a conversation, newest first.

    Files that are not session files, cannot be read, or hold no user message are
    left out (a picker has nothing to show for them). A missing directory is empty.

    Args:
        directory: the directory to look in (see ``default_sessions_dir``).

    Raises:
        HistoryError: ``directory`` exists but cannot be listed.
    """
    directory = Path(directory)
    try:
        paths = [p for p in directory.iterdir() if p.suffix == SUFFIX and _has_header(p)]
    except FileNotFoundError:
        return []
    except OSError as exc:
        msg = f"cannot list session directory {directory}: {exc.strerror or exc}"
        raise HistoryError(msg, path=directory) from exc
    found: list[SessionSummary] = []
    for path in paths:
        try:
            loaded = load_session(path)
            modified = path.stat().st_mtime
        except (HistoryError, OSError):
            continue
        first: str | None = None
        name: str | None = None
        count = 0
        for entry in loaded.entries:
            if isinstance(entry, MessageEntry):
                count += 1
                if first is None and isinstance(entry.message, UserMessage):
                    first = " ".join(entry.message.text.split())
            elif isinstance(entry, SessionInfoEntry):
                name = entry.name
        if first is not None:
            found.append(SessionSummary(path, modified, first[:200], name, count))
    found.sort(key=lambda s: (s.modified, s.path.name), reverse=True)
    return found
