"""What a command handler sees of the RPC server, and what the server asks a factory for.

The handlers (``_handlers_session``, ``_handlers_tree``) are functions of a ``Host``
and one command; the server is the one ``Host``. Each handler module ends with its
table ``HANDLERS`` (command class → handler), which the server's dispatch reads.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

from .._core.classes import frozen
from .._pi.prompt_input import PromptInput
from .._session.facade import AgentSession
from ._protocol import Command, Response

if TYPE_CHECKING:  # the server makes it at the first bash command
    from ._bash import BashRunner

#: ``data`` of a message queued into a run (pi 1.6.0's ``disposition``, R-54).
QUEUED: Final[Mapping[str, Any]] = {"disposition": "queued"}


@frozen(kw_only=True)
class SessionRequest:
    """What the server asks its session factory to open.

    Attributes:
        history: a session file to resume (``switch_session``, a fork or clone the
            server wrote, ``--session``); ``None`` for a new session.
        parent_session: for a new session, its header's ``parentSession``
            (``new_session {parentSession}``).
    """

    history: Path | None = None
    parent_session: str | None = None


SessionFactory: TypeAlias = Callable[..., AbstractAsyncContextManager[AgentSession]]
"""Opens a session for a ``SessionRequest``: ``lambda request: open_session(…)``.

A factory that takes no argument (``lambda: open_session(provider)``) is accepted
too; it serves ``new_session`` only (the session-file commands are then refused).
"""


def takes_request(factory: SessionFactory) -> bool:
    """Whether ``factory`` takes a ``SessionRequest``: it has a required positional parameter.

    (``functools.partial(open_session, provider)`` has none: its ``model`` has a default.)
    """
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return True
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(
        (p.kind in positional and p.default is inspect.Parameter.empty)
        or p.kind is inspect.Parameter.VAR_POSITIONAL
        for p in parameters
    )


class Host(Protocol):
    """The server as its command handlers use it."""

    @property
    def session(self) -> AgentSession:
        """The session being served now."""

    @property
    def prompt_input(self) -> PromptInput:
        """What prompt text goes through first (templates, skills)."""

    @property
    def bash(self) -> BashRunner:
        """Runs ``bash`` commands while other commands are read."""

    @property
    def serves_one(self) -> bool:
        """Whether the server was given one session (no factory: ``new_session`` refused)."""

    @property
    def opens_files(self) -> bool:
        """Whether its factory takes a ``SessionRequest`` (session files can be opened)."""

    def state(self) -> dict[str, Any]:
        """The ``get_state`` data."""

    async def abort_run(self) -> None:
        """Cancel the retry, then the run; return when the prompt task is over."""

    async def replace(self, request: SessionRequest) -> None:
        """Abort any run, open the requested session, then close the old one."""


#: A command's handler: its answer, or ``None`` when a task answers it later (``bash``).
#: Typed loosely so one table holds handlers of every command class.
Handler: TypeAlias = Callable[[Any, Any], Awaitable[Response | None]]
Handlers: TypeAlias = Mapping[type[Command], Handler]


def null(command: Command) -> Response:
    """A success answer whose ``data`` is ``null`` (the reference's "nothing to cycle")."""
    return Response(command=command.type, success=True, id=command.id, null_data=True)
