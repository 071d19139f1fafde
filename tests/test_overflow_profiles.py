"""The overflow path in both profiles (SPEC R-56, issue 28 items 5 and 6).

``retry.profile`` "seed" keeps pi 0.73.1's overflow path, with R-56's fix; "pi-1.6" is
pi 1.6.0's: nothing to compact means no compaction, a length-cut reply compacts and
retries, recovery is tried once, the summary request is retried with
``summarization_retry_*`` events, and failures leave later context through persisted
``context_edit`` entries (``entry_appended``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
import trio.testing

from trio_session import (
    AgentEnd,
    CompactionEnd,
    DropOldestCompactor,
    EntryAppended,
    FauxProvider,
    FauxReply,
    Model,
    SummarizationRetryAttemptStart,
    SummarizationRetryFinished,
    SummarizationRetryScheduled,
    Usage,
    message_to_json,
    open_session,
)
from trio_session._agent.compactors import (
    SUMMARY_REQUEST,
    TURN_PREFIX_REQUEST,
    Preparation,
    prepare,
)
from trio_session._core.codec import event_to_json
from trio_session._core.messages import (
    AssistantMessage,
    CompactionSummaryMessage,
    TextContent,
    UserMessage,
)
from trio_session._core.stats import estimate_tokens
from trio_session._retry.overflow import LENGTH_RECOVERY_FAILED, OVERFLOW_RECOVERY_FAILED
from trio_session.store._history import load_session
from trio_session.store._loaded import runtime_context
from trio_session.testing import EventRecorder

from .conftest import ERR_503, ERR_OVERFLOW, assert_idle, err, ok

MODEL = Model(id="small", provider="faux", context_window=1000, max_tokens=100)
PI16 = {"retry": {"profile": "pi-1.6"}}
#: pi-1.6 with a cut that leaves something to summarise in these small contexts (R-56a):
#: every short message is one token, so the cut falls on the last few.
PI16_CUT = {**PI16, "compaction": {"keepRecentTokens": 1}}
PI16_KEEP3 = {**PI16, "compaction": {"keepRecentTokens": 3}}


def cut(text: str = "partial") -> FauxReply:
    """A reply cut at its length limit below the model's max_tokens (pi's recoverable)."""
    return FauxReply(text=text, stop_reason="length", usage=Usage(output=40))


def ok_message(text: str) -> AssistantMessage:
    """A finished assistant message saying ``text``."""
    return AssistantMessage(content=(TextContent(text),), stop_reason="stop")


def after_first_agent_end(rec: EventRecorder) -> list[str]:
    """The event types from the first agent_end on, without streaming noise."""
    types = [t for t in rec.types if t not in ("message_update", "message_start", "turn_start")]
    return types[types.index("agent_end") :]


def file_entries(path: Path) -> list[dict[str, Any]]:
    """The session file's message and context_edit entries."""
    lines = path.read_text().splitlines()
    entries = [json.loads(line) for line in lines[1:]]
    return [e for e in entries if e["type"] in ("message", "context_edit")]


def resumed(path: Path) -> list[dict[str, Any]]:
    """The context a resume rebuilds from the file, as JSON."""
    return [message_to_json(m) for m in runtime_context(load_session(path))]


# -- R-56a: nothing old enough to compact -------------------------------------------------


async def test_r56a_nothing_to_compact_seed(autojump_clock: trio.testing.MockClock) -> None:
    """R-56, R-56a, R-56g (seed): a lone oversized prompt: agent_end says willRetry false
    (it said true with nothing continuing), the compaction events say nothing was
    compacted, the error leaves the context, nothing more is sent — no summary request,
    no re-send (pi 0.73.1 sends both: R-56g [beyond])."""
    provider = FauxProvider([err(ERR_OVERFLOW), ok("never")])
    async with open_session(provider, MODEL) as session:
        rec = EventRecorder.attach(session)
        reply = await session.prompt("huge")
        assert_idle(session)
        assert [m.text for m in session.messages] == ["huge"]
    assert reply.error_message == ERR_OVERFLOW
    assert after_first_agent_end(rec) == [
        "agent_end",
        "compaction_start",
        "compaction_end",
        "agent_settled",
    ]
    assert [e.will_retry for e in rec.of(AgentEnd)] == [False]
    assert rec.of(CompactionEnd) == [CompactionEnd("overflow", None, False, False)]
    assert rec.times_of("compaction_end") == [0.0]
    assert provider.remaining == 1


async def test_r56a_nothing_to_compact_pi16(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-56a, R-56e (pi-1.6): no compaction events at all; the error leaves the context
    through a context_edit entry (entry_appended); the run settles; a resume rebuilds
    the same context."""
    path = tmp_path / "s.jsonl"
    provider = FauxProvider([err(ERR_OVERFLOW), ok("never")])
    async with open_session(provider, MODEL, settings=PI16, history=path) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("huge")
        live = [message_to_json(m) for m in session.messages]
    assert after_first_agent_end(rec) == ["agent_end", "entry_appended", "agent_settled"]
    assert [e.will_retry for e in rec.of(AgentEnd)] == [False]
    entries = file_entries(path)
    (edit,) = rec.of(EntryAppended)
    assert edit.entry == entries[-1]
    assert list(edit.entry) == ["type", "id", "parentId", "timestamp", "targetId", "replacement"]
    assert (edit.entry["type"], edit.entry["replacement"]) == ("context_edit", None)
    assert edit.entry["targetId"] == entries[-2]["id"]  # the overflow error's entry
    assert entries[-2]["message"]["errorMessage"] == ERR_OVERFLOW
    assert edit.entry["parentId"] == entries[-2]["id"]
    assert [m["content"][0]["text"] for m in live] == ["huge"]
    assert resumed(path) == live
    assert provider.remaining == 1


# -- R-50 with something to compact, both profiles ----------------------------------------


async def test_r50_overflow_compacts_and_continues_pi16(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-50, R-56e (pi-1.6): the error's context_edit comes between agent_end (willRetry
    true) and compaction_start; the run continues once; the file resumes to the same
    context."""
    path = tmp_path / "s.jsonl"
    provider = FauxProvider([ok("a1"), ok("a2"), err(ERR_OVERFLOW), ok("the summary"), ok("a3")])
    async with open_session(provider, MODEL, settings=PI16_KEEP3, history=path) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q3")
        live = [message_to_json(m) for m in session.messages]
    assert reply.text == "a3"
    assert after_first_agent_end(rec) == [
        "agent_end",
        "entry_appended",
        "compaction_start",
        "compaction_end",
        "agent_start",
        "message_end",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    assert [e.will_retry for e in rec.of(AgentEnd)] == [True, False]
    (end,) = rec.of(CompactionEnd)
    assert (end.aborted, end.will_retry, end.error_message) == (False, True, None)
    assert [m.text for m in provider.requests[4].messages][1:] == ["q2", "a2", "q3"]
    entries = file_entries(path)
    (edit,) = [e for e in entries if e["type"] == "context_edit"]
    assert edit["targetId"] == entries[entries.index(edit) - 1]["id"]  # the overflow error
    assert resumed(path) == live


async def test_r56c_second_overflow_says_recovery_failed_pi16(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-56c (pi-1.6): an overflow right after this prompt's compaction ends with pi
    1.6.0's compaction_end {willRetry: false, errorMessage}; no second compaction."""
    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), err(ERR_OVERFLOW), ok("never")])
    async with open_session(
        provider, MODEL, settings=PI16_CUT, compactor=DropOldestCompactor()
    ) as session:
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q2")
    assert reply.error_message == ERR_OVERFLOW
    assert rec.types.count("compaction_start") == 1
    assert [e.will_retry for e in rec.of(AgentEnd)] == [True, False]
    assert rec.of(CompactionEnd)[-1] == CompactionEnd(
        "overflow", None, False, False, OVERFLOW_RECOVERY_FAILED
    )
    assert rec.types[-2:] == ["compaction_end", "agent_settled"]
    assert provider.remaining == 1


async def test_r56a_one_good_turn_that_fits_is_not_compacted_pi16(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-56a (pi-1.6): one good turn, then an overflow, with the default keepRecentTokens:
    pi 1.6.0's cut keeps everything, so nothing is compacted: 2 requests, no compaction
    event, the error edited away, the context [user, assistant, user] (issue 41, row 1);
    the seed keeps its R-50 answer and compacts to the last turn."""
    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), ok("summary"), ok("never")])
    async with open_session(provider, MODEL, settings=PI16) as session:
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q2")
        assert [m.text for m in session.messages] == ["q1", "a1", "q2"]
    assert reply.error_message == ERR_OVERFLOW
    assert after_first_agent_end(rec) == ["agent_end", "agent_settled"]
    assert [e.will_retry for e in rec.of(AgentEnd)] == [False]
    assert len(provider.requests) == 2
    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), ok("summary"), ok("a2")])
    async with open_session(provider, MODEL) as session:
        await session.prompt("q1")
        reply = await session.prompt("q2")
    assert (reply.text, len(provider.requests)) == ("a2", 4)


async def test_r56h_split_turn_summarised_on_its_own_pi16(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-56h (pi-1.6): with keepRecentTokens 1 the overflowing turn is cut inside: the
    history and the turn's start are summarised by two requests, joined as pi joins
    them; the re-sent context is the summary alone; the result and the file's compaction
    entry carry pi 1.6.0's estimatedTokensAfter and usage (issue 41, row 2)."""
    path = tmp_path / "s.jsonl"
    history, turn = ok("history", usage=Usage(input=10, output=2)), ok("turn", usage=Usage(5, 1))
    script = [ok("a1"), err(ERR_OVERFLOW), history, turn, ok("a2")]
    provider = FauxProvider(script)
    async with open_session(provider, MODEL, settings=PI16_CUT, history=path) as session:
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q2")
        context = list(session.messages)
    summary = "history\n\n---\n\n**Turn Context (split turn):**\n\nturn"
    assert reply.text == "a2"
    assert [type(m).__name__ for m in context] == ["CompactionSummaryMessage", "AssistantMessage"]
    assert [m.text for m in context][1:] == ["a2"]
    sent = [[m.text for m in r.messages] for r in provider.requests]
    assert sent[2] == ["q1", "a1", SUMMARY_REQUEST]
    assert sent[3] == ["q2", TURN_PREFIX_REQUEST]
    assert len(sent) == 5
    assert len(sent[4]) == 1
    (end,) = rec.of(CompactionEnd)
    assert end.result is not None
    assert end.will_retry
    assert end.result.summary == summary
    assert end.result.estimated_tokens_after == estimate_tokens(context[0])
    assert end.result.usage is not None
    assert (end.result.usage.input, end.result.usage.output) == (15, 3)
    data = event_to_json(end)["result"]
    assert {"estimatedTokensAfter", "usage"} <= set(data)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    (entry,) = [e for e in lines if e["type"] == "compaction"]
    assert (entry["summary"], entry["usage"]) == (summary, data["usage"])


def test_r56h_prepare_cuts_as_pi_16() -> None:
    """R-56h: pi 1.6.0's cut of a context: at a user message nothing is split; inside a
    turn its start is the turn prefix; everything fitting leaves nothing to summarise."""
    q1, a1, q2, a2, q3 = (
        UserMessage("q1"),
        ok_message("a1"),
        UserMessage("q2"),
        ok_message("a2"),
        UserMessage("q3"),
    )
    context = (q1, a1, q2, a2, q3)
    assert prepare(context, 3) == Preparation((q1, a1), (), (q2, a2, q3))
    assert prepare(context, 2) == Preparation((q1, a1), (q2,), (a2, q3))
    assert prepare(context, 1) == Preparation((q1, a1, q2, a2), (), (q3,))
    assert prepare(context, 1, omitted=True) == Preparation((q1, a1, q2, a2), (q3,), ())
    assert prepare(context, 20_000) is None
    assert prepare((q1,), 20_000, omitted=True) is None


# -- R-56b: a reply cut at its length limit ------------------------------------------------


async def test_r56b_length_cut_compacts_and_retries_pi16(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-56b (pi-1.6): a reply cut below max_tokens leaves the context, the context is
    compacted and the turn is sent again once; the second answer is the reply."""
    provider = FauxProvider([ok("a1"), cut(), ok("a2")])
    async with open_session(
        provider, MODEL, settings=PI16_CUT, compactor=DropOldestCompactor()
    ) as session:
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q2")
        assert [m.text for m in session.messages] == ["q2", "a2"]
    assert reply.text == "a2"
    assert after_first_agent_end(rec) == [
        "agent_end",
        "compaction_start",
        "compaction_end",
        "agent_start",
        "message_end",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    assert [e.will_retry for e in rec.of(AgentEnd)] == [True, False]
    assert [m.text for m in provider.requests[2].messages] == ["q2"]


async def test_r56b_length_cut_twice_ends_pi16(autojump_clock: trio.testing.MockClock) -> None:
    """R-56b, R-56c (pi-1.6): a second length cut after the compaction is not compacted
    again: pi 1.6.0's "Truncated response recovery failed" ends the prompt."""
    provider = FauxProvider([ok("a1"), cut(), cut("again"), ok("never")])
    async with open_session(
        provider, MODEL, settings=PI16_CUT, compactor=DropOldestCompactor()
    ) as session:
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q2")
    assert reply.text == "again"
    assert rec.of(CompactionEnd)[-1] == CompactionEnd(
        "overflow", None, False, False, LENGTH_RECOVERY_FAILED
    )
    assert provider.remaining == 1


async def test_length_cut_is_an_answer_in_seed(autojump_clock: trio.testing.MockClock) -> None:
    """R-56b is pi-1.6's: under the seed a length-cut reply is the prompt's answer."""
    provider = FauxProvider([ok("a1"), cut(), ok("never")])
    async with open_session(provider, MODEL, compactor=DropOldestCompactor()) as session:
        await session.prompt("q1")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q2")
    assert reply.text == "partial"
    assert not any("compaction" in t for t in rec.types)
    assert [e.will_retry for e in rec.of(AgentEnd)] == [False]


# -- R-56d: a successful reply that overflowed -----------------------------------------------


async def test_r56d_silent_overflow_compacts_without_retry_both_profiles(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-56d (both): an answer whose usage is over the window is kept; the context is
    compacted for next time, nothing is sent again, agent_end says willRetry false."""
    for settings in (None, PI16_CUT):
        big = FauxReply(text="a2", usage=Usage(input=1001))
        provider = FauxProvider([ok("a1"), big, ok("never")])
        async with open_session(
            provider, MODEL, settings=settings, compactor=DropOldestCompactor()
        ) as session:
            await session.prompt("q1")
            rec = EventRecorder.attach(session)
            reply = await session.prompt("q2")
            assert [m.text for m in session.messages] == ["q2", "a2"]
        assert reply.text == "a2"
        assert after_first_agent_end(rec) == [
            "agent_end",
            "compaction_start",
            "compaction_end",
            "agent_settled",
        ]
        assert [e.will_retry for e in rec.of(AgentEnd)] == [False]
        (end,) = rec.of(CompactionEnd)
        assert (end.will_retry, end.result is not None) == (False, True)
        assert provider.remaining == 1


# -- R-56f: the summary request retried ----------------------------------------------------


async def test_r56f_summary_request_retried_pi16(autojump_clock: trio.testing.MockClock) -> None:
    """R-56f (pi-1.6): a 503 on the summary request is retried after 2 s with pi 1.6.0's
    three events, in order and at these virtual times; the summary then compacts."""
    provider = FauxProvider(
        [ok("a1"), ok("a2"), err(ERR_OVERFLOW), err(ERR_503), ok("the summary"), ok("a3")]
    )
    async with open_session(provider, MODEL, settings=PI16_KEEP3) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q3")
        assert isinstance(session.messages[0], CompactionSummaryMessage)
    assert reply.text == "a3"
    assert after_first_agent_end(rec)[:7] == [
        "agent_end",
        "compaction_start",
        "summarization_retry_scheduled",
        "summarization_retry_attempt_start",
        "summarization_retry_finished",
        "compaction_end",
        "agent_start",
    ]
    assert rec.of(SummarizationRetryScheduled) == [SummarizationRetryScheduled(1, 3, 2000, ERR_503)]
    assert rec.of(SummarizationRetryAttemptStart) == [
        SummarizationRetryAttemptStart("compaction", "overflow")
    ]
    assert rec.times_of("summarization_retry_scheduled") == [0.0]
    assert rec.times_of("summarization_retry_attempt_start") == [2.0]
    assert rec.times_of("summarization_retry_finished") == [2.0]
    (end,) = rec.of(CompactionEnd)
    assert end.result is not None
    assert end.result.summary == "the summary"
    assert provider.request_times[3:] == [0.0, 2.0, 2.0]


async def test_summary_failure_falls_back_in_seed(autojump_clock: trio.testing.MockClock) -> None:
    """R-56f is pi-1.6's: under the seed a 503 on the summary request is not retried;
    the compactor falls back to dropping the oldest turns, at once."""
    provider = FauxProvider([ok("a1"), ok("a2"), err(ERR_OVERFLOW), err(ERR_503), ok("a3")])
    async with open_session(provider, MODEL) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q3")
    assert reply.text == "a3"
    assert not any(t.startswith("summarization_retry") for t in rec.types)
    (end,) = rec.of(CompactionEnd)
    assert end.result is not None
    assert end.result.summary.startswith("Dropped the 2 oldest")
    assert provider.request_times[3:] == [0.0, 0.0]


async def test_r56f_abort_during_summary_backoff_pi16(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-56f, R-32 (pi-1.6): abort() in the summary retry's wait ends it at once: the
    retry's finished event, then compaction_end {aborted: true}; nothing more is sent."""
    provider = FauxProvider([ok("a1"), ok("a2"), err(ERR_OVERFLOW), err(ERR_503), ok("never")])
    async with open_session(provider, MODEL, settings=PI16_KEEP3) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "q3")
            await trio.sleep(1)
            await session.abort()
        assert_idle(session)
    assert after_first_agent_end(rec) == [
        "agent_end",
        "compaction_start",
        "summarization_retry_scheduled",
        "summarization_retry_finished",
        "compaction_end",
        "agent_settled",
    ]
    assert rec.of(SummarizationRetryFinished) == [SummarizationRetryFinished()]
    assert rec.times_of("summarization_retry_finished") == [1.0]
    assert rec.of(CompactionEnd) == [CompactionEnd("overflow", None, True, False)]
    assert provider.remaining == 1


# -- R-56e: retried failures leave later context through the file --------------------------


async def test_r56e_retried_503_written_as_context_edit_pi16(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-56e (pi-1.6): a retried 503 gets a context_edit right after auto_retry_start, as
    pi 1.6.0's _prepareRetry writes it; the resumed context equals the live one."""
    path = tmp_path / "s.jsonl"
    provider = FauxProvider([err(ERR_503), ok("a1")])
    async with open_session(provider, MODEL, settings=PI16, history=path) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("q1")
        live = [message_to_json(m) for m in session.messages]
    assert after_first_agent_end(rec)[:3] == ["agent_end", "auto_retry_start", "entry_appended"]
    assert rec.times_of("entry_appended") == [0.0]
    entries = file_entries(path)
    kinds = [e["type"] if e["type"] != "message" else e["message"]["role"] for e in entries]
    assert kinds == ["user", "assistant", "context_edit", "assistant"]
    assert entries[2]["targetId"] == entries[1]["id"]
    assert entries[2] == rec.of(EntryAppended)[0].entry
    assert resumed(path) == live


async def test_seed_writes_no_context_edit(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-56e is pi-1.6's: the seed drops a retried 503 in memory only (R-20), as before."""
    path = tmp_path / "s.jsonl"
    provider = FauxProvider([err(ERR_503), ok("a1")])
    async with open_session(provider, MODEL, history=path) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("q1")
        live = [message_to_json(m) for m in session.messages]
    assert "entry_appended" not in rec.types
    assert all(e["type"] == "message" for e in file_entries(path))
    assert resumed(path) == live
