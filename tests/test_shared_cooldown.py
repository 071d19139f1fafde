"""R-28b ``retry.sharedCooldown``: one session's server wait hint holds every session on that key.

Sessions of one process share an ``InMemoryCredentialStore``'s cooldowns; a Redis
store shares them between workers (the last test, on a real ``redis-server``).
Virtual time, exact where jitter allows: a cooldown's wait is what is left of it
plus 0–20 % (at most 2 s).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
import trio.testing

from tests.conftest import err, ok, retry_settings
from tests.redis_support import running_redis
from trio_session import AutoRetryStart, FauxProvider, InMemoryCredentialStore, open_session
from trio_session.store._redis_credentials import open_redis_credentials

RATE_LIMITED = "429 Too Many Requests\nretry-after: 5"


def store() -> InMemoryCredentialStore:
    return InMemoryCredentialStore(
        keys={"faux": ["sk-one"]}, clock=trio.current_time, rng=random.Random(7)
    )


async def first_hits_the_limit(
    settings: dict[str, Any], credentials: InMemoryCredentialStore
) -> tuple[FauxProvider, FauxProvider, list[AutoRetryStart], list[AutoRetryStart]]:
    """Session 1 gets a 429 with ``retry-after: 5`` at t = 0; session 2 prompts at
    t = 1 (during session 1's backoff); both then succeed."""
    one = FauxProvider([err(RATE_LIMITED), ok()])
    two = FauxProvider([ok()])
    starts_one: list[AutoRetryStart] = []
    starts_two: list[AutoRetryStart] = []
    async with (
        open_session(one, settings=settings, credentials=credentials) as s1,
        open_session(two, settings=settings, credentials=credentials) as s2,
    ):
        s1.subscribe(lambda e: starts_one.append(e) if isinstance(e, AutoRetryStart) else None)
        s2.subscribe(lambda e: starts_two.append(e) if isinstance(e, AutoRetryStart) else None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s1.prompt, "Hi")
            await trio.sleep(1)
            assert s1.is_waiting_to_retry
            await s2.prompt("Hi")
    return one, two, starts_one, starts_two


async def test_off_by_default_nobody_else_waits(autojump_clock: trio.testing.MockClock) -> None:
    one, two, starts, _ = await first_hits_the_limit(retry_settings(), store())
    assert [e.delay_ms for e in starts] == [2000]  # the reference's backoff, hint unused
    assert one.request_times == [0.0, 2.0]
    assert two.request_times == [1.0]


async def test_the_hint_holds_every_session_on_the_key(
    autojump_clock: trio.testing.MockClock,
) -> None:
    one, two, starts, starts_two = await first_hits_the_limit(
        retry_settings(sharedCooldown=True), store()
    )
    (start,) = starts
    assert 5000 <= start.delay_ms <= 6000  # the hint, plus jitter, in delayMs
    assert one.request_times == [0.0, start.delay_ms / 1000]
    (sent,) = two.request_times
    assert 5.0 <= sent <= 6.0  # session 2's fresh prompt waited for the cooldown too
    assert sent != one.request_times[1]  # jitter: they do not wake together
    assert starts_two == []  # a fresh prompt's wait is no retry


async def test_a_chain_without_a_hint_waits_for_the_cooldown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Session 2's request went out at t = 0, before session 1's 429; its own 503 (no
    hint) comes at t = 1: its chain waits out the 4 s left of session 1's cooldown."""
    credentials = store()
    settings = retry_settings(sharedCooldown=True)
    one = FauxProvider([err(RATE_LIMITED), ok()])
    two = FauxProvider([err(delay=1), ok()])
    starts: list[AutoRetryStart] = []
    async with (
        open_session(one, settings=settings, credentials=credentials) as s1,
        open_session(two, settings=settings, credentials=credentials) as s2,
    ):
        s2.subscribe(lambda e: starts.append(e) if isinstance(e, AutoRetryStart) else None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s2.prompt, "Hi")
            await s1.prompt("Hi")
    (start,) = starts
    assert 4000 <= start.delay_ms <= 4800
    assert two.request_times == [0.0, 1 + start.delay_ms / 1000]


async def test_the_wait_is_capped_by_max_delay(autojump_clock: trio.testing.MockClock) -> None:
    """R-28b: no single wait is longer than ``retry.maxDelayMs``, a cooldown's neither."""
    one, two, starts, _ = await first_hits_the_limit(
        retry_settings(sharedCooldown=True, maxDelayMs=3000), store()
    )
    assert [e.delay_ms for e in starts] == [3000]
    assert one.request_times == [0.0, 3.0]
    assert two.request_times == [4.0]  # prompted at t = 1, waited 3 s of the 4 s left


async def test_abort_ends_a_fresh_prompt_s_wait(autojump_clock: trio.testing.MockClock) -> None:
    credentials = store()
    settings = retry_settings(sharedCooldown=True, maxRetries=0)
    one = FauxProvider([err(RATE_LIMITED)])
    two = FauxProvider([ok()])
    async with (
        open_session(one, settings=settings, credentials=credentials) as s1,
        open_session(two, settings=settings, credentials=credentials) as s2,
    ):
        await credentials.share_cooldown("faux", s1.session_id, base_url="", wait_ms=60_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s2.prompt, "Hi")
            await trio.sleep(1)
            assert s2.is_running
            await s2.abort()
            assert trio.current_time() == 1.0
        assert two.request_times == []


@pytest.mark.parametrize("base_url", ["", "https://other.example/v1"])
async def test_cooldowns_are_per_base_url(base_url: str) -> None:
    credentials = InMemoryCredentialStore(keys={"faux": ["sk-one"]}, rng=random.Random(1))
    await credentials.share_cooldown("faux", "s1", base_url="", wait_ms=60_000)
    wait = await credentials.cooldown_ms("faux", "s2", base_url=base_url)
    if base_url:
        assert wait == 0
    else:
        assert 59_000 < wait <= 72_000


async def test_redis_shares_the_cooldown_between_workers() -> None:
    """R-28b: two workers on one Redis: worker 1's hint holds worker 2's session on that key,
    and never a session on another base URL."""
    with running_redis() as server:
        keys = {"openai": ["sk-test-aaaaaaaaaaaaaaaa-1111"]}
        async with (
            open_redis_credentials(server.url, keys=keys, call_timeout=10) as one,
            open_redis_credentials(server.url, keys=keys, call_timeout=10) as two,
        ):
            url = "https://api.example/v1"
            assert await two.cooldown_ms("openai", "w2", base_url=url) == 0
            await one.share_cooldown("openai", "w1", base_url=url, wait_ms=30_000)
            wait = await two.cooldown_ms("openai", "w2", base_url=url)
            assert 25_000 < wait <= 30_000 * 1.2
            assert await two.cooldown_ms("openai", "w2", base_url="https://else/v1") == 0
            # a shorter hint never shortens it
            await two.share_cooldown("openai", "w2", base_url=url, wait_ms=1_000)
            assert await one.cooldown_ms("openai", "w1", base_url=url) > 25_000
