"""One contract for every credential store (R-17): in memory, SQLite, Redis.

Each test runs against each store where it applies; "two workers" are two store
objects on one backend (one SQLite file, one Redis). Then Redis only: the secret is
never in Redis, blocks expire by TTL, and rotation stays atomic when many tasks in
several processes mark and rotate at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from tests.redis_support import RedisServer, running_redis
from trio_session import InMemoryCredentialStore
from trio_session.store._redis_credentials import RedisCredentialStore, open_redis_credentials
from trio_session.store._sqlite_credentials import SqliteCredentialStore

KEY_A = "sk-test-aaaaaaaaaaaaaaaa-1111"
KEY_B = "sk-test-bbbbbbbbbbbbbbbb-2222"
KEY_C = "sk-test-cccccccccccccccc-3333"
ENV_KEY = "sk-env-eeeeeeeeeeeeeeeeeee-9999"
NO_ENV: Mapping[str, str] = {}
#: Seconds a Redis call may take in these tests: on a loaded machine a call that timed
#: out would fall back to local state, and two workers would not see each other.
SLOW_OK = 10.0

Store = InMemoryCredentialStore | SqliteCredentialStore | RedisCredentialStore


@attrs.define
class Backend:
    """Where stores of one kind keep their state; ``open`` makes one more "worker"."""

    kind: str
    tmp: Path
    redis: RedisServer | None = None

    @property
    def shared(self) -> bool:
        return self.kind != "memory"

    @asynccontextmanager
    async def open(
        self, keys: Mapping[str, list[str]], environ: Mapping[str, str] = NO_ENV
    ) -> AsyncIterator[Store]:
        if self.kind == "memory":
            yield InMemoryCredentialStore(keys=keys)
        elif self.kind == "sqlite":
            store = SqliteCredentialStore.open(self.tmp / "credentials.sqlite3", environ=environ)
            try:
                stored = {(c.provider, c.redacted) for c in store.list()}
                for provider, values in keys.items():
                    for key in values:
                        if (provider, f"{key[:3]}…{key[-4:]}") not in stored:
                            store.add(provider, key)
                yield store
            finally:
                store.close()
        else:
            assert self.redis is not None
            async with open_redis_credentials(
                self.redis.url, keys=keys, environ=environ, call_timeout=SLOW_OK
            ) as r:
                yield r


@pytest.fixture(params=["memory", "sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    kind: str = request.param
    if kind == "redis":
        with running_redis() as server:
            yield Backend(kind, tmp_path, server)
    else:
        yield Backend(kind, tmp_path)


@pytest.fixture
def shared_backend(backend: Backend) -> Backend:
    if not backend.shared:
        pytest.skip("an in-memory store is one process's own")
    return backend


def opened(backend: Backend, *keys: str) -> AbstractAsyncContextManager[Store]:
    return backend.open({"openai": list(keys)})


# -- one worker ---------------------------------------------------------------------------


async def test_sessions_stick_to_the_first_free_key(backend: Backend) -> None:
    async with opened(backend, KEY_A, KEY_B) as store:
        assert await store.api_key("openai", "s1") == KEY_A
        assert await store.api_key("openai", "s2") == KEY_A
        assert await store.api_key("openai", "s1") == KEY_A


async def test_usage_limit_rotates_to_the_next_free_key(backend: Backend) -> None:
    async with opened(backend, KEY_A, KEY_B, KEY_C) as store:
        assert await store.api_key("openai", "s1") == KEY_A
        assert await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=60_000)
        assert await store.api_key("openai", "s1") == KEY_B
        assert await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=60_000)
        assert await store.api_key("openai", "s1") == KEY_C


async def test_other_sessions_keep_their_key_until_they_hit_the_limit(backend: Backend) -> None:
    async with opened(backend, KEY_A, KEY_B) as store:
        assert await store.api_key("openai", "s1") == KEY_A
        assert await store.api_key("openai", "s2") == KEY_A
        assert await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=60_000)
        assert await store.api_key("openai", "s2") == KEY_A  # sticky: it has not hit it yet
        assert await store.api_key("openai", "s3") == KEY_B  # a new one avoids the block


async def test_all_blocked_moves_to_the_one_that_unblocks_first(backend: Backend) -> None:
    async with opened(backend, KEY_A, KEY_B) as store:
        await store.api_key("openai", "s1")
        assert await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=120_000)
        assert not await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=30_000)
        assert await store.api_key("openai", "s1") == KEY_B  # B ends in 30 s, A in 120 s
        assert await store.api_key("openai", "s2") == KEY_B


async def test_one_key_never_reports_a_switch(backend: Backend) -> None:
    async with opened(backend, KEY_A) as store:
        assert not await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=1000)
        assert await store.api_key("openai", "s1") == KEY_A


async def test_no_credentials(backend: Backend) -> None:
    async with opened(backend) as store:
        assert await store.api_key("openai", "s1") is None
        assert not await store.mark_usage_limit_reached("openai", "s1")


async def test_environment_key_counts_after_the_given_ones(shared_backend: Backend) -> None:
    environ = {"OPENAI_API_KEY": ENV_KEY}
    async with shared_backend.open({"openai": [KEY_A]}, environ) as store:
        assert await store.api_key("openai", "s1") == KEY_A
        assert await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=60_000)
        assert await store.api_key("openai", "s1") == ENV_KEY


async def test_a_block_reports_when_it_ends(shared_backend: Backend) -> None:
    async with opened(shared_backend, KEY_A, KEY_B) as store:
        assert isinstance(store, SqliteCredentialStore | RedisCredentialStore)
        await store.api_key("openai", "s1")
        before = time.time()
        await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=60_000)
        until = store.blocked_until("openai", KEY_A)
        assert until is not None
        assert before + 59 < until < time.time() + 61
        assert store.blocked_until("openai", KEY_B) is None


async def test_a_block_expires(backend: Backend) -> None:
    """A 300 ms block: new sessions avoid the key until it ends, then use it again."""
    async with opened(backend, KEY_A, KEY_B) as store:
        await store.api_key("openai", "s0")
        start = time.monotonic()
        assert await store.mark_usage_limit_reached("openai", "s0", retry_after_ms=300)
        n = 0
        while True:  # wait for the condition: a new session is given A again
            n += 1
            key = await store.api_key("openai", f"new-{n}")
            if key == KEY_A:
                break
            assert key == KEY_B
            assert time.monotonic() - start < 30
            await trio.sleep(0.01)
        assert time.monotonic() - start >= 0.29


# -- two workers on one backend -----------------------------------------------------------


async def test_rotation_across_two_workers(shared_backend: Backend) -> None:
    async with (
        opened(shared_backend, KEY_A, KEY_B) as one,
        opened(shared_backend, KEY_A, KEY_B) as two,
    ):
        assert await one.api_key("openai", "w1-s1") == KEY_A
        assert await two.api_key("openai", "w2-s1") == KEY_A
        assert await one.mark_usage_limit_reached("openai", "w1-s1", retry_after_ms=60_000)
        assert await two.api_key("openai", "w2-s2") == KEY_B  # worker 2 saw worker 1's block
        assert await two.api_key("openai", "w2-s1") == KEY_A  # sticky until its own limit
        # worker 2's session hits it too: B is free, so it moves there at once
        assert await two.mark_usage_limit_reached("openai", "w2-s1", retry_after_ms=60_000)
        assert await two.api_key("openai", "w2-s1") == KEY_B
        # worker 1 blocks B: nothing is free any more, and worker 2 knows it
        assert not await one.mark_usage_limit_reached("openai", "w1-s1", retry_after_ms=30_000)
        assert not await two.mark_usage_limit_reached("openai", "w2-s1", retry_after_ms=30_000)


# -- Redis only ---------------------------------------------------------------------------


async def test_the_secret_never_reaches_redis() -> None:
    with running_redis() as server:
        environ = {"OPENAI_API_KEY": ENV_KEY}
        async with open_redis_credentials(
            server.url,
            keys={"openai": [KEY_A, KEY_B, KEY_C]},
            environ=environ,
            call_timeout=SLOW_OK,
        ) as store:
            for n in range(4):
                await store.api_key("openai", f"s{n}")
                await store.mark_usage_limit_reached("openai", f"s{n}", retry_after_ms=60_000)
                await store.share_cooldown(
                    "openai", f"s{n}", base_url="https://api.example/v1", wait_ms=60_000
                )
            assert not await store.mark_usage_limit_reached("openai", "s0")
        names = (server.command("KEYS", "*") or "").splitlines()
        assert sum(":block:" in name for name in names) == 4  # A, B, C, the env key
        assert any(":cool:" in name for name in names)
        assert all(name.startswith("trio-session:{openai}:") for name in names)
        for name in names:
            dumped = server.raw("DUMP", name)
            value = server.command("GET", name) or ""
            for secret in (KEY_A, KEY_B, KEY_C, ENV_KEY):
                for part in (secret, secret[-12:], secret[3:15]):
                    assert part not in name
                    assert part not in value
                    assert part.encode() not in dumped


async def test_block_ttl_is_the_wait() -> None:
    with running_redis() as server:
        async with open_redis_credentials(
            server.url, keys={"openai": [KEY_A, KEY_B]}, call_timeout=SLOW_OK
        ) as store:
            await store.api_key("openai", "s1")
            await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=45_000)
        (name,) = (server.command("KEYS", "*") or "").splitlines()
        ttl = int(server.command("PTTL", name) or "0")
        assert 40_000 < ttl <= 45_000


async def test_a_url_with_a_password_is_never_shown() -> None:
    with running_redis() as server:
        assert server.command("CONFIG", "SET", "requirepass", "hunter2-secret") == "OK"
        url = f"unix://:hunter2-secret@{server.socket_path}"
        async with open_redis_credentials(
            url, keys={"openai": [KEY_A]}, call_timeout=SLOW_OK
        ) as store:
            assert await store.api_key("openai", "s1") == KEY_A
            assert store.status == "redis"
            assert "hunter2" not in repr(store)
            assert "hunter2" not in store.location


RACE_WORKER = textwrap.dedent(
    """
    import json, sys, time
    import trio
    from trio_session.store._redis_credentials import open_redis_credentials

    url, worker, tasks, nkeys = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    keys = [f"sk-race-{i:04d}-xxxxxxxxxxxxxxxx" for i in range(nkeys)]
    records = []

    async def task(store, t):
        n = 0
        while True:
            n += 1
            sid = f"{worker}-{t}-{n}"
            start = time.monotonic()
            key = await store.api_key("openai", sid)
            records.append(["pick", keys.index(key), start, time.monotonic()])
            start = time.monotonic()
            rotated = await store.mark_usage_limit_reached("openai", sid, retry_after_ms=600_000)
            records.append(["mark", keys.index(key), start, time.monotonic()])
            if rotated:
                new = await store.api_key("openai", sid)
                records.append(["rotated-to", keys.index(new), start, time.monotonic()])
            else:
                return

    async def main():
        async with open_redis_credentials(url, keys={"openai": keys}, call_timeout=30) as store:
            sys.stdout.write("ready\\n")
            sys.stdout.flush()
            sys.stdin.readline()  # all workers start together
            async with trio.open_nursery() as nursery:
                for t in range(tasks):
                    nursery.start_soon(task, store, t)
            assert store.status == "redis"
        print(json.dumps(records))

    trio.run(main)
    """
)


def _violations(records: list[list[Any]], nkeys: int) -> list[str]:
    """Picks (and rotations) of a key whose block was complete before the pick began,
    while another key was certainly free throughout the pick."""
    marks = [r for r in records if r[0] == "mark"]
    blocked_at = {
        k: min((r[3] for r in marks if r[1] == k), default=float("inf")) for k in range(nkeys)
    }
    first_mark_start = {
        k: min((r[2] for r in marks if r[1] == k), default=float("inf")) for k in range(nkeys)
    }
    found = []
    for kind, key, start, end in records:
        if kind == "mark":
            continue
        if blocked_at[key] < start and any(first_mark_start[k] > end for k in range(nkeys)):
            found.append(f"{kind} of key {key} at {start:.6f}, blocked at {blocked_at[key]:.6f}")
    return found


def test_rotation_is_atomic_across_processes(tmp_path: Path) -> None:
    """Four processes × eight tasks: each task takes a key for a fresh session, blocks it
    for ten minutes, rotates, and goes on until nothing is free. No key is ever handed
    out after its block was complete while another key was free; every key is blocked."""
    workers, tasks, nkeys = 4, 8, 60
    script = tmp_path / "race_worker.py"
    script.write_text(RACE_WORKER)
    with running_redis() as server:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), server.url, f"w{w}", str(tasks), str(nkeys)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            for w in range(workers)
        ]
        for proc in procs:  # every worker connected before any starts
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        records: list[list[Any]] = []
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0
            records.extend(json.loads(out.decode().splitlines()[-1]))
        blocked = (server.command("KEYS", "trio-session:{openai}:block:*") or "").splitlines()
    assert len(blocked) == nkeys
    assert {r[1] for r in records if r[0] == "mark"} == set(range(nkeys))
    assert _violations(records, nkeys) == []
    # the check can fail: a store that ignored blocks would hand out key 0 again and again
    ignoring = [[kind, 0, start, end] for kind, _, start, end in records]
    assert _violations(ignoring, nkeys) != []
