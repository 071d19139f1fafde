"""Records of a session: its stats, its HTML export, its name and its fork points.

The public face on ``AgentSession`` of ``trio_session._stats``, ``trio_session._export``
and the session file's ``session_info`` entries.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .._events import SessionInfoChanged
from .._messages import AssistantMessage, TextContent
from .._stats import SessionStats, session_stats

if TYPE_CHECKING:
    from .._agent import Agent
    from ..providers._base import Model
    from .hub import EventHub
    from .journal import Journal


class RecordsPart:
    """``AgentSession``'s stats, export, name and fork points (a base class of the facade)."""

    if not TYPE_CHECKING:
        __slots__ = ()
    session_id: str
    _model: Model
    _system_prompt: str | None
    _agent: Agent
    _hub: EventHub
    _journal: Journal

    def stats(self) -> SessionStats:
        """Counts, token totals, cost and context use of the runtime context
        (the reference's ``get_session_stats``)."""
        file = self._journal.file
        return session_stats(
            self._agent.messages,
            session_id=self.session_id,
            session_file=str(file.path) if file is not None else None,
            context_window=self._model.context_window,
        )

    def last_assistant_text(self) -> str | None:
        """The text of the last assistant message in the runtime context, trimmed.

        As the reference: an aborted message with no content is skipped; ``None`` when
        there is no assistant message or its text is empty.
        """
        for message in reversed(self._agent.messages):
            if not isinstance(message, AssistantMessage):
                continue
            if message.stop_reason == "aborted" and not message.content:
                continue
            text = "".join(p.text for p in message.content if isinstance(p, TextContent))
            return text.strip() or None
        return None

    async def export_html(self, path: str | Path | None = None) -> Path:
        """Write the whole history as one self-contained HTML page; return its path.

        Args:
            path: where to write it; by default ``trio-session-<session file name or
                id>.html`` in the current directory.
        """
        from .._export import default_export_path, render_html, write_html  # when asked

        file = self._journal.file
        target = (
            Path(path)
            if path is not None
            else default_export_path(self.session_id, file.path if file is not None else None)
        )
        page = render_html(
            self._journal.messages,
            session_id=self.session_id,
            model=f"{self._model.provider}/{self._model.id}",
            system_prompt=self._system_prompt,
        )
        return await write_html(target, page)

    @property
    def session_file(self) -> Path | None:
        """The path of the session file, ``None`` if the session keeps none."""
        return self._journal.file.path if self._journal.file is not None else None

    @property
    def session_name(self) -> str | None:
        """The session's display name (the last ``session_info`` entry); ``None`` if unset."""
        return self._journal.name

    def set_session_name(self, name: str) -> None:
        """Set the display name (trimmed; an empty name clears it).

        With a session file a ``session_info`` entry is staged, written with the
        next flush (the next prompt, or closing the session).

        Args:
            name: the display name; blank clears it.
        """
        name = name.strip()
        if self._journal.file is not None:
            self._journal.file.append_session_info_nowait(name)
        self._journal.name = name or None
        self._hub.emit(SessionInfoChanged(name=self._journal.name))

    def fork_messages(self) -> list[tuple[str, str]]:
        """``(entry id, text)`` of every user message of the session file, in file order.

        The reference's ``getUserMessagesForForking``: the messages a fork can start
        before. Empty without a session file (there are no entry ids to name).
        """
        if self._journal.file is None:
            return []
        return self._journal.file.user_messages()
