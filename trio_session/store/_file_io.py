"""A session file on disk: its modes, opening it (new, or existing and repaired), the
one-writer lock, and writing a whole new file atomically.

``SessionFile`` (``._session_file``) and ``fork_session`` (``._fork``) build on these;
every function here blocks on disk I/O.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import attrs

from .._dirs import fsync_directory, make_private_dirs
from .._files import open_regular
from ._entries import MAX_SESSION_FILE_BYTES, HistoryError, SessionHeader, dump_line, encode_record
from ._history import load_fd
from ._loaded import LoadedSession

if sys.platform != "win32":
    import fcntl

#: Mode of a new session file (its directories are made 0700 by `.._dirs`).
FILE_MODE = 0o600

_O_EXTRA = getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def open_for_append(path: Path) -> int:
    """Open an existing session file to read it and append to it; never waits (see ``_files``)."""
    return open_regular(path, os.O_RDWR | os.O_APPEND | _O_EXTRA, max_bytes=MAX_SESSION_FILE_BYTES)


def lock_writer(fd: int, path: Path) -> None:
    """Take the file's exclusive writer lock, or fail at once."""
    if sys.platform == "win32":  # pragma: no cover - no flock; one writer is the caller's job
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        msg = f"session file {path} is already open for writing (by another process or object)"
        raise HistoryError(msg, path=path) from exc
    except OSError:  # pragma: no cover - a file system without locks: write unguarded
        pass


def check_creatable(path: Path) -> None:
    """Say now, at the start of a session, why its new file ``path`` could not be made later.

    The file itself is made with the session's first message (``create_locked``); its
    directory is made here (each missing level private), and must be writable.

    Raises:
        HistoryError: ``path`` exists already, or its directory cannot be made or written.
    """
    if os.path.lexists(path):
        msg = f"session file {path} already exists; resume it instead"
        raise HistoryError(msg, path=path)
    try:
        make_private_dirs(path.parent)
    except OSError as exc:
        msg = f"cannot create session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc
    if not os.access(path.parent, os.W_OK | os.X_OK):
        msg = f"cannot create session file {path}: its directory {path.parent} is not writable"
        raise HistoryError(msg, path=path)


def _create_written(path: Path, data: bytes) -> int:
    """Make ``path`` (which must not exist), lock it, write ``data`` and fsync; its descriptor.

    On a failure the file, made a moment ago by this call and locked by it, is removed.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _O_EXTRA
    fd = os.open(path, flags, FILE_MODE)
    try:
        lock_writer(fd, path)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return fd


def create_locked(path: Path, data: bytes) -> int:
    """Create session file ``path`` holding ``data`` (its header and first entries), locked
    for writing, in one step (blocking); its descriptor, for appending.

    The file appears whole and already locked: ``data`` is written to a new temporary
    file beside it, which is locked, fsync-ed, then linked to ``path``. A link never
    replaces a file, so a file that appeared at ``path`` after the session started
    (another program's) is left exactly as it is, and this fails. On a file system
    without hard links ``path`` is made with ``O_EXCL`` and written in place.

    Raises:
        HistoryError: ``path`` exists, or the file cannot be made or written.
    """
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        make_private_dirs(path.parent)
        fd = _create_written(temporary, data)
    except OSError as exc:
        msg = f"cannot create session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc
    try:
        try:
            os.link(temporary, path)
        except FileExistsError:
            raise
        except OSError:  # no hard links here (FAT, some network shares): write in place
            os.close(fd)
            fd = -1
            fd = _create_written(path, data)
        temporary.unlink()
        fsync_directory(path.parent)
    except FileExistsError as exc:
        if fd >= 0:
            os.close(fd)
        msg = (
            f"session file {path} was created by another program after this session "
            "started; it is left as it is, and nothing was written to it"
        )
        raise HistoryError(msg, path=path) from exc
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        msg = f"cannot create session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    finally:
        with contextlib.suppress(OSError):  # ours, made above under a name of our own
            temporary.unlink()
    return fd


def held_elsewhere(path: Path) -> bool:
    """Whether another open file holds ``path``'s writer lock (``--continue`` passes it by).

    A shared lock is tried and let go at once; ``False`` when that cannot tell.
    """
    if sys.platform == "win32":  # pragma: no cover - no flock
        return False
    try:
        fd = open_regular(path, os.O_RDONLY | _O_EXTRA)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:  # pragma: no cover - a file system without locks
        return False
    finally:
        os.close(fd)  # which lets the lock go
    return False


def open_repaired(path: Path) -> tuple[int, LoadedSession]:
    """Open an existing session file to append to it: locked, read, migrated to the current
    version (rewritten) and its incomplete last line cut off, each repair noted in the
    warnings. A last line without its newline is left to the caller (``unterminated``).

    Args:
        path: the session file.

    Returns:
        The file's descriptor, locked, and what it held.

    Raises:
        HistoryError: as ``SessionFile.resume``.
    """
    try:
        fd = open_for_append(path)
    except FileNotFoundError as exc:
        msg = f"session file {path} does not exist"
        raise HistoryError(msg, path=path) from exc
    except OSError as exc:
        msg = f"cannot open session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc
    try:
        lock_writer(fd, path)
        loaded = load_fd(path, fd)
        if loaded.migrated_from is not None:
            fd = rewrite_migrated(fd, loaded)
            note = (
                f"{path}: migrated from format version {loaded.migrated_from} to "
                f"{loaded.header.version} (the file was rewritten)"
            )
            loaded = attrs.evolve(
                loaded,
                warnings=(*loaded.warnings, note),
                torn_bytes=0,
                unterminated=False,
                migrated_from=None,
            )
        if loaded.torn_bytes:
            os.ftruncate(fd, loaded.size - loaded.torn_bytes)
            os.fsync(fd)
            note = f"{path}: cut off the incomplete last line before appending"
            loaded = attrs.evolve(loaded, warnings=(*loaded.warnings, note))
    except OSError as exc:
        os.close(fd)
        msg = f"cannot repair the end of session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc
    except BaseException:
        os.close(fd)
        raise
    return fd, loaded


def write_new(path: Path, lines: bytes) -> None:
    """Write a whole new session file atomically: a temporary file, fsync, rename (blocking)."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        make_private_dirs(path.parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_EXTRA
        fd = os.open(temporary, flags, FILE_MODE)
        try:
            view = memoryview(lines)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        fsync_directory(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        msg = f"cannot write session file {path}: {exc.strerror or exc}"
        raise HistoryError(msg, path=path) from exc


def file_lines(header: SessionHeader, entries: list[dict[str, Any]]) -> bytes:
    """A whole file's bytes: the header's line, then each entry's."""
    return dump_line(encode_record(header)) + b"".join(dump_line(e) for e in entries)


def rewrite_migrated(fd: int, loaded: LoadedSession) -> int:
    """Rewrite an older file in the current format, as the reference does on open.

    Returns a descriptor of the new file, locked; ``fd`` is closed.
    """
    path = loaded.path
    entries = [loaded.raw[e.id] for e in loaded.entries]
    write_new(path, file_lines(loaded.header, entries))
    new = open_for_append(path)
    try:
        lock_writer(new, path)
    except BaseException:
        os.close(new)
        raise
    os.close(fd)
    return new
