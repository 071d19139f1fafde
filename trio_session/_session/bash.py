"""``bash``: a shell command whose output joins the conversation (the reference's ``bash``).

A command run while a prompt runs has its message added when the prompt is over, so it
never lands between a tool call and its result: the ``Journal`` keeps it until the
controller ends the prompt (``Journal.flush_pending``). The command itself is a
``BashRun`` (``bash_run.py``); ``BashCommands`` runs one at a time and records it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from .._core.classes import define
from .._core.errors import SessionBusyError
from .._core.messages import BashExecutionMessage

if TYPE_CHECKING:
    from .._retry.controller import PromptController
    from .bash_run import BashResult, BashRun
    from .journal import Journal


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class BashCommands:
    """One session's ``bash`` commands: at most one runs; its result is recorded.

    Attributes:
        journal: where the result is recorded (held while a prompt runs).
        control: whether the session is closed, or runs a prompt.
        running: the command running, if any.
    """

    journal: Journal
    control: PromptController
    running: BashRun | None = attrs.field(default=None, init=False)

    async def run(
        self,
        command: str,
        *,
        exclude_from_context: bool,
        on_output: Callable[[str], None] | None,
    ) -> BashResult:
        """Run ``command`` and record what it did (see ``AgentSession.bash``).

        Raises:
            SessionBusyError: another command is running.
            SessionClosedError: the session is closed.
        """
        control = self.control
        control.refuse_closed()
        if self.running is not None:
            msg = "a bash command is already running; wait for it or abort_bash() first"
            raise SessionBusyError(msg)
        journal = self.journal
        cwd = journal.file.header.cwd if journal.file is not None else None
        from .bash_run import BashRun  # subprocess and tempfile: paid by the first command

        run = self.running = BashRun(command, cwd=cwd, on_output=on_output)
        try:
            result = await run.run()
        finally:
            self.running = None
        message = BashExecutionMessage(
            command=command,
            output=result.output,
            exit_code=result.exit_code,
            cancelled=result.cancelled,
            truncated=result.truncated,
            full_output_path=result.full_output_path,
            exclude_from_context=exclude_from_context or None,
        )
        if control.closed:
            return result  # closed meanwhile: nothing more is recorded
        if control.running:
            journal.hold(message)
        else:
            journal.record_bash(message)
            if journal.file is not None:
                await journal.flush()
        return result

    def abort(self) -> None:
        """Stop the running command, if any (its process group is killed)."""
        if self.running is not None:
            self.running.abort()
