"""Nothing lost, nothing hung: session-file durability and hostile input (issue 11).

Each test here reproduces one defect found by trying the package as an adversarial
user would, and pins its fix.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import resource
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from trio_session import (
    AgentEnd,
    FauxProvider,
    FauxReply,
    HistoryError,
    HistoryWriteFailed,
    OpenAIProvider,
    ProviderRequest,
    UserMessage,
    open_session,
)
from trio_session.providers._faux import ScriptStep
from trio_session.store._history import load_session
from trio_session.store._loaded import runtime_context
from trio_session.store._session_file import SessionFile
from trio_session.testing import EventRecorder

from .http_server import ScriptedServer, Step, event_stream, sse

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")

#: A bound on waits that must end by themselves; a hang fails the test instead of CI.
HANG_GUARD = 30


def full(text: str) -> str:
    """A regex matching exactly ``text``."""
    return f"^{re.escape(text)}$"


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """This process may grow no file past ``limit`` bytes (``ulimit -f``): writes fail EFBIG.

    Python ignores SIGXFSZ, so the write returns the error instead of killing us.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


# -- 1. a failed write ends the prompt; the session stays usable ----------------------------


@posix_only
async def test_failed_session_write_ends_the_prompt_and_the_session_stays_usable(
    tmp_path: Path,
) -> None:
    """Defect 1: a write that fails (file-size limit) ends the prompt with HistoryError and
    a history_write_failed event, sends no request, damages nothing; later prompts work."""
    path = tmp_path / "s.jsonl"
    provider = FauxProvider([FauxReply(text="one"), FauxReply(text="three")])
    with trio.fail_after(HANG_GUARD):
        async with open_session(provider, history=path) as session:
            await session.prompt("first")
            before = path.read_bytes()
            rec = EventRecorder.attach(session)
            with file_size_limit(len(before) + 40), pytest.raises(HistoryError) as raised:
                await session.prompt("second")
            expected = f"cannot write session file {path}: File too large"
            assert str(raised.value) == expected
            assert rec.of(HistoryWriteFailed) == [HistoryWriteFailed(str(path), expected)]
            # no run started, nothing was sent; the prompt is over: agent_settled
            assert rec.types == ["history_write_failed", "agent_settled"]
            assert len(provider.requests) == 1
            assert path.read_bytes() == before  # the failed write was cut back off
            assert not session.is_running

            reply = await session.prompt("third")  # the disk has room again
            assert reply.text == "three"
    loaded = load_session(path)
    assert loaded.warnings == ()
    # The prompt that could not be saved was not sent, and is not kept.
    assert [m.text for m in loaded.messages] == ["first", "one", "third", "three"]
    assert [m.text for m in provider.requests[-1].messages] == ["first", "one", "third"]


@posix_only
async def test_write_failure_after_an_error_reply_ends_the_run_before_any_retry(
    tmp_path: Path,
) -> None:
    """Defect 1: the run's messages are flushed before agent_end; if that fails, agent_end
    says willRetry false, no chain starts, prompt() raises and the session is idle."""
    path = tmp_path / "s.jsonl"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)

    def fail_and_fill_the_disk(request: ProviderRequest) -> FauxReply:
        size = path.stat().st_size  # the prompt is on disk already
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, hard))
        return FauxReply(error="503 Service Unavailable")

    provider = FauxProvider([fail_and_fill_the_disk])
    try:
        with trio.fail_after(HANG_GUARD):
            async with open_session(provider, history=path) as session:
                rec = EventRecorder.attach(session)
                with pytest.raises(HistoryError):
                    await session.prompt("hi")
                assert not session.is_running
                assert not session.is_retrying
                resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert [t for t in rec.types if t != "message_update"] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "history_write_failed",
        "agent_end",
        "agent_settled",
    ]
    (end,) = rec.of(AgentEnd)
    assert end.will_retry is False
    assert len(provider.requests) == 1
    # Written on the way out (the limit was lifted before the session closed).
    assert [m.text for m in load_session(path).messages] == ["hi", ""]


# -- 2. the prompt is on disk before the request goes out ------------------------------------


async def test_user_message_is_on_disk_before_the_request_goes_out(tmp_path: Path) -> None:
    """Defect 2: when the provider is asked, the session file already holds the prompt."""
    path = tmp_path / "s.jsonl"
    seen_on_disk: list[list[str]] = []

    def look(request: ProviderRequest) -> FauxReply:
        seen_on_disk.append([m.text for m in load_session(path).messages])
        return FauxReply(text="answer")

    async with open_session(FauxProvider([look, look]), history=path) as session:
        await session.prompt("first")
        await session.prompt("second")
    assert seen_on_disk == [["first"], ["first", "answer", "second"]]


async def test_tool_turns_are_on_disk_before_the_next_request(tmp_path: Path) -> None:
    """Defect 2: between the turns of one run, the previous turn is durable first."""
    from trio_session import Tool, ToolCall

    path = tmp_path / "s.jsonl"
    seen_on_disk: list[int] = []

    def look(request: ProviderRequest) -> FauxReply:
        seen_on_disk.append(len(load_session(path).messages))
        return FauxReply(text="done")

    async def echo(arguments: object) -> str:
        return "echoed"

    script: list[ScriptStep] = [FauxReply(tool_calls=[ToolCall("c1", "echo", {})]), look]
    tool = Tool("echo", echo)
    async with open_session(FauxProvider(script), history=path, tools=[tool]) as session:
        await session.prompt("use the tool")
    assert seen_on_disk == [3]  # prompt, tool call, tool result


# -- 3. a lone surrogate is made valid at the edge --------------------------------------------


async def test_lone_surrogate_in_a_prompt_is_replaced_and_sent(
    tmp_path: Path, nursery: trio.Nursery, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 3: "\\ud83d" (half an emoji) becomes U+FFFD with a warning; the request goes
    out over real HTTP, the file holds valid text, and the next prompt works."""
    server = ScriptedServer()
    await nursery.start(server.run)

    def answer(text: str) -> Step:
        chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
        return event_stream([sse(chunk), "data: [DONE]\n\n"])

    server.script(answer("ok"), answer("still ok"))
    path = tmp_path / "s.jsonl"
    caplog.set_level(logging.WARNING, logger="trio_session")
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test") as provider,
        open_session(provider, "gpt-test", history=path) as session,
    ):
        first = await session.prompt("half an emoji: \ud83d!")
        second = await session.prompt("and again")
    assert (first.text, second.text) == ("ok", "still ok")
    assert [m["content"] for m in server.bodies[1]["messages"]] == [
        [{"type": "text", "text": "half an emoji: \ufffd!"}],
        "ok",
        [{"type": "text", "text": "and again"}],
    ]
    assert caplog.messages == [
        "prompt text held 1 lone surrogate code point(s) (half of a character); "
        "replaced with U+FFFD"
    ]
    assert "\\ud83d" not in path.read_text(encoding="utf-8")


def test_session_file_with_a_lone_surrogate_resumes_repaired(tmp_path: Path) -> None:
    """Defect 3: a file an older version wrote with a "\\ud83d" escape no longer poisons
    the resumed context: the code point becomes U+FFFD, with a warning."""
    path = tmp_path / "s.jsonl"
    with SessionFile.create(path, cwd="/src/app") as history:
        history.append_message_nowait(UserMessage("cut \ud83d here", timestamp=1))
    assert "\\ud83d" in path.read_text(encoding="utf-8")
    loaded = load_session(path)
    assert [m.text for m in runtime_context(loaded)] == ["cut \ufffd here"]
    assert loaded.warnings == (
        f"{path}:2: 1 lone surrogate code point(s) (half of a character) replaced with U+FFFD",
    )


# -- 4. resuming a header-only file without its newline -------------------------------------


def test_resuming_a_header_only_file_without_its_newline_keeps_lines_apart(
    tmp_path: Path,
) -> None:
    """Defect 4: the first new entry starts a line of its own; the file resumes again."""
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/src"}
    path.write_text(json.dumps(header))  # no newline
    with SessionFile.resume(path) as history:
        history.append_message_nowait(UserMessage("hello", timestamp=1))
    assert [json.loads(line)["type"] for line in path.read_text().splitlines()] == [
        "session",
        "message",
    ]
    with SessionFile.resume(path) as history:
        assert [m.text for m in history.loaded.messages] == ["hello"]  # type: ignore[union-attr]
        assert history.loaded.warnings == ()  # type: ignore[union-attr]


# -- 9. hostile lines in a session file --------------------------------------------------------


def _entry(entry_id: str, parent: str | None, message: object) -> str:
    return json.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "t",
            "message": message,
        }
    )


def test_hostile_lines_are_skipped_with_warnings(tmp_path: Path) -> None:
    """Defect 9: nesting past the recursion limit and a 5 000-digit integer are skipped,
    each with a warning naming its line; the rest loads."""
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/src"}
    deep = "[" * 100_000 + "]" * 100_000
    huge = "9" * 5000
    lines = [
        json.dumps(header),
        _entry("a1", None, {"role": "user", "content": "kept", "timestamp": 1}),
        f'{{"type":"message","id":"a2","parentId":"a1","timestamp":"t","message":{deep}}}',
        f'{{"type":"message","id":"a3","parentId":"a1","timestamp":{huge}}}',
        _entry("a5", "a1", {"role": "user", "content": "also kept", "timestamp": 2}),
    ]
    path.write_text("\n".join(lines) + "\n")
    loaded = load_session(path)
    assert [m.text for m in loaded.messages] == ["kept", "also kept"]
    assert loaded.warnings == (
        f"{path}:3: not valid JSON (nested too deeply); skipped",
        f"{path}:4: not valid JSON (a number too long to read); skipped",
    )


# -- 15. duplicated lines ------------------------------------------------------------------------


def test_a_duplicated_line_is_not_replayed_into_the_context(tmp_path: Path) -> None:
    """Defect 15: a line repeated in the file (same entry id) is loaded once, with a warning."""
    path = tmp_path / "s.jsonl"
    with SessionFile.create(path, cwd="/src/app") as history:
        history.append_message_nowait(UserMessage("question", timestamp=1))
    text = path.read_text().splitlines()
    path.write_text("\n".join([*text, text[1]]) + "\n")
    loaded = load_session(path)
    assert [m.text for m in runtime_context(loaded)] == ["question"]
    entry_id = loaded.entries[0].id
    assert loaded.warnings == (
        f"{path}:3: entry id {entry_id} repeats the one on line 2; skipped (a duplicated line)",
    )
