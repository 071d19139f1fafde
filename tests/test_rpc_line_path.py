"""From a command line in to the lines out: what the lean per-line path keeps (issue 44).

The server writes an event's line at once, in the task that emitted it, when nothing
waits to be written and the stream takes bytes without waiting (a pipe); otherwise, and
for every answer, the line queues for the writer task. These tests pin what that must
not change, over real pipes and the real ``trio-session rpc`` process: every line whole
and in order, what a full pipe does not take counted and queued behind, a reader gone
noticed, answers timed as before, shutdown never cutting an answer, the command lines
read as ``json.loads`` reads them, and on the wire the order of ``abort_retry``'s lines
as pi's clients read them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from trio_session import FauxProvider, open_session
from trio_session.rpc import RpcServer, encode_line
from trio_session.rpc._outbox import Outbox, nowait_sender
from trio_session.rpc._wire import Rejected, decode_json_line

from .rpc_helpers import ERR_503, LONG_DELAY_MS, RawLines, retry_end, summarize
from .test_rpc_process import raw_process, rpc_args

#: More than any pipe holds at once (64 KiB on Linux), in lines of about 1 kB.
LINES = [encode_line({"n": n, "pad": "x" * 1000}) for n in range(300)]


@asynccontextmanager
async def pipe() -> AsyncIterator[tuple[trio.lowlevel.FdStream, int]]:
    """A real pipe: its writing end as the server's stream, its reading end as a
    non-blocking descriptor the test reads with ``os.read`` (no checkpoint)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    try:
        async with trio.lowlevel.FdStream(write_fd) as stream:
            yield stream, read_fd
    finally:
        os.close(read_fd)


def drain(fd: int) -> bytes:
    """Everything the pipe holds now."""
    data = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (
            b'\xef\xbb\xbf{"type": "get_state"}',
            "Unexpected UTF-8 BOM (decode using utf-8-sig) at column 1",
        ),
        (b'{"type": "get_state"} x', "Extra data at column 23"),
        (b'{"id": -Infinity}', "-Infinity is not valid JSON"),
        (b" \t ", "the line is empty; expected a JSON object"),
    ],
    ids=["bom", "extra-data", "infinity", "blank"],
)
def test_the_one_decoder_rejects_as_json_loads_does(line: bytes, error: str) -> None:
    """The decoder made once for all lines says what ``json.loads`` said of each."""
    assert decode_json_line(line) == Rejected("parse", "Failed to parse command: " + error)


def test_brackets_inside_strings_are_no_depth() -> None:
    """A line with more brackets than MAX_JSON_DEPTH, all inside a string, is read."""
    text = "[{" * 300
    assert decode_json_line(f'{{"type": "get_state", "x": "{text}"}}'.encode()) == {
        "type": "get_state",
        "x": text,
    }


def never_broken() -> None:
    raise AssertionError("the pipe's reader is there")


async def test_an_idle_outbox_writes_the_line_in_the_task_that_puts_it() -> None:
    """Nothing queued: the line is in the pipe when put returns, with no writer-task hop."""
    async with pipe() as (stream, read_fd), trio.open_nursery() as nursery:
        outbox = Outbox(1 << 20, 1 << 19, nowait_sender(stream))
        nursery.start_soon(outbox.pump, stream, never_broken)
        await trio.testing.wait_all_tasks_blocked()
        outbox.put(b'{"type":"auto_retry_end"}\n')
        assert drain(read_fd) == b'{"type":"auto_retry_end"}\n'  # no checkpoint since
        assert outbox.queued == 0
        outbox.close()


async def test_an_answer_waits_for_the_writer_task_and_events_queue_behind_it() -> None:
    """queue() (answers) never writes at once: the line waits for the writer task, and
    an event put meanwhile goes out after it, not before."""
    async with pipe() as (stream, read_fd), trio.open_nursery() as nursery:
        outbox = Outbox(1 << 20, 1 << 19, nowait_sender(stream))
        nursery.start_soon(outbox.pump, stream, never_broken)
        await trio.testing.wait_all_tasks_blocked()
        outbox.queue(b'{"type":"response"}\n')
        outbox.put(b'{"type":"agent_start"}\n')
        assert drain(read_fd) == b""
        await trio.testing.wait_all_tasks_blocked()  # the writer task's turn
        assert drain(read_fd) == b'{"type":"response"}\n{"type":"agent_start"}\n'
        outbox.close()


async def test_a_full_pipe_queues_the_rest_behind_in_order() -> None:
    """What the pipe does not take waits, counted; a line put meanwhile queues behind it
    even once the pipe has room again; the reader gets every line whole, in order."""
    async with pipe() as (stream, read_fd), trio.open_nursery() as nursery:
        outbox = Outbox(1 << 30, 1 << 30, nowait_sender(stream))
        nursery.start_soon(outbox.pump, stream, never_broken)
        await trio.testing.wait_all_tasks_blocked()
        for line in LINES:
            outbox.put(line)
        waiting = outbox.queued
        got = drain(read_fd)  # room in the pipe, and the writer task has not run
        assert got
        assert waiting == sum(map(len, LINES)) - len(got)
        outbox.put(b'{"last":true}\n')  # must not overtake what waits
        assert drain(read_fd) == b""
        assert outbox.queued == waiting + len(b'{"last":true}\n')
        outbox.close()
        while outbox.queued:
            await trio.testing.wait_all_tasks_blocked()  # the writer sent what fits
            got += drain(read_fd)
        got += drain(read_fd)
    assert got == b"".join(LINES) + b'{"last":true}\n'


async def test_a_reader_gone_stops_the_output_and_says_so() -> None:
    """The pipe's reader closed: the line is not lost silently in the putting task; the
    writer task finds the pipe broken, drops what waits and calls on_broken once."""
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    broken: list[bool] = []
    async with trio.lowlevel.FdStream(write_fd) as stream:
        outbox = Outbox(1 << 20, 1 << 19, nowait_sender(stream))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(outbox.pump, stream, lambda: broken.append(True))
            outbox.put(b'{"type":"auto_retry_end"}\n')
            assert outbox.queued == len(b'{"type":"auto_retry_end"}\n')  # for the writer
        assert broken == [True]
        assert outbox.broken
        assert outbox.queued == 0
        outbox.put(b'{"type":"agent_settled"}\n')  # nothing more is written or kept
        assert outbox.queued == 0


async def test_a_stream_without_a_descriptor_has_no_nowait_sender() -> None:
    """In-memory streams (tests, a socket) keep the writer task for every line."""
    one, two = trio.testing.memory_stream_pair()
    assert nowait_sender(one) is None
    async with pipe() as (stream, _):
        assert nowait_sender(trio.StapledStream(stream, two)) is not None


async def test_shutdown_while_answering_lets_the_answer_finish() -> None:
    """shutdown() in the middle of an answer (new_session opening its session) does not
    cancel it: the line is answered, then the server ends."""
    provider = FauxProvider([])
    opened = 0
    release = trio.Event()

    @asynccontextmanager
    async def sessions() -> AsyncIterator[Any]:
        nonlocal opened
        opened += 1
        if opened == 2:
            await release.wait()
        async with open_session(provider) as session:
            yield session

    client, server_end = trio.testing.memory_stream_pair()
    server = RpcServer(sessions, server_end)
    raw = RawLines(client, client)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            await raw.send({"id": 1, "type": "new_session"})
            await trio.testing.wait_all_tasks_blocked()  # the second session waits
            server.shutdown()
            release.set()
            rest = await raw.rest()
    assert [(o["id"], summarize(o)) for o in rest] == [(1, "response new_session ok")]


async def test_abort_retry_round_after_round_on_one_process(tmp_path: Path) -> None:
    """As the benchmark drives it: each abort_retry gets exactly one auto_retry_end, then
    agent_settled, then its answer; one sent again in the same write gets only its answer;
    the server is idle after each round and exits 0 with nothing more to say."""
    rounds = 5
    script = [{"error": ERR_503}] * rounds
    args = rpc_args(tmp_path, script, {"retry": {"baseDelayMs": LONG_DELAY_MS}})
    seen: list[list[Any]] = []
    with trio.fail_after(60):
        async with raw_process(args) as (process, raw):
            for n in range(rounds):
                await raw.send({"id": f"p{n}", "type": "prompt", "message": "retry me"})
                while (await raw.read())["type"] != "auto_retry_start":
                    pass
                burst = [
                    {"id": f"a{n}", "type": "abort_retry"},
                    {"id": f"b{n}", "type": "abort_retry"},
                    {"id": f"s{n}", "type": "get_state"},
                ]
                await raw.send(b"".join(encode_line(c) for c in burst))
                lines = [await raw.read()]
                while lines[-1].get("id") != f"s{n}":
                    lines.append(await raw.read())
                seen.append([(o.get("id"), summarize(o)) for o in lines])
            await raw.send_stream.aclose()
            assert await raw.rest() == []
            assert await process.wait() == 0
    assert seen == [
        [
            (None, retry_end(False, 1, "Retry cancelled")),
            (None, "agent_settled"),
            (f"a{n}", "response abort_retry ok"),
            (f"b{n}", "response abort_retry ok"),
            (f"s{n}", "response get_state ok isStreaming=False isRetrying=False retryAttempt=0"),
        ]
        for n in range(rounds)
    ]
