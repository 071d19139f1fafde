"""``open_history``: a session file opened (resumed or created) for the length of a block,
its blocking work in worker threads.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

import trio

from ._session_file import SessionFile


@asynccontextmanager
async def open_history(
    path: str | os.PathLike[str] | None = None,
    *,
    directory: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    session_id: str | None = None,
    parent_session: str | None = None,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[SessionFile]:
    """Open a session file for the length of a block: resume ``path`` if it exists, else create.

    ``open_history()`` starts a new file in ``default_sessions_dir``;
    ``open_history(path)`` resumes ``path`` (see ``SessionFile.loaded``) or
    starts it. A new file is written with its first message (``SessionFile.create``):
    a block left before one leaves no file. ``directory``, ``cwd``, ``session_id``
    and ``parent_session`` (the header's ``parentSession``) apply only to a new file;
    a resumed one keeps its header (use ``history.header.id`` as the session id).
    Opening and closing run in worker threads; on exit, staged entries are flushed
    and the file is closed, even if the block was cancelled.

    Args:
        path: the file to resume or create; a new file in ``directory`` if omitted.
        directory: where a new file goes; ``default_sessions_dir`` of ``cwd`` if omitted.
        cwd: the working directory a new file's header records; the current one if omitted.
        session_id: a new file's header id; a random UUID if omitted.
        parent_session: a new file's ``parentSession``.
        clock: epoch seconds, for timestamps.

    Raises:
        HistoryError: as ``SessionFile.create`` and ``SessionFile.resume``.

    Example:
        ```python
        async with open_history(path) as history:
            context = runtime_context(history.loaded) if history.loaded else []
            await history.append_message(UserMessage("Hello"))
        ```
    """
    # Anything at ``path`` (a link to nowhere, a pipe) is resumed, which says what is wrong
    # with it; creating it would only say "already exists".
    if path is not None and await trio.to_thread.run_sync(os.path.lexists, path):
        file = await trio.to_thread.run_sync(partial(SessionFile.resume, path, clock=clock))
    else:
        create = partial(
            SessionFile.create,
            path,
            directory=directory,
            cwd=cwd,
            session_id=session_id,
            parent_session=parent_session,
            clock=clock,
        )
        file = await trio.to_thread.run_sync(create)
    try:
        yield file
    finally:
        await file.aclose()
