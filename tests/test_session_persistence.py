"""open_session(history=…) and settings write-back: what must survive (R-20, R-37, R-51)."""

from __future__ import annotations

import json
from pathlib import Path

import trio
import trio.testing

from trio_session import (
    AssistantMessage,
    FauxProvider,
    SessionEvent,
    SettingsStore,
    open_session,
)
from trio_session.store._entries import MessageEntry, SettingsChangeEntry
from trio_session.store._history import load_session

from .conftest import ERR_503, err, ok


async def test_r51_history_file_keeps_errors_resume_drops_them(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-20, R-51: two 503s then success: the file has both errors, the resumed context none."""
    path = tmp_path / "session.jsonl"
    async with open_session(FauxProvider([err(), err(), ok("one")]), history=path) as session:
        await session.prompt("first")
        session_id = session.session_id
    loaded = load_session(path)
    errors = [
        e.message.error_message
        for e in loaded.entries
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]
    assert errors == [ERR_503, ERR_503, None]
    assert loaded.header.id == session_id

    provider = FauxProvider([ok("two")])
    async with open_session(provider, history=path) as resumed:
        assert resumed.session_id == session_id
        assert [(m.role, m.text) for m in resumed.messages] == [
            ("user", "first"),
            ("assistant", "one"),
        ]
        assert len(resumed.history) == 4
        await resumed.prompt("second")
    sent = [m.text for m in provider.requests[0].messages]
    assert sent == ["first", "one", "second"]
    assert [m.text for m in load_session(path).messages][-2:] == ["second", "two"]


async def test_history_is_on_disk_before_the_backoff_sleep(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """Entries of a failed attempt are on disk while the chain sleeps (crash-safe)."""
    path = tmp_path / "session.jsonl"
    provider = FauxProvider([err(), ok()])
    backoff = trio.Event()
    async with open_session(provider, history=path) as session, trio.open_nursery() as nursery:

        def on_event(event: SessionEvent) -> None:
            if event.type == "auto_retry_start":
                backoff.set()

        session.subscribe(on_event)
        nursery.start_soon(session.prompt, "Hi")
        # The flush runs in a worker thread; under the autojump clock only the order of
        # events is meaningful, so wait for the chain's start, not for a time.
        await backoff.wait()
        on_disk = [m.role for m in load_session(path).messages]
        assert on_disk == ["user", "assistant"]
        session.abort_retry()


async def test_r37_toggle_writes_back_to_its_file(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-37, R-38: set_auto_retry_enabled updates the settings file the value came from."""
    global_file = tmp_path / "global.json"
    project_file = tmp_path / "project.json"
    global_file.write_text(json.dumps({"retry": {"maxRetries": 5}}))
    project_file.write_text(json.dumps({"retry": {"enabled": True}, "other": {"x": 1}}))
    store = SettingsStore.from_files(global_file, project_file)
    history = tmp_path / "session.jsonl"
    async with open_session(FauxProvider([ok()]), settings=store, history=history) as session:
        await session.prompt("hi")  # a new file is written with its first message
        session.set_auto_retry_enabled(False)
        assert session.auto_retry_enabled is False
        session.set_auto_compaction_enabled(False)  # set in no file: stays in memory
    assert json.loads(project_file.read_text()) == {"retry": {"enabled": False}, "other": {"x": 1}}
    assert json.loads(global_file.read_text()) == {"retry": {"maxRetries": 5}}
    assert SettingsStore.from_files(global_file, project_file).current.retry.enabled is False
    changes = [e for e in load_session(history).entries if isinstance(e, SettingsChangeEntry)]
    assert [(c.key, c.value) for c in changes] == [
        ("retry.enabled", False),
        ("compaction.enabled", False),
    ]
