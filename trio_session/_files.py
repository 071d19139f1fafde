"""Opening a path we are handed: a regular file, or nothing, and never more than a bound.

A session path, an export target, pi's ``models.json``: any of them may turn out to be
a named pipe nobody writes to, ``/dev/zero``, a directory, a 2 GiB file or a loop of
symbolic links. A plain ``open`` of a pipe waits for a writer for good, and reading
``/dev/zero`` never ends; in a worker thread, neither can be cancelled. So every file
trio_session reads or appends to is opened here:

1. ``os.stat`` first: a path that exists and is not a regular file (or a link to one)
   is refused before it is opened;
2. opened with ``O_NONBLOCK`` (a pipe that appeared meanwhile cannot make the open
   wait), then ``fstat`` on the descriptor: still a regular file, and no larger than
   the bound; then ``O_NONBLOCK`` is cleared again;
3. read with a bound: a file that grows past it while being read is refused too.

A refusal is a ``RefusedFileError``, an ``OSError`` whose ``strerror`` reads after
"cannot read FILE: " (``it is a named pipe, not a regular file``).
"""

from __future__ import annotations

import errno
import os
import stat
import sys

if sys.platform != "win32":
    import fcntl

#: How each kind of file that is not a regular one is named in an error.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)

# Opening never waits for a pipe's other end, never takes a terminal as the controlling
# one, and the descriptor is not inherited by commands the session runs.
_OPEN_FLAGS = (
    getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


class RefusedFileError(OSError):
    """A path that is not a regular file, or a file larger than its bound.

    ``strerror`` says which (``it is a named pipe, not a regular file``); ``filename``
    is the path; ``kind`` is ``"kind"`` or ``"size"``.

    Args:
        reason: the ``strerror``.
        path: the path refused.
        kind: ``"kind"`` (not a regular file) or ``"size"`` (larger than the bound).
    """

    def __init__(self, reason: str, path: str | os.PathLike[str], kind: str) -> None:
        code = errno.EFBIG if kind == "size" else errno.EINVAL
        super().__init__(code, reason, os.fspath(path))
        self.kind = kind

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def describe_size(limit: int) -> str:
    """``536870912 bytes (512 MiB)``: a bound as an error states it.

    Args:
        limit: the bound, in bytes.
    """
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= size and limit % size == 0:
            return f"{limit} bytes ({limit // size} {unit})"
    return f"{limit} bytes"


def _refuse_kind(path: str | os.PathLike[str], mode: int) -> RefusedFileError:
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return RefusedFileError(f"it is {kind}, not a regular file", path, "kind")


def _refuse_size(path: str | os.PathLike[str], limit: int) -> RefusedFileError:
    return RefusedFileError(f"it is larger than the limit of {describe_size(limit)}", path, "size")


def check_regular(path: str | os.PathLike[str], max_bytes: int | None = None) -> bool:
    """Whether ``path`` exists: ``True`` for a regular file (or a link to one) within bounds.

    Does not open the file, so a pipe cannot make it wait.

    Args:
        path: the path (links are followed).
        max_bytes: the largest size allowed; no bound if ``None``.

    Returns:
        ``True`` if it is a regular file, ``False`` if nothing is there (a dangling
        link included).

    Raises:
        RefusedFileError: something else is there, or the file is larger than ``max_bytes``.
        OSError: it cannot be looked at (a loop of links, no permission).
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        raise _refuse_kind(path, info.st_mode)
    if max_bytes is not None and info.st_size > max_bytes:
        raise _refuse_size(path, max_bytes)
    return True


def open_regular(
    path: str | os.PathLike[str],
    flags: int,
    mode: int = 0o600,
    *,
    max_bytes: int | None = None,
) -> int:
    """Open ``path`` only if it is a regular file (or absent, with ``O_CREAT``); never waits.

    The checks of the module docstring, in order; the descriptor returned is in
    blocking mode, as ``os.open`` would give it.

    Args:
        path: the file.
        flags: ``os.open`` flags (``O_RDONLY``, ``O_WRONLY | O_APPEND | O_CREAT`` …).
        mode: the mode of a file ``O_CREAT`` creates.
        max_bytes: the largest size allowed at opening; no bound if ``None``.

    Returns:
        The open descriptor; the caller closes it.

    Raises:
        RefusedFileError: ``path`` is not a regular file, or is larger than ``max_bytes``.
        OSError: as ``os.open`` (``FileNotFoundError`` without ``O_CREAT``).
    """
    if not check_regular(path, max_bytes) and not flags & os.O_CREAT:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path))
    fd = os.open(path, flags | _OPEN_FLAGS, mode)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # it was swapped after the stat
            raise _refuse_kind(path, info.st_mode)
        if max_bytes is not None and info.st_size > max_bytes:
            raise _refuse_size(path, max_bytes)
        if sys.platform != "win32" and _OPEN_FLAGS & os.O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_fd(fd: int, path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """Everything in the open regular file ``fd``, from its start, at most ``max_bytes``.

    Args:
        fd: a descriptor ``open_regular`` gave, open for reading.
        path: the file's path, for the error.
        max_bytes: the most that is read.

    Returns:
        The file's bytes.

    Raises:
        RefusedFileError: the file holds more than ``max_bytes`` (it grew while read).
        OSError: a read failed.
    """
    os.lseek(fd, 0, os.SEEK_SET)
    hint = os.fstat(fd).st_size
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes:
        # One read of the whole file as it was, then one that finds its end (or what
        # was appended meanwhile, up to one byte past the bound).
        want = min(max(hint - size, 1 << 16), max_bytes - size) + 1
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > max_bytes:
        raise _refuse_size(path, max_bytes)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_regular(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    Args:
        path: the file (links are followed).
        max_bytes: the most that is read.

    Returns:
        The file's bytes.

    Raises:
        FileNotFoundError: nothing is there.
        RefusedFileError: it is not a regular file, or holds more than ``max_bytes``.
        OSError: it cannot be opened or read.
    """
    fd = open_regular(path, os.O_RDONLY, max_bytes=max_bytes)
    try:
        return read_fd(fd, path, max_bytes)
    finally:
        os.close(fd)
