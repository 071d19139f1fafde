"""stdin and stdout as the server's stream: adapted once, here, at the edge.

``FdStream`` puts its file descriptor in non-blocking mode, and that mode belongs
to the *open file description*, which a terminal or a parent process shares with
us. So the descriptors are duplicated first (the streams own and close the
duplicates), and the blocking mode of 0 and 1 is put back on the way out, however
the server ends. While the server runs, ``sys.stdout`` points at stderr: a stray
``print`` must not tear the protocol's lines.
"""

from __future__ import annotations

import os
import signal
import sys
from contextlib import suppress

import trio

from ._protocol import MAX_LINE_BYTES
from ._server import RpcServer, SessionFactory


async def _shutdown_on_sigterm(server: RpcServer) -> None:
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            server.shutdown()


async def serve_stdio(sessions: SessionFactory, *, max_line_bytes: int = MAX_LINE_BYTES) -> None:
    """Serve the RPC protocol on this process's stdin and stdout.

    Returns at end of input or on SIGTERM, after aborting any run and writing
    everything queued (R-39, R-42).
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
        server = RpcServer(sessions, stream, max_line_bytes=max_line_bytes)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_shutdown_on_sigterm, server)
            await server.serve()
            nursery.cancel_scope.cancel(reason="rpc server done")
    finally:
        sys.stdout = saved_stdout
        with trio.CancelScope(shield=True):
            await stdin.aclose()
            await stdout.aclose()
        for fd, was_blocking in blocking.items():
            with suppress(OSError):
                os.set_blocking(fd, was_blocking)
