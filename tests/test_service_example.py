"""docs/examples/websocket_service.py under load: many websocket clients, a flaky provider.

The example's ``ChatService`` runs in the test's nursery against a loopback
OpenAI-compatible server that answers 503, 429 and half an answer now and then (decided
per client and attempt by a seeded random, so a run does not depend on scheduling);
over a hundred websocket clients ask at once, some of them leaving mid-answer. Real time,
small delays (``baseDelayMs`` 30 ms): a few seconds in all.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import random
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio
from trio_websocket import (
    ConnectionClosed,
    ConnectionRejected,
    open_websocket_url,
    wrap_client_stream,
)

from trio_session import (
    SERVICE_SETTINGS,
    AgentSession,
    FauxProvider,
    FauxReply,
    OpenAIProvider,
    SessionClosedError,
)

from .conftest import session_tasks
from .http_server import Exchange, ScriptedServer, sse

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "websocket_service.py"

SEED = 31
CLIENTS = 120  # ask one question each; some leave mid-answer
LINGERING = 10  # ask one question, then stay connected until the service shuts down
LEAVE_RATE = 0.3
FAIL_RATE = 0.35  # of a client's first two attempts; the third always answers
SETTINGS = {"retry": {**SERVICE_SETTINGS["retry"], "baseDelayMs": 30}}


def load_example() -> ModuleType:
    """The example file as a module (docs/examples is not a package)."""
    spec = importlib.util.spec_from_file_location("websocket_service", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def leaves(group: BaseExceptionGroup[ConnectionRejected]) -> list[ConnectionRejected]:
    """The exceptions of a group and of the groups in it."""
    found: list[ConnectionRejected] = []
    for exc in group.exceptions:
        found.extend(leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def answer_chunks(client: int) -> list[str]:
    """What the model answers client ``client``, chunk by chunk."""
    return [f"[{client}] ", "the ", "retry ", "waits, ", "then ", "sends ", "again."]


def text_chunk(text: str) -> str:
    """One Chat Completions chunk of text."""
    return sse({"choices": [{"index": 0, "delta": {"content": text}}]})


FINISH = sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + "data: [DONE]\n\n"


class FlakyModel:
    """The loopback model: per client, attempts 0 and 1 may fail (503, 429, or a stream
    cut after two chunks); what happens is drawn from ``Random((SEED, client, attempt))``."""

    def __init__(self) -> None:
        self.attempts: dict[int, int] = {}
        self.failures = {"503": 0, "429": 0, "cut": 0}

    async def __call__(self, exchange: Exchange) -> None:
        """Answer one request."""
        found = re.search(rb"client (\d+):", exchange.request.body)
        assert found is not None, exchange.request.body
        client = int(found[1])
        attempt = self.attempts.get(client, 0)
        self.attempts[client] = attempt + 1
        rng = random.Random(f"{SEED}/{client}/{attempt}")
        chunks = answer_chunks(client)
        if attempt < 2 and rng.random() < FAIL_RATE:
            kind = rng.choice(["503", "429", "cut"])
            self.failures[kind] += 1
            if kind == "503":
                body = {"error": {"message": "overloaded", "type": "server_error"}}
                await exchange.respond(503, json.dumps(body))
                return
            if kind == "429":
                body = {"error": {"message": "Rate limit reached", "type": "rate_limit"}}
                await exchange.respond(429, json.dumps(body), [("retry-after-ms", "40")])
                return
            await exchange.head(200)
            for chunk in chunks[:2]:
                await exchange.chunk(text_chunk(chunk))
                await trio.sleep(0.015)
            await exchange.close()
            return
        await exchange.head(200)
        for chunk in chunks:
            await exchange.chunk(text_chunk(chunk))
            await trio.sleep(0.015)
        await exchange.chunk(FINISH)
        await exchange.end()


class Opened(dict[str, AgentSession]):
    """``ChatService.sessions`` that remembers every session ever put in it, and can be
    waited on."""

    def __init__(self) -> None:
        super().__init__()
        self.ever: list[AgentSession] = []
        self._changed = trio.Event()

    def __setitem__(self, key: str, session: AgentSession) -> None:
        self.ever.append(session)
        super().__setitem__(key, session)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for_at_most(self, count: int) -> None:
        """Return once no more than ``count`` sessions are open."""
        while len(self) > count:
            await self._changed.wait()


class Tally:
    """What the clients saw."""

    def __init__(self) -> None:
        self.answers: dict[int, tuple[str, str]] = {}  # client -> (text, stop reason)
        self.left: list[int] = []
        self.asked = 0  # clients that used ask()
        self.restarts = 0
        self.idle_checked = 0
        self.shut_out = 0  # lingering clients that saw the shutdown close them


async def client(example: ModuleType, service: Any, url: str, n: int, tally: Tally) -> None:
    """Ask once with the example's ``ask()``; or leave after a few text messages."""
    rng = random.Random(f"{SEED}/client/{n}")
    question = f"client {n}: how does the retry wait?"
    if rng.random() >= LEAVE_RATE:
        tally.asked += 1
        session_id = ""

        def on_message(message: dict[str, Any]) -> None:
            nonlocal session_id
            if message["type"] == "session":
                session_id = message["id"]
            elif message["type"] == "restart":
                tally.restarts += 1
            elif message["type"] == "end":
                # the answer is out: the session has nothing left running
                service.sessions[session_id].assert_idle()
                tally.idle_checked += 1

        tally.answers[n] = await example.ask(url, question, on_message=on_message)
        return
    leave_after = rng.choice([0, 1, 2, 3])  # text messages to read before leaving
    gracefully = rng.random() < 0.5
    with trio.CancelScope() as scope:
        async with open_websocket_url(url) as ws:
            await ws.get_message()  # the session's id
            await ws.send_message(question)
            texts, text = 0, ""
            while texts < leave_after:
                message = json.loads(await ws.get_message())
                if message["type"] == "end":  # answered before it could leave
                    tally.answers[n] = (text, message["stop_reason"])
                    return
                if message["type"] == "text":
                    texts, text = texts + 1, text + message["text"]
                elif message["type"] == "restart":
                    text = text.removesuffix(message["discard"])
            tally.left.append(n)
            if gracefully:
                await ws.aclose()  # a close frame
            else:
                scope.cancel()  # the TCP connection closed, no close frame


async def linger(
    port: int, tally: Tally, n: int, shut: trio.Event, answered: trio.MemorySendChannel[int]
) -> None:
    """Ask, then stay connected until the service's shutdown drops the connection."""
    # Our own TCP stream, closed here: trio-websocket 0.12.2 leaves a client's socket
    # open when the server drops the connection (code 1006, no close handshake).
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream, trio.open_nursery() as nursery:
        ws = await wrap_client_stream(nursery, stream, "127.0.0.1", "/")
        await ws.send_message(f"client {n}: how does the retry wait?")
        text = ""
        while (message := json.loads(await ws.get_message()))["type"] != "end":
            if message["type"] == "text":
                text += message["text"]
            elif message["type"] == "restart":
                text = text.removesuffix(message["discard"])
        tally.answers[n] = (text, message["stop_reason"])
        await answered.send(n)
        with pytest.raises(ConnectionClosed) as closed:
            await ws.get_message()
        assert shut.is_set()
        assert closed.value.reason is not None
        assert closed.value.reason.name == "ABNORMAL_CLOSURE"  # dropped, as cancelled
        tally.shut_out += 1
        await ws.aclose()


async def test_a_hundred_websocket_clients_get_their_answers_and_the_service_shuts_down_clean(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """130 clients at once on a flaky provider (503, 429, cut streams), about a third of
    120 leaving mid-answer: every answered client gets exactly its answer, no session is
    left open, nothing logs a WARNING or a traceback, no request waits for a pooled
    connection, and cancelling the service's nursery closes the 10 sessions still
    connected within a second."""
    caplog.set_level(logging.INFO)
    example = load_example()
    model = FlakyModel()
    sessions = CLIENTS + LINGERING
    tally = Tally()
    shut = trio.Event()
    most_waiting = 0
    async with trio.open_nursery() as outer:
        server = ScriptedServer()
        await outer.start(server.run)
        server.script(*[model] * (3 * sessions))
        # the pool rule: as many connections as sessions that may ask at once
        async with OpenAIProvider(
            base_url=f"{server.url}/v1", api_key="sk-service-test", limits=sessions
        ) as provider:

            async def watch_pool() -> None:
                nonlocal most_waiting
                while True:
                    most_waiting = max(most_waiting, provider.pool_stats()["requests_waiting"])
                    await trio.sleep(0.005)

            outer.start_soon(watch_pool)
            service = example.ChatService(
                provider, "gpt-test", settings=SETTINGS, max_sessions=sessions
            )
            service.sessions = opened = Opened()
            start = trio.current_time()
            with trio.fail_after(60):
                answered_send, answered = trio.open_memory_channel[int](LINGERING)
                async with trio.open_nursery() as lingering, trio.open_nursery() as service_nursery:
                    port = await service_nursery.start(service.run)
                    url = f"ws://127.0.0.1:{port}"
                    for n in range(CLIENTS, sessions):
                        lingering.start_soon(linger, port, tally, n, shut, answered_send)
                    async with trio.open_nursery() as clients:
                        for n in range(CLIENTS):
                            clients.start_soon(client, example, service, url, n, tally)
                    asked = trio.current_time()
                    # every client has left or been answered; once the lingering ones
                    # are answered too, only their sessions stay open
                    with trio.move_on_after(10):
                        for _ in range(LINGERING):
                            await answered.receive()
                        await opened.wait_for_at_most(LINGERING)
                    left_open = len(service.sessions)
                    shut.set()
                    cancelled = trio.current_time()
                    service_nursery.cancel_scope.cancel()  # the shutdown
                # and the lingering clients have seen their connections close
                closed = trio.current_time()
            in_flight = provider.pool_stats()["requests_in_flight"]
        outer.cancel_scope.cancel()

    assert tally.answers == {
        n: ("".join(answer_chunks(n)), "stop") for n in range(sessions) if n not in tally.left
    }
    assert len(tally.left) >= 20
    assert left_open == LINGERING
    assert tally.shut_out == LINGERING
    assert service.sessions == {}
    assert len(opened.ever) == sessions
    for session in opened.ever:  # closed, whatever the bookkeeping says
        with pytest.raises(SessionClosedError, match=r"^the session is closed$"):
            await session.prompt("still there?")
    assert session_tasks() == []
    assert closed - cancelled < 1.0
    assert in_flight == 0
    assert most_waiting == 0
    assert sum(model.failures.values()) >= 30
    assert tally.restarts >= 1
    assert tally.idle_checked == tally.asked
    problems = [
        (r.name, r.levelname, r.getMessage(), caplog.handler.format(r))
        for r in caplog.records
        if r.levelno >= logging.WARNING or r.exc_info
    ]
    assert problems == []
    messages = [r.getMessage() for r in caplog.records]
    succeeded = sum(m.startswith("retry succeeded on attempt") for m in messages)
    cancelled_retries = sum(m.startswith("retry cancelled after") for m in messages)
    assert succeeded >= 10
    assert cancelled_retries >= 1  # INFO, as the WARNING check above shows
    print(
        f"{sessions} clients, {len(tally.left)} left mid-answer, "
        f"{sum(model.failures.values())} failed attempts {model.failures}, "
        f"{tally.restarts} restarts, {succeeded} retries made good, "
        f"{cancelled_retries} cancelled by a disconnect; clients done in {asked - start:.2f} s, "
        f"shut down in {closed - cancelled:.3f} s"
    )


async def test_the_service_refuses_a_session_past_its_pool_and_a_second_question() -> None:
    """With ``max_sessions=1`` a second connection is refused with 503 while the first is
    open; a question sent while one is answered gets ``busy``, and the first answer still
    comes whole."""
    example = load_example()
    answer = ("one ", "two ", "three")
    provider = FauxProvider([FauxReply(text="".join(answer), chunks=answer, chunk_delay=0.05)])
    service = example.ChatService(provider, max_sessions=1)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(service.run)
        url = f"ws://127.0.0.1:{port}"
        async with open_websocket_url(url) as ws:
            assert json.loads(await ws.get_message())["type"] == "session"
            # our own TCP stream, closed here: trio-websocket 0.12.2 leaves a refused
            # client's socket open (and its reader task raises the refusal too)
            refusals: set[tuple[int, bytes | None]] = set()
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                try:
                    async with trio.open_nursery() as second:
                        await wrap_client_stream(second, stream, "127.0.0.1", "/")
                except* ConnectionRejected as group:
                    refusals = {(e.status_code, e.body) for e in leaves(group)}
            assert refusals == {(503, b"too many sessions, try later")}
            await ws.send_message("first")
            await ws.send_message("second")
            messages: list[dict[str, Any]] = []
            while not messages or messages[-1]["type"] != "end":
                messages.append(json.loads(await ws.get_message()))
        nursery.cancel_scope.cancel()
    assert {"type": "busy"} in messages
    texts = [m["text"] for m in messages if m["type"] == "text"]
    assert ("".join(texts), messages[-1]) == (
        "one two three",
        {"type": "end", "stop_reason": "stop"},
    )
    assert service.sessions == {}
    assert service.connections == 0
