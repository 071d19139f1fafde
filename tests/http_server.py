"""A scriptable HTTP/1.1 server on 127.0.0.1, for running the provider adapters for real.

The adapters are tested against real sockets, never a mock of httpx: each test starts a
:class:`ScriptedServer` in its nursery (``await nursery.start(server.run)``), gives it
a *script* — one step per expected request — and points a provider at ``server.url``.

A step is an async function of an :class:`Exchange`: the parsed request plus the raw
connection, so a step can answer properly (:meth:`Exchange.respond`), stream an event
stream chunk by chunk (:meth:`Exchange.head`, :meth:`Exchange.chunk`), or misbehave on
purpose — stop half-way, close, reset the connection (RST), go silent, or wait for the
client to hang up (:meth:`Exchange.wait_for_disconnect`). Step factories below cover the
usual cases::

    server.script(
        respond(503, "<html><body>down</body></html>", content_type="text/html"),
        event_stream([sse({"choices": […]}), "data: [DONE]\\n\\n"]),
    )

Everything the server saw is logged: :attr:`ScriptedServer.requests` (method, path,
headers, body, arrival time) and :attr:`ScriptedServer.disconnects` (when it noticed a
client hang up). Requests beyond the script get ``418 I'm a teapot`` — not retryable,
so a wrong count shows up as a failed assertion, never as a loop.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs
import trio

Headers: TypeAlias = Sequence[tuple[str, str]]
Step: TypeAlias = "Callable[[Exchange], Awaitable[None]]"
After: TypeAlias = Literal["end", "close", "reset", "silence", "wait_for_disconnect"]

_MAX_HEAD = 64 * 1024


@attrs.frozen
class RecordedRequest:
    """A request as the server received it."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes
    time: float

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


def _bytes(data: bytes | str) -> bytes:
    return data.encode() if isinstance(data, str) else data


@attrs.define(eq=False)
class Exchange:
    """One request and the connection it came on, for a step to answer."""

    request: RecordedRequest
    _stream: trio.SocketStream
    _server: ScriptedServer
    closed: bool = attrs.field(default=False, init=False)
    complete: bool = attrs.field(default=False, init=False)

    async def send(self, data: bytes | str) -> None:
        """Send raw bytes."""
        try:
            await self._stream.send_all(_bytes(data))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._server._note_disconnect()
            raise

    async def head(
        self,
        status: int = 200,
        reason: str | None = None,
        headers: Headers = (),
        *,
        content_type: str = "text/event-stream",
        length: int | None = None,
    ) -> None:
        """Send the status line and headers: chunked unless ``length`` is given."""
        reason = _REASONS.get(status, "") if reason is None else reason
        lines = [f"HTTP/1.1 {status} {reason}".rstrip(), f"content-type: {content_type}"]
        lines.append(
            "transfer-encoding: chunked" if length is None else f"content-length: {length}"
        )
        lines.extend(f"{name}: {value}" for name, value in headers)
        await self.send("\r\n".join(lines) + "\r\n\r\n")

    async def chunk(self, data: bytes | str) -> None:
        """Send one chunk of a chunked body."""
        data = _bytes(data)
        if data:
            await self.send(b"%x\r\n%s\r\n" % (len(data), data))

    async def end(self) -> None:
        """Send the last chunk: the response is complete, the connection reusable."""
        await self.send(b"0\r\n\r\n")
        self.complete = True

    async def respond(
        self,
        status: int,
        body: bytes | str = b"",
        headers: Headers = (),
        *,
        reason: str | None = None,
        content_type: str = "application/json",
    ) -> None:
        """Send a whole response with a ``content-length``."""
        data = _bytes(body)
        await self.head(status, reason, headers, content_type=content_type, length=len(data))
        await self.send(data)
        self.complete = True

    async def close(self) -> None:
        """Close the connection cleanly (FIN)."""
        self.closed = True
        await self._stream.aclose()

    async def reset(self) -> None:
        """Abort the connection: linger 0, so closing sends RST instead of FIN."""
        self.closed = True
        self._stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await self._stream.aclose()

    async def wait_for_disconnect(self) -> None:
        """Read (and drop) whatever comes until the client hangs up."""
        try:
            while await self._stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        self._server._note_disconnect()
        self.closed = True


@attrs.define(eq=False)
class ScriptedServer:
    """An HTTP/1.1 server that answers each request with the next step of its script."""

    _script: list[Step] = attrs.field(factory=list, init=False)
    requests: list[RecordedRequest] = attrs.field(factory=list, init=False)
    disconnects: list[float] = attrs.field(factory=list, init=False)
    disconnected: trio.Event = attrs.field(factory=trio.Event, init=False)
    port: int = attrs.field(default=0, init=False)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def script(self, *steps: Step) -> None:
        """Add steps: the next requests get them, in order."""
        self._script.extend(steps)

    @property
    def bodies(self) -> list[Any]:
        """Every request body so far, parsed as JSON."""
        return [r.json() for r in self.requests]

    async def run(self, *, task_status: trio.TaskStatus[ScriptedServer]) -> None:
        """Listen on 127.0.0.1, port 0; report ready with ``task_status.started(self)``."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(self._accept, listener, nursery)
            task_status.started(self)

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        async with listener:
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._connection, stream)

    def _note_disconnect(self) -> None:
        self.disconnects.append(trio.current_time())
        self.disconnected.set()

    async def _connection(self, stream: trio.SocketStream) -> None:
        buffer = bytearray()
        try:
            while True:
                request = await self._read_request(stream, buffer)
                if request is None:
                    return
                self.requests.append(request)
                step = self._script.pop(0) if self._script else _exhausted
                exchange = Exchange(request, stream, self)
                await step(exchange)
                if exchange.closed or not exchange.complete:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went away mid-answer; noted where it was seen
        finally:
            await stream.aclose()

    async def _read_request(
        self, stream: trio.SocketStream, buffer: bytearray
    ) -> RecordedRequest | None:
        while b"\r\n\r\n" not in buffer:
            data = await stream.receive_some(65536)
            if not data:
                return None  # the client closed an idle keep-alive connection
            buffer += data
            assert len(buffer) < _MAX_HEAD, "request head too large"
        head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _version = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        body = bytearray(rest)
        while len(body) < length:
            data = await stream.receive_some(65536)
            if not data:
                return None  # the client hung up (or was killed) half-way through its request
            body += data
        buffer[:] = body[length:]
        return RecordedRequest(method, path, headers, bytes(body[:length]), trio.current_time())


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    418: "I'm a teapot",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "",
}


async def _exhausted(exchange: Exchange) -> None:
    await exchange.respond(418, "test server script exhausted", content_type="text/plain")


# -- step factories ----------------------------------------------------------------------


def respond(
    status: int,
    body: Any = b"",
    headers: Headers = (),
    *,
    reason: str | None = None,
    content_type: str | None = None,
) -> Step:
    """A step that sends one whole response; a non-string body is sent as JSON."""
    if isinstance(body, bytes | str):
        data, kind = _bytes(body), content_type or "text/plain"
    else:
        data, kind = json.dumps(body).encode(), content_type or "application/json"

    async def step(exchange: Exchange) -> None:
        await exchange.respond(status, data, headers, reason=reason, content_type=kind)

    return step


def sse(data: Any, event: str | None = None) -> str:
    """One server-sent event: ``event:`` (if given) and one ``data:`` line of JSON."""
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def event_stream(
    events: Iterable[str],
    *,
    after: After = "end",
    delay: float = 0.0,
    first_delay: float = 0.0,
    headers: Headers = (),
) -> Step:
    """A step that streams ``events`` one chunk each, then does ``after``.

    Args:
        events: the chunks to send (usually :func:`sse` strings).
        after: ``"end"`` finishes the chunked body properly; ``"close"`` closes the
            connection (FIN) without the last chunk; ``"reset"`` aborts it (RST);
            ``"silence"`` sends nothing more and keeps the connection open;
            ``"wait_for_disconnect"`` waits until the client hangs up.
        delay: seconds between chunks.
        first_delay: seconds after the headers, before the first chunk.
        headers: extra response headers.
    """
    chunks = list(events)

    async def step(exchange: Exchange) -> None:
        await exchange.head(200, headers=headers)
        await trio.sleep(first_delay)
        for i, chunk in enumerate(chunks):
            if i:
                await trio.sleep(delay)
            await exchange.chunk(chunk)
        if after == "end":
            await exchange.end()
        elif after == "close":
            await exchange.close()
        elif after == "reset":
            await exchange.reset()
        elif after == "silence":
            await trio.sleep_forever()
        else:
            await exchange.wait_for_disconnect()

    return step


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
