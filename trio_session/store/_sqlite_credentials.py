"""Credentials in one SQLite file, shared by every process that opens it (R-17).

``SqliteCredentialStore`` implements ``._credentials.CredentialStore``
with exactly the behaviour of ``._credentials.InMemoryCredentialStore``,
but keeps keys, usage-limit blocks and session stickiness in a file, so that one
process's usage limit stops every process using the same file from hammering
that key:

* A provider's credentials are its stored keys, in the order they were added,
  then the provider's environment variable (``OPENAI_API_KEY`` …) if it is set
  and is not one of the stored keys.
* A session sticks to one credential. On first use it gets the first free one;
  if all are blocked, the one that unblocks first.
* ``SqliteCredentialStore.mark_usage_limit_reached`` blocks the session's
  credential until ``now + retry_after_ms`` (60 s if no hint), moves the session
  to the next choice by the same rule, and returns whether that choice is another,
  unblocked credential (then the retry goes out at once, ``delayMs: 0``).

The file
--------
One SQLite database in WAL mode, ``<user data dir>/credentials.sqlite3`` by
default (on Linux ``~/.local/share/trio-session/credentials.sqlite3``). It is
created with ``os.open(..., 0o600)`` before SQLite opens it (SQLite then gives
its ``-wal`` and ``-shm`` files the same mode), and an existing file that group
or others can read is refused, as ``ssh`` refuses a loose key file. Tables:

```text
credentials(id, provider, label, key, position)   the stored keys
blocks(provider, credential, blocked_until)       usage-limit blocks, epoch seconds
sessions(provider, session_id, credential, ...)   which credential a session uses
```

A credential is identified by a fingerprint of its key (the first 16 hex
digits of its SHA-256), the same for a stored key and an environment key, so a
block follows the key itself: removing and re-adding a key, or having the
same key in two processes' environments, keeps the block. Every change runs in
a ``BEGIN IMMEDIATE`` transaction, so two processes never interleave a
read-decide-write. Sessions untouched for ``SESSION_TTL`` are forgotten
(they then choose afresh, as a new session would).

Keys never leave this module except through ``api_key``: ``list`` shows them
redacted (``sk-…wxyz``), and no error message contains one.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path

import attrs
import trio

from .._core.classes import define
from ._credentials import DEFAULT_BLOCK_MS, redact
from ._credentials_file import (
    DEFAULT_ENV_VARS,
    SCHEMA,
    SCHEMA_VERSION,
    CredentialInfo,
    CredentialStoreError,
    check_text,
    create_private,
    default_credentials_path,
    fingerprint,
)

#: A session whose credential was not chosen or used for this long is forgotten.
SESSION_TTL = 30 * 24 * 3600.0
#: How stale a session's ``used_at`` may get before ``api_key`` refreshes it.
_TOUCH_AFTER = 3600.0


@define(eq=False)
class SqliteCredentialStore:
    """A ``._credentials.CredentialStore`` in a SQLite file, shared between processes.

    Open one with ``open`` (blocking) or ``open_sqlite_credentials``
    (async). The async protocol methods run their SQLite work in
    ``trio.to_thread.run_sync``; the management methods (``add``,
    ``list``, ``remove``) block, for the command line and setup code.

    Args:
        path: the database file.
        env_vars: provider → environment variable holding one more key.
        environ: where environment variables are read, at each call.
        clock: epoch seconds; ``time.time`` unless given. The async methods call
            it in the Trio thread, so ``trio.current_time`` works in tests.
        connection: the open database (``open`` makes it, with the tables); the store closes it.
    """

    path: Path
    _connection: sqlite3.Connection = attrs.field(alias="connection", repr=False)
    _env_vars: Mapping[str, str] = attrs.field(default=DEFAULT_ENV_VARS, alias="env_vars")
    _environ: Mapping[str, str] = attrs.field(default=os.environ, alias="environ", repr=False)
    _clock: Callable[[], float] = attrs.field(default=time.time, alias="clock")
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False)
    _closed: bool = attrs.field(default=False, init=False)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        env_vars: Mapping[str, str] = DEFAULT_ENV_VARS,
        environ: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.time,
        timeout: float = 10.0,
    ) -> SqliteCredentialStore:
        """Open (creating if needed) the store at ``path``; blocking.

        Args:
            path: the file; ``default_credentials_path`` if omitted.
            env_vars: provider → environment variable (``DEFAULT_ENV_VARS``).
            environ: the environment to read those variables from.
            clock: epoch seconds.
            timeout: seconds to wait for another process's transaction.

        Raises:
            CredentialStoreError: the file cannot be created, is readable by
                others, is not a SQLite database, or has a newer schema.
        """
        path = Path(path) if path is not None else default_credentials_path()
        create_private(path)
        try:
            uri = path.absolute().as_uri() + "?mode=rw"  # never let SQLite create it
            connection = sqlite3.connect(
                uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            msg = f"cannot open credential store {path}: {exc}"
            raise CredentialStoreError(msg, path=path) from exc
        store = cls(path, connection, env_vars=env_vars, environ=environ, clock=clock)
        try:
            store._setup()
        except BaseException:
            connection.close()
            raise
        return store

    def _setup(self) -> None:
        with self._guard() as db:
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":  # pragma: no cover - only on file systems without shared memory
            msg = f"credential store {self.path} cannot use WAL mode (journal mode is {mode})"
            raise CredentialStoreError(msg, path=self.path)
        with self._transaction() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version > SCHEMA_VERSION:
                msg = (
                    f"credential store {self.path} has schema version {version}, newer than "
                    f"this version of trio_session understands ({SCHEMA_VERSION})"
                )
                raise CredentialStoreError(msg, path=self.path)

    # -- plumbing ---------------------------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[sqlite3.Connection]:
        """The connection, used by one thread at a time; SQLite errors become ours."""
        with self._lock:
            if self._closed:
                msg = f"credential store {self.path} is closed"
                raise CredentialStoreError(msg, path=self.path)
            try:
                yield self._connection
            except sqlite3.Error as exc:
                name = getattr(exc, "sqlite_errorname", "")
                if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
                    msg = f"credential store {self.path} is not a usable SQLite database: {exc}"
                elif name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
                    msg = f"credential store {self.path} is locked by another process ({exc})"
                else:
                    msg = f"credential store {self.path} failed: {exc}"
                raise CredentialStoreError(msg, path=self.path) from exc

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``: one writer at a time, across processes."""
        with self._guard() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                raise

    def _env_key(self, provider: str) -> str | None:
        variable = self._env_vars.get(provider)
        value = self._environ.get(variable, "").strip() if variable else ""
        return value or None

    def _candidates(self, db: sqlite3.Connection, provider: str) -> builtins.list[tuple[str, str]]:
        """``(credential id, key)`` in order of preference: stored keys, then the env key."""
        rows = db.execute(
            "SELECT key FROM credentials WHERE provider = ? ORDER BY position, id", (provider,)
        ).fetchall()
        found = [(fingerprint(key), key) for (key,) in rows]
        env = self._env_key(provider)
        if env is not None and all(key != env for _, key in found):
            found.append((fingerprint(env), env))
        return found

    @staticmethod
    def _blocks(db: sqlite3.Connection, provider: str) -> dict[str, float]:
        rows = db.execute(
            "SELECT credential, blocked_until FROM blocks WHERE provider = ?", (provider,)
        ).fetchall()
        return dict(rows)

    def _pick(
        self, db: sqlite3.Connection, provider: str, ids: builtins.list[str], now: float
    ) -> str:
        """The first free credential; if all are blocked, the one that unblocks first."""
        blocks = self._blocks(db, provider)
        until = [blocks.get(i, now) for i in ids]
        for i, t in zip(ids, until, strict=True):
            if t <= now:
                return i
        return ids[min(range(len(ids)), key=until.__getitem__)]

    def _current(
        self,
        db: sqlite3.Connection,
        provider: str,
        session_id: str,
        ids: builtins.list[str],
        now: float,
    ) -> str:
        """The session's sticky credential; on first use (or if it is gone), a new pick."""
        row = db.execute(
            "SELECT credential, used_at FROM sessions WHERE provider = ? AND session_id = ?",
            (provider, session_id),
        ).fetchone()
        if row is not None and row[0] in ids:
            if now - row[1] > _TOUCH_AFTER:
                self._stick(db, provider, session_id, row[0], now)
            return str(row[0])
        choice = self._pick(db, provider, ids, now)
        self._stick(db, provider, session_id, choice, now)
        db.execute("DELETE FROM sessions WHERE used_at < ?", (now - SESSION_TTL,))
        return choice

    @staticmethod
    def _stick(
        db: sqlite3.Connection, provider: str, session_id: str, credential: str, now: float
    ) -> None:
        db.execute(
            "INSERT OR REPLACE INTO sessions (provider, session_id, credential, used_at) "
            "VALUES (?, ?, ?, ?)",
            (provider, session_id, credential, now),
        )

    # -- the CredentialStore protocol -------------------------------------------------

    def _api_key(self, provider: str, session_id: str, now: float) -> str | None:
        with self._transaction() as db:
            candidates = self._candidates(db, provider)
            if not candidates:
                return None
            ids = [i for i, _ in candidates]
            current = self._current(db, provider, session_id, ids, now)
            return dict(candidates)[current]

    async def api_key(self, provider: str, session_id: str) -> str | None:
        """The session's sticky key; on first use, the first free one (R-17).

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
        """
        now = self._clock()
        return await trio.to_thread.run_sync(self._api_key, provider, session_id, now)

    def _mark(self, provider: str, session_id: str, wait_ms: int, now: float) -> bool:
        with self._transaction() as db:
            candidates = self._candidates(db, provider)
            if not candidates:
                return False
            ids = [i for i, _ in candidates]
            current = self._current(db, provider, session_id, ids, now)
            db.execute("DELETE FROM blocks WHERE blocked_until <= ?", (now,))
            db.execute(
                "INSERT OR REPLACE INTO blocks (provider, credential, blocked_until) "
                "VALUES (?, ?, ?)",
                (provider, current, now + wait_ms / 1000),
            )
            choice = self._pick(db, provider, ids, now)
            self._stick(db, provider, session_id, choice, now)
            return choice != current and self._blocks(db, provider).get(choice, now) <= now

    async def mark_usage_limit_reached(
        self,
        provider: str,
        session_id: str,
        *,
        retry_after_ms: int | None = None,
        base_url: str | None = None,
    ) -> bool:
        """Block the session's key for ``retry_after_ms`` (default 60 s); move to a free one.

        ``base_url`` is accepted for the protocol and not used: blocks are per
        provider and key, as in ``._credentials.InMemoryCredentialStore``.

        Args:
            provider: the provider's name (``"openai"``).
            session_id: the session asking.
            retry_after_ms: how long to block it, in milliseconds; 60 s if ``None``.
            base_url: the base URL the request went to; not used.

        Returns:
            Whether the session now uses another credential that is not blocked (R-17).
        """
        now = self._clock()
        wait_ms = DEFAULT_BLOCK_MS if retry_after_ms is None else retry_after_ms
        return await trio.to_thread.run_sync(self._mark, provider, session_id, wait_ms, now)

    # -- management (blocking) --------------------------------------------------------

    def add(self, provider: str, key: str, label: str | None = None) -> CredentialInfo:
        """Store another key for ``provider``, after its existing ones.

        Args:
            provider: the provider name (``"openai"``).
            key: the API key.
            label: a name to manage it by; ``key1``, ``key2`` … if omitted. Not a
                number, so that a number always means an index.

        Raises:
            CredentialStoreError: an invalid provider, key or label, a label the
                provider already has, or a key already stored for it.
        """
        check_text("provider", provider, path=self.path)
        check_text("API key", key, path=self.path)
        if any(c.isspace() for c in key):
            msg = "API key must not contain spaces or line breaks"
            raise CredentialStoreError(msg, path=self.path)
        if label is not None:
            check_text("label", label, path=self.path)
            if label.isdigit():
                msg = f"label must not be a number (numbers select keys by index), not {label!r}"
                raise CredentialStoreError(msg, path=self.path)
        with self._transaction() as db:
            rows = db.execute(
                "SELECT label, key FROM credentials WHERE provider = ?", (provider,)
            ).fetchall()
            labels = {row[0] for row in rows}
            for existing_label, existing_key in rows:
                if existing_key == key:
                    msg = f"this key is already stored for {provider} as {existing_label!r}"
                    raise CredentialStoreError(msg, path=self.path)
            if label is None:
                label = next(f"key{n}" for n in range(1, len(rows) + 2) if f"key{n}" not in labels)
            elif label in labels:
                msg = f"{provider} already has a key labelled {label!r}"
                raise CredentialStoreError(msg, path=self.path)
            db.execute(
                "INSERT INTO credentials (provider, label, key, position) VALUES (?, ?, ?, "
                "(SELECT coalesce(max(position), -1) + 1 FROM credentials WHERE provider = ?))",
                (provider, label, key, provider),
            )
        return CredentialInfo(
            provider=provider, label=label, index=len(rows), redacted=redact(key), source="store"
        )

    def list(self, provider: str | None = None) -> tuple[CredentialInfo, ...]:
        """Every credential (of ``provider``, or all), keys redacted, in order of use.

        A provider's stored keys come first, then its environment variable if set
        and not a duplicate. Blocked credentials say until when.

        Args:
            provider: the provider whose credentials to list; every provider's if ``None``.
        """
        now = self._clock()
        with self._guard() as db:
            db.execute("BEGIN")
            try:
                rows = db.execute(
                    "SELECT DISTINCT provider FROM credentials ORDER BY provider"
                ).fetchall()
                providers = sorted({p for (p,) in rows} | self._env_providers())
                if provider is not None:
                    providers = [provider]
                out: builtins.list[CredentialInfo] = []
                for name in providers:
                    out.extend(self._infos(db, name, now))
            finally:
                db.execute("COMMIT")
        return tuple(out)

    def _env_providers(self) -> set[str]:
        return {p for p in self._env_vars if self._env_key(p) is not None}

    def _infos(self, db: sqlite3.Connection, provider: str, now: float) -> Iterator[CredentialInfo]:
        blocks = self._blocks(db, provider)
        rows = db.execute(
            "SELECT label, key FROM credentials WHERE provider = ? ORDER BY position, id",
            (provider,),
        ).fetchall()
        for index, (label, key) in enumerate(rows):
            until = blocks.get(fingerprint(key))
            yield CredentialInfo(
                provider=provider,
                label=label,
                index=index,
                redacted=redact(key),
                source="store",
                blocked_until=until if until is not None and until > now else None,
            )
        env = self._env_key(provider)
        if env is not None and all(key != env for _, key in rows):
            until = blocks.get(fingerprint(env))
            yield CredentialInfo(
                provider=provider,
                label=self._env_vars[provider],
                index=None,
                redacted=redact(env),
                source="env",
                blocked_until=until if until is not None and until > now else None,
            )

    def remove(self, provider: str, label_or_index: str | int) -> CredentialInfo:
        """Delete a stored key, chosen by label or by 0-based index (as ``list`` shows).

        Sessions that used it choose again on their next request. The
        environment variable's key cannot be removed here.

        Args:
            provider: the provider's name (``"openai"``).
            label_or_index: the key's label, or its 0-based index among the stored keys.

        Raises:
            CredentialStoreError: no such label or index for ``provider``.
        """
        with self._transaction() as db:
            rows = db.execute(
                "SELECT id, label, key FROM credentials WHERE provider = ? ORDER BY position, id",
                (provider,),
            ).fetchall()
            if isinstance(label_or_index, int) and not isinstance(label_or_index, bool):
                if not 0 <= label_or_index < len(rows):
                    msg = (
                        f"{provider} has no stored key at index {label_or_index} "
                        f"(it has {len(rows)})"
                    )
                    raise CredentialStoreError(msg, path=self.path)
                index = label_or_index
            else:
                labels = [row[1] for row in rows]
                if label_or_index not in labels:
                    known = ", ".join(repr(label) for label in labels) or "none"
                    msg = (
                        f"{provider} has no stored key labelled {label_or_index!r} "
                        f"(labels: {known})"
                    )
                    raise CredentialStoreError(msg, path=self.path)
                index = labels.index(label_or_index)
            row_id, label, key = rows[index]
            db.execute("DELETE FROM credentials WHERE id = ?", (row_id,))
        return CredentialInfo(
            provider=provider, label=label, index=index, redacted=redact(key), source="store"
        )

    def keys(self, provider: str) -> tuple[str, ...]:
        """``provider``'s keys in order of use — stored, then the environment's — for
        another store that keeps only block state (``RedisCredentialStore``).

        Args:
            provider: the provider's name (``"openai"``).
        """
        with self._guard() as db:
            return tuple(key for _, key in self._candidates(db, provider))

    def blocked_until(self, provider: str, key: str) -> float | None:
        """When ``key`` of ``provider`` unblocks (epoch seconds), if it is blocked now.

        Args:
            provider: the provider's name (``"openai"``).
            key: the key itself.
        """
        now = self._clock()
        with self._guard() as db:
            until = self._blocks(db, provider).get(fingerprint(key))
        return until if until is not None and until > now else None

    # -- lifetime ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the database connection. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._connection.close()

    def __enter__(self) -> SqliteCredentialStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@asynccontextmanager
async def open_sqlite_credentials(
    path: str | os.PathLike[str] | None = None,
    *,
    env_vars: Mapping[str, str] = DEFAULT_ENV_VARS,
    environ: Mapping[str, str] = os.environ,
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[SqliteCredentialStore]:
    """Open the store for the length of a block, opening and closing in a worker thread.

    Args:
        path: the database file; ``default_credentials_path`` if omitted.
        env_vars: provider → environment variable holding one more key.
        environ: where environment variables are read, at each call.
        clock: epoch seconds; ``time.time`` unless given.

    Example:
        ```python
        async with open_sqlite_credentials() as credentials:
            async with open_session(provider, model, credentials=credentials) as session:
                ...
        ```
    """
    opener = partial(
        SqliteCredentialStore.open, path, env_vars=env_vars, environ=environ, clock=clock
    )
    store = await trio.to_thread.run_sync(opener)
    try:
        yield store
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store.close)
