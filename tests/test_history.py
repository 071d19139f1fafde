"""Session history files: format, durable appends, tolerant reading, resume (R-20, R-51)."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    AgentSession,
    AssistantMessage,
    CompactionEnd,
    CompactionResult,
    FauxProvider,
    FauxReply,
    Message,
    MessageEnd,
    Model,
    SessionEvent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TrioSessionError,
    Usage,
    UserMessage,
    open_session,
)
from trio_session._core.messages import CompactionSummaryMessage, StopReason
from trio_session._dirs import user_data_dir
from trio_session.store._entries import (
    SESSION_VERSION,
    CompactionEntry,
    HistoryError,
    MessageEntry,
    OtherEntry,
    SettingsChangeEntry,
)
from trio_session.store._history import load_session
from trio_session.store._loaded import LoadedSession, runtime_context
from trio_session.store._open_history import open_history
from trio_session.store._session_file import SessionFile
from trio_session.store._session_list import (
    Latest,
    default_sessions_dir,
    find_latest,
    latest_session,
    session_file_name,
)

from .conftest import ERR_503, ERR_OVERFLOW

ZERO_COST = {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes, flock and SIGKILL")
ENTRY_ID = re.compile(r"^[0-9a-f]{8}$")
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
T0 = 1_750_000_000.0  # 2025-06-15T15:06:40Z


def user(text: str = "Hi") -> UserMessage:
    """A user message with a fixed timestamp."""
    return UserMessage(text, timestamp=1)


def reply(text: str = "Hello") -> AssistantMessage:
    """A successful assistant message."""
    return AssistantMessage(content=[TextContent(text)], stop_reason="stop", timestamp=2)


def failure(error: str = ERR_503, reason: StopReason = "error") -> AssistantMessage:
    """An assistant message that ended in ``error`` (or ``aborted``)."""
    return AssistantMessage(stop_reason=reason, error_message=error, timestamp=3)


def new_file(path: Path, *messages: Message) -> SessionFile:
    """A new session file holding ``messages``, flushed, still open."""
    history = SessionFile.create(path, cwd="/src/app", session_id="sess-1", clock=lambda: T0)
    for message in messages:
        history.append_message_nowait(message)
    history.flush_sync()
    return history


def write_session(path: Path, *messages: Message) -> Path:
    """A closed session file holding ``messages``."""
    new_file(path, *messages).close()
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a file, decoded."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def full(text: str) -> str:
    """A regex matching exactly ``text``."""
    return f"^{re.escape(text)}$"


# --- the format --------------------------------------------------------------------------


def test_header_and_entries_have_the_reference_shape(tmp_path: Path) -> None:
    """R-51: a header line, then one entry per line with id, parentId and timestamp."""
    path = tmp_path / "s.jsonl"
    with new_file(path, user(), failure(), reply()) as history:
        history.append_settings_change_nowait("retry.enabled", False)
    header, *entries = lines(path)
    assert header == {
        "type": "session",
        "version": SESSION_VERSION,
        "id": "sess-1",
        "timestamp": "2025-06-15T15:06:40.000Z",
        "cwd": "/src/app",
    }
    assert list(header) == ["type", "version", "id", "timestamp", "cwd"]
    assert [list(e)[:4] for e in entries] == [["type", "id", "parentId", "timestamp"]] * 4
    assert all(ENTRY_ID.match(e["id"]) and ISO.match(e["timestamp"]) for e in entries)
    assert [e["parentId"] for e in entries] == [None] + [e["id"] for e in entries[:-1]]
    assert entries[1]["message"] == {
        "role": "assistant",
        "content": [],
        "stopReason": "error",
        "errorMessage": ERR_503,
        "usage": {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "cost": ZERO_COST,
            "totalTokens": 0,
        },
        "provider": "",
        "model": "",
        "timestamp": 3,
        "api": "",
    }
    assert entries[3] == {
        "type": "settings_change",
        "id": entries[3]["id"],
        "parentId": entries[2]["id"],
        "timestamp": "2025-06-15T15:06:40.000Z",
        "key": "retry.enabled",
        "value": False,
    }


def test_compaction_entry_fields(tmp_path: Path) -> None:
    """A compaction entry carries summary, tokens before/after, messages removed, first kept."""
    path = tmp_path / "s.jsonl"
    with new_file(path, user("one"), reply(), user("two")) as history:
        first = lines(path)[3]["id"]
        result = CompactionResult(
            summary="dropped 2", tokens_before=90, tokens_after=30, messages_removed=2
        )
        history.append_compaction_nowait(result, first_kept_entry_id=first)
    entry = lines(path)[-1]
    assert {k: v for k, v in entry.items() if k not in ("id", "parentId", "timestamp")} == {
        "type": "compaction",
        "summary": "dropped 2",
        "tokensBefore": 90,
        "tokensAfter": 30,
        "messagesRemoved": 2,
        "firstKeptEntryId": first,
        "fromHook": False,
    }


def test_every_message_kind_round_trips(tmp_path: Path) -> None:
    """R-51: user, assistant (text, tool calls, usage, error) and tool results load back equal."""
    messages: list[Message] = [
        user("Read it"),
        AssistantMessage(
            content=[TextContent("Let me look."), ToolCall("c1", "read", {"path": "a.txt"})],
            stop_reason="toolUse",
            usage=Usage(input=10, output=5, cache_read=2, cache_write=1),
            provider="openai",
            model="gpt-x",
            timestamp=5,
        ),
        ToolResultMessage("c1", "read", (TextContent("héllo ✓"),), timestamp=6),
        failure("429 usage_limit_reached\nretry-after: 30"),
        reply("Done."),
    ]
    path = write_session(tmp_path / "s.jsonl", *messages)
    loaded = load_session(path)
    assert loaded.warnings == ()
    assert list(loaded.messages) == messages
    assert loaded.header.id == "sess-1"


def test_settings_changes_keep_the_last_value_of_each_key(tmp_path: Path) -> None:
    """``settings_change`` entries replay as key → last value (null included)."""
    path = tmp_path / "s.jsonl"
    with new_file(path) as history:
        history.append_settings_change_nowait("retry.enabled", False)
        history.append_settings_change_nowait("retry.maxDelayMs", None)
        history.append_settings_change_nowait("retry.enabled", True)
        history.append_message_nowait(user())  # a new file is written with its first message
    loaded = load_session(path)
    assert loaded.settings_changes() == {"retry.enabled": True, "retry.maxDelayMs": None}
    assert [type(e) for e in loaded.entries] == [SettingsChangeEntry] * 3 + [MessageEntry]


@posix_only
def test_new_file_is_private(tmp_path: Path) -> None:
    """Session files are created 0600 in a sessions directory created 0700."""
    path = tmp_path / "sessions" / "s.jsonl"
    write_session(path, user())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_default_location_and_name(tmp_path: Path) -> None:
    """Without a path: ``<data>/sessions/--src-app--/<time>_<id>.jsonl``, as the reference."""
    directory = default_sessions_dir("/src/app", data_dir=tmp_path)
    assert directory == tmp_path / "sessions" / "--src-app--"
    history = SessionFile.create(
        cwd="/src/app", session_id="abc", clock=lambda: T0, directory=directory
    )
    history.close()
    assert history.path == directory / "2025-06-15T15-06-40-000Z_abc.jsonl"
    assert session_file_name(history.header) == history.path.name


def test_default_sessions_dir_follows_the_user_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default data dir is the platform's (``$XDG_DATA_HOME`` honoured)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    encoded = re.sub(r"[/\\:]", "-", str(tmp_path).lstrip("/\\"))
    assert default_sessions_dir() == user_data_dir() / "sessions" / f"--{encoded}--"


# --- writing -------------------------------------------------------------------------------


async def test_async_appends_are_on_disk_when_they_return(tmp_path: Path) -> None:
    """R-51: ``await append_*`` returns the entry id after the line is written and fsync-ed."""
    path = tmp_path / "s.jsonl"
    async with open_history(path, cwd="/src/app") as history:
        first = await history.append_message(user())
        assert ENTRY_ID.match(first)
        assert lines(path)[-1]["id"] == first  # read through another file object
        second = await history.append_compaction(
            CompactionResult("s", 2, 1, 1), first_kept_entry_id=first
        )
        third = await history.append_settings_change("retry.enabled", True)
        assert [e["id"] for e in lines(path)[1:]] == [first, second, third]


async def test_concurrent_appends_keep_the_order_they_were_made_in(tmp_path: Path) -> None:
    """Entries from many tasks land in call order, each naming the one before as parent."""
    path = tmp_path / "s.jsonl"
    ids: list[str] = []
    async with open_history(path) as history:

        async def append(i: int) -> None:
            entry_id = history.append_message_nowait(user(f"m{i}"))
            ids.append(entry_id)
            await history.flush()

        async with trio.open_nursery() as nursery:
            for i in range(40):
                nursery.start_soon(append, i)
    entries = lines(path)[1:]
    assert [e["id"] for e in entries] == ids
    assert [e["parentId"] for e in entries] == [None, *ids[:-1]]


async def test_nowait_entries_are_written_by_flush_or_close(tmp_path: Path) -> None:
    """Staged entries reach the file at the next ``flush()``, or when the block closes."""
    path = tmp_path / "s.jsonl"
    async with open_history(path) as history:
        history.append_message_nowait(user("a"))
        assert not path.exists()  # staged, not yet written: the file is made with it
        await history.flush()
        assert len(lines(path)) == 2
        history.append_message_nowait(user("b"))
    assert [m.text for m in load_session(path).messages] == ["a", "b"]


async def test_closed_file_refuses_appends(tmp_path: Path) -> None:
    """``aclose()`` is idempotent; appending afterwards is a clear error."""
    path = tmp_path / "s.jsonl"
    async with open_history(path) as history:
        pass
    await history.aclose()
    assert history.closed
    with pytest.raises(HistoryError, match=full(f"session file {path} is closed")):
        await history.append_message(user())


def test_value_json_cannot_hold_is_refused_before_anything_is_staged(tmp_path: Path) -> None:
    """A settings value that is not JSON raises, and the file's chain is not broken."""
    path = tmp_path / "s.jsonl"
    with new_file(path) as history:
        with pytest.raises(TypeError):
            history.append_settings_change_nowait("x.y", object())
        history.append_message_nowait(user())
    loaded = load_session(path)
    assert loaded.warnings == ()
    assert len(loaded.entries) == 1


def test_creating_over_an_existing_file_is_an_error(tmp_path: Path) -> None:
    """``create`` never overwrites: the message says to resume instead."""
    path = write_session(tmp_path / "s.jsonl", user())
    with pytest.raises(
        HistoryError, match=full(f"session file {path} already exists; resume it instead")
    ):
        SessionFile.create(path)
    assert len(load_session(path).entries) == 1


@posix_only
def test_one_writer_at_a_time(tmp_path: Path) -> None:
    """A second writer on the same file (here, the same process) is refused."""
    path = tmp_path / "s.jsonl"
    with new_file(path, user()):
        expected = f"session file {path} is already open for writing (by another process or object)"
        with pytest.raises(HistoryError, match=full(expected)):
            SessionFile.resume(path)
    SessionFile.resume(path).close()  # free again once the first one closed


def test_a_new_file_is_written_with_its_first_message(tmp_path: Path) -> None:
    """Issue 39: nothing is on disk until the first message; then the header and every
    entry staged before it appear at once, the file already locked."""
    path = tmp_path / "s.jsonl"
    history = SessionFile.create(path, cwd="/src/app")
    history.append_session_info_nowait("named")
    history.append_settings_change_nowait("retry.enabled", False)
    history.flush_sync()
    assert not path.exists()  # no message yet: nothing written
    history.append_message_nowait(user())
    history.flush_sync()
    assert [line["type"] for line in lines(path)] == [
        "session",
        "session_info",
        "settings_change",
        "message",
    ]
    if sys.platform != "win32":
        expected = f"session file {path} is already open for writing (by another process or object)"
        with pytest.raises(HistoryError, match=full(expected)):
            SessionFile.resume(path)
    history.close()
    assert [e.type for e in load_session(path).entries] == [
        "session_info",
        "settings_change",
        "message",
    ]


def test_a_new_file_left_without_a_message_leaves_nothing(tmp_path: Path) -> None:
    """Issue 39: a session closed before its first message leaves no file (as pi), and
    the directory made for it is all that remains."""
    path = tmp_path / "sessions" / "s.jsonl"
    with SessionFile.create(path) as history:
        history.append_session_info_nowait("named")
    assert history.closed
    assert list(path.parent.iterdir()) == []


def test_a_file_made_at_the_path_meanwhile_is_left_as_it_is(tmp_path: Path) -> None:
    """Issue 39: another program makes the file after the session started: the first
    message is refused with a clear error and that file is left exactly as it was."""
    path = tmp_path / "s.jsonl"
    history = SessionFile.create(path)
    theirs = write_session(tmp_path / "theirs.jsonl", user("theirs")).read_bytes()
    path.write_bytes(theirs)
    entry = history.append_message_nowait(user("mine"))
    expected = (
        f"session file {path} was created by another program after this session started; "
        "it is left as it is, and nothing was written to it"
    )
    with pytest.raises(HistoryError, match=full(expected)):
        history.flush_sync()
    assert history.retract(entry)  # still staged: the session takes its prompt back
    history.close()
    assert path.read_bytes() == theirs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl", "theirs.jsonl"]


def test_a_directory_that_cannot_be_made_is_said_at_the_start(tmp_path: Path) -> None:
    """A new file is not written until its first message, but a directory it could not
    be written in is reported when the session starts."""
    (tmp_path / "file").write_text("in the way", encoding="utf-8")
    path = tmp_path / "file" / "sessions" / "s.jsonl"
    with pytest.raises(
        HistoryError, match=rf"^cannot create session file {re.escape(str(path))}: "
    ):
        SessionFile.create(path)


@posix_only
@pytest.mark.skipif(sys.platform != "win32" and os.geteuid() == 0, reason="root writes anywhere")
def test_a_directory_that_cannot_be_written_is_said_at_the_start(tmp_path: Path) -> None:
    """A sessions directory without write permission is reported when the session starts."""
    directory = tmp_path / "sessions"
    directory.mkdir(mode=0o500)
    path = directory / "s.jsonl"
    expected = f"cannot create session file {path}: its directory {directory} is not writable"
    with pytest.raises(HistoryError, match=full(expected)):
        SessionFile.create(path)


def test_a_file_system_without_hard_links_gets_the_file_made_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a hard link cannot be made (FAT, some network shares) the first message
    still makes the file, whole, and no temporary file is left."""

    def no_links(source: object, target: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    path = write_session(tmp_path / "s.jsonl", user("kept"))
    assert [m.text for m in load_session(path).messages] == ["kept"]
    assert [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]


@posix_only
def test_a_failed_write_is_cut_back_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails half-way leaves no half line; the entry is written by the next flush."""
    path = tmp_path / "s.jsonl"
    history = new_file(path, user("a"))
    real_write = os.write

    def half_then_fail(fd: int, data: Any) -> int:
        real_write(fd, bytes(data[:10]))
        raise OSError(28, "No space left on device")

    entry_id = history.append_message_nowait(user("b"))
    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(
        HistoryError, match=full(f"cannot write session file {path}: No space left on device")
    ):
        history.flush_sync()
    monkeypatch.setattr(os, "write", real_write)
    assert load_session(path).warnings == ()  # the half line was cut off
    history.close()
    loaded = load_session(path)
    assert [m.text for m in loaded.messages] == ["a", "b"]
    assert loaded.last_entry_id == entry_id


# --- crash safety ---------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from trio_session import AssistantMessage, TextContent, UserMessage
    from trio_session.store._session_file import SessionFile

    history = SessionFile.create(sys.argv[1], cwd="/src/app")
    i = 0
    while True:
        if i % 2 == 0:
            message = UserMessage(f"question {i}")
        else:
            text = ("answer %d " % i) * (20_000 if i % 7 == 0 else 5)  # some long lines
            message = AssistantMessage(content=[TextContent(text)])
        entry_id = history.append_message_nowait(message)
        history.flush_sync()
        print(entry_id, flush=True)  # reported only once written and fsync-ed
        i += 1
    """
)


async def _read_lines(stream: trio.abc.ReceiveStream, count: int | None) -> tuple[list[str], bool]:
    """Read newline-terminated lines until ``count`` of them, or end of stream."""
    buffer = b""
    while count is None or buffer.count(b"\n") < count:
        chunk = await stream.receive_some()
        if not chunk:
            break
        buffer += chunk
    *complete, _rest = buffer.split(b"\n")
    return [line.decode() for line in complete], bool(buffer)


@posix_only
async def test_sigkill_mid_run_loses_nothing_that_was_reported_written(tmp_path: Path) -> None:
    """Acceptance 1: SIGKILL a writer mid-run; every entry it reported is there, in order."""
    path = tmp_path / "s.jsonl"
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            command = [sys.executable, "-c", WRITER, str(path)]
            run = partial(trio.run_process, command, stdout=subprocess.PIPE, check=False)
            process: trio.Process = await nursery.start(run)
            assert process.stdout is not None
            reported, _ = await _read_lines(process.stdout, 60)
            process.send_signal(signal.SIGKILL)
            more, _ = await _read_lines(process.stdout, None)  # printed before the kill landed
            reported += more
    assert process.returncode == -signal.SIGKILL
    assert len(reported) >= 60

    loaded = load_session(path)
    ids = [e.id for e in loaded.entries]
    assert ids[: len(reported)] == reported  # every reported entry, in order
    assert len(ids) - len(reported) in (0, 1)  # at most the one being reported when killed
    # The kill may even have landed inside a long write: then exactly the torn tail is reported.
    assert loaded.warnings == () or (
        len(loaded.warnings) == 1 and "incomplete last line" in loaded.warnings[0]
    )

    # Now a crash mid-write for sure: half a line at the end (after any real torn tail).
    fragment = b'{"type":"message","id":"deadbeef","parentId":"'
    with path.open("ab") as file:
        file.write(fragment)
    torn = load_session(path)
    number = path.read_bytes().count(b"\n") + 1
    size = loaded.torn_bytes + len(fragment)
    assert torn.warnings[-1] == (
        f"{path}:{number}: incomplete last line ({size} bytes, no newline at the end), "
        "probably cut off by a crash while writing; skipped"
    )
    assert [e.id for e in torn.entries] == ids  # nothing else lost

    # Resuming cuts the torn tail off and continues the chain.
    with SessionFile.resume(path) as history:
        new_id = history.append_message_nowait(user("after the crash"))
    resumed = load_session(path)
    assert resumed.warnings == ()
    assert [e.id for e in resumed.entries] == [*ids, new_id]
    assert resumed.entries[-1].parent_id == ids[-1]


def test_torn_tail_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """A last line cut off mid-write is skipped and reported; earlier entries all load."""
    path = write_session(tmp_path / "s.jsonl", user("a"), failure(), reply("b"))
    fragment = b'{"type":"message","id":"0badf00d","parentId":"x","timestamp":"2025'
    with path.open("ab") as file:
        file.write(fragment)
    loaded = load_session(path)
    assert [m.text for m in loaded.messages] == ["a", "", "b"]
    assert len(fragment) == 66
    assert loaded.warnings == (
        f"{path}:5: incomplete last line (66 bytes, no newline at the end), "
        "probably cut off by a crash while writing; skipped",
    )
    assert loaded.torn_bytes == 66


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    """A last line that is whole JSON but lacks its newline is kept; resume adds the newline."""
    path = write_session(tmp_path / "s.jsonl", user("a"), reply("b"))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    loaded = load_session(path)
    assert [m.text for m in loaded.messages] == ["a", "b"]
    assert loaded.warnings == (
        f"{path}:3: no newline at the end of the file; the last line is kept",
    )
    with SessionFile.resume(path) as history:
        history.append_message_nowait(user("c"))
    again = load_session(path)
    assert again.warnings == ()
    assert [m.text for m in again.messages] == ["a", "b", "c"]


def test_malformed_middle_lines_are_reported_by_number_and_skipped(tmp_path: Path) -> None:
    """Broken lines in the middle are skipped with their line numbers; the rest loads."""
    path = write_session(tmp_path / "s.jsonl", user("a"), reply("b"), user("c"), reply("d"))
    text = path.read_text(encoding="utf-8").splitlines()
    second, third = json.loads(text[2]), json.loads(text[3])
    broken = [
        text[0],
        text[1],
        '{"type": "message", "id": ',  # 3: not JSON
        "[1, 2]",  # 4: not an object
        json.dumps({**third, "message": {"role": "robot"}}),  # 5: not a message
        '{"no": "type"}',  # 6: not an entry
        text[0],  # 7: a second header
        "",  # blank lines are ignored
        text[4],  # 9: the last message, whose parent was on line 5
    ]
    path.write_text("\n".join(broken) + "\n", encoding="utf-8")
    loaded = load_session(path)
    assert [m.text for m in loaded.messages] == ["a", "d"]
    assert loaded.warnings == (
        f"{path}:3: not valid JSON (Expecting value at column 27); skipped",
        f"{path}:4: a JSON list, not an entry object; skipped",
        f"{path}:5: entry.message.role must be one of 'user', 'assistant', 'toolResult', "
        "'bashExecution', 'custom', 'branchSummary', 'compactionSummary', "
        "not 'robot'; skipped",
        f"{path}:6: not an entry (it needs a string type and id); skipped",
        f"{path}:7: a second session header; skipped",
        f"{path}:9: entry {json.loads(text[4])['id']} names parent {third['id']!r}, which is not "
        f"an earlier entry (a skipped line?); attached to the entry before it, "
        f"{json.loads(text[1])['id']!r}",
    )
    assert second["id"] not in [e.id for e in loaded.entries]
    assert [m.text for m in runtime_context(loaded)] == ["a", "d"]


def test_invalid_utf8_is_a_malformed_line(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are reported like any broken line."""
    path = write_session(tmp_path / "s.jsonl", user("a"))
    with path.open("ab") as file:
        file.write(b'{"type":"\xff"}\n')
    assert load_session(path).warnings == (
        f"{path}:3: not valid JSON (invalid UTF-8 at byte 10); skipped",
    )


def test_reference_entry_types_are_kept_and_ignored(tmp_path: Path) -> None:
    """Entry types this version does not know load as ``OtherEntry`` and leave the context alone."""
    path = write_session(tmp_path / "s.jsonl", user("a"))
    last = load_session(path).last_entry_id
    change = {
        "type": "some_future_entry",
        "id": "0000aaaa",
        "parentId": last,
        "timestamp": "2025-06-15T15:06:41.000Z",
        "provider": "openai",
        "modelId": "gpt-x",
    }
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(change) + "\n")
    loaded = load_session(path)
    assert loaded.warnings == ()
    other = loaded.entries[-1]
    assert isinstance(other, OtherEntry)
    assert (other.type, other.id, other.data["modelId"]) == (
        "some_future_entry",
        "0000aaaa",
        "gpt-x",
    )
    assert runtime_context(loaded) == [user("a")]


def test_newer_format_version_is_read_with_a_warning(tmp_path: Path) -> None:
    """A file from a newer writer is read as far as it goes, with a warning."""
    path = write_session(tmp_path / "s.jsonl", user("a"))
    text = path.read_text(encoding="utf-8").replace('"version":3', '"version":9', 1)
    path.write_text(text, encoding="utf-8")
    loaded = load_session(path)
    assert loaded.warnings == (
        f"{path}:1: format version 9 is newer than this reader's (3); reading the entries it knows",
    )
    assert loaded.messages == (user("a"),)


# --- bad files: clear errors, never a traceback -------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "is empty: it has no session header"),
        (b"\n  \n", "is empty: it has no session header"),
        (
            b'{"type":"session","vers',
            "has no complete session header: line 1 was cut off (23 bytes, no newline at the end)",
        ),
        (
            b"not json\n",
            "does not start with a session header: line 1 is not valid JSON "
            "(Expecting value at column 1)",
        ),
        (
            b'{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"x","message":{}}\n',
            "does not start with a session header: line 1 has type 'message', not type 'session'",
        ),
        (
            b"[]\n",
            "does not start with a session header: line 1 has a JSON list, not type 'session'",
        ),
        (
            b'{"type":"session","version":0,"id":"x","timestamp":"t","cwd":"/"}\n',
            "has format version 0; this reader needs version 1 or later",
        ),
        (
            b'{"type":"session","version":3,"id":"x","timestamp":"t"}\n',
            "has an invalid session header on line 1: header.cwd is missing",
        ),
    ],
)
def test_broken_or_missing_header_is_a_clear_error(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    """A header-less, torn-header or foreign file raises ``HistoryError`` naming the file."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(content)
    with pytest.raises(HistoryError, match=full(f"session file {path} {problem}")) as info:
        load_session(path)
    assert info.value.path == path
    assert isinstance(info.value, TrioSessionError)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    """Loading or resuming a file that is not there says so."""
    path = tmp_path / "nope.jsonl"
    with pytest.raises(HistoryError, match=full(f"session file {path} does not exist")):
        load_session(path)
    with pytest.raises(HistoryError, match=full(f"session file {path} does not exist")):
        SessionFile.resume(path)


@posix_only
def test_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A directory where a session file should be is reported, not a traceback."""
    expected = f"cannot read session file {tmp_path}: it is a directory, not a regular file"
    with pytest.raises(HistoryError, match=full(expected)):
        load_session(tmp_path)


def test_resume_of_a_headerless_file_refuses_and_leaves_it_alone(tmp_path: Path) -> None:
    """Resuming a file that is not a session never writes to it."""
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b'{"hello": "world"}\n')
    expected = (
        f"session file {path} does not start with a session header: line 1 has type None, "
        "not type 'session'"
    )
    with pytest.raises(HistoryError, match=full(expected)):
        SessionFile.resume(path)
    assert path.read_bytes() == b'{"hello": "world"}\n'


# --- the runtime context ---------------------------------------------------------------------


def context_of(tmp_path: Path, *messages: Message) -> tuple[LoadedSession, list[Message]]:
    """Write ``messages`` to a file, load it, and rebuild its runtime context."""
    loaded = load_session(write_session(tmp_path / "s.jsonl", *messages))
    return loaded, runtime_context(loaded)


def test_two_503s_then_success_leave_no_error_in_the_context(tmp_path: Path) -> None:
    """R-20, R-51: the file keeps both 503 errors; the resumed runtime context has none."""
    loaded, context = context_of(tmp_path, user(), failure(), failure(), reply())
    errors = [m for m in loaded.messages if isinstance(m, AssistantMessage) and m.failed]
    assert len(errors) == 2
    assert context == [user(), reply()]


def test_the_last_failure_of_a_turn_stays(tmp_path: Path) -> None:
    """R-15a, R-25: a chain that gave up leaves its final error in the context."""
    _, context = context_of(
        tmp_path, user("a"), failure(), failure("400 Bad Request"), user("b"), failure()
    )
    assert context == [user("a"), failure("400 Bad Request"), user("b"), failure()]


def test_aborted_reattempt_is_dropped_only_if_retried(tmp_path: Path) -> None:
    """R-31: an aborted message is treated like an error: dropped if another answer followed."""
    aborted = failure("", reason="aborted")
    _, context = context_of(tmp_path, user("a"), aborted, reply("x"), user("b"), failure(), aborted)
    assert context == [user("a"), reply("x"), user("b"), aborted]


def test_failure_between_tool_results_and_the_answer_is_dropped(tmp_path: Path) -> None:
    """R-20: a retried error after a tool round trip goes; the tool call and result stay."""
    call = AssistantMessage(
        content=[ToolCall("c1", "read", {})], stop_reason="toolUse", timestamp=4
    )
    result = ToolResultMessage("c1", "read", (TextContent("data"),), timestamp=5)
    _, context = context_of(tmp_path, user(), call, result, failure(), reply())
    assert context == [user(), call, result, reply()]


def test_compaction_drops_what_came_before_the_first_kept_entry(tmp_path: Path) -> None:
    """R-50: messages before ``firstKeptEntryId`` leave the context; the file keeps them."""
    path = tmp_path / "s.jsonl"
    result = CompactionResult("dropped", 100, 40, 2)
    with new_file(path, user("a"), reply("1"), user("b"), reply("2")) as history:
        loaded = load_session(path)
        third = loaded.entries[2].id
        history.append_compaction_nowait(result, first_kept_entry_id=third)
        history.append_message_nowait(user("c"))
        history.append_message_nowait(failure(ERR_OVERFLOW))
        history.append_compaction_nowait(result, first_kept_entry_id=None)
        history.append_message_nowait(reply("3"))
    loaded = load_session(path)
    assert loaded.warnings == ()
    assert len(loaded.messages) == 7
    assert [type(e) for e in loaded.entries].count(CompactionEntry) == 2
    # The last compaction on the branch stands for everything before it (the reference's
    # buildSessionContext): its summary, then nothing kept, then what came after.
    last = loaded.entries[-2]
    assert isinstance(last, CompactionEntry)
    summary = CompactionSummaryMessage("dropped", 100, timestamp=int(T0 * 1000))
    assert runtime_context(loaded) == [summary, reply("3")]


def test_compaction_naming_an_unknown_entry_keeps_nothing_before_it(tmp_path: Path) -> None:
    """A compaction whose first kept entry is not an earlier message warns and cuts everything."""
    path = tmp_path / "s.jsonl"
    with new_file(path, user("a"), reply("1")) as history:
        history.append_compaction_nowait(
            CompactionResult("s", 2, 1, 2), first_kept_entry_id="feedf00d"
        )
        history.append_message_nowait(user("b"))
    loaded = load_session(path)
    assert loaded.warnings == (
        f"{path}:4: compaction keeps from entry 'feedf00d', which is not an earlier entry; "
        "nothing before it stays in the runtime context",
    )
    summary = CompactionSummaryMessage("s", 2, timestamp=int(T0 * 1000))
    assert runtime_context(loaded) == [summary, user("b")]


def test_reference_compaction_without_our_extra_fields_loads(tmp_path: Path) -> None:
    """The reference's compaction entries (no tokensAfter / messagesRemoved) are read."""
    path = write_session(tmp_path / "s.jsonl", user("a"), reply("1"), user("b"))
    loaded = load_session(path)
    entry = {
        "type": "compaction",
        "id": "c0c0c0c0",
        "parentId": loaded.last_entry_id,
        "timestamp": "2025-06-15T15:06:41.000Z",
        "summary": "earlier work",
        "firstKeptEntryId": loaded.entries[2].id,
        "tokensBefore": 5000,
        "details": {"anything": 1},
    }
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(entry) + "\n")
    again = load_session(path)
    compaction = again.entries[-1]
    assert isinstance(compaction, CompactionEntry)
    assert (compaction.tokens_before, compaction.tokens_after, compaction.messages_removed) == (
        5000,
        None,
        None,
    )
    assert compaction.details == {"anything": 1}
    summary = CompactionSummaryMessage("earlier work", 5000, timestamp=1_750_000_001_000)
    assert runtime_context(again) == [summary, user("b")]


# --- a live session, persisted through its events, then resumed ------------------------------


def persist(session: AgentSession, history: SessionFile) -> Callable[[], None]:
    """Stage every finished message and every compaction of ``session`` into ``history``.

    This is the integration recipe: ``append_*_nowait`` in the (synchronous) event
    callback, ``await history.flush()`` after the prompt.
    """

    def on_event(event: SessionEvent) -> None:
        if isinstance(event, MessageEnd):
            history.append_message_nowait(event.message)
        elif isinstance(event, CompactionEnd) and event.result is not None:
            kept = session.messages[0] if session.messages else None
            first = history.entry_id_of(kept) if kept is not None else None
            history.append_compaction_nowait(event.result, first_kept_entry_id=first)

    return session.subscribe(on_event)


async def run_and_resume(
    tmp_path: Path,
    script: Sequence[FauxReply],
    prompts: Sequence[str],
    *,
    settings: dict[str, Any] | None = None,
    model: Model | None = None,
    during: Callable[[AgentSession], Any] | None = None,
) -> tuple[AgentSession, LoadedSession]:
    """Run prompts in a session persisted to a file; return the session and the loaded file."""
    path = tmp_path / "s.jsonl"
    provider = FauxProvider(list(script))
    async with (
        open_history(path) as history,
        open_session(provider, model, settings=settings, session_id=history.header.id) as session,
    ):
        persist(session, history)
        async with trio.open_nursery() as nursery:
            if during is not None:
                nursery.start_soon(during, session)
            for text in prompts:
                await session.prompt(text)
            nursery.cancel_scope.cancel()
        await history.flush()
    return session, load_session(path)


async def test_resumed_context_after_two_503s_equals_the_live_one(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Acceptance 2, R-20, R-51: two 503s then success; file has both errors, context none."""
    session, loaded = await run_and_resume(
        tmp_path,
        [FauxReply(error=ERR_503), FauxReply(error=ERR_503), FauxReply(text="Hi!")],
        ["Hi"],
    )
    file_errors = [
        m.error_message for m in loaded.messages if isinstance(m, AssistantMessage) and m.failed
    ]
    assert file_errors == [ERR_503, ERR_503]
    assert list(loaded.messages) == list(session.history)
    assert runtime_context(loaded) == list(session.messages)
    assert [m.role for m in runtime_context(loaded)] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("script", "prompts"),
    [
        pytest.param(["!" + ERR_503] * 4, ["Hi"], id="R-15a-max-exceeded"),
        pytest.param(["!" + ERR_503, "!400 Bad Request: no"], ["Hi"], id="R-25-non-retryable"),
        pytest.param(
            ["one", "!" + ERR_503, "two", "!" + ERR_503, "!" + ERR_503, "three"],
            ["a", "b", "c"],
            id="turns",
        ),
        pytest.param(
            ["a1", "b1", "c1", "!" + ERR_OVERFLOW, "c2"], ["a", "b", "c"], id="R-50-overflow"
        ),
    ],
)
async def test_resumed_context_equals_the_live_one(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, script: list[str], prompts: list[str]
) -> None:
    """R-15a, R-20, R-25, R-50, R-51: what the file rebuilds is what the live session had."""
    replies = [FauxReply(error=s[1:]) if s.startswith("!") else FauxReply(text=s) for s in script]
    model = Model(id="m", provider="faux", context_window=200_000)
    session, loaded = await run_and_resume(tmp_path, replies, prompts, model=model)
    assert loaded.warnings == ()
    assert list(loaded.messages) == list(session.history)
    assert runtime_context(loaded) == list(session.messages)


async def test_retry_cancelled_in_its_sleep_is_the_documented_difference(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """R-30, R-20a: after ``abort_retry()`` in the backoff the live context had already
    dropped the error; the file cannot tell, so the resumed context keeps it (never sent)."""

    async def cancel_in_backoff(session: AgentSession) -> None:
        await trio.sleep(1.0)  # inside the first 2 s backoff
        session.abort_retry()

    session, loaded = await run_and_resume(
        tmp_path, [FauxReply(error=ERR_503)], ["Hi"], during=cancel_in_backoff
    )
    assert [m.role for m in session.messages] == ["user"]
    assert runtime_context(loaded) == [*session.messages, session.history[-1]]


async def test_resume_continues_the_same_file(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A resumed session starts from the rebuilt context and appends to the same chain."""
    path = tmp_path / "s.jsonl"
    await run_and_resume(tmp_path, [FauxReply(error=ERR_503), FauxReply(text="one")], ["a"])
    async with open_history(path) as history:
        assert history.loaded is not None
        before = history.loaded.last_entry_id
        context = runtime_context(history.loaded)
        entry_id = await history.append_message(user("b"))
        assert history.entry_id_of(context[0]) == history.loaded.entries[0].id
    loaded = load_session(path)
    assert loaded.entries[-1].parent_id == before
    assert loaded.last_entry_id == entry_id
    assert isinstance(loaded.entries[-1], MessageEntry)


# --- --continue ----------------------------------------------------------------------------------


def test_latest_session_is_the_most_recently_written(tmp_path: Path) -> None:
    """``--continue``: the newest ``*.jsonl`` with a session header, by modification time."""
    old = write_session(tmp_path / "b-old.jsonl", user())
    new = write_session(tmp_path / "a-new.jsonl", user())
    os.utime(old, ns=(1_000_000_000_000, 1_000_000_000_000))
    os.utime(new, ns=(2_000_000_000_000, 2_000_000_000_000))
    (tmp_path / "z-not-a-session.jsonl").write_text('{"type": "message"}\n', encoding="utf-8")
    (tmp_path / "z-notes.txt").write_text("x", encoding="utf-8")
    (tmp_path / "z-dir.jsonl").mkdir()
    assert latest_session(tmp_path) == new


def test_latest_session_passes_by_a_header_only_file(tmp_path: Path) -> None:
    """F10: a newer file with no message (an older version's, left by a session ended at
    once) is not what ``--continue`` goes on with; the last conversation is."""
    talked = write_session(tmp_path / "a.jsonl", user())
    os.utime(talked, ns=(1_000_000_000_000, 1_000_000_000_000))
    empty = tmp_path / "b.jsonl"
    empty.write_text(json.dumps(lines(talked)[0]) + "\n", encoding="utf-8")
    named = tmp_path / "c.jsonl"
    named.write_text(
        json.dumps(lines(talked)[0])
        + "\n"
        + json.dumps({"type": "session_info", "id": "1", "parentId": None, "name": "x"})
        + "\n",
        encoding="utf-8",
    )
    assert latest_session(tmp_path) == talked


@posix_only
def test_latest_session_passes_by_one_open_for_writing(tmp_path: Path) -> None:
    """F10: the newest conversation is open for writing (another process's lock): the one
    before it is continued, and the passed one is named; if all are open, the newest."""
    older = write_session(tmp_path / "a.jsonl", user())
    os.utime(older, ns=(1_000_000_000_000, 1_000_000_000_000))
    busy = write_session(tmp_path / "b.jsonl", user())
    with SessionFile.resume(busy):
        assert find_latest(tmp_path) == Latest(older, (busy,))
        with SessionFile.resume(older):
            assert find_latest(tmp_path) == Latest(busy)
    assert find_latest(tmp_path) == Latest(busy)


def test_latest_session_of_an_empty_or_missing_directory_is_none(tmp_path: Path) -> None:
    """No session to continue: ``None``, not an error."""
    assert latest_session(tmp_path) is None
    assert latest_session(tmp_path / "missing") is None


def test_latest_session_of_a_file_is_an_error(tmp_path: Path) -> None:
    """A path that is not a directory is reported clearly."""
    path = write_session(tmp_path / "s.jsonl", user())
    with pytest.raises(
        HistoryError, match=rf"^cannot list session directory {re.escape(str(path))}: "
    ):
        latest_session(path)


async def test_list_sessions_newest_first_with_first_message_and_name(tmp_path: Path) -> None:
    """``list_sessions``: sessions with a conversation, newest first, first message and name."""
    from trio_session import FauxProvider, FauxReply, list_sessions, open_session

    older, newer, empty = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    async with open_session(FauxProvider([FauxReply(text="x")]), history=older) as session:
        await session.prompt("first   question\nwith two lines")
    async with open_session(FauxProvider([FauxReply(text="y")]), history=newer) as session:
        await session.prompt("second")
        session.set_session_name("named")
    async with open_session(FauxProvider([]), history=empty):
        pass
    (tmp_path / "notes.jsonl").write_text("not a session\n")
    (tmp_path / "other.txt").write_text("")
    os.utime(older, (1_000_000, 1_000_000))
    found = list_sessions(tmp_path)
    assert [s.path for s in found] == [newer, older]
    assert found[0].name == "named"
    assert found[0].first_message == "second"
    assert found[1].first_message == "first question with two lines"
    assert found[1].modified == 1_000_000
    assert found[1].messages == 2
    assert list_sessions(tmp_path / "missing") == []
