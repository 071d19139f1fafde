"""Helpers for testing applications built on trio_session.

The provider is the seam to fake: use ``trio_session.FauxProvider`` with a
script, run on Trio's ``MockClock(autojump_threshold=0)`` (pytest-trio's
``autojump_clock`` fixture), and record what the session emits with
``EventRecorder``:

```python
async def test_two_503s_then_success(autojump_clock):
    provider = FauxProvider(faux_script(["!503", "!503", "Hello"]))
    async with open_session(provider) as session:
        recorder = EventRecorder.attach(session)
        await session.prompt("Hi")
    assert recorder.times_of("auto_retry_start") == [0.0, 2.0]
```
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import attrs
import trio

from ._core.classes import define
from ._core.events import SessionEvent
from ._session.facade import AgentSession
from .providers._faux import FauxProvider, FauxReply, faux_script

__all__ = ["EventRecorder", "FauxProvider", "FauxReply", "faux_script"]

E = TypeVar("E", bound=SessionEvent)


@define(eq=False)
class EventRecorder:
    """Records every event with the ``trio.current_time()`` it arrived at.

    Attributes:
        events: the events, in order.
        times: when each arrived, in ``trio.current_time()``.
        unsubscribe: ends the subscription (``attach`` sets it).
    """

    events: list[SessionEvent] = attrs.field(factory=list)
    times: list[float] = attrs.field(factory=list)
    unsubscribe: Callable[[], None] | None = attrs.field(default=None, repr=False)

    @classmethod
    def attach(cls, session: AgentSession) -> EventRecorder:
        """Subscribe a new recorder to ``session``.

        Args:
            session: the session to record.
        """
        recorder = cls()
        recorder.unsubscribe = session.subscribe(recorder)
        return recorder

    def __call__(self, event: SessionEvent) -> None:
        self.events.append(event)
        self.times.append(trio.current_time())

    @property
    def types(self) -> list[str]:
        """The ``type`` of every event, in order."""
        return [e.type for e in self.events]

    def of(self, kind: type[E]) -> list[E]:
        """Every recorded event of one class.

        Args:
            kind: the event class (``AutoRetryStart``).
        """
        return [e for e in self.events if isinstance(e, kind)]

    def times_of(self, event_type: str) -> list[float]:
        """When each event of ``event_type`` arrived.

        Args:
            event_type: the events' ``type`` (``"auto_retry_start"``).
        """
        return [t for e, t in zip(self.events, self.times, strict=True) if e.type == event_type]

    def clear(self) -> None:
        """Forget everything recorded so far."""
        self.events.clear()
        self.times.clear()
