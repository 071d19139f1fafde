"""Server-sent events: lines in, events out.

A small, pure decoder for the ``text/event-stream`` format both HTTP APIs stream in
(WHATWG HTML, "Server-sent events", the event stream interpretation): ``field: value``
lines accumulate an event, a blank line dispatches it, lines starting with ``:`` are
comments. The HTTP layer feeds it lines (``httpx.Response.aiter_lines`` already
splits on ``\\r\\n``, ``\\n`` and ``\\r``).

An event still being accumulated when the stream ends is discarded, as the format
says: a stream cut in the middle of an event must not pass half an event on as if it
were whole.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class ServerSentEvent:
    """One dispatched event.

    Attributes:
        event: the ``event:`` field, ``"message"`` when absent.
        data: the ``data:`` lines joined with ``\\n``.
        id: the last ``id:`` field seen, if any.
    """

    event: str = "message"
    data: str = ""
    id: str | None = None


@attrs.define
class SSEDecoder:
    """Accumulates ``field: value`` lines; :meth:`line` returns an event on a blank line."""

    _event: str = attrs.field(default="", init=False)
    _data: list[str] = attrs.field(factory=list, init=False)
    _last_id: str | None = attrs.field(default=None, init=False)

    def line(self, line: str) -> ServerSentEvent | None:
        """Take one line (without its terminator); return the event it completes, if any."""
        line = line.rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        return None  # "retry" and unknown fields are ignored

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = ServerSentEvent(
            event=self._event or "message", data="\n".join(self._data), id=self._last_id
        )
        self._event = ""
        self._data = []
        return event
