"""R-69: the fleet's rate budget on a real ``redis-server`` — worker processes never take
more than the budget, a worker falls back to its share while Redis is away and comes
back, an abort ends a wait and leaves Redis as it was, and Redis holds no secret."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.redis_support import running_redis
from trio_session import FauxProvider, Model, RateLimits, open_session
from trio_session._agent.rate_budget import MINUTE_US, BudgetKey, Cost, Outcome
from trio_session._core.rate_headers import RateDimension, RateLimitHeaders
from trio_session.store._credentials_file import fingerprint
from trio_session.store._redis_budget import RedisGrant
from trio_session.store._redis_credentials import open_redis_credentials

from .conftest import ok

ROOT = Path(__file__).resolve().parent.parent
KEY = BudgetKey("openai", "0123456789abcdef", "gpt-test")
PREFIX = "trio-session:{openai}:rate:0123456789abcdef:gpt-test"


def over_budget(grants: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every window ``[t_i, t_j]`` whose grants cost more than a bucket allows: the
    minute plus the window's length (costs and times in µs). Empty: within the budget."""
    bad = []
    for i in range(len(grants)):
        spent = 0
        for j in range(i, len(grants)):
            spent += grants[j][1]
            if spent > MINUTE_US + grants[j][0] - grants[i][0]:
                bad.append((i, j))
    return bad


def test_worker_processes_never_take_more_than_the_budget() -> None:
    """R-69: 4 processes × 4 tasks take 660 permits of a 600 requests / 60 000 tokens a
    minute budget at once: no window of the grants, on Redis's clock, holds more than the
    budget allows (tolerance 0: the times are Redis's µs, the increments exact)."""
    permits = 165
    with running_redis() as server:
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.rate_budget_worker",
                    server.url,
                    str(permits),
                    str(n),
                ],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(4)
        ]
        try:
            for worker in workers:
                assert worker.stdout is not None
                assert worker.stdout.readline() == "ready\n"
            for worker in workers:  # every worker is connected: start them together
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
            outputs = [worker.communicate(timeout=300)[0] for worker in workers]
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
    assert [worker.returncode for worker in workers] == [0, 0, 0, 0]
    lines = [json.loads(line) for output in outputs for line in output.splitlines()]
    assert len(lines) == 4 * permits
    lines.sort(key=lambda line: line["t"])
    requests = [(line["t"], MINUTE_US // 600) for line in lines]
    tokens = [(line["t"], line["tokens"] * MINUTE_US // 60_000) for line in lines]
    assert over_budget(requests) == []
    assert over_budget(tokens) == []
    # the budget was the bound: 60 more than a minute's 600 requests took 6 s at least
    assert lines[-1]["t"] - lines[0]["t"] >= 6_000_000


def test_the_checker_sees_a_window_over_budget() -> None:
    """The oracle of the test above finds a burst of 601 requests of a 600 a minute budget."""
    grants = [(t, MINUTE_US // 600) for t in range(601)]
    assert over_budget(grants[:600]) == []
    assert over_budget(grants) == [(0, 600)]


async def test_redis_down_each_worker_takes_its_share_then_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """R-69: two workers seen; Redis killed: a worker's permits come from its share, half
    the limit, on a bucket that starts empty (one warning); Redis back: the permits are
    the fleet's again (one info record), with what the share used written back."""
    caplog.set_level(logging.INFO, logger="trio_session.credentials")
    limits = RateLimits(requests_per_minute=600)
    cost = Cost.of(limits, 0)
    waits: list[int | None] = []
    with running_redis() as server:
        async with (
            open_redis_credentials(server.url, call_timeout=10, reconnect_interval=0) as one,
            open_redis_credentials(server.url, call_timeout=10, reconnect_interval=0) as two,
        ):
            await one.rate_budget().permit(KEY, cost, waits.append)
            await two.rate_budget().permit(KEY, cost, waits.append)
            budget = one.rate_budget()
            first = await budget.permit(KEY, cost, waits.append)  # it sees two now
            assert isinstance(first, RedisGrant)
            assert first.granted_at_us is not None
            assert (budget.status, budget.workers) == ("redis", 2)
            server.stop()
            for _ in range(2):
                grant = await budget.permit(KEY, cost, waits.append)
                assert isinstance(grant, RedisGrant)
                assert grant.granted_at_us is None
            assert str(budget.status) == "local-fallback"  # mypy narrowed it to "redis"
            # 600 a minute for 2 workers: 300 each, one per 200 ms, from an empty bucket (the
            # second wait is what is left of 200 ms once the first sleep has overrun)
            assert waits[0] == 200
            assert all(wait is not None and 0 < wait <= 200 for wait in waits[1:])
            server.start()
            back = await budget.permit(KEY, cost, waits.append)
            assert isinstance(back, RedisGrant)
            assert back.granted_at_us is not None
            assert budget.status == "redis"
            # the share's use, owed to the fleet: about half a minute of the whole limit
            assert int(server.command("PTTL", f"{PREFIX}:requests") or 0) > 20_000
    records = [r for r in caplog.records if r.name == "trio_session.credentials"]
    assert [r.levelname for r in records] == ["WARNING", "INFO"]
    where = re.escape(server.url)
    assert re.fullmatch(
        rf"rate budget {where} unreachable \(.+\): this worker uses its share, 1/2 of each "
        r"limit, until it is back",
        records[0].getMessage(),
    )
    assert records[1].getMessage() == (
        f"rate budget {server.url} reachable again; permits are the fleet's"
    )


async def test_abort_ends_a_redis_budget_wait_and_leaves_redis_as_it_was() -> None:
    """R-69: cancelling a permit's wait (what ``abort()`` does) ends it at once and leaves
    the budget's keys in Redis as they were: nothing is booked while a permit waits."""
    cost = Cost.of(RateLimits(requests_per_minute=1, tokens_per_minute=1000), 10)
    waits: list[int | None] = []
    with running_redis() as server:
        async with open_redis_credentials(server.url, call_timeout=10) as store:
            budget = store.rate_budget()
            await budget.permit(KEY, cost, waits.append)
            before = [server.command("GET", f"{PREFIX}:{d}") for d in ("requests", "tokens")]
            start = trio.current_time()
            with trio.CancelScope() as scope:

                def abort_when_waiting(delay_ms: int | None) -> None:
                    waits.append(delay_ms)
                    scope.cancel()  # as abort() would, once the wait has begun

                await budget.permit(KEY, cost, abort_when_waiting)
            assert scope.cancelled_caught
            assert trio.current_time() - start < 5  # not the minute's wait
            after = [server.command("GET", f"{PREFIX}:{d}") for d in ("requests", "tokens")]
    assert after == before
    assert len(waits) == 1
    assert waits[0] is not None
    assert 59_000 < waits[0] <= 60_000


async def test_a_session_with_the_redis_store_uses_the_fleet_s_budget() -> None:
    """R-69: a session given the Redis credential store draws from the budget in Redis,
    keyed by the key's fingerprint and the model; no key or value there holds the key.
    The faux answers report no usage: their tokens went back (a full bucket has no key)."""
    secret = "sk-test-secret-0000000000000000-9999"
    model = Model("faux-model", "faux")
    with running_redis() as server:
        async with (
            open_redis_credentials(server.url, keys={"faux": [secret]}, call_timeout=10) as store,
            open_session(
                FauxProvider([ok(), ok()]),
                model,
                credentials=store,
                settings={"rateLimit": {"requestsPerMinute": 100, "tokensPerMinute": 100_000}},
            ) as session,
        ):
            await session.prompt("Hi")
            await session.prompt("Hi")
            keys = sorted((server.command("KEYS", "*") or "").splitlines())
            values = [server.command("GET", k) for k in keys if not k.endswith("workers")]
    base = f"trio-session:{{faux}}:rate:{fingerprint(secret)}:faux-model"
    assert keys == ["trio-session:{faux}:rate-workers", f"{base}:requests"]
    assert all(secret not in text for text in [*keys, *map(str, values)])


async def test_a_429_drains_the_fleet_s_budget() -> None:
    """R-69: a 429 with a 5 s hint on one worker drains the budget in Redis: another
    worker's next permit waits the hint, then the budget's pace (600 a minute: 100 ms)."""
    cost = Cost.of(RateLimits(requests_per_minute=600), 0)
    waits: list[int | None] = []
    with running_redis() as server:
        async with (
            open_redis_credentials(server.url, call_timeout=10) as one,
            open_redis_credentials(server.url, call_timeout=10) as two,
        ):
            grant = await one.rate_budget().permit(KEY, cost, waits.append)
            await grant.settle(Outcome(drain_us=5_000_000))
            with trio.CancelScope() as scope:

                def heard(delay_ms: int | None) -> None:
                    waits.append(delay_ms)
                    scope.cancel()  # the wait it foresees is all this test needs

                await two.rate_budget().permit(KEY, cost, heard)
    assert len(waits) == 1
    assert waits[0] is not None
    assert 4_900 < waits[0] <= 5_100


async def test_a_learned_limit_reaches_a_second_worker() -> None:
    """R-69: what one worker's response headers taught (2 requests a minute, none left for
    30 s) is stored beside the budget, no secret in it: a second worker that never saw a
    header reads the limit, and its permit waits for the reset (cancelled once told)."""
    stated = RateLimitHeaders(RateDimension(2, 0, 30_000))
    waits: list[int | None] = []
    with running_redis() as server:
        async with (
            open_redis_credentials(server.url, call_timeout=10) as one,
            open_redis_credentials(server.url, call_timeout=10) as two,
        ):
            await one.rate_budget().learn(KEY, stated)
            assert server.command("GET", f"{PREFIX}:learned") == "2 0"
            learned = await two.rate_budget().learned(KEY)
            assert learned == RateLimits(requests_per_minute=2)
            with trio.CancelScope() as scope:

                def told(delay_ms: int | None) -> None:
                    waits.append(delay_ms)
                    scope.cancel(reason="told")

                await two.rate_budget().permit(KEY, Cost.of(learned, 0), told)
    (delay,) = waits
    assert delay is not None
    assert 20_000 < delay <= 30_000  # the reset, less the time since it was stated
