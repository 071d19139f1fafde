"""RpcClient: drive a ``trio-session rpc`` process (or any RPC stream) from Trio code.

```python
async with open_rpc_client(args=["--faux", "script.json"]) as client:
    with client.events() as events:
        await client.prompt("Hello")
        async for event in events:
            if event["type"] == "auto_retry_start":
                await client.abort_retry()
        ...
    await client.wait_for_idle()
```

The client writes commands with ids ``req_1``, ``req_2`` … and matches each
response to its call; everything else the server writes (events, and responses
nobody waits for) goes to every open ``RpcClient.events`` stream, as plain
JSON objects (decode them with ``trio_session.event_from_json`` if you like).

When the server goes away — the process dies or exits, the stream closes — every
call that is waiting raises ``RpcConnectionError`` naming what it waited for,
the exit status and the end of the process's stderr; so does every later call.
Nothing hangs.
"""

from __future__ import annotations

import logging
import math
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, Final

import attrs
import trio

from .._core.classes import define
from .._core.groups import unwrapped as _unwrapped
from .._core.json_deep import loads
from ._client_commands import JSONObject, SessionCommands, disposition
from ._errors import RpcCommandError, RpcConnectionError
from ._protocol import LineSplitter, encode_line

logger = logging.getLogger("trio_session.rpc")

#: Seconds ``RpcClient.aclose`` gives the server to finish after end of input,
#: before it is terminated (and, a second later, killed).
CLOSE_TIMEOUT: Final = 5.0
#: How much of the child's stderr is kept for error messages.
STDERR_KEEP: Final = 64 * 1024
#: Seconds to wait for a process's exit status once its stdout has closed.
EXIT_GRACE: Final = 5.0


def default_command(*args: str) -> list[str]:
    """``python -m trio_session rpc ARGS``, with this interpreter."""
    return [sys.executable, "-m", "trio_session", "rpc", *args]


@define(eq=False)
class _Pending:
    """One call waiting for its response."""

    command: str
    done: trio.Event = attrs.field(factory=trio.Event)
    response: JSONObject | None = None


@define(eq=False)
class RpcEventStream:
    """Events (and unmatched responses) from the server, as JSON objects.

    Made by ``RpcClient.events``. Iteration ends when the client is closed,
    and raises ``RpcConnectionError`` if the server went away.

    Attributes:
        client: the client the events come from.
        receive: the channel the client delivers them to.
    """

    _client: RpcClient
    _receive: trio.MemoryReceiveChannel[JSONObject]

    def __aiter__(self) -> RpcEventStream:
        return self

    async def __anext__(self) -> JSONObject:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            self._client._raise_if_lost("waiting for events")
            raise StopAsyncIteration from None

    def drain(self) -> list[JSONObject]:
        """Everything received and not yet read, without waiting."""
        out: list[JSONObject] = []
        with suppress(trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            while True:
                out.append(self._receive.receive_nowait())
        return out

    async def next(self, event_type: str | None = None) -> JSONObject:
        """The next object (of ``event_type``, skipping others).

        Args:
            event_type: the ``type`` to wait for; any if ``None``.

        Raises:
            RpcConnectionError: the server went away first, or the stream ended.
        """
        async for event in self:
            if event_type is None or event.get("type") == event_type:
                return event
        what = f"a {event_type!r} event" if event_type else "an event"
        msg = f"the rpc client closed while waiting for {what}"
        raise RpcConnectionError(msg)


@define(eq=False)
class RpcClient(SessionCommands):
    """A connection to an RPC server; make one with ``open_rpc_client`` or
    ``connect_rpc``.

    Every command method sends one line and waits for its response; a response
    with ``success: false`` raises ``RpcCommandError``. All methods must be
    called from tasks of the Trio run the client was opened in.

    Attributes:
        send_stream: where command lines are written.
        receive_stream: where responses and events are read.
        process: the server's child process, if the client started one (its exit status and stderr
            go into ``RpcConnectionError``).
    """

    _send_stream: trio.abc.SendStream = attrs.field(alias="send_stream")
    _receive_stream: trio.abc.ReceiveStream = attrs.field(alias="receive_stream")
    _process: trio.Process | None = attrs.field(default=None, alias="process")
    _pending: dict[str, _Pending] = attrs.field(factory=dict, init=False)
    _subscribers: list[trio.MemorySendChannel[JSONObject]] = attrs.field(factory=list, init=False)
    _next_id: int = attrs.field(default=0, init=False)
    _send_lock: trio.Lock = attrs.field(factory=trio.Lock, init=False)
    _stderr: bytearray = attrs.field(factory=bytearray, init=False)
    _stderr_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _reader_done: trio.Event = attrs.field(factory=trio.Event, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    _lost: bool = attrs.field(default=False, init=False)
    _settled: trio.Event = attrs.field(factory=trio.Event, init=False)
    _run_over: bool = attrs.field(default=True, init=False)

    # -- state ---------------------------------------------------------------

    @property
    def process(self) -> trio.Process | None:
        """The server process, if this client started one."""
        return self._process

    @property
    def stderr(self) -> str:
        """The end of what the server process wrote to stderr so far (at most 64 KiB)."""
        return self._stderr.decode("utf-8", errors="replace")

    @property
    def closed(self) -> bool:
        """Whether the connection is over (closed by us, or the server went away)."""
        return self._closing or self._lost

    # -- commands --------------------------------------------------------------

    async def request(self, command: str, /, **fields: Any) -> JSONObject:
        """Send ``{"type": command, **fields}`` and return the server's response object.

        Args:
            command: the command's ``type`` (``"get_state"``).
            **fields: its other fields, as they go on the wire (camelCase).

        Returns:
            The whole response object (``{"type": "response", "success": true, …}``).

        Raises:
            RpcCommandError: the response has ``success: false``.
            RpcConnectionError: the server went away before answering.
        """
        self._raise_if_closed(f"sending {command}")
        self._next_id += 1
        request_id = f"req_{self._next_id}"
        pending = self._pending[request_id] = _Pending(command)
        waiting = f"waiting for the response to {command} (id {request_id})"
        line = encode_line({"id": request_id, "type": command, **fields})
        try:
            try:
                async with self._send_lock:
                    await self._send_stream.send_all(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                # The server stopped reading: let the reader find out why.
                with trio.move_on_after(EXIT_GRACE + 1):
                    await self._reader_done.wait()
                self._raise_if_closed(waiting)
                msg = f"the rpc server stopped reading its input while {waiting}"
                raise RpcConnectionError(msg) from exc
            await pending.done.wait()
        finally:
            self._pending.pop(request_id, None)
        response = pending.response
        if response is None:
            self._raise_if_closed(waiting)
            msg = f"no response to {command} (id {request_id})"  # pragma: no cover
            raise RpcConnectionError(msg)
        if response.get("success") is not True:
            raise RpcCommandError(command, str(response.get("error", "")), response)
        return response

    async def prompt(
        self,
        message: str,
        *,
        images: Sequence[Mapping[str, str]] = (),
        streaming_behavior: str | None = None,
    ) -> str | None:
        """Start a prompt; returns once the server accepted it. Events follow, up to the
        run's ``agent_settled``; ``wait_for_idle`` waits for the end.

        ``images`` are ``{"type": "image", "data": base64, "mimeType": …}`` objects.
        ``streaming_behavior`` (``"steer"`` or ``"followUp"``) queues the message if
        a prompt is running; without it that is an error (``RpcCommandError``).

        Args:
            message: the user message's text.
            images: image objects sent after the text.
            streaming_behavior: ``"steer"`` or ``"followUp"``: what to do with the
                message if a prompt is running.

        Returns:
            The server's ``disposition``: ``"started"`` (a run started), ``"queued"``
                (queued into the running one, or joined to its re-attempt); ``None``
                from a server that does not say (pi before 1.6).
        """
        fields: dict[str, Any] = {"message": message}
        if images:
            fields["images"] = [dict(image) for image in images]
        if streaming_behavior is not None:
            fields["streamingBehavior"] = streaming_behavior
        return disposition(await self.request("prompt", **fields))

    async def abort(self) -> None:
        """Cancel any retry, then the run; returns when the server is idle (R-32)."""
        await self.request("abort")

    async def abort_retry(self) -> None:
        """Cancel the retry chain, if one is alive (R-29, R-40)."""
        await self.request("abort_retry")

    async def retry_now(self) -> bool:
        """Skip the rest of the backoff sleep (R-34a); whether a sleep was cut short."""
        response = await self.request("retry_now")
        return bool(response.get("data", {}).get("skipped"))

    async def set_auto_retry(self, enabled: bool) -> None:
        """Write ``retry.enabled`` on the server's session (R-37, R-40).

        Args:
            enabled: whether a retryable error starts a retry chain.
        """
        await self.request("set_auto_retry", enabled=enabled)

    async def set_auto_compaction(self, enabled: bool) -> None:
        """Write ``compaction.enabled`` on the server's session (R-50).

        Args:
            enabled: whether a context overflow is compacted and retried.
        """
        await self.request("set_auto_compaction", enabled=enabled)

    async def get_state(self) -> JSONObject:
        """The session's state: ``isStreaming``, ``messageCount`` … and
        ``autoRetryEnabled``, ``isRetrying``, ``retryAttempt`` (R-41)."""
        data: JSONObject = (await self.request("get_state"))["data"]
        return data

    async def get_messages(self) -> list[JSONObject]:
        """The runtime context, as message objects (``{"role": "user", …}``)."""
        messages: list[JSONObject] = (await self.request("get_messages"))["data"]["messages"]
        return messages

    async def new_session(self, parent_session: str | None = None) -> JSONObject:
        """Abort any run and start a fresh session; returns ``{"cancelled": false}``.

        ``parent_session`` goes into the new session file's header (``parentSession``).

        Args:
            parent_session: the path recorded as the new file's ``parentSession``.
        """
        fields: JSONObject = {}
        if parent_session is not None:
            fields["parentSession"] = parent_session
        data: JSONObject = (await self.request("new_session", **fields))["data"]
        return data

    # -- events ----------------------------------------------------------------

    @contextmanager
    def events(self) -> Iterator[RpcEventStream]:
        """Receive every event from now on, as an async iterator:

        ```python
        with client.events() as events:
            await client.prompt("Hi")
            async for event in events:
                ...
        ```

        Open it *before* the command whose events you want. The buffer is
        unbounded: a stream that is not read holds its events in memory.
        """
        send, receive = trio.open_memory_channel[JSONObject](math.inf)
        if self.closed:
            send.close()
        else:
            self._subscribers.append(send)
        try:
            yield RpcEventStream(self, receive)
        finally:
            if send in self._subscribers:
                self._subscribers.remove(send)
            send.close()
            receive.close()

    async def wait_for_idle(self) -> None:
        """Return once the server has no prompt running.

        The server's ``get_state`` decides (``isStreaming`` is false, which it is
        only after the whole logical prompt — retries, backoff sleeps, compaction —
        is over). Between questions the client waits for the run's end to show
        in the events: its ``agent_settled``.

        Raises:
            RpcConnectionError: the server went away first.
        """
        while True:
            state = await self.get_state()
            if not state.get("isStreaming"):
                return
            if not self._run_over:
                settled = self._settled
                await settled.wait()
                self._raise_if_closed("waiting for the session to become idle")

    # -- reading -----------------------------------------------------------------

    async def _read(self) -> None:
        """The reader task: route every line until the server's output ends."""
        splitter = LineSplitter(max_line_bytes=None)
        try:
            while True:
                data = await self._receive_stream.receive_some(64 * 1024)
                if not data:
                    break
                for line in splitter.feed(data):
                    assert isinstance(line, bytes)
                    self._dispatch(line)
            for line in splitter.close():
                assert isinstance(line, bytes)
                self._dispatch(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            with trio.CancelScope(shield=True):
                await self._ended()

    def _dispatch(self, line: bytes) -> None:
        try:
            data = loads(line)  # as deep as it is: a long session's get_tree
        except ValueError:  # not JSON
            logger.warning("rpc server wrote a line that is not JSON: %r", line[:200])
            return
        if not isinstance(data, dict):
            return
        if data.get("type") == "response":
            request_id = data.get("id")
            pending = self._pending.get(request_id) if isinstance(request_id, str) else None
            if pending is not None:
                pending.response = data
                pending.done.set()
                return
        self._track(data)
        for channel in self._subscribers:
            channel.send_nowait(data)  # unbounded: never blocks

    def _track(self, data: JSONObject) -> None:
        """Notice when a run's end shows in the events (for ``wait_for_idle``)."""
        kind = data.get("type")
        if kind in ("agent_start", "auto_retry_start", "compaction_start"):
            self._run_over = False
            return
        over = (
            kind == "agent_settled"  # the run is over, nothing follows by itself
            or (kind == "response" and data.get("command") == "prompt")  # a failed run
        )
        if over:
            self._run_over = True
            self._settled.set()
            self._settled = trio.Event()

    async def _read_stderr(self, stream: trio.abc.ReceiveStream) -> None:
        try:
            while data := await stream.receive_some(64 * 1024):
                self._stderr += data
                del self._stderr[:-STDERR_KEEP]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._stderr_done.set()

    async def _ended(self) -> None:
        """The server's output ended: learn why, then wake everyone who waits."""
        if self._process is not None:
            with trio.move_on_after(EXIT_GRACE):
                await self._process.wait()
            with trio.move_on_after(1):
                await self._stderr_done.wait()
        if not self._closing:
            self._lost = True
        for pending in self._pending.values():
            pending.done.set()
        for channel in self._subscribers:
            channel.close()
        self._subscribers.clear()
        self._settled.set()
        self._reader_done.set()

    # -- errors --------------------------------------------------------------------

    def _raise_if_lost(self, waiting: str) -> None:
        if self._lost:
            raise self._connection_error(waiting)

    def _raise_if_closed(self, waiting: str) -> None:
        if self._lost:
            raise self._connection_error(waiting)
        if self._closing:
            msg = f"the rpc client is closed (while {waiting})"
            raise RpcConnectionError(msg)

    def _connection_error(self, waiting: str) -> RpcConnectionError:
        process = self._process
        if process is None:
            return RpcConnectionError(f"the rpc server closed the connection while {waiting}")
        code = process.returncode
        if code is None:
            status = "closed its output (still running)"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            status = f"was killed by {name} (exit status {code})"
        else:
            status = f"exited with status {code}"
        stderr = self.stderr
        tail = stderr.strip()[-2000:]
        said = f"; its stderr ends:\n{tail}" if tail else "; it wrote nothing to stderr"
        msg = f"the rpc server process (pid {process.pid}) {status} while {waiting}{said}"
        return RpcConnectionError(msg, returncode=code, stderr=stderr)

    # -- closing -------------------------------------------------------------------

    async def aclose(self) -> None:
        """End the session: close the server's input, let it abort and exit, reap it.

        The server gets ``CLOSE_TIMEOUT`` seconds to finish after end of
        input; then it is terminated, and a second later killed. Idempotent.
        """
        if self._closing:
            return
        self._closing = True
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            if isinstance(self._send_stream, trio.abc.HalfCloseableStream):
                await self._send_stream.send_eof()
            else:
                await self._send_stream.aclose()
        process = self._process
        with trio.move_on_after(CLOSE_TIMEOUT):
            await self._reader_done.wait()
            if process is not None:
                await process.wait()
        if process is not None:
            if process.returncode is None:
                process.terminate()
                with trio.move_on_after(1):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            if process.stderr is not None:
                await process.stderr.aclose()
        await self._send_stream.aclose()
        await self._receive_stream.aclose()


@asynccontextmanager
async def _serving(client: RpcClient) -> AsyncIterator[RpcClient]:
    """Run the client's reader tasks around the block; close the client after it."""
    with _unwrapped():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._read)
            process = client.process
            if process is not None and process.stderr is not None:
                nursery.start_soon(client._read_stderr, process.stderr)
            else:
                client._stderr_done.set()
            try:
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await client.aclose()
                nursery.cancel_scope.cancel(reason="rpc client closed")


@asynccontextmanager
async def open_rpc_client(
    cmd: Sequence[str] | None = None,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    lean_updates: bool = False,
) -> AsyncIterator[RpcClient]:
    """Start an RPC server process and talk to it.

    Args:
        cmd: the command line; ``python -m trio_session rpc ARGS`` if omitted.
        args: arguments after ``rpc`` when ``cmd`` is omitted
            (``["--faux", "script.json", "--settings", "fast.json"]``).
        lean_updates: add ``--lean-updates`` to those arguments: every
            ``message_update`` then comes without the message so far, and the
            caller accumulates deltas by ``contentIndex`` (docs/rpc.md). Only
            with ``cmd`` omitted.
        env: the child's environment (inherited if omitted).
        cwd: the child's working directory.

    On exit the server's input is closed, so it aborts any run and exits; a
    server that does not is terminated, then killed. An exception raised in the
    block comes out as itself, not in an exception group.
    """
    if lean_updates and cmd is not None:
        msg = "lean_updates adds --lean-updates to the default command; put it in cmd instead"
        raise ValueError(msg)
    extra = ("--lean-updates",) if lean_updates else ()
    command = list(cmd) if cmd is not None else default_command(*args, *extra)
    process = await trio.lowlevel.open_process(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    client = RpcClient(send_stream=process.stdin, receive_stream=process.stdout, process=process)
    async with _serving(client) as served:
        yield served


@asynccontextmanager
async def connect_rpc(stream: trio.abc.Stream) -> AsyncIterator[RpcClient]:
    """Talk to an RPC server over ``stream`` (in tests: one end of
    ``trio.testing.memory_stream_pair()``, the server on the other).

    On exit the stream's sending side is closed (so the server sees end of input)
    and the client waits for the server's output to end, then closes the stream.

    Args:
        stream: a stream to the server.
    """
    client = RpcClient(send_stream=stream, receive_stream=stream)
    async with _serving(client) as served:
        yield served
