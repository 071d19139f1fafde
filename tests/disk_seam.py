"""A test seam at the session files' writes: ``os.write`` on the files of one directory.

The session file writes with ``os.write`` in a worker thread (``SessionFile.flush``).
``session_disk`` wraps ``os.write`` so that each write to a ``*.jsonl`` file under a
directory (or to the temporary file a new one is first written in) is numbered, and
``before_write(number)`` runs first, in the writing thread: it may raise ``OSError`` as
the kernel would (``full_from(3)``: the disk is full from the third write on,
``ENOSPC``), or reach into Trio to act at exactly that point. Writes to anything else go
through untouched.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

BeforeWrite = Callable[[int], None]

_REAL_WRITE = os.write


def no_space() -> OSError:
    """The error a write to a full disk fails with."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@attrs.define(eq=False)
class SessionDisk:
    """The session files under ``directory``, seen through ``os.write``.

    Attributes:
        directory: where the session files are (searched recursively).
        before_write: called with each write's number (from 1) before it happens.
        writes: how many writes to session files were attempted.
        full: the disk is full: every write fails with ``ENOSPC``, whatever
            ``before_write`` says.
    """

    directory: Path
    before_write: BeforeWrite = lambda number: None
    writes: int = 0
    full: bool = False

    def _ours(self, fd: int) -> bool:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        # A session file, or the temporary file its first write is made in (linked to
        # the session file's name once whole: ``store._file_io.create_locked``).
        files = [*self.directory.rglob("*.jsonl"), *self.directory.rglob(".*.jsonl.*.tmp")]
        return any((p.stat().st_dev, p.stat().st_ino) == (st.st_dev, st.st_ino) for p in files)

    def write(self, fd: int, data: bytes | memoryview) -> int:
        if self._ours(fd):
            self.writes += 1
            if self.full:
                raise no_space()
            self.before_write(self.writes)
        return _REAL_WRITE(fd, data)


def full_from(number: int) -> BeforeWrite:
    """A disk that fills up at write ``number``: it and every later write fail."""

    def before_write(n: int) -> None:
        if n >= number:
            raise no_space()

    return before_write


@contextmanager
def session_disk(
    monkeypatch: pytest.MonkeyPatch, directory: Path, before_write: BeforeWrite | None = None
) -> Iterator[SessionDisk]:
    """``os.write`` goes through a ``SessionDisk`` for the block."""
    disk = SessionDisk(directory) if before_write is None else SessionDisk(directory, before_write)
    with monkeypatch.context() as patch:
        patch.setattr(os, "write", disk.write)
        yield disk
