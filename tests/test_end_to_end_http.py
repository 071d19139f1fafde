"""Across features, over real loopback HTTP: key rotation, overflow recovery, secrets."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    AutoRetryStart,
    CompactionEnd,
    OpenAIProvider,
    SqliteCredentialStore,
    event_to_json,
    open_session,
)
from trio_session.testing import EventRecorder

from .http_server import ScriptedServer, event_stream, respond, sse

SECRET_ONE = "sk-proj-SECRET1aaaaaaaaaaaaaaaaaaaa"
SECRET_TWO = "sk-proj-SECRET2bbbbbbbbbbbbbbbbbbbb"


def chunk(content: str | None = None, finish: str | None = None) -> str:
    delta = {} if content is None else {"content": content}
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def answer(text: str) -> Any:
    return event_stream([chunk(text), chunk(finish="stop"), "data: [DONE]\n\n"])


USAGE_LIMIT = {
    "error": {
        "message": "The usage limit has been reached for this key",
        "type": "usage_limit_reached",
    }
}


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteCredentialStore]:
    """A SQLite credential store with two OpenAI keys and no environment keys."""
    with SqliteCredentialStore.open(tmp_path / "credentials.sqlite3", environ={}) as store:
        store.add("openai", SECRET_ONE, label="first")
        store.add("openai", SECRET_TWO, label="second")
        yield store


async def test_r17_usage_limit_rotates_to_the_second_key(
    server: ScriptedServer, store: SqliteCredentialStore, autojump_clock: trio.testing.MockClock
) -> None:
    """R-17: a usage limit on key one ⇒ delayMs 0, and the server sees key two next."""
    server.script(respond(429, USAGE_LIMIT, headers=[("retry-after", "600")]), answer("Hi!"))
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1") as provider,
        open_session(provider, "gpt-test", credentials=store) as session,
    ):
        rec = EventRecorder.attach(session)
        reply = await session.prompt("Hello")
    assert reply.text == "Hi!"
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [0]
    keys = [r.headers["authorization"] for r in server.requests]
    assert keys == [f"Bearer {SECRET_ONE}", f"Bearer {SECRET_TWO}"]
    (first, second) = store.list("openai")
    assert first.blocked_until is not None  # blocked for the 600 s the server asked
    assert second.blocked_until is None


async def test_r17_one_key_keeps_the_exponential_delay(
    server: ScriptedServer,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    request: pytest.FixtureRequest,
) -> None:
    """R-17: with a single key the usage limit is retried after the normal 2 s."""
    single = SqliteCredentialStore.open(tmp_path / "one.sqlite3", environ={})
    request.addfinalizer(single.close)
    single.add("openai", SECRET_ONE)
    server.script(respond(429, USAGE_LIMIT, headers=[("retry-after", "600")]), answer("Hi!"))
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1") as provider,
        open_session(provider, "gpt-test", credentials=single) as session,
    ):
        rec = EventRecorder.attach(session)
        await session.prompt("Hello")
    assert [e.delay_ms for e in rec.of(AutoRetryStart)] == [2000]
    assert [r.time - server.requests[0].time for r in server.requests] == [0.0, 2.0]


def parts(text: str) -> list[dict[str, str]]:
    """A user message's content on the wire: its parts, as pi sends them."""
    return [{"type": "text", "text": text}]


async def test_r50_overflow_recovers_over_http(
    server: ScriptedServer, autojump_clock: trio.testing.MockClock
) -> None:
    """R-2, R-50: a real context_length_exceeded ⇒ no retry, a summary request, then a
    smaller context (request body inspected), then the answer."""
    overflow = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    long_answer = "first answer " + "with many details " * 200
    server.script(
        answer(long_answer),
        respond(400, overflow),
        answer("We discussed the first question."),
        answer("second answer"),
    )
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test") as provider,
        open_session(provider, "gpt-test") as session,
    ):
        await session.prompt("first question")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("second question")
    assert reply.text == "second answer"
    assert not any(t.startswith("auto_retry") for t in rec.types)
    (end,) = rec.of(CompactionEnd)
    assert (end.aborted, end.will_retry) == (False, True)
    bodies = server.bodies
    overflowing = [m["content"] for m in bodies[1]["messages"]]
    assert overflowing == [parts("first question"), long_answer, parts("second question")]
    summary_request = bodies[2]["messages"]
    assert summary_request[0] == {"role": "system", "content": summary_request[0]["content"]}
    resent = [m["content"] for m in bodies[3]["messages"]]
    assert len(resent) == 2
    ((summary,),) = [resent[0]]
    assert summary["text"].endswith("We discussed the first question.\n</summary>")
    assert resent[1] == parts("second question")
    assert len(json.dumps(bodies[3])) < len(json.dumps(bodies[1]))


async def test_secrets_never_leave(
    server: ScriptedServer,
    store: SqliteCredentialStore,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Secrets: a key echoed back by the server appears in no event, log record, error
    message or history file; the credential file is 0600."""
    echoed = {"error": {"message": f"Incorrect API key provided: {SECRET_ONE}", "type": "x"}}
    server.script(
        respond(503, "busy"),
        respond(401, echoed),
    )
    history = tmp_path / "session.jsonl"
    caplog.set_level(logging.DEBUG)
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1") as provider,
        open_session(provider, "gpt-test", credentials=store, history=history) as session,
    ):
        rec = EventRecorder.attach(session)
        reply = await session.prompt("Hello")
    assert reply.error_message is not None
    assert "[redacted]" in reply.error_message
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET_ONE}"  # it was used
    wire = json.dumps([event_to_json(e) for e in rec.events])
    files = history.read_text(encoding="utf-8")
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (SECRET_ONE, SECRET_TWO):
        assert secret not in wire
        assert secret not in files
        assert secret not in logs
        assert secret not in repr(session.history)
        assert all(secret not in line for line in store.list().__repr__().splitlines())
    assert (tmp_path / "credentials.sqlite3").stat().st_mode & 0o777 == 0o600
