"""InputHistory: the chat's sent inputs, in a JSON-lines file per user (real files)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trio_session._dirs import user_data_dir
from trio_session.tui._input_history import (
    HISTORY_FILE_NAME,
    InputHistory,
    default_history_path,
)

needs_posix_modes = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory this user cannot write to: a 0500 one, or for root (who ignores
    modes) Linux's /sys, where no file can be created."""
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o500)
    try:
        if not os.access(directory, os.W_OK):
            yield directory
        elif sys.platform == "linux" and Path("/sys/kernel").is_dir():
            yield Path("/sys")
        else:
            pytest.skip("no directory here that this user cannot write to")
    finally:
        directory.chmod(0o700)


def test_entries_persist_across_loads(tmp_path: Path) -> None:
    """What one InputHistory adds, the next load of the same file has, multi-line included."""
    path = tmp_path / "chat-history.jsonl"
    first = InputHistory.load(path)
    assert first.entries == []
    first.add("hello")
    first.add("two\nlines")
    first.add('quotes " and \\ and 中文 👩\u200d👩\u200d👧')
    second = InputHistory.load(path)
    assert second.entries == ["hello", "two\nlines", 'quotes " and \\ and 中文 👩\u200d👩\u200d👧']
    assert second.warning is None
    assert path.read_text(encoding="utf-8").count("\n") == 3


def test_blank_and_repeated_entries_are_skipped(tmp_path: Path) -> None:
    """Blank inputs and an exact repeat of the newest entry are not added."""
    path = tmp_path / "h.jsonl"
    history = InputHistory.load(path)
    for text in ["a", "a", "  ", "", "\n", "b", "a"]:
        history.add(text)
    assert history.entries == ["a", "b", "a"]
    assert InputHistory.load(path).entries == ["a", "b", "a"]


@needs_posix_modes
def test_file_is_0600_and_new_directories_0700(tmp_path: Path) -> None:
    """The file is created 0600 and each directory made for it 0700."""
    path = tmp_path / "data" / "trio-session" / HISTORY_FILE_NAME
    InputHistory.load(path).add("secret sk-123")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700


def test_damaged_lines_are_skipped_never_fatal(tmp_path: Path) -> None:
    """Garbage, non-strings, bad UTF-8 and a torn last line are skipped; the rest loads."""
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'"one"\nnot json\n42\n{"a": 1}\n\xff\xfe\n\n"two"\n"torn wri')
    history = InputHistory.load(path)
    assert history.entries == ["one", "two"]
    assert history.warning is None
    history.add("three")  # starts on a new line, not glued to the torn one
    assert InputHistory.load(path).entries == ["one", "two", "three"]


def test_limit_keeps_the_newest_and_compacts_the_file(tmp_path: Path) -> None:
    """Past 2 x limit lines the file is rewritten with the newest `limit` entries."""
    path = tmp_path / "h.jsonl"
    history = InputHistory.load(path, limit=3)
    for n in range(6):
        history.add(f"e{n}")
    assert history.entries == ["e3", "e4", "e5"]
    assert len(path.read_text().splitlines()) == 6
    history.add("e6")  # the 7th line: over 2 x 3, rewritten to 3
    assert path.read_text().splitlines() == ['"e4"', '"e5"', '"e6"']
    assert InputHistory.load(path, limit=3).entries == ["e4", "e5", "e6"]
    assert InputHistory.load(path, limit=2).entries == ["e5", "e6"]
    assert [p.name for p in tmp_path.iterdir()] == ["h.jsonl"]  # no temporary file left


@needs_posix_modes
def test_compacted_file_stays_0600(tmp_path: Path) -> None:
    """The rewritten file is 0600 like the original."""
    path = tmp_path / "h.jsonl"
    history = InputHistory.load(path, limit=1)
    for n in range(3):
        history.add(f"e{n}")
    assert path.read_text().splitlines() == ['"e2"']
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_read_only_directory_warns_and_keeps_entries(read_only_dir: Path) -> None:
    """A directory that cannot be written: no exception, one warning, entries kept in memory."""
    path = read_only_dir / "trio-session-test" / "h.jsonl"
    history = InputHistory.load(path)
    assert history.warning is None
    history.add("kept")
    first_warning = history.warning
    history.add("also kept")
    assert history.entries == ["kept", "also kept"]
    assert first_warning is not None
    assert first_warning.startswith(f"input history: cannot write {path}: ")
    assert "\n" not in first_warning
    assert history.warning == first_warning  # set once
    assert not path.parent.exists()


def test_path_under_a_file_warns_on_load_and_add(tmp_path: Path) -> None:
    """A path under a regular file: load warns (not a directory); add keeps the entry."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = blocker / "h.jsonl"
    history = InputHistory.load(path)
    assert history.warning == f"input history: cannot read {path}: Not a directory"
    history.add("kept")
    assert history.entries == ["kept"]
    assert history.warning == f"input history: cannot read {path}: Not a directory"


def test_unreadable_file_warns_and_starts_empty(tmp_path: Path) -> None:
    """A path that is a directory cannot be read: a warning, an empty history."""
    path = tmp_path / "dir.jsonl"
    path.mkdir()
    history = InputHistory.load(path)
    assert history.entries == []
    assert history.warning is not None
    assert history.warning.startswith(f"input history: cannot read {path}: ")


def test_in_memory_history_writes_nothing(tmp_path: Path) -> None:
    """path=None keeps entries in memory only."""
    history = InputHistory.load(None)
    history.add("x")
    assert history.entries == ["x"]
    assert list(tmp_path.iterdir()) == []


def test_default_path_is_in_the_user_data_dir() -> None:
    """The chat's history file is user_data_dir() / chat-history.jsonl."""
    assert default_history_path() == user_data_dir() / "chat-history.jsonl"


def test_each_entry_is_one_json_line(tmp_path: Path) -> None:
    """Entries with newlines and U+2028 are still one line each."""
    path = tmp_path / "h.jsonl"
    InputHistory.load(path).add("a\nb\u2028c\r")
    lines = path.read_bytes().split(b"\n")
    assert lines[1:] == [b""]
    assert json.loads(lines[0]) == "a\nb\u2028c\r"
