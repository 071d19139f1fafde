"""``bash``: a shell command in the session's working directory, as pi 1.6.0 runs it.

The command runs through ``trio_session._session.bash_run.BashRun`` (the runner of RPC's own
``bash`` command): in a new process group, stdout and stderr merged, the output's
tail kept within 2000 lines and 50 KB and the whole of a longer one in a temporary
file, named in the result. The answer is pi's:

- the output (``(no output)`` if none); when cut, a note saying which lines are
  shown and where the full output is;
- a non-zero exit status is an error result ending ``Command exited with code N``;
- ``timeout`` (seconds, none by default) kills the process group when it passes:
  an error result ending ``Command timed out after N seconds``;
- when the prompt is aborted (the tool's task is cancelled), the whole process
  group is killed before the cancellation goes on: nothing the command started
  outlives the abort.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from .._agent.loop import report_progress
from .._agent.tools import Tool
from .._core.classes import define
from .._core.errors import ToolError
from .._session.bash_run import BashResult, BashRun, truncate_tail
from ._common import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    Param,
    check_arguments,
    count_lines,
    format_size,
    js_number,
    parameters_schema,
    tail_of_file,
)

PARAMS = (
    Param("command", "string", "Shell command to execute"),
    Param(
        "timeout",
        "number",
        "Timeout in seconds (optional, no default timeout)",
        required=False,
    ),
)

DESCRIPTION = (
    "Execute a bash command in the current working directory. Returns stdout and stderr."
    f" Output is truncated to last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB"
    " (whichever is hit first). If truncated, full output is saved to a temp file. Optionally"
    " provide a timeout in seconds."
)

#: The longest timeout pi accepts (a 32-bit count of milliseconds).
MAX_TIMEOUT = 2_147_483.647


def _shown(result: BashResult, empty: str) -> str:
    """The output as the model sees it, with pi's note when it was cut: then the tail
    is taken again from the full output, lines counted as pi counts them."""
    if not result.truncated or result.full_output_path is None:
        return result.output or empty
    text, total = tail_of_file(Path(result.full_output_path))
    shown = len(count_lines(text))
    limit = "" if shown >= DEFAULT_MAX_LINES else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
    return (
        f"{text}\n\n[Showing lines {total - shown + 1}-{total} of {total}{limit}."
        f" Full output: {result.full_output_path}]"
    )


#: At most one progress update per this many seconds (pi's ``BASH_UPDATE_THROTTLE_MS``).
UPDATE_EVERY = 0.1


@define(eq=False)
class _Progress:
    """The output so far, reported (``tool_execution_update``) at most every
    ``UPDATE_EVERY`` seconds: output that comes sooner is reported when that time is
    up (``flush_later``, as pi's timer does), and once more at the end if something
    was not."""

    _text: str = ""
    _last: float = -math.inf
    _dirty: bool = False
    _waiting: trio.Event = attrs.field(factory=trio.Event)

    def feed(self, chunk: str) -> None:
        self._text = (self._text + chunk)[-2 * DEFAULT_MAX_BYTES :]
        self._dirty = True
        if trio.current_time() - self._last >= UPDATE_EVERY:
            self._report()
        else:
            self._waiting.set()

    async def flush_later(self) -> None:
        """Report output held back by the throttle once its time is up (runs beside
        the command until it ends)."""
        while True:
            await self._waiting.wait()
            await trio.sleep_until(self._last + UPDATE_EVERY)
            self._waiting = trio.Event()
            if self._dirty:
                self._report()

    def finish(self) -> None:
        if self._dirty:
            self._report()

    def _report(self) -> None:
        self._dirty, self._last = False, trio.current_time()
        report_progress(truncate_tail(self._text)[0])


def _with_status(text: str, status: str) -> str:
    return f"{text}\n\n{status}" if text else status


async def run_command(command: str, cwd: Path, time_limit: float | None) -> str:
    """Run ``command`` for at most ``time_limit`` seconds (pi's ``timeout``); pi's answer,
    or a ``ToolError`` carrying it."""
    timeout = time_limit
    if timeout is not None and (not math.isfinite(timeout) or timeout <= 0):
        raise ToolError("Invalid timeout: must be a finite number of seconds")
    if timeout is not None and timeout > MAX_TIMEOUT:
        raise ToolError(f"Invalid timeout: maximum is {js_number(MAX_TIMEOUT)} seconds")
    if not await trio.Path(cwd).exists():
        msg = f"Working directory does not exist: {cwd}\nCannot execute bash commands."
        raise ToolError(msg)
    progress = _Progress()
    run = BashRun(command, cwd=cwd, on_output=progress.feed)
    report_progress("")  # as pi: an empty update when the command starts

    async def deadline() -> None:
        assert timeout is not None
        await trio.sleep(timeout)
        run.abort()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(progress.flush_later)
            if timeout is not None:
                nursery.start_soon(deadline)
            result = await run.run()
            nursery.cancel_scope.cancel(reason="bash command ended")
        progress.finish()
    except OSError as exc:
        raise ToolError(f"Failed to run bash: {exc}") from exc
    if result.cancelled:  # only the deadline aborts it: a prompt's abort cancels this task
        assert timeout is not None
        status = f"Command timed out after {js_number(timeout)} seconds"
        raise ToolError(_with_status(_shown(result, ""), status))
    text = _shown(result, "(no output)")
    if result.exit_code is None:
        raise ToolError(_with_status(text, "Command terminated without an exit code"))
    if result.exit_code != 0:
        raise ToolError(_with_status(text, f"Command exited with code {result.exit_code}"))
    return text


def bash_tool(cwd: Path) -> Tool:
    """pi's ``bash`` tool, run in ``cwd``."""

    async def execute(arguments: Mapping[str, Any]) -> str:
        check_arguments("bash", PARAMS, arguments)
        timeout = arguments.get("timeout")
        return await run_command(
            arguments["command"], cwd, None if timeout is None else float(timeout)
        )

    return Tool(
        name="bash", execute=execute, description=DESCRIPTION, parameters=parameters_schema(PARAMS)
    )
