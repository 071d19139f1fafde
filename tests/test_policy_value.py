"""The policy as one value (issue 40): ``RetryPolicy`` is what every decision asks.

A run's end, a compaction's summary request and the tracer's labels choose the same
classifier; the one stop rule holds the maximum and the time budget at their exact
boundaries. Time-dependent tests run on the autojump clock with exact virtual times.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_session
from trio_session import (
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    FauxProvider,
    Model,
    RetrySettings,
    Settings,
    SummarizationRetryScheduled,
    open_session,
)
from trio_session._core.messages import AssistantMessage
from trio_session._retry.backoff import stop
from trio_session._retry.chain import RetryChain
from trio_session._retry.classify import CLASSIFIERS
from trio_session._retry.decide import Next
from trio_session._retry.policy import RetryPolicy
from trio_session.testing import EventRecorder

from .conftest import ERR_503, ERR_OVERFLOW, err, ok
from .test_retry_chain import ERROR, ScriptHost

MODEL = Model(id="small", provider="faux", context_window=1000, max_tokens=100)
HANG_UP = "socket hang up"
PI16 = {"retry": {"profile": "pi-1.6"}}
#: pi 1.6.0's cut at the third-last message of these one-token contexts, so an overflow
#: after two turns has the first to summarise (R-56a).
KEEP3 = {"compaction": {"keepRecentTokens": 3}}
PI16_KEEP3 = {**PI16, **KEEP3}


def test_one_classifier_choice_per_profile() -> None:
    """R-53, R-57: the policy's classifier is the profile's table, "strict" wins in
    either profile, and a session's own classifier wins over both."""
    seed = RetryPolicy.resolve(Settings())
    pi16 = RetryPolicy.resolve(Settings(retry=RetrySettings(profile="pi-1.6")))
    strict = RetryPolicy.resolve(
        Settings(retry=RetrySettings(profile="pi-1.6", classifier="strict"))
    )
    own = CLASSIFIERS["strict"]
    assert seed.classifier is CLASSIFIERS["seed"]
    assert pi16.classifier is CLASSIFIERS["pi-1.6"]
    assert strict.classifier is CLASSIFIERS["strict"]
    assert RetryPolicy.resolve(Settings(), own).classifier is own
    assert (seed.pi16, pi16.pi16) == (False, True)


def test_a_failure_is_labelled_by_the_same_classifier_that_decides() -> None:
    """R-53: the tracer's label for "socket hang up" follows the profile, as the
    decision after a run does: fatal under the seed, retryable under pi-1.6."""
    message = AssistantMessage(stop_reason="error", error_message=HANG_UP)
    seed = RetryPolicy.resolve(Settings())
    pi16 = RetryPolicy.resolve(Settings(retry=RetrySettings(profile="pi-1.6")))
    assert seed.label(message, None) == "fatal"
    assert pi16.label(message, None) == "retryable"


@pytest.mark.parametrize(
    ("attempt", "spent_ms", "delay_ms", "expected"),
    [
        (3, None, 0, None),  # the last re-attempt the maximum allows
        (4, None, 0, "max"),  # one past it
        (1, 2000, 4000, None),  # ends exactly at the budget: made
        (1, 2000, 4001, "budget"),  # one millisecond past it
        (1, None, 10**9, None),  # no time counted: the budget is not judged
        (4, 2000, 4001, "max"),  # the maximum is judged first
    ],
)
def test_the_one_stop_rule_at_its_boundaries(
    attempt: int, spent_ms: int | None, delay_ms: int, expected: str | None
) -> None:
    """R-15, R-27, R-61: re-attempt ``maxRetries`` is made, the next is not; a wait that
    ends exactly at ``maxTotalMs`` is made, one millisecond more is not."""
    settings = RetrySettings(max_retries=3, max_total_ms=6000)
    assert stop(attempt, settings, spent_ms=spent_ms, delay_ms=delay_ms) == expected


async def test_r61_a_wait_that_ends_exactly_at_the_budget_is_made(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-61: with maxTotalMs 6000 the second wait (4 s, from 2 s) ends exactly at the
    budget, so it is slept and the second re-attempt made; the third (8 s) is refused."""
    host = ScriptHost([(ERROR, Next.RETRY), (ERROR, Next.RETRY)], RetryChain())
    host.settings = RetrySettings(max_total_ms=6000)
    assert await host.chain.run(host, ERROR, Next.RETRY) is None
    assert host.events[:2] == [
        AutoRetryStart(1, 3, 2000, "503 Service Unavailable"),
        AutoRetryStart(2, 3, 4000, "503 Service Unavailable"),
    ]
    assert host.reattempts == [2.0, 6.0]
    end = host.events[-1]
    assert isinstance(end, AutoRetryEnd)
    assert (end.success, end.attempt) == (False, 2)
    assert trio.current_time() == 6.0


async def test_r56f_a_summary_request_ending_in_socket_hang_up_is_retried_pi16(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-56f, R-58 (pi-1.6): "socket hang up" on the summary request is retried, as a
    run ending with it is: one scheduled retry at 0 s, the summary sent again at 2 s."""
    provider = FauxProvider(
        [ok("a1"), ok("a2"), err(ERR_OVERFLOW), err(HANG_UP), ok("the summary"), ok("a3")]
    )
    async with open_session(provider, MODEL, settings=PI16_KEEP3) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        reply = await session.prompt("q3")
    assert reply.text == "a3"
    assert rec.of(SummarizationRetryScheduled) == [SummarizationRetryScheduled(1, 3, 2000, HANG_UP)]
    (end,) = rec.of(CompactionEnd)
    assert end.result is not None
    assert end.result.summary == "the summary"
    assert provider.request_times[3:] == [0.0, 2.0, 2.0]


async def test_r56f_the_summary_request_is_retried_at_most_max_retries_times_pi16(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-56f (pi-1.6): with maxRetries 2 a summary request that always fails is sent
    three times (two retries, at 2 s and 4 s more), never a fourth."""
    provider = FauxProvider(
        [ok("a1"), ok("a2"), err(ERR_OVERFLOW), err(ERR_503), err(ERR_503), err(ERR_503)]
        + [ok("spare")] * 3
    )
    settings = {"retry": {"profile": "pi-1.6", "maxRetries": 2}, **KEEP3}
    async with open_session(provider, MODEL, settings=settings) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        rec = EventRecorder.attach(session)
        await session.prompt("q3")
    scheduled = rec.of(SummarizationRetryScheduled)
    assert [(s.attempt, s.max_attempts, s.delay_ms) for s in scheduled] == [
        (1, 2, 2000),
        (2, 2, 4000),
    ]
    assert provider.request_times[3:6] == [0.0, 2.0, 6.0]


def _profile_reads(source: str) -> list[int]:
    """Lines that read ``<…>.retry.profile`` (or ``retry.profile``) as an expression."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "profile":
            owner = node.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name == "retry":
                found.append(node.lineno)
    return found


def test_retry_profile_is_read_in_one_place() -> None:
    """Every decision under a profile asks ``_retry/profile.py`` (``retry_profile``,
    ``is_pi16``): no other module of the package reads ``retry.profile`` itself."""
    package = Path(trio_session.__file__).parent
    readers = {
        str(path.relative_to(package)): lines
        for path in sorted(package.rglob("*.py"))
        if (lines := _profile_reads(path.read_text(encoding="utf-8")))
    }
    assert set(readers) == {"_retry/profile.py"}
    assert _profile_reads("x = settings.retry.profile == 'pi-1.6'\n") == [1]
