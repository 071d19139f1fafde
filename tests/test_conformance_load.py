"""The kit's judgement on a loaded machine: when it counts a run as over
(``Agent.settle``), and how late a re-attempt may come (``Run.expect_spacing``), on a
virtual clock.

The events arrive through the kit's own line reader, at the times a slow agent would
write them: pi 0.73.1's compaction sends its summary request through the OpenAI client,
which sits out a 503 for about half a second before sending it again, with no event
meanwhile. Under load that gap outlasted the kit's quiet time, and the kit judged a run
that was still compacting (issue 39, the load-dependent `summary-retry` verdict). And
at a load average of 7 on two cores pi 0.73.1's re-attempt once came later than R-21's
tolerance: the machine was late, not its sleep (`delay-cap` judged FAIL).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from trio_session.conformance._agent import Agent
from trio_session.conformance._checks import QUIET, LagProbe, Run, tolerance_ms
from trio_session.conformance._server import LoopbackLLM, Request


@pytest.fixture
async def agent() -> AsyncIterator[Agent]:
    # The kit's Agent holds a process; settle reads only the events. A real, idle one.
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=-1
    )
    try:
        yield Agent(process)
    finally:
        process.kill()
        await process.wait()


def write(agent: Agent, type_: str, **fields: Any) -> None:
    agent._line(json.dumps({"type": type_, **fields}).encode())


Script = list[tuple[float, str, dict[str, Any]]]


async def settle_time(agent: Agent, script: Script) -> float:
    """Write ``script``'s events at their times (seconds after start) while the kit
    settles; the virtual time at which settle said the run was over."""
    over: list[float] = []

    async def settle() -> None:
        assert await agent.settle(0, QUIET, 60.0)
        over.append(trio.current_time())

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(settle)
        for at, type_, fields in script:
            await trio.sleep_until(start + at)
            write(agent, type_, **fields)
    return over[0] - start


async def test_an_open_compaction_is_waited_for_past_the_quiet_time(
    agent: Agent, autojump_clock: trio.testing.MockClock
) -> None:
    # agent_end (the overflow), the compaction begins, and its summary request sits out
    # two seconds of a client-side retry: the run is over QUIET after its re-sent turn.
    script: Script = [
        (0.0, "agent_start", {}),
        (0.1, "agent_end", {}),
        (0.1, "compaction_start", {"reason": "overflow"}),
        (2.1, "compaction_end", {"reason": "overflow", "willRetry": True}),
        (4.1, "agent_start", {}),
        (4.2, "agent_end", {}),
    ]
    assert await settle_time(agent, script) == pytest.approx(4.2 + QUIET)


async def test_a_compaction_that_ends_without_a_resend_ends_the_run(
    agent: Agent, autojump_clock: trio.testing.MockClock
) -> None:
    script: Script = [
        (0.0, "agent_start", {}),
        (0.1, "agent_end", {}),
        (0.1, "compaction_start", {"reason": "overflow"}),
        (2.1, "compaction_end", {"reason": "overflow", "willRetry": False}),
    ]
    assert await settle_time(agent, script) == pytest.approx(2.1 + QUIET)


async def test_a_run_without_a_compaction_is_over_after_the_quiet_time(
    agent: Agent, autojump_clock: trio.testing.MockClock
) -> None:
    # An event that came later than the quiet time is not waited for: the kit had
    # already counted the run as over (a retry would have announced itself).
    script: Script = [(0.0, "agent_start", {}), (0.1, "agent_end", {}), (2.0, "message_end", {})]
    assert await settle_time(agent, script) == pytest.approx(0.1 + QUIET)


def spacing(agent: Agent, gap_ms: int, lag: LagProbe | None) -> tuple[bool, str]:
    """Judge one re-attempt ``gap_ms`` after its failed request's answer, announced at
    1000 ms: (ok, observed)."""
    write(agent, "auto_retry_start", attempt=1, maxAttempts=3, delayMs=1000)
    server = LoopbackLLM()
    server.requests[:] = [
        Request("/v1/chat/completions", {}, 0.0, answered=0.1),
        Request("/v1/chat/completions", {}, 0.1 + gap_ms / 1000, answered=2.0),
    ]
    run = Run(agent, server, 1000, lag=lag)
    run.expect_spacing(0)
    check = run.checks[-1]
    return check.ok, check.observed


async def test_a_late_reattempt_passes_when_the_kit_was_as_late(agent: Agent) -> None:
    """R-21: 1000 ms announced, 1000 + tolerance + 200 ms seen: a FAIL on a quiet machine;
    a pass, saying why, when the kit's own timers were 300 ms late meanwhile."""
    late = 1000 + round(tolerance_ms(1000)) + 200
    assert spacing(agent, late, None) == (False, f"gaps {late} ms")
    assert spacing(agent, late, LagProbe(worst=0.3)) == (
        True,
        f"gaps {late} ms (late by no more than the kit's own timers were: 300 ms)",
    )
    assert spacing(agent, late, LagProbe(worst=0.1))[0] is False


async def test_an_early_reattempt_fails_whatever_the_load(agent: Agent) -> None:
    """A sleep cut short is never the machine's doing: early past the tolerance fails
    even when the kit's timers were seconds late."""
    early = 1000 - round(tolerance_ms(1000)) - 50
    assert spacing(agent, early, LagProbe(worst=5.0)) == (False, f"gaps {early} ms")


async def test_the_probe_measures_how_late_timers_wake(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``LagProbe.worst`` is the latest wake-up past a deadline: none on a virtual clock
    that never runs late, and exactly the stall when the loop is held."""
    probe = LagProbe()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(probe.run)
        await trio.sleep(1)
        assert probe.worst == 0.0
        # a stall: the clock moves 0.25 s while no task runs
        await trio.sleep(0.005)
        autojump_clock.jump(0.25)
        await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert probe.worst == pytest.approx(0.245, abs=0.006)
