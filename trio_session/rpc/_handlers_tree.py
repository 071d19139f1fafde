"""RPC handlers of the session tree: new, switch, fork, clone, entries, tree and name.

Each is a function of the server (a ``Host``) and its command, declared once in
``HANDLERS`` at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import trio

from .._core.messages import UserMessage
from ..store._history import HistoryError, LoadedSession, MessageEntry
from ..store._session_file import fork_session
from ._entries import entries_json, tree_json
from ._host import Handlers, Host, SessionRequest
from ._protocol import (
    Clone,
    Command,
    Fork,
    GetEntries,
    GetForkMessages,
    GetTree,
    NewSession,
    Response,
    SetSessionName,
    SwitchSession,
)

NO_FACTORY: Final = (
    "new_session needs a session factory; this server was given one session to serve"
)
NO_FILE_FACTORY: Final = (
    "{command} needs a session factory that takes a SessionRequest; this server cannot "
    "open session files"
)


def _file_commands_refused(host: Host, command: Command) -> Response | None:
    """Why this server cannot open session files for ``command``, if it cannot."""
    if host.serves_one or not host.opens_files:
        return Response.failed(command, NO_FILE_FACTORY.format(command=command.type))
    return None


async def _open(host: Host, command: Command, request: SessionRequest) -> Response:
    """Replace the session with ``request``'s; answered ``{"cancelled": false}``."""
    try:
        await host.replace(request)
    except HistoryError as exc:
        return Response.failed(command, str(exc))
    return Response.ok(command, {"cancelled": False})


async def _new_session(host: Host, command: NewSession) -> Response:
    if host.serves_one:
        return Response.failed(command, NO_FACTORY)
    return await _open(host, command, SessionRequest(parent_session=command.parent_session))


async def _switch_session(host: Host, command: SwitchSession) -> Response:
    refused = _file_commands_refused(host, command)
    if refused is not None:
        return refused
    return await _open(host, command, SessionRequest(history=Path(command.session_path)))


async def _current_file(
    host: Host, command: Command, *, abort_first: bool
) -> tuple[Path, LoadedSession] | Response:
    """The session file on disk, everything staged written first; or why there is none.

    With ``abort_first`` the run, if any, is aborted before, so its end is in the file;
    else it goes on, for the caller to abort once the command is known to be good.
    """
    refused = _file_commands_refused(host, command)
    if refused is not None:
        return refused
    file = host.session.history_file
    if file is None:
        return Response.failed(
            command, f"Cannot {command.type}: this session keeps no session file"
        )
    if abort_first:
        await host.abort_run()
    await file.flush()
    # Reading only: a cancel may leave the thread to finish on its own.
    loaded = await trio.to_thread.run_sync(file.read_back, abandon_on_cancel=True)
    return file.path, loaded


async def _entries(host: Host, command: GetEntries | GetTree) -> Response:
    """The session file's entries (``get_entries``) or tree (``get_tree``), read as
    written; the run, if any, goes on (what it has staged is written first)."""
    file = host.session.history_file
    if file is None:
        return Response.failed(
            command, f"Cannot {command.type}: this session keeps no session file"
        )
    await file.flush()
    leaf_id = file.leaf_id
    # Reading only: a cancel may leave the thread to finish on its own.
    if isinstance(command, GetTree):  # a long session's tree takes a while: off the loop too
        tree = await trio.to_thread.run_sync(
            lambda: tree_json(file.read_back(), leaf_id), abandon_on_cancel=True
        )
        return Response.ok(command, tree)
    loaded = await trio.to_thread.run_sync(file.read_back, abandon_on_cancel=True)
    data = entries_json(loaded, leaf_id, command.since)
    return Response.failed(command, data) if isinstance(data, str) else Response.ok(command, data)


async def _fork(host: Host, command: Fork) -> Response:
    current = await _current_file(host, command, abort_first=False)
    if isinstance(current, Response):
        return current
    path, loaded = current
    entry = loaded.entry(command.entry_id)
    if not (isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage)):
        return Response.failed(command, "Invalid entry ID for forking")  # as pi: run untouched
    # A good one ends the run, as pi's: what the fork copies (the entries before
    # ``entry``) is on disk already; the run's end goes to this file, not the fork.
    await host.abort_run()
    try:
        if entry.parent_id is None:
            request = SessionRequest(parent_session=str(path))
        else:
            forked = await trio.to_thread.run_sync(fork_session, path, entry.parent_id)
            request = SessionRequest(history=forked)
        await host.replace(request)
    except HistoryError as exc:
        return Response.failed(command, str(exc))
    return Response.ok(command, {"text": entry.message.text, "cancelled": False})


#: pi 1.6.0's refusal to clone (or fork) a session whose file is not written yet.
NOT_SAVED = "This session has not been saved yet. Send a message before cloning or forking it."


async def _clone(host: Host, command: Clone) -> Response:
    file = host.session.history_file
    if file is not None and not file.saved:  # refused before the run is touched, as pi's
        return Response.failed(command, NOT_SAVED)
    current = await _current_file(host, command, abort_first=True)
    if isinstance(current, Response):
        return current
    path, loaded = current
    if loaded.leaf_id is None:
        return Response.failed(command, "Cannot clone session: no current entry selected")
    try:
        cloned = await trio.to_thread.run_sync(fork_session, path, loaded.leaf_id)
    except HistoryError as exc:
        return Response.failed(command, str(exc))
    return await _open(host, command, SessionRequest(history=cloned))


async def _get_fork_messages(host: Host, command: GetForkMessages) -> Response:
    messages = [{"entryId": i, "text": t} for i, t in host.session.fork_messages()]
    return Response.ok(command, {"messages": messages})


async def _set_session_name(host: Host, command: SetSessionName) -> Response:
    name = command.name.strip()
    if not name:
        return Response.failed(command, "Session name cannot be empty")
    host.session.set_session_name(name)
    return Response.ok(command)


#: Each command of this module → its handler.
HANDLERS: Final[Handlers] = {
    NewSession: _new_session,
    SwitchSession: _switch_session,
    Fork: _fork,
    Clone: _clone,
    GetForkMessages: _get_fork_messages,
    GetEntries: _entries,
    GetTree: _entries,
    SetSessionName: _set_session_name,
}
