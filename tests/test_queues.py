"""Steering and follow-up queues (issue 12), as pi 0.73.1's agent loop delivers them.

Times are virtual (autojump_clock) and exact: the default backoff is 2000 ms.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    AutoRetryEnd,
    FauxProvider,
    FauxReply,
    QueueUpdate,
    SessionBusyError,
    Tool,
    ToolCall,
    UserMessage,
    event_to_json,
    open_session,
)
from trio_session._core.messages import ImageContent
from trio_session.rpc._protocol import encode_line
from trio_session.testing import EventRecorder

from .conftest import ERR_503, err, ok
from .disk_seam import session_disk
from .rpc_helpers import summarize
from .test_rpc_server import in_memory


def user_texts(messages: Any) -> list[str]:
    return [m.text for m in messages if isinstance(m, UserMessage)]


def sent_users(provider: FauxProvider, request: int) -> list[str]:
    return user_texts(provider.requests[request].messages)


async def test_steer_is_delivered_after_the_tool_calls_before_the_next_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A steer queued while a tool runs joins the conversation after the tool result,
    before the next model call; queue_update shows it queued and then gone."""
    ran = trio.Event()

    async def slow(args: Mapping[str, Any]) -> str:
        ran.set()
        await trio.sleep(3)
        return "done"

    call = ToolCall(id="c1", name="slow")
    provider = FauxProvider([FauxReply(tool_calls=[call]), ok("after steer")])
    async with open_session(provider, tools=[Tool("slow", slow)]) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "go")
            await ran.wait()
            session.steer("focus on tests")
            assert session.steering_messages == ("focus on tests",)
            assert session.pending_message_count == 1
    assert sent_users(provider, 1) == ["go", "focus on tests"]
    assert [m.role for m in provider.requests[1].messages] == [
        "user",
        "assistant",
        "toolResult",
        "user",
    ]
    assert rec.of(QueueUpdate) == [QueueUpdate(("focus on tests",), ()), QueueUpdate((), ())]
    assert rec.times_of("queue_update") == [0.0, 3.0]
    i = rec.types.index("queue_update", rec.types.index("tool_execution_end"))
    assert rec.types[i - 2 : i + 2] == ["turn_end", "turn_start", "queue_update", "message_start"]
    assert session.pending_message_count == 0


async def test_one_at_a_time_and_all(autojump_clock: trio.testing.MockClock) -> None:
    """one-at-a-time (the default) delivers one steer per turn; "all" every queued one."""
    for mode, expected in (
        ("one-at-a-time", [["p", "a"], ["p", "a", "b"]]),
        ("all", [["p", "a", "b"]]),
    ):
        provider = FauxProvider([ok("x", delay=1), ok("y"), ok("z")])
        async with open_session(provider) as session:
            assert session.steering_mode == "one-at-a-time"
            session.set_steering_mode(mode)
            assert session.steering_mode == mode
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.prompt, "p")
                await trio.sleep(0.5)  # the first request is in flight
                session.steer("a")
                session.steer("b")
        got = [sent_users(provider, i) for i in range(1, len(provider.requests))]
        assert got == expected, mode


async def test_follow_up_waits_until_the_run_would_stop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A follow-up is delivered only when the run has nothing else to do; in "all" mode
    every queued follow-up goes in one turn."""
    provider = FauxProvider([ok("one", delay=1), ok("two")])
    async with open_session(provider) as session:
        session.set_follow_up_mode("all")
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "p")
            await trio.sleep(0.5)
            session.follow_up("f1")
            session.follow_up("f2")
            assert session.follow_up_messages == ("f1", "f2")
    assert sent_users(provider, 1) == ["p", "f1", "f2"]
    assert rec.types.count("agent_start") == 1  # the same run goes on
    assert rec.times_of("queue_update") == [0.5, 0.5, 1.0, 1.0]
    assert rec.of(QueueUpdate)[-1] == QueueUpdate((), ())


async def test_steer_during_backoff_is_sent_by_the_reattempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A steer queued in the backoff sleep is delivered before the re-attempt's request."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "p")
            await trio.sleep(1)
            assert session.is_retrying
            session.steer("also this")
    assert sent_users(provider, 1) == ["p", "also this"]
    assert [(t, e) for t, e in zip(rec.times, rec.types, strict=True) if e == "queue_update"] == [
        (1.0, "queue_update"),
        (2.0, "queue_update"),
    ]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(success=True, attempt=1)]


async def test_follow_up_during_backoff_waits_for_the_chain_to_succeed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A follow-up queued in the backoff sleep is not sent by the re-attempt; it comes
    once the chain succeeded and the run would stop."""
    provider = FauxProvider([err(), ok("recovered"), ok("followed")])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "p")
            await trio.sleep(1)
            session.follow_up("then this")
        reply = session.messages[-1]
    assert sent_users(provider, 1) == ["p"]
    assert sent_users(provider, 2) == ["p", "then this"]
    assert reply.text == "followed"
    i = rec.types.index("auto_retry_end")
    assert "queue_update" in rec.types[i:]
    assert rec.times_of("queue_update") == [1.0, 2.0]


@pytest.mark.parametrize("how", ["abort", "abort_retry"])
async def test_abort_keeps_the_queues_for_the_next_prompt(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """abort() and abort_retry() keep queued messages (as pi does): they are delivered
    with the next prompt, or taken back by clear_queue()."""
    provider = FauxProvider([err(), ok("next"), ok("after f")])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "p")
            await trio.sleep(1)
            session.steer("s")
            session.follow_up("f")
            if how == "abort":
                await session.abort()
            else:
                session.abort_retry()
        assert trio.current_time() == 1.0
        assert (session.steering_messages, session.follow_up_messages) == (("s",), ("f",))
        assert rec.of(QueueUpdate)[-1] == QueueUpdate(("s",), ("f",))
        await session.prompt("q")
    assert len(provider.requests) == 3
    assert sent_users(provider, 1) == ["p", "q", "s"]  # the steer joins the next prompt
    assert sent_users(provider, 2) == ["p", "q", "s", "f"]  # the follow-up: when it would stop
    assert provider.request_times == [0.0, 1.0, 1.0]
    assert session.pending_message_count == 0


async def test_clear_queue_takes_everything_back(autojump_clock: trio.testing.MockClock) -> None:
    """clear_queue() returns both queues and emits an empty queue_update."""
    async with open_session(FauxProvider([ok()])) as session:
        rec = EventRecorder.attach(session)
        session.steer("a")
        session.follow_up("b")
        session.steer("c")
        assert session.pending_message_count == 3
        assert session.clear_queue() == (("a", "c"), ("b",))
        assert rec.of(QueueUpdate)[-1] == QueueUpdate((), ())
        await session.prompt("p")
    assert user_texts(session.messages) == ["p"]


async def test_a_failed_run_leaves_follow_ups_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A prompt that ends in a non-retryable error does not deliver follow-ups."""
    provider = FauxProvider([err(ERR_503, delay=1)])
    async with open_session(provider, settings={"retry": {"enabled": False}}) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "p")
            await trio.sleep(0.5)
            session.follow_up("later")
        assert session.follow_up_messages == ("later",)
        assert len(provider.requests) == 1


async def test_modes_are_checked(autojump_clock: trio.testing.MockClock) -> None:
    """A bad mode is a ValueError and changes nothing."""
    async with open_session(FauxProvider([])) as session:
        with pytest.raises(ValueError, match="one-at-a-time"):
            session.set_steering_mode("some")
        with pytest.raises(ValueError, match="one-at-a-time"):
            session.set_follow_up_mode("")
        assert (session.steering_mode, session.follow_up_mode) == ("one-at-a-time",) * 2


async def test_prompt_and_queued_messages_carry_images(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """prompt(images=) and steer(images=) build pi's [text, *images] content."""
    image = ImageContent(data="aGk=", mime_type="image/png")
    provider = FauxProvider([ok()])
    async with open_session(provider) as session:
        session.steer("look", [image])
        await session.prompt("see", images=[image])
    first, second = provider.requests[0].messages
    assert isinstance(first, UserMessage)
    assert isinstance(second, UserMessage)
    assert (first.text, first.images) == ("see", (image,))
    assert (second.text, second.images) == ("look", (image,))


async def test_busy_prompt_still_refused(autojump_clock: trio.testing.MockClock) -> None:
    """R-36 stands: prompt() during a run raises; steer() is the way to add to it."""
    provider = FauxProvider([ok(delay=1)])
    async with open_session(provider) as session, trio.open_nursery() as nursery:
        nursery.start_soon(session.prompt, "p")
        await trio.sleep(0.5)
        with pytest.raises(SessionBusyError, match=r"steer\(\)"):
            await session.prompt("q")


# -- over RPC, by raw lines -------------------------------------------------------------


async def _until_response(raw: Any, command_id: int) -> tuple[dict[str, Any], list[Any]]:
    """Read lines up to the response to ``command_id``: (the response, the lines before)."""
    before = []
    while (obj := await raw.read()).get("type") != "response" or obj.get("id") != command_id:
        before.append(obj)
    return obj, before


async def test_rpc_prompt_while_streaming_needs_streaming_behavior(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """While an answer streams, prompt without streamingBehavior fails with pi's text;
    with it the message is queued and the answer is success."""
    script: list[Any] = [{"text": "ok", "delay": 5}, {"text": "after"}]
    async with in_memory(script) as s:
        await s.raw.send({"id": 1, "type": "prompt", "message": "p"})
        await s.raw.send({"id": 2, "type": "prompt", "message": "x"})
        refused, _ = await _until_response(s.raw, 2)
        assert refused == {
            "id": 2,
            "type": "response",
            "command": "prompt",
            "success": False,
            "error": "Agent is already processing. Specify streamingBehavior ('steer' or "
            "'followUp') to queue the message.",
        }
        await s.raw.send(
            {"id": 3, "type": "prompt", "message": "f", "streamingBehavior": "followUp"}
        )
        queued, before = await _until_response(s.raw, 3)
        assert queued == {
            **{"id": 3, "type": "response", "command": "prompt", "success": True},
            "data": {"disposition": "queued"},
        }
        assert before[-1] == {"type": "queue_update", "steering": [], "followUp": ["f"]}
        await s.raw.send({"id": 4, "type": "get_state"})
        state, _ = await _until_response(s.raw, 4)
        assert state["data"]["pendingMessageCount"] == 1
        lines = []
        while (obj := await s.raw.read())["type"] != "agent_settled":
            lines.append(obj)
        assert trio.current_time() == 5.0
    sent = [m.text for m in s.provider.requests[1].messages if isinstance(m, UserMessage)]
    assert sent == ["p", "f"]
    assert {"type": "queue_update", "steering": [], "followUp": []} in lines


@pytest.mark.parametrize("behavior", [None, "steer", "followUp"])
async def test_rpc_prompt_during_backoff_joins_the_retry(
    autojump_clock: trio.testing.MockClock, behavior: str | None
) -> None:
    """A prompt that comes while a retry waits out its backoff is answered success, cuts
    the wait short and goes out with the re-attempt — one run, as pi's new run at once;
    with or without streamingBehavior (pi ignores it there: nothing streams)."""
    script: list[Any] = [{"error": ERR_503}, {"text": "ok"}]
    async with in_memory(script) as s:
        await s.raw.send({"id": 1, "type": "prompt", "message": "p"})
        while (await s.raw.read())["type"] != "auto_retry_start":
            pass
        await trio.sleep(0.5)  # half a second into the 2 s backoff
        command: dict[str, Any] = {"id": 2, "type": "prompt", "message": "x"}
        if behavior is not None:
            command["streamingBehavior"] = behavior
        await s.raw.send(command)
        assert await s.raw.read() == {
            "id": 2,
            "type": "response",
            "command": "prompt",
            "success": True,
            "data": {"disposition": "queued"},  # joined, no new run
        }
        lines = []
        while (obj := await s.raw.read())["type"] != "agent_settled":
            lines.append(obj)
        assert trio.current_time() == 0.5  # the rest of the sleep was skipped
    sent = [m.text for m in s.provider.requests[1].messages if isinstance(m, UserMessage)]
    assert sent == ["p", "x"]
    assert {"type": "auto_retry_end", "success": True, "attempt": 1} in lines
    assert not any(line["type"] == "queue_update" for line in lines)


async def test_a_prompt_that_joined_a_cancelled_retry_stays_queued(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """If the chain is cancelled between join_retry and its re-attempt, the joined
    message is not lost: it is queued for the next prompt, with a queue_update."""
    provider = FauxProvider([FauxReply(error=ERR_503)])
    async with open_session(provider) as session:
        recorded = EventRecorder()
        session.subscribe(recorded)
        assert session.join_retry("too early") is False  # no retry is waiting
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "p")
            await trio.testing.wait_all_tasks_blocked()  # the chain sleeps now
            assert session.is_waiting_to_retry
            assert session.join_retry("x") is True
            session.abort_retry()  # cancelled before the re-attempt could start
        assert session.steering_messages == ("x",)
        assert QueueUpdate(steering=("x",), follow_up=()) in recorded.events
        assert len(provider.requests) == 1


# -- after a prompt joined the retry: its run has begun, however soon the chain wakes ---------


def _without_queue_updates(lines: list[Any]) -> list[str]:
    """The event types of ``lines`` in order, user messages by text, queue updates left out."""
    out = []
    for line in lines:
        kind = line["type"]
        if kind == "message_start" and line["message"]["role"] == "user":
            out.append(f"user {line['message']['content'][0]['text']}")
        elif kind not in ("queue_update", "message_update", "message_end", "response"):
            out.append(kind)
    return out


@pytest.mark.parametrize("woken", [False, True], ids=["in-one-read", "after-the-chain-woke"])
async def test_rpc_steer_after_a_joined_prompt_is_queued_whenever_it_comes(
    autojump_clock: trio.testing.MockClock, woken: bool
) -> None:
    """R-36, R-36a: a plain prompt joins the retry in its backoff; a ``steer`` prompt after
    it is queued and delivered after the re-attempt's first turn, as pi does (its joined
    run has started). The same lines, events and requests whether the steer is read in
    the same chunk as the plain prompt — before the chain's task has woken — or after the
    chain woke and its re-attempt streams."""
    script: list[Any] = [{"error": ERR_503}, {"text": "ok", "delay": 1}, {"text": "steered"}]
    plain = {"id": 2, "type": "prompt", "message": "x"}
    steer = {"id": 3, "type": "prompt", "message": "y", "streamingBehavior": "steer"}
    async with in_memory(script) as s:
        await s.raw.send({"id": 1, "type": "prompt", "message": "p"})
        while (await s.raw.read())["type"] != "auto_retry_start":
            pass
        await trio.sleep(0.5)  # half a second into the 2 s backoff
        if woken:
            await s.raw.send(plain)
            answer, lines = await _until_response(s.raw, 2)
            assert answer["success"] is True
            await trio.testing.wait_all_tasks_blocked()  # the re-attempt waits for its reply
            assert s.server.session.is_retrying
            assert not s.server.session.is_waiting_to_retry
            await s.raw.send(steer)
        else:  # one chunk: the server reads both before any other task runs
            await s.raw.send(encode_line(plain) + encode_line(steer))
            answer, lines = await _until_response(s.raw, 2)
            assert answer["success"] is True
        answer, more = await _until_response(s.raw, 3)
        assert answer == {
            **{"id": 3, "type": "response", "command": "prompt", "success": True},
            "data": {"disposition": "queued"},
        }
        lines += more
        while (obj := await s.raw.read())["type"] != "agent_settled":
            lines.append(obj)
        lines.append(obj)
        assert trio.current_time() == 0.5 + 1  # the sleep was cut short; the reply's 1 s
    assert sent_users(s.provider, 1) == ["p", "x"]
    assert sent_users(s.provider, 2) == ["p", "x", "y"]
    assert [line for line in lines if line["type"] == "queue_update"] == [
        {"type": "queue_update", "steering": ["y"], "followUp": []},
        {"type": "queue_update", "steering": [], "followUp": []},
    ]
    assert _without_queue_updates(lines) == [
        "agent_start",
        "turn_start",
        "user x",
        "message_start",
        "auto_retry_end",
        "turn_end",
        "turn_start",
        "user y",
        "message_start",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]


async def test_rpc_plain_prompt_after_a_joined_one_is_refused_in_the_same_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-36: only one prompt joins a backoff; a second plain one read in the same chunk —
    before the chain's task has woken — is refused as busy, as it is once the chain
    runs (and as pi refuses it: the joined run has started)."""
    script: list[Any] = [{"error": ERR_503}, {"text": "ok"}]
    async with in_memory(script) as s:
        await s.raw.send({"id": 1, "type": "prompt", "message": "p"})
        while (await s.raw.read())["type"] != "auto_retry_start":
            pass
        await s.raw.send(
            encode_line({"id": 2, "type": "prompt", "message": "x"})
            + encode_line({"id": 3, "type": "prompt", "message": "again"})
        )
        joined, _ = await _until_response(s.raw, 2)
        assert joined["success"] is True
        refused, _ = await _until_response(s.raw, 3)
        assert refused["success"] is False
        assert refused["error"].startswith("Agent is already processing.")
        while (await s.raw.read())["type"] != "agent_settled":
            pass
    assert len(s.provider.requests) == 2
    assert sent_users(s.provider, 1) == ["p", "x"]


@pytest.mark.parametrize("woken", [False, True], ids=["before-the-chain-woke", "after"])
async def test_join_retry_fixes_the_first_turns_steering_when_it_joins(
    autojump_clock: trio.testing.MockClock, woken: bool
) -> None:
    """R-36a: a steer queued before ``join_retry`` goes with the joined message in the
    re-attempt's first turn; one queued after it waits for the next turn, and a second
    ``join_retry`` is refused — whether or not the chain's task has woken meanwhile."""
    provider = FauxProvider([err(ERR_503), ok("first", delay=1), ok("second")])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "p")
            await trio.testing.wait_all_tasks_blocked()  # the chain sleeps now
            session.steer("early")
            assert session.join_retry("x") is True
            assert not session.is_waiting_to_retry  # the wait is over, whatever runs next
            assert session.join_retry("again") is False
            assert session.retry_now() is False  # nothing left to skip
            if woken:
                await trio.testing.wait_all_tasks_blocked()  # the re-attempt waits for "first"
                assert len(provider.requests) == 2  # its request is out
            session.steer("late")
        assert trio.current_time() == 1.0
    assert sent_users(provider, 1) == ["p", "x", "early"]
    assert sent_users(provider, 2) == ["p", "x", "early", "late"]
    # What the queue held each time it changed: only when "late" came differs.
    late = [QueueUpdate((), ()), QueueUpdate(("late",), ())]  # delivered "early", queued "late"
    if not woken:
        late = [QueueUpdate(("early", "late"), ()), QueueUpdate(("late",), ())]  # the reverse
    assert rec.of(QueueUpdate) == [QueueUpdate(("early",), ()), *late, QueueUpdate((), ())]
    second_turn = rec.types.index("turn_start", rec.types.index("auto_retry_end"))
    assert rec.types[second_turn : second_turn + 3] == [
        "turn_start",
        "queue_update",
        "message_start",
    ]


async def test_rpc_queue_commands(autojump_clock: trio.testing.MockClock) -> None:
    """steer, follow_up, set_steering_mode, set_follow_up_mode by raw lines; get_state
    reports them; a bad mode is one error response."""
    async with in_memory([]) as s:
        await s.raw.send({"id": "a", "type": "set_steering_mode", "mode": "all"})
        await s.raw.send({"id": "b", "type": "set_follow_up_mode", "mode": "all"})
        await s.raw.send({"id": "c", "type": "set_follow_up_mode", "mode": "some"})
        img = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
        await s.raw.send({"id": "d", "type": "steer", "message": "s", "images": [img]})
        await s.raw.send({"id": "e", "type": "follow_up", "message": "f"})
        await s.raw.send({"id": "g", "type": "get_state"})
        lines = [await s.raw.read() for _ in range(8)]
    assert [summarize(o) if o["type"] == "response" else o for o in lines[:5]] == [
        "response set_steering_mode ok",
        "response set_follow_up_mode ok",
        "response set_follow_up_mode failed",
        {"type": "queue_update", "steering": ["s"], "followUp": []},
        "response steer ok queued",
    ]
    assert (
        lines[2]["error"] == 'set_follow_up_mode.mode must be "all" or "one-at-a-time", not "some"'
    )
    assert lines[5:7] == [
        {"type": "queue_update", "steering": ["s"], "followUp": ["f"]},
        {
            "id": "e",
            "type": "response",
            "command": "follow_up",
            "success": True,
            "data": {"disposition": "queued"},
        },
    ]
    data = lines[7]["data"]
    assert (data["steeringMode"], data["followUpMode"], data["pendingMessageCount"]) == (
        "all",
        "all",
        2,
    )
    steered = s.server.session._agent.steering.messages[0]
    assert steered.images == (ImageContent(data="aGk=", mime_type="image/png"),)


async def test_rpc_abort_retry_writes_auto_retry_end_before_its_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As pi writes them: auto_retry_end, then the abort_retry response (raw lines) — with
    the prompt's agent_settled between them, the chain having been the prompt's (R-54)."""
    async with in_memory([{"error": ERR_503}]) as s:
        await s.raw.send({"type": "prompt", "message": "p"})
        while (await s.raw.read())["type"] != "auto_retry_start":
            pass
        await trio.sleep(1)
        await s.raw.send({"id": 9, "type": "abort_retry"})
        first, settled, second = await s.raw.read(), await s.raw.read(), await s.raw.read()
    assert first == {
        "type": "auto_retry_end",
        "success": False,
        "attempt": 1,
        "finalError": "Retry cancelled",
    }
    assert settled == {"type": "agent_settled", "aborted": False}
    assert second == {"id": 9, "type": "response", "command": "abort_retry", "success": True}
    assert trio.current_time() == 1.0


# -- issue 39, F5: a steer queued while idle, then a prompt aborted at once --------------------


async def test_abort_while_the_prompt_is_written_ends_the_steered_turn_with_an_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nursery: trio.Nursery
) -> None:
    """F5: a steer queued while idle, a prompt, abort() while the prompt is written: the
    turn that takes the steer ends with an aborted answer, which prompt() returns."""
    provider = FauxProvider([ok("never sent")])
    async with open_session(provider, history=tmp_path / "s.jsonl") as session:
        token = trio.lowlevel.current_trio_token()

        def abort_meanwhile(number: int) -> None:
            if number == 1:  # the prompt's own entry: abort() has run when it is written
                trio.from_thread.run_sync(nursery.start_soon, session.abort, trio_token=token)
                trio.from_thread.run(trio.testing.wait_all_tasks_blocked, trio_token=token)

        session.steer("queued while idle")
        rec = EventRecorder.attach(session)
        with session_disk(monkeypatch, tmp_path, abort_meanwhile):
            reply = await session.prompt("hi")
        assert (reply.stop_reason, reply.error_message) == ("aborted", "Request was aborted")
        assert [summarize(event_to_json(e)) for e in rec.events] == [
            "agent_start",
            "turn_start",
            "message_start user",
            "message_end user",
            "queue_update",
            "message_start user",
            "message_end user",
            "message_start assistant",
            "message_end assistant aborted",
            "turn_end",
            "agent_end willRetry=false",
            "agent_settled aborted",
        ]
        assert provider.requests == []
        assert not session.is_running
