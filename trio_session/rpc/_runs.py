"""What the RPC server runs beside its command reader: a prompt, and a manual compaction.

Each runs in a task of the server's nursery under its own cancel scope (a ``Run``),
so the reader goes on reading while it runs: ``abort`` is read and cancels it (a
compaction's summary request and its retries included), ``get_state`` is answered, and
a shutdown aborts it. Each command is answered exactly once, whatever fails underneath:

- a prompt, once its run has started (pi 1.6.0's "preflight"): the session tells its
  ``task_status``, a ``PromptAnswer``, just before the run's first event, and the
  answer ``{"disposition": "started"}`` is queued then. A prompt that cannot start (its
  own entry cannot be written to the session file) is answered with why, instead.
  What fails after the start is told by events — ``history_write_failed``, an error or
  aborted ``message_end``, ``agent_settled`` — never by a second answer.
- a compaction, when it is over: its result, its error, or ``Compaction cancelled``
  (pi's words) when ``abort`` (or a command that aborts runs) ended it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
import trio

from .._core.classes import define, frozen
from .._core.codec import to_json
from .._core.errors import CompactionError, HistoryError, SessionBusyError
from .._session.compaction import COMPACTION_CANCELLED
from .._session.facade import AgentSession
from ._protocol import Compact, Prompt, Response

logger = logging.getLogger("trio_session.rpc")

#: ``data`` of a prompt that started a run, and of a message queued into one (pi 1.6.0's
#: ``disposition``, R-54); ``"handled"`` is never ours: no input handler consumes a prompt.
STARTED: Final[Mapping[str, Any]] = {"disposition": "started"}

#: A prompt refused while a manual compaction runs (pi 1.6.0's words).
COMPACTING: Final = (
    "Cannot submit a prompt while compaction is in progress. "
    "Wait for compaction to finish and retry."
)

#: A prompt whose task was cancelled before its run started (the server shutting down).
NOT_STARTED: Final = "the prompt was cancelled before it started"

Send = Callable[[Response], None]


@frozen
class Run:
    """A prompt or a compaction the server started: its scope and when it is over.

    Attributes:
        session: the session it runs in.
        compaction: it is a manual compaction (not a prompt).
        scope: the task's scope (cancelled for a task that had not started yet).
        done: set when the task is over, its answer queued.
    """

    session: AgentSession
    compaction: bool = False
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)


@define(eq=False)
class PromptAnswer:
    """A prompt's one answer: the session's ``task_status`` (``trio.TaskStatus[None]``).

    ``started()`` queues ``{"disposition": "started"}`` in the session's task, so it goes
    out just before the run's first event; ``give`` queues any other answer; only the
    first of them is sent. ``given`` lets the reader wait for it, keeping the order of
    the answers that of the lines (R-42).

    Attributes:
        command: the ``prompt`` command.
        send: queues a response.
        given: set once the answer is queued.
    """

    command: Prompt
    send: Send
    given: trio.Event = attrs.field(factory=trio.Event)

    def started(self, value: None = None) -> None:
        """The prompt is on disk and its run starts now."""
        self.give(Response.ok(self.command, STARTED))

    def give(self, response: Response) -> None:
        """Queue ``response``, unless the prompt was answered already."""
        if not self.given.is_set():
            self.send(response)
            self.given.set()


async def run_prompt(run: Run, answer: PromptAnswer) -> None:
    """The prompt task: ``session.prompt`` under the run's scope, answered once."""
    command = answer.command
    try:
        with run.scope:
            await run.session.prompt(command.message, images=command.images, task_status=answer)
    except HistoryError as exc:  # its history_write_failed event went out already
        answer.give(Response.failed(command, str(exc)))
    except Exception as exc:  # not a model error (those are messages): a bug
        logger.exception("rpc prompt failed")
        answer.give(Response.failed(command, f"the prompt failed: {type(exc).__name__}: {exc}"))
    finally:
        answer.give(Response.failed(command, NOT_STARTED))  # nothing if it was answered
        run.done.set()


async def run_compaction(run: Run, command: Compact, send: Send) -> None:
    """The compaction task: ``session.compact`` under the run's scope, answered when over."""
    response = Response.failed(command, COMPACTION_CANCELLED)  # the scope's cancel
    try:
        with run.scope:
            result = await run.session.compact(command.custom_instructions)
            response = Response.ok(command, to_json(result))
    except (CompactionError, HistoryError, SessionBusyError) as exc:
        response = Response.failed(command, str(exc))
    except Exception as exc:  # not a model error (the compactor raises those): a bug
        logger.exception("rpc compact failed")
        response = Response.failed(command, f"{type(exc).__name__}: {exc}")
    finally:
        send(response)
        run.done.set()
