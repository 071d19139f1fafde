"""pi 0.73.1's streaming event shapes, and manual compaction (issue 12)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    CompactionEnd,
    CompactionError,
    CompactionStart,
    FauxProvider,
    FauxReply,
    MessageStart,
    ToolCall,
    event_to_json,
    open_session,
)
from trio_session._core.messages import CompactionSummaryMessage
from trio_session.testing import EventRecorder

from .conftest import ERR_503, err, ok
from .test_rpc_server import in_memory


async def test_text_stream_in_pi_shape(autojump_clock: trio.testing.MockClock) -> None:
    """text_start, text_delta (delta), text_end (content), each with contentIndex and the
    partial message so far; then a tool call as toolcall_start/delta/end."""
    call = ToolCall(id="c1", name="read", arguments={"path": "a"})
    reply = FauxReply(text="Hello", chunks=["He", "llo"], tool_calls=[call])
    async with open_session(FauxProvider([reply, ok("done")])) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("hi")
    updates = [event_to_json(e) for e in rec.events if e.type == "message_update"][:6]
    events = [u["assistantMessageEvent"] for u in updates]
    assert [(e["type"], e["contentIndex"]) for e in events] == [
        ("text_start", 0),
        ("text_delta", 0),
        ("text_delta", 0),
        ("text_end", 0),
        ("toolcall_start", 1),
        ("toolcall_delta", 1),
    ]
    assert [e.get("delta") for e in events[1:3]] == ["He", "llo"]
    assert events[3]["content"] == "Hello"
    assert [e["partial"]["content"] for e in events[1:3]] == [
        [{"type": "text", "text": "He"}],
        [{"type": "text", "text": "Hello"}],
    ]
    assert all(u["message"] == u["assistantMessageEvent"]["partial"] for u in updates)
    assert events[5]["delta"] == '{"path": "a"}'
    end = next(
        event_to_json(e)["assistantMessageEvent"]
        for e in rec.events
        if e.type == "message_update" and e.assistant_message_event["type"] == "toolcall_end"
    )
    assert end["toolCall"] == {
        "type": "toolCall",
        "id": "c1",
        "name": "read",
        "arguments": {"path": "a"},
    }


async def test_failed_request_message_start_is_the_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As pi: a request that fails before anything streams has no updates, and its
    message_start already carries stopReason error and the errorMessage."""
    async with open_session(FauxProvider([err(delay=2), ok()])) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("hi")
    starts = [e for e in rec.of(MessageStart) if e.message.role == "assistant"]
    first = event_to_json(starts[0])["message"]
    assert (first["stopReason"], first["errorMessage"]) == ("error", ERR_503)
    i = rec.types.index("message_start", 3)
    assert rec.types[i : i + 2] == ["message_start", "message_end"]
    assert rec.times[i] == 2.0  # when the answer came, not when the request went out


async def test_manual_compact(autojump_clock: trio.testing.MockClock, tmp_path: Any) -> None:
    """compact() emits compaction_start/end reason "manual"; the summary enters the context
    as a CompactionSummaryMessage; firstKeptEntryId names the first kept message. With
    keepRecentTokens 2 the last two one-token messages are kept (pi's cut point)."""
    provider = FauxProvider([ok("a1"), ok("a2"), ok("the summary")])
    path = tmp_path / "s.jsonl"
    settings = {"compaction": {"keepRecentTokens": 2}}
    async with open_session(provider, history=path, settings=settings) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        kept_id = session.history_file.entry_id_of(session.messages[2])  # type: ignore[union-attr]
        result = await session.compact("mention q1")
        assert not session.is_compacting
    assert rec.types == ["compaction_start", "compaction_end"]
    assert rec.of(CompactionStart) == [CompactionStart("manual")]
    (end,) = rec.of(CompactionEnd)
    assert (end.reason, end.result, end.aborted, end.will_retry) == ("manual", result, False, False)
    assert result.summary == "the summary"
    assert kept_id is not None
    assert result.first_kept_entry_id == kept_id
    assert isinstance(session.messages[0], CompactionSummaryMessage)
    assert [m.text for m in session.messages[1:]] == ["q2", "a2"]
    assert "mention q1" in provider.requests[2].messages[-1].text
    assert f'"firstKeptEntryId":"{kept_id}"' in path.read_text()


async def test_manual_compact_keeps_what_pi_keeps(autojump_clock: trio.testing.MockClock) -> None:
    """With pi's default keepRecentTokens (20 000) a small session keeps every message,
    behind the summary — pi's manual compaction does the same; the summary request
    then has nothing before it but the request itself."""
    provider = FauxProvider([ok("a1"), ok("a2"), ok("the summary")])
    async with open_session(provider) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        result = await session.compact()
        assert isinstance(session.messages[0], CompactionSummaryMessage)
        assert [m.text for m in session.messages[1:]] == ["q1", "a1", "q2", "a2"]
    assert (result.summary, result.messages_removed) == ("the summary", 0)
    assert len(provider.requests[2].messages) == 1  # only the summary request


async def test_manual_compact_refuses_when_pi16_keeps_everything(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-56a under ``retry.profile`` "pi-1.6": the same small session is refused as pi 1.6.0
    refuses it (its prepareCompaction finds nothing before the cut): compaction_start,
    a compaction_end with pi's error, the context as it was, no summary request."""
    provider = FauxProvider([ok("a1"), ok("a2"), ok("never")])
    async with open_session(provider, settings={"retry": {"profile": "pi-1.6"}}) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        with pytest.raises(CompactionError, match=r"^Nothing to compact \(session too small\)$"):
            await session.compact()
        assert [m.text for m in session.messages] == ["q1", "a1", "q2", "a2"]
    assert rec.types == ["compaction_start", "compaction_end"]
    (end,) = rec.of(CompactionEnd)
    assert end.error_message == "Compaction failed: Nothing to compact (session too small)"
    assert (end.result, end.aborted, end.will_retry) == (None, False, False)
    assert len(provider.requests) == 2
    assert provider.remaining == 1


async def test_manual_compact_with_nothing_to_compact(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An empty session: pi's error, a compaction_end with errorMessage, nothing asked."""
    provider = FauxProvider([])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        with pytest.raises(CompactionError, match=r"^Nothing to compact \(session too small\)$"):
            await session.compact()
        assert session.messages == ()
    (end,) = rec.of(CompactionEnd)
    assert end.error_message == "Compaction failed: Nothing to compact (session too small)"
    assert provider.requests == []


async def test_rpc_compact(autojump_clock: trio.testing.MockClock) -> None:
    """The compact command answers with the result; a failure is one error response."""
    async with in_memory([{"text": "a1"}, {"text": "a2"}, {"text": "sum"}]) as s:
        await s.raw.send({"id": 0, "type": "compact"})
        lines = [await s.raw.read() for _ in range(3)]
        assert lines[2] == {
            "id": 0,
            "type": "response",
            "command": "compact",
            "success": False,
            "error": "Nothing to compact (session too small)",
        }
        for text in ("q1", "q2"):
            await s.raw.send({"type": "prompt", "message": text})
            while (await s.raw.read())["type"] != "agent_settled":
                pass
        await s.raw.send({"id": 1, "type": "compact", "customInstructions": "short"})
        start, end, response = [await s.raw.read() for _ in range(3)]
    assert start == {"type": "compaction_start", "reason": "manual"}
    assert end["type"] == "compaction_end"
    assert end["result"]["summary"] == "sum"
    assert response["data"] == end["result"]
    assert set(response["data"]) >= {"summary", "tokensBefore"}
