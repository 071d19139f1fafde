"""What the prompt controller needs from the session, declared here as Protocols.

The session's collaborators implement them (``Journal``, ``Compaction``,
``SessionObserver``, ``EventHub``); nothing in this folder imports the session.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

from .._core.events import SessionEvent
from .._core.messages import Message, UserMessage


class Deliver(Protocol):
    """Where a session's events go (its ``EventHub``)."""

    def emit(self, event: SessionEvent) -> None:
        """Deliver ``event`` to every listener, synchronously."""
        ...


class PromptJournal(Protocol):
    """What a prompt needs of the session's history (its ``Journal``)."""

    @property
    def file(self) -> object | None:
        """The session file, if the session keeps one (nothing to write without it)."""
        ...

    def begin(self) -> None:
        """A prompt (or a manual compaction) begins: a failed write is reported anew."""
        ...

    async def stage_prompt(self, user: UserMessage) -> None:
        """Put the prompt on disk before its request goes out (nothing without a file)."""
        ...

    def flush_pending(self) -> None:
        """Add what waited for the prompt's end (bash results) to the context."""
        ...

    async def flush_at_end(self) -> None:
        """Write what is staged as the prompt ends (nothing after a failed write)."""
        ...

    def omit(self, message: Message) -> Mapping[str, Any] | None:
        """Stage a ``context_edit`` leaving ``message`` out of later context (R-56e);
        the entry as written, or ``None`` without a file or an entry for it."""
        ...


class Recovery(Protocol):
    """The overflow path's compaction (the session's ``Compaction``)."""

    async def compact(self, reason: Literal["overflow"], *, will_retry: bool) -> object | None:
        """Compact the runtime context; ``None`` when there was nothing to remove."""
        ...

    def can_compact(self, *, without_last: bool) -> bool:
        """Whether compacting would find anything to remove (R-56a), asked before
        ``agent_end``; ``without_last``: once the last message has left the context."""
        ...


class PromptWatcher(Protocol):
    """The session's observer, as a prompt sees it: one span per prompt."""

    def prompt(self) -> AbstractContextManager[object]:
        """The prompt's span (a no-op without OpenTelemetry)."""
        ...

    def prompt_aborted(self) -> None:
        """The prompt was cancelled: its span says so."""
        ...
