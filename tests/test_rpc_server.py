"""The RPC server in memory: every scenario of issue 4 on the autojump clock, exact times."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from itertools import groupby
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_session import AgentSession, FauxProvider, FauxReply, SettingsStore, open_session
from trio_session.providers._faux import faux_script_from_json
from trio_session.rpc import (
    RpcCommandError,
    RpcConnectionError,
    RpcServer,
    connect_rpc,
    serve_rpc,
)
from trio_session.rpc._outbox import merge_updates
from trio_session.rpc._protocol import COMMANDS
from trio_session.rpc._server import BUSY, NO_FACTORY

from .rpc_helpers import (
    ERR_503,
    ERR_OVERFLOW,
    JSON,
    PROMPT_OK,
    RUN_START,
    SCENARIOS,
    RawLines,
    Scenario,
    failed_attempt,
    retry_end,
    run_raw,
    run_with_client,
    split_expected,
    summaries,
    summarize,
    times_of,
)

#: What an unsupported command's error lists.
IMPLEMENTED = ", ".join(sorted(COMMANDS))

BASE = 2000


@attrs.frozen
class Served:
    """A server on one end of an in-memory stream pair, and the other end."""

    stream: trio.StapledStream[Any, Any]
    server: RpcServer
    provider: FauxProvider
    raw: RawLines


@asynccontextmanager
async def in_memory(
    script: list[JSON] | list[FauxReply],
    settings: JSON | None = None,
    *,
    make_server: Callable[..., RpcServer] | None = None,
    stream_pair: Callable[[], tuple[Any, Any]] = trio.testing.memory_stream_pair,
) -> AsyncIterator[Served]:
    """Serve a faux session on an in-memory stream; end of input on the way out."""
    replies = [r if isinstance(r, FauxReply) else FauxReply.from_json(r) for r in script]
    provider = FauxProvider(replies)
    store = SettingsStore.coerce(settings)
    client_end, server_end = stream_pair()

    def sessions() -> Any:
        return open_session(provider, settings=store)

    server = (make_server or RpcServer)(sessions, server_end)
    with trio.fail_after(100_000):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            yield Served(client_end, server, provider, RawLines(client_end, client_end))
            with suppress(trio.ClosedResourceError):
                await client_end.send_eof()


# -- the scenarios of issue 4 -------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_scenario_by_raw_lines(
    autojump_clock: trio.testing.MockClock, scenario: Scenario
) -> None:
    """R-39, R-44, R-45, R-45a: each scenario's exact lines, at exact virtual times."""
    async with in_memory(scenario.script, scenario.settings(BASE)) as served:
        transcript = await run_raw(scenario, served.raw)
        assert not served.server.session.is_running
    assert summaries(transcript) == scenario.expected(BASE)
    for kind, times in scenario.times.items():
        assert times_of(transcript, kind) == times, kind


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_scenario_through_client(
    autojump_clock: trio.testing.MockClock, scenario: Scenario
) -> None:
    """R-40: RpcClient sees the same events, and its calls get the same responses."""
    settings = scenario.settings(BASE)
    async with in_memory(scenario.script, settings) as served, connect_rpc(served.stream) as client:
        events, responses = await run_with_client(scenario, client)
    expected_events, expected_responses = split_expected(scenario.expected(BASE))
    assert summaries(events) == expected_events
    assert [summarize(r) for r in responses] == expected_responses
    for kind, times in scenario.times.items():
        assert times_of(events, kind) == times, kind


async def test_two_503s_wire_format(autojump_clock: trio.testing.MockClock) -> None:
    """R-39, R-43: responses and events carry the reference's exact field spellings."""
    script = [{"error": ERR_503}, {"text": "Hi"}]
    async with in_memory(script, {"retry": {"baseDelayMs": 10}}) as s:
        await s.raw.send({"id": "req_1", "type": "prompt", "message": "hi"})
        lines = [await s.raw.read() for _ in range(20)]
    assert lines[0] == {**PROMPT_OK, "id": "req_1"}
    assert lines[8]["type"] == "agent_end"
    assert lines[8]["willRetry"] is True
    assert [m["role"] for m in lines[8]["messages"]] == ["user", "assistant"]
    assert lines[9] == {
        "type": "auto_retry_start",
        "attempt": 1,
        "maxAttempts": 3,
        "delayMs": 10,
        "errorMessage": ERR_503,
    }
    assert [line["assistantMessageEvent"]["type"] for line in lines[13:16]] == [
        "text_start",
        "text_delta",
        "text_end",
    ]
    assert lines[16]["message"]["content"] == [{"type": "text", "text": "Hi"}]
    assert lines[17] == {"type": "auto_retry_end", "success": True, "attempt": 1}
    assert (lines[19]["type"], lines[19]["willRetry"]) == ("agent_end", False)


async def test_events_are_written_as_they_happen(autojump_clock: trio.testing.MockClock) -> None:
    """R-44: each streamed chunk reaches the client when it is produced, not at the end."""
    reply = {"text": "abc", "chunks": ["a", "b", "c"], "delay": 1, "chunkDelay": 0.5}
    async with in_memory([reply]) as s:
        await s.raw.send({"type": "prompt", "message": "hi"})
        seen: list[tuple[float, str]] = []
        while (obj := await s.raw.read())["type"] != "agent_end":
            if obj["type"] == "message_update" and obj["delta"]:
                seen.append((trio.current_time(), obj["delta"]))
    assert seen == [(1.0, "a"), (1.5, "b"), (2.0, "c")]


# -- state, messages, sessions ------------------------------------------------------------


async def test_get_state_when_idle(autojump_clock: trio.testing.MockClock) -> None:
    """R-41: get_state has the reference's fields, plus the retry state."""
    async with in_memory([]) as s:
        await s.raw.send({"id": 1, "type": "get_state"})
        response = await s.raw.read()
        session_id = s.server.session.session_id
    assert response == {
        "id": 1,
        "type": "response",
        "command": "get_state",
        "success": True,
        "data": {
            "model": {
                "id": "faux-model",
                "name": "faux-model",
                "api": "",
                "provider": "faux",
                "baseUrl": "",
                "reasoning": False,
                "input": ["text"],
                "contextWindow": 128000,
                "maxTokens": 16384,
                "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0},
            },
            "thinkingLevel": "off",
            "isStreaming": False,
            "isCompacting": False,
            "sessionId": session_id,
            "autoCompactionEnabled": True,
            "messageCount": 0,
            "pendingMessageCount": 0,
            "steeringMode": "one-at-a-time",
            "followUpMode": "one-at-a-time",
            "autoRetryEnabled": True,
            "isRetrying": False,
            "retryAttempt": 0,
            "retryProfile": "seed",
        },
    }


async def test_toggles_show_in_get_state(autojump_clock: trio.testing.MockClock) -> None:
    """R-37, R-39, R-41: set_auto_retry and set_auto_compaction write the settings."""
    async with in_memory([]) as s:
        await s.raw.send({"id": "a", "type": "set_auto_retry", "enabled": False})
        await s.raw.send({"id": "b", "type": "set_auto_compaction", "enabled": False})
        await s.raw.send({"id": "c", "type": "get_state"})
        lines = [await s.raw.read() for _ in range(3)]
    assert lines[0] == {"id": "a", "type": "response", "command": "set_auto_retry", "success": True}
    assert lines[1] == {
        "id": "b",
        "type": "response",
        "command": "set_auto_compaction",
        "success": True,
    }
    assert lines[2]["data"]["autoRetryEnabled"] is False
    assert lines[2]["data"]["autoCompactionEnabled"] is False


async def test_auto_compaction_disabled_overflow(autojump_clock: trio.testing.MockClock) -> None:
    """R-49, R-50: with set_auto_compaction false an overflow just ends the prompt."""
    async with in_memory([{"error": ERR_OVERFLOW}]) as s:
        await s.raw.send({"type": "set_auto_compaction", "enabled": False})
        await s.raw.send({"type": "prompt", "message": "hi"})
        lines = [summarize(await s.raw.read()) for _ in range(11)]
    assert lines == [
        "response set_auto_compaction ok",
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(False),
        "agent_settled",
    ]


async def test_get_messages_is_the_runtime_context(autojump_clock: trio.testing.MockClock) -> None:
    """R-20, R-42: get_messages returns the runtime context, the retried 503 removed."""
    async with in_memory([{"error": ERR_503}, {"text": "Hello!"}]) as s:
        await s.raw.send({"type": "prompt", "message": "hi"})
        while (await s.raw.read())["type"] != "agent_settled":
            pass
        await s.raw.send({"id": "m", "type": "get_messages"})
        response = await s.raw.read()
        await s.raw.send({"id": "s", "type": "get_state"})
        state = (await s.raw.read())["data"]
    messages = response["data"]["messages"]
    assert [(m["role"], m.get("stopReason")) for m in messages] == [
        ("user", None),
        ("assistant", "stop"),
    ]
    assert messages[0]["content"] == [{"type": "text", "text": "hi"}]  # pi's content array
    assert state["messageCount"] == 2


async def test_prompt_while_busy_is_refused(autojump_clock: trio.testing.MockClock) -> None:
    """R-36: a second prompt while one runs gets one clear error; the first goes on."""
    async with in_memory([{"text": "slow", "delay": 5}]) as s:
        await s.raw.send({"id": 1, "type": "prompt", "message": "one"})
        await s.raw.send({"id": 2, "type": "prompt", "message": "two"})
        lines = []
        while (obj := await s.raw.read())["type"] != "agent_settled":
            lines.append(obj)
    responses = [o for o in lines if o["type"] == "response"]
    assert responses == [
        {**PROMPT_OK, "id": 1},
        {"id": 2, "type": "response", "command": "prompt", "success": False, "error": BUSY},
    ]
    assert trio.current_time() == 5.0


async def test_abort_while_streaming(autojump_clock: trio.testing.MockClock) -> None:
    """R-32, R-42: abort ends a streaming request (aborted) and is answered after its end.

    As the reference: the text part is closed (``text_end``) and the message says
    ``Request was aborted``."""
    async with in_memory([{"text": "partial", "hang": True}]) as s:
        await s.raw.send({"type": "prompt", "message": "hi"})
        while (await s.raw.read()).get("delta") != "partial":
            pass
        await trio.sleep(3)
        await s.raw.send({"id": "x", "type": "abort"})
        text_end = await s.raw.read()
        aborted = await s.raw.read()
        rest = [summarize(aborted)] + [summarize(await s.raw.read()) for _ in range(4)]
    assert text_end["assistantMessageEvent"] == {
        "type": "text_end",
        "contentIndex": 0,
        "content": "partial",
        "partial": text_end["message"],
    }
    assert aborted["message"]["errorMessage"] == "Request was aborted"
    # the last update already says aborted, as pi's does (it said "stop" before)
    closing = text_end["message"]
    assert (closing["stopReason"], closing["errorMessage"]) == ("aborted", "Request was aborted")
    assert rest == [
        "message_end assistant aborted",
        "turn_end",
        "agent_end willRetry=false",
        "agent_settled aborted",  # before the answer, which waits for the run's end
        "response abort ok",
    ]
    assert trio.current_time() == 3.0


async def test_abort_and_abort_retry_when_idle(autojump_clock: trio.testing.MockClock) -> None:
    """R-29, R-32: with nothing running, abort, abort_retry and retry_now just succeed."""
    async with in_memory([]) as s:
        for command in ("abort", "abort_retry", "retry_now"):
            await s.raw.send({"id": command, "type": command})
        lines = [await s.raw.read() for _ in range(3)]
    assert lines == [
        {"id": "abort", "type": "response", "command": "abort", "success": True},
        {"id": "abort_retry", "type": "response", "command": "abort_retry", "success": True},
        {
            "id": "retry_now",
            "type": "response",
            "command": "retry_now",
            "success": True,
            "data": {"skipped": False},
        },
    ]


async def test_new_session_starts_afresh(autojump_clock: trio.testing.MockClock) -> None:
    """R-42: new_session gives a new empty session; the settings toggles carry over."""
    async with in_memory([{"text": "one"}]) as s:
        first = s.server.session.session_id
        await s.raw.send({"type": "set_auto_retry", "enabled": False})
        await s.raw.send({"type": "prompt", "message": "hi"})
        while (await s.raw.read())["type"] != "agent_settled":
            pass
        await s.raw.send({"id": "n", "type": "new_session"})
        response = await s.raw.read()
        await s.raw.send({"id": "s", "type": "get_state"})
        state = (await s.raw.read())["data"]
    assert response == {
        "id": "n",
        "type": "response",
        "command": "new_session",
        "success": True,
        "data": {"cancelled": False},
    }
    assert state["sessionId"] != first
    assert state["messageCount"] == 0
    assert state["autoRetryEnabled"] is False


async def test_new_session_aborts_a_retry(autojump_clock: trio.testing.MockClock) -> None:
    """R-30, R-32: new_session during a backoff cancels the chain first, then answers."""
    async with in_memory([{"error": ERR_503}]) as s:
        old = s.server.session
        await s.raw.send({"type": "prompt", "message": "hi"})
        while (await s.raw.read())["type"] != "auto_retry_start":
            pass
        await s.raw.send({"type": "new_session"})
        rest = [summarize(await s.raw.read()) for _ in range(3)]
        assert s.server.session is not old
        assert not old.is_running
    assert rest == [
        retry_end(False, 1, "Retry cancelled"),
        "agent_settled aborted",
        "response new_session ok",
    ]
    assert trio.current_time() == 0.0


async def test_serving_one_session(autojump_clock: trio.testing.MockClock) -> None:
    """A server given one session serves it, refuses new_session, and leaves it open."""
    provider = FauxProvider([FauxReply(text="one"), FauxReply(text="two")])
    client_end, server_end = trio.testing.memory_stream_pair()
    raw = RawLines(client_end, client_end)
    async with open_session(provider) as session, trio.open_nursery() as nursery:
        await nursery.start(serve_rpc, session, server_end)
        await raw.send({"id": 1, "type": "new_session"})
        assert await raw.read() == {
            "id": 1,
            "type": "response",
            "command": "new_session",
            "success": False,
            "error": NO_FACTORY,
        }
        await client_end.send_eof()
        assert await raw.rest() == []
        reply = await session.prompt("still open")
    assert reply.text == "one"


# -- the end of input ---------------------------------------------------------------------


async def test_end_of_input_aborts_the_retry(autojump_clock: trio.testing.MockClock) -> None:
    """R-30, R-42, R-68: at end of input the server aborts the run, writes its end (pi
    writes nothing more), and stops."""
    async with in_memory([{"error": ERR_503}]) as s:
        await s.raw.send({"type": "prompt", "message": "hi"})
        while (await s.raw.read())["type"] != "auto_retry_start":
            pass
        session = s.server.session
        await s.stream.send_eof()
        rest = await s.raw.rest()
    assert [summarize(o) for o in rest] == [
        retry_end(False, 1, "Retry cancelled"),
        "agent_settled aborted",
    ]
    assert not session.is_running
    assert trio.current_time() == 0.0


async def test_shutdown_aborts_the_retry(autojump_clock: trio.testing.MockClock) -> None:
    """R-30, R-68: shutdown() (what SIGTERM calls) ends the server like end of input does."""
    async with in_memory([{"error": ERR_503}]) as s:
        await s.raw.send({"type": "prompt", "message": "hi"})
        while (await s.raw.read())["type"] != "auto_retry_start":
            pass
        s.server.shutdown()
        rest = await s.raw.rest()
    assert [summarize(o) for o in rest] == [
        retry_end(False, 1, "Retry cancelled"),
        "agent_settled aborted",
    ]


async def test_final_line_without_newline(autojump_clock: trio.testing.MockClock) -> None:
    """R-42: a last line without a newline is still a command; then the server ends."""
    async with in_memory([]) as s:
        await s.raw.send(b'{"id": "last", "type": "abort_retry"}')
        await s.stream.send_eof()
        rest = await s.raw.rest()
    assert rest == [{"id": "last", "type": "response", "command": "abort_retry", "success": True}]


async def test_serve_runs_once() -> None:
    """An RpcServer refuses to serve twice."""
    async with in_memory([]) as s:
        with pytest.raises(RuntimeError, match=r"^an RpcServer serves once; make a new one$"):
            await s.server.serve()


# -- bad input (R-42) -----------------------------------------------------------------------

PARSE = "Failed to parse command: "

BAD_LINES = [
    pytest.param(
        b"not json",
        {"command": "parse", "error": PARSE + "Expecting value at column 1"},
        id="invalid-json",
    ),
    pytest.param(
        b'{"type": ',
        {"command": "parse", "error": PARSE + "Expecting value at column 10"},
        id="truncated-json",
    ),
    pytest.param(
        b"[1, 2]",
        {"command": "parse", "error": PARSE + "expected a JSON object, not an array"},
        id="array",
    ),
    pytest.param(
        b'"prompt"',
        {"command": "parse", "error": PARSE + "expected a JSON object, not a string"},
        id="string",
    ),
    pytest.param(
        b"",
        {"command": "parse", "error": PARSE + "the line is empty; expected a JSON object"},
        id="empty",
    ),
    pytest.param(
        b"  \t",
        {"command": "parse", "error": PARSE + "the line is empty; expected a JSON object"},
        id="blank",
    ),
    pytest.param(
        b"\r",
        {"command": "parse", "error": PARSE + "the line is empty; expected a JSON object"},
        id="cr-only",
    ),
    pytest.param(
        b"\xff\xfe{}",
        {
            "command": "parse",
            "error": PARSE + "the line is not valid UTF-8 (byte 0xff at offset 0)",
        },
        id="invalid-utf8",
    ),
    pytest.param(
        b'{"id": 5}',
        {"id": 5, "command": "parse", "error": PARSE + 'the "type" field is missing'},
        id="missing-type",
    ),
    pytest.param(
        b'{"type": 3}',
        {"command": "parse", "error": PARSE + '"type" must be a string, not 3'},
        id="type-not-string",
    ),
    pytest.param(
        b'{"type": "nope", "id": "q"}',
        {"id": "q", "command": "nope", "error": "Unknown command: nope"},
        id="unknown-command",
    ),
    pytest.param(
        b'{"type": "branch"}',
        {
            "command": "branch",
            "error": f"Unsupported command: branch (this server implements {IMPLEMENTED})",
        },
        id="unsupported-command",
    ),
    pytest.param(
        b'{"type": "set_auto_retry", "enabled": "yes", "id": "r"}',
        {
            "id": "r",
            "command": "set_auto_retry",
            "error": 'set_auto_retry.enabled must be true or false, not "yes"',
        },
        id="wrong-field-type",
    ),
    pytest.param(
        b'{"type": "set_auto_compaction"}',
        {
            "command": "set_auto_compaction",
            "error": 'set_auto_compaction needs "enabled" (true or false)',
        },
        id="missing-field",
    ),
    pytest.param(
        b'{"type": "prompt", "message": 42}',
        {"command": "prompt", "error": "prompt.message must be a string, not 42"},
        id="message-not-string",
    ),
    pytest.param(
        b'{"type": "prompt", "message": "x", "images": [{"type": "image"}]}',
        {
            "command": "prompt",
            "error": 'prompt.images must be a list of {"type": "image", "data": base64, '
            '"mimeType": str}, not [{"type": "image"}]',
        },
        id="images",
    ),
    pytest.param(
        b'{"type": "new_session", "parentSession": 7}',
        {
            "command": "new_session",
            "error": "new_session.parentSession must be a file path (a string without NUL "
            "characters or lone surrogates), not 7",
        },
        id="parent-not-string",
    ),
    pytest.param(
        b'{"type": "get_state", "id": 1.5}',
        {"command": "get_state", "error": '"id" must be a string or an integer, not 1.5'},
        id="float-id",
    ),
    pytest.param(
        b'{"type": "get_state", "id": true}',
        {"command": "get_state", "error": '"id" must be a string or an integer, not true'},
        id="bool-id",
    ),
    pytest.param(
        b'{"type": "get_state", "id": NaN}',
        {"command": "parse", "error": PARSE + "NaN is not valid JSON"},
        id="nan",
    ),
    pytest.param(
        b"[" * 100_000,
        {"command": "parse", "error": PARSE + "the JSON is nested deeper than 256 levels"},
        id="deep-nesting",
    ),
    pytest.param(  # valid JSON, read by json.loads: the depth bound, not the parser's
        b'{"type": "get_state", "id": "s", "x": ' + b"[" * 500 + b"]" * 500 + b"}",
        {"command": "parse", "error": PARSE + "the JSON is nested deeper than 256 levels"},
        id="nested-500-deep",
    ),
    pytest.param(
        b"x" * (10 * 1024 * 1024),
        {"command": "parse", "error": PARSE + "the line is longer than 1048576 bytes"},
        id="10-MB-line",
    ),
]


@pytest.mark.parametrize(("line", "expected"), BAD_LINES)
async def test_bad_line_gets_one_error(
    autojump_clock: trio.testing.MockClock, line: bytes, expected: JSON
) -> None:
    """R-42: a bad line gets exactly one error response, and the server keeps serving."""
    async with in_memory([]) as s:
        await s.raw.send(line + b"\n")
        await s.raw.send({"id": "after", "type": "abort_retry"})
        first, second = await s.raw.read(), await s.raw.read()
    error = {k: expected[k] for k in ("id",) if k in expected}
    error.update(type="response", command=expected["command"], success=False)
    error["error"] = expected["error"]
    assert first == error
    assert list(first) == list(error)  # the reference's key order
    assert second["id"] == "after"


async def test_crlf_lines_and_unknown_fields(autojump_clock: trio.testing.MockClock) -> None:
    """R-42: CRLF line ends work, and fields a command does not know are ignored."""
    async with in_memory([]) as s:
        await s.raw.send(b'{"id": "a", "type": "abort_retry", "sessionId": "x", "extra": [1]}\r\n')
        assert await s.raw.read() == {
            "id": "a",
            "type": "response",
            "command": "abort_retry",
            "success": True,
        }


async def test_a_command_at_the_depth_bound_is_served(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A line nested exactly 256 levels deep (MAX_JSON_DEPTH) is a command like any other."""
    extra = b"[" * 255 + b"]" * 255  # in the command object: 256 levels
    async with in_memory([]) as s:
        await s.raw.send(b'{"id": "a", "type": "abort_retry", "extra": ' + extra + b"}\n")
        assert await s.raw.read() == {
            "id": "a",
            "type": "response",
            "command": "abort_retry",
            "success": True,
        }


async def test_backpressure_pauses_reading(autojump_clock: trio.testing.MockClock) -> None:
    """A client that does not read stops the server reading; nothing is lost."""

    def small(sessions: Any, stream: Any) -> RpcServer:
        return RpcServer(sessions, stream, output_high_water=1000)

    pair = trio.testing.lockstep_stream_pair
    async with in_memory([], make_server=small, stream_pair=pair) as s:
        sent = 0

        async def flood() -> None:
            nonlocal sent
            for i in range(200):
                await s.raw.send({"id": i, "type": "get_state"})
                sent += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood)
            await trio.testing.wait_all_tasks_blocked()
            assert sent < 200  # the server stopped reading
            ids = [(await s.raw.read())["id"] for _ in range(200)]
    assert ids == list(range(200))


def _update(delta: str, text: str, **event: Any) -> JSON:
    """A message_update in the wire shape, with an assistantMessageEvent of ``event``."""
    return {
        "type": "message_update",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        "delta": delta,
        "assistantMessageEvent": {"type": "text_delta", "delta": delta, **event},
    }


def test_merge_updates_joins_deltas_and_keeps_the_latest_partial() -> None:
    """Two updates of one message part merge: deltas concatenated, latest message kept."""
    merged = merge_updates(
        _update("Hel", "Hel", contentIndex=0, partial={"text": "Hel"}),
        _update("lo!", "Hello!", contentIndex=0, partial={"text": "Hello!"}),
    )
    assert merged == _update("Hello!", "Hello!", contentIndex=0, partial={"text": "Hello!"})


@pytest.mark.parametrize(
    "later",
    [
        _update("b", "ab", contentIndex=1),  # another part of the message
        _update("b", "ab", contentIndex=0, type="thinking_delta"),  # another kind of delta
        _update("", "a", contentIndex=0, type="text_end"),  # not a delta
        {"type": "message_end", "message": {"role": "assistant"}},
        {"type": "response", "command": "get_state", "success": True},
    ],
    ids=["other_content_index", "other_delta_type", "text_end", "message_end", "response"],
)
def test_merge_updates_refuses_what_would_change_the_meaning(later: JSON) -> None:
    """Only deltas of the same kind and contentIndex merge; anything else stays apart."""
    earlier = _update("a", "a", contentIndex=0)
    assert merge_updates(earlier, later) is None
    assert merge_updates(later, earlier) is None


async def test_a_lagging_client_gets_merged_updates_and_every_other_line(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 11 #5: while the client reads nothing, queued output stays near 1 MiB, not
    quadratic in the chunks; then every line comes, updates merged, meaning intact."""
    chunks = [f"{i:04d}" + "x" * 96 for i in range(1000)]  # 100 kB in 1000 chunks
    text = "".join(chunks)
    script = [FauxReply(text=text, chunks=chunks, chunk_delay=0.01)]
    pair = trio.testing.lockstep_stream_pair  # a write waits until the client reads
    async with in_memory(script, stream_pair=pair) as s:
        done = trio.Event()
        halfway = trio.Event()
        emitted = 0

        def watch(event: Any) -> None:
            nonlocal emitted
            if event.type == "message_update":
                emitted += 1
                if emitted == 500:
                    halfway.set()
            elif event.type == "agent_end" and not event.will_retry:
                done.set()

        unsubscribe = s.server.session.subscribe(watch)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.raw.send, {"id": 1, "type": "prompt", "message": "hi"})
            await halfway.wait()
            # a command in the middle: its response is written in its place
            nursery.start_soon(s.raw.send, {"id": 2, "type": "get_state"})
            await done.wait()
        unsubscribe()
        lines: list[bytes] = []
        while not lines or json.loads(lines[-1]).get("id") != 3:
            raw = await s.raw.read_raw()
            assert raw is not None
            lines.append(raw)
            if json.loads(raw).get("type") == "agent_settled":
                await s.raw.send({"id": 3, "type": "get_state"})  # a fence: then all is read
    objs = [json.loads(line) for line in lines]
    assert sum(len(line) + 1 for line in lines) < 3 * 1024 * 1024  # unmerged: 50 MB
    updates = [
        o
        for o in objs
        if o["type"] == "message_update" and o["assistantMessageEvent"]["type"] == "text_delta"
    ]
    assert len(updates) < 1000
    assert "".join(u["delta"] for u in updates) == text
    seen = ""
    for update in updates:  # each partial message is exactly the text so far
        seen += update["delta"]
        assert update["assistantMessageEvent"]["delta"] == update["delta"]
        assert update["message"]["content"] == [{"type": "text", "text": seen}]
    # runs of updates as one: the lines around them are exactly those of an unmerged run
    kinds = ("message_update" if o["type"] == "message_update" else summarize(o) for o in objs)
    collapsed = [kind for kind, _ in groupby(kinds)]
    assert collapsed == [
        "response prompt ok started",
        *RUN_START,
        "message_start assistant",
        "message_update",
        "response get_state ok isStreaming=True isRetrying=False retryAttempt=0",
        "message_update",
        "message_end assistant stop",
        "turn_end",
        "agent_end willRetry=false",
        "agent_settled",
        "response get_state ok isStreaming=False isRetrying=False retryAttempt=0",
    ]
    assert objs[-5]["message"]["content"] == [{"type": "text", "text": text}]


# -- the client's own behaviour -----------------------------------------------------------


async def test_client_command_error(autojump_clock: trio.testing.MockClock) -> None:
    """R-40: a success: false response raises RpcCommandError with the server's text."""
    async with in_memory([]) as s, connect_rpc(s.stream) as client:
        with pytest.raises(RpcCommandError, match=r"^nope failed: Unknown command: nope$") as info:
            await client.request("nope")
    assert info.value.response == {
        "id": "req_1",
        "type": "response",
        "command": "nope",
        "success": False,
        "error": "Unknown command: nope",
    }


async def test_client_wait_for_idle_after_abort_retry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-40, R-45a, R-54: wait_for_idle also ends a run whose last agent_end said willRetry;
    abort_retry is answered once the run it ended has settled."""
    settings = {"retry": {"baseDelayMs": 60_000}}
    async with in_memory([{"error": ERR_503}], settings) as s, connect_rpc(s.stream) as client:
        with client.events() as events:
            assert await client.prompt("hi") == "started"
            await events.next("auto_retry_start")
            await client.abort_retry()
            answered = [summarize(e) for e in events.drain()]
            await client.wait_for_idle()
            rest = [summarize(e) for e in events.drain()]
        state = await client.get_state()
    assert answered == [retry_end(False, 1, "Retry cancelled"), "agent_settled"]
    assert rest == []
    assert (state["isStreaming"], state["isRetrying"], state["retryAttempt"]) == (False, False, 0)
    assert trio.current_time() == 0.0


async def test_client_connection_closed() -> None:
    """A server that goes away raises RpcConnectionError in every waiting call, and later."""
    client_end, server_end = trio.testing.memory_stream_pair()
    errors: list[str] = []

    async def expect_error(call: Callable[[], Any]) -> None:
        with pytest.raises(RpcConnectionError) as info:
            await call()
        errors.append(str(info.value))

    async def next_event() -> None:
        with client.events() as events:
            await events.next()

    async with connect_rpc(client_end) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(expect_error, client.get_state)
            nursery.start_soon(expect_error, client.wait_for_idle)
            nursery.start_soon(expect_error, next_event)
            await trio.testing.wait_all_tasks_blocked()
            await server_end.aclose()  # no server ever answered; now it is gone
        await expect_error(client.abort)
    assert sorted(errors) == [
        "the rpc server closed the connection while sending abort",
        "the rpc server closed the connection while waiting for events",
        "the rpc server closed the connection while waiting for the response to get_state "
        "(id req_1)",
        "the rpc server closed the connection while waiting for the response to get_state "
        "(id req_2)",
    ]


async def test_reply_chunks_through_client(autojump_clock: trio.testing.MockClock) -> None:
    """R-40: the client's event stream yields every event in order, decoded from JSON."""
    script = faux_script_from_json([{"text": "Hello!", "chunks": ["Hel", "lo!"]}])
    async with in_memory(script) as s, connect_rpc(s.stream) as client:
        with client.events() as events:
            await client.prompt("hi")
            await client.wait_for_idle()
            seen = [summarize(e) for e in events.drain()]
    assert seen == [
        *RUN_START,
        "message_start assistant",
        "message_update text_start",
        "message_update 'Hel'",
        "message_update 'lo!'",
        "message_update text_end",
        "message_end assistant stop",
        "turn_end",
        "agent_end willRetry=false",
        "agent_settled",
    ]


async def test_a_failing_command_is_an_error_response(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-42: a command that fails inside the session gets an error; serving goes on."""

    def broken(self: AgentSession, enabled: bool) -> None:
        raise OSError("settings file vanished")

    monkeypatch.setattr(AgentSession, "set_auto_retry_enabled", broken)
    async with in_memory([]) as s:
        await s.raw.send({"id": 1, "type": "set_auto_retry", "enabled": False})
        await s.raw.send({"id": 2, "type": "abort_retry"})
        lines = [await s.raw.read() for _ in range(2)]
    assert lines == [
        {
            "id": 1,
            "type": "response",
            "command": "set_auto_retry",
            "success": False,
            "error": "OSError: settings file vanished",
        },
        {"id": 2, "type": "response", "command": "abort_retry", "success": True},
    ]


async def test_a_failing_session_factory_is_raised_as_itself() -> None:
    """serve() lets a session factory's error out unwrapped, not in an exception group."""

    def sessions() -> Any:
        raise RuntimeError("no provider configured")

    _, server_end = trio.testing.memory_stream_pair()
    with pytest.raises(RuntimeError, match=r"^no provider configured$"):
        await serve_rpc(sessions, server_end)


def test_every_command_has_exactly_one_handler() -> None:
    """The dispatch table covers every command the parser accepts, and nothing else."""
    from trio_session.rpc._server import HANDLERS

    assert set(HANDLERS) == {cls for cls, _ in COMMANDS.values()}
