"""Cancellation is structural (SPEC §5): every phase, every way of cancelling."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from trio_session import (
    AgentEnd,
    AgentSession,
    AgentSettled,
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    EventStreamLagged,
    FauxProvider,
    FauxReply,
    SessionEvent,
    open_session,
)
from trio_session.testing import EventRecorder

from .conftest import ERR_503, assert_idle, check_retry_events, err, hang, ok, retry_settings

CANCELLED = AutoRetryEnd(success=False, attempt=1, final_error="Retry cancelled")


def assert_error_kept(session: AgentSession) -> None:
    """The retried 503 stays in history and is gone from the runtime context."""

    def is_503(m: object) -> bool:
        return isinstance(m, AssistantMessage) and m.error_message == ERR_503

    assert any(is_503(m) for m in session.history)
    assert not any(is_503(m) for m in session.messages)


async def prompt_and_cancel_at(
    script: list[FauxReply],
    at: float,
    cancel: Callable[[AgentSession], Awaitable[None]],
) -> tuple[AgentSession, EventRecorder, FauxProvider, float]:
    """Run a prompt and call ``cancel(session)`` at virtual time ``at``."""
    provider = FauxProvider(script)
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        returned = -1.0

        async def prompt() -> None:
            nonlocal returned
            await session.prompt("Hi")
            returned = trio.current_time()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await trio.sleep_until(at)
            await cancel(session)
        assert_idle(session)
        assert check_retry_events(rec.events) == 1
        assert rec.types.count("auto_retry_end") == 1
        assert_error_kept(session)
    return session, rec, provider, returned


async def abort_retry(session: AgentSession) -> None:
    session.abort_retry()


async def abort(session: AgentSession) -> None:
    await session.abort()


CANCELLERS = pytest.mark.parametrize("cancel", [abort_retry, abort], ids=["abort_retry", "abort"])


@CANCELLERS
async def test_r21_r29_r30_cancel_during_sleep(
    autojump_clock: trio.testing.MockClock, cancel: Callable[[AgentSession], Awaitable[None]]
) -> None:
    """R-21, R-29, R-30: cancelled in the backoff sleep ⇒ "Retry cancelled" at once."""
    _, rec, provider, returned = await prompt_and_cancel_at([err(), ok()], 1.0, cancel)
    assert rec.of(AutoRetryEnd) == [CANCELLED]
    assert rec.times_of("auto_retry_end") == [1.0]
    assert (len(provider.requests), returned) == (1, 1.0)


@CANCELLERS
async def test_r31_cancel_during_reattempt_stream(
    autojump_clock: trio.testing.MockClock, cancel: Callable[[AgentSession], Awaitable[None]]
) -> None:
    """R-31, R-32: cancelling while the re-attempt streams aborts that request too."""
    session, rec, provider, returned = await prompt_and_cancel_at([err(), hang()], 3.0, cancel)
    assert rec.of(AutoRetryEnd) == [CANCELLED]
    assert provider.request_times == [0.0, 2.0]
    assert returned == 3.0
    last = session.history[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.text) == ("aborted", "partial")
    tail = rec.types[-5:]
    assert tail == ["message_end", "turn_end", "agent_end", "auto_retry_end", "agent_settled"]
    assert rec.of(AgentEnd)[-1].will_retry is False
    # abort_retry ends the chain, not the run by abort(): only abort() says aborted
    assert rec.of(AgentSettled) == [AgentSettled(aborted=cancel is abort)]


@CANCELLERS
@pytest.mark.parametrize("first", ["retry_now", "sleep_end"])
async def test_cancel_at_the_sleep_boundary(
    autojump_clock: trio.testing.MockClock,
    cancel: Callable[[AgentSession], Awaitable[None]],
    first: str,
) -> None:
    """R-29, R-31: cancel in the same tick the sleep ends: one end, nothing left."""

    async def boundary(session: AgentSession) -> None:
        if first == "retry_now":
            assert session.retry_now() is True
        await cancel(session)

    at = 1.0 if first == "retry_now" else 2.0
    _, rec, provider, returned = await prompt_and_cancel_at([err(), hang()], at, boundary)
    assert rec.of(AutoRetryEnd) == [CANCELLED]
    assert returned == at
    assert len(provider.requests) in (1, 2)


@pytest.mark.parametrize(
    ("deadline", "script"),
    [(1.0, [err(), ok("again")]), (3.0, [err(), hang(), ok("again")])],
    ids=["in-sleep", "in-reattempt"],
)
async def test_r33_callers_timeout_is_an_abort(
    autojump_clock: trio.testing.MockClock, deadline: float, script: list[FauxReply]
) -> None:
    """R-33: move_on_after around prompt() in the sleep or the re-attempt leaves nothing."""
    provider = FauxProvider(script)
    requests = len(script) - 1
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        with trio.move_on_after(deadline) as scope:
            await session.prompt("Hi")
        assert scope.cancelled_caught
        assert trio.current_time() == deadline
        assert_idle(session)
        assert_error_kept(session)
        assert rec.of(AutoRetryEnd) == [CANCELLED]
        assert len(provider.requests) == requests
        # and the session is usable again
        assert (await session.prompt("more")).text == "again"


async def test_r32_abort_returns_when_idle(autojump_clock: trio.testing.MockClock) -> None:
    """R-32: abort() returns only after the prompt has returned; idle abort is a no-op."""
    provider = FauxProvider([err(), ok()])
    order: list[str] = []
    async with open_session(provider) as session:
        await session.abort()  # nothing running

        async def prompt() -> None:
            await session.prompt("Hi")
            order.append("prompt returned")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await trio.sleep(1)
            await session.abort()
            order.append("abort returned")
            assert trio.current_time() == 1.0
    assert order == ["prompt returned", "abort returned"]


async def test_r32_abort_without_retry_aborts_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-32: abort() of a plain streaming run ends it aborted, with no retry events."""
    provider = FauxProvider([hang()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(5)
            await session.abort()
        assert_idle(session)
    assert not any(t.startswith("auto_retry") for t in rec.types)
    last = rec.of(AgentEnd)[-1].messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted"


async def test_r34_end_delivered_past_a_stalled_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-34: a subscriber that never reads cannot hold abort() up; it is dropped visibly."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        with session.events(buffer=3) as stalled:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.prompt, "Hi")
                await trio.sleep(1)
                await session.abort()
                assert trio.current_time() == 1.0
            received: list[SessionEvent] = []

            async def drain() -> None:
                async for event in stalled:
                    received.append(event)

            with pytest.raises(
                EventStreamLagged, match=r"^event stream fell behind and was disconnected$"
            ):
                await drain()
        assert received == rec.events[:3]
        assert rec.of(AutoRetryEnd) == [CANCELLED]


async def test_r34_event_stream_sees_the_cancelled_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-34, R-44: an events() reader gets the same events, the cancelled end included."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        streamed: list[SessionEvent] = []

        async def read() -> None:
            with session.events() as events:
                async for event in events:
                    streamed.append(event)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1)
            session.abort_retry()
            await trio.sleep(1)
            await session.aclose()  # ends the stream
    assert streamed == rec.events
    assert streamed[-2:] == [CANCELLED, AgentSettled(aborted=False)]


async def test_r34a_retry_now_skips_the_wait(autojump_clock: trio.testing.MockClock) -> None:
    """R-34a: retry_now() at t = 0.5 re-attempts at once; the chain goes on normally."""
    provider = FauxProvider([err(), err(), ok()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        assert session.retry_now() is False  # nothing to skip
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(0.5)
            assert session.retry_now() is True
        assert_idle(session)
    assert provider.request_times == [0.0, 0.5, 4.5]
    assert rec.of(AutoRetryEnd) == [AutoRetryEnd(True, 2)]


async def test_abort_retry_when_idle_is_harmless(autojump_clock: trio.testing.MockClock) -> None:
    """R-29: abort_retry() with no chain does nothing, before and after a prompt."""
    provider = FauxProvider([ok(), err(), ok()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        session.abort_retry()
        await session.prompt("Hi")
        session.abort_retry()
        await session.prompt("again")
        assert rec.of(AutoRetryEnd) == [AutoRetryEnd(True, 1)]


async def test_abort_retry_after_success_keeps_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-24: once the success end is out, abort_retry() no longer touches the run."""
    from trio_session import Tool, ToolCall

    async def slow(args: object) -> str:
        await trio.sleep(10)
        return "done"

    calls = (ToolCall(id="c1", name="slow", arguments={}),)
    provider = FauxProvider([err(), FauxReply(tool_calls=calls), ok("final")])
    async with open_session(provider, tools=[Tool(name="slow", execute=slow)]) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(5)  # the tool is running, the chain has ended
            assert not session.is_retrying
            session.abort_retry()
        assert session.history[-1].text == "final"
        assert trio.current_time() == 12.0


@pytest.mark.parametrize(
    ("script", "settings", "action"),
    [
        ([err(), ok()], retry_settings(enabled=False), None),
        ([err("404 model not found"), ok()], None, None),
        ([err("prompt is too long"), ok()], {"compaction": {"enabled": False}}, None),
        ([err(), err(), ok()], retry_settings(maxRetries=1), None),
        ([err(), ok()], None, "abort_retry"),
        ([err(), ok()], None, "abort"),
    ],
    ids=["disabled", "not-retryable", "overflow", "max-exceeded", "abort_retry", "abort"],
)
async def test_r49_stop_conditions(
    autojump_clock: trio.testing.MockClock,
    script: list[FauxReply],
    settings: dict[str, object] | None,
    action: str | None,
) -> None:
    """R-49: each stop condition ends the prompt with no automatic continuation."""
    provider = FauxProvider(script)
    async with open_session(provider, settings=settings) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1)
            if action == "abort_retry":
                session.abort_retry()
            elif action == "abort":
                await session.abort()
        assert_idle(session)
        last = session.history[-1]
        assert isinstance(last, AssistantMessage)
        assert last.stop_reason == "error"
    assert provider.remaining == 1


async def test_r45_final_failures_look_alike(autojump_clock: trio.testing.MockClock) -> None:
    """R-45: over-max and cancelled chains both end with success false and a finalError."""
    provider = FauxProvider([err(), err(), err(), ok()])
    async with open_session(provider, settings=retry_settings(maxRetries=1)) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("one")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "two")
            await trio.sleep(1)
            session.abort_retry()
    ends = rec.of(AutoRetryEnd)
    assert [(e.success, e.final_error) for e in ends] == [
        (False, ERR_503),
        (False, "Retry cancelled"),
    ]
    assert [e.attempt for e in rec.of(AutoRetryStart)] == [1, 1]


@pytest.mark.parametrize("how", ["move_on_after", "abort"])
async def test_aborted_session_is_freed_by_reference_counting(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """No reference cycle outlives an aborted prompt: with the garbage collector off, a
    closed session is gone as soon as the last reference to it is (see _core/groups.py)."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        async with open_session(FauxProvider([err(), ok()])) as session:
            if how == "move_on_after":
                with trio.move_on_after(1):
                    await session.prompt("Hi")
            else:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.prompt, "Hi")
                    await trio.sleep(1)
                    await session.abort()
            last = session.history[-1]
            assert isinstance(last, AssistantMessage)
            assert last.stop_reason == "error"
        ref = weakref.ref(session)
        del session
        assert ref() is None
    finally:
        gc.enable()
