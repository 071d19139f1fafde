"""``KeyRing``: the key per request, rotation (R-17) and shared cooldowns (R-28b).

Through the real in-memory credential store on Trio's virtual clock; the session is
not needed: the ring takes the store, the settings and a watcher, and each call names
the base URL of the request's model (``None`` here: the faux model has none).
"""

from __future__ import annotations

import random

import attrs
import trio
import trio.testing

from trio_session import InMemoryCredentialStore
from trio_session._retry.keys import KeyRing
from trio_session._settings.store import SettingsStore


@attrs.define
class Watcher:
    """Records what a ``KeyRing`` tells its watcher."""

    keys: list[str | None] = attrs.field(factory=list)
    rotations: list[tuple[bool, int | None]] = attrs.field(factory=list)

    def saw_key(self, key: str | None) -> None:
        self.keys.append(key)

    def credential_rotated(self, *, rotated: bool, retry_after_ms: int | None) -> None:
        self.rotations.append((rotated, retry_after_ms))


class NoJitter(random.Random):
    """A ``random.Random`` whose ``uniform`` is always the low end."""

    def uniform(self, a: float, b: float) -> float:
        return a


def _ring(keys: list[str], **retry: object) -> tuple[KeyRing, Watcher]:
    store = InMemoryCredentialStore(keys={"faux": keys}, clock=trio.current_time, rng=NoJitter())
    settings = SettingsStore.coerce({"retry": {"sharedCooldown": True, **retry}})
    watcher = Watcher()
    return KeyRing(store, "faux", "s1", settings, watcher), watcher


async def test_rotation_moves_to_a_spare_key(autojump_clock: trio.testing.MockClock) -> None:
    """R-17: a usage limit blocks the key; with a spare one the ring says it rotated, and
    the next request goes out with the spare; the watcher saw both keys."""
    ring, watcher = _ring(["sk-first-key-0001", "sk-second-key-0002"])
    assert await ring.api_key(fresh=True, base_url=None) == "sk-first-key-0001"
    assert await ring.rotate(30_000, None) is True
    assert await ring.api_key(fresh=True, base_url=None) == "sk-second-key-0002"
    assert watcher.rotations == [(True, 30_000)]
    assert watcher.keys == ["sk-first-key-0001", "sk-second-key-0002"]


async def test_rotation_without_a_spare(autojump_clock: trio.testing.MockClock) -> None:
    """R-17: one key: blocked, but there is nothing to move to."""
    ring, watcher = _ring(["sk-only-key-00001"])
    assert await ring.rotate(None, None) is False
    assert watcher.rotations == [(False, None)]


async def test_a_fresh_request_waits_out_a_shared_cooldown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-28b: a hint shared on the key holds a fresh request for what is left of it; a
    chain's re-attempt (not fresh) does not wait again."""
    ring, _ = _ring(["sk-only-key-00001"])
    await ring.share_cooldown(5000, None)
    await trio.sleep(1)
    assert await ring.cooldown_ms(None) == 4000
    await ring.api_key(fresh=False, base_url=None)
    assert trio.current_time() == 1.0
    await ring.api_key(fresh=True, base_url=None)
    assert trio.current_time() == 5.0


async def test_the_cooldown_is_capped_by_the_one_cap_rule(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-28b, R-28: what is left of a cooldown is at most retry.maxDelayMs."""
    ring, _ = _ring(["sk-only-key-00001"], maxDelayMs=3000)
    await ring.share_cooldown(60_000, None)
    assert await ring.cooldown_ms(None) == 3000


async def test_no_shared_cooldown_unless_asked(autojump_clock: trio.testing.MockClock) -> None:
    """``retry.sharedCooldown`` off: hints are not shared, nothing waits."""
    ring, _ = _ring(["sk-only-key-00001"], sharedCooldown=False)
    await ring.share_cooldown(5000, None)
    assert await ring.cooldown_ms(None) == 0
    await ring.api_key(fresh=True, base_url=None)
    assert trio.current_time() == 0.0
