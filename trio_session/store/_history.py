"""Session history: one append-only JSON-lines file per session (R-20, R-51).

The history is what happened; the runtime context is what the model is sent
next. A retried error leaves the runtime context (R-20) but stays here, and
``runtime_context`` rebuilds the runtime context from the file on resume.

Format
------
The shape is the reference's ("pi") session file, version 3, so either tool can
read the other's files. The first line is a header; every other line is one entry
whose ``parentId`` is the id of the entry before it::

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

(Each record is one line in the file; they are wrapped here.)

Messages are encoded by the package's one JSON codec (``message_to_json``).
Timestamps are ISO-8601 UTC with milliseconds, as JavaScript writes them. Entry
ids are 8 hex digits, unique within the file. Entry types this version does not
write (the reference's ``model_change``, ``label``, …) are read as
``OtherEntry`` and play no part in the runtime context.

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
Only a missing or broken header is an error (``HistoryError``). Entries are
taken in file order; the reference's branches (``parentId`` pointing elsewhere)
are reported as warnings, not followed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs

from .._codec import _decode_attrs, to_json
from .._dirs import user_data_dir
from .._errors import CodecError, TrioSessionError
from .._messages import AssistantMessage, Message, UserMessage
from .._text import valid_json_value

#: The format version this module writes: the reference's current one.
SESSION_VERSION = 3
#: The oldest version it reads (version 1 files have no entry ids).
OLDEST_READABLE_VERSION = 2
SUFFIX = ".jsonl"


class HistoryError(TrioSessionError):
    """A session file cannot be created, read or written; the message names the file.

    Attributes:
        path: the session file.
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
    """A compaction: messages before ``first_kept_entry_id`` left the runtime context.

    ``first_kept_entry_id`` is ``None`` when nothing before the compaction was kept.
    The reference writes no ``tokensAfter`` / ``messagesRemoved``; they are then ``None``.
    """

    id: str
    parent_id: str | None
    timestamp: str
    summary: str
    tokens_before: int
    tokens_after: int | None = None
    messages_removed: int | None = None
    first_kept_entry_id: str | None
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


@attrs.frozen(kw_only=True)
class OtherEntry:
    """An entry of a type this version does not write (the reference's ``model_change`` …).

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
    | OtherEntry
)

_ENTRY_TYPES: dict[str, type[Any]] = {
    "message": MessageEntry,
    "compaction": CompactionEntry,
    "settings_change": SettingsChangeEntry,
    "model_change": ModelChangeEntry,
    "thinking_level_change": ThinkingLevelChangeEntry,
    "session_info": SessionInfoEntry,
}


@attrs.frozen
class LoadedSession:
    """What ``load_session`` read.

    Attributes:
        path: the session file.
        header: its first line.
        entries: every entry that could be read, in file order.
        warnings: one line per thing skipped or odd, each starting ``<path>:<line>:``.
        size: bytes read.
        torn_bytes: length of an incomplete last line that was skipped (0 if none).
        unterminated: the last line is complete but has no newline after it.
    """

    path: Path
    header: SessionHeader
    entries: tuple[HistoryEntry, ...]
    warnings: tuple[str, ...] = ()
    size: int = 0
    torn_bytes: int = 0
    unterminated: bool = False

    @property
    def messages(self) -> tuple[Message, ...]:
        """Every message in the file, in order: the full history (R-51)."""
        return tuple(e.message for e in self.entries if isinstance(e, MessageEntry))

    @property
    def last_entry_id(self) -> str | None:
        """The id of the last entry, which the next entry names as its parent."""
        return self.entries[-1].id if self.entries else None

    def settings_changes(self) -> dict[str, Any]:
        """The last value of each key set by ``settings_change`` entries, in first-set order."""
        changes: dict[str, Any] = {}
        for entry in self.entries:
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

    Blocks on disk I/O; from Trio code, call it with ``trio.to_thread.run_sync``
    (or use ``open_history``).

    Raises:
        HistoryError: the file cannot be read, or has no valid session header.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        msg = f"session file {path} does not exist"
        raise HistoryError(msg, path=path) from exc
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
    header = _parse_header(path, *lines[0], warnings)
    unterminated = not lines[0][2]  # a header-only file without its newline
    entries: list[HistoryEntry] = []
    seen: dict[str, int] = {}
    message_ids: set[str] = set()
    torn_bytes = 0
    tail = data[data.rfind(b"\n") + 1 :]
    if tail and not tail.strip():
        torn_bytes = len(tail)  # blanks after the last newline: nothing to keep
    for number, raw, terminated in lines[1:]:
        where = f"{path}:{number}"
        try:
            obj = _json_line(raw)
        except ValueError as exc:
            if terminated:
                warnings.append(f"{where}: not valid JSON ({_reason(exc)}); skipped")
            else:
                torn_bytes = len(raw)
                warnings.append(
                    f"{where}: incomplete last line ({len(raw)} bytes, no newline at the end), "
                    "probably cut off by a crash while writing; skipped"
                )
            continue
        if not terminated:
            unterminated = True
            warnings.append(f"{where}: {_NO_NEWLINE}")
        repair = _SURROGATE_ESCAPE.search(raw) is not None
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
        if entry.parent_id != previous:
            warnings.append(
                f"{where}: entry {entry.id} has parentId {entry.parent_id!r} but follows "
                f"{previous!r}; entries are read in file order"
            )
        if (
            isinstance(entry, CompactionEntry)
            and entry.first_kept_entry_id is not None
            and entry.first_kept_entry_id not in message_ids
        ):
            warnings.append(
                f"{where}: compaction keeps from entry {entry.first_kept_entry_id!r}, which is "
                "not an earlier message; nothing before it stays in the runtime context"
            )
        seen[entry.id] = number
        if isinstance(entry, MessageEntry):
            message_ids.add(entry.id)
        entries.append(entry)
    return LoadedSession(
        path=path,
        header=header,
        entries=tuple(entries),
        warnings=tuple(warnings),
        size=len(data),
        torn_bytes=torn_bytes,
        unterminated=unterminated,
    )


def _parse_header(
    path: Path, number: int, raw: bytes, terminated: bool, warnings: list[str]
) -> SessionHeader:
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
    if isinstance(version, int) and not isinstance(version, bool):
        if version < OLDEST_READABLE_VERSION:
            msg = (
                f"session file {path} has format version {version}, which has no entry ids; "
                f"this reader needs version {OLDEST_READABLE_VERSION} or later"
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
    return header


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


def _retried(items: list[tuple[str, Message]], index: int) -> bool:
    """Whether another assistant message follows ``index`` before the next user message."""
    for _, later in items[index + 1 :]:
        if isinstance(later, UserMessage):
            return False
        if isinstance(later, AssistantMessage):
            return True
    return False


def runtime_context(loaded: LoadedSession) -> list[Message]:
    """Rebuild the runtime context for a resumed session (R-20, R-51).

    The messages of the file, in order, with two things applied:

    * **Compactions.** At each compaction entry, the messages before its
      ``firstKeptEntryId`` leave the context (all of them if it is ``null`` or
      names no earlier message), as they left the live session's.
    * **Retried failures.** An assistant message that ended in ``error`` or
      ``aborted`` and is followed by another assistant message before the next
      user message was retried (or, for an overflow, compacted and continued):
      the live session removed it when the retry started (R-20), so it is
      dropped here too. The last failure of a turn stays, as it stayed live
      after a chain gave up (R-15a) or ended on a non-retryable error (R-25);
      it is never sent to the model anyway (R-20a).

    The file is not changed: the history keeps every error (R-51).

    Two cases differ from the live session, because the file cannot tell them
    apart from a chain that gave up: a retry cancelled during its backoff sleep
    (R-30), and an overflow error whose compaction found nothing to drop. Live,
    the error had already left the runtime context; here it is the last message
    of its turn and stays. Either way it is never sent to the model (R-20a).
    """
    items: list[tuple[str, Message]] = []
    for entry in loaded.entries:
        if isinstance(entry, MessageEntry):
            items.append((entry.id, entry.message))
        elif isinstance(entry, CompactionEntry):
            ids = [entry_id for entry_id, _ in items]
            keep = entry.first_kept_entry_id
            del items[: ids.index(keep) if keep in ids else len(items)]
    return [
        message
        for i, (_, message) in enumerate(items)
        if not (isinstance(message, AssistantMessage) and message.failed and _retried(items, i))
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
    try:
        with path.open("rb") as file:
            first = file.readline(1 << 20)
        obj = _json_line(first)
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deeply
        return False
    return isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str)


def latest_session(directory: str | os.PathLike[str]) -> Path | None:
    """The most recently written session file in ``directory``, for ``--continue``.

    Only ``*.jsonl`` files whose first line is a session header count; the newest
    modification time wins (ties: the later name). ``None`` if there is none or
    the directory does not exist.

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
        if path.suffix != SUFFIX or not path.is_file() or not _has_header(path):
            continue
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            continue
        if best is None or (mtime, path.name) > best[:2]:
            best = (mtime, path.name, path)
    return None if best is None else best[2]
