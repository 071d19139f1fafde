"""Settings: the ``retry`` and ``compaction`` groups, validated, layered (R-26, R-28, R-38).

Settings files are JSON with nested groups, keyed as in the reference::

    {"retry": {"enabled": true, "maxRetries": 3, "baseDelayMs": 2000}}

Layers apply in order — defaults < global file < project file < programmatic —
and each key comes from the last layer that sets it. Every value is checked when
its layer is read; a bad one raises :class:`~trio_session.SettingsError` whose
message names the key, the value and the file. Groups other than ``retry`` and
``compaction`` are left alone, so a file shared with other tools still loads.

:func:`default_settings_paths` says where the global and project files live;
:func:`persist_setting` writes one key back into a file, atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
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
PROGRAMMATIC = "<programmatic>"


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
    """

    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2000
    max_delay_ms: int | None = None
    jitter: Jitter = "none"
    respect_retry_after: bool = False
    classifier: ClassifierName = "reference"


@attrs.frozen
class CompactionSettings:
    """The ``compaction`` group.

    Attributes:
        enabled: ``compaction.enabled`` — recover from context overflow (R-50).
        keep_recent_turns: ``compaction.keepRecentTurns`` — turns the default
            compactor always keeps verbatim.
    """

    enabled: bool = True
    keep_recent_turns: int = 1


@attrs.frozen
class Settings:
    """Effective settings: every group, every key resolved."""

    retry: RetrySettings = attrs.field(factory=RetrySettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)


_Check: TypeAlias = Callable[[Any], bool]


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_nonneg_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_pos_int(v: Any) -> bool:
    return _is_nonneg_int(v) and v > 0


def _is_opt_pos_int(v: Any) -> bool:
    return v is None or _is_pos_int(v)


def _one_of(*choices: str) -> tuple[_Check, str]:
    listed = ", ".join(f'"{c}"' for c in choices)
    return (lambda v: v in choices), f"one of {listed}"


_SCHEMA: dict[str, dict[str, tuple[_Check, str]]] = {
    "retry": {
        "enabled": (_is_bool, "true or false"),
        "maxRetries": (_is_nonneg_int, "a non-negative integer"),
        "baseDelayMs": (_is_nonneg_int, "a non-negative integer"),
        "maxDelayMs": (_is_opt_pos_int, "a positive integer or null"),
        "jitter": _one_of("none", "full", "equal"),
        "respectRetryAfter": (_is_bool, "true or false"),
        "classifier": _one_of("reference", "strict"),
    },
    "compaction": {
        "enabled": (_is_bool, "true or false"),
        "keepRecentTurns": (_is_pos_int, "a positive integer"),
    },
}


def validate_value(key: str, value: Any, *, source: str = PROGRAMMATIC) -> Any:
    """Check one dotted key (``"retry.maxRetries"``) and its value; return the value.

    Raises:
        SettingsError: unknown key, or a value of the wrong type or range.
    """
    group, _, name = key.partition(".")
    if group not in _SCHEMA or not name:
        known = ", ".join(f"{g}.*" for g in _SCHEMA)
        msg = f"{key} is not a known setting (known groups: {known}) (in {source})"
        raise SettingsError(msg, key=key, source=source)
    if name not in _SCHEMA[group]:
        known = ", ".join(_SCHEMA[group])
        msg = f"{key} is not a known setting (known {group} keys: {known}) (in {source})"
        raise SettingsError(msg, key=key, source=source)
    check, description = _SCHEMA[group][name]
    if not check(value):
        msg = f"{key} must be {description}, not {value!r} (in {source})"
        raise SettingsError(msg, key=key, source=source)
    return value


@attrs.frozen
class SettingsLayer:
    """One validated source of settings: ``{"retry.maxRetries": 5, …}``.

    Attributes:
        source: the file path, or ``"<programmatic>"``.
        values: dotted keys to validated values.
        path: the file the layer was read from, if any.
    """

    source: str
    values: Mapping[str, Any] = attrs.field(factory=dict)
    path: Path | None = None

    @classmethod
    def from_mapping(cls, data: Any, *, source: str = PROGRAMMATIC) -> SettingsLayer:
        """Validate nested groups (``{"retry": {"maxRetries": 5}}``) into a layer."""
        if not isinstance(data, Mapping):
            msg = f"settings must be a JSON object, not {type(data).__name__} (in {source})"
            raise SettingsError(msg, source=source)
        values: dict[str, Any] = {}
        for group, body in data.items():
            if group not in _SCHEMA:
                continue  # another tool's group: not ours to judge
            if not isinstance(body, Mapping):
                kind = type(body).__name__
                msg = f"{group} must be a JSON object, not {kind} (in {source})"
                raise SettingsError(msg, key=group, source=source)
            for name, value in body.items():
                key = f"{group}.{name}"
                values[key] = validate_value(key, value, source=source)
        return cls(source=source, values=values)

    @classmethod
    def from_file(cls, path: str | Path) -> SettingsLayer:
        """Read and validate a JSON settings file. A missing file is an empty layer."""
        path = Path(path)
        source = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(source=source, path=path)
        except (OSError, UnicodeDecodeError) as exc:
            msg = f"cannot read settings file {source}: {exc}"
            raise SettingsError(msg, source=source) from exc
        try:
            data = json.loads(text) if text.strip() else {}
        except json.JSONDecodeError as exc:
            msg = (
                f"settings file {source} is not valid JSON: {exc.msg} "
                f"at line {exc.lineno} column {exc.colno}"
            )
            raise SettingsError(msg, source=source) from exc
        layer = cls.from_mapping(data, source=source)
        return attrs.evolve(layer, path=path)

    def nested(self) -> dict[str, dict[str, Any]]:
        """The layer as nested groups, ready to write as JSON."""
        out: dict[str, dict[str, Any]] = {}
        for key, value in self.values.items():
            group, _, name = key.partition(".")
            out.setdefault(group, {})[name] = value
        return out


def resolve(layers: Iterable[SettingsLayer]) -> Settings:
    """Fold layers over the defaults; later layers win key by key."""
    merged: dict[str, dict[str, Any]] = {group: {} for group in _SCHEMA}
    for layer in layers:
        for key, value in layer.values.items():
            group, _, name = key.partition(".")
            merged[group][snake(name)] = value
    return Settings(
        retry=RetrySettings(**merged["retry"]),
        compaction=CompactionSettings(**merged["compaction"]),
    )


@attrs.define(eq=False)
class SettingsStore:
    """Live, layered settings for one session.

    The session reads :attr:`current` each time it needs a value (R-11), so a
    change made while a prompt runs applies from the next decision on.
    Programmatic changes (``set_auto_retry_enabled``) go into the top layer.
    """

    _layers: list[SettingsLayer] = attrs.field(factory=list, alias="layers")
    _overrides: dict[str, Any] = attrs.field(factory=dict, init=False)
    _current: Settings = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._current = self._resolve()

    @classmethod
    def coerce(cls, value: SettingsStore | Settings | Mapping[str, Any] | None) -> SettingsStore:
        """Accept a store, a :class:`Settings`, nested groups in file form, or ``None``."""
        if isinstance(value, SettingsStore):
            return value
        if value is None:
            return cls()
        if isinstance(value, Settings):
            nested = {
                group: {
                    camel(field.name): getattr(getattr(value, group), field.name)
                    for field in attrs.fields(type(getattr(value, group)))
                }
                for group in _SCHEMA
            }
            return cls([SettingsLayer.from_mapping(nested)])  # validated like a file
        return cls([SettingsLayer.from_mapping(value)])

    @classmethod
    def from_files(
        cls, *paths: str | Path, overrides: Mapping[str, Any] | None = None
    ) -> SettingsStore:
        """Layers from files in order (global first), then programmatic overrides."""
        layers = [SettingsLayer.from_file(p) for p in paths]
        if overrides:
            layers.append(SettingsLayer.from_mapping(overrides))
        return cls(layers)

    @property
    def current(self) -> Settings:
        """The effective settings now."""
        return self._current

    @property
    def layers(self) -> tuple[SettingsLayer, ...]:
        """The layers, lowest first (programmatic changes are not among them)."""
        return tuple(self._layers)

    def set(self, key: str, value: Any) -> None:
        """Set one dotted key programmatically, above every file."""
        self._overrides[key] = validate_value(key, value)
        self._current = self._resolve()

    def source_of(self, key: str) -> SettingsLayer | None:
        """The highest file layer that sets ``key``, if any."""
        for layer in reversed(self._layers):
            if key in layer.values and layer.path is not None:
                return layer
        return None

    def set_and_persist(self, key: str, value: Any) -> Path | None:
        """Set ``key`` and write it back into the file it came from, if it came from one.

        The write is small and atomic (:func:`persist_setting`) and happens before this
        returns. Returns the file written, or ``None`` when the key came from no file.
        """
        self.set(key, value)
        layer = self.source_of(key)
        if layer is None or layer.path is None:
            return None
        persist_setting(layer.path, key, value)
        index = self._layers.index(layer)
        self._layers[index] = attrs.evolve(layer, values={**layer.values, key: value})
        return layer.path

    def _resolve(self) -> Settings:
        top = SettingsLayer(source=PROGRAMMATIC, values=dict(self._overrides))
        return resolve([*self._layers, top])


# -- files on disk -------------------------------------------------------------------

#: The name of the global settings file inside the user config directory.
SETTINGS_FILE_NAME = "settings.json"
#: The project settings file, relative to the working directory.
PROJECT_SETTINGS_PATH = Path(".trio-session") / SETTINGS_FILE_NAME
#: Mode of a settings file :func:`persist_setting` creates (an existing file keeps its own).
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

    Raises:
        SettingsError: the key or value is invalid, or the file exists but is not
            valid JSON, not an object, or cannot be read or written (it is then
            left untouched).
    """
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    source = str(path)
    validate_value(key, value, source=source)
    group, _, name = key.partition(".")
    data = _read_for_update(path)
    body = data.setdefault(group, {})
    if not isinstance(body, dict):
        msg = f"{group} must be a JSON object, not {type(body).__name__} (in {source})"
        raise SettingsError(msg, key=group, source=source)
    body[name] = value
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        _replace_atomically(path, text.encode("utf-8"))
    except OSError as exc:
        msg = f"cannot write settings file {source}: {exc.strerror or exc}"
        raise SettingsError(msg, key=key, source=source) from exc


def _read_for_update(path: Path) -> dict[str, Any]:
    """The file's JSON object, ``{}`` if it is missing or blank; never a broken file."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read settings file {source}: {exc}"
        raise SettingsError(msg, source=source) from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = (
            f"settings file {source} is not valid JSON: {exc.msg} "
            f"at line {exc.lineno} column {exc.colno}"
        )
        raise SettingsError(msg, source=source) from exc
    if not isinstance(data, dict):
        msg = f"settings must be a JSON object, not {type(data).__name__} (in {source})"
        raise SettingsError(msg, source=source)
    return data


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
