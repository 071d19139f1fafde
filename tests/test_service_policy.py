"""A service's retry policy (issue 31): the total retry budget, the service preset,
the last real error behind an aborted reply, and structured failure data.

Each test runs on Trio's autojump clock and checks exact virtual times where time
matters; the sessions use ``FauxProvider`` (the provider seam) unless the test is
about what the HTTP adapter reads off a real response.
"""

from __future__ import annotations

import trio
import trio.testing

from trio_session import (
    SERVICE_SETTINGS,
    AutoRetryEnd,
    AutoRetryStart,
    FauxProvider,
    FauxReply,
    RetrySettings,
    open_session,
)
from trio_session._retry.backoff import over_budget
from trio_session._retry.chain import RetryChain
from trio_session._retry.decide import Next
from trio_session.testing import EventRecorder, faux_script

from .test_retry_chain import ERROR, ScriptHost

BUDGET_END = (
    "retry budget spent: waiting 4000 ms more would take this chain to 6000 ms, "
    "past retry.maxTotalMs (5000 ms); last error: 503 Service Unavailable"
)


# -- retry.maxTotalMs --------------------------------------------------------------


async def test_r61_the_chain_gives_up_before_a_wait_past_the_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-61: with maxTotalMs 5000 the first wait (2 s) fits, the second (4 s, to 6 s)
    does not: the chain ends at 2 s, attempt 1, with the one-line finalError."""
    host = ScriptHost([(ERROR, Next.RETRY)], RetryChain())
    host.settings = RetrySettings(max_total_ms=5000)
    assert await host.chain.run(host, ERROR, Next.RETRY) is None
    assert host.events == [
        AutoRetryStart(1, 3, 2000, "503 Service Unavailable"),
        AutoRetryEnd(False, 1, BUDGET_END),
    ]
    assert host.reattempts == [2.0]
    assert trio.current_time() == 2.0


async def test_r61_the_budget_counts_the_reattempts_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-61: a re-attempt that takes 3 s counts too: at 5 s, the 4 s wait would end at
    9 s, past a 8000 ms budget (without it, 2 + 3 + 4 = 9 s would be allowed)."""
    host = ScriptHost([(ERROR, Next.RETRY)], RetryChain(), streams_for=3.0)
    host.settings = RetrySettings(max_total_ms=8000)
    await host.chain.run(host, ERROR, Next.RETRY)
    assert host.events[-1] == AutoRetryEnd(
        False,
        1,
        "retry budget spent: waiting 4000 ms more would take this chain to 9000 ms, "
        "past retry.maxTotalMs (8000 ms); last error: 503 Service Unavailable",
    )
    assert trio.current_time() == 5.0


def test_r61_no_budget_by_default() -> None:
    """R-61, R-16: the default has no budget: any wait fits; the last error's first
    line ends the message."""
    assert RetrySettings().max_total_ms is None
    assert over_budget(10**9, 10**9, RetrySettings(), "x") is None
    refusal = over_budget(1, 2, RetrySettings(max_total_ms=2), "503 x\nretry-after: 9")
    assert refusal == (
        "retry budget spent: waiting 2 ms more would take this chain to 3 ms, "
        "past retry.maxTotalMs (2 ms); last error: 503 x"
    )


async def test_r61_a_session_gives_up_on_its_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-61 through a session: three 503s under maxTotalMs 5000 end at 2 s with the
    budget's finalError; the prompt's reply is the second 503."""
    provider = FauxProvider(faux_script(["!503 Service Unavailable"] * 3))
    settings = {"retry": {"maxTotalMs": 5000}}
    async with open_session(provider, settings=settings) as session:
        recorder = EventRecorder.attach(session)
        reply = await session.prompt("hi")
    assert provider.request_times == [0.0, 2.0]
    ends = recorder.of(AutoRetryEnd)
    assert ends == [AutoRetryEnd(False, 1, BUDGET_END)]
    assert reply.error_message == "503 Service Unavailable"


# -- the service preset ------------------------------------------------------------


async def _one_session(settings: object, waits: list[int]) -> None:
    provider = FauxProvider(faux_script(["!503 Service Unavailable", "ok"]))
    async with open_session(provider, settings=settings) as session:  # type: ignore[arg-type]
        session.subscribe(
            lambda e: waits.append(e.delay_ms) if isinstance(e, AutoRetryStart) else None
        )
        await session.prompt("hi")


async def test_r62_defaults_retry_in_lock_step(autojump_clock: trio.testing.MockClock) -> None:
    """R-16: under the defaults 200 sessions that fail together all wait exactly 2000 ms."""
    waits: list[int] = []
    async with trio.open_nursery() as nursery:
        for _ in range(200):
            nursery.start_soon(_one_session, None, waits)
    assert set(waits) == {2000}
    assert trio.current_time() == 2.0


async def test_r62_the_service_preset_spreads_200_sessions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-62: under SERVICE_SETTINGS the 200 first waits are spread over [1000, 2000] ms
    (equal jitter): many different waits, none shorter than half of 2 s."""
    waits: list[int] = []
    async with trio.open_nursery() as nursery:
        for _ in range(200):
            nursery.start_soon(_one_session, SERVICE_SETTINGS, waits)
    assert len(waits) == 200
    assert min(waits) >= 1000
    assert max(waits) <= 2000
    assert len(set(waits)) > 100
    assert trio.current_time() == max(waits) / 1000


async def test_r62_the_service_preset_waits_what_the_server_asks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-62: under SERVICE_SETTINGS a 503 with retry-after 30 is retried at 30 s (the
    defaults retry at 2 s), and the budget of 60 s is in effect."""
    error = "503 Service Unavailable\nretry-after: 30"
    provider = FauxProvider([FauxReply(error=error), FauxReply(text="ok")])
    async with open_session(provider, settings=SERVICE_SETTINGS) as session:
        assert session.settings.retry.max_total_ms == 60_000
        await session.prompt("hi")
    assert provider.request_times == [0.0, 30.0]
