"""Streaming in one call: ``async with session.stream(text) as reply: async for …``."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_session import (
    AgentEnd,
    AgentSession,
    AgentSettled,
    AutoRetryEnd,
    AutoRetryStart,
    FauxProvider,
    FauxReply,
    MessageStart,
    OpenAIProvider,
    OverloadedError,
    ReplyRestart,
    ReplyStream,
    SessionBusyError,
    SessionEvent,
    ToolCall,
    open_session,
    tool,
)

from .conftest import ERR_503, assert_idle, retry_settings
from .http_server import ScriptedServer, event_stream, respond, sse

DONE = "data: [DONE]\n\n"
CHUNKS = ("Hel", "lo, ", "wor", "ld!")


async def drain(reply: ReplyStream[str]) -> list[str]:
    """Iterate a stream to its end."""
    return [delta async for delta in reply]


async def drain_stream(session: AgentSession, text: str) -> list[str]:
    """Stream one prompt to its end."""
    async with session.stream(text) as reply:
        return await drain(reply)


def retrying_script() -> list[FauxReply]:
    """Two 503s, then an answer in four chunks."""
    return [
        FauxReply(error="503 Service Unavailable"),
        FauxReply(error="503 Service Unavailable"),
        FauxReply(text="".join(CHUNKS), chunks=CHUNKS, chunk_delay=0.5),
    ]


async def test_text_spans_the_retries_and_ends_when_prompt_would(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-35 through the stream: the text joins to the reply; the end comes at t = 2 + 4 +
    1.5, after ``auto_retry_end``; the session is idle then."""
    seen: list[SessionEvent] = []
    async with open_session(FauxProvider(retrying_script())) as session:
        session.subscribe(seen.append)
        pieces: list[tuple[float, str]] = []
        async with session.stream("hi") as reply:
            async for piece in reply:
                pieces.append((trio.current_time(), piece))
            ended = trio.current_time()
            assert reply.done
        # Plain iteration hands an attempt's text on once its message has ended well.
        assert pieces == [(7.5, "Hello, world!")]
        assert reply.reply.text == "Hello, world!"
        assert ended == 7.5
        assert [type(e) for e in seen if isinstance(e, AutoRetryStart | AutoRetryEnd)] == [
            AutoRetryStart,
            AutoRetryStart,
            AutoRetryEnd,
        ]
        # the prompt's last events, then nothing after the stream ended
        assert [type(e) for e in seen[-2:]] == [AgentEnd, AgentSettled]
        assert reply.text == "Hello, world!"
        assert_idle(session)


async def test_items_yield_the_text_live(autojump_clock: trio.testing.MockClock) -> None:
    """``items()`` yields each chunk as it arrives, at its time; no restart for attempts
    that failed before any text."""
    async with (
        open_session(FauxProvider(retrying_script())) as session,
        session.stream("hi") as reply,
    ):
        items = [(trio.current_time(), item) async for item in reply.items()]
    assert items == [(6.0, "Hel"), (6.5, "lo, "), (7.0, "wor"), (7.5, "ld!")]


def dropping_script() -> list[FauxReply]:
    """An answer that fails after "Hello wor", then the whole answer."""
    return [
        FauxReply(text="Hello wor", chunks=("Hello", " wor"), chunk_delay=0.5, error=ERR_503),
        FauxReply(text="Hello world!", chunks=("Hello", " world!"), chunk_delay=0.5),
    ]


async def test_items_mark_the_restart_after_a_mid_answer_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``items()`` yields the failed attempt's text live, then a ``ReplyRestart`` naming
    it, then the new attempt's text; plain iteration of the same prompt never yields
    the failed text."""
    async with (
        open_session(FauxProvider(dropping_script())) as session,
        session.stream("hi") as reply,
    ):
        items = [item async for item in reply.items()]
    assert items == [
        "Hello",
        " wor",
        ReplyRestart(discarded="Hello wor", reason="retry"),
        "Hello",
        " world!",
    ]
    assert reply.reply.text == "Hello world!"


async def test_a_slow_reader_gets_joined_text_and_no_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader that comes late (t = 100) finds one piece of text: the failed attempt's
    unread text was dropped, not marked, and the chunks were joined in the queue."""
    async with (
        open_session(FauxProvider(dropping_script())) as session,
        session.stream("hi") as reply,
    ):
        await trio.sleep(100)  # the slow reader: the prompt is over meanwhile
        assert reply.done
        items = [item async for item in reply.items()]
    assert items == ["Hello world!"]


async def test_a_given_up_reply_yields_its_partial_text(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """When the policy gives up, the last attempt's partial text is the reply, and plain
    iteration yields exactly that."""
    provider = FauxProvider([FauxReply(text="Hello wor", error=ERR_503)] * 2)
    async with (
        open_session(provider, settings=retry_settings(maxRetries=1)) as session,
        session.stream("hi") as reply,
    ):
        joined = "".join([piece async for piece in reply])
    assert reply.reply.stop_reason == "error"
    assert joined == reply.reply.text == "Hello wor"


async def test_items_refuse_an_event_stream() -> None:
    """``items()`` on an ``events=True`` stream says why it cannot."""
    async with (
        open_session(FauxProvider([FauxReply(text="ok")])) as session,
        session.stream("hi", events=True) as reply,
    ):
        with pytest.raises(
            RuntimeError,
            match=r"^items\(\) needs a text stream; this one was opened with events=True$",
        ):
            reply.items()
        _ = [event async for event in reply]


async def test_events_mode_yields_every_event_of_the_prompt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``events=True``: the same events a subscriber sees, the retry ones included."""
    async with open_session(FauxProvider(retrying_script())) as session:
        seen: list[SessionEvent] = []
        session.subscribe(seen.append)
        async with session.stream("hi", events=True) as reply:
            streamed = [event async for event in reply]
    assert streamed == seen
    assert sum(isinstance(e, MessageStart) for e in streamed) == 4  # user + three attempts
    assert streamed[-2:] == [seen[-2], AgentSettled(aborted=False)]
    assert isinstance(streamed[-2], AgentEnd)


async def test_cancelling_the_callers_scope_leaves_nothing_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A deadline on the caller's scope ends the stream mid-answer; nothing runs after."""
    provider = FauxProvider([FauxReply(text="partial", hang=True), FauxReply(text="next")])
    async with open_session(provider) as session:
        got: list[str] = []
        with trio.move_on_after(10) as scope:
            async with session.stream("hi") as reply:
                async for item in reply.items():
                    assert isinstance(item, str)
                    got.append(item)
        assert scope.cancelled_caught
        assert trio.current_time() == 10.0
        assert got == ["partial"]
        assert_idle(session)
        assert (await session.prompt("again")).text == "next"  # usable again


async def test_leaving_the_block_early_aborts_the_prompt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``break`` out of the stream: the prompt is aborted and recorded as such."""
    provider = FauxProvider([FauxReply(text="partial", hang=True)])
    async with open_session(provider) as session:
        async with session.stream("hi") as reply:
            async for _ in reply.items():
                break
        assert session.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
        assert_idle(session)


async def test_cancelling_during_the_backoff_sleep(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelled in the middle of a 2 s backoff: it ends at once, no chain left."""
    async with open_session(FauxProvider(retrying_script())) as session:
        with trio.move_on_after(1):
            async with session.stream("hi") as reply:
                async for _ in reply:
                    pass
        assert trio.current_time() == 1.0
        assert_idle(session)


async def test_raise_on_error_raises_from_the_iteration(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With ``raise_on_error`` the final error comes out of ``async for``, typed."""
    provider = FauxProvider([FauxReply(error="503 Service Unavailable")] * 2)
    async with open_session(provider, settings=retry_settings(maxRetries=1)) as session:
        async with session.stream("hi", raise_on_error=True) as reply:
            with pytest.raises(OverloadedError):
                await drain(reply)
        with pytest.raises(RuntimeError, match="raised instead of replying"):
            _ = reply.reply


async def test_a_stream_while_a_prompt_runs_raises_busy() -> None:
    """R-36: a stream while another prompt runs raises ``SessionBusyError`` on entry, and
    leaves the running prompt alone."""
    provider = FauxProvider([FauxReply(text="slow", hang=True)])
    async with open_session(provider) as session, trio.open_nursery() as nursery:
        nursery.start_soon(session.prompt, "first")
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(SessionBusyError):
            await drain_stream(session, "second")
        assert session.is_running  # the first prompt was not touched
        await session.abort()


async def test_reply_before_the_end_is_an_error() -> None:
    """``reply`` before the prompt is over says to iterate first."""
    async with open_session(FauxProvider([FauxReply(text="ok")])) as session:
        async with session.stream("hi") as reply:
            with pytest.raises(RuntimeError, match="iterate the stream to its end first"):
                _ = reply.reply
            assert [d async for d in reply] == ["ok"]
        assert reply.reply.text == "ok"


def chunk(content: str | None = None, finish: str | None = None) -> str:
    delta = {} if content is None else {"content": content}
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


async def test_streaming_over_loopback_http_with_a_retry(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A real OpenAI-compatible server: a 503, then a streamed answer; the deltas are its
    chunks, joined they are the reply, and the stream ends after the retry ended."""
    server = ScriptedServer()
    await nursery.start(server.run)
    server.script(
        respond(503, {"error": {"message": "overloaded"}}),
        event_stream(
            [chunk("Str"), chunk("eam"), chunk("ed."), chunk(finish="stop"), "data: [DONE]\n\n"]
        ),
    )
    events: list[SessionEvent] = []
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test") as provider,
        open_session(provider, "gpt-test") as session,
    ):
        session.subscribe(events.append)
        async with session.stream("hi") as reply:
            deltas = [delta async for delta in reply]
            assert any(isinstance(e, AutoRetryEnd) and e.success for e in events)
    assert deltas == ["Streamed."]
    assert "".join(deltas) == reply.reply.text
    assert trio.current_time() == pytest.approx(2.0, abs=0.01)


async def test_a_reply_that_drops_mid_answer_joins_to_the_final_text(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A real server resets the stream after "Hello wor", the re-attempt answers: plain
    iteration joins to exactly the reply's text; ``items()`` shows the restart."""
    server = ScriptedServer()
    await nursery.start(server.run)
    dropped = event_stream([chunk("Hello"), chunk(" wor")], delay=0.5, after="reset")
    answer = event_stream([chunk("Hello"), chunk(" world!"), chunk(finish="stop"), DONE])
    server.script(dropped, answer, dropped, answer)
    async with (
        OpenAIProvider(base_url=f"{server.url}/v1", api_key="sk-test") as provider,
        open_session(provider, "gpt-test") as session,
    ):
        async with session.stream("hi") as reply:
            joined = "".join([piece async for piece in reply])
        async with session.stream("again") as again:
            items = [item async for item in again.items()]
    assert reply.reply.text == again.reply.text == "Hello world!"
    assert joined == "Hello world!"
    restart = ReplyRestart(discarded="Hello wor", reason="retry")
    cut = items.index(restart)
    assert all(isinstance(item, str) for item in items[:cut] + items[cut + 1 :])
    assert "".join(map(str, items[:cut])) == "Hello wor"
    assert "".join(map(str, items[cut + 1 :])) == "Hello world!"


@tool
def read_note(name: str) -> str:
    """Read a note.

    Args:
        name: the note's name.
    """
    return f"{name}: the answer is 42"


def tool_turn_script(*, fail_answer_once: bool = False) -> list[FauxReply]:
    """A tool turn with text ("Let me read it."), then the answer after the tool result
    (failing once mid-answer with a 503 first, when asked)."""
    call = ToolCall("1", "read_note", {"name": "todo"})
    answer = ("The note ", "says 42.")
    failed = [FauxReply(text="The no", chunks=("The no",), error=ERR_503)]
    return [
        FauxReply(
            text="Let me read it.",
            chunks=("Let me ", "read it."),
            chunk_delay=0.5,
            tool_calls=[call],
        ),
        *(failed if fail_answer_once else []),
        FauxReply(text="".join(answer), chunks=answer, chunk_delay=0.5),
    ]


async def test_a_reply_of_several_messages_reads_as_paragraphs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Plain iteration puts a blank line between the texts of two assistant messages of
    one reply (a tool turn, then the answer): "Let me read it.\\n\\nThe note says 42."."""
    async with open_session(FauxProvider(tool_turn_script()), tools=[read_note]) as session:
        pieces = await drain_stream(session, "what does my note say?")
    assert pieces == ["Let me read it.", "\n\nThe note says 42."]


async def test_items_put_the_separator_before_the_next_messages_text_and_restart_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``items()`` yields the separator with the next message's first text; when that
    attempt fails, its ``ReplyRestart`` takes the separator back with it and the
    re-attempt brings it again, so what a reader shows joins as plain iteration does."""
    script = tool_turn_script(fail_answer_once=True)
    async with (
        open_session(FauxProvider(script), tools=[read_note]) as session,
        session.stream("what does my note say?") as reply,
    ):
        items = [item async for item in reply.items()]
    assert items == [
        "Let me ",
        "read it.",
        "\n\nThe no",
        ReplyRestart(discarded="\n\nThe no", reason="retry"),
        "\n\nThe note ",
        "says 42.",
    ]
    shown = ""
    for item in items:
        shown = shown[: -len(item.discarded)] if isinstance(item, ReplyRestart) else shown + item
    assert shown == "Let me read it.\n\nThe note says 42."
    assert reply.reply.text == "The note says 42."


async def test_a_message_without_text_adds_no_separator(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A tool turn with no text (only the call) puts nothing before the answer."""
    call = ToolCall("1", "read_note", {"name": "todo"})
    script = [FauxReply(tool_calls=[call]), FauxReply(text="The note says 42.")]
    async with open_session(FauxProvider(script), tools=[read_note]) as session:
        pieces = await drain_stream(session, "what does my note say?")
    assert pieces == ["The note says 42."]
