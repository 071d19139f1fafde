"""Nothing from outside can nest deep enough to wedge the process (issue 25, defect 3).

JSON nested 500 deep is valid, and ``json.loads`` reads it; walked by recursive code it
raised ``RecursionError`` mid-run. Values from a model, an RPC client or a file are held
to ``MAX_JSON_DEPTH`` (256) levels where they come in, each with a clear error.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_session import (
    AgentEnd,
    AssistantMessage,
    CodecError,
    FauxProvider,
    FauxReply,
    FauxScriptError,
    ToolArgumentError,
    ToolCall,
    ToolResultMessage,
    event_to_json,
    load_faux_script,
    load_session,
    message_from_json,
    open_session,
    tool,
)
from trio_session._core.codec import to_json
from trio_session._core.json_bounds import MAX_JSON_DEPTH, json_depth, loads
from trio_session._core.text import valid_json_value
from trio_session.providers._anthropic import AnthropicProvider
from trio_session.providers._error_text import body_detail
from trio_session.providers._openai import OpenAIProvider
from trio_session.rpc._client import default_command
from trio_session.testing import EventRecorder

from .http_server import ScriptedServer, event_stream, sse
from .rpc_helpers import JSON, RawLines

TOO_DEEP = (
    "Invalid response from server: the arguments of a tool call are nested deeper than 256 levels"
)


def nested(depth: int) -> dict[str, Any]:
    """Tool-call arguments ``depth`` levels deep: ``{"a": {"a": … {"a": "x"}}}``."""
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    assert isinstance(value, dict)
    return value


@tool
def echo(a: Any) -> str:
    """Say ok, whatever ``a`` is."""
    return "ok"


# -- the bound itself -----------------------------------------------------------------------


def test_json_depth_counts_containers_without_recursion() -> None:
    """Scalars are 0 deep, ``{}`` and ``[]`` 1; a value far past the recursion limit is
    measured (no RecursionError), and counting stops past the limit."""
    values: list[Any] = ["x", 3, None, {}, [], {"a": [1]}, [[], [[{}]]]]
    assert [json_depth(v) for v in values] == [0, 0, 0, 1, 1, 2, 4]
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert json_depth(deep) == MAX_JSON_DEPTH + 1
    assert json_depth(deep, limit=200_000) == 100_001


def test_loads_turns_the_parsers_recursion_error_into_a_codec_error() -> None:
    """JSON too deep for ``json.loads`` is a ``CodecError`` (a ``ValueError``) that says so."""
    with pytest.raises(CodecError) as caught:
        loads("[" * 100_000 + "]" * 100_000)
    assert str(caught.value) == "the JSON is nested deeper than 256 levels"


def test_to_json_refuses_what_it_cannot_encode_with_a_clear_error() -> None:
    """The encoder is bounded too: a value built in Python 1000 deep is a ``CodecError``."""
    with pytest.raises(CodecError) as caught:
        to_json(ToolCall("1", "echo", nested(1000)))
    assert str(caught.value) == "cannot encode a value nested deeper than 288 levels"


# -- a model's tool call --------------------------------------------------------------------


async def test_tool_call_500_deep_ends_the_run_with_a_clear_error(tmp_path: Path) -> None:
    """Issue 25: a tool call 500 deep ends the reply as an error that says why; the run
    settles (agent_end, not retried), every event encodes, the session file takes every
    line and reads back whole, and the session goes on."""
    path = tmp_path / "session.jsonl"
    script = [FauxReply(tool_calls=(ToolCall("1", "echo", nested(500)),)), FauxReply(text="hi")]
    provider = FauxProvider(script)
    async with open_session(provider, tools=[echo], history=path) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("go")
        assert (reply.stop_reason, reply.error_message) == ("error", TOO_DEEP)
        assert reply.content == ()
        (end,) = recorder.of(AgentEnd)
        assert recorder.types[-2:] == ["agent_end", "agent_settled"]
        assert end.will_retry is False
        for event in recorder.events:
            json.dumps(event_to_json(event))
        assert (await session.prompt("again")).text == "hi"
    loaded = load_session(path)
    assert loaded.warnings == ()
    assert [m.role for m in loaded.messages] == ["user", "assistant", "user", "assistant"]


async def test_tool_call_at_the_bound_runs_and_one_past_it_does_not(tmp_path: Path) -> None:
    """Arguments 256 levels deep reach the tool and round-trip the session file; 257 end
    the reply as an error."""
    path = tmp_path / "session.jsonl"
    script = [
        FauxReply(tool_calls=(ToolCall("1", "echo", nested(MAX_JSON_DEPTH)),)),
        FauxReply(text="done"),
        FauxReply(tool_calls=(ToolCall("2", "echo", nested(MAX_JSON_DEPTH + 1)),)),
    ]
    async with open_session(FauxProvider(script), tools=[echo], history=path) as session:
        assert (await session.prompt("at the bound")).text == "done"
        past = await session.prompt("past it")
        history = session.history
    assert past.error_message == TOO_DEEP
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.text, r.is_error) for r in results] == [("1", "ok", False)]
    loaded = load_session(path)
    assert loaded.warnings == ()
    called = loaded.messages[1]
    assert isinstance(called, AssistantMessage)
    assert called.tool_calls[0].arguments == nested(MAX_JSON_DEPTH)


async def test_a_tool_called_directly_with_arguments_too_deep_says_so() -> None:
    """``Tool.execute`` with arguments from elsewhere (an extension, a program) is held to
    the same bound: a ``ToolArgumentError``, not a RecursionError."""
    with pytest.raises(ToolArgumentError) as caught:
        await echo.execute(nested(100_000))
    assert str(caught.value) == (
        'invalid arguments for tool "echo": the arguments are nested deeper than 256 levels'
    )


@pytest.fixture
async def server(nursery: trio.Nursery) -> ScriptedServer:
    """A scripted HTTP server on 127.0.0.1, running in the test's nursery."""
    server = ScriptedServer()
    await nursery.start(server.run)
    return server


@pytest.fixture
async def openai(server: ScriptedServer) -> AsyncIterator[OpenAIProvider]:
    """An OpenAIProvider pointed at the server."""
    async with OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-x", timeout=5) as p:
        yield p


def openai_tool_call(arguments: str) -> list[str]:
    """An OpenAI event stream with one tool call whose arguments are ``arguments``."""
    call = {"index": 0, "id": "call_1", "function": {"name": "echo", "arguments": arguments}}
    return [
        sse({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}),
        sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        "data: [DONE]\n\n",
    ]


@pytest.mark.parametrize("depth", [500, 100_000], ids=["json-reads-it", "too-deep-for-json"])
async def test_openai_tool_call_too_deep(
    server: ScriptedServer, openai: OpenAIProvider, depth: int
) -> None:
    """Over real HTTP: arguments 500 deep (which json reads) and 100 000 deep (which it
    cannot) end the reply with the same clear error."""
    text = '{"a": ' * depth + "1" + "}" * depth
    server.script(event_stream(openai_tool_call(text)))
    async with open_session(openai, "gpt-test", tools=[echo]) as session:
        reply = await session.prompt("go")
    assert (reply.stop_reason, reply.error_message) == ("error", TOO_DEEP)


async def test_anthropic_tool_input_too_deep_for_json(server: ScriptedServer) -> None:
    """Over real HTTP: a tool_use input too deep for the parser ends the reply clearly."""
    depth = 100_000
    partial = '{"a": ' * depth + "1" + "}" * depth

    def event(kind: str, **fields: Any) -> str:
        return sse({"type": kind, **fields}, event=kind)

    block = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": partial}
    server.script(
        event_stream(
            [
                event("message_start", message={"id": "msg_1", "usage": {"input_tokens": 1}}),
                event("content_block_start", index=0, content_block=block),
                event("content_block_delta", index=0, delta=delta),
                event("content_block_stop", index=0),
                event("message_delta", delta={"stop_reason": "tool_use"}, usage={}),
                event("message_stop"),
            ]
        )
    )
    async with (
        AnthropicProvider(base_url=server.url, api_key="sk-x", timeout=5) as provider,
        open_session(provider, "claude-test", tools=[echo]) as session,
    ):
        reply = await session.prompt("go")
    assert (reply.stop_reason, reply.error_message) == ("error", TOO_DEEP)


def test_an_error_body_too_deep_is_read_as_text() -> None:
    """A provider's JSON error body nested past the bound is shown as a text excerpt."""
    body = '{"error": {"message": ' + "[" * 600 + "]" * 600 + "}}"
    assert body_detail(body, "application/json") == body[:299] + "…"


# -- files ----------------------------------------------------------------------------------


def test_session_file_entry_too_deep_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """A session-file line whose tool-call arguments nest past the bound is skipped with a
    warning naming it, as any invalid entry; the rest of the file is read."""
    path = tmp_path / "s.jsonl"
    time = "2026-01-01T00:00:00.000Z"
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": time, "cwd": "/"}
    call = {"type": "toolCall", "id": "1", "name": "echo", "arguments": nested(300)}
    lines = [
        header,
        {"type": "message", "id": "a1", "parentId": None, "timestamp": time,
         "message": {"role": "user", "content": "go", "timestamp": 1}},
        {"type": "message", "id": "a2", "parentId": "a1", "timestamp": time,
         "message": {"role": "assistant", "content": [call], "stopReason": "toolUse",
                     "timestamp": 2}},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loaded = load_session(path)
    assert loaded.warnings == (
        f"{path}:3: entry.message.content[0].arguments is nested deeper than 256 levels; skipped",
    )
    assert [m.role for m in loaded.messages] == ["user"]


def test_lone_surrogates_are_repaired_at_any_depth() -> None:
    """The session reader's repair of lone surrogates walks without recursion: a value
    100 000 deep is repaired, not a RecursionError."""
    deep: Any = "x\ud800"
    for _ in range(100_000):
        deep = [deep]
    fixed, replaced = valid_json_value({"keep": {"a": 1}, "deep": deep})
    assert replaced == 1
    for _ in range(100_000):
        fixed["deep"] = fixed["deep"][0]
    assert fixed["deep"] == "x\ufffd"


def test_a_message_too_deep_is_a_codec_error() -> None:
    """``message_from_json`` names the value that nests too deeply."""
    data = {"role": "toolResult", "toolCallId": "1", "toolName": "echo", "content": [],
            "isError": False, "timestamp": 1, "details": nested(300)}  # fmt: skip
    with pytest.raises(CodecError) as caught:
        message_from_json(data)
    assert str(caught.value) == "message.details is nested deeper than 256 levels"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (json.dumps(nested(300)), "[0].toolCalls[0].arguments is nested deeper than 256 levels"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "the JSON is nested deeper than 256 levels"),
    ],
    ids=["json-reads-it", "too-deep-for-json"],
)
def test_faux_script_too_deep_is_a_clear_error(tmp_path: Path, arguments: str, error: str) -> None:
    """A faux script with tool-call arguments nested too deeply names the reply and key."""
    path = tmp_path / "script.json"
    path.write_text(f'[{{"toolCalls": [{{"id": "1", "name": "echo", "arguments": {arguments}}}]}}]')
    with pytest.raises(FauxScriptError) as caught:
        load_faux_script(path)
    prefix = (
        f"faux script {path}: " if error.startswith("[") else f"faux script {path} cannot be read: "
    )
    assert str(caught.value) == prefix + error


# -- the RPC server, as a real process -------------------------------------------------------


async def test_rpc_process_survives_a_tool_call_500_deep(
    tmp_path: Path, server: ScriptedServer
) -> None:
    """Issue 25 through ``trio-session rpc`` (OpenAI over loopback HTTP, a session file):
    a tool call 500 deep ends the run with a clear error, ``agent_end`` and
    ``agent_settled``; ``get_state``
    is answered; a command line 500 deep gets an error response; end of input ends the
    process, exit 0, nothing on stderr."""
    text = json.dumps(nested(500))
    server.script(event_stream(openai_tool_call(text)))
    args = ["--provider", "openai", "--model", "gpt-test"]
    args += ["--base-url", f"{server.url}/v1", "--session-dir", str(tmp_path / "sessions")]
    process = await trio.lowlevel.open_process(
        default_command(*args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "OPENAI_API_KEY": "sk-x"},
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    raw = RawLines(process.stdin, process.stdout)
    seen: list[JSON] = []
    try:
        with trio.fail_after(60):
            await raw.send({"id": "p", "type": "prompt", "message": "go"})
            while not (seen and seen[-1]["type"] == "agent_settled"):
                seen.append(await raw.read())
            await raw.send({"id": "s", "type": "get_state"})
            state = await raw.read()
            deep = b"[" * 500 + b"]" * 500
            await raw.send(b'{"id": "d", "type": "get_state", "x": ' + deep + b"}\n")
            refused = await raw.read()
            await process.stdin.aclose()
            assert await raw.rest() == []
            await process.wait()
            stderr = b""
            while chunk := await process.stderr.receive_some():
                stderr += chunk
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert seen[0] == {
        "id": "p",
        "type": "response",
        "command": "prompt",
        "success": True,
        "data": {"disposition": "started"},
    }
    assert seen[-1] == {"type": "agent_settled", "aborted": False}
    assert seen[-2]["willRetry"] is False
    assert seen[-2]["messages"][-1]["errorMessage"] == TOO_DEEP
    assert (state["id"], state["success"], state["data"]["isStreaming"]) == ("s", True, False)
    assert refused == {
        "type": "response",
        "command": "parse",
        "success": False,
        "error": "Failed to parse command: the JSON is nested deeper than 256 levels",
    }
    assert process.returncode == 0
    assert stderr.decode() == ""
    assert len(server.requests) == 1
    (file,) = (tmp_path / "sessions").glob("*.jsonl")
    loaded = load_session(file)
    assert loaded.warnings == ()
    last = loaded.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.error_message == TOO_DEEP
