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
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Generic, Protocol, TypeVar

import attrs
import trio

from ._errors import TrioSessionError
from ._events import MessageStart, MessageUpdate, SessionEvent
from ._groups import unwrapped
from ._messages import AssistantMessage, ImageContent

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


@attrs.define(eq=False)
class ReplyStream(Generic[T]):
    """What ``AgentSession.stream`` yields: the prompt's text deltas (or events), live.

    Iterate it with ``async for``; the iteration ends when the prompt is over, and
    raises what ``prompt()`` would have raised (``SessionBusyError``, a
    ``ProviderError`` with ``raise_on_error``, ``HistoryError``). Then ``reply`` is
    the prompt's final ``AssistantMessage``.

    A reply that needed a retry streams once per attempt. Attempts that fail before
    any text (the usual 503) add nothing, so the deltas join to ``reply.text``; an
    attempt that failed mid-answer (a dropped connection) has had its text yielded
    already, and the re-attempt streams the whole answer again. ``text`` is always the
    current attempt's text so far: draw that, or iterate with ``events=True`` and
    reset your display on each assistant ``message_start``.
    """

    text: str = attrs.field(default="", init=False)
    _items: collections.deque[T] = attrs.field(factory=collections.deque, init=False)
    _wake: trio.Event = attrs.field(factory=trio.Event, init=False)
    _done: bool = attrs.field(default=False, init=False)
    _reply: AssistantMessage | None = attrs.field(default=None, init=False)
    _error: TrioSessionError | None = attrs.field(default=None, init=False)

    @property
    def done(self) -> bool:
        """Whether the prompt is over (``reply`` is set, or it raised)."""
        return self._done

    @property
    def reply(self) -> AssistantMessage:
        """The prompt's final reply — what ``prompt()`` returns.

        Raises:
            RuntimeError: the prompt is not over yet (iterate to the end first), or it
                raised instead of replying.
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
        while not self._items:
            if self._done:
                error, self._error = self._error, None
                if error is not None:
                    raise error
                raise StopAsyncIteration
            await self._wake.wait()
            self._wake = trio.Event()
        return self._items.popleft()

    def _push(self, item: T) -> None:
        self._items.append(item)
        self._wake.set()

    def _finish(self, reply: AssistantMessage | None, error: TrioSessionError | None) -> None:
        self._reply, self._error, self._done = reply, error, True
        self._wake.set()


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
        events: yield every event instead of text deltas.
        raise_on_error: raise the ``ProviderError`` the prompt ended in.
        refuse: raises what ``prompt()`` raises before it starts (busy, closed).
    """
    stream: ReplyStream[str] | ReplyStream[SessionEvent]
    if events:
        event_stream: ReplyStream[SessionEvent] = ReplyStream()

        def on_event(event: SessionEvent) -> None:
            _track_text(event_stream, event)
            event_stream._push(event)

        stream = event_stream
    else:
        text_stream: ReplyStream[str] = ReplyStream()

        def on_event(event: SessionEvent) -> None:
            delta = _track_text(text_stream, event)
            if delta:
                text_stream._push(delta)

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
