"""One worker process of ``tests/test_rate_budget_redis.py``: takes permits of the fleet's
budget from several tasks at once and prints each grant as a JSON line.

``python -m tests.rate_budget_worker URL PERMITS SEED`` prints ``ready``, waits for a
line on stdin (so that every worker starts together), then prints one
``{"t": <grant time, µs on Redis's clock>, "tokens": <tokens taken>}`` per permit.
"""

from __future__ import annotations

import json
import random
import sys

import trio

from trio_session import RateLimits
from trio_session._agent.rate_budget import BudgetKey, Cost
from trio_session.store._redis_budget import RedisGrant
from trio_session.store._redis_credentials import open_redis_credentials

LIMITS = RateLimits(requests_per_minute=600, tokens_per_minute=60_000)
KEY = BudgetKey("openai", "0123456789abcdef", "gpt-test")
TASKS = 4  # sessions of this worker, taking permits at once


async def main(url: str, permits: int, seed: int) -> None:
    rng = random.Random(seed)
    costs = [Cost.of(LIMITS, rng.randint(50, 150)) for _ in range(permits)]
    async with open_redis_credentials(url, call_timeout=30) as store:
        budget = store.rate_budget()
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)

        async def session(mine: list[Cost]) -> None:
            for cost in mine:
                grant = await budget.permit(KEY, cost, lambda delay: None)
                assert isinstance(grant, RedisGrant)
                line = {"t": grant.granted_at_us, "tokens": cost.reserved}
                print(json.dumps(line), flush=True)

        async with trio.open_nursery() as nursery:
            for i in range(TASKS):
                nursery.start_soon(session, costs[i::TASKS])
    if budget.status != "redis":
        sys.exit("fell back from Redis")


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
