"""``trio-session rpc``: pi's ``--mode rpc`` on stdin and stdout."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator

from .._command_keys import open_credentials
from .._core.errors import HistoryError
from .._core.events import AutoRetryStart, HistoryWriteFailed, SessionEvent
from .._session.facade import AgentSession
from .._session.opening import open_session
from .._settings.store import SettingsStore
from ..store._open_history import open_history
from ..store._session_file import SessionFile
from ._output import refused_note
from ._setup import (
    credentials_url,
    extensions,
    models,
    open_model,
    prompt_input,
    session_start,
)


def note_refused(event: SessionEvent) -> None:
    """On stderr, as chat does: nothing listens where the provider was asked (the first
    retry of a refused connection), or the session file could not be written (a full
    disk: one line per prompt it ended). stdout is the protocol's; pi's clients keep
    stderr."""
    note = None
    if isinstance(event, AutoRetryStart):
        note = refused_note(event)
    elif isinstance(event, HistoryWriteFailed):
        note = event.error
    if note is not None:
        _say(note)


def _say(note: str) -> None:
    with contextlib.suppress(OSError):
        print(f"trio-session: {note}", file=sys.stderr, flush=True)


async def run_rpc(args: argparse.Namespace, settings: SettingsStore) -> int:
    """``trio-session rpc``: serve until stdin ends or a stop signal comes.

    Exit status, as pi 1.6.0's: 0 when the input ended first; 128 + the number of the
    signal that started the shutdown otherwise (SIGTERM 143, SIGHUP 129, SIGINT 130).
    Every way out first aborts the run and writes every line owed, except a second
    signal during the shutdown, which exits at once (docs/rpc.md, "Shutdown").
    """
    from ..rpc._server import SessionRequest
    from ..rpc._stdio import serve_stdio

    loaded = extensions(args.extension)
    # A session file like pi's: new ones in the sessions directory (--session-dir), none
    # with --no-session; --session, --fork, --resume, --continue name the first one.
    start = session_start(args, settings, create_new=False)
    directory = start.directory
    first = SessionRequest(history=start.path)
    prompts = prompt_input(args)
    name = [args.name] if args.name is not None else []
    async with (
        open_model(args) as (provider, model),
        open_credentials(
            provider.name,
            None if args.agent_dir_key else args.api_key,
            credentials_url(args, settings),
            agent_dir_key=args.agent_dir_key,
        ) as credentials,
    ):
        # One settings store for every session: set_auto_retry outlives new_session,
        # as the reference's settings do.
        @contextlib.asynccontextmanager
        async def sessions(request: SessionRequest) -> AsyncIterator[AgentSession]:
            history: SessionFile | None = None
            served = False
            try:
                async with contextlib.AsyncExitStack() as stack:
                    if request.history is not None:
                        history = await stack.enter_async_context(open_history(request.history))
                    elif directory is not None:  # a new file, written with its first message
                        history = await stack.enter_async_context(
                            open_history(directory=directory, parent_session=request.parent_session)
                        )
                    session = await stack.enter_async_context(
                        open_session(
                            provider,
                            model,
                            settings=settings,
                            credentials=credentials,
                            extensions=loaded,
                            history=history,
                            system_prompt=args.system_prompt,
                            tools=args.tools,
                            models=models(args, model),
                            thinking_level=args.thinking_level,
                        )
                    )
                    if name:  # --name: the first session's
                        session.set_session_name(name.pop())
                    session.subscribe(note_refused)
                    yield session
                    served = True
            except HistoryError as exc:
                if not served:  # opening it failed: the command that asked says so
                    raise
                # What could not be saved on the way out (a full disk): said on stderr;
                # the file is whole, and the server goes on (or ends as it was ending).
                _say(str(exc))

        # The process ends with the server: a stop signal after its last line (a
        # supervisor closes stdin and signals together) changes nothing either.
        stopped_by = await serve_stdio(
            sessions,
            first_session=first,
            lean_updates=args.lean_updates,
            prompt_input=prompts,
            exiting=True,
        )
    return 0 if stopped_by is None else 128 + stopped_by
