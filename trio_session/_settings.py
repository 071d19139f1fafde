"""Settings: the ``retry`` and ``compaction`` groups, validated, layered (R-26, R-28, R-38).

Settings files are JSON with nested groups, keyed as in the reference:

```text
{"retry": {"enabled": true, "maxRetries": 3, "baseDelayMs": 2000}}
```

Layers apply in order — defaults < global file < project file < programmatic —
and each key comes from the last layer that sets it. Every value is checked when
its layer is read; a bad one raises ``trio_session.SettingsError`` whose
message names the key, the value and the file. Groups other than ``retry`` and
``compaction`` are left alone, so a file shared with other tools still loads.

Every number has an inclusive range (the table of ``RANGES``, documented
in docs/storage.md), so no setting that loads can make the backoff arithmetic
overflow later. A settings file is read only if it is a regular file of at most
``MAX_SETTINGS_FILE_BYTES``; a number Python cannot hold (``1e400``, an integer
of thousands of digits) or JSON nested too deeply to parse is a
``trio_session.SettingsError`` like any other bad value, never a traceback.

``default_settings_paths`` says where the global and project files live;
``persist_setting`` writes one key back into a file, atomically.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import reprlib
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs

from ._codec import camel, snake
from ._dirs import fsync_directory, user_config_dir
from ._errors import SettingsError

Jitter: TypeAlias = Literal["none", "full", "equal"]
ClassifierName: TypeAlias = Literal["reference", "strict"]
#: How queued steering and follow-up messages are delivered (pi's ``steeringMode``).
QueueMode: TypeAlias = Literal["all", "one-at-a-time"]
#: pi's thinking levels (``defaultThinkingLevel``).
ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
PROGRAMMATIC = "<programmatic>"


@attrs.frozen
class ProviderRetrySettings:
    """The ``retry.provider`` group: how long one request to the provider may take.

    The key names are pi's. The two timeouts apply where ``trio-session`` builds the
    provider (``chat``, ``rpc``; ``--timeout`` and ``--idle-timeout`` win over them);
    a program that builds its own provider passes its own timeouts.

    Attributes:
        max_retry_delay_ms: ``retry.provider.maxRetryDelayMs`` — the longest
            server-requested wait (``retry.respectRetryAfter``) that is slept when
            ``retry.maxDelayMs`` is unset; a longer one ends the chain with a message
            naming it (R-28). ``0``: no cap.
        timeout_ms: ``retry.provider.timeoutMs`` — total deadline of one attempt,
            from sending the request to the last byte of the answer.
        idle_timeout_ms: ``retry.provider.idleTimeoutMs`` — longest silence while
            reading an answer before the attempt fails.
        max_retries: ``retry.provider.maxRetries`` — pi's retries inside its provider
            SDKs. Accepted and kept, but moot: trio_session's providers never retry on
            their own (R-28a), so a file that sets it gets a warning.
    """

    max_retry_delay_ms: int = 60_000
    timeout_ms: int = 600_000
    idle_timeout_ms: int = 120_000
    max_retries: int | None = None


@attrs.frozen
class RetrySettings:
    """The ``retry`` group.

    Attributes:
        enabled: ``retry.enabled`` — auto-retry on transient errors (R-12).
        max_retries: ``retry.maxRetries`` — re-attempts per chain (R-15).
        base_delay_ms: ``retry.baseDelayMs`` — first wait; doubles each attempt (R-16).
        max_delay_ms: ``retry.maxDelayMs`` — cap on any single wait; ``None``: no cap (R-28).
        jitter: ``retry.jitter`` — ``"none"``, ``"full"`` or ``"equal"`` (R-28).
        respect_retry_after: ``retry.respectRetryAfter`` — wait at least what the
            server asked for, on every retryable error (R-28).
        classifier: ``retry.classifier`` — ``"reference"`` or ``"strict"`` (R-8).
        shared_cooldown: ``retry.sharedCooldown`` — a server's wait hint on a key holds
            every session using that key (every worker, with a Redis credential
            store) until it has passed, plus jitter (R-28, docs/fleet.md).
        provider: the ``retry.provider`` group.
    """

    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2000
    max_delay_ms: int | None = None
    jitter: Jitter = "none"
    respect_retry_after: bool = False
    classifier: ClassifierName = "reference"
    shared_cooldown: bool = False
    provider: ProviderRetrySettings = attrs.field(factory=ProviderRetrySettings)


@attrs.frozen
class CompactionSettings:
    """The ``compaction`` group.

    Attributes:
        enabled: ``compaction.enabled`` — recover from context overflow (R-50).
        keep_recent_turns: ``compaction.keepRecentTurns`` — turns the default
            compactor always keeps verbatim.
        reserve_tokens: ``compaction.reserveTokens`` (pi's key) — tokens kept free
            in the context window for the model's answer.
        keep_recent_tokens: ``compaction.keepRecentTokens`` (pi's key) — about how
            many tokens of the most recent messages are kept, not summarised.
    """

    enabled: bool = True
    keep_recent_turns: int = 1
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000


@attrs.frozen
class CredentialsSettings:
    """The ``credentials`` group.

    Attributes:
        url: ``credentials.url`` — where ``trio-session chat`` and ``rpc`` keep
            usage-limit blocks: a Redis URL (``redis://``, ``rediss://``, ``unix://``)
            shared by a fleet of workers; ``None``: the local SQLite store.
            ``--credentials URL`` wins over it.
    """

    url: str | None = None


@attrs.frozen
class Settings:
    """Effective settings: every group, every key resolved.

    The top-level keys are pi's (its docs/settings.md), read from any settings file:

    Attributes:
        steering_mode: ``steeringMode`` — steering messages go ``"one-at-a-time"``
            (one per turn) or ``"all"`` at once.
        follow_up_mode: ``followUpMode`` — the same for follow-up messages.
        default_thinking_level: ``defaultThinkingLevel`` — ``"off"`` … ``"xhigh"``,
            or ``None``: unset.
        default_provider: ``defaultProvider`` — the provider used when the command
            line names none.
        default_model: ``defaultModel`` — the model id used when the command line
            names none.
        session_dir: ``sessionDir`` — where pi keeps session files, as written
            (``~`` not expanded); ``None``: unset.
        retry: the ``retry`` group.
        compaction: the ``compaction`` group.
        credentials: the ``credentials`` group.
    """

    retry: RetrySettings = attrs.field(factory=RetrySettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    credentials: CredentialsSettings = attrs.field(factory=CredentialsSettings)
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    default_thinking_level: ThinkingLevel | None = None
    default_provider: str | None = None
    default_model: str | None = None
    session_dir: str | None = None


# -- the schema ----------------------------------------------------------------------


@attrs.frozen
class _Rule:
    check: Callable[[Any], bool]
    description: str


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _integer(low: int, high: int, *, null: bool = False) -> _Rule:
    def check(v: Any) -> bool:
        if v is None:
            return null
        return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high

    description = f"an integer from {low} to {high}" + (", or null" if null else "")
    return _Rule(check, description)


def _one_of(*choices: str, null: bool = False) -> _Rule:
    listed = ", ".join(f'"{c}"' for c in choices)
    return _Rule(
        lambda v: (v is None and null) or (isinstance(v, str) and v in choices),
        f"one of {listed}" + (", or null" if null else ""),
    )


def _text(*, null: bool = False) -> _Rule:
    return _Rule(
        lambda v: (v is None and null) or (isinstance(v, str) and bool(v.strip())),
        "a non-empty string" + (", or null" if null else ""),
    )


_BOOL = _Rule(_is_bool, "true or false")

#: Every number's inclusive range: dotted key -> (lowest, highest). The bounds make
#: the longest exponential wait, ``3_600_000 * 2 ** 99`` ms, a finite float.
RANGES: Mapping[str, tuple[int, int]] = {
    "retry.maxRetries": (0, 100),
    "retry.baseDelayMs": (0, 3_600_000),
    "retry.maxDelayMs": (1, 86_400_000),
    "retry.provider.maxRetryDelayMs": (0, 86_400_000),
    "retry.provider.timeoutMs": (1_000, 86_400_000),
    "retry.provider.idleTimeoutMs": (1_000, 3_600_000),
    "retry.provider.maxRetries": (0, 100),
    "compaction.keepRecentTurns": (1, 1_000),
    "compaction.reserveTokens": (0, 10_000_000),
    "compaction.keepRecentTokens": (0, 10_000_000),
}


def _ranged(key: str, *, null: bool = False) -> _Rule:
    return _integer(*RANGES[key], null=null)


#: Every key, dotted, in the order errors list them.
_SCHEMA: dict[str, _Rule] = {
    "retry.enabled": _BOOL,
    "retry.maxRetries": _ranged("retry.maxRetries"),
    "retry.baseDelayMs": _ranged("retry.baseDelayMs"),
    "retry.maxDelayMs": _ranged("retry.maxDelayMs", null=True),
    "retry.jitter": _one_of("none", "full", "equal"),
    "retry.respectRetryAfter": _BOOL,
    "retry.classifier": _one_of("reference", "strict"),
    "retry.sharedCooldown": _BOOL,
    "retry.provider.maxRetryDelayMs": _ranged("retry.provider.maxRetryDelayMs"),
    "retry.provider.timeoutMs": _ranged("retry.provider.timeoutMs"),
    "retry.provider.idleTimeoutMs": _ranged("retry.provider.idleTimeoutMs"),
    "retry.provider.maxRetries": _ranged("retry.provider.maxRetries", null=True),
    "compaction.enabled": _BOOL,
    "compaction.keepRecentTurns": _ranged("compaction.keepRecentTurns"),
    "compaction.reserveTokens": _ranged("compaction.reserveTokens"),
    "compaction.keepRecentTokens": _ranged("compaction.keepRecentTokens"),
    "credentials.url": _text(null=True),
    # pi's top-level keys that trio_session uses
    "steeringMode": _one_of("all", "one-at-a-time"),
    "followUpMode": _one_of("all", "one-at-a-time"),
    "defaultThinkingLevel": _one_of("off", "minimal", "low", "medium", "high", "xhigh", null=True),
    "defaultProvider": _text(null=True),
    "defaultModel": _text(null=True),
    "sessionDir": _text(null=True),
}
_GROUPS = ("retry", "compaction", "credentials")
#: Groups inside a group: their keys are nested one level deeper in a file.
_SUBGROUPS = frozenset({"retry.provider"})

#: pi's other settings (its docs/settings.md and settings-manager.js, 0.73.1): accepted
#: in any file and kept there, never used, never checked — they are pi's to judge.
#: ``queueMode`` and ``websockets`` are pi's legacy spellings of ``steeringMode`` and
#: ``transport``.
PI_ONLY_KEYS: frozenset[str] = frozenset(
    {
        "hideThinkingBlock",
        "thinkingBudgets",
        "theme",
        "quietStartup",
        "collapseChangelog",
        "enableInstallTelemetry",
        "doubleEscapeAction",
        "treeFilterMode",
        "editorPaddingX",
        "autocompleteMaxVisible",
        "showHardwareCursor",
        "warnings",
        "branchSummary",
        "transport",
        "terminal",
        "images",
        "shellPath",
        "shellCommandPrefix",
        "npmCommand",
        "enabledModels",
        "markdown",
        "packages",
        "extensions",
        "skills",
        "prompts",
        "themes",
        "enableSkillCommands",
        "lastChangelogVersion",
        "queueMode",
        "websockets",
    }
)
#: ``retry.provider.maxRetries`` above 0 in a file: said once per file, as a warning. 0 —
#: pi's own recommendation — is what the providers do anyway (R-28a), so it loads silently.
MOOT_PROVIDER_RETRIES = (
    "retry.provider.maxRetries has no effect in trio-session: its providers never "
    "retry on their own, the session's retry policy (retry.maxRetries) does"
)

#: How a value is shown in a message: short, whatever its size or depth.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = 60
_SHOWN.maxlong = 40
_SHOWN.maxother = 60


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        try:
            return _cut(str(value))
        except ValueError:  # too long for str(): only a program can pass one
            return f"an integer of {value.bit_length()} bits"
    return _SHOWN.repr(value)


def _cut(number: str) -> str:
    """A long number as its first digits and its length: ``100000000000… (401 digits)``."""
    if len(number) <= 40:
        return number
    digits = sum(c.isdigit() for c in number)
    return f"{number[:12]}… ({digits} digits)"


def _unknown_message(key: str, source: str) -> str:
    group, _, name = key.partition(".")
    shown = key if len(key) <= 80 else key[:80] + "…"
    if group not in _GROUPS or not name:
        known = ", ".join(f"{g}.*" for g in _GROUPS)
        return f"{shown} is not a known setting (known groups: {known}) (in {source})"
    known = ", ".join(k.partition(".")[2] for k in _SCHEMA if k.startswith(f"{group}."))
    return f"{shown} is not a known setting (known {group} keys: {known}) (in {source})"


def validate_value(key: str, value: Any, *, source: str = PROGRAMMATIC) -> Any:
    """Check one dotted key (``"retry.maxRetries"``, ``"steeringMode"``) and its value.

    Returns the value.

    Raises:
        SettingsError: unknown key, or a value of the wrong type or out of its range.
    """
    rule = _SCHEMA.get(key)
    if rule is None:
        raise SettingsError(_unknown_message(key, source), key=key, source=source)
    if not rule.check(value):
        msg = f"{key} must be {rule.description}, not {_shown(value)} (in {source})"
        raise SettingsError(msg, key=key, source=source)
    return value


@attrs.frozen
class SettingsLayer:
    """One validated source of settings: ``{"retry.maxRetries": 5, …}``.

    Attributes:
        source: the file path, or ``"<programmatic>"``.
        values: dotted keys to validated values.
        path: the file the layer was read from, if any.
        warnings: what was kept but not used: keys no one knows, moot keys.
    """

    source: str
    values: Mapping[str, Any] = attrs.field(factory=dict)
    path: Path | None = None
    warnings: tuple[str, ...] = ()

    @classmethod
    def from_mapping(
        cls, data: Any, *, source: str = PROGRAMMATIC, strict: bool = False, pi: bool = False
    ) -> SettingsLayer:
        """Validate nested groups (``{"retry": {"maxRetries": 5}}``) into a layer.

        Keys trio_session uses are checked: a wrong type or range is a
        ``SettingsError`` naming the key and ``source``. pi's other keys
        (``PI_ONLY_KEYS``) are accepted silently. A key no one knows is a warning
        in ``warnings`` — or, with ``strict`` (a program's own mapping), an error.

        With ``pi`` (a file of pi's agent directory or a project's ``.pi``), pi's
        legacy spellings mean what pi makes of them: ``retry.maxDelayMs`` is
        ``retry.provider.maxRetryDelayMs`` (unless that is set) and ``queueMode``
        is ``steeringMode``.

        Args:
            data: the decoded JSON object.
            source: where the data came from, for messages.
            strict: whether an unknown key is an error rather than a warning.
            pi: whether the data is from one of pi's files.
        """
        if not isinstance(data, Mapping):
            msg = f"settings must be a JSON object, not {type(data).__name__} (in {source})"
            raise SettingsError(msg, source=source)
        if pi:
            data = _migrate_pi(data)
        if "queueMode" in data and "steeringMode" not in data:
            data = {**data, "steeringMode": data["queueMode"]}
        values: dict[str, Any] = {}
        unknown: list[str] = []
        for key, body in data.items():
            if key in _GROUPS:
                _flatten(key, body, source, values, unknown)
            elif key in _SCHEMA:
                values[key] = validate_value(key, body, source=source)
            elif key not in PI_ONLY_KEYS:
                unknown.append(str(key))
        if strict and unknown:
            key = unknown[0]
            raise SettingsError(_unknown_message(key, source), key=key, source=source)
        warnings = [f"{_unknown_message(key, source)}; ignored" for key in unknown]
        if values.get("retry.provider.maxRetries"):  # None or 0: nothing to say
            warnings.append(f"{MOOT_PROVIDER_RETRIES} (in {source})")
        return cls(source=source, values=values, warnings=tuple(warnings))

    @classmethod
    def from_file(cls, path: str | Path, *, pi: bool = False) -> SettingsLayer:
        """Read and validate a JSON settings file. A missing file is an empty layer.

        ``pi``: the file is one of pi's (see ``from_mapping``).

        Args:
            path: the settings file.
            pi: whether the file is one of pi's.

        Raises:
            SettingsError: the file is not a regular file, is larger than
                ``MAX_SETTINGS_FILE_BYTES``, cannot be read or parsed, or holds a
                bad value of a key trio_session uses.
        """
        path = Path(path)
        source = str(path)
        text = _read_settings_text(path)
        if text is None:
            return cls(source=source, path=path)
        data = _parse_json(text, source) if text.strip() else {}
        layer = cls.from_mapping(data, source=source, pi=pi)
        return attrs.evolve(layer, path=path)

    def nested(self) -> dict[str, Any]:
        """The layer as nested groups, ready to write as JSON."""
        out: dict[str, Any] = {}
        for key, value in self.values.items():
            *groups, name = key.split(".")
            body = out
            for group in groups:
                body = body.setdefault(group, {})
            body[name] = value
        return out


def _migrate_pi(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """pi's ``migrateSettings`` for ``retry.maxDelayMs`` (settings-manager.js, 0.73.1)."""
    retry = data.get("retry")
    if not isinstance(retry, Mapping) or "maxDelayMs" not in retry:
        return data
    retry = dict(retry)
    legacy = retry.pop("maxDelayMs")
    provider = retry.get("provider")
    provider = dict(provider) if isinstance(provider, Mapping) else {}
    if isinstance(legacy, (int, float)) and provider.get("maxRetryDelayMs") is None:
        retry["provider"] = {**provider, "maxRetryDelayMs": legacy}
    return {**data, "retry": retry}


def _flatten(
    prefix: str, body: Any, source: str, values: dict[str, Any], unknown: list[str]
) -> None:
    """Validate the group ``prefix`` of a file into ``values``, key by dotted key;
    the keys no one knows go to ``unknown``."""
    if not isinstance(body, Mapping):
        kind = type(body).__name__
        msg = f"{prefix} must be a JSON object, not {kind} (in {source})"
        raise SettingsError(msg, key=prefix, source=source)
    for name, value in body.items():
        key = f"{prefix}.{name}"
        if key in _SUBGROUPS:
            _flatten(key, value, source, values, unknown)
        elif key in _SCHEMA:
            # One string per known key, however many sessions keep a layer with it.
            values[sys.intern(key)] = validate_value(key, value, source=source)
        else:
            unknown.append(key)


#: Settings resolved already, by the values they were made of: ``Settings`` is frozen,
#: so every session with the same values shares one. Emptied when it reaches
#: ``_RESOLVED_MAX`` entries.
_RESOLVED: dict[tuple[tuple[str, str, type, Any], ...], Settings] = {}
_RESOLVED_MAX = 256
#: The value types a resolved ``Settings`` is looked up by (hashable, and compared by
#: type too, so ``1`` and ``1.0`` or ``True`` are told apart).
_SCALARS = frozenset({type(None), bool, int, float, str})


def resolve(layers: Iterable[SettingsLayer]) -> Settings:
    """Fold layers over the defaults; later layers win key by key."""
    merged: dict[str, dict[str, Any]] = {group: {} for group in ("", *_GROUPS, *_SUBGROUPS)}
    for layer in layers:
        for dotted, value in layer.values.items():
            group, _, name = dotted.rpartition(".")
            merged[group][snake(name)] = value
    key = _resolved_key(merged)
    found = _RESOLVED.get(key) if key else None
    if found is not None:
        return found
    provider = ProviderRetrySettings(**merged["retry.provider"])
    settings = Settings(
        retry=RetrySettings(**merged["retry"], provider=provider),
        compaction=CompactionSettings(**merged["compaction"]),
        credentials=CredentialsSettings(**merged["credentials"]),
        **merged[""],
    )
    if key:
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[key] = settings
    return settings


def _resolved_key(merged: dict[str, dict[str, Any]]) -> tuple[tuple[str, str, type, Any], ...]:
    """What ``resolve`` looks a ``Settings`` up by; empty when a value is not a scalar
    (then it is not looked up, nor kept)."""
    key = []
    for group, values in merged.items():
        for name, value in values.items():
            if type(value) not in _SCALARS:
                return ()
            key.append((group, name, type(value), value))
    return tuple(key) or (("", "", type(None), None),)


#: Layers made from a program's own mappings, by the mapping's contents: a
#: ``SettingsLayer`` is frozen (a store replaces a layer, never changes it), so every
#: session given equal settings shares one. Emptied when it reaches ``_LAYERS_MAX``.
_LAYERS: dict[tuple[Any, ...], SettingsLayer] = {}
_LAYERS_MAX = 256


def _programmatic_layer(value: Mapping[str, Any]) -> SettingsLayer:
    """``SettingsLayer.from_mapping(value, strict=True)``, shared for equal mappings."""
    key = _mapping_key(value)
    if key is None:
        return SettingsLayer.from_mapping(value, strict=True)
    layer = _LAYERS.get(key)
    if layer is None:
        layer = SettingsLayer.from_mapping(value, strict=True)
        if len(_LAYERS) >= _LAYERS_MAX:
            _LAYERS.clear()
        _LAYERS[key] = layer
    return layer


def _mapping_key(value: Any) -> tuple[Any, ...] | None:
    """Nested string-keyed mappings of scalars as a hashable key (types included, so
    ``1``, ``1.0`` and ``True`` differ); ``None`` for anything else."""
    if not isinstance(value, Mapping):
        return None
    items: list[Any] = []
    for name, body in value.items():
        if type(name) is not str:
            return None
        if isinstance(body, Mapping):
            inner = _mapping_key(body)
            if inner is None:
                return None
            items.append((name, inner))
        elif type(body) in _SCALARS:
            items.append((name, type(body), body))
        else:
            return None
    return tuple(items)


def _as_nested(value: Any) -> Any:
    """An attrs settings value as nested groups in file form (camelCase keys)."""
    if not attrs.has(type(value)):
        return value
    return {
        camel(field.name): _as_nested(getattr(value, field.name))
        for field in attrs.fields(type(value))
    }


@attrs.define(eq=False)
class SettingsStore:
    """Live, layered settings for one session.

    The session reads ``current`` each time it needs a value (R-11), so a
    change made while a prompt runs applies from the next decision on.
    Programmatic changes (``set_auto_retry_enabled``) go into the top layer.

    Args:
        layers: the file layers, lowest first.
        global_path: the global settings file, where ``set_and_persist`` writes a
            key that no file sets yet (it need not exist).
    """

    _layers: list[SettingsLayer] = attrs.field(factory=list, alias="layers")
    _global_path: Path | None = attrs.field(default=None, alias="global_path", kw_only=True)
    # Programmatic changes, above every file; a dict only once there is one.
    _overrides: dict[str, Any] | None = attrs.field(default=None, init=False)
    _current: Settings = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._current = self._resolve()

    @classmethod
    def coerce(cls, value: SettingsStore | Settings | Mapping[str, Any] | None) -> SettingsStore:
        """Accept a store, a ``Settings``, nested groups in file form, or ``None``.

        Args:
            value: the settings to use; ``None`` for the defaults.
        """
        if isinstance(value, SettingsStore):
            return value
        if value is None:
            return cls()
        if isinstance(value, Settings):
            # validated like a file
            return cls([SettingsLayer.from_mapping(_as_nested(value), strict=True)])
        return cls([_programmatic_layer(value)])

    @classmethod
    def from_files(
        cls,
        *paths: str | Path,
        overrides: Mapping[str, Any] | None = None,
        global_path: str | Path | None = None,
    ) -> SettingsStore:
        """Layers from files in order (global first), then programmatic overrides.

        ``global_path`` is where ``set_and_persist`` writes a key no file sets.

        Args:
            overrides: settings above every file, as nested groups (validated strictly).
            global_path: the global settings file.
        """
        layers = [SettingsLayer.from_file(p) for p in paths]
        if overrides:
            layers.append(SettingsLayer.from_mapping(overrides, strict=True))
        return cls(layers, global_path=None if global_path is None else Path(global_path))

    @property
    def current(self) -> Settings:
        """The effective settings now."""
        return self._current

    @property
    def layers(self) -> tuple[SettingsLayer, ...]:
        """The layers, lowest first (programmatic changes are not among them)."""
        return tuple(self._layers)

    @property
    def global_path(self) -> Path | None:
        """The global settings file, if this store has one."""
        return self._global_path

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every layer's warnings, lowest layer first: keys kept but not used."""
        return tuple(w for layer in self._layers for w in layer.warnings)

    def set(self, key: str, value: Any) -> None:
        """Set one dotted key programmatically, above every file.

        Args:
            key: the dotted key (``"retry.enabled"``).
            value: the value; validated as a file's would be.
        """
        checked = validate_value(key, value)
        if self._overrides is None:
            self._overrides = {}
        self._overrides[key] = checked
        self._current = self._resolve()

    def source_of(self, key: str) -> SettingsLayer | None:
        """The highest file layer that sets ``key``, if any.

        Args:
            key: the dotted key.
        """
        for layer in reversed(self._layers):
            if key in layer.values and layer.path is not None:
                return layer
        return None

    def set_and_persist(self, key: str, value: Any) -> Path | None:
        """Set ``key`` and write it to disk: into the highest file that sets it, else
        into the global settings file (``global_path``), as pi does.

        The write is small and atomic (``persist_setting``; every other key of the
        file, unknown ones too, is kept) and happens before this returns, and before
        anything changes in memory: if it fails, the error is raised and the settings
        are as they were. Returns the file written, or ``None`` when there was none
        to write (no file sets the key and the store has no ``global_path``).

        Args:
            key: the dotted key (``"retry.enabled"``).
            value: the value; validated before anything is written.
        """
        validate_value(key, value)
        layer = self.source_of(key)
        path = layer.path if layer is not None else self._global_path
        if path is not None:
            persist_setting(path, key, value)
            if layer is None:
                layer = next((x for x in self._layers if x.path == path), None)
            if layer is None:  # the global file was not among the layers: it is now
                self._layers.insert(0, SettingsLayer(str(path), {key: value}, path))
            else:
                index = self._layers.index(layer)
                self._layers[index] = attrs.evolve(layer, values={**layer.values, key: value})
        self.set(key, value)
        return path

    def _resolve(self) -> Settings:
        if not self._overrides:
            return resolve(self._layers)
        top = SettingsLayer(source=PROGRAMMATIC, values=dict(self._overrides))
        return resolve([*self._layers, top])


# -- files on disk -------------------------------------------------------------------

#: The name of the global settings file inside the user config directory.
SETTINGS_FILE_NAME = "settings.json"
#: The project settings file, relative to the working directory.
PROJECT_SETTINGS_PATH = Path(".trio-session") / SETTINGS_FILE_NAME
#: Mode of a settings file ``persist_setting`` creates (an existing file keeps its own).
NEW_SETTINGS_FILE_MODE = 0o644


def default_settings_paths(
    cwd: str | os.PathLike[str] | None = None, *, config_dir: str | os.PathLike[str] | None = None
) -> tuple[Path, Path]:
    """The global and the project settings file, lowest layer first (R-38).

    ``(<user config dir>/settings.json, <cwd>/.trio-session/settings.json)``; on
    Linux the first is ``~/.config/trio-session/settings.json`` (``$XDG_CONFIG_HOME``
    is honoured), on macOS ``~/Library/Application Support/trio-session/settings.json``,
    on Windows ``%APPDATA%\\trio-session\\settings.json``. Neither has to exist: a
    missing file is an empty layer, so
    ``SettingsStore.from_files(*default_settings_paths())`` always works.

    Args:
        cwd: the project directory; the current working directory unless given.
        config_dir: replaces the user config directory (tests, portable setups).
    """
    base = Path(config_dir) if config_dir is not None else user_config_dir()
    project = Path(cwd) if cwd is not None else Path.cwd()
    return base / SETTINGS_FILE_NAME, project.absolute() / PROJECT_SETTINGS_PATH


def persist_setting(path: str | os.PathLike[str], key: str, value: Any) -> None:
    """Write one dotted key into a settings file, keeping everything else in it (R-37, R-38).

    The value is validated first. The file is read, ``{group: {name: value}}`` is
    set, and the whole file is rewritten atomically: a temporary file in the same
    directory is written, flushed and ``fsync``-ed, then ``os.replace``-d over the
    old one, so a reader (or a crash) sees the old file or the new one, never half
    of either. Other keys, other groups (another tool's too) and the key order are
    kept; the file is re-indented with two spaces. Missing parent directories are
    created; a new file gets mode 0644, an existing one keeps its mode. If ``path``
    is a symbolic link, the file it points to is rewritten and the link stays.
    Two processes writing at the same moment: the last one wins, whole.

    This blocks on disk I/O; from Trio code, call it with ``trio.to_thread.run_sync``.

    Args:
        path: the settings file.
        key: a dotted key, ``"retry.maxRetries"``.
        value: its new value.

    Raises:
        SettingsError: the key or value is invalid, or the file exists but is not
            a regular file of at most ``MAX_SETTINGS_FILE_BYTES``, not valid
            JSON, not an object, holds a number that would not survive the rewrite
            (``1e400``), or cannot be read or written (it is then left untouched).
    """
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    source = str(path)
    validate_value(key, value, source=source)
    *groups, name = key.split(".")
    data = _read_for_update(path)
    body = data
    for depth, group in enumerate(groups, start=1):
        body = body.setdefault(group, {})
        if not isinstance(body, dict):
            prefix = ".".join(groups[:depth])
            msg = f"{prefix} must be a JSON object, not {type(body).__name__} (in {source})"
            raise SettingsError(msg, key=prefix, source=source)
    body[name] = value
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False, default=_unwritable) + "\n"
    except _BigNumberError as exc:
        msg = (
            f"cannot rewrite settings file {source}: it holds the number {exc.number!r}, "
            "which would not survive the rewrite"
        )
        raise SettingsError(msg, key=key, source=source) from None
    except RecursionError:
        msg = f"cannot rewrite settings file {source}: it is nested too deeply"
        raise SettingsError(msg, key=key, source=source) from None
    try:
        _replace_atomically(path, text.encode("utf-8"))
    except OSError as exc:
        msg = f"cannot write settings file {source}: {exc.strerror or exc}"
        raise SettingsError(msg, key=key, source=source) from exc


def _read_for_update(path: Path) -> dict[str, Any]:
    """The file's JSON object, ``{}`` if it is missing or blank; never a broken file."""
    source = str(path)
    text = _read_settings_text(path)
    if text is None or not text.strip():
        return {}
    data = _parse_json(text, source)
    if not isinstance(data, dict):
        msg = f"settings must be a JSON object, not {type(data).__name__} (in {source})"
        raise SettingsError(msg, source=source)
    return data


# -- reading a file, whatever it holds ------------------------------------------------

#: The largest settings file read, in bytes (1 MiB); a larger one is an error.
MAX_SETTINGS_FILE_BYTES = 1 << 20

# Opening must not wait for a writer (a FIFO) or take a terminal as controlling one.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_BINARY", 0)
)

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _read_settings_text(path: Path) -> str | None:
    """The text of a settings file, or ``None`` if there is no such file.

    Only a regular file (or a link to one) of at most ``MAX_SETTINGS_FILE_BYTES``
    is read: a FIFO, ``/dev/zero`` or a directory is refused at once, without
    waiting for a writer or reading without end.
    """
    source = str(path)
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        msg = f"cannot read settings file {source}: {exc}"
        raise SettingsError(msg, source=source) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((k for test, k in _FILE_KINDS if test(mode)), "a special file")
            msg = f"cannot read settings file {source}: it is {kind}, not a regular file"
            raise SettingsError(msg, source=source)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_SETTINGS_FILE_BYTES and (
            chunk := os.read(fd, MAX_SETTINGS_FILE_BYTES + 1 - size)
        ):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        msg = f"cannot read settings file {source}: {exc.strerror or exc}"
        raise SettingsError(msg, source=source) from exc
    finally:
        os.close(fd)
    if size > MAX_SETTINGS_FILE_BYTES:
        msg = (
            f"settings file {source} is too large: more than "
            f"{MAX_SETTINGS_FILE_BYTES} bytes (1 MiB)"
        )
        raise SettingsError(msg, source=source)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = f"cannot read settings file {source}: {exc}"
        raise SettingsError(msg, source=source) from exc


@attrs.frozen(repr=False)
class _BigNumber:
    """A JSON number Python cannot hold: ``1e400``, or an integer of thousands of digits.

    It is kept as its text, so a check fails on it and says what it was; it is never
    turned into ``inf`` (which would be written back as the non-JSON ``Infinity``).
    """

    text: str

    def __repr__(self) -> str:
        return _cut(self.text)


class _BigNumberError(Exception):
    def __init__(self, number: _BigNumber) -> None:
        super().__init__(number)
        self.number = number


def _unwritable(value: Any) -> Any:
    if isinstance(value, _BigNumber):
        raise _BigNumberError(value)
    raise TypeError(f"{type(value).__name__} is not JSON")  # pragma: no cover - json only


def _parse_float(text: str) -> float | _BigNumber:
    value = float(text)
    return value if math.isfinite(value) else _BigNumber(text)


def _parse_int(text: str) -> int | _BigNumber:
    limit = sys.get_int_max_str_digits()
    if limit and len(text.lstrip("-")) > limit:
        return _BigNumber(text)
    return int(text)


def _parse_json(text: str, source: str) -> Any:
    """``json.loads`` that raises only ``SettingsError``, naming ``source``."""
    try:
        return json.loads(text, parse_float=_parse_float, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        msg = (
            f"settings file {source} is not valid JSON: {exc.msg} "
            f"at line {exc.lineno} column {exc.colno}"
        )
        raise SettingsError(msg, source=source) from exc
    except RecursionError:
        msg = f"settings file {source} is nested too deeply to read"
        raise SettingsError(msg, source=source) from None


def _replace_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary sibling, fsync it, and ``os.replace`` it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = NEW_SETTINGS_FILE_MODE
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_directory(path.parent)
