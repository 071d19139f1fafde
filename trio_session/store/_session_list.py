"""Where session files live, and finding them: the sessions directory, the newest
session, the list of sessions with their first message.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .._classes import frozen
from .._dirs import user_data_dir
from .._files import open_regular
from .._messages import (
    UserMessage,
)
from ._entries import SUFFIX, HistoryError, MessageEntry, SessionHeader, SessionInfoEntry
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
