"""Where session files live, and finding them: the sessions directory, the newest
session, the list of sessions with their first message.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._core.classes import frozen
from .._core.messages import (
    UserMessage,
)
from .._dirs import user_data_dir
from .._files import open_regular
from ._entries import (
    MAX_SESSION_FILE_BYTES,
    SUFFIX,
    HistoryError,
    MessageEntry,
    SessionHeader,
    SessionInfoEntry,
)
from ._file_io import held_elsewhere
from ._history import json_line, load_session

#: How much of a file is read to find its header (``list_sessions``, ``latest_session``).
_HEADER_PEEK_BYTES = 1 << 20


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
        obj = json_line(first)
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deeply
        return False
    return isinstance(obj, dict) and obj.get("type") == "session" and isinstance(obj.get("id"), str)


def _holds_a_message(path: Path) -> bool:
    """Whether session file ``path`` holds a message entry after its header: a
    conversation, not only a header (an older version's file of a session left at once)."""
    try:
        fd = open_regular(path, os.O_RDONLY, max_bytes=MAX_SESSION_FILE_BYTES)
        with open(fd, "rb") as file:
            next(file, b"")  # the header, read by _has_header
            return any(_is_message(line) for line in file)
    except OSError:
        return False


def _is_message(line: bytes) -> bool:
    if b'"message"' not in line:  # most lines, read no further
        return False
    try:
        obj = json_line(line)
    except (ValueError, RecursionError):  # a damaged line is skipped, as on load
        return False
    return isinstance(obj, dict) and obj.get("type") == "message"


@frozen
class Latest:
    """The conversation ``--continue`` goes on with, and the newer ones it passed by.

    Attributes:
        path: the newest session file holding a conversation that no other process has
            open for writing; if every one is open elsewhere, the newest (resuming it
            then says so); ``None`` if there is none.
        open_elsewhere: newer conversations passed by, open for writing elsewhere.
    """

    path: Path | None
    open_elsewhere: tuple[Path, ...] = ()


def find_latest(directory: str | os.PathLike[str]) -> Latest:
    """The conversation to continue in ``directory``: see ``latest_session``, and ``Latest``.

    Raises:
        HistoryError: ``directory`` exists but cannot be listed.
    """
    directory = Path(directory)
    try:
        names = sorted(directory.iterdir())
    except FileNotFoundError:
        return Latest(None)
    except OSError as exc:
        msg = f"cannot list session directory {directory}: {exc.strerror or exc}"
        raise HistoryError(msg, path=directory) from exc
    dated: list[tuple[int, str, Path]] = []
    for path in names:
        if path.suffix != SUFFIX or not _has_header(path):
            continue
        try:
            dated.append((path.stat().st_mtime_ns, path.name, path))
        except OSError:
            continue
    passed: list[Path] = []
    for _, _, path in sorted(dated, reverse=True):
        if not _holds_a_message(path):
            continue
        if not held_elsewhere(path):
            return Latest(path, tuple(passed))
        passed.append(path)
    return Latest(passed[0] if passed else None)


def latest_session(directory: str | os.PathLike[str]) -> Path | None:
    """The most recent conversation in ``directory``, for ``--continue``.

    Only ``*.jsonl`` files whose first line is a session header and that hold a
    message count (a header-only file, which an older version left for a session
    ended before its first prompt, is passed by); the newest modification time wins
    (ties: the later name). A file another process has open for writing is passed
    by for an older one (see ``find_latest``). ``None`` if there is none or the
    directory does not exist.

    Args:
        directory: the directory to look in (see ``default_sessions_dir``).

    Raises:
        HistoryError: ``directory`` exists but cannot be listed.
    """
    return find_latest(directory).path


@frozen
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
