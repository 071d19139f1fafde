"""stdin and stdout as the server's stream: adapted once, here, at the edge.

``FdStream`` puts its file descriptor in non-blocking mode, and that mode belongs
to the *open file description*, which a terminal or a parent process shares with
us. So the descriptors are duplicated first (the streams own and close the
duplicates), and the blocking mode of 0 and 1 is put back on the way out, however
the server ends. While the server runs, ``sys.stdout`` points at stderr: a stray
``print`` must not tear the protocol's lines.

The shutdown protocol is pi 1.6.0's (its docs/rpc.md "Shutdown"; R-54). End of input,
or one of SIGTERM, SIGHUP and SIGINT, starts an orderly shutdown: the run is aborted,
the session closed, and every line owed is written (an ``auto_retry_start`` always gets
its ``auto_retry_end``, a run its ``agent_settled``). Once it has started, end of input
or a single signal does not interrupt it (a supervisor closes stdin and sends SIGTERM
together); a second signal ends the process at once, with ``os._exit`` and that
signal's status (128 + its number), writing nothing more. ``serve_stdio`` returns the
signal that started the shutdown, if one did: ``trio-session rpc`` exits with 128 + its
number (SIGTERM 143, SIGHUP 129, SIGINT 130), or 0 when the input ended first. Once a stop
signal has come, the stop signals stay ignored after ``serve_stdio`` returns: the program
is on its way out, and a late signal must not turn a clean exit into a death by signal.
If no signal came at all, their previous handlers are put back, for a program that goes
on after the server; one that ends with it (``trio-session rpc``) says ``exiting=True``,
and they stay ignored then too: a signal sent together with end of input can land after
the last line.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Final

import trio

from .._core.classes import define
from .._pi.prompt_input import PromptInput
from ._protocol import MAX_LINE_BYTES
from ._server import RpcServer, SessionFactory, SessionRequest

#: The signals that end the server cleanly.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@define(eq=False)
class _Stopper:
    """pi's shutdown protocol: a stop signal while serving starts the shutdown (and is
    remembered); the second signal, whatever started the shutdown, exits at once."""

    server: RpcServer
    first: signal.Signals | None = None
    count: int = 0

    async def watch(self, signals: AsyncIterator[int]) -> None:
        async for number in signals:
            self.count += 1
            if not self.server.shutting_down:
                self.first = signal.Signals(number)
                self.server.shutdown()
            elif self.count > 1:
                os._exit(128 + number)  # the second signal: at once, as pi's process.exit


async def serve_stdio(
    sessions: SessionFactory,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    first_session: SessionRequest | None = None,
    lean_updates: bool = False,
    prompt_input: PromptInput | None = None,
    exiting: bool = False,
) -> signal.Signals | None:
    """Serve the RPC protocol on this process's stdin and stdout.

    Returns at end of input, or on SIGINT, SIGTERM or SIGHUP, after aborting any run
    and writing everything queued (R-39, R-42). Returns the signal that started the
    shutdown, or None if none did (the input ended, or the output was closed, first).
    A second stop signal during the shutdown ends the process at once (``os._exit``
    with 128 + the signal's number), as pi's does. ``first_session`` is what
    ``sessions`` is asked for first; ``lean_updates`` is ``RpcServer``'s
    (``trio-session rpc --lean-updates``).

    Args:
        sessions: a session factory.
        max_line_bytes: the longest command line read (R-42).
        first_session: what ``sessions`` is asked for first; a new session if ``None``.
        lean_updates: write ``message_update`` events without the message so far.
        prompt_input: what a prompt goes through first (``RpcServer``'s).
        exiting: the program ends when this returns: the stop signals stay ignored
            after it, whatever ended the server (everything owed is written by then).
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
            if stopper.count == 0 and not exiting:
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
