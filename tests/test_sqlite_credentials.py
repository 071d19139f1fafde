"""The SQLite credential store: rotation on usage limits, shared between processes (R-17)."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_session import InMemoryCredentialStore, TrioSessionError
from trio_session._dirs import user_data_dir
from trio_session.store._credentials_file import (
    DEFAULT_ENV_VARS,
    CredentialInfo,
    CredentialStoreError,
    default_credentials_path,
)
from trio_session.store._sqlite_credentials import SqliteCredentialStore, open_sqlite_credentials

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")
KEY_A = "sk-test-aaaaaaaaaaaaaaaa-1111"
KEY_B = "sk-test-bbbbbbbbbbbbbbbb-2222"
KEY_C = "sk-test-cccccccccccccccc-3333"
ENV_KEY = "sk-env-eeeeeeeeeeeeeeeeeee-9999"


@attrs.define
class Clock:
    """Epoch seconds that a test moves by hand."""

    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


def full(text: str) -> str:
    """A regex matching exactly ``text``."""
    return f"^{re.escape(text)}$"


@pytest.fixture
def clock() -> Clock:
    """A hand-moved clock starting at 1000 s."""
    return Clock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where the test's store lives (the directory does not exist yet)."""
    return tmp_path / "data" / "credentials.sqlite3"


@pytest.fixture
def store(db_path: Path, clock: Clock) -> Iterator[SqliteCredentialStore]:
    """A store with two OpenAI keys and no environment."""
    with SqliteCredentialStore.open(db_path, environ={}, clock=clock) as opened:
        opened.add("openai", KEY_A)
        opened.add("openai", KEY_B)
        yield opened


# --- the file ------------------------------------------------------------------------------


@posix_only
def test_store_file_is_created_private(db_path: Path) -> None:
    """Acceptance 4: the store (and SQLite's WAL side files) are 0600, its directory 0700."""
    with SqliteCredentialStore.open(db_path, environ={}) as opened:
        opened.add("openai", KEY_A)
        names = sorted(p.name for p in db_path.parent.iterdir())
        assert names == [
            "credentials.sqlite3",
            "credentials.sqlite3-shm",
            "credentials.sqlite3-wal",
        ]
        for path in db_path.parent.iterdir():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700


def test_store_uses_wal_mode(store: SqliteCredentialStore, db_path: Path) -> None:
    """The database is in WAL mode, so readers in other processes never block a writer."""
    with contextlib.closing(sqlite3.connect(db_path)) as other, other:
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_default_path_is_in_the_user_data_dir() -> None:
    """The default file is ``<user data dir>/credentials.sqlite3``."""
    assert default_credentials_path() == user_data_dir() / "credentials.sqlite3"
    assert default_credentials_path(data_dir="/d") == Path("/d/credentials.sqlite3")


@posix_only
def test_a_store_others_can_read_is_refused(db_path: Path) -> None:
    """A store file with group or other permissions is refused, naming the fix."""
    db_path.parent.mkdir()
    db_path.touch(mode=0o644)
    db_path.chmod(0o644)
    expected = (
        f"credential store {db_path} has mode 0644: it holds API keys and must be readable "
        f"by its owner only (chmod 600 {db_path})"
    )
    with pytest.raises(CredentialStoreError, match=full(expected)):
        SqliteCredentialStore.open(db_path)


def test_a_corrupt_file_is_a_clear_error(db_path: Path) -> None:
    """A file that is not SQLite gives one clear message, not a sqlite3 traceback."""
    db_path.parent.mkdir()
    fd = os.open(db_path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b"these are not the pages you are looking for\n" * 200)
    os.close(fd)
    expected = f"credential store {db_path} is not a usable SQLite database: file is not a database"
    with pytest.raises(CredentialStoreError, match=full(expected)) as info:
        SqliteCredentialStore.open(db_path)
    assert info.value.path == db_path
    assert isinstance(info.value, TrioSessionError)


def test_a_newer_schema_is_refused(db_path: Path) -> None:
    """A store written by a newer version is not guessed at."""
    SqliteCredentialStore.open(db_path).close()
    with contextlib.closing(sqlite3.connect(db_path)) as other, other:
        other.execute("PRAGMA user_version = 7")
    expected = (
        f"credential store {db_path} has schema version 7, newer than this version of "
        "trio_session understands (1)"
    )
    with pytest.raises(CredentialStoreError, match=full(expected)):
        SqliteCredentialStore.open(db_path)


def test_a_directory_is_not_a_store(tmp_path: Path) -> None:
    """A directory where the file should be is reported."""
    with pytest.raises(
        CredentialStoreError, match=full(f"credential store {tmp_path} is not a regular file")
    ):
        SqliteCredentialStore.open(tmp_path)


async def test_closed_store_refuses_use(db_path: Path) -> None:
    """After ``close()`` (idempotent) every call says the store is closed."""
    opened = SqliteCredentialStore.open(db_path, environ={})
    opened.close()
    opened.close()
    with pytest.raises(CredentialStoreError, match=full(f"credential store {db_path} is closed")):
        await opened.api_key("openai", "s")


# --- management -----------------------------------------------------------------------------


def test_list_shows_redacted_keys_only(db_path: Path, clock: Clock) -> None:
    """Acceptance 4: ``list()`` never contains a whole key; labels, order and source show."""
    environ = {"OPENAI_API_KEY": ENV_KEY}
    with SqliteCredentialStore.open(db_path, environ=environ, clock=clock) as opened:
        assert opened.add("openai", KEY_A) == CredentialInfo(
            provider="openai", label="key1", index=0, redacted="sk-…1111", source="store"
        )
        opened.add("openai", KEY_B, label="work")
        opened.add("anthropic", KEY_C)
        listed = opened.list()
    assert listed == (
        CredentialInfo("anthropic", "key1", 0, "sk-…3333", "store"),
        CredentialInfo("openai", "key1", 0, "sk-…1111", "store"),
        CredentialInfo("openai", "work", 1, "sk-…2222", "store"),
        CredentialInfo("openai", "OPENAI_API_KEY", None, "sk-…9999", "env"),
    )
    shown = repr(listed) + str(listed)
    for key in (KEY_A, KEY_B, KEY_C, ENV_KEY):
        assert key not in shown
        assert key[3:-4] not in shown


async def test_list_shows_blocks_until_they_expire(
    store: SqliteCredentialStore, clock: Clock
) -> None:
    """A blocked credential lists its unblock time; once expired, it lists none."""
    await store.mark_usage_limit_reached("openai", "s", retry_after_ms=30_000)
    assert [c.blocked_until for c in store.list("openai")] == [1_030.0, None]
    assert store.blocked_until("openai", KEY_A) == 1_030.0
    clock.now = 1_030.0
    assert [c.blocked_until for c in store.list("openai")] == [None, None]
    assert store.blocked_until("openai", KEY_A) is None


def test_default_labels_fill_gaps(store: SqliteCredentialStore) -> None:
    """Default labels are ``key1``, ``key2`` …, reusing a removed one."""
    store.remove("openai", "key1")
    assert store.add("openai", KEY_C).label == "key1"
    assert [c.label for c in store.list("openai")] == ["key2", "key1"]


def test_remove_by_label_or_index(store: SqliteCredentialStore) -> None:
    """``remove`` takes a label or a 0-based index as ``list`` shows; it returns what it removed."""
    store.add("openai", KEY_C, label="spare")
    assert store.remove("openai", 1) == CredentialInfo("openai", "key2", 1, "sk-…2222", "store")
    assert store.remove("openai", "spare").redacted == "sk-…3333"
    assert [c.label for c in store.list()] == ["key1"]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda s: s.add("openai", KEY_A), "this key is already stored for openai as 'key1'"),
        (
            lambda s: s.add("openai", KEY_C, label="key2"),
            "openai already has a key labelled 'key2'",
        ),
        (
            lambda s: s.add("openai", KEY_C, label="2"),
            "label must not be a number (numbers select keys by index), not '2'",
        ),
        (
            lambda s: s.add("openai", f" {KEY_C}"),
            "API key must be a non-empty string without surrounding spaces",
        ),
        (lambda s: s.add("openai", "sk-a b"), "API key must not contain spaces or line breaks"),
        (
            lambda s: s.add("", KEY_C),
            "provider must be a non-empty string without surrounding spaces",
        ),
        (lambda s: s.remove("openai", 2), "openai has no stored key at index 2 (it has 2)"),
        (
            lambda s: s.remove("openai", "home"),
            "openai has no stored key labelled 'home' (labels: 'key1', 'key2')",
        ),
        (
            lambda s: s.remove("anthropic", "x"),
            "anthropic has no stored key labelled 'x' (labels: none)",
        ),
    ],
)
def test_management_errors_are_clear_and_never_show_a_key(
    store: SqliteCredentialStore,
    call: Callable[[SqliteCredentialStore], object],
    expected: str,
) -> None:
    """Bad management calls name provider and label; no message contains a key."""
    with pytest.raises(CredentialStoreError, match=full(expected)) as info:
        call(store)
    assert not any(key in str(info.value) for key in (KEY_A, KEY_B, KEY_C))
    assert len(store.list()) == 2


# --- rotation, as the in-memory store does it ------------------------------------------


async def test_sessions_stick_to_the_first_free_key(store: SqliteCredentialStore) -> None:
    """R-17: every new session starts on the first free key and keeps it."""
    assert await store.api_key("openai", "s1") == KEY_A
    assert await store.api_key("openai", "s2") == KEY_A
    assert await store.api_key("openai", "s1") == KEY_A


async def test_usage_limit_rotates_to_the_second_key(store: SqliteCredentialStore) -> None:
    """Acceptance 3, R-17: a usage limit on the first key ⇒ True, and the next key is the second."""
    assert await store.api_key("openai", "s1") == KEY_A
    assert await store.mark_usage_limit_reached("openai", "s1", retry_after_ms=10_000) is True
    assert await store.api_key("openai", "s1") == KEY_B
    assert await store.api_key("openai", "new") == KEY_B  # new sessions avoid the block
    assert await store.api_key("openai", "s2") == KEY_B


async def test_other_sessions_keep_their_key_until_they_hit_the_limit(
    store: SqliteCredentialStore,
) -> None:
    """R-17: stickiness: a session already on the blocked key stays there until it is told."""
    await store.api_key("openai", "s1")
    await store.api_key("openai", "s2")
    await store.mark_usage_limit_reached("openai", "s1")
    assert await store.api_key("openai", "s2") == KEY_A
    assert await store.mark_usage_limit_reached("openai", "s2") is True
    assert await store.api_key("openai", "s2") == KEY_B


async def test_all_blocked_uses_the_one_that_unblocks_first(
    store: SqliteCredentialStore, clock: Clock
) -> None:
    """R-17: with every key blocked, the session gets the earliest to unblock, and no switch."""
    assert await store.mark_usage_limit_reached("openai", "s", retry_after_ms=5_000) is True
    clock.now = 1_001.0
    assert await store.mark_usage_limit_reached("openai", "s", retry_after_ms=60_000) is False
    assert await store.api_key("openai", "s") == KEY_A  # A unblocks at 1005, B at 1061
    assert await store.api_key("openai", "other") == KEY_A


async def test_a_block_expires_with_the_clock(store: SqliteCredentialStore, clock: Clock) -> None:
    """R-17: once ``retry_after_ms`` has passed, the key is free again."""
    await store.mark_usage_limit_reached("openai", "s", retry_after_ms=2_000)
    assert await store.api_key("openai", "fresh") == KEY_B
    clock.now = 1_002.0
    assert await store.api_key("openai", "fresher") == KEY_A
    assert await store.mark_usage_limit_reached("openai", "s") is True  # B blocked, A free again
    assert await store.api_key("openai", "s") == KEY_A


async def test_default_block_is_60_seconds(store: SqliteCredentialStore, clock: Clock) -> None:
    """R-17: without a retry hint the key is blocked for 60 s."""
    await store.mark_usage_limit_reached("openai", "s")
    assert store.blocked_until("openai", KEY_A) == 1_060.0
    clock.now = 1_059.9
    assert await store.api_key("openai", "t") == KEY_B
    clock.now = 1_060.0
    assert await store.api_key("openai", "u") == KEY_A


async def test_one_key_never_reports_a_switch(db_path: Path, clock: Clock) -> None:
    """R-17: with a single key the delay stays exponential: ``False``, same key."""
    with SqliteCredentialStore.open(db_path, environ={}, clock=clock) as opened:
        opened.add("openai", KEY_A)
        assert await opened.mark_usage_limit_reached("openai", "s") is False
        assert await opened.api_key("openai", "s") == KEY_A


async def test_no_credentials(db_path: Path) -> None:
    """A provider without keys: no key, and nothing to switch to."""
    with SqliteCredentialStore.open(db_path, environ={}) as opened:
        assert await opened.api_key("openai", "s") is None
        assert await opened.mark_usage_limit_reached("openai", "s") is False
        assert opened.list() == ()


async def test_environment_key_counts_after_the_stored_ones(db_path: Path, clock: Clock) -> None:
    """R-17: ``OPENAI_API_KEY`` is one more credential, used after the stored keys."""
    environ = {"OPENAI_API_KEY": ENV_KEY, "ANTHROPIC_API_KEY": KEY_C}
    with SqliteCredentialStore.open(db_path, environ=environ, clock=clock) as opened:
        assert await opened.api_key("anthropic", "s") == KEY_C  # env only
        opened.add("openai", KEY_A)
        assert await opened.api_key("openai", "s") == KEY_A
        assert await opened.mark_usage_limit_reached("openai", "s") is True
        assert await opened.api_key("openai", "s") == ENV_KEY
        opened.add("openai", ENV_KEY)  # the same key stored too: counted once
        assert [c.source for c in opened.list("openai")] == ["store", "store"]
        assert await opened.api_key("openai", "s") == ENV_KEY  # its block and session follow


async def test_environment_mapping_is_a_parameter(db_path: Path) -> None:
    """The provider → variable mapping can be replaced (a self-hosted provider, say)."""
    assert DEFAULT_ENV_VARS == {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
    environ = {"LOCAL_LLM_KEY": KEY_C, "OPENAI_API_KEY": ENV_KEY}
    with SqliteCredentialStore.open(
        db_path, environ=environ, env_vars={"local": "LOCAL_LLM_KEY"}
    ) as opened:
        assert await opened.api_key("local", "s") == KEY_C
        assert await opened.api_key("openai", "s") is None


async def test_removing_a_session_s_key_moves_it(store: SqliteCredentialStore) -> None:
    """A session whose key was removed chooses again on its next request."""
    await store.mark_usage_limit_reached("openai", "s")  # s now on B
    store.remove("openai", "key2")
    assert await store.api_key("openai", "s") == KEY_A


async def test_open_sqlite_credentials_opens_and_closes(db_path: Path) -> None:
    """The async opener yields a working store and closes it after the block."""
    async with open_sqlite_credentials(db_path, environ={}) as opened:
        await trio.to_thread.run_sync(opened.add, "openai", KEY_A)
        assert await opened.api_key("openai", "s") == KEY_A
    with pytest.raises(CredentialStoreError):
        await opened.api_key("openai", "s")


# --- shared between connections and processes -------------------------------------------------


async def test_two_connections_see_each_other_s_blocks(
    store: SqliteCredentialStore, db_path: Path, clock: Clock
) -> None:
    """Acceptance 3: a block set through one connection is seen through another at once."""
    with SqliteCredentialStore.open(db_path, environ={}, clock=clock) as other:
        assert await other.api_key("openai", "s") == KEY_A
        assert await store.mark_usage_limit_reached("openai", "s") is True  # same session id
        assert await other.api_key("openai", "s") == KEY_B  # stickiness is shared too
        assert await other.api_key("openai", "t") == KEY_B


PROCESS = textwrap.dedent(
    """
    import sys
    import trio
    from trio_session.store._sqlite_credentials import SqliteCredentialStore

    path, session, now = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with SqliteCredentialStore.open(path, environ={}, clock=lambda: now) as store:
        switched = trio.run(store.mark_usage_limit_reached, "openai", session)
        key = trio.run(store.api_key, "openai", session)
    print(switched, key[-4:])
    """
)


def mark_in_another_process(path: Path, session: str, now: float) -> str:
    """Run ``mark_usage_limit_reached`` in a fresh Python process; return what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", PROCESS, str(path), session, str(now)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


async def test_two_processes_see_each_other_s_blocks(
    store: SqliteCredentialStore, db_path: Path
) -> None:
    """Acceptance 3: blocks and rotations made by another process apply here, and back."""
    assert await store.api_key("openai", "here") == KEY_A
    # The other process: its session starts on A, hits the limit, moves to B.
    assert mark_in_another_process(db_path, "there", 1_000.0) == "True 2222"
    assert [c.blocked_until for c in store.list("openai")] == [1_060.0, None]
    assert await store.api_key("openai", "new-here") == KEY_B
    # Here: A is blocked already; rotating moves us to B too.
    assert await store.mark_usage_limit_reached("openai", "here") is True
    # The other process again: B blocked until 1060, A until 1060 → A is re-picked first.
    assert mark_in_another_process(db_path, "there", 1_000.0) == "False 1111"
    assert [c.blocked_until for c in store.list("openai")] == [1_060.0, 1_060.0]


async def test_concurrent_writers_never_see_a_locked_database(db_path: Path) -> None:
    """``BEGIN IMMEDIATE`` serialises writers: many connections, no ``database is locked``."""
    stores = [SqliteCredentialStore.open(db_path, environ={}) for _ in range(4)]
    try:
        stores[0].add("openai", KEY_A)
        stores[0].add("openai", KEY_B)

        async def hammer(opened: SqliteCredentialStore, n: int) -> None:
            for i in range(25):
                await opened.api_key("openai", f"s{n}-{i}")
                await opened.mark_usage_limit_reached("openai", f"s{n}-{i}", retry_after_ms=1)

        async with trio.open_nursery() as nursery:
            for n, opened in enumerate(stores):
                nursery.start_soon(hammer, opened, n)
    finally:
        for opened in stores:
            opened.close()


# --- the same answers as the in-memory store, for any sequence ---------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("key"), st.sampled_from(["s1", "s2", "s3"])),
        st.tuples(
            st.just("mark"),
            st.sampled_from(["s1", "s2", "s3"]),
            st.one_of(st.none(), st.integers(min_value=0, max_value=120_000)),
        ),
        st.tuples(st.just("wait"), st.integers(min_value=0, max_value=90)),
    ),
    max_size=25,
)


async def compare(ops: list[tuple[object, ...]], keys: list[str], env: bool, path: Path) -> None:
    clock = Clock()
    environ = {"OPENAI_API_KEY": ENV_KEY} if env else {}
    memory = InMemoryCredentialStore(keys={"openai": keys + [ENV_KEY] * env}, clock=clock)
    with SqliteCredentialStore.open(path, environ=environ, clock=clock) as sql:
        for key in keys:
            sql.add("openai", key)
        for op in ops:
            if op[0] == "key":
                session = str(op[1])
                assert await sql.api_key("openai", session) == await memory.api_key(
                    "openai", session
                ), op
            elif op[0] == "mark":
                session, hint = str(op[1]), op[2]
                assert isinstance(hint, int | None)
                got = await sql.mark_usage_limit_reached("openai", session, retry_after_ms=hint)
                want = await memory.mark_usage_limit_reached("openai", session, retry_after_ms=hint)
                assert got == want, op
            else:
                assert isinstance(op[1], int)
                clock.now += op[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=operations,
    count=st.integers(min_value=0, max_value=3),
    env=st.booleans(),
)
def test_same_answers_as_the_in_memory_store(
    ops: list[tuple[object, ...]], count: int, env: bool
) -> None:
    """R-17: for any sequence of requests, limits and waits, both stores answer alike."""
    keys = [KEY_A, KEY_B, KEY_C][:count]
    with tempfile.TemporaryDirectory() as directory:
        trio.run(compare, ops, keys, env, Path(directory) / "c.sqlite3")
