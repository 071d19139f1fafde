"""Found by the kill soak: a cancelled flush must not drop the entries it had taken."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from trio_session import SessionFile, UserMessage, load_session

# -- found by the soak ----------------------------------------------------------------------


async def run_flush(file: SessionFile, scope: trio.CancelScope) -> None:
    """``file.flush()`` inside ``scope``."""
    with scope:
        await file.flush()


async def test_a_flush_cancelled_before_its_write_leaves_its_entries_staged(
    tmp_path: Path,
) -> None:
    """Soak find: a flush cancelled after taking its batch, before its thread ran, loses none."""
    # In chat, SIGTERM landing as the run's last flush got the lock dropped the reply
    # it had taken: the file kept the prompt with no reply after it.
    path = tmp_path / "s.jsonl"
    file = SessionFile.create(path)
    file.append_message_nowait(UserMessage("kept"))
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        async with file._flush_lock:  # another flush is writing: this one waits its turn
            nursery.start_soon(run_flush, file, scope)
            await trio.testing.wait_all_tasks_blocked()
        scope.cancel()  # handed the lock, it is cancelled before its thread starts
    assert scope.cancelled_caught
    file.close()  # writes what is still staged
    loaded = load_session(path)
    users = [m.content for m in loaded.messages if isinstance(m, UserMessage)]
    assert (users, loaded.warnings) == (["kept"], ())
