"""Session history: one append-only JSON-lines file per session (R-20, R-51); reading it.

This module reads a file (``load_session``, migrating older versions in memory). The
records are ``._entries``; what a file read gives — its tree of entries, the contexts
of a branch — is ``._loaded``; where files live is ``._session_list``; writing is
``._session_file``.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from .._core.classes import define
from .._core.codec import _decode_attrs
from .._core.errors import CodecError
from .._core.text import valid_json_value
from .._files import open_regular, read_fd
from ._entries import (
    ENTRY_TYPES,
    MAX_SESSION_FILE_BYTES,
    OLDEST_READABLE_VERSION,
    SESSION_VERSION,
    CompactionEntry,
    HistoryEntry,
    HistoryError,
    MessageEntry,
    OtherEntry,
    SessionHeader,
    SystemMessageEntry,
)
from ._loaded import LoadedSession

#: What this module gives; ``HistoryError``, ``LoadedSession`` and ``MessageEntry`` are
#: re-exported for the RPC server, which imports them from here.
__all__ = ["HistoryError", "LoadedSession", "MessageEntry", "load_session"]

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
        return load_fd(path, fd)
    finally:
        os.close(fd)


def load_fd(path: Path, fd: int) -> LoadedSession:
    """``load_session`` of a file ``open_regular`` opened for reading (``SessionFile.resume``)."""
    try:
        data = read_fd(fd, path, MAX_SESSION_FILE_BYTES)
    except OSError as exc:
        msg = f"cannot read session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc
    return _parse(path, data)


def parse_session(path: Path, data: bytes) -> LoadedSession:
    """``load_session`` of a file's bytes, already read (``SessionFile.read_back``)."""
    return _parse(path, data)


def _lines(data: bytes) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number, bytes, terminated)`` for each line; only the last may be unterminated."""
    parts = data.split(b"\n")
    last = parts.pop()
    for number, part in enumerate(parts, 1):
        yield number, part, True
    if last:
        yield len(parts) + 1, last, False


def json_line(raw: bytes) -> Any:
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


def json_reason(exc: ValueError) -> str:
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
            obj = json_line(raw_line)
        except ValueError as exc:
            if terminated:
                warnings.append(f"{where}: not valid JSON ({json_reason(exc)}); skipped")
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


@define
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
            entry_id = fresh_id(self.taken)
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


def fresh_id(taken: set[str]) -> str:
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
        obj = json_line(raw)
    except ValueError as exc:
        if not terminated:
            msg = (
                f"session file {path} has no complete session header: line {number} was cut "
                f"off ({len(raw)} bytes, no newline at the end)"
            )
        else:
            msg = (
                f"session file {path} does not start with a session header: line {number} "
                f"is not valid JSON ({json_reason(exc)})"
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
    cls = ENTRY_TYPES.get(kind) if isinstance(kind, str) else None
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
