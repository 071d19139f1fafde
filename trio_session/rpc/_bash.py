"""The RPC ``bash`` command's task: one shell command at a time, run beside the reading."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs
import trio

from .._core.classes import define
from .._core.errors import SessionBusyError, SessionClosedError
from .._session.facade import AgentSession
from ._protocol import Bash, Response, encode_line

BASH_BUSY: Final = 'a bash command is already running; wait for its response or send "abort_bash"'


@define(eq=False)
class BashRunner:
    """Runs one ``bash`` command at a time in the server's nursery; writes its answer.

    Args:
        nursery: where the command's task runs.
        put: puts one whole output line (a ``bash_execution_update``).
        send: sends the command's answer.
    """

    _nursery: trio.Nursery = attrs.field(alias="nursery")
    _put: Callable[[bytes], None] = attrs.field(alias="put")
    _send: Callable[[Response], None] = attrs.field(alias="send")
    _done: trio.Event | None = attrs.field(default=None, init=False)

    async def start(self, session: AgentSession, command: Bash) -> Response | None:
        """Start ``command``; ``None`` (answered by its task when over), or why not.

        Args:
            session: the session that runs it.
            command: the ``bash`` command.
        """
        if self._done is not None or session.is_bash_running:
            return Response.failed(command, BASH_BUSY)
        self._done = trio.Event()
        # Started, not start_soon: when this returns, the session has the run, so an
        # abort_bash on the very next line finds it.
        await self._nursery.start(self._task, session, command)
        return None

    async def abort(self, session: AgentSession) -> None:
        """Stop the running ``bash`` command, if any; return once its answer is queued.

        Args:
            session: the session running it.
        """
        done = self._done
        if done is not None:
            session.abort_bash()
            await done.wait()

    async def _task(
        self, session: AgentSession, command: Bash, *, task_status: trio.TaskStatus[None]
    ) -> None:
        """Run one ``bash`` command while other commands (``abort_bash``) are read."""

        def stream(delta: str) -> None:  # pi 1.6.0's bash_execution_update, with the id
            update: dict[str, Any] = {"type": "bash_execution_update"}
            if command.id is not None:
                update["id"] = command.id
            update["delta"] = delta
            self._put(encode_line(update))

        try:
            running = session.bash(
                command.command,
                on_output=stream,
                exclude_from_context=bool(command.exclude_from_context),
            )
            # The parent resumes only once this task blocks, and session.bash registers
            # its run before its first checkpoint.
            task_status.started()
            result = await running
        except (SessionBusyError, SessionClosedError) as exc:
            self._send(Response.failed(command, str(exc)))
            return
        except OSError as exc:
            self._send(Response.failed(command, f"cannot run the command: {exc}"))
            return
        finally:
            done, self._done = self._done, None
            if done is not None:
                done.set()
        data: dict[str, Any] = {
            "output": result.output,
            "exitCode": result.exit_code,
            "cancelled": result.cancelled,
            "truncated": result.truncated,
        }
        if result.exit_code is None:
            del data["exitCode"]  # the reference's undefined: left out of its JSON
        if result.full_output_path is not None:
            data["fullOutputPath"] = result.full_output_path
        self._send(Response.ok(command, data))
