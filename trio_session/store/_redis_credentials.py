"""Usage-limit blocks and cooldowns shared by a fleet of workers through Redis (R-17).

``RedisCredentialStore`` implements ``._credentials.CredentialStore`` with the
behaviour of ``._sqlite_credentials.SqliteCredentialStore`` — a session sticks
to one credential, a usage limit blocks it and moves the session to the first
free one — but keeps the block state in Redis, so one worker's usage limit stops
every worker on every host from hammering that key.

What Redis holds:
Only block state, never a secret. Each worker has its own keys (``keys=``, the
provider's environment variable, or another store's keys); Redis knows a key by
its ``._sqlite_credentials.fingerprint`` (16 hex digits of SHA-256), the same id
the SQLite store uses:

```text
<prefix>{<provider>}:block:<fingerprint>                  a usage-limit block
<prefix>{<provider>}:cool:<url fingerprint>:<fingerprint> a shared cooldown
```

Each is a string (the wait in milliseconds, for people reading ``MONITOR``) with
a ``PX`` expiry: a block ends when its key expires, on Redis's own clock, so
hosts whose clocks disagree still agree on when a block ends. The provider in
braces is a Redis Cluster hash tag: one provider's keys live in one slot.

Atomic rotation:
A usage limit runs one Lua script: block the session's credential and read the
remaining time of every credential of the provider, as one step on the server.
The next choice is made from that snapshot, so no worker ever picks a credential
another worker blocked before the script ran. A first pick runs the same script
without the block.

The store also gives the fleet's rate budget (``rate_budget()``, ``rateLimit``): its
keys and faults are described in ``._redis_budget``.

Faults:
Every Redis call is bounded by ``timeout`` seconds. When one fails or times out,
the store falls back to its local state — the blocks it last read from Redis
plus those it made itself — logs one ``WARNING`` on the
``trio_session.credentials`` logger and reports ``status == "local-fallback"``;
no prompt fails because of Redis. After ``reconnect_interval`` seconds the next
call tries Redis again; when it answers, the blocks and cooldowns made meanwhile
are written back (never shortening one already there), one ``INFO`` record says
so, and ``status`` is ``"redis"`` again. A Redis call is an ordinary Trio
checkpoint: cancelling the caller (``abort()``) cancels it at once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import trio

from .._core.classes import define
from .._core.errors import TrioSessionError
from ._credentials import DEFAULT_BLOCK_MS, with_jitter
from ._credentials_file import DEFAULT_ENV_VARS, fingerprint

if TYPE_CHECKING:
    import coredis

    from ._redis_budget import RedisRateBudget

logger = logging.getLogger("trio_session.credentials")

T = TypeVar("T")
Status = Literal["redis", "local-fallback"]

#: Seconds any one Redis call may take before the store falls back to local state.
DEFAULT_TIMEOUT = 0.5
#: Seconds between attempts to reach Redis again while falling back.
DEFAULT_RECONNECT_INTERVAL = 1.0
DEFAULT_PREFIX = "trio-session:"
#: URL schemes ``open_redis_credentials`` accepts.
SCHEMES = ("redis", "rediss", "unix")

# Block one credential (ARGV[1], 1-based; 0: none) for ARGV[2] ms — replacing what is
# there, or with ARGV[3] == "1" only if that makes the block longer — then return the
# remaining ms of every credential (PTTL: -2 absent, -1 never set without expiry).
_BLOCK_AND_READ = """
local i = tonumber(ARGV[1])
local ms = tonumber(ARGV[2])
if i > 0 then
  if ARGV[3] == '1' then
    if ms > 0 and redis.call('PTTL', KEYS[i]) < ms then
      redis.call('SET', KEYS[i], ARGV[2], 'PX', ms)
    end
  elseif ms > 0 then
    redis.call('SET', KEYS[i], ARGV[2], 'PX', ms)
  else
    redis.call('DEL', KEYS[i])
  end
end
local out = {}
for j, k in ipairs(KEYS) do
  out[j] = redis.call('PTTL', k)
end
return out
"""

# Make the cooldown KEYS[1] last at least ARGV[1] ms; return its remaining ms.
_EXTEND = """
local ms = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if ms > 0 and left < ms then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ms)
  return ms
end
return left
"""


class RedisCredentialStoreError(TrioSessionError):
    """A Redis URL that cannot be used, or coredis is not installed.

    The message never contains the URL's password.
    """


_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&#]*")


def redact_url(url: str) -> str:
    """``url`` without its password: ``redis://:…@host:6379/0``.

    Read as text, not parsed, so that a URL ``urllib`` refuses (a port that is not a
    number, an unclosed ``[``, a ``/`` in the password) is redacted too: the password
    is what lies between the first ``:`` and the last ``@`` before the query, and a
    ``password=`` in the query (``unix:///run/redis.sock?password=…``).
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest = _QUERY_PASSWORD.sub(r"\1…", rest)
    end = min((i for i in (rest.find(c) for c in "?#") if i >= 0), default=len(rest))
    userinfo, at, host = rest[:end].rpartition("@")
    if not at or ":" not in userinfo:
        return f"{scheme}://{rest}"
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:…@{host}{rest[end:]}"


def check_url(url: str) -> str:
    """``url`` if it is a Redis URL ``coredis`` can open, else ``RedisCredentialStoreError``.

    ``redis://[[user]:password@]host[:port][/db]``, ``rediss://…`` (TLS) or
    ``unix://[[user]:password@]/path/to/socket[?db=N]``. The message of the error names
    the URL without its password.
    """
    if "\0" in url:
        msg = f"not a usable Redis URL {redact_url(url)!r}: it contains a NUL character"
        raise RedisCredentialStoreError(msg)
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:  # the text of these names no part of the URL
        msg = f"not a usable Redis URL {redact_url(url)!r}: {exc}"
        raise RedisCredentialStoreError(msg) from None
    if parts.scheme not in SCHEMES:
        msg = (
            f"not a Redis URL: {redact_url(url)!r} (expected redis://host:port, "
            "rediss://host:port or unix:///path/to/socket)"
        )
        raise RedisCredentialStoreError(msg)
    if parts.scheme == "unix" and not parts.path:
        msg = f"a unix:// Redis URL needs a socket path: {redact_url(url)!r}"
        raise RedisCredentialStoreError(msg)
    if parts.scheme != "unix" and not parts.hostname:
        msg = f"a Redis URL needs a host: {redact_url(url)!r}"
        raise RedisCredentialStoreError(msg)
    return url


def _key_lists(keys: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    return {provider: list(values) for provider, values in keys.items()}


def _url_id(base_url: str | None) -> str:
    return hashlib.sha256((base_url or "").encode("utf-8")).hexdigest()[:16]


@define(eq=False)
class RedisCredentialStore:
    """A ``._credentials.CredentialStore`` whose blocks live in Redis, shared by a fleet.

    Open one with ``open_redis_credentials``: the coredis client must be entered
    in the task that owns the store (coredis 6 runs a task group per client).

    A provider's credentials are ``keys[provider]`` in order, then the provider's
    environment variable (as in the SQLite store) when set and not a duplicate.
    Session stickiness is kept in this process (a session lives in one worker).

    Args:
        client: an entered ``coredis.Redis`` client with ``decode_responses=True``.
        keys: provider name → this worker's keys, in order of preference.
        location: the URL, password removed, for messages.
        env_vars: provider → environment variable holding one more key.
        environ: where environment variables are read, at each call.
        clock: epoch seconds for ``blocked_until`` and the local state;
            ``time.time`` unless given.
        timeout: seconds one Redis call may take.
        reconnect_interval: seconds between attempts to reach Redis again.
        prefix: the start of every Redis key, so stores can share a database.
        rng: jitter's source for ``cooldown_ms``.

    Attributes:
        status: ``"redis"``, or ``"local-fallback"`` while Redis cannot be reached.
    """

    _client: coredis.Redis[str] = attrs.field(alias="client", repr=False)
    _keys: dict[str, list[str]] = attrs.field(
        factory=dict, converter=_key_lists, alias="keys", repr=False
    )
    location: str = "redis"
    _env_vars: Mapping[str, str] = attrs.field(default=DEFAULT_ENV_VARS, alias="env_vars")
    _environ: Mapping[str, str] = attrs.field(default=os.environ, alias="environ", repr=False)
    _clock: Callable[[], float] = attrs.field(default=time.time, alias="clock", repr=False)
    _timeout: float = attrs.field(default=DEFAULT_TIMEOUT, alias="timeout")
    _reconnect_interval: float = attrs.field(
        default=DEFAULT_RECONNECT_INTERVAL, alias="reconnect_interval"
    )
    _prefix: str = attrs.field(default=DEFAULT_PREFIX, alias="prefix")
    _rng: random.Random = attrs.field(factory=random.Random, alias="rng", repr=False)
    status: Status = attrs.field(default="redis", init=False)
    _sticky: dict[tuple[str, str], str] = attrs.field(factory=dict, init=False, repr=False)
    #: (provider, credential id) → clock seconds: what Redis last said, and our own blocks.
    _blocks: dict[tuple[str, str], float] = attrs.field(factory=dict, init=False, repr=False)
    #: (provider, url id, credential id) → clock seconds.
    _cooldowns: dict[tuple[str, str, str], float] = attrs.field(
        factory=dict, init=False, repr=False
    )
    #: What was decided locally while Redis was away, to write back on reconnecting.
    _unsynced: set[tuple[str, ...]] = attrs.field(factory=set, init=False, repr=False)
    _retry_at: float = attrs.field(default=0.0, init=False, repr=False)
    _closed: bool = attrs.field(default=False, init=False, repr=False)
    _block_script: Any = attrs.field(default=None, init=False, repr=False)
    _extend_script: Any = attrs.field(default=None, init=False, repr=False)
    _budget: RedisRateBudget | None = attrs.field(default=None, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._block_script = self._client.register_script(_BLOCK_AND_READ)
        self._extend_script = self._client.register_script(_EXTEND)

    # -- keys -------------------------------------------------------------------------

    def _candidates(self, provider: str) -> list[tuple[str, str]]:
        """``(credential id, key)`` in order of preference: given keys, then the env key."""
        keys = self._keys.get(provider, [])
        found = [(fingerprint(key), key) for key in keys]
        variable = self._env_vars.get(provider)
        env = self._environ.get(variable, "").strip() if variable else ""
        if env and env not in keys:
            found.append((fingerprint(env), env))
        return found

    def _block_key(self, provider: str, credential: str) -> str:
        return f"{self._prefix}{{{provider}}}:block:{credential}"

    def _cooldown_key(self, provider: str, url_id: str, credential: str) -> str:
        return f"{self._prefix}{{{provider}}}:cool:{url_id}:{credential}"

    # -- talking to Redis, or not -----------------------------------------------------

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
        reason = "timed out" if isinstance(exc, trio.TooSlowError) else _reason(exc)
        logger.warning(
            "credential store %s unreachable (%s): using local state until it is back",
            self.location,
            reason,
            extra={"credential_store": self.location, "status": self.status},
        )

    async def _reconnect(self) -> bool:
        """Try Redis again; on success write back what was decided meanwhile."""
        self._retry_at = trio.current_time() + self._reconnect_interval
        try:
            with trio.fail_after(self._timeout):
                await self._client.ping()
                now = self._clock()
                for item in sorted(self._unsynced):
                    await self._write_back(item, now)
        except (Exception, trio.TooSlowError):
            return False
        self._unsynced.clear()
        self.status = "redis"
        logger.info(
            "credential store %s reachable again; local blocks written back",
            self.location,
            extra={"credential_store": self.location, "status": self.status},
        )
        return True

    async def _write_back(self, item: tuple[str, ...], now: float) -> None:
        if len(item) == 2:
            provider, credential = item
            left_ms = round((self._blocks.get(item, now) - now) * 1000)
            if left_ms > 0:
                keys = [self._block_key(provider, credential)]
                await self._block_script(keys=keys, args=[1, left_ms, "1"])
        else:
            provider, url_id, credential = item
            left_ms = round((self._cooldowns.get((provider, url_id, credential), now) - now) * 1000)
            if left_ms > 0:
                key = self._cooldown_key(provider, url_id, credential)
                await self._extend_script(keys=[key], args=[left_ms])

    async def _block_and_read(
        self, provider: str, ids: Sequence[str], block: int | None, wait_ms: int
    ) -> dict[str, float]:
        """Block ``ids[block]`` (if given) and return every credential's unblock time.

        One script on Redis, else the local state. Either way the local state ends
        up with what is known.
        """
        now = self._clock()
        if block is not None:
            self._blocks[(provider, ids[block])] = now + wait_ms / 1000
        keys = [self._block_key(provider, i) for i in ids]
        args = [0 if block is None else block + 1, wait_ms, "0"]
        left = await self._redis(lambda: self._block_script(keys=keys, args=args))
        if left is None:
            if block is not None:
                self._unsynced.add((provider, ids[block]))
            return {i: self._blocks.get((provider, i), now) for i in ids}
        until: dict[str, float] = {}
        for credential, ms in zip(ids, _ints(left), strict=True):
            until[credential] = now + max(ms, 0) / 1000
            if ms > 0:
                self._blocks[(provider, credential)] = until[credential]
            else:
                self._blocks.pop((provider, credential), None)
        return until

    @staticmethod
    def _choose(ids: Sequence[str], until: Mapping[str, float], now: float) -> str:
        """The first free credential; if all are blocked, the one that unblocks first."""
        for credential in ids:
            if until[credential] <= now:
                return credential
        return min(ids, key=until.__getitem__)

    # -- the CredentialStore protocol -------------------------------------------------

    async def _current(self, provider: str, session_id: str, ids: Sequence[str]) -> str:
        sticky = self._sticky.get((provider, session_id))
        if sticky is not None and sticky in ids:
            return sticky
        until = await self._block_and_read(provider, ids, None, 0)
        choice = self._choose(ids, until, self._clock())
        self._sticky[(provider, session_id)] = choice
        return choice

    async def api_key(self, provider: str, session_id: str) -> str | None:
        """The session's sticky key; on first use, the first free one (R-17).

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
        """
        candidates = self._candidates(provider)
        if not candidates:
            return None
        current = await self._current(provider, session_id, [i for i, _ in candidates])
        return dict(candidates)[current]

    async def mark_usage_limit_reached(
        self,
        provider: str,
        session_id: str,
        *,
        retry_after_ms: int | None = None,
        base_url: str | None = None,
    ) -> bool:
        """Block the session's key fleet-wide for ``retry_after_ms`` (default 60 s); move
        the session to the first free one, atomically with the block.

        ``base_url`` is accepted for the protocol and not used: blocks are per
        provider and key, as in the SQLite store.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
            retry_after_ms: how long to block it, in milliseconds; 60 s if ``None``.
            base_url: the base URL the request went to; not used.

        Returns:
            Whether the session now uses another credential that is not blocked (R-17).
        """
        candidates = self._candidates(provider)
        if not candidates:
            return False
        ids = [i for i, _ in candidates]
        current = await self._current(provider, session_id, ids)
        wait_ms = DEFAULT_BLOCK_MS if retry_after_ms is None else retry_after_ms
        until = await self._block_and_read(provider, ids, ids.index(current), wait_ms)
        now = self._clock()
        choice = self._choose(ids, until, now)
        self._sticky[(provider, session_id)] = choice
        return choice != current and until[choice] <= now

    def blocked_until(self, provider: str, key: str) -> float | None:
        """When ``key`` of ``provider`` unblocks (clock seconds), as this worker last
        learnt it from Redis or decided it itself; ``None`` if not blocked.

        ``fetch_blocked_until`` asks Redis.

        Args:
            provider: the provider's name (``"openai"``).
            key: the key itself.
        """
        until = self._blocks.get((provider, fingerprint(key)))
        return until if until is not None and until > self._clock() else None

    async def fetch_blocked_until(self, provider: str, key: str) -> float | None:
        """When ``key`` of ``provider`` unblocks, asking Redis (local state if it is away).

        Args:
            provider: the provider's name (``"openai"``).
            key: the key itself.
        """
        credential = fingerprint(key)
        await self._block_and_read(provider, [credential], None, 0)
        return self.blocked_until(provider, key)

    # -- shared cooldowns (retry.sharedCooldown) --------------------------------------

    async def share_cooldown(
        self, provider: str, session_id: str, *, base_url: str | None, wait_ms: int
    ) -> None:
        """Every worker's requests with the session's key to ``base_url`` wait at least
        ``wait_ms`` from now (a server's wait hint, R-18). Never shortens one.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
            base_url: the base URL the requests go to; cooldowns are per URL.
            wait_ms: the least wait, in milliseconds; nothing happens if it is not positive.
        """
        candidates = self._candidates(provider)
        if not candidates or wait_ms <= 0:
            return
        credential = await self._current(provider, session_id, [i for i, _ in candidates])
        item = (provider, _url_id(base_url), credential)
        now = self._clock()
        self._cooldowns[item] = max(self._cooldowns.get(item, now), now + wait_ms / 1000)
        key = self._cooldown_key(*item)
        left = await self._redis(lambda: self._extend_script(keys=[key], args=[wait_ms]))
        if left is None:
            self._unsynced.add(item)

    async def cooldown_ms(self, provider: str, session_id: str, *, base_url: str | None) -> int:
        """How long the session must wait before using its key on ``base_url``: what is
        left of the longest shared cooldown plus jitter (up to a fifth of it, at most
        2 s, so a fleet does not wake together); 0 when there is none.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
            base_url: the base URL the requests go to; cooldowns are per URL.
        """
        candidates = self._candidates(provider)
        if not candidates:
            return 0
        credential = await self._current(provider, session_id, [i for i, _ in candidates])
        item = (provider, _url_id(base_url), credential)
        key = self._cooldown_key(*item)
        now = self._clock()
        left = await self._redis(lambda: self._client.pttl(key))
        if left is not None:
            if left > 0:
                self._cooldowns[item] = now + left / 1000
            else:
                self._cooldowns.pop(item, None)
        until = self._cooldowns.get(item, now)
        wait_ms = max(0, round((until - now) * 1000))
        return with_jitter(wait_ms, self._rng)

    # -- the fleet's rate budget (rateLimit) ------------------------------------------

    def rate_budget(self) -> RedisRateBudget:
        """The fleet's rate budget on this store's Redis (R-69; made at the first call,
        then the same one: every session of this worker shares it)."""
        if self._budget is None:
            from ._redis_budget import RedisRateBudget  # only with a rate limit set

            self._budget = RedisRateBudget(
                self._client,
                location=self.location,
                timeout=self._timeout,
                reconnect_interval=self._reconnect_interval,
                prefix=self._prefix,
            )
            if self._closed:
                self._budget.close()
        return self._budget

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Stop using Redis (the client itself is closed by ``open_redis_credentials``)."""
        self._closed = True
        if self._budget is not None:
            self._budget.close()


def _ints(value: Any) -> list[int]:
    return [int(v) for v in value]


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "…"


@asynccontextmanager
async def open_redis_credentials(
    url: str,
    *,
    keys: Mapping[str, Iterable[str]] | None = None,
    env_vars: Mapping[str, str] = DEFAULT_ENV_VARS,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.time,
    call_timeout: float = DEFAULT_TIMEOUT,
    reconnect_interval: float = DEFAULT_RECONNECT_INTERVAL,
    prefix: str = DEFAULT_PREFIX,
    rng: random.Random | None = None,
) -> AsyncIterator[RedisCredentialStore]:
    """A ``RedisCredentialStore`` on ``url`` for the length of a block.

    ``call_timeout`` bounds every Redis call (seconds); ``reconnect_interval`` is how
    often Redis is tried again while it is away. Redis need not be up: the first call
    that cannot reach it falls back to local state, and the store connects when it can.

    Args:
        url: the Redis URL: ``redis://``, ``rediss://`` or ``unix://`` (see ``check_url``).
        keys: provider name → this worker's keys, in order of preference.
        env_vars: provider → environment variable holding one more key.
        environ: where environment variables are read, at each call.
        clock: epoch seconds, for block and cooldown times.
        call_timeout: seconds one Redis call may take.
        reconnect_interval: seconds between attempts to reach Redis again.
        prefix: the start of every Redis key, so stores can share a database.
        rng: jitter's source for ``cooldown_ms``; a fresh ``random.Random`` if omitted.

    Example:
        ```python
        async with open_redis_credentials(
            "redis://cache:6379/0", keys={"openai": ["sk-a", "sk-b"]}
        ) as store:
            async with open_session(provider, model, credentials=store) as session:
                ...
        ```

    Raises:
        RedisCredentialStoreError: ``url`` is not a Redis URL (``check_url``), or
            the ``redis`` extra (``coredis``) is not installed.
    """
    check_url(url)
    try:
        import coredis
    except ImportError as exc:
        msg = "a Redis credential store needs coredis: pip install 'trio-session[redis]'"
        raise RedisCredentialStoreError(msg) from exc
    client: coredis.Redis[str] = coredis.Redis.from_url(
        url,
        decode_responses=True,
        verify_version=False,
        # our own bound (``call_timeout``) governs; coredis's only backs it up
        connect_timeout=call_timeout + 1,
        stream_timeout=call_timeout + 1,
        retry_policy=coredis.retry.NoRetryPolicy(),
    )
    try:
        async with client:
            store = RedisCredentialStore(
                client,
                keys=keys or {},
                location=redact_url(url),
                env_vars=env_vars,
                environ=environ,
                clock=clock,
                timeout=call_timeout,
                reconnect_interval=reconnect_interval,
                prefix=prefix,
                rng=rng or random.Random(),
            )
            try:
                yield store
            finally:
                store.close()
    except BaseExceptionGroup as group:
        # coredis runs the block inside its client's task group; what the block raised
        # comes out as itself, not wrapped in a group of one.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
