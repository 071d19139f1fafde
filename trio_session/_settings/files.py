"""Settings files on disk: where they live, reading one safely, writing one key back.

``default_settings_paths`` says where the global and project files live;
``persist_setting`` writes one key back into a file, atomically. A file is read only
if it is a regular file of at most ``MAX_SETTINGS_FILE_BYTES``; a number Python cannot
hold or JSON nested too deeply is a ``SettingsError``, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from .._core.classes import frozen
from .._core.errors import SettingsError
from .._dirs import fsync_directory, user_config_dir
from .values import cut_number, validate_value

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
    text = read_settings_text(path)
    if text is None or not text.strip():
        return {}
    data = parse_settings_json(text, source)
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


def read_settings_text(path: Path) -> str | None:
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


@frozen(repr=False)
class _BigNumber:
    """A JSON number Python cannot hold: ``1e400``, or an integer of thousands of digits.

    It is kept as its text, so a check fails on it and says what it was; it is never
    turned into ``inf`` (which would be written back as the non-JSON ``Infinity``).
    """

    text: str

    def __repr__(self) -> str:
        return cut_number(self.text)


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


def parse_settings_json(text: str, source: str) -> Any:
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
