"""When the kit counts a run as over (``Agent.settle``), on a virtual clock.

The events arrive through the kit's own line reader, at the times a slow agent would
write them: pi 0.73.1's compaction sends its summary request through the OpenAI client,
which sits out a 503 for about half a second before sending it again, with no event
meanwhile. Under load that gap outlasted the kit's quiet time, and the kit judged a run
that was still compacting (issue 39, the load-dependent `summary-retry` verdict).
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
from trio_session.conformance._checks import QUIET


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
