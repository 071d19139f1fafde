"""Credentials under the policy: the key for each request, rotation and cooldowns.

* ``api_key`` — the key a request goes out with. A fresh request (not a chain's
  re-attempt) on a key in a shared cooldown waits out what is left of it first
  (``retry.sharedCooldown``, R-28b); a re-attempt has already waited, since its chain's
  delay includes the cooldown (``cooldown_delay``).
* ``rotate`` — R-17: a usage limit is reported to the store, which may move the
  session to another key (then the chain does not wait).
* ``share_cooldown`` / ``cooldown_ms`` — R-28b: a server's wait hint holds for every
  session on the key; what is left of it is capped by the one cap rule of
  ``backoff.wait_cap``.
"""

from __future__ import annotations

from typing import Protocol

import trio

from .._core.classes import define
from ..store._credentials import CooldownStore, CredentialStore
from .backoff import wait_cap
from .decide import SettingsSource


class KeyWatcher(Protocol):
    """Who is told about keys (the session's observer: no log record or span shows one)."""

    def saw_key(self, key: str | None) -> None:
        """A key the session is about to use."""
        ...

    def credential_rotated(self, *, rotated: bool, retry_after_ms: int | None) -> None:
        """The store was told about a usage limit; whether it moved to another key."""
        ...


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class KeyRing:
    """One session's credentials: a store, who the session is to it, and its watcher.

    Each call names the base URL of the model the request goes to (it changes with
    ``set_model`` and a fallback): with the provider, it names the key in the store.

    Attributes:
        store: where keys come from.
        provider: the provider's name, as the store knows it.
        session_id: the session, as the store knows it.
        settings: the settings, read fresh (``retry.sharedCooldown`` and the cap).
        watcher: told about every key and rotation.
    """

    store: CredentialStore
    provider: str
    session_id: str
    settings: SettingsSource
    watcher: KeyWatcher

    async def api_key(self, *, fresh: bool, base_url: str | None) -> str | None:
        """The key for the next request; a ``fresh`` one (no chain alive) first waits
        out the key's shared cooldown, if any.

        Args:
            fresh: the request is not a chain's re-attempt.
            base_url: the request's model's base URL.
        """
        key = await self.store.api_key(self.provider, self.session_id)
        self.watcher.saw_key(key)
        if key is not None and fresh:
            wait_ms = await self.cooldown_ms(base_url)
            if wait_ms > 0:
                await trio.sleep(wait_ms / 1000)
        return key

    async def rotate(self, hint_ms: int | None, base_url: str | None) -> bool:
        """R-17: report a usage limit; True if the store moved us to another credential.

        Args:
            hint_ms: the server's wait hint (R-18), if any.
            base_url: the failed request's model's base URL.
        """
        rotated = await self.store.mark_usage_limit_reached(
            self.provider,
            self.session_id,
            retry_after_ms=hint_ms,
            base_url=base_url,
        )
        self.watcher.credential_rotated(rotated=rotated, retry_after_ms=hint_ms)
        return rotated

    def _cooldowns(self) -> CooldownStore | None:
        """The store sharing wait hints, when ``retry.sharedCooldown`` is on and it can."""
        if not self.settings.current.retry.shared_cooldown:
            return None
        return self.store if isinstance(self.store, CooldownStore) else None

    async def share_cooldown(self, hint_ms: int, base_url: str | None) -> None:
        """``retry.sharedCooldown``: every session on this key waits out the server's hint.

        Args:
            hint_ms: the server's wait hint (R-18).
            base_url: the failed request's model's base URL.
        """
        store = self._cooldowns()
        if store is not None:
            await store.share_cooldown(
                self.provider, self.session_id, base_url=base_url, wait_ms=hint_ms
            )

    async def cooldown_ms(self, base_url: str | None) -> int:
        """What is left of the shared cooldown on this session's key (with jitter), at
        most the cap of ``backoff.wait_cap``.

        Args:
            base_url: the next request's model's base URL.
        """
        store = self._cooldowns()
        if store is None:
            return 0
        wait_ms = await store.cooldown_ms(self.provider, self.session_id, base_url=base_url)
        cap = wait_cap(self.settings.current.retry)
        return wait_ms if cap is None else min(wait_ms, cap[0])
