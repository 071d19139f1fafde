"""One call to stream a prompt: ``async with session.stream(text) as reply: async for …``.

The scope tree:

```text
async with session.stream(text) as reply      ← the caller's task
└── nursery (opened by stream(), closed when the block exits)
    └── prompt task: await session.prompt(text)   ← retries, compaction inside
```

Events reach the ``ReplyStream`` through a plain subscription, pushed in the order
the session emits them; the iterator ends when the prompt task has returned, so
``async for`` ends exactly when ``prompt()`` would return — after the last
``auto_retry_end`` and any compaction. Leaving the block before that cancels the
prompt task (the reply is recorded as aborted, as ``abort()`` would) and waits for
it; a cancelled caller scope does the same. Either way nothing is left running.
A busy or closed session is refused on entering the block.

Text mode keeps one queue for both of its views. The subscriber pushes text (merged
with the text at the queue's tail, so a slow reader gets fewer, longer pieces), a
``_KEPT`` mark when an assistant message ends for good, and a ``ReplyRestart`` when
an attempt that had text is thrown away (a retry, or compaction after an overflow).
``items()`` hands them on as they come (the marks dropped); plain iteration holds an
attempt's text until its mark says whether to hand it on or drop it.

A reply of several assistant messages (a tool turn, then the answer) reads as
paragraphs: the first text of a message after one that had text starts with
``MESSAGE_SEPARATOR``, a blank line. The separator is part of that attempt's text in
the queue, so a ``ReplyRestart`` takes it back with the attempt and the re-attempt
brings it again.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Generic, Literal, Protocol, TypeVar

import attrs
import trio

from .._core.classes import define, frozen
from .._core.errors import TrioSessionError
from .._core.events import (
    AutoRetryStart,
    CompactionEnd,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    SessionEvent,
)
from .._core.groups import unwrapped
from .._core.messages import AssistantMessage, ImageContent

T = TypeVar("T", str, SessionEvent)


class PromptSession(Protocol):
    """What a reply stream needs of its session (``AgentSession``), declared here, below it."""

    async def prompt(
        self, text: str, *, images: Sequence[ImageContent] = (), raise_on_error: bool = False
    ) -> AssistantMessage:
        """Run a prompt to its end."""
        ...

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Call ``callback`` with every event; returns the unsubscribing function."""
        ...


@frozen
class ReplyRestart:
    """``ReplyStream.items()``: the attempt you were showing failed; a new one follows.

    Throw away what you showed since the last assistant message ended (``discarded``)
    and show the text that follows instead. Plain iteration never yields this: it
    never hands out a failed attempt's text.

    Attributes:
        discarded: the failed attempt's text that ``items()`` had already yielded.
        reason: ``"retry"`` (the retry policy re-attempts) or ``"compaction"`` (the
            context overflowed; it was compacted and the request is sent again).
    """

    discarded: str
    reason: Literal["retry", "compaction"]


class _Kept:
    """The queue's mark: the text before it is an assistant message that ended for good."""


_KEPT: Final = _Kept()

_TextItem = str | ReplyRestart | _Kept

#: What the text views put between the texts of two assistant messages of one reply.
MESSAGE_SEPARATOR: Final = "\n\n"


@define(eq=False)
class ReplyStream(Generic[T]):
    """What ``AgentSession.stream`` yields: the prompt's text (or events), live.

    Iterate it with ``async for``; the iteration ends when the prompt is over, and
    raises what ``prompt()`` would have raised (``SessionBusyError``, a
    ``ProviderError`` with ``raise_on_error``, ``HistoryError``). Then ``reply`` is
    the prompt's final ``AssistantMessage``.

    Plain iteration (text mode) yields ``str`` pieces that always join to the text of
    the prompt's assistant messages, a blank line (``"\\n\\n"``) between two messages'
    texts (a tool turn's "Let me read it." and the answer after the tool) — for a
    one-message reply, exactly ``reply.text``:
    an attempt's text is handed on once its message has ended without an error (or
    the prompt is over), so a failed attempt's text is never yielded. ``items()``
    yields the text as it arrives instead, and a ``ReplyRestart`` when an attempt
    that had text failed and another follows. ``text`` is always the current
    attempt's text so far.

    A slow reader loses nothing and holds up nothing: the prompt never waits for it.
    Text that arrives while the reader is busy is joined to the text not yet read, so
    the queue holds at most one text piece per assistant message or attempt (plus
    one mark each), however many chunks the provider sent. With ``events=True``
    every event waits in the queue until it is read.
    """

    text: str = attrs.field(default="", init=False)
    _events: bool = attrs.field(default=False, init=False)  # events=True: no text views
    _items: collections.deque[T | _TextItem] = attrs.field(factory=collections.deque, init=False)
    _wake: trio.Event = attrs.field(factory=trio.Event, init=False)
    _done: bool = attrs.field(default=False, init=False)
    _reply: AssistantMessage | None = attrs.field(default=None, init=False)
    _error: TrioSessionError | None = attrs.field(default=None, init=False)
    _attempt: str = attrs.field(default="", init=False)  # this attempt's text so far
    _failed: bool = attrs.field(default=False, init=False)  # its message ended in error
    _separate: bool = attrs.field(default=False, init=False)  # a kept message had text

    @property
    def done(self) -> bool:
        """Whether the prompt is over (``reply`` is set, or it raised)."""
        return self._done

    @property
    def reply(self) -> AssistantMessage:
        """The prompt's final reply — what ``prompt()`` returns.

        Raises:
            RuntimeError: the prompt is not over yet (iterate the stream to its end
                first), or it raised instead of replying.
        """
        if self._reply is None:
            msg = (
                "the prompt has not ended yet; iterate the stream to its end first"
                if not self._done
                else "the prompt raised instead of replying; the iteration raised it"
            )
            raise RuntimeError(msg)
        return self._reply

    def __aiter__(self) -> ReplyStream[T]:
        return self

    async def __anext__(self) -> T:
        if self._events:
            return await self._next()  # type: ignore[return-value]  # events mode: events only
        held = ""
        while True:
            try:
                item = await self._next()
            except StopAsyncIteration:
                if held:  # the prompt ended on this attempt (given up, or aborted)
                    return held  # type: ignore[return-value]  # text mode: T is str
                raise
            if isinstance(item, str):
                held += item
            elif isinstance(item, ReplyRestart):
                held = ""
            elif held:
                return held  # type: ignore[return-value]  # text mode: T is str

    def items(self) -> ReplyItems:
        """The text as it arrives, and a ``ReplyRestart`` when an attempt is thrown away.

        Use it to show text live and keep it right: append each ``str``; on a
        ``ReplyRestart``, remove its ``discarded`` text (the failed attempt's, which
        you showed) and go on appending. Iterate either this or the stream itself,
        not both.

        Returns:
            An async iterator of ``str`` pieces and ``ReplyRestart`` marks; it ends,
                or raises, as plain iteration does.

        Raises:
            RuntimeError: the stream was opened with ``events=True``.
        """
        if self._events:
            msg = "items() needs a text stream; this one was opened with events=True"
            raise RuntimeError(msg)
        return ReplyItems(self)

    async def _next(self) -> T | _TextItem:
        while not self._items:
            if self._done:
                error, self._error = self._error, None
                if error is not None:
                    raise error
                raise StopAsyncIteration
            await self._wake.wait()
            self._wake = trio.Event()
        return self._items.popleft()

    def _push(self, item: T | _TextItem) -> None:
        self._items.append(item)
        self._wake.set()

    def _push_text(self, delta: str) -> None:
        if not self._attempt and self._separate:  # a new message's text, after another's
            delta = MESSAGE_SEPARATOR + delta
        self._attempt += delta
        items = self._items
        if items and isinstance(items[-1], str):  # the reader is behind: join, not queue
            items[-1] += delta
        else:
            self._push(delta)

    def _end_message(self, *, failed: bool) -> None:
        self._failed = failed
        if not failed:
            self._separate = self._separate or bool(self._attempt)
            self._attempt = ""
            self._push(_KEPT)

    def _restart(self, reason: Literal["retry", "compaction"]) -> None:
        """The failed attempt is thrown away: drop its unread text, mark the rest.

        Nothing is queued during an attempt but its text, so the attempt's unread
        text, if any, is the queue's tail.
        """
        attempt, self._attempt = self._attempt, ""
        if not self._failed or not attempt:
            self._failed = False
            return
        self._failed = False
        tail = self._items[-1] if self._items else None
        unread = ""
        if isinstance(tail, str):
            unread = tail
            self._items.pop()
        if len(unread) < len(attempt):
            self._push(ReplyRestart(attempt[: len(attempt) - len(unread)], reason))

    def _finish(self, reply: AssistantMessage | None, error: TrioSessionError | None) -> None:
        self._reply, self._error, self._done = reply, error, True
        self._wake.set()


@define(eq=False)
class ReplyItems:
    """``ReplyStream.items()``: ``str`` pieces as they arrive, and ``ReplyRestart`` marks.

    A plain async iterator (not a generator), so leaving a loop over it early needs
    no clean-up.

    Attributes:
        stream: the text stream whose queue it reads (made by ``ReplyStream.items()``).
    """

    _stream: ReplyStream[Any]

    def __aiter__(self) -> ReplyItems:
        return self

    async def __anext__(self) -> str | ReplyRestart:
        while True:
            item = await self._stream._next()
            if isinstance(item, str | ReplyRestart):
                return item


@asynccontextmanager
async def open_reply_stream(
    session: PromptSession,
    text: str,
    *,
    images: Sequence[ImageContent] = (),
    events: bool = False,
    raise_on_error: bool = False,
    refuse: Callable[[], None],
) -> AsyncIterator[ReplyStream[str] | ReplyStream[SessionEvent]]:
    """``AgentSession.stream``'s body: see the module docstring.

    Args:
        session: the session to prompt.
        text: the user message's text.
        images: images sent after the text.
        events: yield every event instead of text.
        raise_on_error: raise the ``ProviderError`` the prompt ended in.
        refuse: raises what ``prompt()`` raises before it starts (busy, closed).
    """
    stream: ReplyStream[str] | ReplyStream[SessionEvent]
    if events:
        event_stream: ReplyStream[SessionEvent] = ReplyStream()
        event_stream._events = True

        def on_event(event: SessionEvent) -> None:
            _track_text(event_stream, event)
            event_stream._push(event)

        stream = event_stream
    else:
        text_stream: ReplyStream[str] = ReplyStream()

        def on_event(event: SessionEvent) -> None:
            delta = _track_text(text_stream, event)
            if delta:
                text_stream._push_text(delta)
            elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
                text_stream._end_message(failed=event.message.stop_reason == "error")
            elif isinstance(event, AutoRetryStart):
                text_stream._restart("retry")
            elif isinstance(event, CompactionEnd) and event.will_retry:
                text_stream._restart("compaction")

        stream = text_stream

    async def run() -> None:
        reply: AssistantMessage | None = None
        error: TrioSessionError | None = None
        try:
            reply = await session.prompt(text, images=images, raise_on_error=raise_on_error)
        except TrioSessionError as exc:  # what prompt() raises on purpose: the iterator's
            error = exc
        finally:
            stream._finish(reply, error)

    refuse()  # busy or closed: raised here, on entering the block
    unsubscribe = session.subscribe(on_event)
    try:
        with unwrapped():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                try:
                    yield stream
                finally:
                    # Left early (a break, an error, a cancelled caller): stop our prompt —
                    # only ours, so cancel its task rather than call session.abort().
                    nursery.cancel_scope.cancel(reason="the stream's block was left")
    finally:
        unsubscribe()
    if stream._error is not None:  # never iterated to the end: it must not pass silently
        error, stream._error = stream._error, None
        raise error


def _track_text(stream: ReplyStream[T], event: SessionEvent) -> str:
    """Keep ``stream.text`` at the current attempt's text; the text delta of ``event``."""
    if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
        stream.text = ""
        return ""
    if isinstance(event, MessageUpdate):
        kind = event.assistant_message_event.get("type")
        if kind == "text_delta" and event.delta:
            stream.text += event.delta
            return event.delta
    return ""
