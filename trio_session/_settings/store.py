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

Three modules: the values and their rules (``values.py``, pure), the files on
disk (``files.py``: ``default_settings_paths``, ``persist_setting``), and here the
layers and the store that resolve them. The values' names are re-exported here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from .._core.classes import define, frozen
from .._core.codec import camel, snake
from .._core.errors import SettingsError
from .files import MAX_SETTINGS_FILE_BYTES as MAX_SETTINGS_FILE_BYTES
from .files import NEW_SETTINGS_FILE_MODE as NEW_SETTINGS_FILE_MODE
from .files import PROJECT_SETTINGS_PATH as PROJECT_SETTINGS_PATH
from .files import SETTINGS_FILE_NAME as SETTINGS_FILE_NAME
from .files import default_settings_paths as default_settings_paths
from .files import parse_settings_json, read_settings_text
from .files import persist_setting as persist_setting
from .values import (
    GROUPS,
    PI_ONLY_KEYS,
    PROGRAMMATIC,
    SCHEMA,
    SUBGROUPS,
    unknown_message,
    validate_value,
)
from .values import (
    MOOT_PROVIDER_RETRIES as MOOT_PROVIDER_RETRIES,
)
from .values import RANGES as RANGES
from .values import RETRY_PROFILES as RETRY_PROFILES
from .values import SERVICE_SETTINGS as SERVICE_SETTINGS
from .values import ClassifierName as ClassifierName
from .values import CompactionSettings as CompactionSettings
from .values import CredentialsSettings as CredentialsSettings
from .values import HttpSettings as HttpSettings
from .values import Jitter as Jitter
from .values import ProviderRetrySettings as ProviderRetrySettings
from .values import QueueMode as QueueMode
from .values import RateLimits as RateLimits
from .values import RateLimitSettings as RateLimitSettings
from .values import RetryProfile as RetryProfile
from .values import RetrySettings as RetrySettings
from .values import Settings as Settings
from .values import ThinkingLevel as ThinkingLevel


@frozen
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
            if key in GROUPS:
                _flatten(key, body, source, values, unknown)
            elif key in SCHEMA:
                values[key] = validate_value(key, body, source=source)
            elif key not in PI_ONLY_KEYS:
                unknown.append(str(key))
        if strict and unknown:
            key = unknown[0]
            raise SettingsError(unknown_message(key, source), key=key, source=source)
        warnings = [f"{unknown_message(key, source)}; ignored" for key in unknown]
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
        text = read_settings_text(path)
        if text is None:
            return cls(source=source, path=path)
        data = parse_settings_json(text, source) if text.strip() else {}
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
        if key in SUBGROUPS:
            _flatten(key, value, source, values, unknown)
        elif key in SCHEMA:
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
    merged: dict[str, dict[str, Any]] = {group: {} for group in ("", *GROUPS, *SUBGROUPS)}
    for layer in layers:
        for dotted, value in layer.values.items():
            group, _, name = dotted.rpartition(".")
            below = merged[group].get(snake(name))
            if dotted == "defaultTools" and _only_changes(value) and below is not None:
                value = [*below, *value]  # pi's mergeDefaultTools: +name/-name add to it
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
        http=HttpSettings(**merged["http"]),
        rate_limit=RateLimitSettings(**merged["rateLimit"]),
        **merged[""],
    )
    if key:
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[key] = settings
    return settings


def _only_changes(names: Any) -> bool:
    """Whether a ``defaultTools`` list holds only ``+name`` / ``-name`` entries."""
    return isinstance(names, list | tuple) and all(n[:1] in ("+", "-") for n in names)


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
    if isinstance(value, Mapping):  # rateLimit.models: model ids are kept as they are
        return {name: _as_nested(body) for name, body in value.items()}
    if not attrs.has(type(value)):
        return value
    return {
        camel(field.name): _as_nested(getattr(value, field.name))
        for field in attrs.fields(type(value))
    }


_ATTEMPT_KEY = "retry.provider.timeoutMs"
_IDLE_KEY = "retry.provider.idleTimeoutMs"
#: Neither timeout set (shared: most stores have it).
_NO_TIMEOUTS: tuple[float | None, float | None] = (None, None)


@define(eq=False)
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
    # ``provider_timeouts()``, worked out with ``_current`` (a request asks it each time).
    _timeouts: tuple[float | None, float | None] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._resolve()

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
        self._resolve()

    def is_set(self, key: str) -> bool:
        """Whether a layer or a programmatic change sets ``key`` (not only the default).

        Args:
            key: the dotted key.
        """
        if self._overrides and key in self._overrides:
            return True
        return any(key in layer.values for layer in self._layers)

    def provider_timeouts(self) -> tuple[float | None, float | None]:
        """``retry.provider.timeoutMs`` and ``idleTimeoutMs`` in seconds, each ``None``
        when nothing sets it: what a session puts on every ``ProviderRequest`` so that
        the provider honours them however they were given (a file, ``open_session(
        settings=…)``, ``set``), while an unset key leaves the provider's own timeout."""
        return self._timeouts

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

    def _resolve(self) -> None:
        """Work out ``current`` from the layers and the overrides, and with it the
        provider timeouts (every change comes through here)."""
        if not self._overrides:
            current = resolve(self._layers)
        else:
            top = SettingsLayer(source=PROGRAMMATIC, values=dict(self._overrides))
            current = resolve([*self._layers, top])
        self._current = current
        provider = current.retry.provider
        attempt = provider.timeout_ms / 1000 if self.is_set(_ATTEMPT_KEY) else None
        idle = provider.idle_timeout_ms / 1000 if self.is_set(_IDLE_KEY) else None
        self._timeouts = _NO_TIMEOUTS if attempt is None and idle is None else (attempt, idle)


def settings_with(base: Mapping[str, Any], changes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``base`` with ``changes`` on top, group by group: a preset with one key changed.

    ```python
    settings = settings_with(SERVICE_SETTINGS, {"retry": {"maxRetries": 5}})
    # retry: jitter "equal", respectRetryAfter true, maxTotalMs 60000, maxRetries 5
    async with open_session(provider, model, settings=settings) as session: ...
    ```

    Both are nested groups in settings-file form, as ``open_session``'s ``settings``
    takes them. A group in ``changes`` is merged into the same group of ``base`` key by
    key, at any depth (``{"retry": {"provider": {"timeoutMs": 30000}}}`` keeps the
    rest of ``retry`` and of ``retry.provider``); any other value replaces ``base``'s,
    as a project settings file does over the global one. Neither argument is changed.
    The result is read-only, like ``SERVICE_SETTINGS``, so it can serve as a preset of
    its own (``settings_with(mine, …)``).

    Args:
        base: the settings to start from (``SERVICE_SETTINGS``, or your own).
        changes: the keys to change, in the same form.

    Returns:
        The merged settings, checked as ``open_session`` checks them.

    Raises:
        SettingsError: a key of the result is one no one knows, or its value is not
            valid; the message names the key and the value.
    """
    merged = _merged(base, changes)
    _programmatic_layer(merged)  # checked now; open_session finds the layer made here
    return merged


def _merged(base: Mapping[str, Any], changes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``settings_with``'s merge: groups merged key by key, any other value replaced."""
    out = {name: _read_only(value) for name, value in base.items()}
    for name, value in changes.items():
        below = out.get(name)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            out[name] = _merged(below, value)
        else:
            out[name] = _read_only(value)
    return MappingProxyType(out)


def _read_only(value: Any) -> Any:
    """A mapping as a read-only copy, at any depth; any other value as it is."""
    if isinstance(value, Mapping):
        return MappingProxyType({name: _read_only(body) for name, body in value.items()})
    return value


def coerce_settings(value: SettingsStore | Settings | Mapping[str, Any] | None) -> SettingsStore:
    """``SettingsStore.coerce`` as a plain function (an attrs converter).

    Args:
        value: the settings to use; ``None`` for the defaults.
    """
    return SettingsStore.coerce(value)
