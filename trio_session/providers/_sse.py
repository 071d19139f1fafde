"""Server-sent events: bytes in, events out.

A small, pure decoder for the ``text/event-stream`` format both HTTP APIs stream in
(WHATWG HTML, "Server-sent events", the event stream interpretation): the body is
UTF-8, lines end in ``\\r\\n``, ``\\n`` or ``\\r`` (and nothing else: a U+2028 inside
a JSON string is data), ``field: value`` lines accumulate an event, a blank line
dispatches it, lines starting with ``:`` are comments. The HTTP layer feeds it the body
as it arrives (``SSEDecoder.feed``).

Memory is bounded: a line longer than ``MAX_EVENT_BYTES``, or an event whose data
adds up to more, raises ``EventStreamTooLarge`` instead of being buffered, so a
server that never sends a newline cannot make the reader grow without end.

An event still being accumulated when the stream ends is discarded, as the format
says: a stream cut in the middle of an event must not pass half an event on as if it
were whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import attrs

from .._core.classes import define, frozen

#: The longest line an event stream may send (in bytes), and the most data one event
#: may gather (in characters): 8 MiB. Streamed answers come in small pieces; a line
#: this long is a broken or hostile server.
MAX_EVENT_BYTES = 8 * 1024 * 1024

_LINE_END = re.compile(rb"\r\n|\r|\n")
_MIB = 1024 * 1024


def _size(limit: int) -> str:
    return f"{limit // _MIB} MiB" if limit % _MIB == 0 else f"{limit} bytes"


class EventStreamTooLarge(ValueError):
    """A line or an event went past the decoder's limit; the stream cannot go on."""


@frozen
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


@define
class SSEDecoder:
    """Splits a body into lines and lines into events; see the module docstring.

    Args:
        max_size: the longest line in bytes, and the most data one event may gather
            in characters (``MAX_EVENT_BYTES``).
    """

    _max_size: int = attrs.field(default=MAX_EVENT_BYTES, alias="max_size", kw_only=True)
    _partial: bytearray = attrs.field(factory=bytearray, init=False)
    _after_cr: bool = attrs.field(default=False, init=False)
    _event: str = attrs.field(default="", init=False)
    _data: list[str] = attrs.field(factory=list, init=False)
    _data_size: int = attrs.field(default=0, init=False)
    _last_id: str | None = attrs.field(default=None, init=False)

    @property
    def buffered(self) -> int:
        """How much is held: the bytes of an unfinished line, the data of an unfinished event."""
        return len(self._partial) + self._data_size

    def feed(self, data: bytes) -> Iterator[ServerSentEvent]:
        """Take the next piece of the body; yield the events it completes, in order.

        Raises:
            EventStreamTooLarge: a line, or an event's data, went past ``max_size``.
                Nothing past the limit is buffered.
        """
        start = 0
        if self._after_cr and data[:1] == b"\n":
            start = 1  # the \n of a \r\n split between two pieces
        self._after_cr = False
        for match in _LINE_END.finditer(data, start):
            size = len(self._partial) + match.start() - start
            if size > self._max_size:
                raise EventStreamTooLarge(f"an event stream line is longer than {self._limit}")
            raw = bytes(self._partial) + data[start : match.start()]
            self._partial.clear()
            start = match.end()
            self._after_cr = start == len(data) and match.group() == b"\r"
            if (event := self.line(raw.decode("utf-8", errors="replace"))) is not None:
                yield event
        if len(self._partial) + len(data) - start > self._max_size:
            raise EventStreamTooLarge(f"an event stream line is longer than {self._limit}")
        self._partial += data[start:]

    @property
    def _limit(self) -> str:
        return _size(self._max_size)

    def line(self, line: str) -> ServerSentEvent | None:
        """Take one line (without its terminator); return the event it completes, if any.

        Raises:
            EventStreamTooLarge: the event's data went past ``max_size``.
        """
        line = line.rstrip("\r\n")
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_size += len(value) + 1
            if self._data_size > self._max_size:
                raise EventStreamTooLarge(f"an event stream event is larger than {self._limit}")
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
        self._data_size = 0
        event = ServerSentEvent(
            event=self._event or "message", data="\n".join(self._data), id=self._last_id
        )
        self._event = ""
        self._data = []
        return event
