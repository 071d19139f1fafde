"""The extensions' runner: session events handed to extensions from a task of their own.

The session hands each event to an ``ExtensionRunner`` (``deliver``), which owns one
task in the session's nursery (``run``) and calls the handlers one at a time, in event
order. Handing over never blocks the session, so a slow extension cannot hold up
``prompt()`` or ``abort()``. A handler that raises, or that is still running after
``handler_timeout`` seconds, is stopped and reported as an ``extension_error`` event.
What an extension is, and how one is loaded and activated, is ``._extensions``.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import attrs
import trio

from .._core.classes import define
from .._core.events import ExtensionError, SessionEvent

DEFAULT_HANDLER_TIMEOUT = 5.0

Handler = Callable[[SessionEvent], Awaitable[None] | None]


class Subscriber(Protocol):
    """What the runner delivers to: an activated extension's ``ExtensionAPI``."""

    @property
    def path(self) -> str:
        """Where the extension came from, the ``extensionPath`` of its ``extension_error``."""
        ...

    def handlers_for(self, event_type: str) -> list[Handler]:
        """The handlers registered for one event type, then the ``"*"`` ones.

        Args:
            event_type: an event's ``type``.
        """
        ...


@define(eq=False)
class ExtensionRunner:
    """Delivers session events to extensions from its own task.

    Args:
        report: where ``extension_error`` events go (the session's emit).
        handler_timeout: seconds a handler may run before it is cancelled.
    """

    report: Callable[[SessionEvent], None]
    handler_timeout: float = DEFAULT_HANDLER_TIMEOUT
    _apis: list[Subscriber] = attrs.field(factory=list, init=False)
    _send: trio.MemorySendChannel[SessionEvent] = attrs.field(init=False)
    _receive: trio.MemoryReceiveChannel[SessionEvent] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        # Unbounded on purpose: delivery must never block or drop; the queue only
        # grows while a handler is slow, and every handler is time-bounded.
        self._send, self._receive = trio.open_memory_channel[SessionEvent](math.inf)

    def attach(self, subscriber: Subscriber) -> None:
        """Deliver events to one more subscriber (an activated extension's API).

        Args:
            subscriber: its name and its handlers.
        """
        self._apis.append(subscriber)

    def deliver(self, event: SessionEvent) -> None:
        """Queue an event for the extensions; never blocks."""
        if isinstance(event, ExtensionError) or not self._apis:
            return  # an extension's failure is not news to extensions
        with contextlib.suppress(trio.ClosedResourceError):  # closed: shutting down
            self._send.send_nowait(event)

    def close(self) -> None:
        """Stop accepting events; ``run`` returns once the queue is delivered."""
        self._send.close()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Deliver queued events until ``close``; run it in the session's nursery."""
        task_status.started()
        try:
            async for event in self._receive:
                await self._dispatch(event)
        finally:
            # Cancelled from outside (the application is leaving): still hand over what
            # is queued — terminal events included — each handler bounded as usual.
            with trio.CancelScope(shield=True):
                while True:
                    try:
                        event = self._receive.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    await self._dispatch(event)

    async def _dispatch(self, event: SessionEvent) -> None:
        for api in self._apis:
            for handler in api.handlers_for(event.type):
                await self._call(api.path, handler, event)

    async def _call(self, path: str, handler: Handler, event: SessionEvent) -> None:
        with trio.move_on_after(self.handler_timeout) as scope:
            try:
                result: Any = handler(event)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self.report(ExtensionError(path, event.type, f"{type(exc).__name__}: {exc}"))
        if scope.cancelled_caught:
            error = f"handler did not finish within {self.handler_timeout} s"
            self.report(ExtensionError(path, event.type, error))
