"""The overflow path (SPEC R-2, R-50): compaction instead of retry, then one continuation."""

from __future__ import annotations

from collections.abc import Sequence

import trio
import trio.testing

from trio_session import (
    AgentEnd,
    Ask,
    AssistantMessage,
    Compaction,
    CompactionEnd,
    CompactionResult,
    CompactionSettings,
    CompactionStart,
    DropOldestCompactor,
    FauxProvider,
    FauxReply,
    Message,
    Model,
    UserMessage,
    open_session,
)
from trio_session._core.messages import (
    CompactionSummaryMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
)
from trio_session.testing import EventRecorder

from .conftest import ERR_OVERFLOW, assert_idle, err, hang, ok

MODEL = Model(id="small", provider="faux", context_window=1000)


async def test_r50_overflow_compacts_and_continues_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-50: error dropped, compaction events, a smaller context sent, the answer arrives."""
    provider = FauxProvider([ok("a1"), ok("a2"), err(ERR_OVERFLOW), ok("a3")])
    async with open_session(provider, MODEL, compactor=DropOldestCompactor()) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q3")
        assert_idle(session)
        assert reply.text == "a3"
        assert [m.text for m in session.messages] == ["q3", "a3"]
    assert rec.types[rec.types.index("agent_end") :][:4] == [
        "agent_end",
        "compaction_start",
        "compaction_end",
        "agent_start",
    ]
    assert rec.of(CompactionStart) == [CompactionStart(reason="overflow")]
    (end,) = rec.of(CompactionEnd)
    assert (end.aborted, end.will_retry) == (False, True)
    assert end.result is not None
    assert end.result.messages_removed == 4
    assert rec.of(AgentEnd)[0].will_retry is True
    before, after = provider.requests[2], provider.requests[3]
    assert [m.text for m in before.messages] == ["q1", "a1", "q2", "a2", "q3"]
    assert [m.text for m in after.messages] == ["q3"]


async def test_r50_disabled_compaction_leaves_the_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-50: set_auto_compaction_enabled(False) ⇒ no compaction, the overflow stays."""
    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), ok("never")])
    async with open_session(provider, MODEL, compactor=DropOldestCompactor()) as session:
        session.set_auto_compaction_enabled(False)
        assert session.auto_compaction_enabled is False
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q2")
    assert reply.error_message == ERR_OVERFLOW
    assert not any("compaction" in t for t in rec.types)
    assert rec.of(AgentEnd)[-1].will_retry is False
    assert provider.remaining == 1


async def test_r50_second_overflow_ends_without_a_loop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-50: an overflow right after a compaction ends the prompt; no second compaction."""
    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), err(ERR_OVERFLOW), ok("never")])
    async with open_session(provider, MODEL, compactor=DropOldestCompactor()) as session:
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q2")
    assert reply.error_message == ERR_OVERFLOW
    assert rec.types.count("compaction_start") == 1
    assert [e.will_retry for e in rec.of(AgentEnd)] == [True, False]
    assert provider.remaining == 1


async def test_r50_nothing_to_drop(autojump_clock: trio.testing.MockClock) -> None:
    """R-50: a single oversized turn cannot shrink: compaction ends with no result."""
    provider = FauxProvider([err(ERR_OVERFLOW), ok("never")])
    async with open_session(provider, MODEL, compactor=DropOldestCompactor()) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("huge")
    assert rec.of(CompactionEnd) == [
        CompactionEnd(reason="overflow", result=None, aborted=False, will_retry=False)
    ]
    assert provider.remaining == 1


async def test_r50_abort_during_compaction_is_structural(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-50, R-32: abort() while the compactor runs cancels it; the end says aborted."""

    class SlowCompactor:
        async def compact(
            self,
            messages: Sequence[Message],
            *,
            model: Model,
            settings: CompactionSettings,
            ask: Ask,
        ) -> Compaction | None:
            await trio.sleep(100)
            raise AssertionError("not reached")

    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), ok("never")])
    async with open_session(provider, MODEL, compactor=SlowCompactor()) as session:
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "q2")
            await trio.sleep(5)
            await session.abort()
        assert_idle(session)
    assert rec.of(CompactionEnd) == [
        CompactionEnd(reason="overflow", result=None, aborted=True, will_retry=False)
    ]
    assert rec.times_of("compaction_end") == [5.0]


async def test_r50_replaceable_compactor(autojump_clock: trio.testing.MockClock) -> None:
    """R-50: the application's compactor replaces the default, and its context is sent."""

    class Summarise:
        async def compact(
            self,
            messages: Sequence[Message],
            *,
            model: Model,
            settings: CompactionSettings,
            ask: Ask,
        ) -> Compaction | None:
            summary = UserMessage("summary of earlier talk")
            result = CompactionResult("summarised", 100, 10, len(messages) - 1)
            return Compaction(messages=(summary, messages[-1]), result=result)

    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), ok("a2")])
    async with open_session(provider, MODEL, compactor=Summarise()) as session:
        await session.prompt("q1")
        await session.prompt("q2")
    assert [m.text for m in provider.requests[-1].messages] == ["summary of earlier talk", "q2"]


async def test_r1_overflow_during_abort_is_not_compacted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-49: an aborted run is neither retried nor compacted."""
    provider = FauxProvider([hang()])
    async with open_session(provider, MODEL, compactor=DropOldestCompactor()) as session:
        rec = EventRecorder.attach(session)
        with trio.move_on_after(1):
            await session.prompt("q")
    assert not any("compaction" in t or "retry" in t for t in rec.types)


async def test_drop_oldest_compactor_keeps_recent_turns() -> None:
    """R-50: the default compactor drops whole turns, oldest first, down to the target."""
    messages: list[Message] = []
    for i in range(6):
        messages += [UserMessage(f"q{i} " + "x" * 400), AssistantMessage()]
    compaction = await DropOldestCompactor().compact(
        messages, model=MODEL, settings=CompactionSettings(keep_recent_turns=2)
    )
    assert compaction is not None
    kept = compaction.messages
    # 6 turns of 101 estimated tokens: drop to half (303), keeping whole turns
    assert [m.text[:2] for m in kept if isinstance(m, UserMessage)] == ["q3", "q4", "q5"]
    assert compaction.result.messages_removed == 6
    assert (compaction.result.tokens_before, compaction.result.tokens_after) == (606, 303)
    assert compaction.result.tokens_after < compaction.result.tokens_before


async def test_silent_overflow_with_faux_usage(autojump_clock: trio.testing.MockClock) -> None:
    """R-7(b): the faux provider's usage numbers drive silent-overflow detection."""
    from trio_session import Usage

    provider = FauxProvider([ok("a1"), FauxReply(text="a2", usage=Usage(input=999))])
    async with open_session(provider, MODEL, compactor=DropOldestCompactor()) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("q1")
        await session.prompt("q2")
    assert rec.of(CompactionStart) == []  # 999 ≤ 1000: no overflow


async def test_r50_default_compactor_summarises_older_turns(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-50: the default asks the model for a summary and sends it with the recent turn."""
    from trio_session._agent.compactors import SUMMARY_REQUEST, SUMMARY_SYSTEM_PROMPT
    from trio_session._core.messages import CompactionSummaryMessage

    provider = FauxProvider(
        [ok("a1"), ok("a2"), err(ERR_OVERFLOW), ok("We talked about q1 and q2."), ok("a3")]
    )
    async with open_session(provider, MODEL) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q3")
    assert reply.text == "a3"
    summary_request = provider.requests[3]
    assert [m.text for m in summary_request.messages] == ["q1", "a1", "q2", "a2", SUMMARY_REQUEST]
    assert summary_request.system_prompt == SUMMARY_SYSTEM_PROMPT
    # the summary reaches the model as the reference sends a compaction summary
    summary_text = CompactionSummaryMessage("We talked about q1 and q2.").text
    assert [m.text for m in provider.requests[4].messages] == [summary_text, "q3"]
    assert isinstance(session.messages[0], CompactionSummaryMessage)
    (end,) = rec.of(CompactionEnd)
    assert end.result is not None
    assert (end.result.summary, end.result.messages_removed) == ("We talked about q1 and q2.", 4)
    assert not any(t == "message_update" for t in rec.types[:4])  # the summary is not streamed


async def test_r50_summary_failure_falls_back_to_dropping(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-50: when the summary request fails (here: it overflows too), old turns are dropped."""
    provider = FauxProvider([ok("a1"), ok("a2"), err(ERR_OVERFLOW), err(ERR_OVERFLOW), ok("a3")])
    async with open_session(provider, MODEL) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q3")
    assert reply.text == "a3"
    assert [m.text for m in provider.requests[4].messages] == ["q3"]
    (end,) = rec.of(CompactionEnd)
    assert end.result is not None
    assert end.result.summary.startswith("Dropped the 2 oldest turn(s)")


# -- pi's cut point (issue 12) ---------------------------------------------------------------


def _turns(*texts: str) -> list[Message]:
    """User/assistant pairs: ``("q1", "a1", "q2", "a2")``."""
    out: list[Message] = []
    for i, text in enumerate(texts):
        out.append(UserMessage(text) if i % 2 == 0 else AssistantMessage([TextContent(text)]))
    return out


def test_cut_point_keeps_about_keep_recent_tokens() -> None:
    """pi's findCutPoint: walking back, the cut is where the kept tokens reach the budget,
    moved forward past tool results; everything is kept when it all fits."""
    from trio_session._agent.compactors import cut_point

    messages = _turns("q" * 40, "a" * 40, "q" * 40, "a" * 40)  # 10 tokens each
    assert cut_point(messages, 20_000) == 0  # everything fits: all kept
    assert cut_point(messages, 20) == 2  # the last two messages
    assert cut_point(messages, 21) == 1  # reaching 21 needs a third message
    assert cut_point(messages, 1) == 3
    call = ToolCall("c1", "read", {"path": "x"})
    with_tool: list[Message] = [
        UserMessage("q" * 40),
        AssistantMessage([call], stop_reason="toolUse"),
        ToolResultMessage("c1", "read", (TextContent("r" * 40),)),
        AssistantMessage([TextContent("a" * 40)]),
    ]
    assert cut_point(with_tool, 15) == 3  # the tool result is not a place to start
    assert cut_point(with_tool, 22) == 1  # the tool call before it is one
    summary = CompactionSummaryMessage("earlier")
    assert cut_point([summary, *messages], 20_000) == 1  # a summary is summarised again
    assert cut_point([summary], 20_000) is None
    assert cut_point([], 20_000) is None


async def test_overflow_shrinks_even_when_everything_seems_to_fit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-50: on an overflow the estimate says it all fits (pi's rule would keep every
    message); the default compactor keeps the last keepRecentTurns turns instead."""
    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), ok("the summary"), ok("a2")])
    async with open_session(provider, MODEL) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        assert [m.text for m in session.messages[1:]] == ["q2", "a2"]
    assert [m.text for m in provider.requests[2].messages[:2]] == ["q1", "a1"]
