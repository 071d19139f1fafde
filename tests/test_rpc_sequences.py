"""Fuzz (seeded): sequences of RPC commands, with timing, against providers that fail,
hang and drop (issue 39).

tests/test_rpc_fuzz.py sends malformed *lines*; this sends well-formed *commands* in
random orders and at random moments — ``prompt`` (alone, or with ``streamingBehavior``),
``steer``, ``follow_up``, ``abort``, ``abort_retry``, ``compact``, ``new_session``,
``switch_session`` (to a file of the run, a new path, or a ready-made long session),
``fork`` (to an entry ``get_fork_messages``
named), ``get_tree``, ``get_state``, ``get_messages`` — interleaved with waits on what
the client sees: the next event of a kind, the provider's next request, every command
answered, the run settled. Each request the provider gets is answered at random: a
streamed reply, a 503, a 429, a context overflow, a 400 nobody retries, silence (no
headers, or a stream that stalls half-way: a *hang*), or a connection closed or reset
half-way (a *drop*). Retry backoff is short, or so long that only an abort ends it.

A sequence ends with the end of input; then it checks:

* the server exited, with status 0, within ``EXIT_BOUND`` seconds of the end of input;
* every command was answered exactly once (ids ``c1``, ``c2``, … each once);
* nothing on stderr (no traceback, no text at all);
* every user message the server showed (``message_end`` of role ``user``) is in the
  session file that was current then — that file still exists, and holds it — and is
  there again when a new server resumes that file (``get_entries``).

Two targets share the sequences: the real ``trio-session rpc`` process talking OpenAI's
protocol to a loopback HTTP server (``tests.http_server``), and the in-memory
``RpcServer`` with a ``FauxProvider`` on a ``MockClock`` that jumps only when every task
waits and no worker thread runs (many more sequences per second, and a sequence plays
the same way every time from its seed; against the process only the commands and the
provider's answers do).

Seeds: ``RPC_FUZZ_SEED`` (else random, printed) seeds the run; sequence ``i`` plays the
seed ``"{RPC_FUZZ_SEED}:{i}"``, and ``RPC_FUZZ_SEQUENCE=SEED`` plays that one alone. A
failing sequence does not stop the run: at the end each symptom (the exception of a
traceback on stderr, else the first broken rule) is reported once, by its shortest
sequence — every command sent, the provider's answers, the last lines — with the seeds
of the others. For CI each test stops starting sequences after ``RPC_FUZZ_SECONDS``
(default 60 for the process, 20 in memory); ``RPC_FUZZ_SECONDS=600`` runs longer
locally. A wait never decides a verdict: it returns when its condition holds, or at once
when the condition cannot come (a request hangs, a backoff waits for an abort, nothing
runs), or after ``QUIET`` seconds without a line or a request — then the sequence just
goes on.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import math
import os
import random
import re
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_session import (
    AssistantMessage,
    FauxProvider,
    FauxReply,
    SessionFile,
    TextContent,
    UserMessage,
    load_session,
)
from trio_session._core.json_deep import loads as deep_loads
from trio_session.rpc import RpcServer, encode_line
from trio_session.rpc._client import default_command
from trio_session.rpc._server import SessionRequest
from trio_session.store._history import MessageEntry
from trio_session.store._open_history import open_history

from .http_server import Exchange, ScriptedServer, sse
from .rpc_helpers import JSON, RawLines, write_json

SEED = int(os.environ.get("RPC_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
#: Seconds after the end of input within which the server must have exited.
EXIT_BOUND = 30.0
#: Seconds without a line or a request after which a wait gives up (never a verdict).
QUIET = 1.5
#: A backoff this long (ms) waits for an abort: a wait does not wait it out.
LONG_DELAY_MS = 600_000
KEY = "sk-fuzz-0123456789abcdefghij"

CONTEXT = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted"
    " in 130542 tokens. Please reduce the length of the messages."
)
RATE_LIMIT = "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1."
INVALID = "Invalid 'messages[1].content': expected a string, got an object."

#: What the provider does with a request, and how often (weights).
OUTCOMES = {
    "ok": 40,
    "503": 8,
    "429": 5,
    "overflow": 4,
    "400": 4,
    "hang": 6,  # no response at all
    "stall": 6,  # headers and a chunk or two, then silence
    "close": 5,  # a chunk or two, then FIN
    "reset": 5,  # a chunk or two, then RST
}

#: Step kinds and their weights.
STEPS = {
    "prompt": 20,
    "steer": 7,
    "follow_up": 5,
    "abort": 7,
    "abort_retry": 5,
    "compact": 5,
    "new_session": 4,
    "switch_session": 4,
    "fork": 3,
    "get_tree": 3,
    "get_state": 3,
    "get_messages": 3,
    "wait_event": 16,
    "wait_request": 5,
    "wait_answers": 6,
    "wait_settled": 4,
}
WAITED_EVENTS = (
    "agent_start",
    "message_update",
    "message_end",
    "turn_end",
    "auto_retry_start",
    "auto_retry_end",
    "compaction_start",
    "compaction_end",
    "agent_settled",
)
#: Commands after whose answer another session file may be current.
SESSION_CHANGERS = frozenset({"new_session", "switch_session", "fork"})


def openai_error(message: str, kind: str, code: str | None = None) -> JSON:
    """An error body in OpenAI's shape."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def draw(rng: random.Random, weights: dict[str, int]) -> str:
    """One key of ``weights``, drawn by weight."""
    return rng.choices(list(weights), list(weights.values()))[0]


def user_text(message: JSON) -> str:
    """The text of a user message as the wire and the session file write it."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


# -- the provider's side --------------------------------------------------------------------


@attrs.define(eq=False)
class Provider:
    """What the provider was asked and did; wakes the driver on each request."""

    rng: random.Random
    outcomes: collections.Counter[str] = attrs.field(factory=collections.Counter)
    requests: int = 0
    stalled: int = 0  # requests answered with silence, still open (HTTP only: the faux
    # provider cannot tell when its hang ends; a wait then gives up after QUIET, virtual)
    changed: Callable[[], None] = lambda: None

    def next_outcome(self) -> str:
        """Draw what to do with a new request, and count it."""
        kind = draw(self.rng, OUTCOMES)
        self.requests += 1
        self.outcomes[kind] += 1
        self.changed()
        return kind

    def words(self) -> list[str]:
        """The chunks of a reply: one to four words, named for the request."""
        return [f"w{self.requests}.{i} " for i in range(self.rng.randint(1, 4))]

    async def http(self, exchange: Exchange) -> None:
        """Answer one request of the OpenAI protocol as ``next_outcome`` says."""
        kind = self.next_outcome()
        if kind == "503":
            await exchange.respond(
                503, "<html>503 Service Unavailable</html>", content_type="text/html"
            )
        elif kind == "429":
            await exchange.respond(429, json.dumps(openai_error(RATE_LIMIT, "requests")))
        elif kind == "overflow":
            body = openai_error(CONTEXT, "invalid_request_error", "context_length_exceeded")
            await exchange.respond(400, json.dumps(body))
        elif kind == "400":
            await exchange.respond(400, json.dumps(openai_error(INVALID, "invalid_request_error")))
        elif kind == "hang":
            await self._silence(exchange)
        else:
            await exchange.head(200)
            words = self.words()
            if kind != "ok":
                words = words[: self.rng.randint(0, len(words))]
            for word in words:
                await trio.sleep(self.rng.choice((0.0, 0.0, 0.005, 0.02)))
                delta = {"index": 0, "delta": {"content": word}, "finish_reason": None}
                await exchange.chunk(sse({"choices": [delta]}))
            if kind == "ok":
                done = {"index": 0, "delta": {}, "finish_reason": "stop"}
                await exchange.chunk(sse({"choices": [done]}) + "data: [DONE]\n\n")
                await exchange.end()
            elif kind == "stall":
                await self._silence(exchange)
            elif kind == "close":
                await exchange.close()
            else:
                await exchange.reset()

    async def _silence(self, exchange: Exchange) -> None:
        self.stalled += 1
        self.changed()
        try:
            await exchange.wait_for_disconnect()
        finally:
            self.stalled -= 1
            self.changed()

    def faux(self, request: object) -> FauxReply:
        """Answer one request of the in-memory server as ``next_outcome`` says."""
        kind = self.next_outcome()
        errors = {
            "503": "503 Service Unavailable",
            "429": f"429 Too Many Requests: {RATE_LIMIT}",
            "overflow": f"400 Bad Request: {CONTEXT}",
            "400": f"400 Bad Request: {INVALID}",
            "close": "Connection error: the server closed the connection mid-response",
            "reset": "Connection error: connection reset by peer",
        }
        words = self.words()
        gap = self.rng.choice((0.0, 0.005, 0.02))
        if kind == "ok":
            return FauxReply(chunks=words, chunk_delay=gap)
        if kind in ("hang", "stall"):  # the faux provider hangs until cancelled
            return FauxReply(chunks=words if kind == "stall" else (), chunk_delay=gap, hang=True)
        if kind in ("close", "reset"):
            return FauxReply(chunks=words[:1], error=errors[kind])
        return FauxReply(error=errors[kind])


# -- the client's side ----------------------------------------------------------------------


@attrs.define(eq=False)
class Driver:
    """Plays one sequence against a server and keeps what it saw."""

    rng: random.Random
    raw: RawLines
    provider: Provider
    scratch: Path  # where a switch_session may name a file that does not exist yet
    lines: list[JSON] = attrs.field(factory=list)
    sent: dict[str, JSON] = attrs.field(factory=dict)
    answers: dict[str, list[JSON]] = attrs.field(factory=lambda: collections.defaultdict(list))
    strays: list[JSON] = attrs.field(factory=list)  # lines no command of ours asked for
    started: int = 0  # prompts answered "started"
    settled: int = 0  # agent_settled events
    long_backoff: bool = False
    file: str | None = None  # the session file current now, if known
    files: list[str] = attrs.field(factory=list)  # every session file the run reported
    shown: list[list[Any]] = attrs.field(factory=list)  # [file or None, text]
    fork_ids: list[str] = attrs.field(factory=list)
    steps: list[str] = attrs.field(factory=list)
    quiet: int = 0  # waits that gave up after QUIET seconds of nothing
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _count: int = 0

    def __attrs_post_init__(self) -> None:
        self.provider.changed = self.note

    def note(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- reading

    async def read_all(self) -> None:
        """Read every line to the end of output."""
        while (raw := await self.raw.read_raw()) is not None:
            try:
                obj = deep_loads(raw)  # a long session's get_tree nests deeper than json's stack
            except ValueError:
                obj = None
            if not isinstance(obj, dict):
                self.strays.append({"not a JSON object": raw.decode(errors="replace")})
                continue
            self.lines.append(obj)
            self._see(obj)
            self.note()

    def _see(self, obj: JSON) -> None:
        kind = obj.get("type")
        if kind == "response":
            self._see_response(obj)
        elif kind == "agent_settled":
            self.settled += 1
        elif kind == "auto_retry_start":
            self.long_backoff = obj["delayMs"] >= LONG_DELAY_MS
        elif kind in ("agent_start", "auto_retry_end"):
            self.long_backoff = False
        elif kind == "message_end" and obj["message"]["role"] == "user":
            self.shown.append([self.file, user_text(obj["message"])])

    def _see_response(self, obj: JSON) -> None:
        command_id = obj.get("id")
        if command_id not in self.sent:
            self.strays.append(obj)
            return
        self.answers[command_id].append(obj)
        command, ok, data = obj["command"], obj["success"], obj.get("data") or {}
        if command == "prompt" and ok and data.get("disposition") == "started":
            self.started += 1
        elif command == "get_state" and ok:
            self.file = data.get("sessionFile")
            if self.file is not None and self.file not in self.files:
                self.files.append(self.file)
            for item in self.shown:
                if item[0] is None:
                    item[0] = self.file
        elif command in SESSION_CHANGERS and ok:
            self.file = None  # the get_state sent right after it says which
        elif command == "get_fork_messages" and ok:
            self.fork_ids = [m["entryId"] for m in data["messages"]]

    # -- writing

    async def send(self, kind: str, **fields: Any) -> str:
        self._count += 1
        command_id = f"c{self._count}"
        command = {"id": command_id, "type": kind, **fields}
        self.sent[command_id] = command
        self.steps.append(json.dumps(command))
        with trio.CancelScope(shield=True):  # a whole line, or none
            await self.raw.send(encode_line(command))
        return command_id

    def idle(self) -> bool:
        answered = all(self.answers.get(i) for i in self.sent)
        return answered and self.started <= self.settled

    def stuck(self) -> bool:
        """Whether nothing will happen until the client acts."""
        return self.provider.stalled > 0 or self.long_backoff or self.idle()

    async def until(self, condition: Callable[[], bool], *, give_up: bool = True) -> bool:
        """Wait for ``condition``; give up when it cannot come (``give_up``) or nothing
        moved for ``QUIET`` seconds. Whether it came never decides a verdict."""
        while not condition():
            if give_up and self.stuck():
                return False
            changed = self._changed
            with trio.move_on_after(QUIET) as scope:
                await changed.wait()
            if scope.cancelled_caught:
                self.quiet += 1
                return False
        return True

    # -- a sequence

    async def step(self, kind: str, tag: str) -> None:
        """Take one step of kind ``kind``; ``tag`` makes the texts it sends unique."""
        rng = self.rng
        if kind == "prompt":
            behavior = rng.choice([None, None, None, "steer", "followUp"])
            extra = {} if behavior is None else {"streamingBehavior": behavior}
            await self.send("prompt", message=f"p{tag}", **extra)
        elif kind in ("steer", "follow_up"):
            await self.send(kind, message=f"{kind[0]}{tag}")
        elif kind in ("abort", "abort_retry", "get_tree", "get_messages", "get_state"):
            await self.send(kind)
        elif kind == "compact":
            await self.send("compact")
        elif kind == "new_session":
            await self.send("new_session")
            await self.send("get_state")
        elif kind == "switch_session":
            made = self.scratch / f"made-{tag}.jsonl"  # a new session, in a file of ours
            target = rng.choice(self.files) if self.files and rng.random() < 0.8 else str(made)
            await self.send("switch_session", sessionPath=target)
            await self.send("get_state")
        elif kind == "fork":
            asked = await self.send("get_fork_messages")
            await self.until(lambda: bool(self.answers.get(asked)), give_up=False)
            entry = rng.choice(self.fork_ids) if self.fork_ids else "no-such-entry"
            await self.send("fork", entryId=entry)
            await self.send("get_state")
        elif kind == "wait_event":
            wanted = rng.choice(WAITED_EVENTS)
            mark = len(self.lines)
            self.steps.append(f"wait for {wanted}")
            await self.until(lambda: any(o.get("type") == wanted for o in self.lines[mark:]))
        elif kind == "wait_request":
            mark = self.provider.requests
            self.steps.append("wait for a request")
            await self.until(lambda: self.provider.requests > mark)
        elif kind == "wait_answers":
            self.steps.append("wait for every answer")
            await self.until(lambda: all(self.answers.get(i) for i in self.sent), give_up=False)
        else:
            self.steps.append("wait until settled")
            await self.until(self.idle)

    async def play(self, length: int, known: list[str]) -> None:
        """Send ``length`` steps; ``known`` are files a ``switch_session`` may pick besides
        those the run reports."""
        self.files.extend(known)
        await self.send("get_state")
        for n in range(length):
            await self.step(draw(self.rng, STEPS), str(n))

    # -- verdicts

    def problems(self) -> list[str]:
        """What broke the rules of the protocol (the run's files are checked apart)."""
        found = []
        for command_id, command in self.sent.items():
            count = len(self.answers.get(command_id, []))
            if count != 1:
                found.append(f"{command_id} {command['type']} answered {count} times")
        found += [f"a line no command asked for: {json.dumps(o)[:300]}" for o in self.strays]
        return found


# -- checking the files ---------------------------------------------------------------------


def users_on_disk(path: Path) -> list[str]:
    """The user messages of a session file, read as written."""
    loaded = load_session(path)
    return [
        e.message.text
        for e in loaded.entries
        if isinstance(e, MessageEntry) and isinstance(e.message, UserMessage)
    ]


def users_of_entries(entries: list[JSON]) -> list[str]:
    """The user messages of a ``get_entries`` answer."""
    return [
        user_text(e["message"])
        for e in entries
        if e.get("type") == "message" and e["message"]["role"] == "user"
    ]


def shown_by_file(driver: Driver) -> tuple[dict[str, list[str]], list[str]]:
    """The shown user messages by session file (those that exist); and the problems:
    messages shown while no file was known, files gone, messages not on disk."""
    by_file: dict[str, list[str]] = collections.defaultdict(list)
    problems = []
    for file, text in driver.shown:
        if file is None:
            problems.append(f"user message {text!r} shown while no session file was known")
        else:
            by_file[file].append(text)
    for file, texts in list(by_file.items()):
        if not Path(file).exists():
            problems.append(f"session file {Path(file).name} is gone; it showed {texts}")
            del by_file[file]
            continue
        on_disk = users_on_disk(Path(file))
        missing = [t for t in texts if t not in on_disk]
        if missing:
            problems.append(f"{Path(file).name}: shown {missing}, not on disk (has {on_disk})")
    return by_file, problems


async def resumed_problems(
    by_file: dict[str, list[str]], open_target: Callable[[Path], Any]
) -> list[str]:
    """Resume the files in a new server — the first with ``--session``, the others by
    ``switch_session`` — and find every message shown there in ``get_entries``."""
    if not by_file:
        return []
    problems: list[str] = []
    files = list(by_file)
    answers: dict[str, JSON] = {}
    async with open_target(Path(files[0])) as target:
        raw = target.raw
        with trio.move_on_after(EXIT_BOUND):
            for n, file in enumerate(files):
                if n:
                    await raw.send(
                        {"id": f"switch-{n}", "type": "switch_session", "sessionPath": file}
                    )
                    if not (switched := await raw.read()).get("success"):
                        problems.append(f"resuming {Path(file).name}: {switched}")
                        continue
                await raw.send({"id": f"entries-{n}", "type": "get_entries"})
                answers[file] = await raw.read()
        await target.close_input()
        ended = await target.wait_exit()
        rest = await raw.rest() if ended else ["(no exit)"]
    for file, texts in by_file.items():
        answer = answers.get(file, {})
        if not answer.get("success"):
            problems.append(f"resuming {Path(file).name}: get_entries answered {answer}")
            continue
        got = users_of_entries(answer["data"]["entries"])
        missing = [t for t in texts if t not in got]
        if missing:
            problems.append(f"resumed {Path(file).name}: {missing} not in get_entries ({got})")
    if rest or not ended or target.status != 0 or target.stderr():
        problems.append(
            f"the resuming server: exited={ended} status={target.status} "
            f"more output {rest} stderr {target.stderr()!r}"
        )
    return problems


def report(seed: str, driver: Driver, problems: list[str]) -> str:
    """A failure message: the seed, the problems, the sequence and the end of the output."""
    tail = [json.dumps(o)[:200] for o in driver.lines[-25:]]
    return "\n".join(
        [
            f"sequence seed {seed!r} (RPC_FUZZ_SEED={SEED}):",
            *(f"  PROBLEM {p}" for p in problems),
            "steps sent:",
            *(f"  {s}" for s in driver.steps),
            f"provider: {dict(driver.provider.outcomes)}",
            "last lines:",
            *(f"  {t}" for t in tail),
        ]
    )


def symptom(problem: str) -> str:
    """A problem with what varies between sequences (ids, texts, files, numbers) blotted
    out, so that failures of one cause group together."""
    text = re.sub(r"\b[cpsf]\d+\b|[\w.-]+\.jsonl|\d+", "#", problem)
    return text[:160]


@attrs.define
class Tally:
    """What a run of sequences did and which failed, for its report.

    A failing sequence does not stop the run: each symptom (``symptom`` of its first
    problem) is reported once, by its shortest sequence, with the seeds of the others.
    """

    sequences: int = 0
    commands: int = 0
    steps: collections.Counter[str] = attrs.field(factory=collections.Counter)
    outcomes: collections.Counter[str] = attrs.field(factory=collections.Counter)
    shown: int = 0
    files: int = 0
    quiet: int = 0
    failures: dict[str, list[tuple[int, str, str]]] = attrs.field(
        factory=lambda: collections.defaultdict(list)
    )  # symptom -> [(commands sent, seed, report)]

    def add(self, driver: Driver) -> None:
        self.sequences += 1
        self.commands += len(driver.sent)
        self.steps.update(c["type"] for c in driver.sent.values())
        self.outcomes.update(driver.provider.outcomes)
        self.shown += len(driver.shown)
        self.files += len(driver.files)
        self.quiet += driver.quiet

    def fail(self, seed: str, driver: Driver, problems: list[str], stderr: str) -> None:
        """Note a failed sequence under its symptom: the exception a traceback on stderr
        ends with, else its first problem."""
        entry = (len(driver.sent), seed, report(seed, driver, problems))
        lines = stderr.strip().splitlines()
        headline = f"traceback: {lines[-1]}" if "Traceback" in stderr else problems[0]
        self.failures[symptom(headline)].append(entry)

    def summary(self, name: str, elapsed: float) -> str:
        failed = sum(len(f) for f in self.failures.values())
        return (
            f"rpc sequence fuzz ({name}, RPC_FUZZ_SEED={SEED}): {self.sequences} sequences "
            f"({failed} failed), {self.commands} commands, {self.shown} user messages shown "
            f"in {self.files} session files, {self.quiet} waits given up, {elapsed:.1f} s\n"
            f"  commands: {dict(self.steps)}\n"
            f"  provider: {dict(self.outcomes)}"
        )

    def verdict(self) -> str:
        """Each symptom: how many sequences, their first seeds, and the shortest one whole."""
        parts = []
        for name, found in sorted(self.failures.items(), key=lambda kv: -len(kv[1])):
            found.sort()
            seeds = " ".join(seed for _, seed, _ in found[:12])
            parts.append(f"== {len(found)} sequences: {name}\n   seeds: {seeds}\n{found[0][2]}")
        return "\n".join(parts)


# -- targets --------------------------------------------------------------------------------


@attrs.define(eq=False)
class Target:
    """A running server: its lines, and how its end of input and exit go.

    ``wait`` returns the exit status, or ``None`` if the server had not exited within
    ``EXIT_BOUND`` seconds; ``stderr`` is all it wrote there (once it has exited).
    """

    raw: RawLines
    close_input: Callable[[], Awaitable[None]]
    wait: Callable[[], Awaitable[int | None]]
    stderr: Callable[[], str]
    status: int | None = None

    async def wait_exit(self) -> bool:
        """Whether the server exited within ``EXIT_BOUND`` (its status then in ``status``)."""
        self.status = await self.wait()
        return self.status is not None


#: Message pairs in the long session file some sequences may switch to (get_tree, fork
#: and compaction on a long session, not only on the few messages a sequence makes).
LONG_PAIRS = 300


def long_session(directory: Path) -> Path:
    """A session file of ``LONG_PAIRS`` questions and answers, in ``directory``."""
    path = directory / "long.jsonl"
    with SessionFile.create(path, cwd=str(directory)) as history:
        for i in range(LONG_PAIRS):
            history.append_message_nowait(UserMessage(f"old question {i}", timestamp=i))
            history.append_message_nowait(AssistantMessage(content=(TextContent(f"a{i}"),)))
    return path


def settings_for(rng: random.Random) -> JSON:
    """A sequence's settings: short or endless backoff, few retries, compaction that cuts."""
    delay = rng.choice([1, 20, 20, LONG_DELAY_MS])
    return {
        "retry": {"baseDelayMs": delay, "maxRetries": rng.randint(1, 3)},
        "compaction": {"keepRecentTokens": rng.choice([1, 50, 20_000])},
    }


@asynccontextmanager
async def process_target(args: list[str], env: dict[str, str], cwd: Path) -> AsyncIterator[Target]:
    """``trio-session rpc ARGS`` with pipes, its stderr collected; killed if left running."""
    process = await trio.lowlevel.open_process(
        default_command(*args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    errors = bytearray()

    async def wait() -> int | None:
        with trio.move_on_after(EXIT_BOUND):
            return await process.wait()
        return None

    async def drain(stream: trio.abc.ReceiveStream) -> None:
        async with stream:
            while data := await stream.receive_some(65536):
                errors.extend(data)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, process.stderr)
            yield Target(
                RawLines(process.stdin, process.stdout),
                process.stdin.aclose,
                wait,
                lambda: errors.decode(errors="replace"),
            )
            if process.returncode is None:
                process.kill()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


class Logged(logging.Handler):
    """Collects what the package logs at ERROR and above (a traceback): the in-memory
    server's stderr. Its warnings (a failed prompt) go to no stderr in the process."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(logging.Formatter().format(record) + "\n")


@asynccontextmanager
async def memory_target(
    provider: FauxProvider, directory: Path, settings: JSON, history: Path | None
) -> AsyncIterator[Target]:
    """An ``RpcServer`` on memory streams, its sessions opened as ``trio-session rpc``
    opens them (a file in ``directory``, written with its first message); what the
    package logs, and a traceback if ``serve`` raised, are its stderr."""

    @asynccontextmanager
    async def sessions(request: SessionRequest) -> AsyncIterator[Any]:
        async with open_history(
            request.history, directory=directory, parent_session=request.parent_session
        ) as history:
            from trio_session import open_session

            async with open_session(provider, settings=settings, history=history) as session:
                yield session

    client, server_end = trio.testing.memory_stream_pair()
    server = RpcServer(sessions, server_end, first_session=SessionRequest(history=history))
    done = trio.Event()
    logged = Logged()
    failures: list[str] = []

    async def serve() -> None:
        try:
            await server.serve()
        except Exception:
            import traceback

            failures.append(traceback.format_exc())
        finally:
            done.set()
            await server_end.aclose()  # as a process's exit closes its stdout

    async def wait() -> int | None:
        with trio.move_on_after(EXIT_BOUND):
            await done.wait()
            return 1 if failures else 0
        return None

    package = logging.getLogger("trio_session")
    package.addHandler(logged)
    package.propagate = False  # its warnings (a failed prompt) are no test's output
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            yield Target(
                RawLines(client, client),
                client.send_eof,
                wait,
                lambda: "".join(failures + logged.records),
            )
            nursery.cancel_scope.cancel()
    finally:
        package.propagate = True
        package.removeHandler(logged)


# -- a sequence, and the tests --------------------------------------------------------------

OpenTarget = Callable[[Path | None], Any]  # an async context manager of a Target
#: Seconds a sequence may take before it is reported as never ending.
SEQUENCE_GUARD = 300.0


async def play_sequence(
    seed: str,
    rng: random.Random,
    provider: Provider,
    open_target: OpenTarget,
    scratch: Path,
    tally: Tally,
) -> None:
    """Play one sequence on a new server, end its input, and check every rule."""
    problems: list[str] = []
    exited = False
    async with open_target(None) as target:
        driver = Driver(rng, target.raw, provider, scratch)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.read_all)
            with trio.move_on_after(SEQUENCE_GUARD) as guard:
                known = [str(long_session(scratch))] if rng.random() < 0.2 else []
                try:
                    await driver.play(rng.randint(4, 28), known)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    problems.append(f"the server's input closed early: {exc!r}")
                await target.close_input()
                exited = await target.wait_exit()
            if guard.cancelled_caught:
                problems.append(f"the sequence did not end within {SEQUENCE_GUARD} s")
            if not exited:
                nursery.cancel_scope.cancel()
    tally.add(driver)
    if not exited:
        problems.append(f"no exit within {EXIT_BOUND} s of the end of input")
    elif target.status != 0:
        problems.append(f"exit status {target.status}")
    if target.stderr():
        problems.append(f"stderr: {target.stderr()!r}")
    problems += driver.problems()
    if exited:
        by_file, on_disk = shown_by_file(driver)
        problems += on_disk
        if not on_disk:
            problems += await resumed_problems(by_file, open_target)
    if problems:
        tally.fail(seed, driver, problems, target.stderr())


def budget(default: float) -> float:
    """Seconds after which a test starts no new sequence (``RPC_FUZZ_SECONDS``)."""
    return float(os.environ.get("RPC_FUZZ_SECONDS") or default)


def seeds() -> Iterator[str]:
    """The sequences' seeds: ``RPC_FUZZ_SEQUENCE`` alone, else ``SEED:0``, ``SEED:1``, …"""
    if one := os.environ.get("RPC_FUZZ_SEQUENCE"):
        yield one
        return
    for i in itertools.count():
        yield f"{SEED}:{i}"


def process_env(root: Path) -> dict[str, str]:
    """The environment with no API key variables and the sequence's own config and data."""
    keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")
    environ = {k: v for k, v in os.environ.items() if k not in keys}
    return environ | {"XDG_CONFIG_HOME": str(root / "cfg"), "XDG_DATA_HOME": str(root / "data")}


def process_files(root: Path, settings: JSON) -> tuple[Path, Path]:
    """A sequence's directory, with its settings file and key file."""
    root.mkdir()
    key = root / "key.txt"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    return write_json(root / "settings.json", settings), key


async def process_sequence(seed: str, root: Path, tally: Tally) -> None:
    """One sequence against ``trio-session rpc`` and a loopback OpenAI-compatible server."""
    rng = random.Random(seed)
    settings, key = process_files(root, settings_for(rng))
    provider = Provider(random.Random(f"{seed}:provider"))
    async with trio.open_nursery() as nursery:
        server = ScriptedServer()
        await nursery.start(server.run)
        server.script(*[provider.http] * 1000)
        args = [
            *("--provider", "openai", "--model", "gpt-fuzz", "--api-key-file", str(key)),
            *("--base-url", f"{server.url}/v1", "--settings", str(settings)),
            *("--session-dir", str(root / "sessions")),
        ]
        env = process_env(root)

        def open_target(history: Path | None) -> Any:
            resume = [] if history is None else ["--session", str(history)]
            return process_target([*args, *resume], env, root)

        await play_sequence(seed, rng, provider, open_target, root, tally)
        nursery.cancel_scope.cancel()


#: Sequences run side by side against processes (the machine has 2 cores).
SLOTS = 2


async def test_command_sequences_against_the_process(tmp_path: Path) -> None:
    """Issue 39: random command sequences, against `trio-session rpc` and a provider that
    fails, hangs and drops: each command answered once, no stderr, every shown user
    message on disk and after a resume, exit 0 within a bound of the end of input."""
    limit = budget(60)
    print(f"\nrpc sequence fuzz: RPC_FUZZ_SEED={SEED} RPC_FUZZ_SECONDS={limit}")
    tally = Tally()
    start = time.monotonic()
    todo = seeds()

    async def slot() -> None:
        for seed in todo:
            await process_sequence(seed, tmp_path / seed.replace(":", "-"), tally)
            if time.monotonic() - start > limit:
                return

    async with trio.open_nursery() as nursery:
        for _ in range(SLOTS):
            nursery.start_soon(slot)
    print(tally.summary("trio-session rpc", time.monotonic() - start))
    assert tally.sequences >= 1
    if tally.failures:
        pytest.fail(tally.verdict(), pytrace=False)


async def memory_sequence(seed: str, root: Path, tally: Tally) -> None:
    """One sequence against the in-memory ``RpcServer`` and a ``FauxProvider``."""
    rng = random.Random(seed)
    settings = settings_for(rng)
    provider = Provider(random.Random(f"{seed}:provider"))
    faux = FauxProvider([provider.faux] * 1000)

    def open_target(history: Path | None) -> Any:
        return memory_target(faux, root, settings, history)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(jump_when_idle)
        await play_sequence(seed, rng, provider, open_target, root, tally)
        nursery.cancel_scope.cancel()


async def jump_when_idle() -> None:
    """MockClock's autojump, for a run whose tasks wait on worker threads (session files
    are written in threads): jump to the next deadline only once every task is blocked
    and no worker thread runs — else a bound would pass while a file is being written."""
    clock = trio.lowlevel.current_clock()
    assert isinstance(clock, trio.testing.MockClock)
    workers = trio.to_thread.current_default_thread_limiter()
    mine = trio.CapacityLimiter(1)
    while True:
        await trio.testing.wait_all_tasks_blocked()
        if workers.borrowed_tokens:  # let it finish, in real time
            await trio.to_thread.run_sync(time.sleep, 0.0005, limiter=mine)
            continue
        jump = trio.lowlevel.current_statistics().seconds_to_next_deadline
        if math.isinf(jump):  # every task waits, on nothing that can come
            msg = "deadlock: every task waits, with no deadline and no worker thread"
            raise AssertionError(msg)
        if jump > 0:
            clock.jump(jump)


def test_command_sequences_in_memory(tmp_path: Path) -> None:
    """Issue 39: the same sequences against the in-memory server on a MockClock: many
    more of them, every wait in virtual time."""
    limit = budget(20)
    print(f"\nrpc sequence fuzz in memory: RPC_FUZZ_SEED={SEED} RPC_FUZZ_SECONDS={limit}")
    tally = Tally()
    start = time.monotonic()
    for seed in seeds():
        root = tmp_path / seed.replace(":", "-")
        root.mkdir()
        trio.run(memory_sequence, seed, root, tally, clock=trio.testing.MockClock())
        if time.monotonic() - start > limit:
            break
    print(tally.summary("in memory", time.monotonic() - start))
    assert tally.sequences >= 1
    if tally.failures:
        pytest.fail(tally.verdict(), pytrace=False)
