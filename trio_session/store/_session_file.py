"""Writing a session file: ``SessionFile`` (R-51).

The format and the reader live in ``._history``, the records in ``._entries``, the file's
opening and locking in ``._file_io``; ``open_history`` (``._open_history``) opens a
``SessionFile`` for a block. This module appends to a file in that format, durably.

Durability: every entry is one ``os.write`` of the whole line, newline included,
followed by ``os.fsync`` — per entry for the async ``append_*`` methods, which
return only once their entry is on disk (the blocking work runs in
``trio.to_thread.run_sync``), and per batch for entries staged with the
``*_nowait`` methods, which the next ``SessionFile.flush`` writes. A failed
write is cut back off the file (``ftruncate``), so a full disk never leaves half
a line behind. A new file is written first with the session's first message entry,
its header and every entry staged before it in one step (``create_locked``): a
session left before its first message leaves no file, as the reference's (which
writes none before its first answer), so nothing is ever removed. It gets mode 0600,
and each directory created for it mode 0700 (conversations are private), and its
directory entry is fsync-ed too. An
existing file is opened only if it is a regular file of at most
``MAX_SESSION_FILE_BYTES`` (see ``.._files``). One writer per file: an
exclusive, non-blocking ``flock`` (POSIX; not on Windows).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from .._core.classes import define, frozen
from .._core.events import CompactionResult
from .._core.messages import Message, UserMessage
from ._entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    HistoryEntry,
    HistoryError,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    SettingsChangeEntry,
    ThinkingLevelChangeEntry,
    dump_line,
    encode_record,
    iso_time,
)
from ._file_io import check_creatable, create_locked, open_repaired
from ._fork import fork_session
from ._history import load_session, parse_session
from ._loaded import LoadedSession
from ._session_list import default_sessions_dir, session_file_name
from ._tree_appends import TreeAppends

#: ``fork_session`` (``._fork``) is re-exported: the RPC server imports it from here.
__all__ = ["SessionFile", "fork_session"]


@frozen
class _Staged:
    """An entry staged for the next flush."""

    entry_id: str
    parent_id: str | None
    line: bytes


@define(eq=False)
class SessionFile(TreeAppends):
    """An open session file that entries are appended to.

    Make one with ``create``, ``resume``, or (in Trio code)
    ``open_history``. Use it from one Trio run, or from one thread.

    Three ways to append, all assigning the entry id and ``parentId`` at the call:

    * ``await append_message(m)`` (and the others): returns once the entry is on
      disk, written and fsync-ed in a worker thread.
    * ``append_message_nowait(m)``: for synchronous code such as an event callback;
      the entry is staged in memory and written by the next ``flush`` (or
      ``flush_sync``, or closing). Until then a crash loses it: the bound of
      this batching is "until your next flush".
    * Entries staged by several tasks are written in the order they were staged.

    A new file (``create``) is written with its first message: until then every entry
    stays staged, and a flush writes nothing (see ``create``).

    Attributes:
        path: the file.
        header: its header.
        loaded: what the file held when resumed; ``None`` for a new file.
        fd: the file's descriptor, opened for appending and locked (``resume`` opens it;
            a new file's is ``None`` until its first message makes it); the file owns
            it and closes it.
        clock: epoch seconds, for entry timestamps.
    """

    path: Path
    header: SessionHeader
    _fd: int | None = attrs.field(alias="fd")
    _clock: Callable[[], float] = attrs.field(default=time.time, alias="clock")
    loaded: LoadedSession | None = None
    _ids: set[str] = attrs.field(factory=set, init=False)
    _last_id: str | None = attrs.field(default=None, init=False)
    _pending: list[_Staged] = attrs.field(factory=list, init=False)
    _known: dict[int, tuple[Message, str]] = attrs.field(factory=dict, init=False)
    _flush_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _write_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _user_texts: list[tuple[str, str]] = attrs.field(factory=list, init=False)
    _name: str | None = attrs.field(default=None, init=False)
    _tree: dict[str, tuple[str | None, str]] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        if self.loaded is not None:
            for entry in self.loaded.entries:
                self._ids.add(entry.id)
                self._tree[entry.id] = (entry.parent_id, entry.type)
                if isinstance(entry, MessageEntry | CustomMessageEntry | BranchSummaryEntry):
                    message = self.loaded.message_of(entry)
                    if message is not None:  # a compaction can keep from it
                        self._known[id(message)] = (message, entry.id)
            self._last_id = self.loaded.last_entry_id
            self._user_texts = self.loaded.user_messages()
            self._name = self.loaded.session_name

    # -- opening --------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        directory: str | os.PathLike[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        parent_session: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> SessionFile:
        """Start a new session file (blocking); it is written with its first message.

        Nothing is written now: the file is made when the first message entry is
        flushed, with its header and every entry staged before it, already locked
        (a session left before its first message leaves no file). What would stop
        that is said now: the directory is made (private) and must be writable, and
        ``path`` must not exist. A file that appears at ``path`` meanwhile is left as
        it is, and the first flush fails with a ``HistoryError`` saying so.

        Args:
            path: the file; if omitted, a new ``<time>_<id>.jsonl`` in ``directory``.
            directory: where to put it; ``default_sessions_dir`` of ``cwd`` if omitted.
            cwd: the working directory recorded in the header; the current one if omitted.
            session_id: the header's id; a random UUID if omitted. Pass it on to the
                session (``open_session(session_id=...)``) so credential stickiness
                survives a resume.
            parent_session: the reference's ``parentSession`` (a forked-from file).
            clock: epoch seconds, for timestamps.

        Raises:
            HistoryError: the file exists already, or its directory cannot be made or
                written.
        """
        where = str(Path(cwd).absolute()) if cwd is not None else os.getcwd()
        header = SessionHeader(
            id=session_id if session_id is not None else str(uuid.uuid4()),
            timestamp=iso_time(clock()),
            cwd=where,
            parent_session=parent_session,
        )
        if path is None:
            base = Path(directory) if directory is not None else default_sessions_dir(where)
            path = base / session_file_name(header)
        path = Path(path)
        check_creatable(path)
        return cls(path, header, fd=None, clock=clock)

    @classmethod
    def resume(
        cls, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time
    ) -> SessionFile:
        """Open an existing session file to append to it (blocking).

        The file is read with ``load_session`` (see ``loaded``, and
        ``runtime_context`` for the messages to give the model). An
        incomplete last line is cut off first, and a last line without its
        newline gets one, so new entries start on a line of their own.

        Args:
            path: the session file.
            clock: epoch seconds, for entry timestamps.

        Raises:
            HistoryError: the file does not exist, is not a regular file, is larger
                than ``MAX_SESSION_FILE_BYTES``, has no valid header, or is already
                open for writing.
        """
        path = Path(path)
        fd, loaded = open_repaired(path)
        try:
            file = cls(path, loaded.header, fd=fd, clock=clock, loaded=loaded)
            if loaded.unterminated:
                file._write(b"\n")
        except OSError as exc:
            os.close(fd)
            msg = f"cannot repair the end of session file {path}: {exc.strerror or exc}"
            raise HistoryError(msg, path=path) from exc
        except BaseException:
            os.close(fd)
            raise
        return file

    # -- appending ------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether ``close`` or ``aclose`` has run."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed or self._closing:
            msg = f"session file {self.path} is closed"
            raise HistoryError(msg, path=self.path)

    def _new_id(self) -> str:
        for _ in range(100):
            candidate = uuid.uuid4().hex[:8]
            if candidate not in self._ids:
                return candidate
        return uuid.uuid4().hex  # pragma: no cover - 100 collisions in 2**32

    def _stage(
        self, make: Callable[..., HistoryEntry], *, at: float | None = None, **fields: Any
    ) -> str:
        self._check_open()
        entry_id = self._new_id()
        when = iso_time(self._clock() if at is None else at)
        entry = make(id=entry_id, parent_id=self._last_id, timestamp=when, **fields)
        line = dump_line(
            encode_record(entry)
        )  # may raise for a value JSON cannot hold: nothing staged
        self._pending.append(_Staged(entry_id, self._last_id, line))
        self._ids.add(entry_id)
        self._tree[entry_id] = (self._last_id, entry.type)
        self._last_id = entry_id
        return entry_id

    def _last_staged(self) -> dict[str, Any]:
        """The JSON object of the entry staged last, as it will be written."""
        written: dict[str, Any] = json.loads(self._pending[-1].line)
        return written

    def append_message_nowait(self, message: Message) -> str:
        """Stage a message entry without blocking; it is written by the next flush.

        Args:
            message: the message.

        Returns:
            The entry id.
        """
        entry_id = self._stage(MessageEntry, message=message)
        self._known[id(message)] = (message, entry_id)
        if isinstance(message, UserMessage) and message.text:
            self._user_texts.append((entry_id, message.text))
        return entry_id

    def append_compaction_nowait(
        self,
        result: CompactionResult,
        *,
        first_kept_entry_id: str | None,
        timestamp_ms: int | None = None,
    ) -> str:
        """Stage a compaction entry; see ``append_compaction``.

        ``timestamp_ms`` is the entry's time (by default now): the session passes its
        summary message's, so that the context rebuilt from the file on resume — whose
        summary takes the entry's time, as pi's — is the same as the live one.

        Args:
            result: what the compaction did.
            first_kept_entry_id: the entry of the first message kept, ``None`` if none is left.
            timestamp_ms: the entry's time in epoch milliseconds; now if ``None``.
        """
        return self._stage(
            CompactionEntry,
            at=timestamp_ms / 1000 if timestamp_ms is not None else None,
            summary=result.summary,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            messages_removed=result.messages_removed,
            first_kept_entry_id=first_kept_entry_id,
            details=dict(result.details) if result.details is not None else None,
            from_hook=False,
            usage=result.usage,
        )

    def append_settings_change_nowait(self, key: str, value: Any) -> str:
        """Stage a ``settings_change`` entry; see ``append_settings_change``.

        Args:
            key: the setting's dotted key (``"retry.enabled"``).
            value: its new value.
        """
        return self._stage(SettingsChangeEntry, key=key, value=value)

    def append_model_change_nowait(self, provider: str, model_id: str) -> str:
        """Stage a ``model_change`` entry (the session now asks ``provider``/``model_id``).

        Args:
            provider: the provider's name.
            model_id: the model id.
        """
        return self._stage(ModelChangeEntry, provider=provider, model_id=model_id)

    def append_thinking_level_change_nowait(self, thinking_level: str) -> str:
        """Stage a ``thinking_level_change`` entry.

        Args:
            thinking_level: the new thinking level.
        """
        return self._stage(ThinkingLevelChangeEntry, thinking_level=thinking_level)

    def append_session_info_nowait(self, name: str | None) -> str:
        """Stage a ``session_info`` entry: the session's display name (trimmed; empty clears).

        Args:
            name: the display name; ``None`` or empty clears it.
        """
        name = (name or "").strip()
        entry_id = self._stage(SessionInfoEntry, name=name)
        self._name = name or None
        return entry_id

    def branch(self, entry_id: str | None) -> None:
        """Move the leaf: the next entry becomes a child of ``entry_id`` (a new root if ``None``).

        The reference's ``branch`` / ``resetLeaf``; nothing is written.

        Args:
            entry_id: the entry the next one follows; ``None`` for a new root.
        """
        if entry_id is not None and entry_id not in self._ids:
            msg = f"session file {self.path} has no entry {entry_id!r} to branch from"
            raise HistoryError(msg, path=self.path)
        self._check_open()
        self._last_id = entry_id

    @property
    def has_messages(self) -> bool:
        """Whether the file holds a message entry, written or staged: a conversation, not
        just a header and its settings."""
        return any(kind == "message" for _, kind in self._tree.values())

    @property
    def saved(self) -> bool:
        """Whether the file is on disk: resumed, or written since its first message (a
        new file waits for one, as pi's does)."""
        return self.loaded is not None or self._fd is not None

    @property
    def session_name(self) -> str | None:
        """The display name of the last ``session_info`` entry, ``None`` if unset."""
        return self._name

    @property
    def leaf_id(self) -> str | None:
        """The id of the last entry appended or read: the parent of the next one."""
        return self._last_id

    def user_messages(self) -> list[tuple[str, str]]:
        """``(entry id, text)`` of every user message with text, in file order (``fork``)."""
        return list(self._user_texts)

    async def append_message(self, message: Message) -> str:
        """Append a message entry; return its id once it is on disk.

        Args:
            message: the message.

        Raises:
            HistoryError: the file is closed or the write failed.
        """
        entry_id = self.append_message_nowait(message)
        await self.flush()
        return entry_id

    async def append_compaction(
        self, result: CompactionResult, *, first_kept_entry_id: str | None
    ) -> str:
        """Append a compaction entry; return its id once it is on disk.

        Args:
            result: what the compaction did (the ``auto_compaction_end`` event's result).
            first_kept_entry_id: the entry of the first message still in the runtime
                context (``entry_id_of`` finds it), ``None`` if none is left.
        """
        entry_id = self.append_compaction_nowait(result, first_kept_entry_id=first_kept_entry_id)
        await self.flush()
        return entry_id

    async def append_settings_change(self, key: str, value: Any) -> str:
        """Append a ``settings_change`` entry (``"retry.enabled"``, ``False``); return its id.

        Args:
            key: the setting's dotted key.
            value: its new value.
        """
        entry_id = self.append_settings_change_nowait(key, value)
        await self.flush()
        return entry_id

    def retract(self, entry_id: str) -> bool:
        """Take back the last staged entry if it is ``entry_id`` and not yet written.

        For an append whose purpose failed before anything depended on it (a
        prompt whose entry could not be written is not sent, so it is not kept).

        Args:
            entry_id: the entry to take back.

        Returns:
            Whether the entry was taken back.
        """
        if not self._pending or self._pending[-1].entry_id != entry_id:
            return False
        staged = self._pending.pop()
        self._ids.discard(entry_id)
        self._tree.pop(entry_id, None)
        self._last_id = staged.parent_id
        for key, (_, known_id) in list(self._known.items()):
            if known_id == entry_id:
                del self._known[key]
        self._user_texts = [u for u in self._user_texts if u[0] != entry_id]
        return True

    def kept_from(self, entry_id: str) -> str:
        """The ``firstKeptEntryId`` for a compaction that keeps ``entry_id`` on: as the
        reference's cut point, the entries just before it that are not messages
        (a ``model_change``, a ``label`` …) are kept with it, up to the previous
        message or compaction.

        Args:
            entry_id: the first message entry the compaction keeps.
        """
        kept = entry_id
        while True:
            parent = self._tree.get(kept, (None, ""))[0]
            if parent is None or self._tree.get(parent, (None, "message"))[1] in (
                "message",
                "compaction",
            ):
                return kept
            kept = parent

    def entry_id_of(self, message: Message) -> str | None:
        """The entry id of this very message object, if it was appended or loaded here.

        Args:
            message: the message object (compared by identity).
        """
        known = self._known.get(id(message))
        return known[1] if known is not None and known[0] is message else None

    # -- flushing -------------------------------------------------------------------

    def read_back(self) -> LoadedSession:
        """What the file holds, read back from disk after a ``flush`` (blocking).

        A new file still waiting for its first message is not on disk: what it will
        hold is read instead, its header and the entries staged for it.
        """
        if self._fd is None and self.loaded is None:
            lines = [dump_line(encode_record(self.header)), *(s.line for s in self._pending)]
            return parse_session(self.path, b"".join(lines))
        return load_session(self.path)

    def _take(self) -> list[_Staged]:
        """The staged entries, to write; none while a new file waits for its first message."""
        if self._fd is None and not self.has_messages:
            return []
        batch, self._pending = self._pending, []
        return batch

    def _write(self, data: bytes) -> None:
        """Write and fsync ``data``; on failure cut the file back and raise (blocking).

        A new file's first write makes it, with its header before ``data``.
        """
        with self._write_lock:
            if self._closed:
                msg = f"session file {self.path} is closed"
                raise HistoryError(msg, path=self.path)
            fd = self._fd
            if fd is None:
                self._fd = create_locked(self.path, dump_line(encode_record(self.header)) + data)
                return
            start = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError as exc:
                with contextlib.suppress(OSError):  # else the file is beyond repair
                    os.ftruncate(fd, start)
                msg = f"cannot write session file {self.path}: {exc.strerror or exc}"
                raise HistoryError(msg, path=self.path) from exc

    async def flush(self) -> None:
        """Write every staged entry, then fsync, in a worker thread; in staging order.

        Cancelling it before its thread begins writes nothing and leaves the entries
        staged; once the thread has begun, the flush runs to its end.

        Raises:
            HistoryError: the write failed; the entries stay staged for the next flush.
        """
        async with self._flush_lock:
            batch = self._take()
            if not batch:
                return
            try:
                await trio.to_thread.run_sync(self._write, b"".join(s.line for s in batch))
            except BaseException:  # a failed write (cut back off), or cancelled before it began
                self._pending[:0] = batch
                raise

    def flush_sync(self) -> None:
        """``flush``, blocking the calling thread (for code outside Trio)."""
        batch = self._take()
        if not batch:
            return
        try:
            self._write(b"".join(s.line for s in batch))
        except HistoryError:
            self._pending[:0] = batch
            raise

    def close(self) -> None:
        """Flush what is staged and close the file (blocking). Idempotent.

        A new file that never got a message is not made: what was staged for it (a
        name, a settings change) goes with the session, as in the reference.
        """
        if self._closed:
            return
        try:
            self.flush_sync()
        except HistoryError as exc:
            lost = len(self._pending)
            msg = f"{exc}; {lost} entr{'y' if lost == 1 else 'ies'} could not be saved"
            raise HistoryError(msg, path=self.path) from exc
        finally:
            with self._write_lock:
                self._closed = True
                fd, self._fd = self._fd, None
                if fd is not None:
                    os.close(fd)

    async def aclose(self) -> None:
        """Flush what is staged and close the file; runs to the end even if cancelled."""
        if self._closed:
            return
        self._closing = True  # nothing more is staged while the last flush runs
        with trio.CancelScope(shield=True):
            async with self._flush_lock:
                await trio.to_thread.run_sync(self.close)

    def __enter__(self) -> SessionFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
