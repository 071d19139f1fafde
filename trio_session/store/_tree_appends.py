"""The entries of a session file that annotate or steer its tree: ``TreeAppends``.

pi's ``SessionManager`` writes these beside the run's own records (messages,
compactions, settings and model changes, which ``._session_file`` appends): an
extension's entries (``custom``, ``custom_message``), a ``label`` on an entry, a
``context_edit`` of an entry's part in later context, and the ``branch_summary`` of
the branch left when ``SessionFile.branch`` moved the leaf. ``SessionFile`` has these
methods from ``TreeAppends``; they stage through its ``_stage`` as every append does,
so ids, ``parentId`` and durability are the same.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core.messages import UserContent
from ._entries import (
    BranchSummaryEntry,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    HistoryEntry,
    HistoryError,
    LabelEntry,
    SystemMessageEntry,
)

__all__ = ["TreeAppends"]


class TreeAppends:
    """``SessionFile``'s appends of pi's tree entries (custom, labels, edits, branches)."""

    __slots__ = ()

    if TYPE_CHECKING:  # what SessionFile gives these methods
        path: Path
        _ids: set[str]
        _last_id: str | None

        def _stage(
            self, make: Callable[..., HistoryEntry], *, at: float | None = None, **fields: Any
        ) -> str: ...

        def _last_staged(self) -> dict[str, Any]: ...

    def append_custom_nowait(self, custom_type: str, data: Any = None) -> str:
        """Stage a ``custom`` entry: an extension's state, not part of the context.

        Args:
            custom_type: the extension's name for the kind of entry.
            data: the state to keep, as JSON-compatible data.
        """
        return self._stage(CustomEntry, custom_type=custom_type, data=data)

    def append_custom_message_nowait(
        self,
        custom_type: str,
        content: str | tuple[UserContent, ...],
        *,
        display: bool = True,
        details: Any = None,
    ) -> str:
        """Stage a ``custom_message`` entry: an extension's message, part of the context.

        Args:
            custom_type: the extension's name for the kind of message.
            content: the message: a string, or text and image parts.
            display: whether a UI shows it.
            details: extension data kept beside the message.
        """
        return self._stage(
            CustomMessageEntry,
            custom_type=custom_type,
            content=content,
            display=display,
            details=details,
        )

    def append_label_nowait(self, target_id: str, label: str | None) -> str:
        """Stage a ``label`` entry on ``target_id`` (``None`` or empty clears it).

        Args:
            target_id: the entry to label.
            label: the label; ``None`` or empty clears it.
        """
        if target_id not in self._ids:
            msg = f"session file {self.path} has no entry {target_id!r} to label"
            raise HistoryError(msg, path=self.path)
        return self._stage(LabelEntry, target_id=target_id, label=label or None)

    def append_context_edit_nowait(
        self, target_id: str, replacement: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Stage a ``context_edit`` entry: pi 1.6.0's edit of ``target_id``'s part in later
        context (``replacement`` ``None`` leaves it out; the entry itself stays).

        Args:
            target_id: the message entry the edit is about.
            replacement: ``{"content": ...}`` to replace its content, ``None`` to omit it.

        Returns:
            The entry as it will be written (its JSON object).

        Raises:
            HistoryError: the file has no entry ``target_id``.
        """
        if target_id not in self._ids:
            msg = f"session file {self.path} has no entry {target_id!r} to edit"
            raise HistoryError(msg, path=self.path)
        self._stage(ContextEditEntry, target_id=target_id, replacement=replacement)
        return self._last_staged()

    def append_system_message_nowait(self, message: dict[str, Any]) -> str:
        """Stage pi 1.6.0's system prompt as a ``message`` entry of role ``system``.

        Args:
            message: the message's JSON object (``role``, ``content``, ``sections``,
                ``toolsAdded``, ``timestamp``), written as it is.
        """
        return self._stage(SystemMessageEntry, message=message)

    def append_branch_summary_nowait(
        self, summary: str, *, details: Any = None, from_hook: bool | None = None
    ) -> str:
        """Stage a ``branch_summary`` entry at the leaf (after ``branch``), as the reference does.

        Its ``fromId`` is the leaf (``"root"`` at the root).

        Args:
            summary: the summary of the branch that was left.
            details: data kept beside the summary (the reference's ``details``).
            from_hook: the reference's ``fromHook``; left out when ``None``.
        """
        return self._stage(
            BranchSummaryEntry,
            from_id=self._last_id if self._last_id is not None else "root",
            summary=summary,
            details=details,
            from_hook=from_hook,
        )
