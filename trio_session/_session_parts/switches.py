"""The session's switches: auto-retry and auto-compaction on or off, the store's status,
whether a request waits for its rate-limit permit.

``set_auto_retry_enabled`` and ``set_auto_compaction_enabled`` write the setting (and
the settings file it came from, R-37) and record the change in the session file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._agent import Agent
    from .._settings import SettingsStore
    from ..store._credentials import CredentialStore
    from .journal import Journal


class SwitchesPart:
    """``AgentSession``'s switches (a base class of the facade)."""

    if not TYPE_CHECKING:
        __slots__ = ()
    _settings: SettingsStore
    _credentials: CredentialStore | None
    _journal: Journal
    _agent: Agent

    @property
    def is_rate_limited(self) -> bool:
        """Whether a request waits for its ``rateLimit`` permit now (R-69)."""
        gate = self._agent.rate_gate
        return gate is not None and gate.waiting

    @property
    def credential_store_status(self) -> str | None:
        """The credential store's ``status`` when it reports one: a Redis store says
        ``"redis"``, or ``"local-fallback"`` while Redis cannot be reached."""
        status = getattr(self._credentials, "status", None)
        return status if isinstance(status, str) else None

    @property
    def auto_retry_enabled(self) -> bool:
        """``retry.enabled`` (R-37)."""
        return self._settings.current.retry.enabled

    def set_auto_retry_enabled(self, enabled: bool) -> None:
        """Write ``retry.enabled`` (R-37); applies from the next error on.

        If the value came from a settings file, the file is updated too (a small
        atomic write, done before this returns); the session file records the change.

        Args:
            enabled: whether a retryable error starts a retry chain.
        """
        self._set_setting("retry.enabled", enabled)

    @property
    def auto_compaction_enabled(self) -> bool:
        """``compaction.enabled``."""
        return self._settings.current.compaction.enabled

    def set_auto_compaction_enabled(self, enabled: bool) -> None:
        """Write ``compaction.enabled`` (R-50), like ``set_auto_retry_enabled``.

        Args:
            enabled: whether a context overflow is compacted and retried.
        """
        self._set_setting("compaction.enabled", enabled)

    def _set_setting(self, key: str, value: Any) -> None:
        self._settings.set_and_persist(key, value)
        if self._journal.file is not None:
            self._journal.file.append_settings_change_nowait(key, value)
