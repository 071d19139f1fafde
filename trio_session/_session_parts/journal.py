"""The session's history: every message in order, and the session file's writes.

``history`` is what happened (failed attempts included, R-20, R-51); the runtime
context the model sees is the agent's. With a session file, a prompt is on disk before
its request goes out, and a run's messages before the next request or backoff sleep.
A failed write is reported once per prompt (``history_write_failed``) and raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._classes import define
from .._errors import HistoryError
from .._events import HistoryWriteFailed
from .._messages import AssistantMessage, BashExecutionMessage, Message, UserMessage
from .hub import EventHub

if TYPE_CHECKING:
    from ..store._loaded import LoadedSession
    from ..store._session_file import SessionFile


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class Journal:
    """One session's history and its file (``PromptJournal`` for the controller).

    Attributes:
        file: the session file entries are appended to, if any.
        hub: where ``history_write_failed`` goes.
        context: the agent's runtime context (bash results join it).
        messages: every message of the session, in order.
        name: the session's display name (its last ``session_info`` entry).
        write_failed: a write failed during the current prompt (reported once).
        pending: bash results that came while a prompt ran; a list only once there is one.
    """

    file: SessionFile | None
    hub: EventHub
    context: list[Message]
    messages: list[Message] = attrs.field(factory=list, init=False)
    name: str | None = attrs.field(default=None, init=False)
    write_failed: bool = attrs.field(default=False, init=False)
    pending: list[BashExecutionMessage] | None = attrs.field(default=None, init=False)

    def resume(self, loaded: LoadedSession) -> None:
        """Resuming ``loaded``: the history is the branch ending at the file's leaf; the
        context is what the reference rebuilds from it (compaction summary, kept messages,
        branch summaries, custom messages), without retried errors (R-20)."""
        from ..store._loaded import runtime_context  # a file was read: storage is loaded

        self.messages.extend(loaded.branch_messages)
        self.context.extend(runtime_context(loaded))
        self.name = loaded.session_name

    def record(self, message: Message) -> None:
        """A ``message_end``: the message joins the history and is staged for the file.

        Args:
            message: the message just ended.
        """
        self.messages.append(message)
        file = self.file
        if file is not None and file.entry_id_of(message) is None:  # prompts are in already
            file.append_message_nowait(message)

    def record_bash(self, message: BashExecutionMessage) -> None:
        """A ``bash`` result joins the context and the history, and is staged for the file.

        Args:
            message: the command's result.
        """
        self.context.append(message)
        self.messages.append(message)
        if self.file is not None:
            self.file.append_message_nowait(message)

    def hold(self, message: BashExecutionMessage) -> None:
        """Keep a ``bash`` result that came while a prompt ran, for ``flush_pending``.

        Args:
            message: the command's result.
        """
        if self.pending is None:
            self.pending = []
        self.pending.append(message)

    def flush_pending(self) -> None:
        """The prompt is over: the results it held join (the reference's
        ``_flushPendingBashMessages``)."""
        pending, self.pending = self.pending, None
        for message in pending or ():
            self.record_bash(message)

    async def stage_prompt(self, user: UserMessage) -> None:
        """Put the prompt on disk before its request goes out.

        The write finishes even if an abort comes meanwhile (the run then ends
        aborted, as it would). If it fails, the prompt is taken back: it is not
        sent, so it is not kept either, and ``prompt()`` raises.

        Args:
            user: the prompt's message.
        """
        file = self.file
        if file is None:
            return
        entry_id = file.append_message_nowait(user)
        try:
            with trio.CancelScope(shield=True):
                await self.flush()
        except HistoryError:
            file.retract(entry_id)
            raise

    async def flush(self) -> None:
        """Put staged entries on disk: before every request, and before every ``agent_end``.

        A failed write is reported once per prompt (``history_write_failed``) and
        raised: the prompt ends, because going on would send the model a context
        that is not on disk.
        """
        file = self.file
        if file is None or file.closed:
            return
        try:
            await file.flush()
        except HistoryError as exc:
            if not self.write_failed:
                self.write_failed = True
                self.hub.emit(HistoryWriteFailed(path=str(file.path), error=str(exc)))
            raise

    async def flush_at_end(self) -> None:
        """The prompt is over: write what is staged, unless a write already failed."""
        if self.file is not None and not self.write_failed:
            await self.flush()

    def omit(self, message: Message) -> dict[str, Any] | None:
        """Stage a ``context_edit`` leaving ``message`` out of later context (R-56e).

        Args:
            message: a message of the runtime context that has an entry in the file.

        Returns:
            The entry as it will be written, or ``None`` without a file or an entry.
        """
        file = self.file
        entry_id = file.entry_id_of(message) if file is not None else None
        if file is None or entry_id is None:
            return None
        return file.append_context_edit_nowait(entry_id)

    def last_assistant(self) -> AssistantMessage:
        """The last assistant message of the history (a prompt always produces one)."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return message
        msg = "no assistant message"  # pragma: no cover - a prompt always produces one
        raise AssertionError(msg)
