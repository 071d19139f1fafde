"""pi's model, thinking, stats, bash and info RPC commands: raw lines, in memory and real."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import FauxProvider, FauxReply, Model, ModelCost, Usage, open_session
from trio_session.rpc import RpcServer, encode_line
from trio_session.rpc._client import default_command

from .rpc_helpers import JSON, RawLines, write_json

PLAIN = Model(id="plain", provider="faux", base_url="http://127.0.0.1:9/v1")
THINKER = Model(id="thinker", provider="faux", reasoning=True, context_window=1000)

PLAIN_JSON = {
    "id": "plain",
    "name": "plain",
    "api": "",
    "provider": "faux",
    "baseUrl": "http://127.0.0.1:9/v1",
    "reasoning": False,
    "input": ["text"],
    "contextWindow": 128000,
    "maxTokens": 16384,
    "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0, "cacheWrite": 0.0},
}
THINKER_JSON = {
    **PLAIN_JSON,
    "id": "thinker",
    "name": "thinker",
    "baseUrl": "",
    "reasoning": True,
    "contextWindow": 1000,
}


@asynccontextmanager
async def served(
    script: list[FauxReply], models: list[Model], history: Path | None = None
) -> AsyncIterator[RawLines]:
    """An RpcServer over an in-memory stream, serving a faux session with ``models``."""
    client_end, server_end = trio.testing.memory_stream_pair()
    provider = FauxProvider(script)

    def sessions() -> Any:
        return open_session(provider, models[0], models=models, history=history)

    async with trio.open_nursery() as nursery:
        await nursery.start(RpcServer(sessions, server_end).serve)
        yield RawLines(client_end, client_end)
        await client_end.send_eof()


async def ask(raw: RawLines, command: JSON) -> JSON:
    """Send one command line; return the next line (its response)."""
    await raw.send(command)
    return await raw.read()


def ok(command: str, data: Any = ..., id: int = 1) -> JSON:
    """A success response as pi writes it (``data`` left out when not given)."""
    out: JSON = {"id": id, "type": "response", "command": command, "success": True}
    if data is not ...:
        out["data"] = data
    return out


async def test_models_over_rpc() -> None:
    """get_available_models, set_model (and pi's not-found error), cycle_model, get_state."""
    async with served([], [PLAIN, THINKER]) as raw:
        response = await ask(raw, {"id": 1, "type": "get_available_models"})
        assert response == ok("get_available_models", {"models": [PLAIN_JSON, THINKER_JSON]})
        response = await ask(raw, {"id": 1, "type": "set_model", "provider": "x", "modelId": "y"})
        assert response == {
            "id": 1,
            "type": "response",
            "command": "set_model",
            "success": False,
            "error": "Model not found: x/y",
        }
        event = await ask(
            raw, {"id": 1, "type": "set_model", "provider": "faux", "modelId": "thinker"}
        )
        assert event == {"type": "thinking_level_changed", "level": "medium"}  # as pi: first
        assert await raw.read() == ok("set_model", THINKER_JSON)
        state = (await ask(raw, {"id": 1, "type": "get_state"}))["data"]
        assert (state["model"], state["thinkingLevel"]) == (THINKER_JSON, "medium")
        event = await ask(raw, {"id": 1, "type": "cycle_model"})
        assert event == {"type": "thinking_level_changed", "level": "off"}
        assert await raw.read() == ok(
            "cycle_model", {"model": PLAIN_JSON, "thinkingLevel": "off", "isScoped": False}
        )


async def test_nothing_to_cycle_is_data_null() -> None:
    """One model, or no reasoning: pi answers success with ``"data": null``."""
    async with served([], [PLAIN]) as raw:
        await raw.send({"id": 1, "type": "cycle_model"})
        assert await raw.read_raw() == (
            b'{"id":1,"type":"response","command":"cycle_model","success":true,"data":null}'
        )
        assert await ask(raw, {"id": 2, "type": "cycle_thinking_level"}) == ok(
            "cycle_thinking_level", None, id=2
        )


async def test_thinking_over_rpc() -> None:
    """set_thinking_level answers without data; cycle_thinking_level gives the new level;
    a level pi does not have is refused, naming the choices."""
    async with served([], [THINKER]) as raw:
        event = await ask(raw, {"id": 1, "type": "set_thinking_level", "level": "xhigh"})
        assert event == {"type": "thinking_level_changed", "level": "high"}
        assert await raw.read() == ok("set_thinking_level")
        assert (await ask(raw, {"id": 1, "type": "get_state"}))["data"]["thinkingLevel"] == "high"
        event = await ask(raw, {"id": 1, "type": "cycle_thinking_level"})
        assert event == {"type": "thinking_level_changed", "level": "off"}
        assert await raw.read() == ok("cycle_thinking_level", {"level": "off"})
        response = await ask(raw, {"id": 1, "type": "set_thinking_level", "level": "max"})
        assert response == {
            "id": 1,
            "type": "response",
            "command": "set_thinking_level",
            "success": False,
            "error": 'set_thinking_level.level must be one of "off", "minimal", "low", '
            '"medium", "high", "xhigh", not "max"',
        }


async def test_stats_text_export_and_commands(tmp_path: Path) -> None:
    """get_last_assistant_text, get_session_stats, export_html and get_commands, pi's shapes."""
    script = [FauxReply(text=" Hello there ", usage=Usage(input=90, output=10))]
    async with served(script, [THINKER], history=tmp_path / "s.jsonl") as raw:
        response = await ask(raw, {"id": 1, "type": "get_last_assistant_text"})
        assert response == ok("get_last_assistant_text", {})  # pi's wire: no text, no key
        await raw.send({"id": 1, "type": "prompt", "message": "hi"})
        while (await raw.read()).get("type") != "agent_settled":
            pass
        response = await ask(raw, {"id": 1, "type": "get_last_assistant_text"})
        assert response == ok("get_last_assistant_text", {"text": "Hello there"})
        stats = (await ask(raw, {"id": 1, "type": "get_session_stats"}))["data"]
        assert stats["sessionFile"] == str(tmp_path / "s.jsonl")
        assert (stats["userMessages"], stats["assistantMessages"], stats["totalMessages"]) == (
            1,
            1,
            2,
        )
        assert stats["tokens"] == {
            "input": 90,
            "output": 10,
            "cacheRead": 0,
            "cacheWrite": 0,
            "total": 100,
        }
        assert stats["contextUsage"] == {"tokens": 100, "contextWindow": 1000, "percent": 10.0}
        target = tmp_path / "out.html"
        response = await ask(raw, {"id": 1, "type": "export_html", "outputPath": str(target)})
        assert response == ok("export_html", {"path": str(target)})
        assert "Hello there" in await trio.Path(target).read_text()
        below_a_file = str(target / "x.html")  # out.html is a file: no directory under it
        response = await ask(raw, {"id": 2, "type": "export_html", "outputPath": below_a_file})
        assert response["success"] is False
        assert response["error"].startswith("cannot write the HTML file: [Errno ")
        assert str(target) in response["error"]
        assert await ask(raw, {"id": 1, "type": "get_commands"}) == ok(
            "get_commands", {"commands": []}
        )


async def test_bash_and_abort_bash_in_memory() -> None:
    """bash is answered when the command is over, so abort_bash is read (and answered) first."""
    async with served([], [PLAIN]) as raw:
        update = await ask(raw, {"id": 1, "type": "bash", "command": "echo hi; exit 2"})
        assert update == {"type": "bash_execution_update", "id": 1, "delta": "hi\n"}
        assert await raw.read() == ok(
            "bash", {"output": "hi\n", "exitCode": 2, "cancelled": False, "truncated": False}
        )
        await raw.send({"id": 2, "type": "bash", "command": "sleep 60"})
        await raw.send({"id": 3, "type": "bash", "command": "true"})
        assert await raw.read() == {
            "id": 3,
            "type": "response",
            "command": "bash",
            "success": False,
            "error": "a bash command is already running; "
            'wait for its response or send "abort_bash"',
        }
        assert await ask(raw, {"id": 4, "type": "abort_bash"}) == ok("abort_bash", id=4)
        assert await raw.read() == ok(
            "bash", {"output": "", "cancelled": True, "truncated": False}, id=2
        )
        messages = (await ask(raw, {"id": 5, "type": "get_messages"}))["data"]["messages"]
        assert [(m["role"], m["command"]) for m in messages] == [
            ("bashExecution", "echo hi; exit 2"),
            ("bashExecution", "sleep 60"),
        ]


@asynccontextmanager
async def rpc_process(tmp_path: Path) -> AsyncIterator[tuple[trio.Process, RawLines]]:
    """A real ``trio-session rpc`` process on an empty faux script, in ``tmp_path``; its
    pipes as raw lines. Killed on the way out if it has not exited; 60 s at most."""
    script = write_json(tmp_path / "script.json", [])
    process = await trio.lowlevel.open_process(
        default_command("--faux", str(script)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        with trio.fail_after(60):
            yield process, RawLines(process.stdin, process.stdout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_bash_and_abort_bash_in_the_real_process(tmp_path: Path) -> None:
    """The ``trio-session rpc`` process runs bash, and abort_bash stops it."""
    async with rpc_process(tmp_path) as (process, raw):
        assert process.stdin is not None
        await raw.send({"id": 1, "type": "bash", "command": "pwd"})
        update = {"type": "bash_execution_update", "id": 1, "delta": f"{tmp_path}\n"}
        assert await raw.read() == update
        assert await raw.read() == ok(
            "bash",
            {"output": f"{tmp_path}\n", "exitCode": 0, "cancelled": False, "truncated": False},
        )
        # Both lines in one write: abort_bash must find the run bash just started.
        await raw.send(
            encode_line({"id": 2, "type": "bash", "command": "sleep 60"})
            + encode_line({"id": 3, "type": "abort_bash"})
        )
        assert await raw.read() == ok("abort_bash", id=3)
        assert await raw.read() == ok(
            "bash", {"output": "", "cancelled": True, "truncated": False}, id=2
        )
        await process.stdin.aclose()
        assert await process.wait() == 0


async def test_a_bash_running_at_end_of_input_is_answered(tmp_path: Path) -> None:
    """Every line gets its response: a bash still running when the input ends is stopped
    (the server is shutting down) and answered ``cancelled`` before the process exits."""
    async with rpc_process(tmp_path) as (process, raw):
        assert process.stdin is not None
        await raw.send({"id": 1, "type": "bash", "command": "sleep 60"})
        await process.stdin.aclose()
        assert await raw.read() == ok("bash", {"output": "", "cancelled": True, "truncated": False})
        assert await process.wait() == 0


async def test_cost_totals_from_model_prices_in_stats_and_over_rpc() -> None:
    """Each reply is priced from its model's $/M rates; the session totals and RPC
    ``get_session_stats`` add them up (1000 in + 200 out, then 2000 in + 100 out + 500
    cache reads at $3 / $15 / $0.30 per million)."""
    priced = Model(
        id="priced",
        provider="faux",
        context_window=10_000,
        cost=ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
    )
    script = [
        FauxReply(text="a", usage=Usage(input=1000, output=200)),
        FauxReply(text="b", usage=Usage(input=2000, output=100, cache_read=500)),
    ]
    first = 1000 * 3 / 1e6 + 200 * 15 / 1e6
    second = 2000 * 3 / 1e6 + 100 * 15 / 1e6 + 500 * 0.3 / 1e6
    async with open_session(FauxProvider(list(script)), priced) as session:
        reply = await session.prompt("x")
        assert reply.usage.cost.total == pytest.approx(first)
        await session.prompt("y")
        stats = session.stats()
        assert stats.cost == pytest.approx(first + second)
        assert (stats.tokens.input, stats.tokens.output, stats.tokens.cache_read) == (
            3000,
            300,
            500,
        )
        assert stats.context_usage is not None
        assert stats.context_usage.tokens == 2600
        assert stats.context_usage.percent == pytest.approx(26.0)
    async with served(list(script), [priced]) as raw:
        for text in ("x", "y"):
            await raw.send({"id": 1, "type": "prompt", "message": text})
            while (await raw.read()).get("type") != "agent_settled":
                pass
        data = (await ask(raw, {"id": 1, "type": "get_session_stats"}))["data"]
        assert data["cost"] == pytest.approx(first + second)
        assert data["contextUsage"]["percent"] == pytest.approx(26.0)


async def test_costs_are_pi_ai_floats_to_the_last_bit() -> None:
    """A reply's cost is pi-ai's (rate / 1e6) * tokens, unrounded: 100 tokens at $0.15/M
    is 1.4999999999999999e-05, the float pi writes (node prints it 0.000014999999999999999),
    not 1.5e-05 (the other order); 10 at $0.1/M is 1.0000000000000002e-06."""
    cheap = Model(id="cheap", provider="faux", cost=ModelCost(input=0.15, output=0.1))
    script = [FauxReply(text="a", usage=Usage(input=100, output=10))]
    async with served(script, [cheap]) as raw:
        await raw.send({"id": 1, "type": "prompt", "message": "x"})
        while (end := await raw.read()).get("type") != "message_end" or (
            end["message"]["role"] != "assistant"
        ):
            pass
    cost = end["message"]["usage"]["cost"]
    assert (cost["input"], cost["output"], cost["total"]) == (
        1.4999999999999999e-05,
        1.0000000000000002e-06,
        1.6e-05,
    )


async def test_bash_excluded_from_context_never_reaches_the_model() -> None:
    """Issue 41, row 5: bash with ``excludeFromContext: true`` is recorded (get_messages
    shows it, flagged) but the next request leaves it out; one without the flag is sent."""
    client_end, server_end = trio.testing.memory_stream_pair()
    provider = FauxProvider([FauxReply(text="done")])
    raw = RawLines(client_end, client_end)

    async def until(kind: str, id: int | None = None) -> JSON:
        while True:
            line = await raw.read()
            if line["type"] == kind and (id is None or line.get("id") == id):
                return line

    async with trio.open_nursery() as nursery:
        await nursery.start(RpcServer(lambda: open_session(provider, PLAIN), server_end).serve)
        hidden = {"id": 1, "type": "bash", "command": "echo kept-out", "excludeFromContext": True}
        await raw.send(hidden)
        assert (await until("response", 1))["data"]["output"] == "kept-out\n"
        await raw.send({"id": 2, "type": "bash", "command": "echo sent-on"})
        assert (await until("response", 2))["data"]["output"] == "sent-on\n"
        messages = (await ask(raw, {"id": 3, "type": "get_messages"}))["data"]["messages"]
        assert [m.get("excludeFromContext") for m in messages] == [True, None]
        await raw.send({"id": 4, "type": "prompt", "message": "go"})
        await until("agent_settled")
        await client_end.send_eof()
    (request,) = provider.requests
    sent = repr(request.messages)
    assert "sent-on" in sent
    assert "kept-out" not in sent
