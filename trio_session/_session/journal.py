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

from .._core.classes import define
from .._core.errors import HistoryError
from .._core.events import HistoryWriteFailed, MessageEnd, SessionEvent
from .._core.messages import AssistantMessage, BashExecutionMessage, Message, UserMessage
from .hub import EventHub

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._agent.tools import Tool
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
        system: pi 1.6.0's system message (its JSON object, ``retry.profile: "pi-1.6"``)
            to write before the next prompt, once; ``None`` when there is none to write.
        recorded_system: the system prompt the resumed file's branch holds, as pi's
            system messages render it; ``None`` if it holds none.
    """

    file: SessionFile | None
    hub: EventHub
    context: list[Message]
    messages: list[Message] = attrs.field(factory=list, init=False)
    name: str | None = attrs.field(default=None, init=False)
    write_failed: bool = attrs.field(default=False, init=False)
    pending: list[BashExecutionMessage] | None = attrs.field(default=None, init=False)
    system: dict[str, Any] | None = attrs.field(default=None, init=False)
    recorded_system: str | None = attrs.field(default=None, init=False)

    def resume(self, loaded: LoadedSession) -> None:
        """Resuming ``loaded``: the history is the branch ending at the file's leaf; the
        context is what the reference rebuilds from it (compaction summary, kept messages,
        branch summaries, custom messages), without retried errors (R-20)."""
        from ..store._entries import SystemMessageEntry
        from ..store._loaded import runtime_context  # a file was read: storage is loaded

        self.messages.extend(loaded.branch_messages)
        self.context.extend(runtime_context(loaded))
        self.name = loaded.session_name
        systems = [e.message for e in loaded.branch() if isinstance(e, SystemMessageEntry)]
        self.recorded_system = system_text(systems) if systems else None

    def deliver(self, event: SessionEvent) -> None:
        """The agent's events (its ``emit``): delivered, and each ``message_end``
        recorded in the history.

        Args:
            event: the agent's event.
        """
        self.hub.emit(event)
        if isinstance(event, MessageEnd):
            self.record(event.message)

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

    def keep_system(self, prompt: str | None, tools: Sequence[Tool]) -> str | None:
        """Under ``retry.profile: "pi-1.6"``: the system prompt to send, kept as pi 1.6.0
        keeps it — in the session file, as a ``system`` message before the first prompt,
        with the tools it declares (``toolsAdded``).

        A file that holds one already keeps it: its prompt is the one sent (pi's, in a
        resumed pi session). Otherwise ``prompt`` is, and is written before the next
        prompt (``stage_prompt``).

        Args:
            prompt: the session's own system prompt.
            tools: the tools the session declares.
        """
        if self.recorded_system is not None:
            return self.recorded_system
        if prompt:
            self.system = {"role": "system", "content": prompt}
            if tools:
                self.system["toolsAdded"] = [
                    {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
                    for t in tools
                ]
        return prompt

    def begin(self) -> None:
        """A prompt (or a manual compaction) begins: a failed write is reported anew."""
        self.write_failed = False

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
        if self.system is not None:  # pi-1.6: the prompt is in the file before the first
            system, self.system = self.system, None
            file.append_system_message_nowait({**system, "timestamp": user.timestamp})
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


def system_text(messages: list[dict[str, Any]]) -> str:
    """The system prompt pi 1.6.0's system messages make, as pi renders it for a request
    (``getCurrentSystemMessage``, then ``getSystemMessageText``): every message's text
    content, then the sections — a later message's section replaces an earlier one of
    that name in its place, ``null`` removes it — each part apart by a blank line."""
    content: list[str] = []
    sections: dict[str, str] = {}
    for message in messages:
        text = _text_of(message.get("content"))
        if text:
            content.append(text)
        raw = message.get("sections")
        for name, value in raw.items() if isinstance(raw, dict) else ():
            if value is None:
                sections.pop(name, None)
            elif isinstance(value, str):
                sections[name] = value
    parts = ["\n\n".join(content), *sections.values()]
    return "\n\n".join(part for part in parts if part)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""
