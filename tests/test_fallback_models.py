"""Fallback models (issue 31, item 10): R-65 … R-67.

Every session here talks to one ``FauxProvider`` (the provider seam) whose replies
depend on the model a request names, so the requests to each model are counted
apart. Times are virtual (``autojump_clock``) and exact; event orders are exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
import trio.testing

from trio_session import (
    AgentEnd,
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    FauxProvider,
    FauxReply,
    InMemoryCredentialStore,
    MessageEnd,
    Model,
    ModelFallback,
    ProviderRequest,
    SessionEvent,
    event_from_json,
    event_to_json,
    open_session,
)
from trio_session.testing import EventRecorder, faux_script

PRIMARY = Model(id="primary", provider="faux", reasoning=True)
SECOND = Model(id="second", provider="faux")
THIRD = Model(id="third", provider="faux")
E503 = "503 Service Unavailable"
USAGE_LIMIT = "429 usage_limit_reached: The usage limit has been reached\nretry-after: 600"


class PerModel:
    """The provider's script, one queue of replies per model id."""

    def __init__(self, **replies: Sequence[str | FauxReply]) -> None:
        self.queues = {
            model: [r if isinstance(r, FauxReply) else faux_script([r])[0] for r in queue]
            for model, queue in replies.items()
        }
        total = sum(len(q) for q in self.queues.values())
        self.provider = FauxProvider([self.step] * total)

    def step(self, request: ProviderRequest) -> FauxReply:
        return self.queues[request.model.id].pop(0)

    def times(self, model: str) -> list[float]:
        """When each request to ``model`` went out."""
        pairs = zip(self.provider.requests, self.provider.request_times, strict=True)
        return [t for r, t in pairs if r.model.id == model]


def timeline(recorder: EventRecorder) -> list[tuple[float, str]]:
    """The retry policy's events and the assistant messages, each with its time."""
    out = []
    for event, at in zip(recorder.events, recorder.times, strict=True):
        out.append((at, label(event)))
    return [(at, text) for at, text in out if text]


def label(event: SessionEvent) -> str:
    if isinstance(event, AutoRetryStart):
        return f"auto_retry_start {event.attempt} {event.delay_ms}"
    if isinstance(event, AutoRetryEnd):
        return f"auto_retry_end {event.success} {event.attempt}"
    if isinstance(event, ModelFallback):
        return f"model_fallback {event.from_model} -> {event.to_model} {event.reason}"
    if isinstance(event, AgentEnd):
        return f"agent_end {event.will_retry}"
    if isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
        return f"{event.message.model}: {event.message.stop_reason}"
    return ""


async def test_r65_a_chain_that_gives_up_hands_the_run_to_the_next_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-65: maxRetries 2, three 503s on the primary (t = 0, 2, 6): its chain ends, then
    model_fallback, then the second model at t = 6, whose 503 starts a fresh chain at
    attempt 1 (2 s), and it answers at t = 8; agent_end says willRetry until then."""
    script = PerModel(primary=[f"!{E503}"] * 3, second=[f"!{E503}", "from second"])
    async with open_session(
        script.provider,
        PRIMARY,
        settings={"retry": {"maxRetries": 2}},
        fallback_models=[SECOND, THIRD],
    ) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("hi")
        assert trio.current_time() == 8.0
        session.assert_idle()
        # the context keeps the prompt and the answer; the failures left it
        assert [m.role for m in session.messages] == ["user", "assistant"]
        assert len(session.history) == 6  # the prompt, four failures, the answer
    assert (reply.text, reply.model) == ("from second", "second")
    assert script.times("primary") == [0.0, 2.0, 6.0]
    assert script.times("second") == [6.0, 8.0]
    assert timeline(recorder) == [
        (0.0, "primary: error"),
        (0.0, "agent_end True"),
        (0.0, "auto_retry_start 1 2000"),
        (2.0, "primary: error"),
        (2.0, "agent_end True"),
        (2.0, "auto_retry_start 2 4000"),
        (6.0, "primary: error"),
        (6.0, "agent_end True"),
        (6.0, "auto_retry_end False 2"),
        (6.0, "model_fallback faux/primary -> faux/second retries_exhausted"),
        (6.0, "second: error"),
        (6.0, "agent_end True"),
        (6.0, "auto_retry_start 1 2000"),
        (8.0, "second: stop"),
        (8.0, "auto_retry_end True 1"),
        (8.0, "agent_end False"),
    ]
    assert recorder.of(ModelFallback) == [
        ModelFallback("faux/primary", "faux/second", "retries_exhausted", E503)
    ]


async def test_r65_pi16_a_usage_limit_with_no_key_left_falls_back_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-65, R-53b: pi-1.6, one key, a usage limit on the primary: the store has no free
    key, so agent_end says willRetry true, model_fallback (no_key_left) follows at t = 0
    and the second model answers at t = 0; no retry chain at all."""
    script = PerModel(primary=[f"!{USAGE_LIMIT}"], second=["from second"])
    store = InMemoryCredentialStore(keys={"faux": ["only"]}, clock=trio.current_time)
    async with open_session(
        script.provider,
        PRIMARY,
        settings={"retry": {"profile": "pi-1.6"}},
        credentials=store,
        fallback_models=[SECOND],
    ) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("hi")
    assert (reply.text, trio.current_time()) == ("from second", 0.0)
    assert (script.times("primary"), script.times("second")) == ([0.0], [0.0])
    assert timeline(recorder) == [
        (0.0, "primary: error"),
        (0.0, "agent_end True"),
        (0.0, "model_fallback faux/primary -> faux/second no_key_left"),
        (0.0, "second: stop"),
        (0.0, "agent_end False"),
    ]
    assert recorder.of(ModelFallback)[0].error_message == USAGE_LIMIT


async def test_r67_abort_during_the_fallback_request_ends_everything(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-67: abort() while the fallback's request hangs: prompt() returns the aborted
    reply, every auto_retry_start had its auto_retry_end, and nothing runs."""
    script = PerModel(primary=[f"!{E503}"] * 2, second=[FauxReply(text="never", hang=True)])
    returned: list[AssistantMessage] = []
    async with open_session(
        script.provider,
        PRIMARY,
        settings={"retry": {"maxRetries": 1}},
        fallback_models=[SECOND],
    ) as session:
        recorder = EventRecorder.attach(session)
        fell_back = trio.Event()
        session.subscribe(lambda e: fell_back.set() if isinstance(e, ModelFallback) else None)

        async def ask() -> None:
            returned.append(await session.prompt("hi"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await fell_back.wait()
            await trio.testing.wait_all_tasks_blocked()  # the second model's request hangs
            assert (len(script.provider.requests), trio.current_time()) == (3, 2.0)
            await trio.sleep(1)  # a second into it
            await session.abort()
            assert trio.current_time() == 3.0
        session.assert_idle()
        assert session.model == PRIMARY
    assert (returned[0].stop_reason, returned[0].model) == ("aborted", "second")
    assert script.times("second") == [2.0]
    assert len(recorder.of(AutoRetryStart)) == len(recorder.of(AutoRetryEnd)) == 1
    assert timeline(recorder)[-3:] == [
        (2.0, "model_fallback faux/primary -> faux/second retries_exhausted"),
        (3.0, "second: aborted"),
        (3.0, "agent_end False"),
    ]


async def test_r67_with_the_list_spent_the_last_error_stands(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-67: the only fallback gives up too: one model_fallback, two chains each ended,
    and the prompt's reply is the fallback's last 503 (a list naming the primary
    skips it)."""
    script = PerModel(primary=[f"!{E503}"] * 2, second=[f"!{E503}"] * 2)
    async with open_session(
        script.provider,
        PRIMARY,
        settings={"retry": {"maxRetries": 1}},
        fallback_models=[PRIMARY, SECOND],
    ) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("hi")
    assert (reply.stop_reason, reply.error_message, reply.model) == ("error", E503, "second")
    assert (script.times("primary"), script.times("second")) == ([0.0, 2.0], [2.0, 4.0])
    assert [label(e) for e in recorder.events if label(e).startswith(("auto", "model"))] == [
        "auto_retry_start 1 2000",
        "auto_retry_end False 1",
        "model_fallback faux/primary -> faux/second retries_exhausted",
        "auto_retry_start 1 2000",
        "auto_retry_end False 1",
    ]
    assert recorder.of(AgentEnd)[-1].will_retry is False


async def test_r66_the_next_prompt_starts_on_the_session_model(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-66: after a prompt answered by the fallback, session.model is still the primary,
    the thinking level clamped for the fallback is back, and the next prompt's request
    goes to the primary."""
    script = PerModel(primary=[f"!{E503}", "again primary"], second=["from second"])
    async with open_session(
        script.provider,
        PRIMARY,
        settings={"retry": {"maxRetries": 0}},
        fallback_models=[SECOND],
        thinking_level="high",
    ) as session:
        first = await session.prompt("one")
        assert (session.model, session.thinking_level) == (PRIMARY, "high")
        second = await session.prompt("two")
    assert (first.model, second.model) == ("second", "primary")
    assert [(r.model.id, r.thinking_level) for r in script.provider.requests] == [
        ("primary", "high"),
        ("second", "off"),
        ("primary", "high"),
    ]


async def test_r65_off_by_default(autojump_clock: trio.testing.MockClock) -> None:
    """R-65: without fallback_models the chain gives up as ever: no model_fallback,
    the last agent_end says willRetry false, the reply is the primary's 503."""
    script = PerModel(primary=[f"!{E503}"] * 2)
    async with open_session(
        script.provider, PRIMARY, settings={"retry": {"maxRetries": 1}}
    ) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("hi")
    assert (reply.error_message, reply.model) == (E503, "primary")
    assert recorder.of(ModelFallback) == []
    assert [e.will_retry for e in recorder.of(AgentEnd)] == [True, False]


def test_r65_model_fallback_on_the_wire() -> None:
    """R-65: model_fallback as JSON: fromModel, toModel, reason, errorMessage; and back."""
    event = ModelFallback("faux/primary", "faux/second", "no_key_left", "429 usage limit")
    data = event_to_json(event)
    assert data == {
        "type": "model_fallback",
        "fromModel": "faux/primary",
        "toModel": "faux/second",
        "reason": "no_key_left",
        "errorMessage": "429 usage limit",
    }
    assert event_from_json(data) == event


async def test_r65_a_chain_out_of_budget_falls_back_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-65, R-61: maxTotalMs 1000 refuses the first 2 s wait: the chain ends at t = 0
    (attempt 0), the second model takes the run at once and answers at t = 0."""
    script = PerModel(primary=[f"!{E503}"], second=["from second"])
    async with open_session(
        script.provider,
        PRIMARY,
        settings={"retry": {"maxTotalMs": 1000}},
        fallback_models=[SECOND],
    ) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("hi")
    assert (reply.text, trio.current_time()) == ("from second", 0.0)
    assert [label(e) for e in recorder.events if label(e).startswith(("auto", "model"))] == [
        "auto_retry_end False 0",
        "model_fallback faux/primary -> faux/second retries_exhausted",
    ]


async def test_r66_a_model_set_during_the_fallback_stands(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-66: set_model(third) while the fallback's answer streams: that answer still comes
    from the second model, and after the prompt the session stays on the third."""
    slow = FauxReply(text="from second", delay=1.0)
    script = PerModel(primary=[f"!{E503}"], second=[slow], third=["from third"])
    async with open_session(
        script.provider,
        PRIMARY,
        settings={"retry": {"maxRetries": 0}},
        models=[PRIMARY, SECOND, THIRD],
        fallback_models=[SECOND],
    ) as session:
        fell_back = trio.Event()
        session.subscribe(lambda e: fell_back.set() if isinstance(e, ModelFallback) else None)
        replies: list[AssistantMessage] = []

        async def ask() -> None:
            replies.append(await session.prompt("one"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await fell_back.wait()
            await trio.testing.wait_all_tasks_blocked()  # the second model's answer streams
            assert len(script.provider.requests) == 2
            await session.set_model(THIRD)
        replies.append(await session.prompt("two"))
        assert session.model == THIRD
    assert [r.model for r in replies] == ["second", "third"]
    assert [r.model.id for r in script.provider.requests] == ["primary", "second", "third"]
