"""The rate budget of a fleet, shared through Redis (R-69, ours; docs/fleet.md).

``RedisRateBudget`` is ``trio_session._agent.rate_budget``'s GCRA with its times in Redis, so
every worker on every host draws from one budget. A session gets it from the Redis
credential store (``RedisCredentialStore.rate_budget()``), on the same client.

What Redis holds:
Never a secret: a key is known by its fingerprint, as the credential store knows it.

```text
<prefix>{<provider>}:rate:<fingerprint>:<model>:requests  the request dimension's time
<prefix>{<provider>}:rate:<fingerprint>:<model>:tokens    the token dimension's time
<prefix>{<provider>}:rate:<fingerprint>:<model>:learned   limits learned from headers
<prefix>{<provider>}:rate-workers                         workers seen in the last minute
```

The two times are integers, µs on Redis's clock, with a ``PX`` expiry at which the
bucket is full again (an absent key is a full bucket). The workers are a sorted set:
each worker's id, scored with the Redis time of its last permit; members older than a
minute are dropped. The learned limits are ``"<requests> <tokens>"`` per minute (``0``:
not learned), kept ``LEARNED_TTL_MS`` after the last response that stated them; each
worker reads them again at most every ``LEARNED_REFRESH`` seconds.

One permit is one Lua script, atomic on the server: read ``TIME``, note the worker in
the set, check both dimensions (``rate_budget.gcra``) and, when both hold the permit,
take it. It returns the wait (0: taken), Redis's time and the workers seen, so a
grant's time is Redis's, whatever the hosts' clocks say. Settling a grant is one more
script (``rate_budget.adjust``), and a 429's drain one more (``rate_budget.drain``).

Faults:
Every call is bounded by the store's ``timeout``. When Redis cannot be reached, each
worker falls back to its *share*: the limits divided by the workers it last saw (1 if
it never saw the set), on a bucket of its own that starts empty — so that what the
fleet took before Redis went away and what each worker takes meanwhile stay within the
limit. One ``WARNING`` on the ``trio_session.credentials`` logger says so; ``status`` is
``"local-fallback"``. Every ``reconnect_interval`` seconds the next permit tries Redis
again; when it answers, each worker adds to the shared budget what its own bucket still
owes (its use of the last minute, scaled back to the whole limit), one ``INFO`` record
says so, and permits are the fleet's again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import trio

from .._agent.rate_budget import (
    MINUTE_US,
    BudgetKey,
    Cost,
    Grant,
    Outcome,
    Times,
    Turns,
    adjust,
    drain,
    floors,
    gcra,
    learned_limits,
    now_us,
    take_in_turn,
    token_increment,
)
from .._core.classes import define
from .._core.rate_headers import MAX_LIMIT, RateLimitHeaders
from .._settings.values import RateLimits

if TYPE_CHECKING:
    import coredis

logger = logging.getLogger("trio_session.credentials")

T = TypeVar("T")
#: How long learned limits stay in Redis after the last response that stated them, ms.
LEARNED_TTL_MS = 600_000
#: How often (seconds) a worker reads a budget's learned limits from Redis again.
LEARNED_REFRESH = 5.0
Status = Literal["redis", "local-fallback"]

# KEYS: the requests time, the tokens time, the workers set. ARGV: the two increments
# (µs; 0: not limited), this worker's id, the window (µs). Returns {wait µs, now µs,
# workers}. Times are written with %d: Lua would write a number this size as 1.7e+15.
_PERMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[4])
redis.call('ZADD', KEYS[3], string.format('%d', now), ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%d', now - window))
redis.call('PEXPIRE', KEYS[3], math.floor(window / 1000))
local workers = redis.call('ZCARD', KEYS[3])
local starts = {}
local wait = 0
for i = 1, 2 do
  local start = tonumber(redis.call('GET', KEYS[i]) or 0)
  if start < now then start = now end
  starts[i] = start
  local inc = tonumber(ARGV[i])
  if inc > 0 and start + inc - window - now > wait then
    wait = start + inc - window - now
  end
end
if wait == 0 then
  for i = 1, 2 do
    local inc = tonumber(ARGV[i])
    if inc > 0 then
      local tat = starts[i] + inc
      redis.call('SET', KEYS[i], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000))
    end
  end
end
return {wait, now, workers}
"""

# KEYS[1]: a dimension's time; ARGV[1]: µs to take (> 0) or give back (< 0); ARGV[2]:
# µs from now the time is at least (a drain: the hint plus the window; 0: none).
# Returns now.
_ADJUST = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0)
local delta = tonumber(ARGV[1])
if delta > 0 then
  if tat < now then tat = now end
  tat = tat + delta
else
  tat = tat + delta
end
local floor = tonumber(ARGV[2])
if floor > 0 and tat < now + floor then
  tat = now + floor
end
if tat <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.ceil((tat - now) / 1000))
end
return now
"""


@define(eq=False, slots=True)
class RedisGrant:
    """A permit of the fleet's budget (``rate_budget.Grant``).

    Attributes:
        granted_at_us: when it was taken, µs on Redis's clock; ``None`` when it came
            from this worker's share while Redis was away.
    """

    _budget: RedisRateBudget
    _key: BudgetKey
    _cost: Cost
    granted_at_us: int | None

    async def settle(self, outcome: Outcome) -> None:
        """See ``rate_budget.Grant.settle``.

        Args:
            outcome: what the answer says.
        """
        cost = self._cost
        delta = token_increment(outcome.used - cost.reserved, cost.tokens_per_minute)
        if delta or outcome.drain_us:
            await self._budget.adjust(self._key, delta, outcome.drain_us)


@define(eq=False)
class RedisRateBudget:
    """The fleet's budget (``rate_budget.RateBudget``), in Redis; made by
    ``RedisCredentialStore.rate_budget()``, which passes its client and its bounds.

    Args:
        client: an entered ``coredis.Redis`` client with ``decode_responses=True``.
        location: the URL, password removed, for messages.
        timeout: seconds one Redis call may take.
        reconnect_interval: seconds between attempts to reach Redis again.
        prefix: the start of every Redis key.

    Attributes:
        status: ``"redis"``, or ``"local-fallback"`` while Redis cannot be reached.
        workers: the workers this one last saw taking permits (itself included).
        worker_id: this worker's member in the workers set (random).
    """

    _client: coredis.Redis[str] = attrs.field(alias="client", repr=False)
    location: str = "redis"
    _timeout: float = attrs.field(default=0.5, alias="timeout")
    _reconnect_interval: float = attrs.field(default=1.0, alias="reconnect_interval")
    _prefix: str = attrs.field(default="trio-session:", alias="prefix")
    status: Status = attrs.field(default="redis", init=False)
    workers: int = attrs.field(default=1, init=False)
    worker_id: str = attrs.field(factory=lambda: uuid.uuid4().hex, init=False)
    _queues: dict[BudgetKey, Turns] = attrs.field(factory=dict, init=False, repr=False)
    #: While Redis is away: each budget's share, as GCRA times on ``now_us()``.
    _shares: dict[BudgetKey, Times] = attrs.field(factory=dict, init=False, repr=False)
    #: The workers each share was cut for (their count when the fall-back began).
    _share_of: int = attrs.field(default=1, init=False, repr=False)
    _retry_at: float = attrs.field(default=0.0, init=False, repr=False)
    _closed: bool = attrs.field(default=False, init=False, repr=False)
    _permit_script: Any = attrs.field(default=None, init=False, repr=False)
    #: Each budget's learned limits as last read or written, and when (trio time).
    _learned: dict[BudgetKey, tuple[RateLimits | None, float]] = attrs.field(
        factory=dict, init=False, repr=False
    )
    _adjust_script: Any = attrs.field(default=None, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._permit_script = self._client.register_script(_PERMIT)
        self._adjust_script = self._client.register_script(_ADJUST)

    def _key(self, key: BudgetKey, dimension: str) -> str:
        return f"{self._prefix}{{{key.provider}}}:rate:{key.credential}:{key.model}:{dimension}"

    def _workers_key(self, key: BudgetKey) -> str:
        return f"{self._prefix}{{{key.provider}}}:rate-workers"

    # -- talking to Redis, or not -------------------------------------------------------

    async def _redis(self, call: Callable[[], Awaitable[T]]) -> T | None:
        """``call()`` within ``timeout``; ``None`` when Redis is away (we fall back)."""
        if self._closed:
            return None
        if self.status == "local-fallback" and (
            trio.current_time() < self._retry_at or not await self._reconnect()
        ):
            return None
        try:
            with trio.fail_after(self._timeout):
                return await call()
        except (Exception, trio.TooSlowError) as exc:  # Redis down, slow, or refusing
            self._fall_back(exc)
            return None

    def _fall_back(self, exc: BaseException) -> None:
        self._retry_at = trio.current_time() + self._reconnect_interval
        if self.status == "local-fallback":
            return
        self.status = "local-fallback"
        self._share_of = max(self.workers, 1)
        reason = "timed out" if isinstance(exc, trio.TooSlowError) else _reason(exc)
        logger.warning(
            "rate budget %s unreachable (%s): this worker uses its share, 1/%d of each "
            "limit, until it is back",
            self.location,
            reason,
            self._share_of,
            extra={"credential_store": self.location, "status": self.status},
        )

    async def _reconnect(self) -> bool:
        """Try Redis again; on success add what the shares still owe to the fleet's budget."""
        self._retry_at = trio.current_time() + self._reconnect_interval
        try:
            with trio.fail_after(self._timeout):
                await self._client.ping()
                now = now_us()
                for key, (requests, tokens) in sorted(self._shares.items(), key=repr):
                    for dimension, time in (("requests", requests), ("tokens", tokens)):
                        owed = (time - now) // self._share_of  # back to the whole limit
                        if owed > 0:
                            await self._adjust_script(
                                keys=[self._key(key, dimension)], args=[owed, 0]
                            )
        except (Exception, trio.TooSlowError):
            return False
        self._shares.clear()
        self.status = "redis"
        logger.info(
            "rate budget %s reachable again; permits are the fleet's",
            self.location,
            extra={"credential_store": self.location, "status": self.status},
        )
        return True

    # -- the RateBudget protocol --------------------------------------------------------

    async def permit(
        self, key: BudgetKey, cost: Cost, on_wait: Callable[[int | None], None]
    ) -> Grant:
        """See ``rate_budget.RateBudget.permit``: from Redis, else this worker's share.

        Args:
            key: which budget.
            cost: what the request takes.
            on_wait: told before the first wait.
        """
        granted: list[int | None] = []

        async def attempt() -> int:
            keys = [self._key(key, "requests"), self._key(key, "tokens"), self._workers_key(key)]
            args = [cost.requests, cost.tokens, self.worker_id, MINUTE_US]
            answer = await self._redis(lambda: self._permit_script(keys=keys, args=args))
            if answer is None:
                return self._from_share(key, cost, granted)
            wait, now, workers = (int(v) for v in answer)
            self.workers = max(workers, 1)
            if not wait:
                granted.append(now)
            return wait

        await take_in_turn(self._queues, key, attempt, on_wait)
        return RedisGrant(self, key, cost, granted[-1])

    def _from_share(self, key: BudgetKey, cost: Cost, granted: list[int | None]) -> int:
        """The permit from this worker's share (Redis is away): its bucket starts empty,
        and every increment is ``workers`` times the whole limit's."""
        now = now_us()
        share = self._shares.get(key)
        if share is None:  # empty, in the dimensions that are limited
            share = (
                now + MINUTE_US if cost.requests else 0,
                now + MINUTE_US if cost.tokens else 0,
            )
        scaled = (cost.requests * self._share_of, cost.tokens * self._share_of)
        times, wait = gcra(share, now, scaled)
        self._shares[key] = times
        if not wait:
            granted.append(None)
        return wait

    async def adjust(self, key: BudgetKey, delta: int, drain_us: int) -> None:
        """Take ``delta`` µs more of ``key``'s token dimension, or give ``-delta`` back;
        with ``drain_us``, empty both dimensions until that long from now.

        Args:
            key: which budget.
            delta: µs of the whole limit's increments.
            drain_us: a 429's wait hint in µs; 0: none.
        """
        floor = drain_us + MINUTE_US if drain_us else 0

        async def both() -> bool:
            await self._adjust_script(keys=[self._key(key, "tokens")], args=[delta, floor])
            if floor:
                await self._adjust_script(keys=[self._key(key, "requests")], args=[0, floor])
            return True

        done = await self._redis(both)
        if done is None and key in self._shares:
            requests, tokens = self._shares[key]
            now = now_us()
            tokens = adjust(tokens, now, delta * self._share_of)
            if drain_us:
                requests, tokens = drain(requests, now, drain_us), drain(tokens, now, drain_us)
            self._shares[key] = (requests, tokens)

    async def learned(self, key: BudgetKey) -> RateLimits | None:
        """See ``rate_budget.RateBudget.learned``: read from Redis at most every
        ``LEARNED_REFRESH`` seconds; while Redis is away, as last known.

        Args:
            key: which budget.
        """
        known, read_at = self._learned.get(key, (None, -LEARNED_REFRESH))
        if trio.current_time() - read_at < LEARNED_REFRESH:
            return known
        self._learned[key] = (known, trio.current_time())
        stored = await self._redis(lambda: self._client.get(self._key(key, "learned")))
        if stored is not None or self.status == "redis":
            known = _learned_value(stored)
            self._learned[key] = (known, trio.current_time())
        return known

    async def learn(self, key: BudgetKey, stated: RateLimitHeaders) -> None:
        """See ``rate_budget.RateBudget.learn``: the limits stored beside the budget's
        times for every worker, the budget pre-drained there.

        Args:
            key: which budget.
            stated: the headers' limits.
        """
        known = learned_limits(self._learned.get(key, (None, 0.0))[0], stated)
        self._learned[key] = (known, trio.current_time())
        value = f"{known.requests_per_minute or 0} {known.tokens_per_minute or 0}"
        below = floors(stated)

        async def store() -> bool:
            await self._client.set(self._key(key, "learned"), value, px=LEARNED_TTL_MS)
            for dimension, floor in zip(("requests", "tokens"), below, strict=True):
                if floor:
                    await self._adjust_script(keys=[self._key(key, dimension)], args=[0, floor])
            return True

        await self._redis(store)

    def close(self) -> None:
        """Stop using Redis (the client is closed by ``open_redis_credentials``)."""
        self._closed = True


def _learned_value(stored: str | None) -> RateLimits | None:
    """Learned limits as Redis holds them (``"<requests> <tokens>"``); ``None`` for
    none, or for anything else."""
    parts = stored.split() if isinstance(stored, str) else []
    if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 12 for p in parts):
        return None
    requests, tokens = (min(int(p), MAX_LIMIT) or None for p in parts)
    if requests is None and tokens is None:
        return None
    return RateLimits(requests_per_minute=requests, tokens_per_minute=tokens)


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"
