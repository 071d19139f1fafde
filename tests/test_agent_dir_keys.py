"""A key from pi's agent directory joins the credential store's keys (R-17).

``trio-session chat``/``rpc`` with ``--agent-dir`` (or ``PI_CODING_AGENT_DIR``) take
the provider's key from auth.json, its environment variable or models.json; that key
counts as one more after the ``trio-session auth add`` keys, as the environment
variable does without an agent directory, so a usage limit can move to another key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trio_session._command_keys import credential_store
from trio_session.store._sqlite_credentials import SqliteCredentialStore

KEY_A = "agent-dir-test-key-a"
KEY_B = "agent-dir-test-key-b"


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data"


async def test_a_usage_limit_moves_from_the_agent_dir_key_to_a_stored_one(
    data_home: Path,
) -> None:
    """R-17: a stored key B, then the agent directory's key A; B's limit moves to A."""
    with SqliteCredentialStore.open() as local:
        local.add("custom", KEY_B)
    store = credential_store("custom", None, agent_dir_key=KEY_A)
    assert isinstance(store, SqliteCredentialStore)
    try:
        assert store.keys("custom") == (KEY_B, KEY_A)  # stored first, then the one more
        assert await store.api_key("custom", "s1") == KEY_B
        assert await store.mark_usage_limit_reached("custom", "s1", retry_after_ms=600_000)
        assert await store.api_key("custom", "s1") == KEY_A
        assert not await store.mark_usage_limit_reached("custom", "s1", retry_after_ms=600_000)
    finally:
        store.close()


async def test_the_agent_dir_key_alone_and_a_stored_duplicate(data_home: Path) -> None:
    """No stored keys: the agent directory's key alone; stored too, it counts once."""
    store = credential_store("custom", None, agent_dir_key=KEY_A)
    assert isinstance(store, SqliteCredentialStore)
    try:
        assert await store.api_key("custom", "s1") == KEY_A
        assert not await store.mark_usage_limit_reached("custom", "s1")
        store.add("custom", KEY_A)
        store.add("custom", KEY_B)
        assert store.keys("custom") == (KEY_A, KEY_B)
        assert [c.label for c in store.list("custom")] == ["key1", "key2"]
    finally:
        store.close()


def test_a_flag_key_is_still_the_only_key(data_home: Path) -> None:
    """``--api-key``/``--api-key-file``: that key alone, whatever is stored."""
    with SqliteCredentialStore.open() as local:
        local.add("custom", KEY_B)
    store = credential_store("custom", KEY_A)
    assert not isinstance(store, SqliteCredentialStore)
