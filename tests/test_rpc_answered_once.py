"""Issue 39: every RPC line answered exactly once, whatever fails underneath; a
compaction that never ends does not hold the command reader (in memory, exact times)."""

from __future__ import annotations

import errno
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from trio_session import (
    AgentSession,
    FauxProvider,
    FauxReply,
    ProviderRequest,
    Tool,
    ToolCall,
    open_session,
)
from trio_session.providers._faux import ScriptStep
from trio_session.rpc import RpcServer
from trio_session.rpc._server import SessionRequest
from trio_session.store._history import load_session

from .disk_seam import BeforeWrite, full_from, no_space, session_disk
from .rpc_helpers import ERR_503, JSON, RawLines, is_type, summarize
from .test_rpc_server import in_memory

#: A summary request that never answers (longer than any test, shorter than trio's max).
NEVER: JSON = {"text": "never", "delay": 10**6}

#: pi-1.6's manual compaction refuses a session that fits: keep nothing recent.
PI16: JSON = {"retry": {"profile": "pi-1.6"}, "compaction": {"keepRecentTokens": 1}}


async def read_until(raw: RawLines, last: Any) -> list[JSON]:
    """Lines up to and including the first that ``last`` matches."""
    lines = []
    while True:
        lines.append(obj := await raw.read())
        if last(obj):
            return lines


def answers(obj: JSON, command_id: str) -> bool:
    return obj.get("type") == "response" and obj.get("id") == command_id


async def exchange(raw: RawLines) -> None:
    """One prompt answered, to its agent_settled: something to compact."""
    await raw.send({"id": "p", "type": "prompt", "message": "hi"})
    await read_until(raw, is_type("agent_settled"))


# -- F3: compact while the summary request never answers -----------------------------------


@pytest.mark.parametrize("settings", [None, PI16], ids=["seed", "pi-1.6"])
async def test_abort_cancels_a_compaction_whose_summary_never_comes(
    autojump_clock: trio.testing.MockClock, settings: JSON | None
) -> None:
    """F3: while the summary request hangs, get_state is answered (isCompacting) and
    abort cancels the compaction at once: compact is answered "Compaction cancelled"."""
    async with in_memory([{"text": "Hello"}, NEVER], settings) as served:
        raw = served.raw
        await exchange(raw)
        await raw.send({"id": "c", "type": "compact"})
        await read_until(raw, is_type("compaction_start"))
        await raw.send({"id": "g", "type": "get_state"})
        (state,) = await read_until(raw, lambda obj: answers(obj, "g"))
        assert (state["data"]["isCompacting"], state["data"]["isStreaming"]) == (True, False)
        await raw.send({"id": "a", "type": "abort"})
        lines = await read_until(raw, lambda obj: answers(obj, "a"))
        assert trio.current_time() == 0.0  # no idle timeout waited out
    assert [summarize(obj) for obj in lines] == [
        {"type": "compaction_end", "reason": "manual", "aborted": True, "willRetry": False},
        "response compact failed",
        "response abort ok",
    ]
    assert lines[1]["error"] == "Compaction cancelled"


async def test_abort_cancels_the_summary_requests_retry_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """F3, pi-1.6: abort in the summary request's backoff ends the retries and the
    compaction at once, with summarization_retry_finished before compaction_end."""
    script: list[JSON] = [{"text": "Hello"}, {"error": ERR_503}, NEVER]
    async with in_memory(script, PI16) as served:
        raw = served.raw
        await exchange(raw)
        await raw.send({"id": "c", "type": "compact"})
        await read_until(raw, is_type("summarization_retry_scheduled"))
        await raw.send({"id": "a", "type": "abort"})
        lines = await read_until(raw, lambda obj: answers(obj, "a"))
        assert trio.current_time() == 0.0
    assert [obj["type"] for obj in lines] == [
        "summarization_retry_finished",
        "compaction_end",
        "response",
        "response",
    ]
    assert [(obj.get("id"), obj.get("error")) for obj in lines[2:]] == [
        ("c", "Compaction cancelled"),
        ("a", None),
    ]


async def test_a_prompt_during_a_compaction_is_refused_and_the_compaction_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """F3: a prompt sent during a compaction gets pi 1.6.0's refusal, queued or not; the
    compaction is answered when its summary comes."""
    script: list[JSON] = [{"text": "Hello"}, {"text": "The summary.", "delay": 5}]
    async with in_memory(script) as served:
        raw = served.raw
        await exchange(raw)
        await raw.send({"id": "c", "type": "compact"})
        await read_until(raw, is_type("compaction_start"))
        await raw.send({"id": "q", "type": "prompt", "message": "x", "streamingBehavior": "steer"})
        (refused,) = await read_until(raw, lambda obj: answers(obj, "q"))
        lines = await read_until(raw, lambda obj: answers(obj, "c"))
        assert trio.current_time() == 5.0
    assert refused["error"] == (
        "Cannot submit a prompt while compaction is in progress. "
        "Wait for compaction to finish and retry."
    )
    assert lines[-1]["success"] is True
    assert lines[-1]["data"]["summary"] == "The summary."


# -- every line answered exactly once: a failure at each seam of the prompt path ----------

#: Real seconds a sweep's run may take (its session files are written in threads, which
#: the autojump clock would not wait for); a hang fails the test instead of CI.
HANG_GUARD = 60

#: The commands a sweep sends, by id: a steer queued while idle, then the prompt.
OPENING: tuple[JSON, ...] = (
    {"id": "s", "type": "steer", "message": "queued while idle"},
    {"id": "p", "type": "prompt", "message": "use the tool"},
)


async def _echo(arguments: Mapping[str, Any]) -> str:
    return "echoed"


def _script(failing: int | None = None) -> list[ScriptStep]:
    """A tool call, its answer, a summary, and spare answers; request ``failing`` (from
    1) raises instead, as a broken provider would."""

    def broken(request: ProviderRequest) -> FauxReply:
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    steps: list[ScriptStep] = [
        FauxReply(tool_calls=[ToolCall("c1", "echo", {})]),
        FauxReply(text="done"),
        FauxReply(text="The summary."),
        *[FauxReply(text="spare")] * 6,
    ]
    if failing is not None:
        steps[failing - 1] = broken
    return steps


@attrs.define
class Sweep:
    """One run of the sweep's scenario, and what came out of it."""

    tmp_path: Path
    script: list[ScriptStep]
    inject: JSON | None = None
    after_line: int = 0
    after_type: str | None = None
    lines: list[JSON] = attrs.field(factory=list)
    opened: int = 0
    _sender: tuple[trio.lowlevel.TrioToken, trio.Nursery, RawLines] | None = None

    def sessions(self, request: SessionRequest) -> AbstractAsyncContextManager[AgentSession]:
        self.opened += 1
        history = request.history or self.tmp_path / f"s{self.opened}.jsonl"
        return open_session(FauxProvider(self.script), history=history, tools=[Tool("echo", _echo)])

    def answered(self) -> Counter[Any]:
        return Counter(o.get("id") for o in self.lines if o.get("type") == "response")

    def ids(self) -> set[str]:
        sent = {c["id"] for c in OPENING}
        return sent | ({self.inject["id"]} if self.inject is not None else set())

    async def run(self, before_eof: Callable[[], None] = lambda: None) -> None:
        """Send the opening (and the injected command after line ``after_line``, or the
        first line of type ``after_type``), read
        until every command is answered and a prompt settled, then end the input."""
        client, server_end = trio.testing.memory_stream_pair()
        raw = RawLines(client, client)
        with trio.fail_after(HANG_GUARD):
            async with trio.open_nursery() as nursery:
                await nursery.start(RpcServer(self.sessions, server_end).serve)
                self._sender = (trio.lowlevel.current_trio_token(), nursery, raw)
                for command in OPENING:
                    await raw.send(command)
                if self.inject is not None and self.after_type is None and self.after_line == 0:
                    await raw.send(self.inject)
                settled = False
                while not settled or self.ids() - set(self.answered()):
                    self.lines.append(obj := await raw.read())
                    settled |= obj.get("type") == "agent_settled"
                    if self.inject is not None and (
                        obj.get("type") == self.after_type
                        if self.after_type is not None
                        else len(self.lines) == self.after_line
                    ):
                        await raw.send(self.inject)
                before_eof()
                await client.send_eof()
                self.lines.extend(await raw.rest())

    def inject_at_write(self, at: int) -> BeforeWrite:
        """A ``before_write`` that sends the injected command while session-file write
        ``at`` is under way, and lets the server act on it before the write goes on."""

        def before_write(number: int) -> None:
            if number == at and self._sender is not None and self.inject is not None:
                token, nursery, raw = self._sender
                line = self.inject
                trio.from_thread.run_sync(
                    lambda: nursery.start_soon(raw.send, line), trio_token=token
                )
                trio.from_thread.run(trio.testing.wait_all_tasks_blocked, trio_token=token)

        return before_write

    def check(self, caplog: pytest.LogCaptureFixture) -> None:
        """Each command answered once, nothing logged as a failure, every file whole."""
        assert self.answered() == dict.fromkeys(self.ids(), 1), self.lines
        assert [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= 40] == []
        for path in sorted(self.tmp_path.glob("*.jsonl")):
            assert load_session(path).warnings == (), path


async def test_a_full_disk_at_each_write_of_the_prompt_answers_each_line_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every line answered once: the disk fills up (ENOSPC) at each write of the prompt
    path in turn; no traceback, the file stays whole, and with room again it resumes."""
    clean = Sweep(tmp_path / "clean", _script())
    clean.tmp_path.mkdir()
    with session_disk(monkeypatch, clean.tmp_path) as disk:
        await clean.run()
    clean.check(caplog)
    # The prompt path's writes: the new file with the prompt (it is written with its
    # first message), what the steer delivered, the tool turn, the answer.
    assert disk.writes == 4
    for number in range(1, disk.writes + 1):
        sweep = Sweep(tmp_path / f"full-from-{number}", _script())
        sweep.tmp_path.mkdir()
        with session_disk(monkeypatch, sweep.tmp_path, full_from(number)) as full:
            await sweep.run(before_eof=lambda: setattr(full, "before_write", lambda n: None))
        sweep.check(caplog)
        failed = [o for o in sweep.lines if o.get("type") == "history_write_failed"]
        assert [o["error"].endswith(": No space left on device") for o in failed] == [True]


@pytest.mark.parametrize("failing", [1, 2], ids=["first-request", "second-request"])
async def test_a_provider_that_raises_answers_each_line_once(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    failing: int,
) -> None:
    """Every line answered once: the provider raises at a request of the prompt; the
    prompt ends in an error message, with no traceback."""
    sweep = Sweep(tmp_path, _script(failing))
    await sweep.run()
    sweep.check(caplog)
    errors = [
        o["message"]["errorMessage"]
        for o in sweep.lines
        if o.get("type") == "message_end" and o["message"].get("stopReason") == "error"
    ]
    assert errors[0].startswith("provider faux failed: ConnectionResetError(")


@pytest.mark.parametrize("command", ["abort", "compact", "new_session"])
async def test_a_command_after_each_line_of_the_prompt_answers_each_line_once(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    command: str,
) -> None:
    """Every line answered once (F5's shape): abort, compact or new_session sent at once,
    and then after each line the prompt writes; every turn ends with an answer."""
    clean = Sweep(tmp_path / "clean", _script())
    clean.tmp_path.mkdir()
    await clean.run()
    for after in range(len(clean.lines) + 1):
        sweep = Sweep(tmp_path / f"after-{after}", _script(), {"id": "x", "type": command}, after)
        sweep.tmp_path.mkdir()
        await sweep.run()
        sweep.check(caplog)
        kinds = [o["type"] for o in sweep.lines]
        assert kinds.count("turn_start") == kinds.count("turn_end"), after


async def test_a_full_disk_when_new_session_lets_go_of_the_old_one_answers_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every line answered once: new_session when the old session's unsaved answer still
    cannot be written as it closes; the new session is served, the old file stays whole."""

    def full_at(number: int) -> None:
        # 4: the answer, before agent_end; 5: the old file's last flush, as new_session
        # lets go of it.
        if number in (4, 5):
            raise no_space()

    sweep = Sweep(tmp_path, _script(), {"id": "x", "type": "new_session"}, 0, "agent_settled")
    with session_disk(monkeypatch, tmp_path, full_at) as disk:
        await sweep.run()
    assert disk.writes == 5  # the new session, left without a message, writes nothing
    sweep.check(caplog)
    (answer,) = [o for o in sweep.lines if o.get("id") == "x"]
    assert answer["success"] is True
    messages = [m.text for m in load_session(tmp_path / "s1.jsonl").messages]
    assert messages == ["use the tool", "queued while idle", "", "echoed"]


@pytest.mark.parametrize("command", ["abort", "compact", "new_session"])
async def test_a_command_during_each_write_of_the_prompt_answers_each_line_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    command: str,
) -> None:
    """Every line answered once: abort, compact or new_session sent while each write of
    the prompt path is under way, and acted on before it ends (during the prompt's own
    write, which its answer waits for, right after); every turn ends with an answer."""
    for number in range(1, 5):  # the prompt, the steer, the tool turn, the answer
        sweep = Sweep(tmp_path / f"at-{number}", _script(), {"id": "x", "type": command}, -1)
        sweep.tmp_path.mkdir()
        with session_disk(monkeypatch, sweep.tmp_path, sweep.inject_at_write(number)):
            await sweep.run()
        sweep.check(caplog)
        kinds = [o["type"] for o in sweep.lines]
        assert kinds.count("turn_start") == kinds.count("turn_end"), number
        settled = [o for o in sweep.lines if o["type"] == "agent_settled"]
        assert settled[0]["aborted"] is True, number
