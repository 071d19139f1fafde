"""Settings files on disk: where they live, and writing one key back atomically (R-37, R-38)."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.wording import json_error
from trio_session import SettingsError, SettingsLayer, SettingsStore
from trio_session._dirs import user_config_dir, user_data_dir
from trio_session._settings.store import default_settings_paths, persist_setting

HOME = Path("/home/ada")
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes and links")


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` and return the path."""
    path.write_text(text, encoding="utf-8")
    return path


def read_json(path: Path) -> Any:
    """The JSON content of ``path``."""
    return json.loads(path.read_text(encoding="utf-8"))


# --- where the files live ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "environ", "config", "data"),
    [
        ("linux", {}, HOME / ".config/trio-session", HOME / ".local/share/trio-session"),
        (
            "linux",
            {"XDG_CONFIG_HOME": "/xdg/config", "XDG_DATA_HOME": "/xdg/data"},
            Path("/xdg/config/trio-session"),
            Path("/xdg/data/trio-session"),
        ),
        (
            "linux",
            {"XDG_CONFIG_HOME": "relative/config", "XDG_DATA_HOME": ""},
            HOME / ".config/trio-session",
            HOME / ".local/share/trio-session",
        ),
        (
            "darwin",
            {"XDG_CONFIG_HOME": "/ignored"},
            HOME / "Library/Application Support/trio-session",
            HOME / "Library/Application Support/trio-session",
        ),
        (
            "win32",
            {
                "APPDATA": "C:/Users/ada/AppData/Roaming",
                "LOCALAPPDATA": "C:/Users/ada/AppData/Local",
            },
            Path("C:/Users/ada/AppData/Roaming/trio-session"),
            Path("C:/Users/ada/AppData/Local/trio-session"),
        ),
        (
            "win32",
            {},
            HOME / "AppData/Roaming/trio-session",
            HOME / "AppData/Local/trio-session",
        ),
    ],
)
def test_user_directories_follow_the_platform_rule(
    platform: str, environ: dict[str, str], config: Path, data: Path
) -> None:
    """R-38: XDG on Linux (absolute only), Application Support on macOS, APPDATA on Windows."""
    assert user_config_dir(platform=platform, environ=environ, home=HOME) == config
    assert user_data_dir(platform=platform, environ=environ, home=HOME) == data


def test_default_settings_paths_are_global_then_project(tmp_path: Path) -> None:
    """R-38: the global file in the user config dir, then ``<cwd>/.trio-session/settings.json``."""
    config = tmp_path / "config"
    assert default_settings_paths(tmp_path / "proj", config_dir=config) == (
        config / "settings.json",
        tmp_path / "proj" / ".trio-session" / "settings.json",
    )


def test_default_settings_paths_use_the_environment_and_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no arguments: the platform config dir and the current working directory."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("APPDATA", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    global_path, project_path = default_settings_paths()
    assert global_path.parent == user_config_dir()
    assert project_path == tmp_path / ".trio-session" / "settings.json"


def test_missing_default_files_give_default_settings(tmp_path: Path) -> None:
    """R-38: neither file has to exist; the store then holds the defaults."""
    paths = default_settings_paths(tmp_path / "proj", config_dir=tmp_path / "config")
    store = SettingsStore.from_files(*paths)
    assert store.current == SettingsStore().current


# --- persist_setting ---------------------------------------------------------------------


def test_persist_creates_the_file_and_its_directories(tmp_path: Path) -> None:
    """R-37: persisting into a project that has no settings yet creates ``.trio-session/``."""
    path = tmp_path / "proj" / ".trio-session" / "settings.json"
    persist_setting(path, "retry.enabled", False)
    assert read_json(path) == {"retry": {"enabled": False}}
    assert SettingsLayer.from_file(path).values == {"retry.enabled": False}


def test_persist_keeps_other_keys_groups_and_order(tmp_path: Path) -> None:
    """Other keys of the group, other groups and another tool's groups survive, in order."""
    path = write(
        tmp_path / "settings.json",
        json.dumps(
            {
                "theme": {"name": "dark"},
                "retry": {"maxRetries": 5, "enabled": True, "baseDelayMs": 100},
                "compaction": {"enabled": False},
            }
        ),
    )
    persist_setting(path, "retry.enabled", False)
    persist_setting(path, "retry.maxDelayMs", None)
    data = read_json(path)
    assert data == {
        "theme": {"name": "dark"},
        "retry": {"maxRetries": 5, "enabled": False, "baseDelayMs": 100, "maxDelayMs": None},
        "compaction": {"enabled": False},
    }
    assert list(data) == ["theme", "retry", "compaction"]
    assert list(data["retry"]) == ["maxRetries", "enabled", "baseDelayMs", "maxDelayMs"]
    assert path.read_text(encoding="utf-8").endswith("}\n")


def test_persist_then_reload_changes_only_that_key(tmp_path: Path) -> None:
    """R-38: the rewritten file loads back with the new value and the old ones."""
    path = write(tmp_path / "settings.json", '{"retry": {"maxRetries": 7}}')
    persist_setting(path, "retry.enabled", False)
    settings = SettingsStore.from_files(path).current
    assert settings.retry.enabled is False
    assert settings.retry.max_retries == 7


def test_persist_into_a_blank_file(tmp_path: Path) -> None:
    """A blank file counts as an empty object."""
    path = write(tmp_path / "settings.json", "  \n")
    persist_setting(path, "compaction.keepRecentTurns", 2)
    assert read_json(path) == {"compaction": {"keepRecentTurns": 2}}


def test_persist_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The temporary sibling is renamed over the file: only ``settings.json`` remains."""
    path = tmp_path / "settings.json"
    persist_setting(path, "retry.enabled", True)
    persist_setting(path, "retry.enabled", False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


def test_persist_failing_to_rename_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Atomic: if the final rename fails, the old file is intact and no temp file is left."""
    path = write(tmp_path / "settings.json", '{"retry": {"enabled": true}}')

    def refuse(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(
        SettingsError,
        match=rf"^cannot write settings file {re.escape(str(path))}: Permission denied$",
    ):
        persist_setting(path, "retry.enabled", False)
    assert read_json(path) == {"retry": {"enabled": True}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


@posix_only
def test_persist_keeps_the_mode_of_an_existing_file(tmp_path: Path) -> None:
    """A file the user made 0600 stays 0600; a new one is 0644."""
    private = write(tmp_path / "private.json", "{}")
    private.chmod(0o600)
    persist_setting(private, "retry.enabled", False)
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.json"
    persist_setting(fresh, "retry.enabled", False)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


@posix_only
def test_persist_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    """A settings file linked from a dotfiles repository: the target is rewritten, the link kept."""
    target = write(tmp_path / "dotfiles-settings.json", '{"retry": {"maxRetries": 1}}')
    link = tmp_path / "settings.json"
    link.symlink_to(target)
    persist_setting(link, "retry.enabled", False)
    assert link.is_symlink()
    assert read_json(target) == {"retry": {"maxRetries": 1, "enabled": False}}


# --- errors ---------------------------------------------------------------------------------


def test_persist_rejects_a_bad_value_without_touching_the_file(tmp_path: Path) -> None:
    """R-38: the value is validated first; the message names key, value and file."""
    path = write(tmp_path / "settings.json", '{"retry": {"maxRetries": 2}}')
    expected = f"retry.maxRetries must be an integer from 0 to 100, not -1 (in {path})"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$") as info:
        persist_setting(path, "retry.maxRetries", -1)
    assert info.value.key == "retry.maxRetries"
    assert read_json(path) == {"retry": {"maxRetries": 2}}


def test_persist_rejects_an_unknown_key(tmp_path: Path) -> None:
    """R-38: an unknown key in a known group is named with the keys that exist."""
    path = tmp_path / "settings.json"
    expected = (
        "retry.maxRetry is not a known setting (known retry keys: enabled, maxRetries, "
        "baseDelayMs, maxDelayMs, jitter, respectRetryAfter, classifier, profile, "
        "maxAgentDelayMs, sharedCooldown, maxTotalMs, provider.maxRetryDelayMs, "
        "provider.timeoutMs, "
        "provider.idleTimeoutMs, provider.maxRetries) "
        f"(in {path})"
    )
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        persist_setting(path, "retry.maxRetry", 3)
    assert not path.exists()


def test_persist_refuses_to_overwrite_broken_json(tmp_path: Path) -> None:
    """R-38: a broken file is reported (file, line, column) and left as it is, not replaced."""
    broken = '{"retry": {"enabled": true,}}'
    path = write(tmp_path / "settings.json", broken)
    expected = f"settings file {path} is not valid JSON: {json_error(broken)}"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        persist_setting(path, "retry.enabled", False)
    assert path.read_text(encoding="utf-8") == broken


def test_loading_broken_json_names_file_line_and_column(tmp_path: Path) -> None:
    """R-38: the same broken file, loaded as a layer, gives the same clear error."""
    broken = '{"retry": {"enabled": true,}}'
    path = write(tmp_path / "settings.json", broken)
    expected = f"settings file {path} is not valid JSON: {json_error(broken)}"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        SettingsStore.from_files(path)


def test_persist_refuses_a_file_that_is_not_an_object(tmp_path: Path) -> None:
    """R-38: a JSON list at the top is an error naming the file."""
    path = write(tmp_path / "settings.json", "[1, 2]")
    expected = f"settings must be a JSON object, not list (in {path})"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        persist_setting(path, "retry.enabled", False)


def test_persist_refuses_a_group_that_is_not_an_object(tmp_path: Path) -> None:
    """R-38: ``"retry": true`` cannot take a key; the error names the group and file."""
    path = write(tmp_path / "settings.json", '{"retry": true}')
    expected = f"retry must be a JSON object, not bool (in {path})"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        persist_setting(path, "retry.enabled", False)
    assert read_json(path) == {"retry": True}


@posix_only
def test_persist_reports_an_unreadable_file(tmp_path: Path) -> None:
    """A path that is a directory is reported, not a traceback from ``open``."""
    path = tmp_path / "settings.json"
    path.mkdir()
    expected = f"cannot read settings file {path}: it is a directory, not a regular file"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        persist_setting(path, "retry.enabled", False)


def test_persist_writes_a_provider_key_nested(tmp_path: Path) -> None:
    """``retry.provider.timeoutMs`` is written inside ``{"retry": {"provider": …}}``."""
    path = write(tmp_path / "settings.json", '{"retry": {"maxRetries": 2}}')
    persist_setting(path, "retry.provider.timeoutMs", 30_000)
    assert read_json(path) == {"retry": {"maxRetries": 2, "provider": {"timeoutMs": 30_000}}}
    assert SettingsLayer.from_file(path).values == {
        "retry.maxRetries": 2,
        "retry.provider.timeoutMs": 30_000,
    }


def test_persist_refuses_a_provider_group_that_is_not_an_object(tmp_path: Path) -> None:
    """``"provider": []`` cannot take a key; the error names the group and file."""
    path = write(tmp_path / "settings.json", '{"retry": {"provider": []}}')
    expected = f"retry.provider must be a JSON object, not list (in {path})"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        persist_setting(path, "retry.provider.timeoutMs", 30_000)
    assert read_json(path) == {"retry": {"provider": []}}


def test_persist_refuses_deeply_nested_json(tmp_path: Path) -> None:
    """Defect 9: a file nested 100 000 deep is reported and left as it is."""
    text = '{"theme": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = write(tmp_path / "settings.json", text)
    expected = f"settings file {path} is nested too deeply to read"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        persist_setting(path, "retry.enabled", False)
    assert path.read_text(encoding="utf-8") == text


def test_persist_never_turns_a_huge_number_into_infinity(tmp_path: Path) -> None:
    """Another tool's ``1e400`` would be rewritten as the non-JSON ``Infinity``: refused."""
    text = '{"theme": {"zoom": 1e400}}'
    path = write(tmp_path / "settings.json", text)
    expected = (
        f"cannot rewrite settings file {path}: it holds the number 1e400, "
        "which would not survive the rewrite"
    )
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        persist_setting(path, "retry.enabled", False)
    assert path.read_text(encoding="utf-8") == text
