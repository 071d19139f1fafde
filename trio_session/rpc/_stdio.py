"""stdin and stdout as the server's stream: adapted once, here, at the edge.

``FdStream`` puts its file descriptor in non-blocking mode, and that mode belongs
to the *open file description*, which a terminal or a parent process shares with
us. So the descriptors are duplicated first (the streams own and close the
duplicates), and the blocking mode of 0 and 1 is put back on the way out, however
the server ends. While the server runs, ``sys.stdout`` points at stderr: a stray
``print`` must not tear the protocol's lines.

SIGINT, SIGTERM and SIGHUP all end the server the way end of input does: the run is
aborted, the session closed, and every line owed is written (an ``auto_retry_start``
always gets its ``auto_retry_end``). None of them interrupts that: a signal while
shutting down, or several at once, changes nothing but the status the command exits
with, which the first signal decides. Once a stop signal has come, the stop signals stay
ignored after ``serve_stdio`` returns: the program is on its way out, and one more
signal (a supervisor sending SIGTERM after SIGHUP) must not turn a clean exit into a
death by signal. If the input simply ended, their previous handlers are put back.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Final

import attrs
import trio

from .._prompt_input import PromptInput
from ._protocol import MAX_LINE_BYTES
from ._server import RpcServer, SessionFactory, SessionRequest

#: The signals that end the server cleanly.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@attrs.define(eq=False)
class _Stopper:
    """Turns the first of the stop signals into a shutdown, and remembers which it was."""

    server: RpcServer
    first: signal.Signals | None = None

    async def watch(self, signals: AsyncIterator[int]) -> None:
        async for number in signals:
            if self.first is None:
                self.first = signal.Signals(number)
            self.server.shutdown()


async def serve_stdio(
    sessions: SessionFactory,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    first_session: SessionRequest | None = None,
    lean_updates: bool = False,
    prompt_input: PromptInput | None = None,
) -> signal.Signals | None:
    """Serve the RPC protocol on this process's stdin and stdout.

    Returns at end of input, or on SIGINT, SIGTERM or SIGHUP, after aborting any run
    and writing everything queued (R-39, R-42). Returns the first of those signals
    that came while it served, or None if none did (the input ended, or the output
    was closed). ``first_session`` is what ``sessions`` is asked for first;
    ``lean_updates`` is ``RpcServer``'s (``trio-session rpc --lean-updates``).

    Args:
        sessions: a session factory.
        max_line_bytes: the longest command line read (R-42).
        first_session: what ``sessions`` is asked for first; a new session if ``None``.
        lean_updates: write ``message_update`` events without the message so far.
        prompt_input: what a prompt goes through first (``RpcServer``'s).
    """
    blocking = {}
    for fd in (0, 1):
        with suppress(OSError):
            blocking[fd] = os.get_blocking(fd)
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    stream = trio.StapledStream(stdout, stdin)
    saved_stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        server = RpcServer(
            sessions,
            stream,
            max_line_bytes=max_line_bytes,
            first_session=first_session if first_session is not None else SessionRequest(),
            lean_updates=lean_updates,
            prompt_input=prompt_input if prompt_input is not None else PromptInput(),
        )
        stopper = _Stopper(server)
        # The receiver stays open until the server has written its last line: a signal
        # in the middle of the shutdown is taken, not left to its default action. It
        # gives back the handlers it found when it closes: "ignore", so that a signal
        # after that is not fatal either; the old ones return below if none came.
        previous = {number: signal.signal(number, signal.SIG_IGN) for number in STOP_SIGNALS}
        try:
            with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(stopper.watch, signals)
                    await server.serve()
                    nursery.cancel_scope.cancel(reason="rpc server done")
        finally:
            if stopper.first is None:
                for number, handler in previous.items():
                    signal.signal(number, handler)
        return stopper.first
    finally:
        sys.stdout = saved_stdout
        with trio.CancelScope(shield=True):
            await stdin.aclose()
            await stdout.aclose()
        for fd, was_blocking in blocking.items():
            with suppress(OSError):
                os.set_blocking(fd, was_blocking)
