"""Shared pieces of the RPC tests: scenarios, a raw-lines driver, transcript summaries.

A scenario is a faux script, settings, the commands sent at start, and commands sent
when a given line shows up (a *trigger*). It runs the same way against the in-memory
server and the real ``trio-session rpc`` process, by raw lines or through RpcClient,
and yields a transcript: every line the server wrote, with the time it was read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from trio_session.rpc import LineSplitter, RpcClient, encode_line

JSON = dict[str, Any]
Summary = str | JSON

ERR_503 = "503 Service Unavailable"
ERR_429 = "429 Too Many Requests"
ERR_400 = "400 Bad Request: invalid 'messages' field"
ERR_OVERFLOW = "400 prompt is too long: 213462 tokens > 200000 maximum"

#: The answer to a prompt that started a run (R-54: pi 1.6.0's disposition), without its id.
PROMPT_OK: JSON = {
    "type": "response",
    "command": "prompt",
    "success": True,
    "data": {"disposition": "started"},
}

#: Settings that make a backoff last far longer than any test.
LONG_DELAY_MS = 600_000


def summarize(obj: JSON) -> Summary:
    """A line, reduced to what a scenario asserts: the retry and compaction events whole,
    the rest by type and the fields that tell runs apart."""
    kind = obj.get("type")
    if kind == "response":
        text = f"response {obj['command']} {'ok' if obj['success'] else 'failed'}"
        disposition = (obj.get("data") or {}).get("disposition")
        if disposition is not None:
            text += f" {disposition}"
        if obj["command"] == "get_state" and obj["success"]:
            data = obj["data"]
            text += (
                f" isStreaming={data['isStreaming']} isRetrying={data['isRetrying']}"
                f" retryAttempt={data['retryAttempt']}"
            )
        return text
    if kind in ("message_start", "message_end"):
        message = obj["message"]
        text = f"{kind} {message['role']}"
        if kind == "message_end" and message["role"] == "assistant":
            text += f" {message['stopReason']}"
        return text
    if kind == "message_update":
        event = obj["assistantMessageEvent"]["type"]
        if event == "text_delta":
            return f"message_update {obj['delta']!r}"
        return f"message_update {event}"
    if kind == "agent_end":
        return f"agent_end willRetry={str(obj['willRetry']).lower()}"
    if kind == "agent_settled":
        return "agent_settled aborted" if obj["aborted"] else "agent_settled"
    if isinstance(kind, str) and kind.startswith(("auto_retry", "compaction")):
        return obj
    return str(kind)


Matcher = Callable[[JSON], bool]


def is_type(kind: str) -> Matcher:
    """Matches events of one type."""
    return lambda obj: obj.get("type") == kind


def is_response(command: str) -> Matcher:
    """Matches the response to one command."""
    return lambda obj: obj.get("type") == "response" and obj.get("command") == command


def retry_start(attempt: int, delay_ms: int, error: str = ERR_503, max_attempts: int = 3) -> JSON:
    """An ``auto_retry_start`` event as it goes over the wire."""
    return {
        "type": "auto_retry_start",
        "attempt": attempt,
        "maxAttempts": max_attempts,
        "delayMs": delay_ms,
        "errorMessage": error,
    }


def retry_end(success: bool, attempt: int, final_error: str | None = None) -> JSON:
    """An ``auto_retry_end`` event as it goes over the wire."""
    event: JSON = {"type": "auto_retry_end", "success": success, "attempt": attempt}
    if final_error is not None:
        event["finalError"] = final_error
    return event


RUN_START = ["agent_start", "turn_start", "message_start user", "message_end user"]
RETRY_RUN_START = ["agent_start", "turn_start"]


def failed_attempt(will_retry: bool) -> list[Summary]:
    """One request that ends in an error, to the end of its run."""
    flag = str(will_retry).lower()
    return [
        "message_start assistant",
        "message_end assistant error",
        "turn_end",
        f"agent_end willRetry={flag}",
    ]


def answer(text: str) -> list[Summary]:
    """One request streamed as a single chunk, up to its message_end."""
    return [
        "message_start assistant",
        "message_update text_start",
        f"message_update {text!r}",
        "message_update text_end",
        "message_end assistant stop",
    ]


@attrs.frozen
class Trigger:
    """When a line matches, send a command (once)."""

    when: Matcher
    command: str
    fields: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Scenario:
    """One acceptance scenario of issue 4, runnable against any server.

    ``expected(base)`` is the transcript for a ``retry.baseDelayMs`` of ``base``;
    ``last`` matches the line after which nothing more is expected; ``times`` are
    the virtual times (base 2000) at which lines of a type arrive, in-memory.
    """

    name: str
    script: list[JSON]
    expected: Callable[[int], list[Summary]]
    last: Matcher
    setup: list[tuple[str, JSON]] = attrs.field(factory=list)
    triggers: list[Trigger] = attrs.field(factory=list)
    retry: JSON = attrs.field(factory=dict)
    long_delay: bool = False
    times: Mapping[str, list[float]] = attrs.field(factory=dict)

    def settings(self, base: int) -> JSON:
        """The settings file contents for this scenario."""
        delay = LONG_DELAY_MS if self.long_delay else base
        return {"retry": {"baseDelayMs": delay, **self.retry}}


def _two_503s(base: int) -> list[Summary]:
    return [
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(True),
        retry_start(1, base),
        *RETRY_RUN_START,
        *failed_attempt(True),
        retry_start(2, 2 * base),
        *RETRY_RUN_START,
        *answer("Hello!"),
        retry_end(True, 2),
        "turn_end",
        "agent_end willRetry=false",
        "agent_settled",
    ]


def _max_exceeded(base: int) -> list[Summary]:
    return [
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(True),
        retry_start(1, base, max_attempts=2),
        *RETRY_RUN_START,
        *failed_attempt(True),
        retry_start(2, 2 * base, max_attempts=2),
        *RETRY_RUN_START,
        *failed_attempt(False),
        retry_end(False, 2, ERR_503),
        "agent_settled",
    ]


def _abort_retry(base: int) -> list[Summary]:
    return [
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(True),
        retry_start(1, LONG_DELAY_MS),
        retry_end(False, 1, "Retry cancelled"),  # before the answer, as the reference writes it
        "agent_settled",  # the chain was the run's: it is over, not aborted
        "response abort_retry ok",
    ]


def _abort(base: int) -> list[Summary]:
    return [
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(True),
        retry_start(1, LONG_DELAY_MS),
        retry_end(False, 1, "Retry cancelled"),
        "agent_settled aborted",
        "response abort ok",
    ]


def _disabled(base: int) -> list[Summary]:
    return [
        "response set_auto_retry ok",
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(False),
        "agent_settled",
    ]


def _overflow(base: int) -> list[Summary]:
    return [
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(False),  # nothing old enough to compact, nothing follows
        {"type": "compaction_start", "reason": "overflow"},
        {"type": "compaction_end", "reason": "overflow", "aborted": False, "willRetry": False},
        "agent_settled",
    ]


def _bad_request(base: int) -> list[Summary]:
    return ["response prompt ok started", *RUN_START, *failed_attempt(False), "agent_settled"]


def _429(base: int) -> list[Summary]:
    return [
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(True),
        retry_start(1, base, ERR_429),
        *RETRY_RUN_START,
        *answer("Hello!"),
        retry_end(True, 1),
        "turn_end",
        "agent_end willRetry=false",
        "agent_settled",
    ]


def _state_during_retry(base: int) -> list[Summary]:
    return [
        "response prompt ok started",
        *RUN_START,
        *failed_attempt(True),
        retry_start(1, LONG_DELAY_MS),
        "response get_state ok isStreaming=True isRetrying=True retryAttempt=1",
        "response retry_now ok",
        *RETRY_RUN_START,
        *answer("Hello!"),
        retry_end(True, 1),
        "turn_end",
        "agent_end willRetry=false",
        "agent_settled",
    ]


SCENARIOS = [
    Scenario(
        "two_503s_then_success",
        [{"error": ERR_503}, {"error": ERR_503}, {"text": "Hello!"}],
        _two_503s,
        is_type("agent_settled"),
        times={"agent_start": [0.0, 2.0, 6.0], "auto_retry_start": [0.0, 2.0]},
    ),
    Scenario(
        "max_retries_exceeded",
        [{"error": ERR_503}] * 3,
        _max_exceeded,
        is_type("agent_settled"),
        retry={"maxRetries": 2},
        times={"agent_start": [0.0, 2.0, 6.0], "auto_retry_end": [6.0]},
    ),
    Scenario(
        "abort_retry_during_backoff",
        [{"error": ERR_503}, {"text": "never sent"}],
        _abort_retry,
        is_response("abort_retry"),
        triggers=[Trigger(is_type("auto_retry_start"), "abort_retry")],
        long_delay=True,
        times={"auto_retry_start": [0.0], "auto_retry_end": [0.0]},
    ),
    Scenario(
        "abort_during_backoff",
        [{"error": ERR_503}, {"text": "never sent"}],
        _abort,
        is_response("abort"),
        triggers=[Trigger(is_type("auto_retry_start"), "abort")],
        long_delay=True,
        times={"auto_retry_end": [0.0]},
    ),
    Scenario(
        "auto_retry_disabled_then_503",
        [{"error": ERR_503}, {"text": "never sent"}],
        _disabled,
        is_type("agent_settled"),
        setup=[("set_auto_retry", {"enabled": False})],
        times={"agent_end": [0.0]},
    ),
    Scenario(
        "context_overflow",
        [{"error": ERR_OVERFLOW}, {"text": "never sent"}],
        _overflow,
        is_type("agent_settled"),
        times={"compaction_start": [0.0], "compaction_end": [0.0]},
    ),
    Scenario(
        "bad_request_400",
        [{"error": ERR_400}],
        _bad_request,
        is_type("agent_settled"),
        times={"agent_end": [0.0]},
    ),
    Scenario(
        "429_then_success",
        [{"error": ERR_429}, {"text": "Hello!"}],
        _429,
        is_type("agent_settled"),
        times={"agent_start": [0.0, 2.0], "auto_retry_end": [2.0]},
    ),
    Scenario(
        "get_state_during_retry",
        [{"error": ERR_503}, {"text": "Hello!"}],
        _state_during_retry,
        is_type("agent_settled"),
        triggers=[
            Trigger(is_type("auto_retry_start"), "get_state"),
            Trigger(is_response("get_state"), "retry_now"),
        ],
        long_delay=True,
        times={"agent_start": [0.0, 0.0], "auto_retry_end": [0.0]},
    ),
]


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as JSON to ``path``; return the path."""
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@attrs.define(eq=False)
class RawLines:
    """Raw JSON lines to and from a server, each line read stamped with the time."""

    send_stream: trio.abc.SendStream
    receive_stream: trio.abc.ReceiveStream
    _splitter: LineSplitter = attrs.field(factory=lambda: LineSplitter(None), init=False)
    _ready: list[bytes] = attrs.field(factory=list, init=False)
    eof: bool = attrs.field(default=False, init=False)

    async def send(self, line: JSON | bytes) -> None:
        """Write a command object (as one line) or raw bytes (as given)."""
        data = encode_line(line) if isinstance(line, dict) else line
        await self.send_stream.send_all(data)

    async def read_raw(self) -> bytes | None:
        """The next line as bytes; ``None`` at end of output."""
        while not self._ready:
            if self.eof:
                return None
            data = await self.receive_stream.receive_some(65536)
            lines = self._splitter.feed(data) if data else self._splitter.close()
            self.eof = not data
            self._ready.extend(line for line in lines if isinstance(line, bytes))
        return self._ready.pop(0)

    async def read(self) -> JSON:
        """The next line, parsed; fails the test at end of output."""
        raw = await self.read_raw()
        assert raw is not None, "the server's output ended"
        obj = json.loads(raw)
        assert isinstance(obj, dict)
        return obj

    async def rest(self) -> list[JSON]:
        """Every line up to the end of output."""
        out = []
        while (raw := await self.read_raw()) is not None:
            out.append(json.loads(raw))
        return out


async def run_raw(scenario: Scenario, raw: RawLines) -> list[tuple[float, JSON]]:
    """Drive ``scenario`` by raw lines; return the transcript up to idle.

    After the scenario's last line, ``get_state`` fences (ids ``fence-N``) are sent
    until one says the server is idle; they are not in the transcript.
    """
    transcript: list[tuple[float, JSON]] = []
    for command, fields in scenario.setup:
        await raw.send({"type": command, **fields})
    await raw.send({"type": "prompt", "message": "hi"})
    triggers = list(scenario.triggers)
    while True:
        obj = await raw.read()
        transcript.append((trio.current_time(), obj))
        if triggers and triggers[0].when(obj):
            trigger = triggers.pop(0)
            await raw.send({"type": trigger.command, **trigger.fields})
        if not triggers and scenario.last(obj):
            break
    fences = 0
    while True:
        fences += 1
        fence = f"fence-{fences}"
        await raw.send({"id": fence, "type": "get_state"})
        while (obj := await raw.read()).get("id") != fence:
            transcript.append((trio.current_time(), obj))
        if not obj["data"]["isStreaming"]:
            return transcript


async def run_with_client(
    scenario: Scenario, client: RpcClient
) -> tuple[list[tuple[float, JSON]], list[JSON]]:
    """Drive ``scenario`` through ``RpcClient`` calls.

    Returns the events up to idle, stamped when the client received them, and the
    responses the calls got (setup, prompt, then triggers — a trigger may match the
    response of the call before it).
    """
    transcript: list[tuple[float, JSON]] = []
    responses: list[JSON] = []
    seen_send, seen = trio.open_memory_channel[JSON](math.inf)
    with client.events() as events:

        async def record() -> None:
            async for event in events:
                transcript.append((trio.current_time(), event))
                seen_send.send_nowait(event)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(record)
            for command, fields in scenario.setup:
                responses.append(await client.request(command, **fields))
            responses.append(await client.request("prompt", message="hi"))
            triggers = list(scenario.triggers)
            while triggers:
                subject = await seen.receive()
                while triggers and triggers[0].when(subject):
                    trigger = triggers.pop(0)
                    subject = await client.request(trigger.command, **trigger.fields)
                    responses.append(subject)
            await client.wait_for_idle()
            nursery.cancel_scope.cancel()
        transcript.extend((trio.current_time(), e) for e in events.drain())
    return transcript, responses


def split_expected(expected: list[Summary]) -> tuple[list[Summary], list[Summary]]:
    """Expected lines as (events, responses): what a client sees in each channel."""
    responses: list[Summary] = [
        s for s in expected if isinstance(s, str) and s.startswith("response ")
    ]
    return [s for s in expected if s not in responses], responses


def summaries(transcript: list[tuple[float, JSON]]) -> list[Summary]:
    """The summaries of a transcript's lines."""
    return [summarize(obj) for _, obj in transcript]


def times_of(transcript: list[tuple[float, JSON]], kind: str) -> list[float]:
    """When lines of one type arrived."""
    return [t for t, obj in transcript if obj.get("type") == kind]
