"""R-69: the rate budget in process — settings, permits on virtual time, waits that abort
ends, tokens reserved then settled, FIFO between sessions, and nothing at all when no
``rateLimit`` is set."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from tests.conftest import PROFILES, err, ok
from tests.rpc_helpers import RawLines
from trio_session import (
    AgentSession,
    AssistantMessage,
    FauxProvider,
    Model,
    ProviderFailure,
    RateLimits,
    RateLimitWaitEnd,
    RateLimitWaitStart,
    SettingsError,
    Usage,
    open_session,
)
from trio_session._agent.loop import Agent
from trio_session._agent.rate_budget import (
    _LOCAL,
    MINUTE_US,
    BudgetKey,
    Cost,
    Outcome,
    RateGate,
    gcra,
    local_budget,
)
from trio_session._settings.store import SettingsStore
from trio_session.rpc import RpcServer
from trio_session.testing import EventRecorder

MODEL = Model("faux-model", "faux")


def limit(**group: Any) -> dict[str, Any]:
    """Settings in file form with only the ``rateLimit`` group given."""
    return {"rateLimit": group}


# -- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "message"),
    [
        (
            {"requestsPerMinute": 0},
            r"rateLimit\.requestsPerMinute must be an integer from 1 to 100000000, or null, "
            r"not 0",
        ),
        (
            {"tokensPerMinute": "lots"},
            r"rateLimit\.tokensPerMinute must be an integer from 1 to 100000000000, or null, "
            r"not 'lots'",
        ),
        (
            {"replyTokens": True},
            r"rateLimit\.replyTokens must be an integer from 1 to 10000000, or null, not True",
        ),
        (
            {"models": ["gpt-4o"]},
            r"rateLimit\.models must be an object of model ids to their limits, not \['gpt-4o'\]",
        ),
        (
            {"models": {"gpt-4o": {"tokensPerMinute": -1}}},
            r"rateLimit\.models\.gpt-4o\.tokensPerMinute must be an integer from 1 to "
            r"100000000000, or null, not -1",
        ),
        (
            {"models": {"gpt-4o": {"rpm": 5}}},
            r"rateLimit\.models\.gpt-4o must be an object with requestsPerMinute, "
            r"tokensPerMinute, replyTokens, not \{'rpm': 5\}",
        ),
        (
            {"models": {"gpt-4o": 5}},
            r"rateLimit\.models\.gpt-4o must be an object with requestsPerMinute, "
            r"tokensPerMinute, replyTokens, not 5",
        ),
        (
            {"models": {"": {}}},
            r"rateLimit\.models must be an object keyed by non-empty model ids, not ''",
        ),
    ],
)
def test_bad_rate_limits_are_one_line_errors(group: dict[str, Any], message: str) -> None:
    """R-69: a bad ``rateLimit`` value is a ``SettingsError`` naming the key and the value."""
    with pytest.raises(SettingsError, match=rf"^{message} \(in <programmatic>\)$"):
        SettingsStore.coerce(limit(**group))


def test_a_model_s_limits_win_key_by_key() -> None:
    """R-69: ``rateLimit.models.<id>`` wins over the group for that model, key by key."""
    settings = SettingsStore.coerce(
        limit(requestsPerMinute=60, replyTokens=100, models={"big": {"tokensPerMinute": 9}})
    ).current.rate_limit
    assert settings.limits("big") == RateLimits(60, 9, 100)
    assert settings.limits("small") == RateLimits(60, None, 100)
    assert not SettingsStore.coerce(None).current.rate_limit.limits("big").limited


# -- the algorithm ------------------------------------------------------------------------


def test_gcra_is_a_bucket_of_the_limit_refilled_over_a_minute() -> None:
    """R-69: a limit of 3 a minute grants 3 at once, then one every 20 s."""
    cost = Cost.of(RateLimits(requests_per_minute=3), 0)
    times = (0, 0)
    for _ in range(3):
        times, wait = gcra(times, 0, cost.increments)
        assert wait == 0
    assert gcra(times, 0, cost.increments) == (times, 20_000_000)
    assert gcra(times, 20_000_000, cost.increments)[1] == 0
    assert MINUTE_US == 60_000_000


def test_a_request_costs_at_most_the_whole_token_limit() -> None:
    """R-69: an estimate past the token limit reserves the limit, so it is granted at all."""
    cost = Cost.of(RateLimits(tokens_per_minute=1000), 5000)
    assert (cost.reserved, cost.tokens, cost.requests) == (1000, MINUTE_US, 0)


# -- sessions -----------------------------------------------------------------------------


async def test_requests_per_minute_space_the_prompts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: 2 requests a minute: two prompts at once, the third after 30 s, with its wait
    told by ``rate_limit_wait_start {delayMs}`` and ``rate_limit_wait_end``."""
    provider = FauxProvider([ok(), ok(), ok()])
    async with open_session(provider, MODEL, settings=limit(requestsPerMinute=2)) as session:
        recorder = EventRecorder.attach(session)
        for _ in range(3):
            await session.prompt("Hi")
    assert provider.request_times == [0.0, 0.0, 30.0]
    assert recorder.of(RateLimitWaitStart) == [RateLimitWaitStart(30_000, "faux/faux-model")]
    assert recorder.times_of("rate_limit_wait_start") == [0.0]
    assert recorder.times_of("rate_limit_wait_end") == [30.0]


@PROFILES
async def test_every_re_attempt_takes_a_permit(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-69: a retry's re-attempt waits for its permit too: one request a minute, a 503 at
    0 s, the backoff's 2 s, and the re-attempt goes at 60 s."""
    provider = FauxProvider([err(), ok()])
    settings = {**limit(requestsPerMinute=1), "retry": {"profile": profile}}
    async with open_session(provider, MODEL, settings=settings) as session:
        await session.prompt("Hi")
    assert provider.request_times == [0.0, 60.0]


async def test_abort_ends_a_budget_wait_at_once_and_leaves_the_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: ``abort()`` during a budget wait ends it at once, with ``rate_limit_wait_end``;
    the budget is as it was: the next request goes when it would have."""
    provider = FauxProvider([ok(), ok()])
    async with open_session(provider, MODEL, settings=limit(requestsPerMinute=1)) as session:
        recorder = EventRecorder.attach(session)
        await session.prompt("one")
        budget = local_budget()
        key = BudgetKey("faux", "-", "faux-model")
        before = budget.level(key)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "two")
            await trio.sleep(10)
            assert session.is_running
            await session.abort()
            assert trio.current_time() == 10.0
        assert budget.level(key) == before
        assert recorder.times_of("rate_limit_wait_end") == [10.0]
        assert session.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
        await session.prompt("three")
    assert provider.request_times == [0.0, 60.0]


@PROFILES
async def test_abort_retry_ends_a_re_attempt_s_budget_wait(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-69: ``abort_retry()`` during a re-attempt's budget wait ends the chain at once."""
    provider = FauxProvider([err(), ok()])
    settings = {**limit(requestsPerMinute=1), "retry": {"profile": profile}}
    async with open_session(provider, MODEL, settings=settings) as session:
        recorder = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(10)  # the 503 at 0 s, the backoff to 2 s, the permit's wait
            session.abort_retry()
        assert trio.current_time() == 10.0
    assert provider.request_times == [0.0]
    assert recorder.types.count("rate_limit_wait_start") == 1
    assert recorder.times_of("rate_limit_wait_end") == [10.0]
    assert recorder.times_of("auto_retry_end") == [10.0]


async def test_tokens_are_reserved_then_settled_with_the_usage(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: a request reserves its prompt's estimate plus ``replyTokens``; once the answer
    reports its usage, what was not used goes back to the budget."""
    used = Usage(input=100, output=50)
    provider = FauxProvider([ok(usage=used), ok()])
    settings = limit(tokensPerMinute=6000, replyTokens=1000)
    async with open_session(provider, MODEL, settings=settings) as session:
        recorder = EventRecorder.attach(session)
        await session.prompt("Hi")  # the estimate: 1 token of prompt, 1000 of reply
        _, tokens = local_budget().level(BudgetKey("faux", "-", "faux-model"))
        assert tokens == 150 * MINUTE_US // 6000  # 150 tokens used, 851 given back
        await session.prompt("Hi")
    assert provider.request_times == [0.0, 0.0]
    assert recorder.of(RateLimitWaitStart) == []


async def test_a_failed_request_gives_its_tokens_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: a request that ends in an error with no usage gives all its tokens back: the
    retry's re-attempt goes after its backoff, not after a minute."""
    provider = FauxProvider([err(), ok()])
    settings = limit(tokensPerMinute=1000, replyTokens=999)
    async with open_session(provider, MODEL, settings=settings) as session:
        await session.prompt("Hi")
    assert provider.request_times == [0.0, 2.0]


async def test_permits_of_one_budget_are_taken_in_arrival_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: FIFO: a big request waiting for the budget is not overtaken by a small one
    that came after it, though the small one would fit at once."""
    first = FauxProvider([ok(usage=Usage(input=1, output=600))])
    big, small = FauxProvider([ok()]), FauxProvider([ok()])
    async with (
        open_session(first, MODEL, settings=limit(tokensPerMinute=1000, replyTokens=600)) as s0,
        open_session(big, MODEL, settings=limit(tokensPerMinute=1000, replyTokens=900)) as s1,
        open_session(small, MODEL, settings=limit(tokensPerMinute=1000, replyTokens=100)) as s2,
    ):
        await s0.prompt("Hi")  # 601 of 1000 taken at 0 s, and used
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s1.prompt, "Hi")  # 901 wanted: 502 more by 30.12 s
            await trio.sleep(1)
            nursery.start_soon(s2.prompt, "Hi")  # 101 wanted: there at 1 s, but queued
    assert big.request_times == [pytest.approx(30.12)]
    # after the big one's permit (the bucket then empty): 101 more by 6.06 s; without
    # FIFO it would have gone at 1 s
    assert small.request_times == [pytest.approx(30.12 + 6.06)]


async def test_a_summary_request_takes_a_permit(autojump_clock: trio.testing.MockClock) -> None:
    """R-69: ``Agent.complete`` (a compaction's summary request) waits for its permit."""
    provider = FauxProvider([ok("summary one"), ok("summary two")])
    settings = SettingsStore.coerce(limit(requestsPerMinute=1))
    events: list[object] = []
    agent = Agent(provider, MODEL, events.append, rate_gate=RateGate(settings))
    await agent.complete([])
    await agent.complete([])
    assert provider.request_times == [0.0, 60.0]
    assert [type(e) for e in events] == [RateLimitWaitStart, RateLimitWaitEnd]


async def test_no_rate_limit_takes_no_permit(autojump_clock: trio.testing.MockClock) -> None:
    """R-69: with no ``rateLimit`` a session never makes a budget, nor tells of one."""
    provider = FauxProvider([err(), ok(), ok()])
    async with open_session(provider, MODEL) as session:
        recorder = EventRecorder.attach(session)
        await session.prompt("Hi")
        await session.prompt("Hi")
        assert _LOCAL.get() is None  # no budget made
    assert not [t for t in recorder.types if t.startswith("rate_limit")]
    assert provider.request_times == [0.0, 2.0, 2.0]


async def test_get_state_says_when_a_request_waits_for_its_permit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: RPC ``get_state`` has ``isRateLimited`` only with a limit on the model, true
    while a request waits for its permit (``AgentSession.is_rate_limited``)."""
    async with (
        open_session(FauxProvider([])) as plain,
        open_session(FauxProvider([ok(), ok()]), MODEL, settings=limit(requestsPerMinute=1)) as s,
    ):
        assert "isRateLimited" not in await get_state(plain)
        await s.prompt("one")
        assert (await get_state(s))["isRateLimited"] is False
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.prompt, "two")
            await trio.sleep(1)
            assert s.is_rate_limited
            assert (await get_state(s))["isRateLimited"] is True
        assert not s.is_rate_limited


async def get_state(session: AgentSession) -> dict[str, Any]:
    """``get_state``'s data, asked of an ``RpcServer`` on ``session`` over a memory stream."""
    client_end, server_end = trio.testing.memory_stream_pair()
    raw = RawLines(client_end, client_end)
    async with trio.open_nursery() as nursery:
        await nursery.start(RpcServer(session, server_end).serve)
        await raw.send({"id": 1, "type": "get_state"})
        data: dict[str, Any] = (await raw.read())["data"]
        await client_end.send_eof()
    return data


def test_a_429_s_hint_drains_the_budget() -> None:
    """R-69: an answer that is a 429 with ``retry-after`` says to drain the budget for the
    hint, at most a minute; any other answer (a 503 with a hint, a 429 without) drains
    nothing."""

    def answer(status: int, retry_after_ms: int | None) -> AssistantMessage:
        failure = ProviderFailure(status=status, retry_after_ms=retry_after_ms)
        return AssistantMessage(stop_reason="error", error_message="429", failure=failure)

    assert Outcome.of(answer(429, 7000)) == Outcome(used=0, drain_us=7_000_000)
    assert Outcome.of(answer(429, 3_600_000)) == Outcome(drain_us=MINUTE_US)  # at most
    assert Outcome.of(answer(503, 7000)) == Outcome()
    assert Outcome.of(answer(429, None)) == Outcome()
    assert Outcome.of(None) == Outcome()


async def test_a_drained_budget_holds_every_session_until_the_hint_has_passed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-69: after a 429 with a 5 s hint, the next permit of the budget — any session's —
    waits the hint and then the budget's pace (one request of 60 a minute: 1 s)."""
    budget = local_budget()
    key = BudgetKey("faux", "-", "faux-model")
    cost = Cost.of(RateLimits(requests_per_minute=60), 0)
    waits: list[int | None] = []
    grant = await budget.permit(key, cost, waits.append)
    await grant.settle(Outcome(drain_us=5_000_000))
    await budget.permit(key, cost, waits.append)
    assert trio.current_time() == 6.0
    assert waits == [6000]


async def test_requests_that_fit_tell_of_no_wait(autojump_clock: trio.testing.MockClock) -> None:
    """R-69: sessions asking for permits at the same moment, all of which the budget
    holds, wait for nothing and say nothing of a wait."""
    providers = [FauxProvider([ok()]) for _ in range(5)]
    settings = limit(requestsPerMinute=100)
    events: list[str] = []
    async with trio.open_nursery() as nursery:
        for provider in providers:

            async def one(provider: FauxProvider = provider) -> None:
                async with open_session(provider, MODEL, settings=settings) as session:
                    session.subscribe(lambda event: events.append(event.type))
                    await session.prompt("Hi")

            nursery.start_soon(one)
    assert [p.request_times for p in providers] == [[0.0]] * 5
    assert not [t for t in events if t.startswith("rate_limit")]
