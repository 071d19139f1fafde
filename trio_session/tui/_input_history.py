"""What the user sent in the chat, oldest first, kept in a file per user.

The file is JSON lines: one JSON string a line, so an entry with newlines in it
is still one line. Each ``add`` appends one line with a single ``write``; reading
skips whatever is not a JSON string (a line torn by a crash, garbage), so a
damaged file costs at most its damaged lines. When the file has grown past twice
``limit`` lines it is rewritten with the newest ``limit`` entries (a temporary
file, then ``os.replace``).

People paste secrets into chats: the file is created ``0600`` and the
directories made for it ``0700``. A file that cannot be read or written never
stops the chat: ``warning`` says so once, and the entries stay in memory. Only a
regular file is read or appended to (a named pipe or a device there is refused
without waiting), and one larger than ``MAX_HISTORY_FILE_BYTES`` is neither read
nor grown further.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

import attrs

from .._core.classes import define
from .._dirs import fsync_directory, make_private_dirs, user_data_dir
from .._files import RefusedFileError, describe_size, open_regular, read_regular

HISTORY_FILE_NAME = "chat-history.jsonl"
FILE_MODE = 0o600
#: The largest input history file read, in bytes (64 MiB).
MAX_HISTORY_FILE_BYTES = 64 << 20


def default_history_path() -> Path:
    """Where the chat keeps its input history: ``user_data_dir() / HISTORY_FILE_NAME``."""
    return user_data_dir() / HISTORY_FILE_NAME


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc)


@define(eq=False)
class InputHistory:
    """The chat's input history; ``path`` None keeps it in memory only."""

    path: Path | None = None
    limit: int = 1000
    entries: list[str] = attrs.field(factory=list)
    warning: str | None = None
    # Lines in the file (entries and skipped ones), to know when to compact it.
    _file_lines: int = attrs.field(default=0, init=False)
    # The file does not end with a newline (torn last line): the next append starts one.
    _needs_newline: bool = attrs.field(default=False, init=False)

    @classmethod
    def load(cls, path: Path | None, limit: int = 1000) -> InputHistory:
        """The history in ``path`` (empty if there is no file; never raises for its content)."""
        history = cls(path=path, limit=limit)
        if path is None:
            return history
        try:
            data = read_regular(path, MAX_HISTORY_FILE_BYTES)
        except FileNotFoundError:
            return history
        except OSError as exc:  # a pipe or a device is refused at once, unread
            if isinstance(exc, RefusedFileError) and exc.kind == "size":
                history.path = None  # not read, so not grown either: kept in memory
                bound = describe_size(MAX_HISTORY_FILE_BYTES)
                history._warn(
                    f"input history: {path} is larger than the limit of {bound}; "
                    "not read, and this chat's input is not saved"
                )
            else:
                history._warn(f"input history: cannot read {path}: {_describe(exc)}")
            return history
        lines = data.split(b"\n")
        history._needs_newline = bool(lines[-1])
        if not lines[-1]:
            lines.pop()
        history._file_lines = len(lines)
        entries: list[str] = []
        for line in lines:
            try:
                entry = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                continue
            if isinstance(entry, str) and entry.strip():
                entries.append(entry)
        history.entries = entries[-limit:] if limit > 0 else []
        return history

    def add(self, text: str) -> None:
        """Remember ``text`` (not a blank one, nor a repeat of the newest) and append it."""
        if not text.strip() or (self.entries and self.entries[-1] == text):
            return
        self.entries.append(text)
        if len(self.entries) > self.limit:
            del self.entries[: len(self.entries) - self.limit]
        if self.path is None:
            return
        try:
            self._append(self.path, text)
            if self._file_lines > 2 * self.limit:
                self._rewrite(self.path)
        except OSError as exc:
            self._needs_newline = True  # a write that failed half-way may have torn a line
            self._warn(f"input history: cannot write {self.path}: {_describe(exc)}")

    def _warn(self, message: str) -> None:
        if self.warning is None:
            self.warning = message

    def _append(self, path: Path, text: str) -> None:
        make_private_dirs(path.parent)
        line = json.dumps(text, ensure_ascii=False) + "\n"
        if self._needs_newline:
            line = "\n" + line
        fd = open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        try:
            _write_all(fd, line.encode("utf-8", "backslashreplace"))
        finally:
            os.close(fd)
        self._needs_newline = False
        self._file_lines += 1

    def _rewrite(self, path: Path) -> None:
        """Keep only the newest ``limit`` entries in the file (atomically)."""
        data = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in self.entries)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            try:
                _write_all(fd, data.encode("utf-8", "backslashreplace"))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        fsync_directory(path.parent)
        self._file_lines = len(self.entries)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
