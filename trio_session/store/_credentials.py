"""Credentials per provider, and what to do when one hits its usage limit (R-17).

A session sticks to one credential of its provider. When a request fails with a
usage-limit error, the session calls ``CredentialStore.mark_usage_limit_reached``:
the store blocks that credential until ``now + retry_after_ms`` and, if another
credential of the same provider is free, switches the session to it and returns
``True`` — the retry then goes out at once (``delayMs: 0``).

``InMemoryCredentialStore`` is the embedded default; a persistent store
(SQLite, shared between processes) implements the same protocol.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

import attrs

from .._core.classes import define

DEFAULT_BLOCK_MS = 60_000


def redact(secret: str) -> str:
    """A form of a key that is safe to print: ``sk-…wxyz`` (never the whole key)."""
    if len(secret) <= 8:
        return "…"
    return f"{secret[:3]}…{secret[-4:]}"


def _key_lists(keys: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    return {provider: list(values) for provider, values in keys.items()}


class CredentialStore(Protocol):
    """Where a session gets its API key, and reports a usage limit."""

    async def api_key(self, provider: str, session_id: str) -> str | None:
        """The key this session should use for ``provider`` now, or ``None``.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
        """
        ...

    async def mark_usage_limit_reached(
        self,
        provider: str,
        session_id: str,
        *,
        retry_after_ms: int | None = None,
        base_url: str | None = None,
    ) -> bool:
        """Block the session's credential; return whether it switched to another one.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
            retry_after_ms: the wait the server asked for, in milliseconds, if it said.
            base_url: the base URL the request went to.
        """
        ...


@runtime_checkable
class CooldownStore(Protocol):
    """A credential store that also shares server wait hints (``retry.sharedCooldown``).

    A cooldown belongs to a provider, a base URL and a key (the session's current one):
    every session using that key there waits until it has passed.
    """

    async def share_cooldown(
        self, provider: str, session_id: str, *, base_url: str | None, wait_ms: int
    ) -> None:
        """Hold the session's key on ``base_url`` for at least ``wait_ms`` from now."""
        ...

    async def cooldown_ms(self, provider: str, session_id: str, *, base_url: str | None) -> int:
        """What is left of the cooldown on the session's key, plus jitter; 0 if none."""
        ...


def with_jitter(wait_ms: int, rng: random.Random) -> int:
    """``wait_ms`` plus up to a fifth of it, at most 2 s more, so that sessions waiting
    for the same cooldown do not all wake together; 0 stays 0."""
    if wait_ms <= 0:
        return 0
    return wait_ms + round(rng.uniform(0, min(wait_ms / 5, 2000)))


@define(eq=False)
class InMemoryCredentialStore:
    """Several API keys per provider, held in memory.

    Args:
        keys: provider name → keys, in order of preference.
        clock: seconds, for blocking; ``time.time`` unless given (pass
            ``trio.current_time`` to follow a test's virtual clock).
        rng: jitter's source for ``cooldown_ms``.

    Its cooldowns (``CooldownStore``) are shared by the sessions of this process.
    """

    _keys: dict[str, list[str]] = attrs.field(converter=_key_lists, alias="keys", repr=False)
    _clock: Callable[[], float] = attrs.field(default=time.time, alias="clock")
    _sticky: dict[tuple[str, str], int] = attrs.field(factory=dict, init=False)
    _blocked_until: dict[tuple[str, int], float] = attrs.field(factory=dict, init=False)
    _rng: random.Random = attrs.field(factory=random.Random, alias="rng", repr=False)
    _cooldowns: dict[tuple[str, str, int], float] = attrs.field(factory=dict, init=False)

    @classmethod
    def from_keys(cls, keys: Mapping[str, Iterable[str]]) -> InMemoryCredentialStore:
        """``InMemoryCredentialStore.from_keys({"openai": ["sk-a", "sk-b"]})``.

        Args:
            keys: provider → its keys, in order of use.
        """
        return cls(keys=_key_lists(keys))

    def blocked_until(self, provider: str, key_index: int) -> float | None:
        """When the ``key_index``-th key of ``provider`` unblocks (clock seconds), if blocked.

        Args:
            provider: the provider's name (``"openai"``).
            key_index: the key's index in the provider's list, from 0.
        """
        until = self._blocked_until.get((provider, key_index))
        return until if until is not None and until > self._clock() else None

    async def api_key(self, provider: str, session_id: str) -> str | None:
        """The session's sticky key; on first use, the first free one.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
        """
        index = self._current(provider, session_id)
        return None if index is None else self._keys[provider][index]

    async def mark_usage_limit_reached(
        self,
        provider: str,
        session_id: str,
        *,
        retry_after_ms: int | None = None,
        base_url: str | None = None,
    ) -> bool:
        """Block the session's key for ``retry_after_ms`` (default 60 s); move to a free one.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
            retry_after_ms: how long to block it, in milliseconds; 60 s if ``None``.
            base_url: the base URL the request went to; not used.
        """
        index = self._current(provider, session_id)
        if index is None:
            return False
        now = self._clock()
        wait_ms = DEFAULT_BLOCK_MS if retry_after_ms is None else retry_after_ms
        self._blocked_until[(provider, index)] = now + wait_ms / 1000
        choice = self._pick(provider)
        assert choice is not None  # the provider has at least the key just blocked
        self._sticky[(provider, session_id)] = choice
        return choice != index and self.blocked_until(provider, choice) is None

    def _current(self, provider: str, session_id: str) -> int | None:
        sticky = self._sticky.get((provider, session_id))
        if sticky is not None:
            return sticky
        choice = self._pick(provider)
        if choice is not None:
            self._sticky[(provider, session_id)] = choice
        return choice

    def _pick(self, provider: str) -> int | None:
        """The first free key; if all are blocked, the one that unblocks first."""
        keys = self._keys.get(provider, [])
        if not keys:
            return None
        now = self._clock()
        until = [self._blocked_until.get((provider, i), now) for i in range(len(keys))]
        for i, t in enumerate(until):
            if t <= now:
                return i
        return min(range(len(keys)), key=until.__getitem__)

    async def share_cooldown(
        self, provider: str, session_id: str, *, base_url: str | None, wait_ms: int
    ) -> None:
        """Hold the session's key on ``base_url`` for at least ``wait_ms`` from now.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
            base_url: the base URL the requests go to; cooldowns are per URL.
            wait_ms: the least wait, in milliseconds; nothing happens if it is not positive.
        """
        index = self._current(provider, session_id)
        if index is None or wait_ms <= 0:
            return
        item = (provider, base_url or "", index)
        now = self._clock()
        self._cooldowns[item] = max(self._cooldowns.get(item, now), now + wait_ms / 1000)

    async def cooldown_ms(self, provider: str, session_id: str, *, base_url: str | None) -> int:
        """What is left of the cooldown on the session's key, plus jitter; 0 if none.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
            base_url: the base URL the requests go to; cooldowns are per URL.
        """
        index = self._current(provider, session_id)
        if index is None:
            return 0
        until = self._cooldowns.get((provider, base_url or "", index))
        left = 0 if until is None else max(0, round((until - self._clock()) * 1000))
        return with_jitter(left, self._rng)
