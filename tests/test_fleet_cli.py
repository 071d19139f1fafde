"""``--credentials URL`` and ``credentials.url``: the real ``trio-session rpc`` process on a
real ``redis-server``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.redis_support import running_redis
from tests.rpc_helpers import JSON, write_json
from tests.test_rpc_process import raw_process, rpc_args
from trio_session._command_keys import open_credentials
from trio_session.store._redis_credentials import RedisCredentialStore
from trio_session.store._sqlite_credentials import SqliteCredentialStore

KEY_ONE = "sk-test-1111111111111111-aaaa"
KEY_TWO = "sk-test-2222222222222222-bbbb"
ENV_KEY = "sk-env-eeeeeeeeeeeeeeeeeee-9999"


def env_for(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }


async def get_state(args: list[str], tmp_path: Path) -> tuple[JSON, int | None, str]:
    async with raw_process(args, env=env_for(tmp_path)) as (process, raw):
        await raw.send({"id": 1, "type": "get_state"})
        response = await raw.read()
        assert process.stdin is not None
        await process.stdin.aclose()
        with trio.fail_after(60):
            await process.wait()
        assert process.stderr is not None
        err = (await process.stderr.receive_some(65536)).decode()
    data = response["data"]
    assert isinstance(data, dict)
    return data, process.returncode, err


async def test_credentials_flag_opens_a_redis_store(tmp_path: Path) -> None:
    with running_redis() as server:
        args = [*rpc_args(tmp_path, []), "--no-session", "--credentials", server.url]
        state, status, _ = await get_state(args, tmp_path)
    assert state["credentialStore"] == "redis"
    assert status == 0


async def test_credentials_url_setting_opens_a_redis_store(tmp_path: Path) -> None:
    with running_redis() as server:
        args = [*rpc_args(tmp_path, [], {"credentials": {"url": server.url}}), "--no-session"]
        state, status, _ = await get_state(args, tmp_path)
    assert state["credentialStore"] == "redis"
    assert status == 0


async def test_redis_down_the_command_still_runs(tmp_path: Path) -> None:
    with running_redis() as server:
        url = server.url
    args = [*rpc_args(tmp_path, []), "--no-session", "--credentials", url]
    state, status, _ = await get_state(args, tmp_path)
    assert "credentialStore" in state  # "redis" until a call finds it gone
    assert status == 0


def test_a_bad_url_is_a_clear_error(tmp_path: Path) -> None:
    script = write_json(tmp_path / "script.json", [])
    command = [sys.executable, "-m", "trio_session", "rpc", "--faux", str(script)]
    done = subprocess.run(
        [*command, "--no-session", "--credentials", "http://:pw-secret@cache:6379"],
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("trio-session: not a Redis URL: 'http://:…@cache:6379'")
    assert "Traceback" not in done.stderr
    assert "pw-secret" not in done.stderr


async def test_the_redis_store_gets_the_local_store_s_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --api-key: the keys of ``trio-session auth add`` (the SQLite file), then
    the environment's; Redis keeps only their blocks."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    with SqliteCredentialStore.open() as local:
        local.add("openai", KEY_ONE)
        local.add("openai", KEY_TWO)
    with running_redis() as server:
        async with open_credentials("openai", None, server.url) as store:
            assert isinstance(store, RedisCredentialStore)
            assert await store.api_key("openai", "s1") == KEY_ONE
            assert await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=9000)
            assert await store.api_key("openai", "s1") == KEY_TWO
            assert await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=9000)
            assert await store.api_key("openai", "s1") == ENV_KEY
        # --api-key: that key alone
        async with open_credentials("openai", KEY_TWO, server.url) as store:
            assert isinstance(store, RedisCredentialStore)
            assert await store.api_key("openai", "s2") == KEY_TWO
            assert not await store.mark_usage_limit_reached("openai", "s2")
