"""Redis down, slow or frozen never fails a prompt, and never holds up an abort.

Every test runs a real ``redis-server`` and kills it (SIGKILL), freezes it
(SIGSTOP) or restarts it while a store or a session is using it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import trio
import trio.testing

from tests.redis_support import running_redis
from tests.rpc_helpers import RawLines
from trio_session import FauxProvider, FauxReply, open_session
from trio_session.rpc import RpcServer
from trio_session.store._redis_credentials import (
    RedisCredentialStoreError,
    check_url,
    open_redis_credentials,
    redact_url,
)

KEY_A = "sk-test-aaaaaaaaaaaaaaaa-1111"
KEY_B = "sk-test-bbbbbbbbbbbbbbbb-2222"
USAGE_LIMIT = "429 usage_limit_reached: The usage limit has been reached\nretry-after: 600"
KEYS = {"faux": [KEY_A, KEY_B]}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "trio_session.credentials" and r.levelno == logging.WARNING
    ]


async def test_killed_mid_run_then_restarted(caplog: pytest.LogCaptureFixture) -> None:
    """Kill Redis: rotation goes on from local state, one warning, status
    "local-fallback". Restart it (empty): the store reconnects, writes back the block
    it made meanwhile, and another worker sees that block."""
    caplog.set_level(logging.INFO, logger="trio_session.credentials")
    with running_redis() as server:
        async with open_redis_credentials(
            server.url, keys=KEYS, call_timeout=10, reconnect_interval=0.05
        ) as store:
            assert await store.api_key("faux", "s1") == KEY_A
            assert store.status == "redis"
            server.stop()
            # Redis is gone: the usage limit still moves s1 to B, from local state
            assert await store.mark_usage_limit_reached("faux", "s1", retry_after_ms=600_000)
            assert str(store.status) == "local-fallback"  # mypy narrowed it to "redis"
            assert await store.api_key("faux", "s1") == KEY_B
            assert await store.api_key("faux", "s2") == KEY_B  # the local block holds
            start = trio.current_time()
            n = 0
            while trio.current_time() - start < 0.25:  # five reconnect intervals, all failing
                n += 1
                assert await store.api_key("faux", f"down-{n}") == KEY_B
                await trio.sleep(0.01)
            assert str(store.status) == "local-fallback"
            assert len(warnings_of(caplog)) == 1
            (warning,) = warnings_of(caplog)
            assert "local state" in warning.getMessage()
            assert KEY_A not in warning.getMessage()

            server.start()  # a new, empty Redis
            start = time.monotonic()
            while store.status != "redis":  # wait for the reconnection
                assert time.monotonic() - start < 30
                await trio.sleep(0.01)
                await store.api_key("faux", "probe")
            assert len(warnings_of(caplog)) == 1
            assert any("reachable again" in r.getMessage() for r in caplog.records)
            # the block made while Redis was away is in Redis now …
            names = (server.command("KEYS", "*") or "").splitlines()
            assert len(names) == 1
            assert 500_000 < int(server.command("PTTL", names[0]) or "0") <= 600_000
            # … so another worker, which never saw it happen, avoids A
            async with open_redis_credentials(server.url, keys=KEYS, call_timeout=10) as other:
                assert await other.api_key("faux", "w2-s1") == KEY_B


async def test_redis_down_at_start() -> None:
    with running_redis() as server:
        url = server.url
        server.stop()
        async with open_redis_credentials(url, keys=KEYS, reconnect_interval=60) as store:
            assert await store.api_key("faux", "s1") == KEY_A
            assert store.status == "local-fallback"
            assert await store.mark_usage_limit_reached("faux", "s1", retry_after_ms=1000)
            assert await store.api_key("faux", "s1") == KEY_B


async def test_a_frozen_redis_never_fails_a_prompt(caplog: pytest.LogCaptureFixture) -> None:
    """SIGSTOP: every Redis call gives up after its timeout; the prompt rotates from
    local state and answers; ``credential_store_status`` says so."""
    with running_redis() as server:
        async with open_redis_credentials(
            server.url, keys=KEYS, call_timeout=0.3, reconnect_interval=600
        ) as store:
            provider = FauxProvider([FauxReply(error=USAGE_LIMIT), FauxReply(text="fine")])
            async with open_session(provider, credentials=store) as session:
                assert session.credential_store_status == "redis"
                server.pause()
                try:
                    start = trio.current_time()
                    reply = await session.prompt("Hi")
                    took = trio.current_time() - start
                finally:
                    server.resume()
                assert reply.text == "fine"
                assert [r.api_key for r in provider.requests] == [KEY_A, KEY_B]
                assert session.credential_store_status == "local-fallback"
                assert took < 0.3 + 10  # one timeout, not one per call
                assert len(warnings_of(caplog)) == 1
                assert "unreachable" in warnings_of(caplog)[0].getMessage()


async def test_abort_is_not_held_up_by_a_frozen_redis() -> None:
    """A usage limit's Redis call hangs (SIGSTOP, 60 s timeout): ``abort()`` returns at
    once and the prompt ends; Redis is never waited for."""
    with running_redis() as server:
        async with open_redis_credentials(server.url, keys=KEYS, call_timeout=60) as store:
            entered = trio.Event()
            script = store._block_script

            def watched(*args: Any, **kwargs: Any) -> Any:
                if "args" in kwargs and kwargs["args"][0] != 0:  # the usage limit's block
                    server.pause()
                    entered.set()
                return script(*args, **kwargs)

            store._block_script = watched
            provider = FauxProvider([FauxReply(error=USAGE_LIMIT), FauxReply(text="never")])
            try:
                async with open_session(provider, credentials=store) as session:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(session.prompt, "Hi")
                        await entered.wait()
                        start = trio.current_time()
                        await session.abort()
                        took = trio.current_time() - start
                    assert not session.is_running
                    assert len(provider.requests) == 1
            finally:
                server.resume()
            assert took < 10  # far below the call's 60 s timeout


async def test_get_state_reports_the_credential_store() -> None:
    with running_redis() as server:
        async with (
            open_redis_credentials(
                server.url, keys=KEYS, call_timeout=0.3, reconnect_interval=600
            ) as store,
            open_session(FauxProvider([]), credentials=store) as session,
        ):
            client_end, server_end = trio.testing.memory_stream_pair()
            raw = RawLines(client_end, client_end)
            async with trio.open_nursery() as nursery:
                await nursery.start(RpcServer(session, server_end).serve)
                await raw.send({"id": 1, "type": "get_state"})
                assert (await raw.read())["data"]["credentialStore"] == "redis"
                server.stop()
                await store.api_key("faux", "s-new")
                await raw.send({"id": 2, "type": "get_state"})
                assert (await raw.read())["data"]["credentialStore"] == "local-fallback"
                await client_end.send_eof()


async def test_tcp_url() -> None:
    with running_redis(tcp=True) as server:
        assert server.url.startswith("redis://127.0.0.1:")
        async with open_redis_credentials(server.url, keys=KEYS, call_timeout=10) as store:
            assert await store.api_key("faux", "s1") == KEY_A
            assert await store.mark_usage_limit_reached("faux", "s1", retry_after_ms=5000)
            assert store.status == "redis"
        assert len((server.command("KEYS", "*") or "").splitlines()) == 1


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://cache:6379", "not a Redis URL"),
        ("redis://", "needs a host"),
        ("unix://", "needs a socket path"),
        ("redis://cache:port/0", "not a usable Redis URL"),
        ("/tmp/credentials.sqlite3", "not a Redis URL"),
    ],
)
def test_bad_urls_are_clear_errors(url: str, message: str) -> None:
    with pytest.raises(RedisCredentialStoreError, match=message):
        check_url(url)


def test_a_password_is_never_shown() -> None:
    assert redact_url("redis://:s3cret@cache:6379/0") == "redis://:…@cache:6379/0"
    assert redact_url("rediss://user:s3cret@cache/0") == "rediss://user:…@cache/0"
    assert redact_url("unix://:s3cret@/run/redis.sock") == "unix://:…@/run/redis.sock"
    with pytest.raises(RedisCredentialStoreError) as caught:
        check_url("http://:s3cret@cache:6379")
    assert "s3cret" not in str(caught.value)
