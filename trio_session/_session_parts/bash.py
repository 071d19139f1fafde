"""``bash``: a shell command whose output joins the conversation (the reference's ``bash``).

A command run while a prompt runs has its message added when the prompt is over, so it
never lands between a tool call and its result: the ``Journal`` keeps it until the
controller ends the prompt (``Journal.flush_pending``). The command itself is a
``BashRun`` (``trio_session._bash``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .._errors import SessionBusyError, SessionClosedError
from .._messages import BashExecutionMessage

if TYPE_CHECKING:
    from .._bash import BashResult, BashRun
    from .._retry.controller import PromptController
    from .journal import Journal


class BashPart:
    """``AgentSession``'s ``bash`` commands (a base class of the facade)."""

    if not TYPE_CHECKING:
        __slots__ = ()
    _bash_run: BashRun | None
    _journal: Journal
    _control: PromptController

    @property
    def is_bash_running(self) -> bool:
        """Whether a ``bash`` command is running."""
        return self._bash_run is not None

    async def bash(
        self,
        command: str,
        *,
        exclude_from_context: bool = False,
        on_output: Callable[[str], None] | None = None,
    ) -> BashResult:
        """Run a shell command; its output joins the conversation (the reference's ``bash``).

        The result is recorded as a ``BashExecutionMessage`` — no event is emitted — and
        reaches the model with the next prompt, as user text (left out of the model's
        context if ``exclude_from_context``). While a prompt runs, the command runs at
        once but its message is added when the prompt is over, so it never lands between
        a tool call and its result. ``abort_bash`` stops the command.

        Args:
            command: the command line, run by the shell.
            exclude_from_context: record the result but leave it out of what the model
                is sent.
            on_output: called with each piece of output as it comes (RPC's
                ``bash_execution_update``); the result holds the whole (or its tail).

        Returns:
            What the command did: its output, exit code, and whether it was cancelled
                or cut short.

        Raises:
            SessionBusyError: another ``bash`` command is running.
            SessionClosedError: the session is closed.
            OSError: the shell could not be started.
        """
        if self._control.closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)
        if self._bash_run is not None:
            msg = "a bash command is already running; wait for it or abort_bash() first"
            raise SessionBusyError(msg)
        file = self._journal.file
        cwd = file.header.cwd if file is not None else None
        from .._bash import BashRun  # subprocess and tempfile: paid by the first command

        run = self._bash_run = BashRun(command, cwd=cwd, on_output=on_output)
        try:
            result = await run.run()
        finally:
            self._bash_run = None
        message = BashExecutionMessage(
            command=command,
            output=result.output,
            exit_code=result.exit_code,
            cancelled=result.cancelled,
            truncated=result.truncated,
            full_output_path=result.full_output_path,
            exclude_from_context=exclude_from_context or None,
        )
        if self._control.closed:
            return result  # closed meanwhile: nothing more is recorded
        if self._control.running:
            self._journal.hold(message)
        else:
            self._journal.record_bash(message)
            if self._journal.file is not None:
                await self._journal.flush()
        return result

    def abort_bash(self) -> None:
        """Stop the running ``bash`` command, if any: its process group is killed and its
        result is ``cancelled``."""
        if self._bash_run is not None:
            self._bash_run.abort()
