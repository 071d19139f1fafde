"""The RPC outbox's direct write: a line leaves from the task that has it, when nothing
is queued and the writer is idle; the rest goes through the writer task, in order.

Real pipes, shrunk to one page so that a full pipe is easy to reach.
"""

from __future__ import annotations

import fcntl
import functools
import os

import trio
import trio.testing

from trio_session.rpc._server import _Outbox

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


def _small_pipe() -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(write_fd, F_SETPIPE_SZ, 4096)
    return read_fd, write_fd


async def _read_all(stream: trio.lowlevel.FdStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = await stream.receive_some(65536)
        assert chunk, "the pipe closed early"
        data += chunk
    return data


async def test_a_line_goes_out_at_once_when_the_outbox_is_idle() -> None:
    """With nothing queued, ``put`` writes the line itself: it is in the pipe before the
    writer task has run at all."""
    read_fd, write_fd = _small_pipe()
    async with (
        trio.lowlevel.FdStream(read_fd) as reader,
        trio.lowlevel.FdStream(write_fd) as writer,
    ):
        outbox = _Outbox(high_water=1 << 20, merge_after=1 << 20)
        outbox.write_now = functools.partial(os.write, writer.fileno())
        outbox.put(b'{"type":"auto_retry_end"}\n')
        assert outbox.queued == 0  # written, not queued
        assert await reader.receive_some(100) == b'{"type":"auto_retry_end"}\n'


async def test_a_full_pipe_leaves_the_rest_to_the_writer_in_order() -> None:
    """A line the pipe takes only part of: the rest is queued, later lines queue behind
    it (even once the pipe has room), and the reader gets every byte in order."""
    read_fd, write_fd = _small_pipe()
    # More than PIPE_BUF (4096) bytes, so that the pipe takes part of a line.
    lines = [b"a" * 999 + b"\n"] + [bytes([ord("b") + i]) * 5000 + b"\n" for i in range(5)]
    async with (
        trio.lowlevel.FdStream(read_fd) as reader,
        trio.lowlevel.FdStream(write_fd) as writer,
        trio.open_nursery() as nursery,
    ):
        outbox = _Outbox(high_water=1 << 20, merge_after=1 << 20)
        outbox.write_now = functools.partial(os.write, writer.fileno())
        outbox.put(lines[0])  # fits: written at once
        assert outbox.queued == 0
        outbox.put(lines[1])  # the pipe takes part of it; the rest waits for the writer
        assert 0 < outbox.queued < len(lines[1])
        for line in lines[2:]:
            outbox.put(line)
        nursery.start_soon(outbox.pump, writer, lambda: None)
        received = await _read_all(reader, sum(map(len, lines)))
        assert received == b"".join(lines)
        outbox.close()


async def test_while_the_writer_writes_lines_queue_behind_it() -> None:
    """While the writer task is in the middle of a write (blocked on a full pipe), a new
    line is queued, never written past the batch being written."""
    read_fd, write_fd = _small_pipe()
    big = b"x" * 20000 + b"\n"
    async with (
        trio.lowlevel.FdStream(read_fd) as reader,
        trio.lowlevel.FdStream(write_fd) as writer,
        trio.open_nursery() as nursery,
    ):
        outbox = _Outbox(high_water=1 << 20, merge_after=1 << 20)
        nursery.start_soon(outbox.pump, writer, lambda: None)
        outbox.put(big)  # no write_now yet: queued; the writer blocks on the full pipe
        await trio.testing.wait_all_tasks_blocked()
        outbox.write_now = functools.partial(os.write, writer.fileno())
        outbox.put(b"after\n")
        assert outbox.queued > 0
        received = await _read_all(reader, len(big) + 6)
        assert received == big + b"after\n"
        outbox.close()
