"""The retry chain alone, through its host seam (``trio_session._retry.chain.ChainHost``).

No session, no agent: a ``ScriptHost`` answers the chain's needs from a script of
re-attempt results and records what the chain asked for. Every way a chain ends is
here, each with its exact ``auto_retry_end`` and virtual time — R-30's cancelled end
in one place.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

import attrs
import pytest
import trio
import trio.testing

from trio_session import AutoRetryEnd, AutoRetryStart, RetrySettings, SessionEvent, Settings
from trio_session._core.messages import AssistantMessage, TextContent
from trio_session._retry.chain import CANCELLED, Attempt, RetryChain
from trio_session._retry.decide import Next
from trio_session._retry.policy import RetryPolicy

from .conftest import PROFILES

ERROR = AssistantMessage(stop_reason="error", error_message="503 Service Unavailable")
ANSWER = AssistantMessage(content=(TextContent("done"),))


@attrs.define
class ScriptRun:
    """A re-attempt's run (``chain.Attempt``): its one answer is the script's next item."""

    host: ScriptHost
    produced: list[AssistantMessage] = attrs.field(factory=list)
    step: Next = Next.DONE

    def __enter__(self) -> ScriptRun:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    async def next_message(self) -> AssistantMessage:
        host = self.host
        host.reattempts.append(trio.current_time())
        if host.streams_for:
            await trio.sleep(host.streams_for)
        item = host.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        message, self.step = item
        self.produced.append(message)
        return message

    async def turns(self) -> AssistantMessage:
        return self.produced[-1]

    def end(self, *, will_retry: bool) -> AssistantMessage:
        return self.produced[-1]


@attrs.define
class ScriptHost:
    """A ``ChainHost`` whose re-attempts come from ``script``: each item is the message
    and what ``decide`` made of it, or an exception to raise as the run's answer comes."""

    script: list[tuple[AssistantMessage, Next] | BaseException]
    chain: RetryChain
    settings: RetrySettings = attrs.field(factory=RetrySettings)
    events: list[SessionEvent] = attrs.field(factory=list)
    dropped: list[AssistantMessage] = attrs.field(factory=list)
    reattempts: list[float] = attrs.field(factory=list)
    rotated: bool = False
    streams_for: float = 0.0  #: seconds each re-attempt's request takes

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy.resolve(Settings(retry=self.settings))

    @property
    def emit(self) -> Callable[[SessionEvent], None]:
        return self.events.append

    def chain_ended(self) -> None:
        return None

    def drop_from_context(self, message: AssistantMessage) -> None:
        self.dropped.append(message)

    async def rotate_credential(self, hint_ms: int | None) -> bool:
        return self.rotated

    async def share_cooldown(self, hint_ms: int) -> None:
        return None

    async def cooldown_delay(self, delay_ms: int) -> int:
        return delay_ms

    def reattempt(self, retried: AssistantMessage) -> ScriptRun:
        return ScriptRun(self)

    async def finish(self, attempt: Attempt) -> tuple[AssistantMessage, Next]:
        assert isinstance(attempt, ScriptRun)
        return await attempt.turns(), attempt.step


def _host(
    *script: tuple[AssistantMessage, Next] | BaseException, profile: str = "seed"
) -> ScriptHost:
    settings = RetrySettings(profile=profile)  # type: ignore[arg-type]
    return ScriptHost(list(script), RetryChain(), settings=settings)


async def test_success_on_the_first_reattempt(autojump_clock: trio.testing.MockClock) -> None:
    """R-16, R-19, R-20, R-21, R-23: start (attempt 1 of 3, 2000 ms), the error dropped,
    the re-attempt at t = 2, one successful end; the chain returns the answer."""
    host = _host((ANSWER, Next.DONE))
    left = await host.chain.run(host, ERROR, Next.RETRY)
    assert host.events == [
        AutoRetryStart(1, 3, 2000, "503 Service Unavailable"),
        AutoRetryEnd(success=True, attempt=1),
    ]
    assert host.dropped == [ERROR]
    assert host.reattempts == [2.0]
    assert left == (ANSWER, Next.DONE)
    assert host.chain.ended


@PROFILES
async def test_two_errors_then_success(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-13, R-16, R-53a: attempts 1 and 2 wait 2 s and 4 s, in both profiles (under the
    cap); the end names attempt 2."""
    host = _host((ERROR, Next.RETRY), (ANSWER, Next.DONE), profile=profile)
    await host.chain.run(host, ERROR, Next.RETRY)
    assert [e.delay_ms for e in host.events if isinstance(e, AutoRetryStart)] == [2000, 4000]
    assert host.reattempts == [2.0, 6.0]
    assert host.events[-1] == AutoRetryEnd(success=True, attempt=2)


async def test_give_up_ends_with_the_last_error(autojump_clock: trio.testing.MockClock) -> None:
    """R-15: ``decide`` gave up (its one maximum check): the end reports the attempts
    made, with the last error, and no start; nothing waits, nothing is dropped."""
    host = _host((ERROR, Next.GIVE_UP))
    host.settings = RetrySettings(max_retries=1)
    assert await host.chain.run(host, ERROR, Next.RETRY) is None
    assert host.events == [
        AutoRetryStart(1, 1, 2000, "503 Service Unavailable"),
        AutoRetryEnd(False, 1, "503 Service Unavailable"),
    ]
    assert trio.current_time() == 2.0


async def test_give_up_at_once(autojump_clock: trio.testing.MockClock) -> None:
    """R-15 with ``maxRetries`` 0: the chain ends at attempt 0 without a start."""
    host = _host()
    assert await host.chain.run(host, ERROR, Next.GIVE_UP) is None
    assert host.events == [AutoRetryEnd(False, 0, "503 Service Unavailable")]
    assert host.dropped == []


@PROFILES
async def test_a_different_error_ends_the_chain(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-25, R-55: in both profiles, a re-attempt that ends in a non-retryable error ends
    the chain with it; the chain hands the message back for the session to act on."""
    auth = AssistantMessage(stop_reason="error", error_message="401 Unauthorized")
    host = _host((auth, Next.DONE), profile=profile)
    assert await host.chain.run(host, ERROR, Next.RETRY) == (auth, Next.DONE)
    assert host.events[-1] == AutoRetryEnd(False, 1, "401 Unauthorized")


@PROFILES
@pytest.mark.parametrize("moment", [0.5, 1.0, 1.999])
async def test_r30_cancelled_in_the_sleep(
    autojump_clock: trio.testing.MockClock, moment: float, profile: str
) -> None:
    """R-29, R-30, R-34: ``cancel()`` during the backoff sleep ends the chain once, with
    "Retry cancelled", at that moment; no re-attempt is made (both profiles)."""
    host = _host((ANSWER, Next.DONE), profile=profile)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.chain.run, host, ERROR, Next.RETRY)
        await trio.sleep(moment)
        assert host.chain.waiting
        host.chain.cancel()
    assert host.events[-1] == AutoRetryEnd(False, 1, CANCELLED)
    assert [type(e) for e in host.events] == [AutoRetryStart, AutoRetryEnd]
    assert host.reattempts == []
    assert trio.current_time() == moment


async def test_a_cancelled_sleep_keeps_nothing_of_the_canceller(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The sleep's ``Cancelled`` is raised in the chain's own task, not in the call that
    cancelled it: that call's frame (here holding a marker) is freed on return, not kept
    by a traceback until the chain next runs (``cancel_all.abort_retry`` cancels 10 000
    sessions in one scheduler pass)."""

    class Marker:
        pass

    def cancel_holding(marker: Marker) -> None:
        host.chain.cancel()

    host = _host((ANSWER, Next.DONE))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.chain.run, host, ERROR, Next.RETRY)
        await trio.sleep(1)
        marker = Marker()
        gone = weakref.ref(marker)
        cancel_holding(marker)
        del marker
        assert gone() is None  # no checkpoint since the cancel: the chain has not run yet
        assert host.chain.alive
    assert host.events[-1] == AutoRetryEnd(False, 1, CANCELLED)
    assert host.reattempts == []
    assert trio.current_time() == 1


async def test_an_ended_chain_keeps_no_task(autojump_clock: trio.testing.MockClock) -> None:
    """The session keeps its last chain until the next prompt; the task that ran it
    (and what that task holds) is not kept with it."""
    host = _host((ANSWER, Next.DONE))
    ran_in: list[weakref.ref[trio.lowlevel.Task]] = []

    async def run() -> None:
        ran_in.append(weakref.ref(trio.lowlevel.current_task()))
        await host.chain.run(host, ERROR, Next.RETRY)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
    gc.collect()
    assert ran_in[0]() is None
    assert host.chain.ended


@PROFILES
async def test_r30_cancelled_during_the_reattempt(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-31, R-30: the scope encloses the re-attempt: cancelled while it streams, the
    chain ends "Retry cancelled" at that moment (both profiles)."""
    host = _host((ANSWER, Next.DONE), profile=profile)
    host.streams_for = 1.0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.chain.run, host, ERROR, Next.RETRY)
        await trio.sleep(2.5)
        assert not host.chain.waiting
        host.chain.cancel()
    assert host.events[-1] == AutoRetryEnd(False, 1, CANCELLED)
    assert host.reattempts == [2.0]
    assert trio.current_time() == 2.5


async def test_r30_cancelled_from_outside(autojump_clock: trio.testing.MockClock) -> None:
    """R-33, R-30: a scope around the chain (the prompt's, a caller's timeout) cancelled
    ends it the same way, once."""
    host = _host((ANSWER, Next.DONE))
    with trio.move_on_after(1):
        await host.chain.run(host, ERROR, Next.RETRY)
    assert host.events[-1] == AutoRetryEnd(False, 1, CANCELLED)
    assert sum(isinstance(e, AutoRetryEnd) for e in host.events) == 1


async def test_cancel_after_the_end_changes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-34: an ended chain ignores ``cancel()`` and ``skip_wait()``: still one end."""
    host = _host((ANSWER, Next.DONE))
    await host.chain.run(host, ERROR, Next.RETRY)
    host.chain.cancel()
    assert not host.chain.skip_wait()
    assert sum(isinstance(e, AutoRetryEnd) for e in host.events) == 1


@PROFILES
async def test_skip_wait_reattempts_at_once(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-34a: ``skip_wait()`` ends the sleep: the re-attempt is made at that moment (both
    profiles)."""
    host = _host((ANSWER, Next.DONE), profile=profile)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.chain.run, host, ERROR, Next.RETRY)
        await trio.sleep(0.25)
        assert host.chain.skip_wait()
        assert not host.chain.waiting
        assert not host.chain.skip_wait()  # already over
    assert host.reattempts == [0.25]


@PROFILES
async def test_cancel_between_the_wait_and_the_reattempt_makes_no_request(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-29, R-30: ``cancel()`` in the instant the wait is over and the chain's task has
    not run yet (``skip_wait()`` then ``cancel()``, no checkpoint between) ends the chain
    "Retry cancelled" there: no re-attempt is made."""
    host = _host((ANSWER, Next.DONE), profile=profile)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.chain.run, host, ERROR, Next.RETRY)
        await trio.sleep(0.25)
        assert host.chain.skip_wait()
        host.chain.cancel()
    assert host.events == [
        AutoRetryStart(1, 3, 2000, ERROR.error_message or ""),
        AutoRetryEnd(False, 1, CANCELLED),
    ]
    assert host.reattempts == []
    assert trio.current_time() == 0.25


async def test_cancel_before_the_chain_runs_ends_it_before_any_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``cancel()`` between the chain's start (``start_soon``) and its first step: the
    attempt is announced and ended "Retry cancelled" at once -- what pi shows, where
    ``auto_retry_start`` goes out in the same step as the error -- with nothing waited
    and nothing re-attempted."""
    host = _host((ANSWER, Next.DONE))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.chain.run, host, ERROR, Next.RETRY)
        host.chain.cancel()
    assert host.events == [
        AutoRetryStart(1, 3, 2000, ERROR.error_message or ""),
        AutoRetryEnd(False, 1, CANCELLED),
    ]
    assert host.reattempts == []
    assert trio.current_time() == 0


@PROFILES
async def test_cancel_in_the_second_wait(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-29, R-30: after a failed re-attempt the chain waits again (4 s, attempt 2); a
    ``cancel()`` there ends it at that moment, and ``waiting`` holds only until then."""
    host = _host((ERROR, Next.RETRY), (ANSWER, Next.DONE), profile=profile)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(host.chain.run, host, ERROR, Next.RETRY)
        await trio.sleep(3.0)  # the first wait (2 s) is over; the second runs until 6 s
        assert host.chain.waiting
        host.chain.cancel()
        assert not host.chain.waiting
    assert host.reattempts == [2.0]
    assert host.events[-1] == AutoRetryEnd(False, 2, CANCELLED)
    assert [type(e) for e in host.events] == [AutoRetryStart, AutoRetryStart, AutoRetryEnd]
    assert trio.current_time() == 3.0


async def test_a_failing_reattempt_ends_the_chain_with_its_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A re-attempt that raises (the session file could not be written) ends the chain
    with the exception's text, and the exception propagates."""
    host = _host(OSError("disk full"))
    with pytest.raises(OSError, match=r"^disk full$"):
        await host.chain.run(host, ERROR, Next.RETRY)
    assert host.events[-1] == AutoRetryEnd(False, 1, "disk full")


@PROFILES
async def test_a_usage_limit_with_a_spare_key_does_not_wait(
    autojump_clock: trio.testing.MockClock, profile: str
) -> None:
    """R-17, R-55: when the host rotated to another key, the re-attempt goes at once (both
    profiles)."""
    limit = AssistantMessage(stop_reason="error", error_message="429 usage limit reached")
    host = _host((ANSWER, Next.DONE), profile=profile)
    host.rotated = True
    await host.chain.run(host, limit, Next.RETRY)
    assert host.events[0] == AutoRetryStart(1, 3, 0, "429 usage limit reached")
    assert host.reattempts == [0.0]


@pytest.mark.parametrize(("profile", "waits"), [("seed", [90_000]), ("pi-1.6", [60_000])])
async def test_the_chain_plans_by_profile(
    autojump_clock: trio.testing.MockClock, profile: str, waits: list[int]
) -> None:
    """R-53a: baseDelayMs 90 000: the seed waits it, pi-1.6 waits maxAgentDelayMs 60 000."""
    host = _host((ANSWER, Next.DONE), profile=profile)
    host.settings = attrs.evolve(host.settings, base_delay_ms=90_000)
    await host.chain.run(host, ERROR, Next.RETRY)
    assert [e.delay_ms for e in host.events if isinstance(e, AutoRetryStart)] == waits
    assert host.reattempts == [waits[0] / 1000]
