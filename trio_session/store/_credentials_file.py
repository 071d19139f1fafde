"""The SQLite credentials file: where it lives, its schema, its creation with private
modes, and the values the credential stores share (a key's fingerprint, ``CredentialInfo``).

``SqliteCredentialStore`` (``._sqlite_credentials``) keeps its keys in this file;
``RedisCredentialStore`` shares the environment variables and the fingerprint.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from .._core.classes import frozen
from .._core.errors import TrioSessionError
from .._dirs import make_private_dirs, user_data_dir

#: Provider name → the environment variable whose key counts as one more credential.
DEFAULT_ENV_VARS: Mapping[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
CREDENTIALS_FILE_NAME = "credentials.sqlite3"
SCHEMA_VERSION = 1
FILE_MODE = 0o600

SCHEMA = """
CREATE TABLE credentials (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL,
    label TEXT NOT NULL,
    key TEXT NOT NULL,
    position INTEGER NOT NULL,
    UNIQUE (provider, label),
    UNIQUE (provider, key)
);
CREATE TABLE blocks (
    provider TEXT NOT NULL,
    credential TEXT NOT NULL,
    blocked_until REAL NOT NULL,
    PRIMARY KEY (provider, credential)
);
CREATE TABLE sessions (
    provider TEXT NOT NULL,
    session_id TEXT NOT NULL,
    credential TEXT NOT NULL,
    used_at REAL NOT NULL,
    PRIMARY KEY (provider, session_id)
);
CREATE INDEX sessions_used_at ON sessions (used_at);
"""


class CredentialStoreError(TrioSessionError):
    """The credential store file is unusable, or a management call was invalid.

    The message names the file or the provider and label; it never contains a key.

    Attributes:
        path: the store file, when the file is at fault.

    Args:
        message: what went wrong, naming the file or the provider and label.
    """

    def __init__(self, message: str, *, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


@frozen
class CredentialInfo:
    """One credential as ``SqliteCredentialStore.list`` shows it: never the whole key.

    Attributes:
        provider: the provider name.
        label: the stored key's label, or the environment variable's name.
        index: the stored key's 0-based position among its provider's stored
            keys (what ``SqliteCredentialStore.remove`` accepts); ``None``
            for the environment variable.
        redacted: the key as ``redact`` shows it (``sk-…wxyz``).
        source: ``"store"`` or ``"env"``.
        blocked_until: epoch seconds the credential is blocked until, if it is now.
    """

    provider: str
    label: str
    index: int | None
    redacted: str
    source: Literal["store", "env"]
    blocked_until: float | None = None


def fingerprint(key: str) -> str:
    """A credential's id in the ``blocks`` and ``sessions`` tables: 16 hex digits of SHA-256."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def default_credentials_path(*, data_dir: str | os.PathLike[str] | None = None) -> Path:
    """``<user data dir>/credentials.sqlite3`` (Linux: ``~/.local/share/trio-session/…``)."""
    base = Path(data_dir) if data_dir is not None else user_data_dir()
    return base / CREDENTIALS_FILE_NAME


def create_private(path: Path) -> None:
    """Make sure ``path`` exists, created 0600, and that nobody else may read it."""
    try:
        make_private_dirs(path.parent)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        except FileExistsError:
            pass
        else:
            os.close(fd)
        info = os.stat(path)
    except OSError as exc:
        msg = f"cannot create credential store {path}: {exc.strerror or exc}"
        raise CredentialStoreError(msg, path=path) from exc
    if not stat.S_ISREG(info.st_mode):
        msg = f"credential store {path} is not a regular file"
        raise CredentialStoreError(msg, path=path)
    mode = stat.S_IMODE(info.st_mode)
    if sys.platform != "win32" and mode & 0o077:
        msg = (
            f"credential store {path} has mode {mode:04o}: it holds API keys and must be "
            f"readable by its owner only (chmod 600 {path})"
        )
        raise CredentialStoreError(msg, path=path)


def check_text(what: str, value: object, *, path: Path) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        msg = f"{what} must be a non-empty string without surrounding spaces"
        raise CredentialStoreError(msg, path=path)
    return value
