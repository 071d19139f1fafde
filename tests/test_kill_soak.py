"""Soak: ``trio-session chat`` killed at random moments keeps all it reported (issue 11).

Each round starts a real ``python -m trio_session chat`` on one of a few session files
(``--resume``; the first round of a file creates it, and now and then a slot starts a
new one), feeds it 1–3 prompt lines, and answers its requests from a loopback
OpenAI-compatible server: replies streamed slowly in several chunks, or a 503, so retry
chains and backoff sleeps happen. At a seeded-random moment — during start-up, right
after a ``you:`` line, after the n-th streamed chunk, in the backoff after a 503, after
a reply — it sends SIGKILL, SIGTERM or SIGHUP, waits for the exit, and checks the file
against what the process showed the world:

* every message of every request the server received is in the file, in order: the
  prompt, and every earlier reply the model was sent back;
* every ``you: X`` line printed has ``X`` in the file; every reply printed before a
  later ``you:`` line is there whole; every ``↻ retrying`` or ``✗ retry failed`` line,
  and every 503 followed by another request, has its error entry; nothing else is there
  (no duplicate, no text the server did not send);
* what earlier rounds wrote is untouched; the file loads with no warning but a torn last
  line (after a hard kill only); a copy of it resumes, closes and reloads cleanly;
* SIGTERM/SIGHUP: exit status 128 + the signal with "stopped by …" on stderr, no torn
  tail, every prompt of the round followed by a reply entry (aborted, error or complete)
  and every printed part of a reply a prefix of its entry. If the signal came while no
  handler was installed (Python still starting, or the chat already over), the process
  dies of it: then it must have written nothing, or have finished everything.

A kill cannot tear a line (a batch of entries is one ``write(2)``), so after some
SIGKILLs the soak appends a torn line itself, as a power cut would leave: the next
rounds must cut it off, say so on stderr, and carry on. ``rpc`` keeps no session file,
so only ``chat`` is soaked here.

The seed is random unless ``SOAK_SEED`` is set; it is printed, and named in every
failure. ``SOAK_KILLS`` sets how many processes must die of a signal (default 200).
Only the moments are random; every check waits on a condition (exit, a line, a request).
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_session import AssistantMessage, SessionFile, UserMessage, load_session

from .http_server import Exchange, ScriptedServer, Step, sse

SEED = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(2**32))
KILLS = int(os.environ.get("SOAK_KILLS") or 200)
#: Processes running at once: three on a 2-core machine keeps the soak within minutes.
SLOTS = 3
#: A bound on one round, against hangs only: a loaded machine may start Python slowly.
ROUND_GUARD = 120

KEY = "sk-soak-0123456789abcdefghij"
BASE_DELAY_MS = 80
MAX_RETRIES = 3
SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP)
WORDS = ("alpha", "beta", "gamma", "délta", "ε", "zeta ✓", "eta 😀", "theta", "iota", "kappa")


# -- a round's plan -------------------------------------------------------------------------


@attrs.frozen
class Reply:
    """One scripted answer: a 503, or a reply streamed as ``chunks`` with ``gaps`` before each."""

    status: int
    chunks: tuple[str, ...] = ()
    gaps: tuple[float, ...] = ()

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@attrs.frozen
class Plan:
    """What one round feeds, answers, and when and how it strikes."""

    prompts: tuple[str, ...]
    replies: tuple[Reply, ...]
    trigger: str  # "spawn", "you", "chunk", "503" or "done": what the killer waits for
    ordinal: int  # the how-many-th of those
    extra: float  # seconds after it, before the signal
    signum: signal.Signals

    def describe(self) -> str:
        """The plan in one line (the replies only as their lengths, 503 for a 503)."""
        replies = " ".join(str(len(r.chunks)) if r.status == 200 else "503" for r in self.replies)
        return (
            f"{len(self.prompts)} prompts, {self.signum.name} at {self.trigger} "
            f"#{self.ordinal} + {self.extra:.3f} s; replies (chunks): {replies}"
        )


def backoff(attempt: int) -> float:
    """Seconds the session sleeps before re-attempt ``attempt`` (1-based)."""
    return BASE_DELAY_MS / 1000 * 2.0 ** (attempt - 1)


def plan_round(rng: random.Random, tag: str) -> Plan:
    """A random round: 1–3 prompts, per request a 503 (p = 0.3) or a reply of 3–7 chunks,
    and a moment among those the server will see if nothing is killed."""
    kind = rng.choice(["spawn", "you", "chunk", "chunk", "chunk", "503", "503", "503", "done"])
    prompts = tuple(f"P{tag}.{i} say something" for i in range(rng.randint(1, 3)))
    replies: list[Reply] = []
    for i in range(len(prompts) * (MAX_RETRIES + 1)):  # the most requests the prompts can make
        if rng.random() < 0.3 or (kind == "503" and i == 0):
            replies.append(Reply(503))
            continue
        words = [f"R{tag}.{i}", *rng.sample(WORDS, rng.randint(2, 6))]
        chunks = (*(w + " " for w in words[:-1]), words[-1])
        gaps = tuple(rng.uniform(0.005, 0.04) for _ in chunks)
        replies.append(Reply(200, chunks, gaps))
    # Per prompt, requests until a reply or MAX_RETRIES + 1 503s in a row.
    used = consumed(replies, len(prompts))
    counts = {
        "you": len(prompts),
        "chunk": sum(len(r.chunks) for r, _ in used),
        "503": sum(r.status == 503 for r, _ in used),
        "done": sum(r.status == 200 for r, _ in used),
    }
    # The sleep after each 503: its chain's backoff, none after the last one of a chain.
    sleeps = [
        backoff(attempt + 1) if attempt < MAX_RETRIES else 0.0
        for r, attempt in used
        if r.status == 503
    ]
    if kind == "spawn":
        ordinal, extra = 0, rng.uniform(0.0, 0.8)
    else:
        if not counts[kind]:  # four 503s in a row for every prompt: no reply, no chunk
            kind = "503"
        ordinal = rng.randint(1, counts[kind])
        if kind == "503":
            extra = rng.uniform(0.0, sleeps[ordinal - 1])
        else:
            extra = rng.uniform(0.0, {"you": 0.02, "chunk": 0.03, "done": 0.05}[kind])
    return Plan(prompts, tuple(replies), kind, ordinal, extra, rng.choice(SIGNALS))


def consumed(replies: Sequence[Reply], prompts: int) -> list[tuple[Reply, int]]:
    """The replies ``prompts`` prompts use up when nothing stops them, each with its
    attempt: 0 for a prompt's first request, n for the n-th re-attempt."""
    used: list[tuple[Reply, int]] = []
    it = iter(replies)
    for _ in range(prompts):
        for attempt in range(MAX_RETRIES + 1):
            reply = next(it)
            used.append((reply, attempt))
            if reply.status == 200:
                break
    return used


# -- watching a round -----------------------------------------------------------------------


@attrs.define(eq=False)
class Watch:
    """What the server sent and the process printed so far; wakes waiters on each change.

    ``counts`` counts ``request``, ``chunk`` (sent), ``503`` and ``done`` (a whole
    response sent), ``broken`` (a response the client did not stay for), ``output``.
    """

    counts: collections.Counter[str] = attrs.field(factory=collections.Counter)
    in_flight: int = 0
    last_finished: str = ""  # "503" or "done": the last response fully sent
    # (request number, "503" or "done", whether it was sent whole), once each has ended
    responses: list[tuple[int, str, bool]] = attrs.field(factory=list)
    stdout: bytearray = attrs.field(factory=bytearray)
    stderr: bytearray = attrs.field(factory=bytearray)
    exited: bool = False
    _changed: trio.Event = attrs.field(factory=trio.Event)

    def note(self, what: str) -> None:
        self.counts[what] += 1
        self._changed.set()
        self._changed = trio.Event()

    def you_lines(self) -> int:
        return sum(1 for line in self.stdout.split(b"\n")[:-1] if line.startswith(b"you: "))

    async def until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition()`` holds or the process has exited."""
        while not (condition() or self.exited):
            await self._changed.wait()


def step(reply: Reply, number: int, watch: Watch) -> Step:
    """Answer request ``number`` with ``reply``, noting each stage in ``watch``."""
    kind = "503" if reply.status == 503 else "done"

    async def answer(exchange: Exchange) -> None:
        watch.in_flight += 1
        watch.note("request")
        whole = False
        try:
            if reply.status == 503:
                body = "<html>503 Service Unavailable: overloaded</html>"
                await exchange.respond(503, body, content_type="text/html")
            else:
                await exchange.head(200)
                for gap, text in zip(reply.gaps, reply.chunks, strict=True):
                    await trio.sleep(gap)
                    delta = {"index": 0, "delta": {"content": text}, "finish_reason": None}
                    await exchange.chunk(sse({"choices": [delta]}))
                    watch.note("chunk")
                done = {"index": 0, "delta": {}, "finish_reason": "stop"}
                await exchange.chunk(sse({"choices": [done]}) + "data: [DONE]\n\n")
                await exchange.end()
            whole = True
        finally:  # sent whole, or the client went away (or the round ended) half-way
            watch.in_flight -= 1
            watch.responses.append((number, kind, whole))
            if whole:
                watch.last_finished = kind
            watch.note(kind if whole else "broken")

    return answer


async def drain(stream: trio.abc.ReceiveStream, into: bytearray, watch: Watch) -> None:
    """Read ``stream`` to its end into ``into``, waking ``watch``'s waiters on each read."""
    async with stream:
        while data := await stream.receive_some(65536):
            into += data
            watch.note("output")


async def note_exit(process: trio.Process, watch: Watch) -> None:
    """Tell ``watch`` when ``process`` has exited."""
    await process.wait()
    watch.exited = True
    watch.note("exit")


# -- the soak -------------------------------------------------------------------------------


@attrs.define(eq=False)
class Slot:
    """One session file at a time (and private directories), killed round after round."""

    number: int
    root: Path
    rng: random.Random
    path: Path | None = None
    known: set[Path] = attrs.field(factory=set)
    entries: tuple[str, ...] = ()  # ids of the entries the file held after the last round
    torn: int = 0  # torn bytes at its end after the last round
    rounds: int = 0

    @property
    def env(self) -> dict[str, str]:
        """The environment with no API key variables and private config and data dirs."""
        keys = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
        environ = {k: v for k, v in os.environ.items() if k not in keys}
        data, config = str(self.root / "data"), str(self.root / "cfg")
        return environ | {"XDG_DATA_HOME": data, "XDG_CONFIG_HOME": config}


@attrs.define(eq=False)
class Stats:
    """What the soak did, for its report."""

    kills: collections.Counter[tuple[str, str]] = attrs.field(factory=collections.Counter)
    finished: int = 0  # the process ended by itself before the signal came
    early: int = 0  # SIGTERM/SIGHUP before chat installed its handler
    late: int = 0  # SIGTERM/SIGHUP after chat had ended and removed its handler
    torn: int = 0  # torn tails a kill left
    torn_written: int = 0  # torn tails written on purpose
    rounds: int = 0
    files: int = 0

    @property
    def total(self) -> int:
        return sum(self.kills.values())

    def report(self, elapsed: float) -> str:
        moments = sorted({landing for _, landing in self.kills})
        lines = [
            f"kill soak (SOAK_SEED={SEED}): {self.total} kills in {self.rounds} rounds "
            f"on {self.files} files, {elapsed:.0f} s",
            f"  {'':8}" + "".join(f"{m:>17}" for m in [*moments, "all"]),
        ]
        for sig in SIGNALS:
            row = [self.kills[sig.name, m] for m in moments]
            lines.append(f"  {sig.name:8}" + "".join(f"{n:>17}" for n in [*row, sum(row)]))
        lines.append(
            f"  ended by itself before the signal: {self.finished}; SIGTERM/SIGHUP with no "
            f"handler installed: {self.early} in start-up, {self.late} after the chat ended; "
            f"torn tails: {self.torn} left by a kill, {self.torn_written} written on purpose"
        )
        return "\n".join(lines)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_random_kills_of_chat_lose_nothing_it_reported(tmp_path: Path) -> None:
    """Issue 11: ≥ 200 random SIGKILL/SIGTERM/SIGHUP of `chat`: all it reported is on disk."""
    print(f"\nkill soak: SOAK_SEED={SEED} SOAK_KILLS={KILLS}")
    key = tmp_path / "key.txt"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps({"retry": {"baseDelayMs": BASE_DELAY_MS, "maxRetries": MAX_RETRIES}})
    )
    base = [
        *("chat", "--provider", "openai", "--model", "soak"),
        *("--api-key-file", str(key), "--settings", str(settings)),
    ]
    stats = Stats()
    start = time.monotonic()

    async def run_slot(slot: Slot) -> None:
        slot.root.mkdir()
        while stats.total < KILLS:
            assert stats.rounds < 3 * KILLS, f"seed {SEED}: too few signals found a live process"
            stats.rounds += 1
            await soak_round(slot, base, stats)

    async with trio.open_nursery() as nursery:
        for i in range(SLOTS):
            slot = Slot(i, tmp_path / f"slot{i}", random.Random(f"{SEED}:{i}"))
            nursery.start_soon(run_slot, slot)
    print(stats.report(time.monotonic() - start))
    assert stats.total >= KILLS


async def soak_round(slot: Slot, base: list[str], stats: Stats) -> None:
    """One process on ``slot``'s file: plan, run, strike, check."""
    slot.rounds += 1
    if slot.path is not None and slot.rng.random() < 0.04:
        slot.path = None  # now and then a new file, so its creation gets killed too
        slot.entries, slot.torn = (), 0
    plan = plan_round(slot.rng, f"{slot.number}.{slot.rounds}")
    watch = Watch()
    files_before = len(slot.known)
    with trio.fail_after(ROUND_GUARD):
        async with trio.open_nursery() as nursery:
            server = ScriptedServer()
            await nursery.start(server.run)
            server.script(*(step(r, i, watch) for i, r in enumerate(plan.replies)))
            args = [*base, "--base-url", f"{server.url}/v1"]
            if slot.path is not None:
                args += ["--resume", str(slot.path)]
            landing, status = await run_and_strike(slot, plan, watch, args)
            nursery.cancel_scope.cancel(reason="round over")
    torn_before = slot.torn
    try:
        outcome = check_round(slot, plan, watch, server, status)
    except Exception as exc:
        out = watch.stdout.decode(errors="replace")
        err = watch.stderr.decode(errors="replace")
        where = f"seed {SEED}, slot {slot.number} round {slot.rounds}: {plan.describe()}"
        msg = f"{where}\nlanded {landing}, exit status {status}: {exc!r}\n"
        msg += f"--- stdout\n{out}\n--- stderr\n{err}"
        raise AssertionError(msg) from exc
    if status in (0, 1):
        stats.finished += 1
    else:
        stats.kills[plan.signum.name, landing] += 1
        stats.early += outcome == "early"
        stats.late += outcome == "late"
    stats.torn += slot.torn > 0 and slot.torn != torn_before
    if status == -signal.SIGKILL and slot.path is not None and slot.rng.random() < 0.25:
        # A torn last line, as a power cut in the middle of a write leaves (a kill
        # cannot: a batch of entries is one write(2)), for the next rounds to resume.
        last = slot.path.read_bytes().splitlines()[-1]
        torn = last[: slot.rng.randint(1, len(last) - 1)]
        with slot.path.open("ab") as file:
            file.write(torn)
        slot.torn = len(torn)
        stats.torn_written += 1
    stats.files += len(slot.known) - files_before


async def run_and_strike(slot: Slot, plan: Plan, watch: Watch, args: list[str]) -> tuple[str, int]:
    """Run the process until the plan's moment, send its signal, wait for the exit.

    Returns where the signal landed, as the server saw it — ``start-up`` (no request
    yet), ``mid-stream``, ``backoff`` (after a 503), ``between-prompts`` (after a
    reply), ``ended`` (the process had exited) — and the exit status.
    """
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "trio_session", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=slot.env,
        cwd=slot.root,
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, process.stdout, watch.stdout, watch)
            nursery.start_soon(drain, process.stderr, watch.stderr, watch)
            nursery.start_soon(note_exit, process, watch)
            async with process.stdin:  # all lines at once: chat reads one per prompt
                await process.stdin.send_all("".join(p + "\n" for p in plan.prompts).encode())
            if plan.trigger == "you":
                await watch.until(lambda: watch.you_lines() >= plan.ordinal)
            elif plan.trigger != "spawn":
                await watch.until(lambda: watch.counts[plan.trigger] >= plan.ordinal)
            await trio.sleep(plan.extra)  # the random part of the moment
            if process.poll() is not None:
                landing = "ended"
            elif not watch.counts["request"]:
                landing = "start-up"
            elif watch.in_flight:
                landing = "mid-stream"
            elif watch.last_finished == "503":
                landing = "backoff"
            else:
                landing = "between-prompts"
            process.send_signal(plan.signum)
    finally:
        if process.returncode is None:  # the soak failed: leave nothing running
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    status = process.returncode
    assert status is not None
    return landing, status


# -- the checks -----------------------------------------------------------------------------

#: Everything ``chat`` may write to stderr in this soak; the empty line comes before
#: "stopped by", and after the last newline.
STDERR_LINES = [
    re.compile(r"trio-session: session file \S+\.jsonl"),
    re.compile(r"trio-session: warning: \S+:\d+: incomplete last line .*; skipped"),
    re.compile(r"trio-session: warning: \S+: cut off the incomplete last line before appending"),
    re.compile(r"trio-session: stopped by SIG(TERM|HUP); the session is saved"),
    re.compile(r""),
]


def find_file(slot: Slot) -> Path | None:
    """The slot's file: the one it had, or the one this round created (if it got that far)."""
    if slot.path is not None:
        return slot.path
    found = set((slot.root / "data").rglob("*.jsonl")) - slot.known
    assert len(found) <= 1, f"one round made several files: {sorted(found)}"
    return found.pop() if found else None


def as_wire(message: Any) -> tuple[str, str]:
    """A message as (role, text), for file entries and request messages alike."""
    if isinstance(message, UserMessage):
        return "user", message.text
    if isinstance(message, AssistantMessage):
        return "assistant", message.text
    content = message["content"]
    if isinstance(content, list):  # a user message's parts, as pi sends them
        content = "".join(part["text"] for part in content if part["type"] == "text")
    return message["role"], content


def is_subsequence(needle: Sequence[Any], haystack: Sequence[Any]) -> bool:
    """Whether ``needle``'s items all occur in ``haystack``, in the same order."""
    rest = iter(haystack)
    return all(any(x == y for y in rest) for x in needle)


def shown(watch: Watch) -> list[tuple[str, str, bool]]:
    """The ``you:`` and ``assistant:`` lines printed whole, as (kind, text, later_you):
    whether a ``you:`` line followed, so the process had moved past this one."""
    found: list[tuple[str, str]] = []
    for line in watch.stdout.decode(errors="replace").split("\n")[:-1]:
        for kind in ("you", "assistant"):
            if line.startswith(f"{kind}: "):
                found.append((kind, line.removeprefix(f"{kind}: ")))
    return [
        (kind, text, any(k == "you" for k, _ in found[i + 1 :]))
        for i, (kind, text) in enumerate(found)
    ]


def answered(messages: Sequence[Any]) -> bool:
    """Every user message is followed by an assistant message before the next one."""
    roles = [m.role for m in messages]
    following = [*roles[1:], None] if roles else []  # none at all: nothing unanswered
    return all(r2 == "assistant" for r1, r2 in zip(roles, following, strict=True) if r1 == "user")


def check_round(slot: Slot, plan: Plan, watch: Watch, server: ScriptedServer, status: int) -> str:
    """Everything the process reported is in the file, and the file still resumes.

    Returns how the process ended: ``finished`` (before the signal), ``stopped``
    (SIGTERM/SIGHUP handled), ``killed`` (SIGKILL), or, for SIGTERM/SIGHUP while no
    handler was installed, ``early`` (nothing sent yet) or ``late`` (all done).
    """
    stderr = watch.stderr.decode(errors="replace")
    for line in stderr.split("\n"):
        assert any(p.fullmatch(line) for p in STDERR_LINES), f"unexpected stderr {line!r}"
    graceful = status == 128 + plan.signum and plan.signum != signal.SIGKILL
    hard = status == -plan.signum  # SIGKILL, or SIGTERM/SIGHUP with no handler installed
    ended = status in (0, 1)  # it ran to its end before the signal came
    assert graceful or hard or ended, f"exit status {status} after {plan.signum.name}"
    if graceful:
        assert f"trio-session: stopped by {plan.signum.name}; the session is saved" in stderr
    # The system prompt is the session's, not a message of the file (the seed profile).
    requests = [
        [as_wire(m) for m in r.json()["messages"] if m["role"] != "system"] for r in server.requests
    ]
    lines = shown(watch)
    path = find_file(slot)
    outcome = "finished" if ended else "stopped" if graceful else "killed"
    if hard and plan.signum != signal.SIGKILL:
        outcome = "late" if requests or lines else "early"
    if path is None:  # killed before it created its file
        assert not ended, "chat ran to the end without making a session file"
        assert not requests, "a request went out with no session file on disk"
        assert not lines, "chat printed messages it had no file for"
        return outcome

    loaded = load_session(path)
    ids = tuple(e.id for e in loaded.entries)
    assert ids[: len(slot.entries)] == slot.entries, "entries of earlier rounds changed"
    opening = ("model_change", "thinking_level_change")  # a new file starts as pi's do
    others = [e for e in loaded.entries if e.type != "message"]
    assert [e.type for e in others] == (list(opening) if others else []), "unexpected entries"
    assert all(e.type in opening for e in loaded.entries[: len(others)]), "opening entries"
    # A torn last line only after a hard kill, or left by an earlier one that this
    # process did not get to cut off (it prints the file's name once it has).
    resumed = "trio-session: session file " in stderr
    torn_ok = hard or (slot.torn > 0 and not resumed)
    for warning in loaded.warnings:
        assert torn_ok, f"warning {warning!r}"
        assert "incomplete last line" in warning, f"warning {warning!r}"
    if slot.torn and resumed:  # the tail was cut off, and chat said so
        assert f"{path}:{len(slot.entries) + 2}: incomplete last line" in stderr
        assert f"{path}: cut off the incomplete last line before appending" in stderr
    earlier = sum(1 for e in loaded.entries[: len(slot.entries)] if e.type == "message")
    new = loaded.messages[earlier:]
    wire = [as_wire(m) for m in loaded.messages]

    # Nothing in the file that this round did not produce, nothing twice.
    users = [m.text for m in new if isinstance(m, UserMessage)]
    assert users == list(plan.prompts[: len(users)]), "user messages are not the prompts"
    assert not new or isinstance(new[0], UserMessage), "a reply before its prompt"
    texts = [r.text for r in plan.replies if r.status == 200]
    errors = 0
    for message in new:
        if not isinstance(message, AssistantMessage):
            continue
        if message.stop_reason == "stop":
            assert message.text in texts, f"a reply never sent: {message.text!r}"
        elif message.stop_reason == "aborted":
            assert graceful, "an aborted reply without SIGTERM/SIGHUP"
            # Cut short: what it holds was sent — nothing at all, when the signal came
            # before the first chunk (also when every reply of the plan is an error).
            was_sent = message.text == "" or any(t.startswith(message.text) for t in texts)
            assert was_sent, f"{message.text!r} not sent"
        else:
            assert message.stop_reason == "error", f"stopReason {message.stop_reason!r}"
            assert "503" in (message.error_message or ""), message.error_message
            errors += 1

    # What the model was sent is on disk, in order: the prompt and all history before it.
    for sent in requests:
        assert is_subsequence(sent, wire), f"request {sent} is not in the file {wire}"
        assert sent[-1][0] == "user", "a request that does not end in its prompt"
        assert sent[-1][1] in users, f"a request for a prompt not in the file: {sent[-1]}"
    # What the process printed is on disk: each prompt, and each reply it moved past.
    for kind, text, later_you in lines:
        if kind == "you":
            assert text in users, f"printed 'you: {text}' is not in the file"
        elif later_you:
            assert ("assistant", text) in wire, f"printed reply {text!r} is not in the file"
    # An error the process moved past is on disk: it printed that it will retry (the
    # backoff sleep began) or that the chain failed on it, or another request came.
    said = watch.stdout.decode(errors="replace").split("\n")[:-1]
    retried = sum(
        1
        for line in said
        if line.startswith("  ↻ retrying")
        or (line.startswith("  ✗ retry failed") and not line.endswith(": Retry cancelled"))
    )
    assert retried <= errors, f"{retried} retry lines printed, {errors} error entries"
    moved_past = sum(
        1 for n, kind, whole in watch.responses if kind == "503" and whole and n + 1 < len(requests)
    )
    sent_503 = sum(1 for _, kind, whole in watch.responses if kind == "503" and whole)
    assert moved_past <= errors <= sent_503, f"{errors} error entries, {moved_past}/{sent_503}"

    # It still resumes: a copy (the original keeps its tail for the next round) is
    # opened to append, closed, and loads with no warning and every entry.
    copy = slot.root / "copy.jsonl"
    shutil.copyfile(path, copy)
    SessionFile.resume(copy).close()
    again = load_session(copy)
    assert again.warnings == ()
    assert tuple(e.id for e in again.entries) == ids
    copy.unlink()

    if graceful:  # aborted, flushed, exited: the prompt being answered has its entry
        # A torn tail is the one an earlier round left, untouched: the signal came
        # before chat resumed the file (it had nothing to save yet), never a new one.
        untouched = slot.torn > 0 and not resumed and loaded.torn_bytes == slot.torn
        assert loaded.warnings == () or untouched, "a torn tail after a graceful stop"
        assert answered(new), "a prompt without a reply entry after a graceful stop"
        for kind, text, _ in lines:  # a printed reply, or the part printed, is on disk
            if kind == "assistant":
                tag = text.split(" ", 1)[0]
                on_disk = [t for r, t in wire if r == "assistant" and t.split(" ", 1)[0] == tag]
                assert len(on_disk) == 1, f"printed reply {text!r} is not in the file"
                assert on_disk[0].startswith(text), f"printed {text!r}, saved {on_disk[0]!r}"
    if outcome == "early":
        assert not new, "SIGTERM/SIGHUP killed chat after it wrote to its file"
    if outcome in ("finished", "late"):
        # Done; or SIGTERM/SIGHUP killed it, but only after the chat had ended.
        assert users == list(plan.prompts), "not every prompt is in the file"
        assert answered(new), "a prompt without a reply entry"

    slot.path = path
    slot.known.add(path)
    slot.entries = ids
    slot.torn = loaded.torn_bytes
    return outcome


# -- found by the soak ----------------------------------------------------------------------


async def run_flush(file: SessionFile, scope: trio.CancelScope) -> None:
    """``file.flush()`` inside ``scope``."""
    with scope:
        await file.flush()


async def test_a_flush_cancelled_before_its_write_leaves_its_entries_staged(
    tmp_path: Path,
) -> None:
    """Soak find: a flush cancelled after taking its batch, before its thread ran, loses none."""
    # In chat, SIGTERM landing as the run's last flush got the lock dropped the reply
    # it had taken: the file kept the prompt with no reply after it.
    path = tmp_path / "s.jsonl"
    file = SessionFile.create(path)
    file.append_message_nowait(UserMessage("kept"))
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        async with file._flush_lock:  # another flush is writing: this one waits its turn
            nursery.start_soon(run_flush, file, scope)
            await trio.testing.wait_all_tasks_blocked()
        scope.cancel()  # handed the lock, it is cancelled before its thread starts
    assert scope.cancelled_caught
    file.close()  # writes what is still staged
    loaded = load_session(path)
    users = [m.text for m in loaded.messages if isinstance(m, UserMessage)]
    assert (users, loaded.warnings) == (["kept"], ())
