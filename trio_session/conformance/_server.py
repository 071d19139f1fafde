"""The conformance kit's LLM server: OpenAI-compatible chat completions over loopback HTTP.

A ``LoopbackLLM`` listens on 127.0.0.1 (port 0) and answers each
``POST …/chat/completions`` with the next *step* of its script; when the script is
used up it answers with its ``fallback`` step (by default a ``418``, which no retry
pattern matches, so a wrong request count shows up as a failed check, never a loop).

Steps are plain data, so a scenario can print what it scripted:

- ``HttpError(status, body, headers)``: one whole response.
- ``Stream(text, chunk_delay, first_delay, drop)``: a ``chat.completion.chunk`` SSE
  stream of the text, word by word, with a final usage chunk and ``[DONE]``; with
  ``drop="close"`` or ``"reset"`` the connection is closed (FIN) or reset (RST) after
  the first chunk instead.
- ``Hang()``: the head and one chunk, then nothing until the client hangs up.

Every request is recorded with its arrival time on Trio's clock (``requests``) and
the key of its ``Authorization: Bearer`` header. A request carrying a key of ``keyed``
is answered with that key's step instead, every time, without using up the script; one
carrying a prompt of ``by_prompt`` takes that prompt's next step while there is one.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Sequence
from typing import Any, Literal, TypeAlias

import attrs
import trio

from .._core.classes import define, frozen

_MAX_HEAD = 64 * 1024
#: The largest request body the kit's server reads; a longer one ends the connection.
_MAX_BODY = 64 * 1024 * 1024
_MAX_LENGTH_DIGITS = len(str(_MAX_BODY))
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    418: "I'm a teapot",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

#: Usage every streamed reply reports.
PROMPT_TOKENS = 100
COMPLETION_TOKENS = 10


@frozen
class HttpError:
    """Answer with a whole error response."""

    status: int
    body: str
    headers: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """A short label: ``503``, ``429 retry-after: 1``."""
        extra = "".join(f" {name}: {value}" for name, value in self.headers)
        return f"{self.status}{extra}"


@frozen
class Stream:
    """Answer with a streamed reply (or the start of one, then a dropped connection)."""

    text: str = "Hello from the conformance server."
    chunk_delay: float = 0.0
    first_delay: float = 0.0
    drop: Literal["close", "reset"] | None = None
    #: Extra response headers (``x-ratelimit-*``), sent with the 200.
    headers: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """``stream``, or ``stream, drop by close``."""
        return "stream" if self.drop is None else f"stream, dropped by {self.drop}"


@frozen
class Hang:
    """Send the head and the first chunk, then nothing until the client hangs up."""

    text: str = "Thinking"

    def describe(self) -> str:
        """``hang``."""
        return "hang"


@frozen
class ToolCalls:
    """Answer with a streamed reply that calls tools: each call is (id, tool name, its
    arguments), and the reply ends with ``finish_reason: "tool_calls"``."""

    calls: tuple[tuple[str, str, dict[str, Any]], ...]

    def describe(self) -> str:
        """``tools read, edit``."""
        return "tools " + ", ".join(name for _, name, _ in self.calls)


Step: TypeAlias = HttpError | Stream | Hang | ToolCalls


def error_body(message: str, kind: str = "server_error", code: str | None = None) -> str:
    """An OpenAI-style error body: ``{"error": {"message", "type", "code"}}``."""
    return json.dumps({"error": {"message": message, "type": kind, "code": code}})


@define(eq=False)
class Request:
    """A request as the server saw it: its path, body, arrival time (Trio clock), the key
    of its ``Authorization: Bearer`` header (never shown: ``repr=False``), what it was
    answered with (``step``) and when that answer was sent, or the stream ended
    (``answered``, Trio clock; ``None`` while it is being answered)."""

    path: str
    body: Any
    time: float
    key: str | None = attrs.field(default=None, repr=False)
    step: str = ""
    answered: float | None = None

    def prompt(self) -> str:
        """The text of the request's last user message: the prompt it carries."""
        messages = self.body.get("messages") if isinstance(self.body, dict) else None
        if not isinstance(messages, list):
            return ""
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        return _text(users[-1]) if users else ""


@define(eq=False)
class LoopbackLLM:
    """A scripted OpenAI-compatible server on 127.0.0.1."""

    script: list[Step] = attrs.field(factory=list)
    fallback: Step = HttpError(418, error_body("conformance script exhausted", "invalid"))
    keyed: dict[str, Step] = attrs.field(factory=dict, repr=False)
    #: Steps by prompt: a request carrying one of these prompts (``Request.prompt``) takes
    #: the next of that prompt's steps, while it has any, before the script's.
    by_prompt: dict[str, list[Step]] = attrs.field(factory=dict)
    requests: list[Request] = attrs.field(factory=list, init=False)
    port: int = attrs.field(default=0, init=False)
    arrived: trio.Event = attrs.field(factory=trio.Event, init=False)
    hung_up: list[float] = attrs.field(factory=list, init=False)
    _hang_up: trio.Event = attrs.field(factory=trio.Event, init=False)

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def wait_for_requests(self, count: int) -> None:
        """Return once ``count`` requests have arrived."""
        while len(self.requests) < count:
            await self.arrived.wait()

    async def wait_for_hang_up(self) -> None:
        """Return once a client has hung up on a ``Hang`` step."""
        await self._hang_up.wait()

    async def run(self, *, task_status: trio.TaskStatus[LoopbackLLM]) -> None:
        """Serve until cancelled; report ready with ``task_status.started(self)``."""
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

    async def _connection(self, stream: trio.SocketStream) -> None:
        buffer = bytearray()
        try:
            while True:
                head = await _read_request(stream, buffer)
                if head is None:
                    return
                path, body, key = head
                if not path.endswith("/chat/completions"):
                    keep = await _respond(stream, 404, error_body("not found", "invalid"))
                else:
                    request = Request(path, body, trio.current_time(), key)
                    self.requests.append(request)
                    self.arrived.set()
                    self.arrived = trio.Event()
                    step = self.choose(request)
                    request.step = step.describe()
                    try:
                        keep = await self._answer(stream, step)
                    finally:
                        request.answered = trio.current_time()
                if not keep:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()

    def choose(self, request: Request) -> Step:
        """The step that answers ``request``: its key's (``keyed``), else its prompt's next
        (``by_prompt``), else the script's next, else the fallback."""
        if request.key is not None and request.key in self.keyed:
            return self.keyed[request.key]
        steps = self.by_prompt.get(request.prompt())
        if steps:
            return steps.pop(0)
        return self.script.pop(0) if self.script else self.fallback

    async def _answer(self, stream: trio.SocketStream, step: Step) -> bool:
        """Answer one request; whether the connection can carry another."""
        if isinstance(step, HttpError):
            return await _respond(stream, step.status, step.body, step.headers)
        extra = step.headers if isinstance(step, Stream) else ()
        await _send(stream, _head(200, extra, "text/event-stream"))
        if isinstance(step, ToolCalls):
            for index, (ident, name, arguments) in enumerate(step.calls):
                call = {
                    "index": index,
                    "id": ident,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                delta: dict[str, Any] = {"tool_calls": [call]}
                if index == 0:
                    delta["role"] = "assistant"
                await _send(stream, _chunked(_delta(delta)))
            await _send(stream, _chunked(_delta({}, "tool_calls")))
            await _send(stream, _chunked(_usage()))
            await _send(stream, _chunked("data: [DONE]\n\n"))
            await _send(stream, b"0\r\n\r\n")
            return True
        if isinstance(step, Hang):
            await _send(stream, _chunked(_delta({"role": "assistant", "content": step.text})))
            try:
                while await stream.receive_some(65536):
                    pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            self.hung_up.append(trio.current_time())
            self._hang_up.set()
            return False
        await trio.sleep(step.first_delay)
        words = step.text.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        for i, piece in enumerate(pieces):
            if i:
                await trio.sleep(step.chunk_delay)
            delta = {"content": piece}
            if i == 0:
                delta["role"] = "assistant"
            await _send(stream, _chunked(_delta(delta)))
            if step.drop is not None:
                if step.drop == "reset":
                    linger = struct.pack("ii", 1, 0)
                    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                await stream.aclose()
                return False
        await _send(stream, _chunked(_delta({}, "stop")))
        await _send(stream, _chunked(_usage()))
        await _send(stream, _chunked("data: [DONE]\n\n"))
        await _send(stream, b"0\r\n\r\n")
        return True


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _sse(data: Any) -> str:
    return f"data: {json.dumps(data)}\n\n"


def _delta(delta: dict[str, Any], finish: str | None = None) -> str:
    return _sse(
        {
            "id": "chatcmpl-conformance",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "conformance",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def _usage() -> str:
    return _sse(
        {
            "id": "chatcmpl-conformance",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "conformance",
            "choices": [],
            "usage": {
                "prompt_tokens": PROMPT_TOKENS,
                "completion_tokens": COMPLETION_TOKENS,
                "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
            },
        }
    )


def _chunked(text: str) -> bytes:
    data = text.encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


def _head(status: int, headers: Sequence[tuple[str, str]], kind: str, length: int = -1) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, '')}".rstrip(), f"content-type: {kind}"]
    lines.append("transfer-encoding: chunked" if length < 0 else f"content-length: {length}")
    lines.extend(f"{name}: {value}" for name, value in headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send(stream: trio.SocketStream, data: bytes) -> None:
    await stream.send_all(data)


async def _respond(
    stream: trio.SocketStream, status: int, body: str, headers: Sequence[tuple[str, str]] = ()
) -> bool:
    data = body.encode()
    await _send(stream, _head(status, headers, "application/json", len(data)) + data)
    return True


async def _read_request(
    stream: trio.SocketStream, buffer: bytearray
) -> tuple[str, Any, str | None] | None:
    """The next request's path, JSON body and bearer key; ``None`` when the client closed."""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data or len(buffer) > _MAX_HEAD:
            return None
        buffer += data
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    request_line, *header_lines = head.decode("latin-1").split("\r\n")
    parts = request_line.split(" ")
    path = parts[1] if len(parts) > 1 else "/"
    length = 0
    key = None
    for line in header_lines:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "content-length":
            # ASCII digits only ("²".isdigit() is true too), and a body the kit would read
            if not (value.isascii() and value.isdigit() and len(value) <= _MAX_LENGTH_DIGITS):
                return None
            length = int(value)
            if length > _MAX_BODY:
                return None
        elif name == "authorization" and value[:7].lower() == "bearer ":
            key = value[7:].strip()
    body = bytearray(rest)
    while len(body) < length:
        data = await stream.receive_some(65536)
        if not data:
            return None
        body += data
    buffer[:] = body[length:]
    try:
        parsed: Any = json.loads(bytes(body[:length]) or b"null")
    except ValueError:
        parsed = None
    return path, parsed, key
