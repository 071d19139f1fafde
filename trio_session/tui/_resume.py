"""The ``/resume`` picker: the other sessions of this directory, newest first."""

from __future__ import annotations

import time
from pathlib import Path

import trio

from ..store._session_list import SessionSummary, list_sessions
from ._footer import tilde
from ._picker import Picker


async def resume_picker(directory: Path, current: Path | None) -> Picker[Path]:
    """A picker of the sessions in ``directory`` but ``current``, each labelled with its
    time, name and first message.

    Args:
        directory: where this directory's sessions are.
        current: the session file being chatted with, left out.

    Raises:
        HistoryError: the directory cannot be listed.
    """
    # Reading only: a cancel may leave the thread to finish on its own.
    found = await trio.to_thread.run_sync(list_sessions, directory, abandon_on_cancel=True)
    items = [(_summary_label(s), s.path) for s in found if s.path != current]
    return Picker(
        "resume a session (enter: open · esc: close)",
        items,
        empty=f"(no other session in {tilde(directory)})",
    )


def _summary_label(summary: SessionSummary) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(summary.modified))
    name = f"[{summary.name}] " if summary.name else ""
    return f"{when}  {name}{summary.first_message}"
