"""Where a session's events go: its observer, subscribers, event streams, extensions.

Delivery never blocks the session (R-44): callbacks run inline and an exception in one
is logged; an ``EventStream`` is dropped when its reader falls ``buffer`` events behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import attrs
import trio

from .._core.classes import define
from .._core.errors import EventStreamLagged
from .._core.events import SessionEvent
from .._observe.log_records import SessionObserver
from .extension_runner import ExtensionRunner

logger = logging.getLogger("trio_session")

Subscriber = Callable[[SessionEvent], None]

#: Events an ``AgentSession.events`` stream buffers before it is dropped.
DEFAULT_EVENT_BUFFER = 4096


@define(eq=False)
class EventStream:
    """An async iterator over session events, fed without ever blocking the session.

    Made by ``AgentSession.events``. If the consumer falls more than
    ``buffer`` events behind, the stream is disconnected: iteration yields what
    was buffered, then raises ``EventStreamLagged``.

    Attributes:
        send: the sending end of the stream's channel; the session delivers to it.
        receive: the receiving end, which iteration reads.
        lagged: whether the consumer fell behind and the stream was disconnected.
    """

    _send: trio.MemorySendChannel[SessionEvent]
    _receive: trio.MemoryReceiveChannel[SessionEvent]
    lagged: bool = False

    def _push(self, event: SessionEvent) -> bool:
        """Deliver without waiting; return False once the stream is gone."""
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            self.lagged = True
            self._send.close()
            return False
        except trio.ClosedResourceError:
            return False
        return True

    def _close(self) -> None:
        self._send.close()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> SessionEvent:
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            if self.lagged:
                msg = "event stream fell behind and was disconnected"
                raise EventStreamLagged(msg) from None
            raise StopAsyncIteration from None


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class EventHub:
    """One session's listeners, in delivery order: the observer first, then the
    subscribers, the event streams and the extensions.

    Attributes:
        observer: the session's logs and spans (``trio_session._observe.log_records``).
        extensions: the loaded extensions' runner, if any.
        subscribers: ``subscribe`` callbacks; a list only once there is one.
        streams: ``events()`` streams; a list only once there is one.
    """

    observer: SessionObserver
    extensions: ExtensionRunner | None = None
    subscribers: list[Subscriber] | None = attrs.field(default=None, init=False)
    streams: list[EventStream] | None = attrs.field(default=None, init=False)

    def emit(self, event: SessionEvent) -> None:
        """Deliver ``event`` to everyone, synchronously and in order.

        Args:
            event: the event.
        """
        try:
            self.observer.on_event(event)  # the first subscriber
        except Exception:
            logger.exception("session event subscriber %r raised", self.observer.on_event)
        if self.subscribers:
            for callback in tuple(self.subscribers):
                try:
                    callback(event)
                except Exception:
                    logger.exception("session event subscriber %r raised", callback)
        if self.streams:
            for stream in tuple(self.streams):
                if not stream._push(event):  # the same module's class
                    self.streams.remove(stream)
        if self.extensions is not None:
            self.extensions.deliver(event)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Add ``callback``; the function returned removes it (safe to call twice).

        Args:
            callback: called with each event.
        """
        if self.subscribers is None:
            self.subscribers = []
        self.subscribers.append(callback)

        def unsubscribe() -> None:
            if self.subscribers is not None and callback in self.subscribers:
                self.subscribers.remove(callback)

        return unsubscribe

    @contextmanager
    def events(self, buffer: int) -> Iterator[EventStream]:
        """A new ``EventStream`` of at most ``buffer`` unread events, for a ``with`` block.

        Args:
            buffer: how many unread events the stream may hold before it is dropped.

        Yields:
            The stream, removed when the block exits.
        """
        send, receive = trio.open_memory_channel[SessionEvent](buffer)
        stream = EventStream(send, receive)
        if self.streams is None:
            self.streams = []
        self.streams.append(stream)
        try:
            yield stream
        finally:
            if self.streams is not None and stream in self.streams:
                self.streams.remove(stream)
            send.close()
            receive.close()

    def close(self) -> None:
        """End every event stream (the session is closing)."""
        for stream in self.streams or ():
            stream._close()
        self.streams = None


def discard(event: SessionEvent) -> None:
    """Where a closed session's agent sends its (no longer expected) events.

    Args:
        event: the event, dropped.
    """
