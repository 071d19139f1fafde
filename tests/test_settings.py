"""Settings: defaults, JSON files with nested groups, layering and validation (R-26, R-28, R-38)."""

from __future__ import annotations

import json
import re
from operator import attrgetter
from pathlib import Path
from typing import Any

import attrs
import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.wording import json_error
from trio_session import (
    CompactionSettings,
    CredentialsSettings,
    ProviderRetrySettings,
    RetrySettings,
    Settings,
    SettingsError,
    SettingsLayer,
    SettingsStore,
)
from trio_session._core.codec import camel

RETRY_KEYS = (
    "enabled, maxRetries, baseDelayMs, maxDelayMs, jitter, respectRetryAfter, classifier, "
    "profile, maxAgentDelayMs, sharedCooldown, maxTotalMs, provider.maxRetryDelayMs, "
    "provider.timeoutMs, "
    "provider.idleTimeoutMs, "
    "provider.maxRetries"
)


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as a JSON settings file and return its path."""
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def in_file(path: Path) -> str:
    """The escaped ``(in <path>)`` suffix every value error ends with."""
    return re.escape(f"(in {path})")


# --- defaults ---------------------------------------------------------------------------


def test_defaults_match_the_reference() -> None:
    """R-26: enabled true, maxRetries 3, baseDelayMs 2000 when nothing is configured."""
    retry = SettingsStore().current.retry
    assert retry.enabled is True
    assert retry.max_retries == 3
    assert retry.base_delay_ms == 2000


def test_optional_extras_are_off_by_default() -> None:
    """R-28: maxDelayMs, jitter, respectRetryAfter and the strict classifier are off by default."""
    retry = SettingsStore().current.retry
    assert retry.max_delay_ms is None
    assert retry.jitter == "none"
    assert retry.respect_retry_after is False
    assert retry.classifier == "reference"


def test_compaction_is_enabled_by_default() -> None:
    """R-50: compaction.enabled defaults to true."""
    assert SettingsStore().current.compaction.enabled is True


def test_default_store_equals_default_settings_value() -> None:
    """An empty store resolves to exactly ``Settings()``."""
    assert SettingsStore().current == Settings()
    assert SettingsStore.coerce(None).current == Settings()


# --- files and layering -------------------------------------------------------------------


def test_load_file_with_nested_groups(tmp_path: Path) -> None:
    """R-38: a JSON file with nested ``retry`` and ``compaction`` groups is read key by key."""
    path = write_json(
        tmp_path / "settings.json",
        {
            "retry": {
                "enabled": False,
                "maxRetries": 5,
                "baseDelayMs": 500,
                "maxDelayMs": 60000,
                "jitter": "full",
                "respectRetryAfter": True,
                "classifier": "strict",
            },
            "compaction": {"enabled": False, "keepRecentTurns": 4},
        },
    )
    store = SettingsStore.from_files(path)
    assert store.current == Settings(
        retry=RetrySettings(
            enabled=False,
            max_retries=5,
            base_delay_ms=500,
            max_delay_ms=60000,
            jitter="full",
            respect_retry_after=True,
            classifier="strict",
        ),
        compaction=CompactionSettings(enabled=False, keep_recent_turns=4),
    )


def test_layer_records_source_path_and_dotted_values(tmp_path: Path) -> None:
    """A file layer keeps its path and source, and its values under dotted reference keys."""
    path = write_json(tmp_path / "s.json", {"retry": {"maxRetries": 7}})
    layer = SettingsLayer.from_file(path)
    assert layer.source == str(path)
    assert layer.path == path
    assert dict(layer.values) == {"retry.maxRetries": 7}
    assert layer.nested() == {"retry": {"maxRetries": 7}}


def test_layering_global_project_programmatic_key_by_key(tmp_path: Path) -> None:
    """R-38: global < project < programmatic, and a key unset above comes from below."""
    global_file = write_json(
        tmp_path / "global.json",
        {"retry": {"maxRetries": 9, "baseDelayMs": 100, "jitter": "equal"}},
    )
    project_file = write_json(
        tmp_path / "project.json",
        {"retry": {"baseDelayMs": 250, "maxDelayMs": 1000}},
    )
    store = SettingsStore.from_files(
        global_file, project_file, overrides={"retry": {"maxDelayMs": 5000}}
    )
    retry = store.current.retry
    assert retry.max_retries == 9  # only the global file sets it
    assert retry.jitter == "equal"  # only the global file sets it
    assert retry.base_delay_ms == 250  # the project file beats the global one
    assert retry.max_delay_ms == 5000  # the overrides beat the project file
    assert retry.enabled is True  # nobody sets it: the default

    store.set("retry.enabled", False)
    store.set("retry.maxRetries", 1)
    retry = store.current.retry
    assert retry.enabled is False
    assert retry.max_retries == 1
    assert retry.base_delay_ms == 250
    assert retry.max_delay_ms == 5000


def test_programmatic_set_is_not_a_file_layer(tmp_path: Path) -> None:
    """``store.set`` goes above every layer without appearing in ``store.layers``."""
    path = write_json(tmp_path / "g.json", {"retry": {"enabled": True}})
    store = SettingsStore.from_files(path)
    store.set("retry.enabled", False)
    assert [layer.source for layer in store.layers] == [str(path)]
    assert store.current.retry.enabled is False


def test_project_file_can_reset_max_delay_to_null(tmp_path: Path) -> None:
    """R-28: ``maxDelayMs: null`` in a higher layer removes a cap set in a lower one."""
    global_file = write_json(tmp_path / "g.json", {"retry": {"maxDelayMs": 30000}})
    project_file = write_json(tmp_path / "p.json", {"retry": {"maxDelayMs": None}})
    assert SettingsStore.from_files(global_file).current.retry.max_delay_ms == 30000
    store = SettingsStore.from_files(global_file, project_file)
    assert store.current.retry.max_delay_ms is None


def test_missing_file_is_an_empty_layer(tmp_path: Path) -> None:
    """R-38: a settings file that does not exist contributes nothing."""
    missing = tmp_path / "nope" / "settings.json"
    project_file = write_json(tmp_path / "p.json", {"retry": {"maxRetries": 4}})
    layer = SettingsLayer.from_file(missing)
    assert dict(layer.values) == {}
    assert layer.source == str(missing)
    store = SettingsStore.from_files(missing, project_file)
    assert store.current == Settings(retry=RetrySettings(max_retries=4))


def test_empty_file_is_an_empty_layer(tmp_path: Path) -> None:
    """A file holding only whitespace is read as ``{}``."""
    path = tmp_path / "blank.json"
    path.write_text("  \n", encoding="utf-8")
    assert SettingsStore.from_files(path).current == Settings()


def test_unknown_top_level_groups_are_ignored(tmp_path: Path) -> None:
    """R-38: groups other than retry/compaction (another tool's) load without error."""
    path = write_json(
        tmp_path / "shared.json",
        {"theme": "dark", "ui": {"anything": [1, 2]}, "retry": {"maxRetries": 2}},
    )
    layer = SettingsLayer.from_file(path)
    assert dict(layer.values) == {"retry.maxRetries": 2}
    assert SettingsStore.from_files(path).current.retry.max_retries == 2


# --- bad values in files (R-38) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "key", "message"),
    [
        pytest.param(
            {"retry": {"maxRetries": "3"}},
            "retry.maxRetries",
            r"retry\.maxRetries must be an integer from 0 to 100, not '3'",
            id="string-for-int",
        ),
        pytest.param(
            {"retry": {"maxRetries": 1.5}},
            "retry.maxRetries",
            r"retry\.maxRetries must be an integer from 0 to 100, not 1\.5",
            id="float-for-int",
        ),
        pytest.param(
            {"retry": {"maxRetries": True}},
            "retry.maxRetries",
            r"retry\.maxRetries must be an integer from 0 to 100, not True",
            id="bool-for-int",
        ),
        pytest.param(
            {"retry": {"baseDelayMs": False}},
            "retry.baseDelayMs",
            r"retry\.baseDelayMs must be an integer from 0 to 3600000, not False",
            id="bool-for-delay",
        ),
        pytest.param(
            {"retry": {"maxRetries": -1}},
            "retry.maxRetries",
            r"retry\.maxRetries must be an integer from 0 to 100, not -1",
            id="negative-retries",
        ),
        pytest.param(
            {"retry": {"baseDelayMs": -2000}},
            "retry.baseDelayMs",
            r"retry\.baseDelayMs must be an integer from 0 to 3600000, not -2000",
            id="negative-delay",
        ),
        pytest.param(
            {"retry": {"enabled": 1}},
            "retry.enabled",
            r"retry\.enabled must be true or false, not 1",
            id="int-for-bool",
        ),
        pytest.param(
            {"retry": {"enabled": "yes"}},
            "retry.enabled",
            r"retry\.enabled must be true or false, not 'yes'",
            id="string-for-bool",
        ),
        pytest.param(
            {"retry": {"respectRetryAfter": None}},
            "retry.respectRetryAfter",
            r"retry\.respectRetryAfter must be true or false, not None",
            id="null-for-bool",
        ),
        pytest.param(
            {"compaction": {"keepRecentTurns": 0}},
            "compaction.keepRecentTurns",
            r"compaction\.keepRecentTurns must be an integer from 1 to 1000, not 0",
            id="zero-keep-turns",
        ),
        pytest.param(
            {"retry": {"jitter": "half"}},
            "retry.jitter",
            r"retry\.jitter must be one of \"none\", \"full\", \"equal\", not 'half'",
            id="bad-jitter",
        ),
        pytest.param(
            {"retry": {"classifier": "loose"}},
            "retry.classifier",
            r"retry\.classifier must be one of \"reference\", \"strict\", not 'loose'",
            id="bad-classifier",
        ),
        pytest.param(
            {"retry": {"sharedCooldown": "yes"}},
            "retry.sharedCooldown",
            r"retry\.sharedCooldown must be true or false, not 'yes'",
            id="bad-shared-cooldown",
        ),
        pytest.param(
            {"credentials": {"url": ""}},
            "credentials.url",
            r"credentials\.url must be a non-empty string, or null, not ''",
            id="empty-credentials-url",
        ),
        pytest.param(
            {"retry": {"maxDelayMs": 0}},
            "retry.maxDelayMs",
            r"retry\.maxDelayMs must be an integer from 1 to 86400000, or null, not 0",
            id="zero-max-delay",
        ),
        pytest.param(
            {"retry": {"maxDelayMs": -5}},
            "retry.maxDelayMs",
            r"retry\.maxDelayMs must be an integer from 1 to 86400000, or null, not -5",
            id="negative-max-delay",
        ),
        pytest.param(
            {"retry": []},
            "retry",
            r"retry must be a JSON object, not list",
            id="group-is-list",
        ),
        pytest.param(
            {"compaction": True},
            "compaction",
            r"compaction must be a JSON object, not bool",
            id="group-is-bool",
        ),
    ],
)
def test_bad_value_names_file_and_key(
    tmp_path: Path, data: dict[str, Any], key: str, message: str
) -> None:
    """R-38: a bad value in a file raises SettingsError naming the key, the value and the file."""
    path = write_json(tmp_path / "settings.json", data)
    with pytest.raises(SettingsError, match=rf"^{message} {in_file(path)}$") as info:
        SettingsLayer.from_file(path)
    assert info.value.key == key
    assert info.value.source == str(path)


def test_bad_value_in_project_file_fails_the_whole_store(tmp_path: Path) -> None:
    """R-38: building a store from files stops at the first bad file, naming that file."""
    good = write_json(tmp_path / "global.json", {"retry": {"maxRetries": 2}})
    bad = write_json(tmp_path / "project.json", {"retry": {"maxRetries": -1}})
    with pytest.raises(
        SettingsError,
        match=rf"^retry\.maxRetries must be an integer from 0 to 100, not -1 {in_file(bad)}$",
    ) as info:
        SettingsStore.from_files(good, bad)
    assert info.value.key == "retry.maxRetries"
    assert info.value.source == str(bad)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        pytest.param([{"retry": {}}], "list", id="list"),
        pytest.param("retry", "str", id="string"),
        pytest.param(3, "int", id="number"),
        pytest.param(None, "NoneType", id="null"),
    ],
)
def test_top_level_not_an_object(tmp_path: Path, data: Any, kind: str) -> None:
    """R-38: a file whose top level is not a JSON object names the file; no key is at fault."""
    path = write_json(tmp_path / "settings.json", data)
    with pytest.raises(
        SettingsError, match=rf"^settings must be a JSON object, not {kind} {in_file(path)}$"
    ) as info:
        SettingsLayer.from_file(path)
    assert info.value.key is None
    assert info.value.source == str(path)


def test_invalid_json_names_file_line_and_column(tmp_path: Path) -> None:
    """R-38: a syntax error names the file, the JSON error, its line and its column."""
    path = tmp_path / "settings.json"
    path.write_text(
        '{\n  "retry": {\n    "maxRetries": 3\n    "enabled": true\n  }\n}\n', encoding="utf-8"
    )
    expected = f"settings file {path} is not valid JSON: Expecting ',' delimiter at line 4 column 5"
    with pytest.raises(SettingsError, match=rf"^{re.escape(expected)}$") as info:
        SettingsLayer.from_file(path)
    assert info.value.key is None
    assert info.value.source == str(path)
    assert isinstance(info.value.__cause__, json.JSONDecodeError)


def test_undecodable_file_names_file(tmp_path: Path) -> None:
    """R-38: a file that is not UTF-8 gives a SettingsError naming it, not a traceback."""
    path = tmp_path / "settings.json"
    path.write_bytes(b"\xff{}")
    expected = (
        f"cannot read settings file {path}: "
        "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    )
    with pytest.raises(SettingsError, match=rf"^{re.escape(expected)}$") as info:
        SettingsLayer.from_file(path)
    assert info.value.source == str(path)


def test_bad_override_mapping_names_programmatic_source(tmp_path: Path) -> None:
    """R-38: a bad value in ``overrides`` is reported as coming from ``<programmatic>``."""
    path = write_json(tmp_path / "g.json", {})
    with pytest.raises(
        SettingsError,
        match=r"^retry\.baseDelayMs must be an integer from 0 to 3600000, not '2s' "
        r"\(in <programmatic>\)$",
    ) as info:
        SettingsStore.from_files(path, overrides={"retry": {"baseDelayMs": "2s"}})
    assert info.value.key == "retry.baseDelayMs"
    assert info.value.source == "<programmatic>"


# --- coerce and set -----------------------------------------------------------------------


def test_coerce_settings_object() -> None:
    """``SettingsStore.coerce`` of a ``Settings`` resolves to that same value."""
    settings = Settings(
        retry=RetrySettings(max_retries=0, base_delay_ms=10, jitter="equal", max_delay_ms=50),
        compaction=CompactionSettings(enabled=False),
    )
    store = SettingsStore.coerce(settings)
    assert store.current == settings
    (layer,) = store.layers
    assert layer.source == "<programmatic>"
    assert layer.values["retry.maxDelayMs"] == 50
    assert layer.values["compaction.enabled"] is False


def test_coerce_mapping_in_file_form() -> None:
    """``SettingsStore.coerce`` of nested groups reads them like a file, keeping defaults."""
    store = SettingsStore.coerce({"retry": {"enabled": False, "maxRetries": 6}})
    assert store.current == Settings(retry=RetrySettings(enabled=False, max_retries=6))


def test_coerce_store_is_identity() -> None:
    """``SettingsStore.coerce`` returns a store unchanged."""
    store = SettingsStore()
    assert SettingsStore.coerce(store) is store


def test_coerce_bad_mapping_raises() -> None:
    """R-38: ``coerce`` validates a mapping, naming the key and ``<programmatic>``."""
    with pytest.raises(
        SettingsError,
        match=r"^retry\.enabled must be true or false, not 'false' \(in <programmatic>\)$",
    ) as info:
        SettingsStore.coerce({"retry": {"enabled": "false"}})
    assert info.value.key == "retry.enabled"
    assert info.value.source == "<programmatic>"


def test_coerce_settings_object_with_bad_value_raises() -> None:
    """R-38: a ``Settings`` carrying a negative maxRetries is rejected like any other layer."""
    with pytest.raises(
        SettingsError,
        match=r"^retry\.maxRetries must be an integer from 0 to 100, not -1 \(in <programmatic>\)$",
    ):
        SettingsStore.coerce(Settings(retry=RetrySettings(max_retries=-1)))


def test_set_writes_top_layer() -> None:
    """R-37: ``store.set("retry.enabled", False)`` turns auto-retry off at once."""
    store = SettingsStore.coerce({"retry": {"enabled": True}})
    store.set("retry.enabled", False)
    assert store.current.retry.enabled is False
    store.set("retry.enabled", True)
    assert store.current.retry.enabled is True


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        pytest.param(
            "retry.maxRetries",
            -1,
            r"retry\.maxRetries must be an integer from 0 to 100, not -1",
            id="negative",
        ),
        pytest.param(
            "retry.enabled",
            "off",
            r"retry\.enabled must be true or false, not 'off'",
            id="wrong-type",
        ),
        pytest.param(
            "retry.maxRetries",
            False,
            r"retry\.maxRetries must be an integer from 0 to 100, not False",
            id="bool-for-int",
        ),
        pytest.param(
            "retry.retries",
            3,
            r"retry\.retries is not a known setting \(known retry keys: "
            + re.escape(RETRY_KEYS)
            + r"\)",
            id="unknown-key",
        ),
        pytest.param(
            "network.timeout",
            3,
            r"network\.timeout is not a known setting "
            r"\(known groups: retry\.\*, compaction\.\*, credentials\.\*, http\.\*, "
            r"rateLimit\.\*\)",
            id="unknown-group",
        ),
        pytest.param(
            "retry",
            {"enabled": False},
            r"retry is not a known setting "
            r"\(known groups: retry\.\*, compaction\.\*, credentials\.\*, http\.\*, "
            r"rateLimit\.\*\)",
            id="group-without-key",
        ),
    ],
)
def test_set_bad_value_raises_and_keeps_settings(key: str, value: Any, message: str) -> None:
    """R-38: ``store.set`` with a bad key or value raises and leaves the settings unchanged."""
    store = SettingsStore.coerce({"retry": {"maxRetries": 5, "enabled": True}})
    store.set("retry.baseDelayMs", 10)
    before = store.current
    with pytest.raises(SettingsError, match=rf"^{message} \(in <programmatic>\)$") as info:
        store.set(key, value)
    assert info.value.key == key
    assert info.value.source == "<programmatic>"
    assert store.current is before
    assert store.current.retry == RetrySettings(max_retries=5, base_delay_ms=10)


# --- property: last layer that sets a key wins --------------------------------------------

#: Reference key -> (group attribute, Python field name, strategy of valid values).
KEYS: dict[str, tuple[str, str, st.SearchStrategy[Any]]] = {
    "retry.enabled": ("retry", "enabled", st.booleans()),
    "retry.maxRetries": ("retry", "max_retries", st.integers(0, 100)),
    "retry.baseDelayMs": ("retry", "base_delay_ms", st.integers(0, 3_600_000)),
    "retry.maxDelayMs": ("retry", "max_delay_ms", st.none() | st.integers(1, 86_400_000)),
    "retry.jitter": ("retry", "jitter", st.sampled_from(["none", "full", "equal"])),
    "retry.respectRetryAfter": ("retry", "respect_retry_after", st.booleans()),
    "retry.classifier": ("retry", "classifier", st.sampled_from(["reference", "strict"])),
    "retry.sharedCooldown": ("retry", "shared_cooldown", st.booleans()),
    "retry.provider.maxRetryDelayMs": (
        "retry.provider",
        "max_retry_delay_ms",
        st.integers(0, 86_400_000),
    ),
    "retry.provider.timeoutMs": ("retry.provider", "timeout_ms", st.integers(1000, 86_400_000)),
    "retry.provider.idleTimeoutMs": (
        "retry.provider",
        "idle_timeout_ms",
        st.integers(1000, 3_600_000),
    ),
    "compaction.enabled": ("compaction", "enabled", st.booleans()),
    "compaction.keepRecentTurns": ("compaction", "keep_recent_turns", st.integers(1, 1000)),
    "credentials.url": ("credentials", "url", st.none() | st.just("redis://cache:6379/0")),
}


@st.composite
def layer_values(draw: st.DrawFn) -> dict[str, Any]:
    """A few dotted keys with valid values."""
    keys = draw(st.lists(st.sampled_from(sorted(KEYS)), max_size=4, unique=True))
    return {key: draw(KEYS[key][2]) for key in keys}


def nested(values: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys to the nested file form."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        *groups, name = key.split(".")
        body = out
        for group in groups:
            body = body.setdefault(group, {})
        body[name] = value
    return out


def expected_settings(layers: list[dict[str, Any]]) -> Settings:
    """The oracle: for each key, the last layer that sets it, else the default."""
    defaults = Settings()
    result: dict[str, dict[str, Any]] = {
        "retry": {},
        "retry.provider": {},
        "compaction": {},
        "credentials": {},
    }
    for key, (group, field, _) in KEYS.items():
        value = getattr(attrgetter(group)(defaults), field)
        for layer in layers:
            if key in layer:
                value = layer[key]
        result[group][field] = value
    return Settings(
        retry=RetrySettings(
            **result["retry"], provider=ProviderRetrySettings(**result["retry.provider"])
        ),
        compaction=CompactionSettings(**result["compaction"]),
        credentials=CredentialsSettings(**result["credentials"]),
    )


@hypothesis.settings(deadline=None)
@given(
    files=st.lists(layer_values(), max_size=4),
    sets=layer_values(),
)
def test_last_layer_that_sets_a_key_wins(files: list[dict[str, Any]], sets: dict[str, Any]) -> None:
    """R-38: resolving any valid layers equals "last layer setting a key wins, else default"."""
    store = SettingsStore([SettingsLayer.from_mapping(nested(values)) for values in files])
    assert store.current == expected_settings(files)
    for key, value in sets.items():
        store.set(key, value)
    assert store.current == expected_settings([*files, sets])


# --- ranges (issue 11, defect 8) ------------------------------------------------------------

#: Every numeric key: (lowest, highest, null allowed), as docs/storage.md lists them.
NUMBER_RANGES = [
    ("retry.maxRetries", 0, 100, False),
    ("retry.baseDelayMs", 0, 3_600_000, False),
    ("retry.maxDelayMs", 1, 86_400_000, True),
    ("retry.maxAgentDelayMs", 0, 86_400_000, False),
    ("retry.provider.maxRetryDelayMs", 0, 86_400_000, False),
    ("retry.provider.timeoutMs", 1000, 86_400_000, False),
    ("retry.provider.idleTimeoutMs", 1000, 3_600_000, False),
    ("compaction.keepRecentTurns", 1, 1000, False),
    ("retry.provider.maxRetries", 0, 100, True),
    ("compaction.reserveTokens", 0, 10_000_000, False),
    ("compaction.keepRecentTokens", 0, 10_000_000, False),
    ("http.maxConnections", 1, 100_000, True),
]


def file_form(key: str, value: Any) -> dict[str, Any]:
    """``{"retry": {"provider": {"timeoutMs": value}}}`` for ``retry.provider.timeoutMs``."""
    *groups, name = key.split(".")
    data: dict[str, Any] = {name: value}
    for group in reversed(groups):
        data = {group: data}
    return data


@pytest.mark.parametrize(("key", "low", "high", "null"), NUMBER_RANGES)
def test_every_number_is_refused_outside_its_range(
    tmp_path: Path, key: str, low: int, high: int, null: bool
) -> None:
    """Every numeric setting has an inclusive range; one past either end names file and key."""
    described = f"an integer from {low} to {high}" + (", or null" if null else "")
    for bad in (low - 1, high + 1):
        path = write_json(tmp_path / "settings.json", file_form(key, bad))
        expected = f"{key} must be {described}, not {bad} (in {path})"
        with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$") as info:
            SettingsLayer.from_file(path)
        assert info.value.key == key
    for good in (low, high):
        path = write_json(tmp_path / "settings.json", file_form(key, good))
        assert SettingsLayer.from_file(path).values == {key: good}


def test_the_range_table_covers_every_number() -> None:
    """No numeric setting is left without a range: the table above is every int default."""
    numeric = {
        key
        for key, value in flat_defaults().items()
        if isinstance(value, int) and not isinstance(value, bool)
    }
    optional = {"retry.maxDelayMs", "retry.provider.maxRetries", "http.maxConnections"}
    assert numeric | optional == {key for key, *_ in NUMBER_RANGES}


def flat_defaults() -> dict[str, Any]:
    """The default settings as dotted keys (``retry.provider.timeoutMs``: 600000, …)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        for field in attrs.fields(type(value)):
            item = getattr(value, field.name)
            key = f"{prefix}.{camel(field.name)}"
            if attrs.has(type(item)):
                walk(key, item)
            else:
                out[key] = item

    for group in ("retry", "compaction"):
        walk(group, getattr(Settings(), group))
    return out


@pytest.mark.parametrize(
    ("literal", "shown"),
    [
        pytest.param("1e400", "1e400", id="float-overflow"),
        pytest.param("1" + "0" * 400, "100000000000… (401 digits)", id="10**400"),
        pytest.param("9" * 5000, "999999999999… (5000 digits)", id="5000-digits"),
        pytest.param("-1e400", "-1e400", id="negative-overflow"),
    ],
)
def test_number_python_cannot_hold_is_a_bad_value(tmp_path: Path, literal: str, shown: str) -> None:
    """Defect 8/9: 1e400 or a 5000-digit integer is refused naming key, value and file."""
    path = tmp_path / "settings.json"
    path.write_text('{"retry": {"baseDelayMs": ' + literal + "}}", encoding="utf-8")
    expected = f"retry.baseDelayMs must be an integer from 0 to 3600000, not {shown} (in {path})"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$") as info:
        SettingsLayer.from_file(path)
    assert info.value.key == "retry.baseDelayMs"


def test_huge_number_in_another_tools_group_loads(tmp_path: Path) -> None:
    """A 5000-digit integer or 1e400 in a group that is not ours does not stop the file."""
    path = tmp_path / "settings.json"
    huge = "7" * 5000
    path.write_text(
        '{"theme": {"n": ' + huge + ', "f": 1e400}, "retry": {"maxRetries": 2}}',
        encoding="utf-8",
    )
    assert SettingsLayer.from_file(path).values == {"retry.maxRetries": 2}


def test_deeply_nested_json_is_a_settings_error(tmp_path: Path) -> None:
    """Defect 9: JSON nested 100 000 deep names the file; no RecursionError escapes."""
    path = tmp_path / "settings.json"
    path.write_text('{"theme": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    expected = f"settings file {path} is nested too deeply to read"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$") as info:
        SettingsLayer.from_file(path)
    assert info.value.source == str(path)


def test_nested_bad_value_is_shown_short(tmp_path: Path) -> None:
    """A bad value that is a deep list or a long string is shown cut short, on one line."""
    path = write_json(tmp_path / "settings.json", {"retry": {"maxRetries": [[[[[1]]]]]}})
    expected = f"retry.maxRetries must be an integer from 0 to 100, not [[[[...]]]] (in {path})"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        SettingsLayer.from_file(path)
    write_json(path, {"retry": {"jitter": "x" * 10_000}})
    with pytest.raises(SettingsError) as info:
        SettingsLayer.from_file(path)
    assert len(str(info.value)) < 200 + len(str(path))


# --- the retry.provider group -------------------------------------------------------------


def test_provider_group_is_read_nested(tmp_path: Path) -> None:
    """``retry.provider`` is a group inside ``retry``; its keys layer one by one."""
    low = write_json(
        tmp_path / "g.json", {"retry": {"provider": {"timeoutMs": 30_000, "idleTimeoutMs": 5000}}}
    )
    high = write_json(tmp_path / "p.json", {"retry": {"provider": {"maxRetryDelayMs": 0}}})
    store = SettingsStore.from_files(low, high)
    assert store.current.retry.provider == ProviderRetrySettings(
        max_retry_delay_ms=0, timeout_ms=30_000, idle_timeout_ms=5000
    )
    assert SettingsLayer.from_file(low).nested() == {
        "retry": {"provider": {"timeoutMs": 30_000, "idleTimeoutMs": 5000}}
    }


def test_provider_defaults_are_pis() -> None:
    """maxRetryDelayMs 60000, timeoutMs 600000, idleTimeoutMs 120000 when nothing is set."""
    assert SettingsStore().current.retry.provider == ProviderRetrySettings(60_000, 600_000, 120_000)


def test_provider_group_must_be_an_object(tmp_path: Path) -> None:
    """``"provider": 5`` names the group and the file."""
    path = write_json(tmp_path / "settings.json", {"retry": {"provider": 5}})
    expected = f"retry.provider must be a JSON object, not int (in {path})"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$") as info:
        SettingsLayer.from_file(path)
    assert info.value.key == "retry.provider"


def test_coerce_settings_object_keeps_the_provider_group() -> None:
    """``coerce(Settings(...))`` carries ``retry.provider`` through the file form."""
    settings = Settings(retry=RetrySettings(provider=ProviderRetrySettings(timeout_ms=5000)))
    assert SettingsStore.coerce(settings).current == settings


# --- file kinds and sizes (issue 11, defect 10) ---------------------------------------------


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_a_device_is_not_read_as_settings() -> None:
    """Only regular files are settings files: /dev/null is refused, not read as ``{}``."""
    expected = "cannot read settings file /dev/null: it is a character device, not a regular file"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        SettingsLayer.from_file("/dev/null")


def test_a_file_over_1_mib_is_refused(tmp_path: Path) -> None:
    """A settings file of 1 MiB + 1 byte is refused; one of exactly 1 MiB is read."""
    path = tmp_path / "settings.json"
    body = '{"retry": {"maxRetries": 4}}'
    path.write_text(body + " " * ((1 << 20) - len(body)), encoding="utf-8")
    assert SettingsLayer.from_file(path).values == {"retry.maxRetries": 4}
    path.write_text(body + " " * ((1 << 20) - len(body) + 1), encoding="utf-8")
    expected = f"settings file {path} is too large: more than 1048576 bytes (1 MiB)"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        SettingsLayer.from_file(path)


# --- write-back (issue 11, defect 13) --------------------------------------------------------


def test_failed_write_back_changes_nothing_in_memory(tmp_path: Path) -> None:
    """Defect 13: if the file cannot take the new value, the error is raised and the
    setting keeps its old value in memory too."""
    path = write_json(tmp_path / "settings.json", {"retry": {"enabled": True}})
    store = SettingsStore.from_files(path)
    before = store.current
    broken = '{"retry": {"enabled": true,}}'  # an editor saved a typo meanwhile
    path.write_text(broken, encoding="utf-8")
    expected = f"settings file {path} is not valid JSON: {json_error(broken)}"
    with pytest.raises(SettingsError, match=f"^{re.escape(expected)}$"):
        store.set_and_persist("retry.enabled", False)
    assert store.current is before
    assert store.current.retry.enabled is True
    assert store.layers[0].values == {"retry.enabled": True}
    assert path.read_text(encoding="utf-8") == broken
    path.write_text('{"retry": {"enabled": true}}', encoding="utf-8")
    assert store.set_and_persist("retry.enabled", False) == path
    assert store.current.retry.enabled is False
    assert json.loads(path.read_text(encoding="utf-8")) == {"retry": {"enabled": False}}
