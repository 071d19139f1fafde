"""The retry scenarios of issue 28 (acceptance 1), run against pi 1.6.0 and against
``trio-session rpc`` under ``retry.profile: "pi-1.6"``.

Each scenario gets, per agent, a fresh pi agent dir (models.json pointing at a fresh
``LoopbackLLM`` from the conformance kit, settings.json with the scenario's ``retry`` and
``compaction`` groups and ``"profile": "pi-1.6"``, which pi 1.6.0 does not read) and a
fresh agent process speaking pi's RPC protocol over stdio: pi is ``node22 dist/cli.js
--mode rpc``, ours ``python -m trio_session rpc --agent-dir …``. The client here sends
the scenario's commands, waits until the agent is idle (``get_state``: not streaming, not
compacting, not retrying; both agents keep ``isStreaming`` true until the prompt is over),
and records every event with its arrival time, every request the server saw with its
arrival time, and the final ``get_messages``.

The agents run one after the other, never together, so one's timing does not load the
other's.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import trio

from tests.interop.conftest import MODELS, PROVIDER, REPO, models_json
from trio_session.conformance._server import HttpError, LoopbackLLM, Step, Stream, error_body

Agent = Literal["pi", "trio-session"]

#: How long one scenario may take against one agent before it is a hang.
SCENARIO_TIMEOUT_S = 120

#: How often the client asks ``get_state`` while it waits for the agent to be idle.
POLL_S = 0.05

#: How long a command's response may take.
RESPONSE_TIMEOUT_S = 30


def e503() -> HttpError:
    """A 503 with OpenAI's error body."""
    return HttpError(503, error_body("Service Unavailable"))


@attrs.frozen
class Prompt:
    """Send ``prompt`` with ``text``; on the first event of type ``on`` (if any), send the
    command ``then`` (``abort_retry``, ``abort``); then wait until idle."""

    text: str
    on: str | None = None
    then: str | None = None


@attrs.frozen
class Compact:
    """Send ``compact`` and wait for its response, then until idle."""


Action = Prompt | Compact


@attrs.frozen
class Scenario:
    """One scenario: the server's script, the settings, the client's actions."""

    name: str
    script: tuple[Step, ...]
    actions: tuple[Action, ...]
    retry: dict[str, Any] = attrs.field(factory=dict)
    compaction: dict[str, Any] = attrs.field(factory=dict)
    #: Files written into the agent's working directory before it starts (path: text).
    files: dict[str, str] = attrs.field(factory=dict)
    profile: str = "pi-1.6"
    #: models.json fields that replace the first model's (``contextWindow``, …).
    model: dict[str, Any] = attrs.field(factory=dict)

    def settings(self) -> dict[str, Any]:
        """settings.json: the provider SDK's own retries off, our profile (pi-1.6 unless
        the scenario says)."""
        retry = {
            "enabled": True,
            "maxRetries": 3,
            "baseDelayMs": 200,
            "provider": {"maxRetries": 0},
            "profile": self.profile,
            **self.retry,
        }
        return {"retry": retry, "compaction": {"enabled": True, **self.compaction}}

    def models(self, base_url: str) -> dict[str, Any]:
        """models.json: the interop provider at ``base_url``, its first model changed by
        ``model``."""
        models = models_json(base_url)
        models["providers"][PROVIDER]["models"][0].update(self.model)
        return models


@attrs.frozen
class Event:
    """An event and when the client read it (seconds, Trio's clock)."""

    time: float
    data: dict[str, Any]


@attrs.frozen
class Run:
    """What one agent did in one scenario."""

    agent: Agent
    events: tuple[Event, ...]
    requests: tuple[float, ...]
    prompts: tuple[str, ...]
    messages: Any
    responses: tuple[dict[str, Any], ...]
    stderr: str
    #: The body of every request the server saw, in order.
    bodies: tuple[Any, ...] = ()
    #: The agent's working directory.
    cwd: str = ""


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def command_line(agent: Agent, pi_package: Path, node22: Path, agent_dir: Path) -> list[str]:
    """How the agent is started: pi's cli.js under node 22, or ``python -m trio_session``."""
    common = ["--provider", PROVIDER, "--model", MODELS[0]]
    if agent == "pi":
        cli = str(pi_package / "dist" / "cli.js")
        return [str(node22), cli, "--mode", "rpc", *common, "--offline"]
    return [sys.executable, "-m", "trio_session", "rpc", "--agent-dir", str(agent_dir), *common]


class _Client:
    """pi's RPC protocol over the agent's stdin and stdout: commands by id, events recorded."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.events: list[Event] = []
        self.responses: list[dict[str, Any]] = []
        self.waiting: dict[str, tuple[trio.Event, list[dict[str, Any]]]] = {}
        self.listeners: list[Callable[[dict[str, Any]], None]] = []
        self.next_id = 0
        # A command sent from an event (send_nowait) can meet the idle poll's get_state:
        # one writer at a time on the agent's stdin.
        self.sending = trio.Lock()

    async def read(self) -> None:
        buffer = b""
        while True:
            data = await self.stdout.receive_some(65536)
            if not data:
                return
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                record = json.loads(line)
                if record.get("type") == "response":
                    waiter = self.waiting.pop(str(record.get("id")), None)
                    if waiter is not None:
                        waiter[1].append(record)
                        waiter[0].set()
                    continue
                self.events.append(Event(trio.current_time(), record))
                for listener in list(self.listeners):
                    listener(record)

    def send_nowait(self, nursery: trio.Nursery, kind: str, **fields: Any) -> None:
        nursery.start_soon(self.call, kind, fields)

    async def call(self, kind: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        ident = f"c{self.next_id}"
        done, box = trio.Event(), list[dict[str, Any]]()
        self.waiting[ident] = (done, box)
        line = json.dumps({"id": ident, "type": kind, **(fields or {})}) + "\n"
        async with self.sending:
            await self.stdin.send_all(line.encode())
        with trio.fail_after(RESPONSE_TIMEOUT_S):
            await done.wait()
        response: dict[str, Any] = box[0]
        if kind != "get_state":
            self.responses.append({k: v for k, v in response.items() if k != "id"})
        return response

    async def idle(self) -> None:
        """Return once ``get_state`` says nothing runs, compacts or retries."""
        while True:
            data = (await self.call("get_state"))["data"]
            if not (data["isStreaming"] or data["isCompacting"] or data.get("isRetrying")):
                return
            await trio.sleep(POLL_S)


async def _act(client: _Client, action: Action, nursery: trio.Nursery) -> None:
    if isinstance(action, Compact):
        await client.call("compact")
        await client.idle()
        return
    if action.on is not None and action.then is not None:
        sent = False
        command = action.then

        def listener(event: dict[str, Any]) -> None:
            nonlocal sent
            if not sent and event.get("type") == action.on:
                sent = True
                client.send_nowait(nursery, command)

        client.listeners.append(listener)
    await client.call("prompt", {"message": action.text})
    await client.idle()
    client.listeners.clear()


async def _run(agent: Agent, scenario: Scenario, pi_package: Path, node22: Path, work: Path) -> Run:
    agent_dir, cwd, home = work / "agent", work / "project", work / "home"
    for directory in (cwd, home):
        directory.mkdir(parents=True, exist_ok=True)
    for name, text in scenario.files.items():
        _write_text(cwd / name, text)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
        "PYTHONPATH": str(REPO),
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
    }
    server = LoopbackLLM(script=list(scenario.script))
    stderr = work / "stderr.txt"
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        _write(agent_dir / "models.json", scenario.models(server.base_url))
        _write(agent_dir / "settings.json", scenario.settings())
        with stderr.open("wb") as err:
            process = await trio.lowlevel.open_process(
                command_line(agent, pi_package, node22, agent_dir),
                stdin=-1,
                stdout=-1,
                stderr=err,
                cwd=str(cwd),
                env=env,
            )
        client = _Client(process)
        try:
            with trio.fail_after(SCENARIO_TIMEOUT_S):
                async with trio.open_nursery() as inner:
                    inner.start_soon(client.read)
                    for action in scenario.actions:
                        await _act(client, action, inner)
                    messages = (await client.call("get_messages"))["data"]["messages"]
                    await client.stdin.aclose()
                    await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        nursery.cancel_scope.cancel()
    return Run(
        agent,
        tuple(client.events),
        tuple(r.time for r in server.requests),
        tuple(r.prompt() for r in server.requests),
        messages,
        tuple(client.responses),
        stderr.read_text(),
        tuple(r.body for r in server.requests),
        str(cwd),
    )


def run_scenario(
    agent: Agent, scenario: Scenario, pi_package: Path, node22: Path, work: Path
) -> Run:
    """Run ``scenario`` against ``agent`` in ``work``; what it did."""
    return trio.run(_run, agent, scenario, pi_package, node22, work)


def scenarios() -> Sequence[Scenario]:
    """The scenarios of issue 28's acceptance 1."""
    return SCENARIOS


_LIMIT = error_body("Monthly usage limit reached. Upgrade your plan.", "usage_limit_reached")
_CONNECTION_LIMIT = error_body(
    "Codex error: websocket_connection_limit_reached",
    "server_error",
    "websocket_connection_limit_reached",
)
_OVERFLOW = error_body(
    "This model's maximum context length is 32000 tokens. However, your messages resulted"
    " in 40000 tokens. Please reduce the length of the messages.",
    "invalid_request_error",
    "context_length_exceeded",
)
_WORDS = " ".join(f"word{i}" for i in range(400))

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("two-503s", (e503(), e503(), Stream("Answer.")), (Prompt("hello"),)),
    Scenario("over-the-maximum", (e503(), e503(), e503()), (Prompt("hello"),), {"maxRetries": 2}),
    Scenario(
        "over-the-maximum-then-again",
        (e503(), e503(), e503(), e503(), Stream("Answer.")),
        (Prompt("hello"), Prompt("again")),
        {"maxRetries": 2},
    ),
    Scenario(
        "abort-retry-in-backoff",
        (e503(), Stream("Answer.")),
        (Prompt("hello", "auto_retry_start", "abort_retry"),),
        {"baseDelayMs": 20_000},
    ),
    Scenario(
        "abort-in-backoff",
        (e503(), Stream("Answer.")),
        (Prompt("hello", "auto_retry_start", "abort"),),
        {"baseDelayMs": 20_000},
    ),
    Scenario(
        "retry-after",
        (
            HttpError(
                429, error_body("Rate limit reached", "rate_limit_error"), (("retry-after", "1"),)
            ),
            HttpError(503, error_body("Service Unavailable"), (("retry-after-ms", "700"),)),
            Stream("Answer."),
        ),
        (Prompt("hello"),),
    ),
    Scenario(
        "stream-reset",
        (Stream("An answer cut short.", drop="reset"), Stream("Answer.")),
        (Prompt("hello"),),
    ),
    Scenario(
        "stream-closed",
        (Stream("An answer cut short.", drop="close"), Stream("Answer.")),
        (Prompt("hello"),),
    ),
    Scenario("usage-limit", (HttpError(429, _LIMIT), Stream("Answer.")), (Prompt("hello"),)),
    Scenario(  # R-17's pattern matches it too; pi 1.6.0 retries it (R-53b)
        "connection-limit",
        (HttpError(400, _CONNECTION_LIMIT), Stream("Answer.")),
        (Prompt("hello"),),
    ),
    Scenario(
        "overflow-nothing-to-compact",
        (HttpError(400, _OVERFLOW), Stream("Answer.")),
        (Prompt("hello"),),
    ),
    Scenario(
        "overflow-compacts",
        (
            Stream("First answer."),
            Stream("Second answer."),
            HttpError(400, _OVERFLOW),
            Stream("Summary of the conversation."),
            Stream("Third answer."),
        ),
        (Prompt(f"one {_WORDS}"), Prompt(f"two {_WORDS}"), Prompt("three")),
        compaction={"keepRecentTokens": 100},
    ),
    Scenario(  # one good turn: everything fits keepRecentTokens, nothing to summarise
        "overflow-with-history",
        (Stream("First answer."), HttpError(400, _OVERFLOW), Stream("Summary."), Stream("Again.")),
        (Prompt("one"), Prompt("two")),
    ),
    Scenario(  # the cut falls inside the overflowing turn: two summary requests
        "overflow-split-turn",
        (
            Stream("First answer."),
            HttpError(400, _OVERFLOW),
            Stream("Summary of the conversation."),
            Stream("Summary of the turn."),
            Stream("Second answer."),
        ),
        (Prompt("one"), Prompt("two")),
        compaction={"keepRecentTokens": 1},
    ),
    Scenario(
        "overflow-summary-503",
        (
            Stream("First answer."),
            Stream("Second answer."),
            HttpError(400, _OVERFLOW),
            e503(),
            Stream("Summary of the conversation."),
            Stream("Third answer."),
        ),
        (Prompt(f"one {_WORDS}"), Prompt(f"two {_WORDS}"), Prompt("three")),
        compaction={"keepRecentTokens": 100},
    ),
    Scenario(
        "overflow-twice",
        (
            Stream("First answer."),
            Stream("Second answer."),
            HttpError(400, _OVERFLOW),
            Stream("Summary of the conversation."),
            HttpError(400, _OVERFLOW),
        ),
        (Prompt(f"one {_WORDS}"), Prompt(f"two {_WORDS}"), Prompt("three")),
        compaction={"keepRecentTokens": 100},
    ),
    Scenario(
        "compact-summary-503",
        (
            Stream("First answer."),
            Stream("Second answer."),
            e503(),
            Stream("Summary of the conversation."),
        ),
        (Prompt(f"one {_WORDS}"), Prompt(f"two {_WORDS}"), Compact()),
        compaction={"keepRecentTokens": 100},
    ),
    Scenario(
        "delay-above-cap",
        (e503(), e503(), Stream("Answer.")),
        (Prompt("hello"),),
        {"baseDelayMs": 300, "maxAgentDelayMs": 200},
    ),
)
