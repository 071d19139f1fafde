"""API keys for the ``trio-session`` commands: ``--api-key`` and ``--api-key-file``, the
credential store a command opens, and the ``auth`` subcommands.

As in ``._commands``, every user mistake becomes a ``CommandError`` with a message meant
for a person.
"""

from __future__ import annotations

import datetime
import os
import stat
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, TextIO

from ._commands import KEY_VARIABLES, CommandError, env_api_key, key_variables
from ._core.errors import TrioSessionError
from .store._credentials import CredentialStore, InMemoryCredentialStore

# The SQLite credential store is imported where a command needs it: a key given in full
# (``--api-key-file``, pi's auth.json) opens no SQLite database.
if TYPE_CHECKING:
    from .store._sqlite_credentials import SqliteCredentialStore

#: The longest key ``--api-key-file`` reads, in bytes.
MAX_KEY_BYTES = 64 * 1024


def api_key_flag_warning(provider: str) -> str:
    """What ``--api-key`` costs, and what to use instead; never the key itself."""
    variables = key_variables(provider)
    instead = "--api-key-file PATH, --api-key-file - (one line of stdin), "
    instead += f"{variables[0]}, " if variables else ""
    return (
        "trio-session: warning: --api-key puts the key on the command line, where every "
        f"user of this machine can read it (ps, /proc/PID/cmdline); use {instead}"
        "or trio-session auth add instead"
    )


def read_api_key_file(
    path: str,
    *,
    stdin: TextIO = sys.stdin,
    warn: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
) -> str:
    """The key of ``--api-key-file PATH``: the first line of the file, stripped.

    ``-`` reads one line of stdin — hidden, at a prompt, when stdin is a terminal.
    From a pipe it is read byte by byte, so nothing after that line is taken from
    whoever reads stdin next (the chat's prompts, the RPC commands). A file that
    other users can read is used, with a warning.

    Raises:
        CommandError: no key, an unreadable file, or a line that cannot be a key;
            the message never holds any of the file's text.
    """
    flag = f"--api-key-file {path}"
    raw = _read_stdin_line(stdin, flag) if path == "-" else _read_key_file(path, flag, warn)
    if len(raw) > MAX_KEY_BYTES:
        raise CommandError(f"{flag}: the first line is longer than {MAX_KEY_BYTES} bytes")
    try:
        key = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CommandError(f"{flag}: the first line is not UTF-8 text") from None
    if not key:
        raise CommandError(f"{flag}: no key (the first line is empty)")
    if not key.isprintable() or any(c.isspace() for c in key):
        raise CommandError(f"{flag}: the first line holds spaces or control characters")
    return key


def _read_stdin_line(stdin: TextIO, flag: str) -> bytes:
    if stdin.isatty():
        import getpass  # a terminal prompt: only when a key is asked for

        return getpass.getpass("API key: ").encode("utf-8")
    line = bytearray()
    try:
        while len(line) <= MAX_KEY_BYTES and (byte := os.read(stdin.fileno(), 1)) != b"\n":
            if not byte:
                break
            line += byte
    except OSError as exc:
        raise CommandError(f"{flag}: cannot read stdin: {exc.strerror or exc}") from exc
    return bytes(line)


def _read_key_file(path: str, flag: str, warn: Callable[[str], None]) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise CommandError(f"{flag}: cannot read it: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CommandError(f"{flag}: not a regular file")
        if sys.platform != "win32" and info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            warn(
                f"trio-session: warning: other users can read {path} (mode {mode:04o}); "
                f"chmod 600 {path}"
            )
        data = os.read(fd, MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise CommandError(f"{flag}: cannot read it: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    first, _, _ = data.partition(b"\n")
    return first


#: The name the SQLite store counts a key from pi's agent directory under (``auth list``
#: never shows it: the store is opened with it only for the length of a command).
AGENT_DIR_KEY = "pi agent directory"


def credential_store(
    provider: str, api_key: str | None, *, agent_dir_key: str | None = None
) -> CredentialStore | None:
    """Where keys come from: ``--api-key``/``--api-key-file``, else the credential file
    and the env variable (or pi's agent directory).

    The SQLite store (in the user data directory) holds ``trio-session auth add`` keys and
    counts the provider's environment variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
    ``GEMINI_API_KEY`` else ``GOOGLE_API_KEY``) as one more. With ``agent_dir_key`` (the
    key pi's auth.json, environment variable or models.json gives, ``--agent-dir``), that
    key is the one more instead, so a usage limit can still move to a stored key (R-17).
    If that file cannot be used, the one more key alone is used.
    """
    if provider == "faux":
        return None
    if api_key:
        return InMemoryCredentialStore(keys={provider: [api_key]})
    from .store._credentials_file import DEFAULT_ENV_VARS
    from .store._sqlite_credentials import SqliteCredentialStore

    environ: Mapping[str, str] = os.environ
    found = env_api_key(provider)
    if agent_dir_key:
        found = (AGENT_DIR_KEY, agent_dir_key)
        environ = {**os.environ, AGENT_DIR_KEY: agent_dir_key}
    env_vars = dict(DEFAULT_ENV_VARS)
    if found is not None:
        env_vars[provider] = found[0]
    try:
        return SqliteCredentialStore.open(env_vars=env_vars, environ=environ)
    except TrioSessionError as exc:
        print(f"trio-session: warning: credential store unusable ({exc})", file=sys.stderr)
        return InMemoryCredentialStore(keys={provider: [found[1]] if found else []})


@asynccontextmanager
async def open_credentials(
    provider: str, api_key: str | None, url: str | None, *, agent_dir_key: str | None = None
) -> AsyncIterator[CredentialStore | None]:
    """The command's credential store for the length of a block, closed on the way out.

    Without ``url`` (``--credentials`` / ``credentials.url``), ``credential_store``.
    With a Redis URL, a ``RedisCredentialStore`` whose keys are ``--api-key``'s, or
    else the SQLite store's keys and the provider's environment variable (or
    ``agent_dir_key``, as in ``credential_store``); Redis holds only their block state.

    Raises:
        TrioSessionError: ``url`` is not a Redis URL, or coredis is not installed.
    """
    if url is None:
        store = credential_store(provider, api_key, agent_dir_key=agent_dir_key)
        try:
            yield store
        finally:
            close = getattr(store, "close", None)  # the SQLite store's (not imported here)
            if callable(close):
                close()
        return
    from .store._credentials_file import DEFAULT_ENV_VARS
    from .store._redis_credentials import check_url, open_redis_credentials
    from .store._sqlite_credentials import SqliteCredentialStore

    check_url(url)
    env_vars: dict[str, str] = {}
    keys: list[str] = []
    if api_key:
        keys = [api_key]
    else:
        found = env_api_key(provider)
        env_vars = dict(DEFAULT_ENV_VARS)
        if found is not None:
            env_vars[provider] = found[0]
        local = (
            credential_store(provider, None, agent_dir_key=agent_dir_key)
            if provider != "faux"
            else None
        )
        if isinstance(local, SqliteCredentialStore):
            keys = list(local.keys(provider))
            local.close()
        elif isinstance(local, InMemoryCredentialStore):  # the file was unusable
            keys = [key for key in [await local.api_key(provider, "")] if key]
    async with open_redis_credentials(url, keys={provider: keys}, env_vars=env_vars) as store:
        yield store


# -- auth ---------------------------------------------------------------------------------------


def auth_add(provider: str, label: str | None, *, stdin: TextIO = sys.stdin) -> str:
    """Store a key read from the terminal (hidden) or one line of stdin.

    A provider name neither ours nor pi's is refused before the key is asked for.
    """
    from ._pi.config import BUILT_IN_PROVIDERS
    from .providers._models import PROVIDER_APIS

    known = sorted({*KEY_VARIABLES, *PROVIDER_APIS, *BUILT_IN_PROVIDERS})
    if provider not in known:
        import difflib  # only for a name nobody knows

        near = difflib.get_close_matches(provider, known, n=1)
        guess = f"; did you mean '{near[0]}'?" if near else ""
        raise CommandError(f"unknown provider '{provider}'{guess} (known: {', '.join(known)})")
    import getpass  # a terminal prompt: only when a key is asked for

    key = getpass.getpass(f"API key for {provider}: ") if stdin.isatty() else stdin.readline()
    key = key.strip()
    if not key:
        raise CommandError("no key given (type it at the prompt, or pipe it on stdin)")
    with _store() as store:
        info = store.add(provider, key, label=label)
    return f"added {info.provider} key {info.label} ({info.redacted})"


def auth_list() -> list[str]:
    """One line per credential: provider, position, label, redacted key, block state."""
    with _store() as store:
        infos = store.list()
    lines = []
    for info in infos:
        where = f"#{info.index}" if info.index is not None else "env"
        state = f"  blocked until {_when(info.blocked_until)}" if info.blocked_until else ""
        lines.append(f"{info.provider}  {where}  {info.label}  {info.redacted}{state}")
    return lines or ["no credentials (add one with: trio-session auth add PROVIDER)"]


def _when(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def auth_remove(provider: str, which: str) -> str:
    """Remove a key by label or by its index as ``auth list`` prints it (``#0``, or ``0``)."""
    index = which.removeprefix("#")
    with _store() as store:
        target: str | int = int(index) if index.isdigit() else which
        info = store.remove(provider, target)
    return f"removed {info.provider} key {info.label} ({info.redacted})"


def _store() -> SqliteCredentialStore:
    from .store._sqlite_credentials import SqliteCredentialStore

    try:
        return SqliteCredentialStore.open()
    except TrioSessionError as exc:
        raise CommandError(str(exc)) from exc
