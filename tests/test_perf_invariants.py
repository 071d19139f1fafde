"""What the speed work of issue 15 must not change (SPEC §3, §5, §6, §8).

The streaming builder, the abort path, the retry chain's scopes, the classifiers and
the codec are rewritten for speed. These tests pin what every rewrite keeps:

* the order of events (a grammar, checked event by event, for any script);
* exactly one ``auto_retry_end`` per chain, out before ``prompt()`` returns;
* an abort at any moment, by any of the four ways to cancel, leaves nothing running,
  keeps the cut answer's partial text, keeps the session file in step with the
  history, and the next prompt works;
* streaming snapshots that tell the message as it was at each update, read long after.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_session import (
    AgentEnd,
    AgentSession,
    AgentSettled,
    AgentStart,
    Ask,
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    Compaction,
    CompactionEnd,
    CompactionSettings,
    CompactionStart,
    DropOldestCompactor,
    FauxProvider,
    FauxReply,
    InMemoryCredentialStore,
    Message,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    Model,
    QueueUpdate,
    SessionEvent,
    TextContent,
    Tool,
    ToolCall,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolResultMessage,
    TurnEnd,
    TurnStart,
    UserMessage,
    event_to_json,
    message_to_json,
    open_session,
)
from trio_session.providers._base import ProviderRequest
from trio_session.store._history import load_session
from trio_session.testing import EventRecorder

from .conftest import ERR_503, ERR_OVERFLOW, assert_idle, err, ok, session_tasks
from .test_rpc_server import in_memory

MODEL = Model(id="m", provider="faux", context_window=8000)
RETRY_CANCELLED = AutoRetryEnd(success=False, attempt=1, final_error="Retry cancelled")

# -- the grammar of a prompt's events ---------------------------------------------------


@attrs.define(eq=False)
class Grammar:
    """Reads a session's events one by one and fails at the first one out of place.

    A prompt is a sequence of runs, retry chains and compactions::

        run        := agent_start turn+ agent_end
        turn       := turn_start message* (tool_execution_start tool_execution_end
                      message)* turn_end
        message    := message_start message_update* message_end
        chain      := auto_retry_start (run auto_retry_start)* … auto_retry_end
        prompt     := (run | chain | compaction)+ agent_settled

    with the couplings the session guarantees: ``agent_end {willRetry: true}`` is
    followed at once by ``auto_retry_start`` (or the chain's end, or
    ``compaction_start``); a successful ``auto_retry_end`` comes right after the
    answer's ``message_end``, inside its turn (R-23a); a failed one between runs; one
    end per chain; ``compaction_end {willRetry: true}`` is followed at once by the
    continuation's ``agent_start``; every ``text_delta`` snapshot is the text so far.
    """

    in_run: bool = False
    in_turn: bool = False
    message: Message | None = None
    deltas: list[str] = attrs.field(factory=list)
    updates: int = 0
    answer: AssistantMessage | None = None  # the turn's assistant message, once ended
    tool_open: str | None = None
    tool_result_due: bool = False
    starts: list[int] = attrs.field(factory=list)  # attempts of the open chain
    chain_open: bool = False
    compacting: str | None = None
    previous: SessionEvent | None = None
    ends: list[AutoRetryEnd] = attrs.field(factory=list)
    seen: int = 0
    settled: bool = False

    def feed_all(self, events: Sequence[SessionEvent]) -> Grammar:
        for event in events:
            self.feed(event)
        return self

    def feed(self, event: SessionEvent) -> None:
        if isinstance(event, QueueUpdate):  # steer() / follow_up() may come at any time
            return
        where = f"event {self.seen} ({event.type}) after {getattr(self.previous, 'type', None)}"
        self.seen += 1
        try:
            self._feed(event)
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from None
        self.previous = event

    def _feed(self, event: SessionEvent) -> None:
        prev = self.previous
        if self.settled:  # only the next prompt's run may follow
            assert isinstance(event, AgentStart), "an event after agent_settled"
            self.settled = False
        if isinstance(prev, AgentEnd) and prev.will_retry:
            assert isinstance(event, AutoRetryStart | AutoRetryEnd | CompactionStart)
        if isinstance(prev, CompactionEnd) and prev.will_retry:
            assert isinstance(event, AgentStart)
        if isinstance(event, AgentStart):
            assert not self.in_run
            assert self.compacting is None
            self.in_run = True
        elif isinstance(event, TurnStart):
            assert self.in_run
            assert not self.in_turn
            self.in_turn, self.answer = True, None
        elif isinstance(event, MessageStart):
            assert self.in_turn
            assert self.message is None
            assert self.tool_open is None
            self.message, self.deltas, self.updates = event.message, [], 0
        elif isinstance(event, MessageUpdate):
            assert isinstance(self.message, AssistantMessage), "update outside an answer"
            self._update(event)
        elif isinstance(event, MessageEnd):
            self._end_message(event.message)
        elif isinstance(event, ToolExecutionStart):
            assert self.in_turn
            assert self.message is None
            assert self.tool_open is None
            assert not self.tool_result_due
            assert self.answer is not None
            assert event.tool_call_id in [c.id for c in self.answer.tool_calls]
            self.tool_open = event.tool_call_id
        elif isinstance(event, ToolExecutionEnd):
            assert self.tool_open == event.tool_call_id
            self.tool_open, self.tool_result_due = None, True
        elif isinstance(event, TurnEnd):
            assert self.in_turn
            assert self.message is None
            assert self.tool_open is None
            assert not self.tool_result_due
            assert event.message == self.answer
            self.in_turn = False
        elif isinstance(event, AgentEnd):
            assert self.in_run
            assert not self.in_turn
            assert self.message is None
            self.in_run = False
        elif isinstance(event, AutoRetryStart):
            assert not self.in_run
            assert self.compacting is None
            assert isinstance(prev, AgentEnd)
            assert prev.will_retry
            assert event.attempt == len(self.starts) + 1
            self.starts.append(event.attempt)
            self.chain_open = True
        elif isinstance(event, AutoRetryEnd):
            self._end_chain(event, prev)
        elif isinstance(event, CompactionStart):
            assert not self.in_run
            assert self.compacting is None
            assert not self.chain_open
            assert isinstance(prev, AgentEnd | AutoRetryEnd)
            self.compacting = event.reason
        elif isinstance(event, CompactionEnd):
            assert self.compacting == event.reason
            self.compacting = None
        elif isinstance(event, AgentSettled):  # once, when nothing follows
            self.assert_open_parts_closed()
            self.settled = True

    def _update(self, event: MessageUpdate) -> None:
        self.updates += 1
        ame = event.assistant_message_event
        assert ame["partial"] == event.message  # the partial is the event's message
        if ame["type"] == "text_delta":
            assert event.delta == ame["delta"] != ""
            self.deltas.append(ame["delta"])
            assert event.message.text == "".join(self.deltas)  # the snapshot, read late
        else:
            assert event.delta == ""

    def _end_message(self, message: Message) -> None:
        assert self.message is not None
        assert self.message.role == message.role
        if isinstance(message, AssistantMessage):
            if self.updates:
                assert message.text == "".join(self.deltas)
            else:  # nothing streamed: message_start already told the finished message
                assert message == self.message
            self.answer = message
        if isinstance(message, ToolResultMessage):
            assert self.tool_result_due
            self.tool_result_due = False
        self.message = None

    def _end_chain(self, event: AutoRetryEnd, prev: SessionEvent | None) -> None:
        assert self.message is None
        assert self.compacting is None
        if event.success:  # R-23a: after the good answer's message_end, before turn_end
            assert self.chain_open
            assert self.in_turn
            assert isinstance(prev, MessageEnd)
            assert isinstance(prev.message, AssistantMessage)
            assert not prev.message.failed
            assert event.attempt == self.starts[-1]
        else:
            assert not self.in_run
            assert event.final_error
            if self.chain_open:  # cancelled, over the maximum, or not retryable
                assert event.attempt == self.starts[-1]
            else:  # a chain that ended before its first start (maxRetries 0)
                assert isinstance(prev, AgentEnd)
        self.ends.append(event)
        self.chain_open, self.starts = False, []

    def assert_closed(self) -> None:
        """Nothing is open, and the prompt settled: the state a returned ``prompt()`` leaves."""
        self.assert_open_parts_closed()
        assert self.settled, "no agent_settled"

    def assert_open_parts_closed(self) -> None:
        """No run, turn, message, tool call, chain or compaction is open."""
        assert not self.in_run
        assert not self.in_turn
        assert self.message is None
        assert self.tool_open is None
        assert not self.tool_result_due
        assert not self.chain_open, "a retry chain never ended"
        assert self.compacting is None


def check_prompt(events: Sequence[SessionEvent]) -> Grammar:
    """The events of one prompt, start to return, follow the grammar and close it."""
    grammar = Grammar().feed_all(events)
    grammar.assert_closed()
    told = [e for e in events if not isinstance(e, QueueUpdate)]  # queued any time
    if told:
        assert isinstance(told[0], AgentStart)
    return grammar


# -- scripts ----------------------------------------------------------------------------


async def _slow_tool(args: Mapping[str, Any]) -> str:
    await trio.sleep(3)
    return "done"


async def _very_slow_tool(args: Mapping[str, Any]) -> str:
    await trio.sleep(10)
    return "done"


TOOLS = [Tool(name="slow", execute=_slow_tool), Tool(name="very_slow", execute=_very_slow_tool)]
CHUNKS = ("a", "b", "c", "d")

PALETTE: dict[str, FauxReply] = {
    "ok": ok("fine"),
    "chunks": FauxReply(text="abcd", chunks=CHUNKS, chunk_delay=0.5),
    "503": err(),
    "429": err("429 Too Many Requests\nretry-after: 3"),
    "400": err("400 Bad Request: invalid request"),
    "overflow": err("400 prompt is too long: 9000 tokens > 8000 maximum"),
    "partial-503": FauxReply(text="ab", chunks=("a", "b"), chunk_delay=0.5, error=ERR_503),
    "slow-503": err(delay=2.5),
    "slow-ok": ok("slowly", delay=1.5),  # also a slow compaction summary
    "usage": err("429 usage_limit_reached: usage limit hit\nretry-after: 30"),
    "hang": FauxReply(text="partial", hang=True),
    "tool": FauxReply(tool_calls=(ToolCall(id="t1", name="slow", arguments={"x": 1}),)),
    "tool+text": FauxReply(
        text="let me", chunks=("let", " me"), tool_calls=(ToolCall(id="t2", name="slow"),)
    ),
}
NEXT = ok("next")


@attrs.frozen
class SlowCompactor:
    """Takes 2 s, then drops the oldest turns: a compaction there is time to cut."""

    async def compact(
        self,
        messages: Sequence[Message],
        *,
        model: Model,
        settings: CompactionSettings,
        ask: Ask,
    ) -> Compaction | None:
        await trio.sleep(2)
        return await DropOldestCompactor().compact(messages, model=model, settings=settings)


@attrs.define(eq=False)
class Script:
    """A faux script that can be switched to answer ``next`` to everything (the
    prompt after an abort must work, whatever of the script was not used)."""

    replies: deque[FauxReply]
    done: bool = False

    def __call__(self, request: ProviderRequest) -> FauxReply:
        if self.done or not self.replies:
            return NEXT
        return self.replies.popleft()

    def provider(self) -> FauxProvider:
        return FauxProvider([self] * 64)


# -- 1. the grammar for any script, any cancellation ------------------------------------


@attrs.frozen
class Case:
    script: tuple[str, ...]
    actions: tuple[tuple[float, str], ...]
    prompts: int
    stream: bool
    max_retries: int
    slow_compactor: bool


cases = st.builds(
    Case,
    script=st.lists(st.sampled_from(sorted(PALETTE)), min_size=1, max_size=8).map(tuple),
    actions=st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.5, 6.0, 9.0, 14.0]),
            st.sampled_from(
                ["abort", "abort_retry", "retry_now", "cancel", "steer", "follow_up", "join"]
            ),
        ),
        max_size=4,
    ).map(tuple),
    prompts=st.integers(min_value=1, max_value=2),
    stream=st.booleans(),
    max_retries=st.integers(min_value=0, max_value=3),
    slow_compactor=st.booleans(),
)


async def play(case: Case) -> None:
    script = Script(deque(PALETTE[name] for name in case.script))
    log: list[SessionEvent] = []
    settings = {"retry": {"maxRetries": case.max_retries}}
    keys = {"faux": ["k1", "k2"]}  # a usage limit rotates to the spare key: no wait
    store = InMemoryCredentialStore(keys=keys, clock=trio.current_time)
    compactor = SlowCompactor() if case.slow_compactor else None  # or the default one
    async with open_session(
        script.provider(),
        MODEL,
        tools=TOOLS,
        settings=settings,
        credentials=store,
        compactor=compactor,
    ) as session:
        session.subscribe(log.append)
        scopes: list[trio.CancelScope] = []  # what "cancel" cancels: the caller's / the block
        queued: list[str] = []  # texts steered, queued as follow-ups, or joined to a retry

        wrong: list[str] = []  # a subscriber's exception is only logged: collect instead

        def state_as_told(event: SessionEvent) -> None:
            """R-9, R-10, R-37: the state a subscriber (get_state, the UI) reads at an event."""
            if isinstance(event, QueueUpdate):
                return
            state = (session.is_running, session.is_retrying, session.retry_attempt)
            if isinstance(event, AutoRetryStart):
                expected = (True, True, event.attempt)
            elif isinstance(event, AutoRetryEnd):
                expected = (True, False, 0)
            elif isinstance(event, AgentSettled):  # told once the session is idle
                expected = (False, False, 0)
            else:
                expected = (True, session.retry_attempt > 0, session.retry_attempt)
            if state != expected:
                wrong.append(f"{event.type}: {state} (running, retrying, attempt)")

        session.subscribe(state_as_told)

        async def act() -> None:
            # an abort every 500 s after the actions ends each prompt that hangs
            for at, what in [*sorted(case.actions), *((500.0 * n, "abort") for n in (1, 2, 3))]:
                await trio.sleep_until(at)
                if what == "abort":
                    await session.abort()
                elif what == "abort_retry":
                    session.abort_retry()
                elif what == "retry_now":
                    session.retry_now()
                elif what == "steer":
                    session.steer(text := f"steer {len(queued)}")
                    queued.append(text)
                elif what == "follow_up":
                    session.follow_up(text := f"follow-up {len(queued)}")
                    queued.append(text)
                elif what == "join":
                    if session.join_retry(text := f"joined {len(queued)}"):
                        queued.append(text)
                elif scopes:
                    scopes[-1].cancel()

        with trio.fail_after(10_000):  # virtual seconds
            async with trio.open_nursery() as nursery:
                nursery.start_soon(act)
                for i in range(case.prompts):
                    first = len(log)
                    with trio.CancelScope() as caller:
                        if case.stream:
                            async with session.stream(f"prompt {i}") as reply:
                                with trio.CancelScope() as block:
                                    scopes.append(block)
                                    async for _ in reply:
                                        pass
                        else:
                            scopes.append(caller)
                            await session.prompt(f"prompt {i}")
                    scopes.clear()
                    # the chain's end (and everything else) is out before the return
                    check_prompt(log[first:])
                    assert_idle(session)
                nursery.cancel_scope.cancel()
            script.done = True
            first = len(log)
            assert (await session.prompt("after")).text == "next"
            check_prompt(log[first:])
            assert_idle(session)
        assert wrong == []
        # R-36a: no queued message is lost, whatever was cut: each was sent exactly once
        # (the prompt after delivers what was still queued)
        assert session.pending_message_count == 0
        users = [m.text for m in session.history if isinstance(m, UserMessage)]
        assert [users.count(text) for text in queued] == [1] * len(queued)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases)
def test_event_grammar_for_any_script_and_cancellation(case: Case) -> None:
    """R-10, R-23a, R-35, R-36a, R-43, R-45a, R-50: for any script of 503 / 429 / 400 /
    overflow errors, usage limits, chunked, partial, slow and hanging replies and tool
    calls, cut by abort(), abort_retry(), retry_now(), the caller's scope or leaving a
    stream() block at any time, with messages steered, queued and joined to a retry:
    each prompt's events follow the grammar, one auto_retry_end per chain, all before
    prompt() returns; nothing is left running; the next prompt works and no queued
    message is lost."""
    trio.run(play, case, clock=trio.testing.MockClock(autojump_threshold=0))


# -- 2. abort at any moment, by each way of cancelling ------------------------------------


@attrs.define(eq=False)
class Watch:
    """Records events; ``await watch.nth(kind, n)`` returns once the n-th event of
    ``kind`` (counted from the start of the session) has been emitted."""

    events: list[SessionEvent] = attrs.field(factory=list)
    _waiting: list[tuple[Callable[[], bool], trio.Event]] = attrs.field(factory=list)

    def __call__(self, event: SessionEvent) -> None:
        self.events.append(event)
        for ready, woken in self._waiting:
            if ready():
                woken.set()

    def count(self, kind: str) -> int:
        if kind == "text_delta":
            return sum(
                1
                for e in self.events
                if isinstance(e, MessageUpdate) and e.assistant_message_event["type"] == kind
            )
        return sum(1 for e in self.events if e.type == kind)

    async def nth(self, kind: str, n: int = 1) -> None:
        woken = trio.Event()
        self._waiting.append((lambda: self.count(kind) >= n, woken))
        if self.count(kind) >= n:
            return
        await woken.wait()


@attrs.frozen
class Moment:
    """A moment to cut a prompt at: after the n-th ``event`` plus ``wait`` seconds."""

    replies: tuple[FauxReply, ...]
    event: str
    n: int
    wait: float
    at: float  # the virtual time of the cut
    chain: bool  # a retry chain is alive at the cut
    partial: str | None  # the cut answer's text, when a stream is cut
    natural: str  # the reply's text when nothing is cut (abort_retry outside a chain)
    warm_up: bool = False  # one prompt first (compaction needs something to compact)


SLOW_TOOL_CALL = FauxReply(tool_calls=(ToolCall(id="v1", name="very_slow"),))
MOMENTS = {
    "before-first-chunk": Moment(
        (FauxReply(text="abcd", chunks=CHUNKS, delay=2, chunk_delay=1),),
        "message_end",  # the user's message; the request waits 2 s for its first chunk
        1,
        1.0,
        1.0,
        chain=False,
        partial="",
        natural="abcd",
    ),
    "mid-stream": Moment(
        (FauxReply(text="abcd", chunks=CHUNKS, chunk_delay=1),),
        "text_delta",
        2,
        0.0,
        1.0,
        chain=False,
        partial="ab",
        natural="abcd",
    ),
    "in-backoff": Moment(
        (err(), ok("x")), "auto_retry_start", 1, 1.5, 1.5, chain=True, partial=None, natural=""
    ),
    "in-reattempt": Moment(
        (err(), FauxReply(text="abcd", chunks=CHUNKS, chunk_delay=1)),
        "text_delta",
        3,
        0.0,
        4.0,
        chain=True,
        partial="abc",
        natural="",
    ),
    "in-compaction": Moment(
        (err(ERR_OVERFLOW), FauxReply(text="the summary", delay=5), ok("after compaction")),
        "compaction_start",
        1,
        1.0,
        1.0,
        chain=False,
        partial=None,
        natural="after compaction",
        warm_up=True,
    ),
    "in-tool-call": Moment(
        (SLOW_TOOL_CALL, ok("tool done")),
        "tool_execution_start",
        1,
        1.0,
        1.0,
        chain=False,
        partial=None,
        natural="tool done",
    ),
    "after-retry-end": Moment(
        (err(), SLOW_TOOL_CALL, ok("tool done")),
        "auto_retry_end",
        1,
        0.0,
        2.0,
        chain=False,
        partial=None,
        natural="tool done",
    ),
}

HOWS = ("abort", "abort_retry", "caller", "stream")


def same_messages(a: Sequence[Message], b: Sequence[Message]) -> None:
    assert [message_to_json(m) for m in a] == [message_to_json(m) for m in b]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("moment", sorted(MOMENTS))
async def test_cut_at_any_moment(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, moment: str, how: str
) -> None:
    """R-29–R-33, R-35, R-50, R-51: cut before the first chunk, mid-stream, in the backoff,
    during the re-attempt, the compaction or a tool call, or just after auto_retry_end,
    by abort(), abort_retry(), the caller's scope or leaving a stream() block: at the
    exact virtual time, prompt() returned (abort, abort_retry) or raised Cancelled into
    the caller's scope; the session is idle; the cut answer is aborted with its partial
    text; one end per chain; the session file holds the history in order; the next
    prompt works. abort_retry() outside a chain changes nothing."""
    m = MOMENTS[moment]
    script = Script(deque(m.replies))
    path = tmp_path / "s.jsonl"
    watch = Watch()
    async with open_session(script.provider(), MODEL, tools=TOOLS, history=path) as session:
        if m.warm_up:
            script.replies.appendleft(ok("a0"))
            await session.prompt("q0")
        start = trio.current_time()
        session.subscribe(watch)
        scope = trio.CancelScope()
        cut: list[trio.CancelScope] = []  # the stream() block's inner scope
        result: list[AssistantMessage] = []
        returned = -1.0

        async def run() -> None:
            nonlocal returned
            with scope:
                if how == "stream":
                    async with session.stream("q1") as reply:
                        with trio.CancelScope() as block:
                            cut.append(block)
                            async for _ in reply:
                                pass
                    if reply.done and not block.cancelled_caught:
                        result.append(reply.reply)
                else:
                    result.append(await session.prompt("q1"))
            returned = trio.current_time()

        async def cutter() -> None:
            await watch.nth(m.event, m.n)
            await trio.sleep(m.wait)
            assert trio.current_time() == start + m.at
            if how == "abort":
                await session.abort()
                assert trio.current_time() == start + m.at  # abort() returns when idle
                assert not session.is_running
            elif how == "abort_retry":
                session.abort_retry()
            elif how == "caller":
                scope.cancel()
            else:
                cut[0].cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            nursery.start_soon(cutter)
        assert_idle(session)
        grammar = check_prompt(watch.events)

        changes_nothing = how == "abort_retry" and not m.chain
        if changes_nothing:
            assert [r.text for r in result] == [m.natural]
            assert result[0].stop_reason == "stop"
        else:
            assert returned == start + m.at
            if how in ("abort", "abort_retry"):
                assert len(result) == 1  # returned, not raised
                assert result[0] is session.history[-1] or isinstance(
                    session.history[-1], ToolResultMessage
                )
            else:
                assert result == []
            assert scope.cancelled_caught is (how == "caller")
        # one end per chain: the one of the chain that was alive, or none
        if m.chain:
            assert grammar.ends == [RETRY_CANCELLED]
        elif moment == "after-retry-end":
            assert grammar.ends == [AutoRetryEnd(success=True, attempt=1)]
        else:
            assert grammar.ends == []
        if not changes_nothing:
            last = session.history[-1]
            if m.partial is not None:
                assert isinstance(last, AssistantMessage)
                assert (last.stop_reason, last.text) == ("aborted", m.partial)
            elif moment in ("in-tool-call", "after-retry-end"):
                assert isinstance(last, ToolResultMessage)
                assert (last.text, last.is_error) == ("tool call aborted", True)
            else:  # in the backoff or the compaction: the error stays in history
                assert isinstance(last, AssistantMessage)
                assert last.stop_reason == "error"
            if moment == "in-compaction":
                assert watch.events[-2] == CompactionEnd(
                    "overflow", result=None, aborted=True, will_retry=False
                )
        # the prompt settled last; aborted unless only the chain was cancelled
        assert watch.events[-1] == AgentSettled(aborted=how != "abort_retry")
        # the file holds every message of the history, in order
        same_messages(load_session(path).branch_messages, session.history)

        # the next prompt works, and is on disk too
        script.done = True
        first = len(watch.events)
        assert (await session.prompt("again")).text == "next"
        check_prompt(watch.events[first:])
        assert_idle(session)
    same_messages(load_session(path).branch_messages, session.history)
    assert session.history[-1].text == "next"


#: Two chains in one prompt: a 503 cut mid-answer, a re-attempt that calls a tool (the
#: chain succeeds at its message_end), a 503 on the next turn (a fresh chain), a
#: chunked answer.
TWO_CHAINS = (
    FauxReply(text="ab", chunks=("a", "b"), chunk_delay=0.5, error=ERR_503),
    FauxReply(text="let me", chunks=("let", " me"), tool_calls=(ToolCall(id="t2", name="slow"),)),
    err(),
    FauxReply(text="abcd", chunks=CHUNKS, chunk_delay=0.5),
)


#: Short prompts whose end comes soon after the cut: a chain given up at once (maxRetries
#: 0), a chain over its maximum, an overflow, a plain error, a plain answer.
SHORT = {
    "give-up": ((err("429 Too Many Requests\nretry-after: 3"),), 0),
    "over-max": ((err(), err()), 1),
    "overflow": ((err(ERR_OVERFLOW),), 3),
    "not-retryable": ((err("400 Bad Request: invalid request"),), 3),
    "answer": ((FauxReply(text="abcd", chunks=CHUNKS, chunk_delay=0.5),), 3),
}


async def cut_at_event(
    index: int | None,
    how: str,
    path: Path | None,
    replies: Sequence[FauxReply] = TWO_CHAINS,
    max_retries: int = 3,
) -> list[SessionEvent]:
    """Prompt ``replies`` and cut it from inside the subscriber that sees event
    ``index`` (``None``: never); return the prompt's events.

    Without a session file the prompt must end within 1000 virtual seconds (with
    one, its flushes run in worker threads while the virtual clock may jump: no
    deadline then)."""
    script = Script(deque(replies))
    provider = script.provider()
    events: list[SessionEvent] = []
    requests_at_cut = -1
    settings = {"retry": {"maxRetries": max_retries}}
    async with open_session(
        provider, MODEL, tools=TOOLS, history=path, settings=settings
    ) as session:
        scopes: list[trio.CancelScope] = []
        aborts: list[trio.Nursery] = []

        def on_event(event: SessionEvent) -> None:
            nonlocal requests_at_cut
            events.append(event)
            if len(events) - 1 != index:
                return
            requests_at_cut = len(provider.requests)
            if how == "abort":  # the next thing that runs at this virtual time
                aborts[0].start_soon(session.abort)
            elif how == "abort_retry":
                session.abort_retry()
            elif how == "retry_now":
                session.retry_now()
            else:  # the caller's scope, or the stream() block's
                scopes[-1].cancel()

        session.subscribe(on_event)
        deadline = math.inf if path is not None else trio.current_time() + 1000
        with trio.fail_at(deadline):
            async with trio.open_nursery() as nursery:
                aborts.append(nursery)
                with trio.CancelScope() as caller:
                    if how == "stream":
                        async with session.stream("q") as reply:
                            with trio.CancelScope() as block:
                                scopes.append(block)
                                async for _ in reply:
                                    pass
                    else:
                        scopes.append(caller)
                        await session.prompt("q")
        assert_idle(session)
        check_prompt(events)
        if how in ("abort", "caller", "stream") and index is not None:
            # the request in flight (or just going out) is the last one
            assert len(provider.requests) - requests_at_cut <= 1
        if path is not None:
            same_messages(load_session(path).branch_messages, session.history)
        script.done = True
        first = len(events)
        with trio.fail_at(deadline):
            assert (await session.prompt("again")).text == "next"
        check_prompt(events[first:])
        assert_idle(session)
        return events[:first]


HOWS_AT_EVENTS = ["abort", "abort_retry", "retry_now", "caller", "stream"]


@pytest.mark.parametrize("how", HOWS_AT_EVENTS)
async def test_cut_right_after_every_event(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, how: str
) -> None:
    """R-23a, R-29–R-35, R-34a: a prompt of two chains (a cut 503, a re-attempt with a
    tool call, a fresh 503 chain, a chunked answer), cut from inside the subscriber of
    each of its events in turn — abort() scheduled, abort_retry(), retry_now(), the
    caller's scope or the stream() block cancelled there and then: the grammar holds,
    one end per chain, nothing is left running, the file holds the history, the next
    prompt works."""
    whole = await cut_at_event(None, how, tmp_path / "whole.jsonl")
    ends = [e for e in whole if isinstance(e, AutoRetryEnd)]
    assert ends == [AutoRetryEnd(success=True, attempt=1)] * 2
    assert len(whole) > 40
    for index in range(len(whole)):
        events = await cut_at_event(index, how, tmp_path / f"cut-{index}.jsonl")
        # the same prompt up to the cut (messages carry wall-clock timestamps: by type)
        assert [e.type for e in events[: index + 1]] == [e.type for e in whole[: index + 1]]


@pytest.mark.parametrize("how", HOWS_AT_EVENTS)
@pytest.mark.parametrize("name", sorted(SHORT))
async def test_cut_as_a_prompt_ends_on_its_own(
    autojump_clock: trio.testing.MockClock, name: str, how: str
) -> None:
    """R-15, R-25, R-32, R-35, R-50: a prompt that ends on its own soon (a chain given up
    at once or over its maximum, an overflow, a plain error or answer), cut right after
    each of its events — the abort races the prompt's own end: abort() returns, the
    prompt ends within 1000 virtual seconds, one end per chain, the next prompt works."""
    replies, max_retries = SHORT[name]
    whole = await cut_at_event(None, how, None, replies, max_retries)
    for index in range(len(whole)):
        events = await cut_at_event(index, how, None, replies, max_retries)
        assert [e.type for e in events[: index + 1]] == [e.type for e in whole[: index + 1]]


# -- 3. streaming snapshots -------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    chunks=st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=40),
    cut_first=st.booleans(),
)
def test_streaming_snapshots_are_the_text_so_far(chunks: list[str], cut_first: bool) -> None:
    """R-43: for a reply of k chunks (after an attempt cut by a 503 mid-answer), every
    message_update's message, read after the prompt ended, is the text of its deltas so
    far; the assistantMessageEvent's partial is that message; encoded while streaming
    and again afterwards it is the same JSON, in pi's shape."""
    text = "".join(chunks)
    replies = [FauxReply(text=text, chunks=chunks, chunk_delay=0.25)]
    if cut_first:
        replies.insert(0, FauxReply(text="xy", chunks=("x", "y"), error=ERR_503))

    async def main() -> list[tuple[MessageUpdate, dict[str, Any]]]:
        seen: list[tuple[MessageUpdate, dict[str, Any]]] = []

        def encode_now(event: SessionEvent) -> None:
            if isinstance(event, MessageUpdate):  # as the RPC server does, at once
                seen.append((event, json.loads(json.dumps(event_to_json(event)))))

        async with open_session(FauxProvider(replies), MODEL) as session:
            session.subscribe(encode_now)
            reply = await session.prompt("Hi")
            assert reply.text == text
        return seen

    seen = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    attempts: list[list[tuple[MessageUpdate, dict[str, Any]]]] = [[]]
    for update, wire in seen:
        if update.assistant_message_event["type"] == "text_start" and attempts[-1]:
            attempts.append([])
        attempts[-1].append((update, wire))
    assert len(attempts) == (2 if cut_first else 1)
    expected = [("x", "y")] if cut_first else []
    for updates, pieces in zip(attempts, [*expected, tuple(chunks)], strict=True):
        kinds = [u.assistant_message_event["type"] for u, _ in updates]
        deltas = [u.delta for u, _ in updates if u.assistant_message_event["type"] == "text_delta"]
        assert list(pieces) == deltas
        closed = kinds[-1] == "text_end"
        assert kinds == ["text_start", *["text_delta"] * len(pieces), *(["text_end"] * closed)]
        assert closed is (pieces == tuple(chunks))  # an error does not close its part
        so_far = ""
        for update, wire in updates:
            ame = update.assistant_message_event
            if ame["type"] == "text_delta":
                so_far += ame["delta"]
            assert update.message.text == so_far  # read now, long after it was emitted
            assert ame["partial"] == update.message
            assert update.message.content == (TextContent(so_far),)
            # the wire, as pi's docs/rpc.md shows it, the same now as when it was sent
            assert json.loads(json.dumps(event_to_json(update))) == wire
            assert wire["type"] == "message_update"
            assert wire["message"] == message_to_json(update.message)
            assert wire["message"]["content"] == [{"type": "text", "text": so_far}]
            event = wire["assistantMessageEvent"]
            assert event["partial"] == wire["message"]
            assert event["contentIndex"] == 0
            assert event["type"] == ame["type"]
            if ame["type"] == "text_delta":
                assert event["delta"] == ame["delta"]
            elif ame["type"] == "text_end":
                assert event["content"] == so_far == text
            else:
                assert "delta" not in event
                assert "content" not in event


async def test_rpc_updates_carry_the_whole_partial_by_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-39, R-43, R-44: over RPC, by default, each message_update line is pi's: the whole
    message so far, twice (message and assistantMessageEvent.partial), its text the
    deltas so far; the retry's two events come once each, the end before the last
    agent_end."""
    script: list[dict[str, Any]] = [
        {"error": ERR_503},
        {"text": "abcd", "chunks": list(CHUNKS), "chunkDelay": 0.5},
    ]
    async with in_memory(script) as served:
        await served.raw.send({"id": 1, "type": "prompt", "message": "hi"})
        lines: list[dict[str, Any]] = []
        while not (lines and lines[-1].get("type") == "agent_end" and not lines[-1]["willRetry"]):
            lines.append(await served.raw.read())
        assert not served.server.session.is_running
    types = [line["type"] for line in lines]
    assert types.count("auto_retry_start") == types.count("auto_retry_end") == 1
    assert types.index("auto_retry_end") > max(
        i for i, t in enumerate(types) if t == "message_update"
    )
    assert types[-3:] == ["auto_retry_end", "turn_end", "agent_end"]
    so_far = ""
    updates = [line for line in lines if line["type"] == "message_update"]
    assert len(updates) == 1 + len(CHUNKS) + 1  # text_start, the deltas, text_end
    for line in updates:
        event = line["assistantMessageEvent"]
        so_far += event.get("delta", "")
        assert line["message"] == event["partial"]
        assert line["message"]["role"] == "assistant"
        assert line["message"]["content"] == [{"type": "text", "text": so_far}]
    assert so_far == "abcd"


# -- 4. abort twice, concurrently, idle, after abort_retry, then a prompt at once ----------


async def _in_backoff(
    session: AgentSession, nursery: trio.Nursery, watch: Watch
) -> list[AssistantMessage]:
    """Start a prompt in ``nursery`` and return once its chain sleeps (t = 0)."""
    results: list[AssistantMessage] = []

    async def run() -> None:
        results.append(await session.prompt("Hi"))

    nursery.start_soon(run)
    await watch.nth("auto_retry_start")
    assert session.is_waiting_to_retry
    return results


async def test_abort_while_idle_is_a_no_op(autojump_clock: trio.testing.MockClock) -> None:
    """R-32: abort() and abort_retry() with nothing running return at once, emit nothing,
    and the next prompt runs normally."""
    async with open_session(FauxProvider([ok()]), MODEL) as session:
        watch = Watch()
        session.subscribe(watch)
        await session.abort()
        session.abort_retry()
        await session.abort()
        assert watch.events == []
        assert trio.current_time() == 0.0
        assert (await session.prompt("Hi")).text == "Hello"
        await session.abort()
        assert_idle(session)
        check_prompt(watch.events)


@pytest.mark.parametrize(
    "sequence",
    ["abort,abort", "abort|abort", "abort_retry,abort", "abort_retry,abort_retry", "abort|retry"],
)
async def test_abort_twice_and_concurrently(
    autojump_clock: trio.testing.MockClock, sequence: str
) -> None:
    """R-29, R-30, R-32, R-34: abort() twice, from two tasks at once, abort_retry() then
    abort(), abort_retry() twice, abort() racing abort_retry(): no error, exactly one
    auto_retry_end "Retry cancelled" at t = 1, prompt() returned, idle after."""
    watch = Watch()
    async with open_session(FauxProvider([err(), ok()]), MODEL) as session:
        session.subscribe(watch)
        async with trio.open_nursery() as nursery:
            results = await _in_backoff(session, nursery, watch)
            await trio.sleep(1)

            async def call(what: str) -> None:
                if what == "abort":
                    await session.abort()
                    assert not session.is_running
                else:
                    session.abort_retry()

            if "|" in sequence:  # two tasks in the same tick
                async with trio.open_nursery() as racers:
                    for what in sequence.split("|"):
                        racers.start_soon(call, "abort" if what == "abort" else "abort_retry")
            else:
                for what in sequence.split(","):
                    await call(what)
            await session.wait_for_retry_end()
            assert trio.current_time() == 1.0
        assert trio.current_time() == 1.0
        assert_idle(session)
        assert len(results) == 1
        assert results[0].error_message == ERR_503
        assert check_prompt(watch.events).ends == [RETRY_CANCELLED]
        await session.abort()  # once more, idle
        assert check_prompt(watch.events).ends == [RETRY_CANCELLED]


@pytest.mark.parametrize("where", ["backoff", "stream"])
async def test_abort_then_prompt_at_once(
    autojump_clock: trio.testing.MockClock, where: str
) -> None:
    """R-32, R-36: as soon as abort() returns a new prompt is accepted (no
    SessionBusyError), runs normally and starts its own chain from attempt 1."""
    script = [err()] if where == "backoff" else [FauxReply(text="a", hang=True)]
    provider = FauxProvider(script)
    watch = Watch()
    async with open_session(provider, MODEL) as session:
        session.subscribe(watch)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "first")
            await watch.nth("auto_retry_start" if where == "backoff" else "text_delta")
            await trio.sleep(0.5)
            await session.abort()
            provider.extend([err(), ok("second")])
            first = len(watch.events)
            assert (await session.prompt("second")).text == "second"
        assert trio.current_time() == 0.5 + 2.0
        grammar = check_prompt(watch.events[first:])
        assert grammar.ends == [AutoRetryEnd(success=True, attempt=1)]
        assert [e.attempt for e in watch.events[first:] if isinstance(e, AutoRetryStart)] == [1]
        check_prompt(watch.events)
        assert_idle(session)


async def test_abort_waits_for_the_prompt_it_aborted_not_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-32, R-35: abort() returns once the prompt it cancelled is over (the session was
    idle then), even if the caller has already started the next prompt (a worker taking
    the next job): it never waits for a later prompt, which may run for ever."""
    provider = FauxProvider([FauxReply(text="a", hang=True), FauxReply(text="b", hang=True)])
    watch = Watch()
    results: list[AssistantMessage] = []
    async with open_session(provider, MODEL) as session:
        session.subscribe(watch)

        async def worker() -> None:
            for text in ("one", "two"):  # no checkpoint between the two prompts
                results.append(await session.prompt(text))

        with trio.fail_after(100):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(worker)
                await watch.nth("text_delta")
                await trio.sleep(1)
                await session.abort()
                assert trio.current_time() == 1.0
                assert [(r.stop_reason, r.text) for r in results] == [("aborted", "a")]
                await trio.sleep(1)
                await session.abort()
                assert trio.current_time() == 2.0
        assert [(r.stop_reason, r.text) for r in results] == [("aborted", "a"), ("aborted", "b")]
        assert_idle(session)
        check_prompt(watch.events)


# -- 5. many sessions in backoff, one outer scope -------------------------------------------


@pytest.mark.parametrize("how", ["outer-scope", "abort-each"])
async def test_many_sessions_cancelled_together(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """R-30, R-32, R-33, R-35: 200 sessions in backoff, cancelled by one outer scope (or
    each by abort() from its own task, all in one tick): every prompt's chain emitted
    exactly one auto_retry_end "Retry cancelled", at t = 1, and nothing is left running."""
    count = 200
    logs = [EventRecorder() for _ in range(count)]
    sessions: list[AgentSession] = []
    in_backoff = trio.Event()
    started = 0
    returned: list[float] = []

    def count_starts(event: SessionEvent) -> None:
        nonlocal started
        if isinstance(event, AutoRetryStart):
            started += 1
            if started == count:
                in_backoff.set()

    async def one(i: int, task_status: trio.TaskStatus[None]) -> None:
        async with open_session(FauxProvider([err(), ok("never")]), MODEL) as session:
            sessions.append(session)
            session.subscribe(logs[i])
            session.subscribe(count_starts)
            task_status.started()
            try:
                await session.prompt(f"prompt {i}")
            finally:
                returned.append(trio.current_time())
            await trio.sleep_forever()  # the session stays open until the outer scope ends

    with trio.CancelScope() as outer:
        async with trio.open_nursery() as nursery:
            for i in range(count):
                await nursery.start(one, i)
            await in_backoff.wait()
            assert all(s.is_waiting_to_retry for s in sessions)
            await trio.sleep(1)
            if how == "outer-scope":
                outer.cancel()
            else:
                async with trio.open_nursery() as aborts:
                    for session in sessions:
                        aborts.start_soon(session.abort)
                assert sorted(returned) == [1.0] * count  # abort() returns when idle
                assert session_tasks() == []  # the sessions are open, nothing of theirs runs
                outer.cancel()
    assert trio.current_time() == 1.0
    assert returned == [1.0] * count
    for session, log in zip(sessions, logs, strict=True):
        assert check_prompt(log.events).ends == [RETRY_CANCELLED]
        assert log.times_of("auto_retry_end") == [1.0]
        assert not session.is_running
        assert not session.is_retrying
    assert session_tasks() == []
