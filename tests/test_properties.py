"""Property tests (hypothesis): any script, any abort time ⇒ the invariants hold."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_session import (
    AgentEnd,
    AgentStart,
    AssistantMessage,
    AutoRetryStart,
    FauxProvider,
    FauxReply,
    InMemoryCredentialStore,
    Model,
    TurnEnd,
    TurnStart,
    open_session,
)
from trio_session.testing import EventRecorder

from .conftest import assert_idle, check_retry_events

REPLIES = {
    "ok": FauxReply(text="fine"),
    "503": FauxReply(error="503 Service Unavailable"),
    "429": FauxReply(error="429 Too Many Requests\nretry-after: 3"),
    "400": FauxReply(error="400 Bad Request: invalid request"),
    "overflow": FauxReply(error="400 prompt is too long: 9000 tokens > 8000 maximum"),
    "usage": FauxReply(error="429 usage_limit_reached: usage limit hit\nretry-after: 30"),
    "slow-ok": FauxReply(text="slowly", chunks=["slo", "wly"], delay=1.5, chunk_delay=1.0),
    "slow-503": FauxReply(error="503 Service Unavailable", delay=2.5),
}

replies = st.lists(st.sampled_from(sorted(REPLIES)), min_size=1, max_size=9)
actions = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=40, allow_nan=False),
        st.sampled_from(["abort", "abort_retry", "retry_now"]),
    ),
    max_size=4,
)


@attrs.frozen
class Case:
    script: list[str]
    actions: list[tuple[float, str]]
    max_retries: int
    spare_key: bool
    prompts: int


cases = st.builds(
    Case,
    script=replies,
    actions=actions,
    max_retries=st.integers(min_value=0, max_value=3),
    spare_key=st.booleans(),
    prompts=st.integers(min_value=1, max_value=2),
)


async def scenario(case: Case) -> None:
    script = [REPLIES[name] for name in case.script]
    provider = FauxProvider(script)
    keys = ["k1", "k2"] if case.spare_key else ["k1"]
    store = InMemoryCredentialStore(keys={"faux": keys}, clock=trio.current_time)
    model = Model(id="m", provider="faux", context_window=8000)
    settings: dict[str, Any] = {"retry": {"maxRetries": case.max_retries}}
    async with open_session(provider, model, settings=settings, credentials=store) as session:
        rec = EventRecorder.attach(session)

        async def act() -> None:
            for at, action in sorted(case.actions):
                await trio.sleep_until(at)
                if action == "abort":
                    await session.abort()
                elif action == "abort_retry":
                    session.abort_retry()
                else:
                    session.retry_now()

        with trio.fail_after(10_000):  # virtual seconds: prompt() always returns
            async with trio.open_nursery() as nursery:
                nursery.start_soon(act)
                for i in range(case.prompts):
                    await session.prompt(f"prompt {i}")
                nursery.cancel_scope.cancel()

        assert_idle(session)
        # every auto_retry_start precedes exactly one auto_retry_end of its chain
        check_retry_events(rec.events)
        # runs and turns are balanced, cancelled or not
        assert len(rec.of(AgentStart)) == len(rec.of(AgentEnd))
        assert len(rec.of(TurnStart)) == len(rec.of(TurnEnd))
        # each error that started a retry is in history and not in the runtime context
        retried = {e.error_message for e in rec.of(AutoRetryStart)}
        history_errors = {
            m.error_message
            for m in session.history
            if isinstance(m, AssistantMessage) and m.stop_reason == "error"
        }
        assert retried <= history_errors
        sent_failed = [
            m
            for request in provider.requests
            for m in request.messages
            if isinstance(m, AssistantMessage) and m.failed
        ]
        assert sent_failed == []  # R-20a


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases)
def test_invariants_hold_for_any_script_and_abort_times(case: Case) -> None:
    """R-10, R-24, R-29–R-35: one end per start, prompt returns, nothing left running."""
    trio.run(scenario, case, clock=trio.testing.MockClock(autojump_threshold=0))
