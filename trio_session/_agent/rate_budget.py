"""The rate budget: the permit every request waits for (R-69, ours; docs/fleet.md).

A provider publishes what an account may send a model per minute: requests and tokens.
With ``rateLimit`` set, each request — a turn's first attempt, every re-attempt, a
compaction's summary request — first takes a *permit* from a ``RateBudget`` and, when
none is free, waits for one. The wait is a Trio sleep in the request's own cancel scope,
so ``abort()`` and ``abort_retry()`` end it the way they end the request.

The algorithm (GCRA, the generic cell rate algorithm, a token bucket kept as one time):
a budget of ``L`` per minute keeps, per dimension, a *theoretical arrival time* ``tat``;
a request of cost ``c`` costs ``inc = ceil(c * 60 s / L)`` (µs), and at time ``now``

```text
start = max(tat, now)
wait  = start + inc - 60 s - now      (> 0: not yet; try again after wait)
tat'  = start + inc                   (when wait <= 0: granted)
```

— a bucket of ``L`` refilled at ``L`` per minute: at most ``L`` at once after an idle
minute, ``L`` a minute in the long run. The request and token dimensions are checked
together: a permit is granted when both hold it, and then both are taken. A request
costs 1 of the first and, of the second, its estimate: the prompt's tokens
(``_stats.estimate_context_tokens``, the compaction's estimate) plus the reply it may
write (``rateLimit.replyTokens``, else the model's ``max_tokens``), at most ``L``. When
the answer comes, the grant is *settled* with the tokens its usage reports: what was
reserved and not used is given back (``tat = max(tat - d, now)``), what was used past
the estimate is taken (``tat = max(tat, now) + d``); an answer with no usage (a failure
before any token, an abort) gives all of its tokens back. A request is never given back:
it was sent. An answer that is a 429 with a wait hint (``retry-after``) *drains* the
budget: both dimensions are empty until the hint — at most a minute — has passed
(``tat >= now + hint + 60 s``), so no request of the budget (of any worker, with Redis)
goes before it, and they go at the budget's pace after it.

Nothing is reserved while a request waits (a permit is checked, not booked), so a
cancelled wait leaves the budget exactly as it was. Within a process the permits of one
budget are taken in arrival order — a ``trio.Lock`` per budget, which Trio hands over
first come, first served — so no session starves another; across processes each permit
is checked on its own, which is fair enough: a waiting worker tries again when the
budget said it would hold it.

Learned from the provider: when the settings name no limit for a dimension of a model
(and ``rateLimit.learn`` is not ``false``), the limit the provider's rate-limit headers
state (``_core.rate_headers``; every response's, success or failure) is the budget's
limit for that provider, key and model, per minute. What the headers say remains
*pre-drains* the budget: ``r`` of ``L`` remaining puts the dimension's time at least at
``now + 60 s - r * 60 s / L`` (the bucket holds no more than ``r``); none remaining
until a reset puts it at ``now + reset + 60 s - 60 s / L``: the next request waits
until the reset (at most a minute away), and the rest go at the budget's pace. A
budget never gains from the headers, only loses. A dimension the settings name ignores
them altogether; a server that sends no such headers changes nothing: no permit, no
event.

Two budgets implement the protocol: ``LocalRateBudget`` (one per Trio run, on
``trio.current_time()``: the default) and ``trio_session.store._redis_budget``'s, shared
by a fleet through the Redis credential store.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from .._core.classes import define, frozen
from .._core.events import RateLimitWaitEnd, RateLimitWaitStart
from .._core.rate_headers import RateDimension, RateLimitHeaders
from .._core.stats import estimate_context_tokens
from .._settings.values import RateLimits

if TYPE_CHECKING:
    from .._core.events import SessionEvent
    from .._core.messages import AssistantMessage, Message
    from .._settings.store import SettingsStore
    from ..providers._base import Model

#: The window every limit is counted over, in µs.
MINUTE_US = 60_000_000
#: Two GCRA times, one per dimension: (requests, tokens), µs.
Times = tuple[int, int]


@frozen
class BudgetKey:
    """Which budget a request draws from: a provider account's, for one model.

    Attributes:
        provider: the provider's name (``"openai"``).
        credential: the key's fingerprint (16 hex digits of SHA-256, as the credential
            stores name a key), or ``"-"`` for the provider's own key; never the key.
        model: the model's id.
    """

    provider: str
    credential: str
    model: str


@frozen
class Cost:
    """What one permit takes, as GCRA increments (µs per dimension; 0: not limited).

    Attributes:
        requests: the request dimension's increment: ``ceil(60 s / requestsPerMinute)``.
        tokens: the token dimension's: ``ceil(tokens * 60 s / tokensPerMinute)``.
        tokens_per_minute: the token limit the increment was made with (for settling).
        reserved: the tokens reserved (the estimate, at most the limit).
    """

    requests: int
    tokens: int
    tokens_per_minute: int | None
    reserved: int

    @classmethod
    def of(cls, limits: RateLimits, tokens: int) -> Cost:
        """The cost of a request of ``tokens`` (estimated) under ``limits``.

        Args:
            limits: the model's limits.
            tokens: the request's estimated tokens, prompt and reply.
        """
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        reserved = min(max(tokens, 0), tpm) if tpm is not None else 0
        return cls(
            requests=math.ceil(MINUTE_US / rpm) if rpm is not None else 0,
            tokens=token_increment(reserved, tpm),
            tokens_per_minute=tpm,
            reserved=reserved,
        )

    @property
    def increments(self) -> Times:
        """``(requests, tokens)``."""
        return (self.requests, self.tokens)


def token_increment(tokens: int, tokens_per_minute: int | None) -> int:
    """``ceil(tokens * 60 s / tokens_per_minute)`` µs (0 when there is no limit); the
    sign of ``tokens`` is kept, for settling."""
    if tokens_per_minute is None or tokens == 0:
        return 0
    size = math.ceil(abs(tokens) * MINUTE_US / tokens_per_minute)
    return size if tokens > 0 else -size


def gcra(times: Times, now: int, increments: Times) -> tuple[Times, int]:
    """One GCRA check of both dimensions (formula in the module docstring).

    Returns the new times and 0 when the permit is granted, else the times unchanged and
    the µs to wait before it can be.
    """
    starts = (max(times[0], now), max(times[1], now))
    wait = max(
        (s + inc - MINUTE_US - now for s, inc in zip(starts, increments, strict=True) if inc),
        default=0,
    )
    if wait > 0:
        return times, wait
    return (
        starts[0] + increments[0] if increments[0] else times[0],
        starts[1] + increments[1] if increments[1] else times[1],
    ), 0


def adjust(time: int, now: int, delta: int) -> int:
    """A dimension's time after taking ``delta`` µs more (``delta > 0``: used past the
    reservation) or giving ``-delta`` back (``delta < 0``), never above a full bucket."""
    if delta > 0:
        return max(time, now) + delta
    return max(time + delta, now)


def drain(time: int, now: int, drain_us: int) -> int:
    """A dimension's time once it is empty until ``drain_us`` from now (a 429's hint)."""
    return max(time, now + drain_us + MINUTE_US)


def learned_limits(known: RateLimits | None, stated: RateLimitHeaders) -> RateLimits:
    """The limits learned from ``stated``: each dimension it states, else ``known``'s.

    Args:
        known: what was learned before, if anything.
        stated: what a response's headers state.
    """
    before = known or RateLimits()
    return RateLimits(
        requests_per_minute=stated.requests.limit
        if stated.requests is not None
        else before.requests_per_minute,
        tokens_per_minute=stated.tokens.limit
        if stated.tokens is not None
        else before.tokens_per_minute,
    )


def floor_us(dimension: RateDimension | None) -> int:
    """How far from now (µs) a dimension's time is at least, by what its headers say
    remains (0: they say nothing): ``60 s - r * 60 s / L`` for ``r`` of ``L`` left;
    for none left with a reset, ``60 s + reset - 60 s / L``: the next unit of the
    dimension is free at the reset, not before (the reset at most a minute).

    Args:
        dimension: the dimension as the headers state it.
    """
    if dimension is None or dimension.remaining is None:
        return 0
    if dimension.remaining == 0 and dimension.reset_ms is not None:
        unit = math.ceil(MINUTE_US / dimension.limit)
        return max(MINUTE_US + min(dimension.reset_ms, 60_000) * 1000 - unit, 0)
    return max(MINUTE_US - math.ceil(dimension.remaining * MINUTE_US / dimension.limit), 0)


def lift(time: int, now: int, floor: int) -> int:
    """A dimension's time once it is at least ``floor`` µs from now (0: as it is)."""
    return max(time, now + floor) if floor else time


def floors(stated: RateLimitHeaders) -> Times:
    """``floor_us`` of both dimensions: ``(requests, tokens)``."""
    return (floor_us(stated.requests), floor_us(stated.tokens))


@frozen
class Outcome:
    """What a request's answer says to its budget.

    Attributes:
        used: the tokens its usage reports (0: none, or no answer).
        drain_us: a 429's wait hint, µs, at most a minute (0: none).
    """

    used: int = 0
    drain_us: int = 0

    @classmethod
    def of(cls, answer: AssistantMessage | None) -> Outcome:
        """The outcome of ``answer`` (``None``: the request ended with no answer).

        Args:
            answer: the request's answer.
        """
        if answer is None:
            return cls()
        failure = answer.failure
        hint = failure.retry_after_ms if failure is not None and failure.status == 429 else None
        return cls(answer.usage.total_tokens, min((hint or 0) * 1000, MINUTE_US))


class Grant(Protocol):
    """A permit taken: the request may go. Settle it once its answer has come."""

    async def settle(self, outcome: Outcome) -> None:
        """Give back the reserved tokens not used, or take those used past them; drain
        the budget for a 429's wait hint.

        Args:
            outcome: what the answer says (``Outcome.of``); no tokens used (a failure
                before the answer, an abort): all are given back.
        """
        ...


class RateBudget(Protocol):
    """Where permits come from: in process (``LocalRateBudget``) or through Redis."""

    async def permit(
        self, key: BudgetKey, cost: Cost, on_wait: Callable[[int | None], None]
    ) -> Grant:
        """Wait until the budget ``key`` holds ``cost``, take it, and return the grant.

        Args:
            key: which budget.
            cost: what the request takes.
            on_wait: called once, before the first wait, with the wait in ms when it is
                known (``None``: queued behind other requests of this budget).
        """
        ...

    async def learned(self, key: BudgetKey) -> RateLimits | None:
        """The limits learned for ``key`` from its provider's headers; ``None``: none.

        Args:
            key: which budget.
        """
        ...

    async def learn(self, key: BudgetKey, stated: RateLimitHeaders) -> None:
        """Learn ``key``'s limits from what a response's headers state, and pre-drain
        the budget by what they say remains.

        Args:
            key: which budget.
            stated: the headers' limits (the dimensions the settings name left out).
        """
        ...


@define(eq=False, slots=True)
class Turns:
    """One budget's queue in this process: its lock, and whether the request at its head
    is sleeping until the budget holds it."""

    lock: trio.Lock = attrs.field(factory=trio.Lock)
    sleeping: bool = False


async def take_in_turn(
    queues: dict[BudgetKey, Turns],
    key: BudgetKey,
    attempt: Callable[[], Awaitable[int]],
    on_wait: Callable[[int | None], None],
) -> None:
    """Call ``attempt`` (µs to wait, 0: taken) until it takes the permit, sleeping what
    it says between, holding ``key``'s lock: the permits of one budget in arrival order.

    ``on_wait`` is told once: at once (``None``) when the request queues behind one that
    sleeps, else before its own first sleep — never for a request that waits only for
    the one ahead of it to be checked.
    """
    turns = queues.get(key)
    if turns is None:
        turns = queues[key] = Turns()
    said = False
    if turns.sleeping:
        on_wait(None)
        said = True
    async with turns.lock:
        while wait_us := await attempt():
            if not said:
                on_wait(math.ceil(wait_us / 1000))
                said = True
            turns.sleeping = True
            try:
                await trio.sleep(wait_us / 1_000_000)
            finally:
                turns.sleeping = False


def now_us() -> int:
    """``trio.current_time()`` in µs: the clock of the in-process budget."""
    return round(trio.current_time() * 1_000_000)


@define(eq=False, slots=True)
class _LocalGrant:
    _budget: LocalRateBudget
    _key: BudgetKey
    _cost: Cost

    async def settle(self, outcome: Outcome) -> None:
        self._budget.settle(self._key, self._cost, outcome)


@define(eq=False)
class LocalRateBudget:
    """The budget in this process (one per Trio run: ``local_budget()``), on
    ``trio.current_time()``, so tests see exact virtual times."""

    _times: dict[BudgetKey, Times] = attrs.field(factory=dict, init=False)
    _queues: dict[BudgetKey, Turns] = attrs.field(factory=dict, init=False)
    _learned: dict[BudgetKey, RateLimits] = attrs.field(factory=dict, init=False)

    async def learned(self, key: BudgetKey) -> RateLimits | None:
        """See ``RateBudget.learned`` (no checkpoint).

        Args:
            key: which budget.
        """
        return self._learned.get(key)

    async def learn(self, key: BudgetKey, stated: RateLimitHeaders) -> None:
        """See ``RateBudget.learn`` (no checkpoint).

        Args:
            key: which budget.
            stated: the headers' limits.
        """
        self._learned[key] = learned_limits(self._learned.get(key), stated)
        now = now_us()
        requests, tokens = self._times.get(key, (0, 0))
        below_requests, below_tokens = floors(stated)
        self._times[key] = (lift(requests, now, below_requests), lift(tokens, now, below_tokens))

    async def permit(
        self, key: BudgetKey, cost: Cost, on_wait: Callable[[int | None], None]
    ) -> Grant:
        """See ``RateBudget.permit``.

        Args:
            key: which budget.
            cost: what the request takes.
            on_wait: told before the first wait.
        """

        async def attempt() -> int:
            times, wait = gcra(self._times.get(key, (0, 0)), now_us(), cost.increments)
            self._times[key] = times
            return wait

        await take_in_turn(self._queues, key, attempt, on_wait)
        return _LocalGrant(self, key, cost)

    def settle(self, key: BudgetKey, cost: Cost, outcome: Outcome) -> None:
        """Settle a grant of ``key`` (see ``Grant.settle``).

        Args:
            key: the grant's budget.
            cost: what the grant took.
            outcome: what its answer says.
        """
        delta = token_increment(outcome.used - cost.reserved, cost.tokens_per_minute)
        requests, tokens = self._times.get(key, (0, 0))
        now = now_us()
        if delta:
            tokens = adjust(tokens, now, delta)
        if outcome.drain_us:
            requests, tokens = (
                drain(requests, now, outcome.drain_us),
                drain(tokens, now, outcome.drain_us),
            )
        self._times[key] = (requests, tokens)

    def level(self, key: BudgetKey) -> Times:
        """``key``'s two GCRA times as they are (0: never used); for tests and tools.

        Args:
            key: which budget.
        """
        return self._times.get(key, (0, 0))


#: This run's in-process budget; ``None`` until a session needs one (asked before every
#: request: a default, so that asking raises nothing).
_LOCAL: trio.lowlevel.RunVar[LocalRateBudget | None] = trio.lowlevel.RunVar(
    "trio_session_rate_budget", default=None
)


def local_budget() -> LocalRateBudget:
    """This Trio run's in-process budget, shared by every session of the run."""
    budget = _LOCAL.get()
    if budget is None:
        budget = LocalRateBudget()
        _LOCAL.set(budget)
    return budget


def credential_id(api_key: str | None) -> str:
    """A key as a budget names it: its fingerprint; ``"-"`` for none (the provider's own)."""
    if not api_key:
        return "-"
    from ..store._credentials_file import fingerprint  # only with a rate limit set

    return fingerprint(api_key)


@define(eq=False, weakref_slot=False)  # one per session: nothing refers to it weakly
class RateGate:
    """What the agent asks before each request: the permit, when ``rateLimit`` sets a
    limit or one was learned from the provider's headers; and what it tells after each
    answer: the headers' limits (``learn``).

    Args:
        settings: the session's settings, read at every request (R-11).
        budgets: the credential store: one with a ``rate_budget()`` (the Redis store)
            gives the fleet's budget; otherwise the run's ``local_budget()``.

    Attributes:
        waiting: whether a request is waiting for a permit now.
    """

    _settings: SettingsStore = attrs.field(alias="settings")
    _budgets: object = attrs.field(default=None, alias="budgets")
    waiting: bool = attrs.field(default=False, init=False)

    def budget(self) -> RateBudget:
        """The budget permits come from."""
        source = getattr(self._budgets, "rate_budget", None)
        budget: RateBudget = source() if callable(source) else local_budget()
        return budget

    def _known_budget(self) -> RateBudget | None:
        """The budget, if one may have learned anything: the fleet's, or this run's
        in-process budget once made (a run that never made one learned nothing, and
        asking it makes nothing)."""
        source = getattr(self._budgets, "rate_budget", None)
        if callable(source):
            budget: RateBudget = source()
            return budget
        return _LOCAL.get()

    def may_limit(self, model: Model) -> bool:
        """Whether a request to ``model`` may need a permit: a limit is set for it, or a
        budget that may have learned one exists. Asked before ``permit``, so that a
        session with neither (the default) makes no coroutine per request.

        Args:
            model: the model asked.
        """
        group = self._settings.current.rate_limit
        if group.limits(model.id).limited:
            return True
        return group.learn and self._known_budget() is not None

    async def permit(
        self,
        provider: str,
        model: Model,
        api_key: str | None,
        messages: Sequence[Message],
        emit: Callable[[SessionEvent], None],
    ) -> Grant | None:
        """Wait for the permit of a request of ``messages`` to ``model``; ``None`` when
        no limit applies to the model, set or learned — at once, with no checkpoint,
        in process; the fleet's budget may ask Redis what was learned (at most every
        few seconds, ``_redis_budget.LEARNED_REFRESH``).

        Args:
            provider: the provider's name.
            model: the model asked.
            api_key: the key the request goes with (only its fingerprint is used).
            messages: the request's messages, for its token estimate.
            emit: where ``rate_limit_wait_start`` / ``rate_limit_wait_end`` go.
        """
        settings = self._settings.current.rate_limit
        limits = settings.limits(model.id)
        known = self._known_budget()
        if (
            settings.learn
            and known is not None
            and None in (limits.requests_per_minute, limits.tokens_per_minute)
        ):
            learned = await known.learned(BudgetKey(provider, credential_id(api_key), model.id))
            if learned is not None:
                limits = RateLimits(
                    requests_per_minute=_first(
                        limits.requests_per_minute, learned.requests_per_minute
                    ),
                    tokens_per_minute=_first(limits.tokens_per_minute, learned.tokens_per_minute),
                    reply_tokens=limits.reply_tokens,
                )
        if not limits.limited:
            return None
        reply = limits.reply_tokens if limits.reply_tokens is not None else model.max_tokens
        cost = Cost.of(limits, estimate_context_tokens(messages) + reply)
        key = BudgetKey(provider, credential_id(api_key), model.id)
        waited = False

        def on_wait(delay_ms: int | None) -> None:
            nonlocal waited
            waited = self.waiting = True
            emit(RateLimitWaitStart(delay_ms=delay_ms, model=f"{provider}/{model.id}"))

        try:
            return await self.budget().permit(key, cost, on_wait)
        finally:
            if waited:
                self.waiting = False
                emit(RateLimitWaitEnd(model=f"{provider}/{model.id}"))

    async def learn(
        self, provider: str, model: Model, api_key: str | None, stated: RateLimitHeaders
    ) -> None:
        """Learn the limits a response's headers state, for the dimensions the settings
        leave unnamed (``rateLimit.learn``; the module docstring says how).

        Args:
            provider: the provider's name.
            model: the model asked.
            api_key: the key the request went with (only its fingerprint is used).
            stated: what the response's headers state (``StreamEnd.rate_limits``).
        """
        settings = self._settings.current.rate_limit
        if not settings.learn:
            return
        limits = settings.limits(model.id)
        stated = RateLimitHeaders(
            requests=stated.requests if limits.requests_per_minute is None else None,
            tokens=stated.tokens if limits.tokens_per_minute is None else None,
        )
        if stated.requests is None and stated.tokens is None:
            return
        key = BudgetKey(provider, credential_id(api_key), model.id)
        await self.budget().learn(key, stated)


def _first(a: int | None, b: int | None) -> int | None:
    return a if a is not None else b
