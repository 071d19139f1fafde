"""Where trio_session keeps its files: the platform's per-user directories.

Two directories, by the usual rule of each platform (the same paths as
``platformdirs`` gives for ``appname="trio-session", appauthor=False``, with a
roaming config directory on Windows):

```text
platform      config (settings.json)                   data (sessions, credentials)
Linux, BSDs   $XDG_CONFIG_HOME/trio-session            $XDG_DATA_HOME/trio-session
              (else ~/.config/trio-session)            (else ~/.local/share/trio-session)
macOS         ~/Library/Application Support/trio-session   (both)
Windows       %APPDATA%\\trio-session                   %LOCALAPPDATA%\\trio-session
```

As the XDG base-directory specification asks, an ``XDG_*`` variable that is
empty or holds a relative path is ignored. Nothing here creates a directory
unasked; the code that writes a file creates what it needs with
``make_private_dirs``: each missing level mode 0700, since the names of the
session directories spell out the user's working directories. A directory that
already exists (the user's home, ``~/.local``) keeps its mode.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP_NAME = "trio-session"
#: The mode of every directory trio_session creates.
PRIVATE_DIR_MODE = 0o700


def _home(home: Path | None) -> Path:
    return home if home is not None else Path.home()


def _xdg(environ: Mapping[str, str], variable: str, fallback: Path) -> Path:
    value = environ.get(variable, "")
    return Path(value) if value and os.path.isabs(value) else fallback


def user_config_dir(
    *,
    platform: str = sys.platform,
    environ: Mapping[str, str] = os.environ,
    home: Path | None = None,
) -> Path:
    """The directory for the user's global settings file (see the module docstring).

    Args:
        platform: ``sys.platform`` unless given (tests pass another).
        environ: the environment to read ``XDG_CONFIG_HOME`` / ``APPDATA`` from.
        home: the user's home directory; ``Path.home()`` unless given.
    """
    if platform == "win32":
        appdata = environ.get("APPDATA", "")
        base = Path(appdata) if appdata else _home(home) / "AppData" / "Roaming"
    elif platform == "darwin":
        base = _home(home) / "Library" / "Application Support"
    else:
        base = _xdg(environ, "XDG_CONFIG_HOME", _home(home) / ".config")
    return base / APP_NAME


def user_data_dir(
    *,
    platform: str = sys.platform,
    environ: Mapping[str, str] = os.environ,
    home: Path | None = None,
) -> Path:
    """The directory for session files and the credential store (see the module docstring).

    Args:
        platform: ``sys.platform`` unless given (tests pass another).
        environ: the environment to read ``XDG_DATA_HOME`` / ``LOCALAPPDATA`` from.
        home: the user's home directory; ``Path.home()`` unless given.
    """
    if platform == "win32":
        local = environ.get("LOCALAPPDATA", "")
        base = Path(local) if local else _home(home) / "AppData" / "Local"
    elif platform == "darwin":
        base = _home(home) / "Library" / "Application Support"
    else:
        base = _xdg(environ, "XDG_DATA_HOME", _home(home) / ".local" / "share")
    return base / APP_NAME


def make_private_dirs(directory: str | os.PathLike[str]) -> None:
    """Create ``directory`` and each missing parent, every one with mode 0700.

    Unlike ``Path.mkdir(parents=True, mode=...)``, which gives the mode to the last
    directory only, every level this creates is private. Levels that exist are left
    as they are.

    Args:
        directory: the directory to have.

    Raises:
        NotADirectoryError: something that is not a directory is in the way; the
            message names it.
        OSError: a level cannot be created.
    """
    missing: list[Path] = []
    level = Path(directory)
    while not level.is_dir():
        missing.append(level)
        if level.parent == level:
            break
        level = level.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            if not path.is_dir():  # else another process made it meanwhile
                msg = f"{path} is not a directory"
                raise NotADirectoryError(errno.ENOTDIR, msg, str(path)) from None


def fsync_directory(path: Path) -> None:
    """Make a new or renamed directory entry in ``path`` durable (POSIX; no-op on Windows).

    A file's own ``fsync`` does not cover its name in the directory; after
    creating or ``os.replace``-ing a file, this makes the name survive a power
    loss too. File systems that cannot sync a directory are ignored.
    """
    if sys.platform == "win32":
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
