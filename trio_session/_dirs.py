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
empty or holds a relative path is ignored. Nothing here creates a directory;
the code that writes a file creates what it needs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

APP_NAME = "trio-session"


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
