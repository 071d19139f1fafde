"""Events (SPEC §8), subscription, tools, and the session's public surface."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    AgentEnd,
    AssistantMessage,
    FauxProvider,
    FauxReply,
    MessageUpdate,
    SessionClosedError,
    SessionEvent,
    Tool,
    ToolCall,
    ToolExecutionEnd,
    ToolResultMessage,
    event_from_json,
    event_to_json,
    open_session,
)
from trio_session.testing import EventRecorder

from .conftest import ERR_503, err, ok


async def test_r43_retry_events_on_the_wire(autojump_clock: trio.testing.MockClock) -> None:
    """R-43: the retry events of a real run encode to the reference's exact shapes."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("Hi")
    wire = [event_to_json(e) for e in rec.events if e.type.startswith("auto_retry")]
    assert wire == [
        {
            "type": "auto_retry_start",
            "attempt": 1,
            "maxAttempts": 3,
            "delayMs": 2000,
            "errorMessage": ERR_503,
        },
        {"type": "auto_retry_end", "success": True, "attempt": 1},
    ]
    agent_end = event_to_json(rec.of(AgentEnd)[0])
    assert agent_end["willRetry"] is True
    assert agent_end["messages"][-1]["stopReason"] == "error"
    # every event of the run survives a trip through JSON text
    # (a message_update's partial message decodes as plain JSON: compared as JSON)
    for event in rec.events:
        data = json.loads(json.dumps(event_to_json(event)))
        assert event_to_json(event_from_json(data)) == data


async def test_r44_subscribe_and_unsubscribe(autojump_clock: trio.testing.MockClock) -> None:
    """R-44: subscribers see every event in order; unsubscribing stops delivery."""
    provider = FauxProvider([ok("one"), ok("two")])
    async with open_session(provider) as session:
        first: list[SessionEvent] = []
        second: list[SessionEvent] = []
        stop_first = session.subscribe(first.append)
        session.subscribe(second.append)
        await session.prompt("a")
        stop_first()
        stop_first()  # twice is fine
        await session.prompt("b")
    assert len(second) == 2 * len(first)
    assert second[: len(first)] == first


async def test_r44_a_raising_subscriber_is_isolated(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R-44: a subscriber that raises is logged; the others and the session carry on."""

    def broken(event: SessionEvent) -> None:
        raise RuntimeError("subscriber bug")

    provider = FauxProvider([err(), ok()])
    async with open_session(provider) as session:
        session.subscribe(broken)
        rec = EventRecorder.attach(session)
        reply = await session.prompt("Hi")
    assert reply.text == "Hello"
    assert rec.types.count("auto_retry_end") == 1
    assert "session event subscriber" in caplog.text


async def test_r45a_will_retry_marks_intermediate_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-45a: agent_end carries willRetry true between attempts, false at the final end."""
    provider = FauxProvider([err(), err(), err(), err(), ok("next"), err("401 Unauthorized")])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("exhausts retries")
        await session.prompt("succeeds")
        await session.prompt("not retryable")
    assert [e.will_retry for e in rec.of(AgentEnd)] == [True, True, True, False, False, False]


async def test_r52_classification_reads_only_the_error_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-52: the decision depends on errorMessage alone, not on provider or model fields."""
    for provider_name in ("faux", "anthropic", "openai"):
        provider = FauxProvider([err("overloaded"), ok()], name=provider_name)
        async with open_session(provider) as session:
            rec = EventRecorder.attach(session)
            await session.prompt("Hi")
        assert rec.types.count("auto_retry_start") == 1


async def test_streaming_updates_carry_the_partial_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """message_update events grow the assistant message chunk by chunk."""
    provider = FauxProvider([FauxReply(text="Hello world", chunks=["Hel", "lo ", "world"])])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("Hi")
    updates = [u for u in rec.of(MessageUpdate) if u.delta]
    assert [u.delta for u in updates] == ["Hel", "lo ", "world"]
    assert [u.message.text for u in updates] == ["Hel", "Hello ", "Hello world"]


async def test_tool_calls_run_and_results_go_back(autojump_clock: trio.testing.MockClock) -> None:
    """Tool calls run in order; results (errors included) are sent on the next turn."""

    async def add(args: Mapping[str, Any]) -> str:
        return str(args["a"] + args["b"])

    async def fail(args: Mapping[str, Any]) -> str:
        raise ValueError("no such file")

    calls = (
        ToolCall(id="1", name="add", arguments={"a": 2, "b": 3}),
        ToolCall(id="2", name="fail"),
        ToolCall(id="3", name="missing"),
    )
    provider = FauxProvider([FauxReply(tool_calls=calls), ok("done")])
    tools = [Tool(name="add", execute=add), Tool(name="fail", execute=fail)]
    async with open_session(provider, tools=tools) as session:
        rec = EventRecorder.attach(session)
        reply = await session.prompt("go")
    assert reply.text == "done"
    ends = rec.of(ToolExecutionEnd)
    assert [(e.result.text, e.is_error) for e in ends] == [
        ("5", False),
        ("ValueError: no such file", True),
        ("unknown tool 'missing'", True),
    ]
    sent = provider.requests[1].messages
    results = [m for m in sent if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("1", False),
        ("2", True),
        ("3", True),
    ]
    assert [t.name for t in provider.requests[0].tools] == ["add", "fail"]


async def test_abort_during_a_tool_call(autojump_clock: trio.testing.MockClock) -> None:
    """Cancelling while a tool runs records it as aborted and closes the turn."""

    async def slow(args: Mapping[str, Any]) -> str:
        await trio.sleep(60)
        return "late"

    provider = FauxProvider([FauxReply(tool_calls=(ToolCall(id="1", name="slow"),))])
    async with open_session(provider, tools=[Tool(name="slow", execute=slow)]) as session:
        rec = EventRecorder.attach(session)
        with trio.move_on_after(5):
            await session.prompt("go")
        last = session.history[-1]
    assert isinstance(last, ToolResultMessage)
    assert (last.text, last.is_error) == ("tool call aborted", True)
    assert rec.types[-3:] == ["turn_end", "agent_end", "agent_settled"]


async def test_provider_exception_becomes_an_error_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A provider that raises (a bug) yields an error message, not a crash."""

    def explode(request: object) -> FauxReply:
        raise KeyError("boom")

    provider = FauxProvider([explode])
    async with open_session(provider) as session:
        reply = await session.prompt("Hi")
    assert isinstance(reply, AssistantMessage)
    assert reply.error_message == "provider faux failed: KeyError('boom')"


async def test_closed_session_refuses_prompts(autojump_clock: trio.testing.MockClock) -> None:
    """After its open_session block, a session raises SessionClosedError."""
    async with open_session(FauxProvider([ok()])) as session:
        pass
    with pytest.raises(SessionClosedError, match=r"^the session is closed$"):
        await session.prompt("late")


async def test_closing_aborts_a_running_prompt(autojump_clock: trio.testing.MockClock) -> None:
    """Leaving open_session while a prompt sleeps in backoff ends the chain cleanly."""
    provider = FauxProvider([err(), ok()])
    async with trio.open_nursery() as nursery:
        async with open_session(provider) as session:
            rec = EventRecorder.attach(session)
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1)
        assert not session.is_running
    assert rec.types[-2:] == ["auto_retry_end", "agent_settled"]
    assert trio.current_time() == 1.0
