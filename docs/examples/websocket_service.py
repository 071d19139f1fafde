"""A chat service over websockets: one session per connection, one provider.

Each websocket connection gets its own session; every session shares one
provider, and so one HTTP connection pool, sized by the rule of
docs/providers.md: as many connections as sessions that may ask at once. A
client sends a question as a text message and gets JSON messages back:

    {"type": "session", "id": "…"}            once, on connecting
    {"type": "text", "text": "…"}             the answer, as it is typed
    {"type": "restart", "discard": "…"}       take that text back (a retry)
    {"type": "end", "stop_reason": "stop"}    the answer is complete
    {"type": "busy"}                          a question while one is answered

The server streams ``reply.items()``: live text, and a ``restart`` message
when an attempt whose text was already sent fails and another follows.
``ask()`` below is a client that applies them. A client that closes the
connection cancels its answer, retry chain and request included; cancelling
the service's nursery closes every session.

``python docs/examples/websocket_service.py`` runs an offline demo (the
``FauxProvider`` drops the first answer half-way); with ``serve`` it serves
OpenAI on ws://127.0.0.1:8765 until Ctrl+C (``OPENAI_API_KEY`` set).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

import trio
from trio_websocket import (
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
    open_websocket_url,
    serve_websocket,
)

from trio_session import (
    SERVICE_SETTINGS,
    AgentSession,
    FauxProvider,
    FauxReply,
    Model,
    OpenAIProvider,
    Provider,
    ReplyRestart,
    SessionBusyError,
    open_session,
    settings_with,
)

# Connections served at once. A session sends one request at a time, so the
# provider's pool needs as many connections (docs/providers.md's rule).
MAX_SESSIONS = 200
log = logging.getLogger("chat_service")


class ChatService:
    """Serve a session per websocket connection, all on one provider."""

    def __init__(
        self,
        provider: Provider,
        model: Model | str | None = None,
        *,
        settings: Mapping[str, Any] = SERVICE_SETTINGS,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.provider = provider
        self.model = model
        self.settings = settings
        self.max_sessions = max_sessions
        self.sessions: dict[str, AgentSession] = {}  # the open ones, by id
        self.connections = 0

    async def run(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled; ``nursery.start`` returns the port."""
        async with trio.open_nursery() as nursery:
            server = await nursery.start(
                serve_websocket, self._connection, host, port, None
            )
            task_status.started(server.port)

    async def _connection(self, request: WebSocketRequest) -> None:
        if self.connections >= self.max_sessions:
            # One more session could wait for a pooled connection: refuse.
            await request.reject(503, body=b"too many sessions, try later")
            return
        self.connections += 1
        try:
            await self._session(await request.accept())
        finally:
            self.connections -= 1

    async def _session(self, ws: WebSocketConnection) -> None:
        async with open_session(
            self.provider, self.model, settings=self.settings
        ) as session:
            self.sessions[session.session_id] = session
            try:
                await self._converse(ws, session)
            except Exception:  # a bug ends this connection, not the service
                log.exception("connection %s failed", session.session_id)
                await ws.aclose(1011, "internal error")
            finally:
                del self.sessions[session.session_id]

    async def _converse(
        self, ws: WebSocketConnection, session: AgentSession
    ) -> None:
        """Answer questions until the client goes: its disconnect cancels
        the answer under way (prompt, backoff, request)."""
        async with trio.open_nursery() as nursery:
            await _send(ws, type="session", id=session.session_id)
            while True:
                try:
                    question = str(await ws.get_message())
                except ConnectionClosed:
                    nursery.cancel_scope.cancel()  # stop the answer under way
                    return
                try:
                    await nursery.start(_answer, ws, session, question)
                except SessionBusyError:  # one answer at a time
                    await _send(ws, type="busy")


async def _answer(
    ws: WebSocketConnection,
    session: AgentSession,
    question: str,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Stream one answer: live text, a restart when a retry takes it back."""
    async with session.stream(question) as reply:
        task_status.started()
        async for item in reply.items():
            if isinstance(item, ReplyRestart):
                sent = await _send(ws, type="restart", discard=item.discarded)
            else:
                sent = await _send(ws, type="text", text=item)
            if not sent:
                return  # the client left; leaving the block cancels the prompt
    await _send(ws, type="end", stop_reason=reply.reply.stop_reason)


async def _send(ws: WebSocketConnection, **message: object) -> bool:
    """Send ``message`` as JSON; ``False`` if the client has gone."""
    try:
        await ws.send_message(json.dumps(message))
    except ConnectionClosed:
        return False
    return True


async def ask(
    url: str,
    question: str,
    on_message: Callable[[dict[str, Any]], object] | None = None,
) -> tuple[str, str]:
    """A client: the answer (restarts applied) and its stop reason;
    ``on_message`` sees every message as it comes."""
    answer = ""
    async with open_websocket_url(url) as ws:
        await ws.send_message(question)
        while True:
            message = json.loads(await ws.get_message())
            if on_message is not None:
                on_message(message)
            if message["type"] == "text":
                answer += message["text"]
            elif message["type"] == "restart":
                answer = answer.removesuffix(message["discard"])
            elif message["type"] == "end":
                return answer, message["stop_reason"]


def faux_provider() -> FauxProvider:
    """An answer that breaks off half-way, then the whole answer."""
    words = ("Backoff ", "waits ", "2 s, ", "then 4 s.")
    return FauxProvider(
        [
            FauxReply(
                text="".join(words[:2]),
                chunks=words[:2],
                chunk_delay=0.05,
                error="503 Service Unavailable",
            ),
            FauxReply(text="".join(words), chunks=words, chunk_delay=0.05),
        ]
    )


def show(message: dict[str, Any]) -> None:
    """Print what the demo's client gets (the session's id is random)."""
    if message["type"] != "session":
        print(message)


async def demo() -> None:
    settings = settings_with(SERVICE_SETTINGS, {"retry": {"baseDelayMs": 50}})
    service = ChatService(faux_provider(), settings=settings)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(service.run)
        answer, stop_reason = await ask(
            f"ws://127.0.0.1:{port}", "How long does backoff wait?", show
        )
        print(f"answer: {answer!r} ({stop_reason})")
        nursery.cancel_scope.cancel()  # shut down: every session closes
    print(f"sessions open: {len(service.sessions)}")


async def serve() -> None:
    async with OpenAIProvider(limits=MAX_SESSIONS) as provider:
        service = ChatService(provider, "gpt-4.1-mini")
        await service.run(port=8765)


if __name__ == "__main__":
    trio.run(serve if sys.argv[1:] == ["serve"] else demo)
