"""The server's output queue: whole lines, written at once or by one writer task, updates
merged under lag.

Nothing reaches the output but through the ``Outbox``: the session's events and the
answers are put as whole lines (never torn or interleaved), in order. An event is written
at once, in the task that emitted it, when nothing waits to be written and the stream can
take bytes without waiting (a pipe: ``nowait_sender``); what the stream does not take is
queued. Answers are always queued (``queue``), and while anything is queued or being
written every line queues behind it: the writer task sends the queue in batches. When
the client lags, a waiting ``message_update`` absorbs the next one of the same message
part (``merge_updates``), so the queue grows with the answer, not with its length times
its number of chunks; nothing is ever dropped.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
import trio

from .._core.classes import define
from ._protocol import encode_line

#: Largest write the writer task makes at once (it joins queued lines up to this).
WRITE_BATCH: Final = 256 * 1024


def merge_updates(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> dict[str, Any] | None:
    """One ``message_update`` that says what ``earlier`` then ``later`` say; None if none can.

    Two updates merge when both are ``message_update`` objects whose
    ``assistantMessageEvent`` is a ``text_delta`` of the same ``contentIndex``, with the
    same fields. The result is ``later`` with both deltas concatenated (``delta`` and
    ``assistantMessageEvent.delta``), so its ``message`` and ``partial`` are the latest:
    a reader that appends deltas, or that shows the partial message, ends up where it
    would have after reading both. Every other update (``text_start``, ``text_end``,
    thinking and tool-call events) stays a line of its own.
    """
    if not _mergeable(earlier, later):
        return None
    return _joined(
        later,
        [earlier.get("delta", ""), later.get("delta", "")],
        [
            earlier["assistantMessageEvent"]["delta"],
            later["assistantMessageEvent"]["delta"],
        ],
    )


def _mergeable(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> bool:
    first, second = earlier.get("assistantMessageEvent"), later.get("assistantMessageEvent")
    return (
        _is_delta_update(earlier, first)
        and _is_delta_update(later, second)
        and isinstance(first, Mapping)
        and isinstance(second, Mapping)
        and earlier.keys() == later.keys()
        and first.keys() == second.keys()
        and first["type"] == second["type"]
        and first.get("contentIndex") == second.get("contentIndex")
    )


def _is_delta_update(data: Mapping[str, Any], event: object) -> bool:
    return (
        data.get("type") == "message_update"
        and isinstance(data.get("delta", ""), str)
        and isinstance(event, Mapping)
        and event.get("type") == "text_delta"
        and isinstance(event.get("delta"), str)
    )


def _joined(
    latest: Mapping[str, Any], deltas: list[str], event_deltas: list[str]
) -> dict[str, Any]:
    merged = dict(latest)
    merged["assistantMessageEvent"] = {
        **latest["assistantMessageEvent"],
        "delta": "".join(event_deltas),
    }
    if "delta" in latest:
        merged["delta"] = "".join(deltas)
    return merged


@define(eq=False)
class _Update:
    """A queued ``message_update``, and the later ones merged into it.

    Only the latest update is kept whole, with the deltas of all of them; the line is
    encoded when it is written. ``size`` is what the queue counts for it: exact until
    a merge, then grown by an estimate (each merged delta lengthens the line about
    four times over: ``delta``, ``assistantMessageEvent.delta``, and the text of both
    ``message`` and ``assistantMessageEvent.partial``).
    """

    data: Mapping[str, Any]
    line: bytes | None
    size: int
    deltas: list[str]
    event_deltas: list[str]

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> _Update:
        line = encode_line(data)
        event = data.get("assistantMessageEvent")
        event_delta = event.get("delta") if isinstance(event, Mapping) else None
        delta = data.get("delta")
        return cls(
            data,
            line,
            len(line),
            [delta] if isinstance(delta, str) else [],
            [event_delta] if isinstance(event_delta, str) else [],
        )

    def absorb(self, later: Mapping[str, Any]) -> int | None:
        """Merge ``later`` in if it can be; the bytes it adds to the queue, or None."""
        if not _mergeable(self.data, later):
            return None
        delta: str = later.get("delta", "")
        event_delta: str = later["assistantMessageEvent"]["delta"]
        self.data, self.line = later, None
        self.deltas.append(delta)
        self.event_deltas.append(event_delta)
        # with the partial message, the delta is in the line four times; lean, once
        copies = 3 if "partial" in later["assistantMessageEvent"] else 1
        grown = _utf8_size(delta) + copies * _utf8_size(event_delta)
        self.size += grown
        return grown

    def encode(self) -> bytes:
        """The line to write."""
        if self.line is None:
            self.line = encode_line(_joined(self.data, self.deltas, self.event_deltas))
        return self.line


def nowait_sender(stream: trio.abc.SendStream) -> Callable[[bytes], int] | None:
    """How to write to ``stream`` without waiting, if it can: a ``trio.lowlevel.FdStream``
    (a pipe, a terminal), alone or as a ``trio.StapledStream``'s sending half; else None.

    The function writes what the descriptor takes now and returns how many bytes that
    was: 0 when it takes nothing (a full pipe) or fails (a reader gone, the stream
    closed), for the writer task to send, which waits for room or finds out what failed.
    """
    send = stream.send_stream if isinstance(stream, trio.StapledStream) else stream
    fd_stream: Any = getattr(trio.lowlevel, "FdStream", None)  # not on Windows
    if fd_stream is None or not isinstance(send, fd_stream):
        return None

    def send_nowait(data: bytes) -> int:
        try:
            # fileno() each time: -1 once the stream is closed, never a reused number
            return os.write(send.fileno(), data)
        except OSError:
            return 0

    return send_nowait


@define(eq=False)
class Outbox:
    """Lines on their way out; the only way anything reaches the output.

    With nothing queued or being written, ``put`` writes a line at once with
    ``send_nowait`` (``nowait_sender``'s, if the stream has one), and queues what it did
    not take; otherwise, and always with ``queue``, the line waits its turn for the
    writer task (``pump``). Once more than ``merge_after`` bytes wait, a
    ``message_update`` is merged into the line before it when that is a
    ``message_update`` it can merge with (``merge_updates``): every update carries the
    whole partial message, so without this a client that stops reading would cost
    memory quadratic in the length of the answer. Nothing is ever dropped, and nothing
    ever waits to be put.
    """

    high_water: int
    merge_after: int
    send_nowait: Callable[[bytes], int] | None = None
    _lines: deque[bytes | _Update] = attrs.field(factory=deque, init=False)
    _queued: int = attrs.field(default=0, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    broken: bool = attrs.field(default=False, init=False)
    _wake_writer: trio.lowlevel.ParkingLot = attrs.field(
        factory=trio.lowlevel.ParkingLot, init=False
    )
    _room: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot, init=False)

    @property
    def queued(self) -> int:
        """Bytes waiting to be written, the batch being written included."""
        return self._queued

    @property
    def backed_up(self) -> bool:
        """Whether more than ``high_water`` bytes wait to be written."""
        return self._queued > self.high_water and not self.broken

    def put(self, line: bytes) -> None:
        """Write one whole line, or queue it; never blocks.

        With nothing queued or being written, the stream gets it at once
        (``send_nowait``), and only what it does not take is queued.
        """
        if self._closed or self.broken:
            return
        if self._queued == 0 and self.send_nowait is not None:
            line = line[self.send_nowait(line) :]
            if not line:
                return
        self._append(line, len(line))

    def queue(self, line: bytes) -> None:
        """Queue one whole line for the writer task, even when nothing waits; never blocks.

        For answers (``RpcServer._send`` says why).
        """
        if not (self._closed or self.broken):
            self._append(line, len(line))

    def put_update(self, data: Mapping[str, Any]) -> None:
        """Put a ``message_update``, merged into the last queued line if the output lags."""
        if self._closed or self.broken:
            return
        if self._queued == 0 and self.send_nowait is not None:
            self.put(encode_line(data))
            return
        last = self._lines[-1] if self._lines else None
        if isinstance(last, _Update) and self._queued > self.merge_after:
            grown = last.absorb(data)
            if grown is not None:
                self._queued += grown
                return
        update = _Update.of(data)
        self._append(update, update.size)

    def _append(self, entry: bytes | _Update, size: int) -> None:
        self._lines.append(entry)
        self._queued += size
        self._wake_writer.unpark_all()

    async def wait_for_room(self) -> None:
        """Wait while the output is backed up past the high-water mark."""
        while self.backed_up:
            await self._room.park()

    def close(self) -> None:
        """No more lines; the writer finishes what is queued and returns."""
        self._closed = True
        self._wake_writer.unpark_all()

    def _pop(self) -> bytes:
        """The next line, taken out of the queue: nothing merges into it any more."""
        entry = self._lines.popleft()
        if isinstance(entry, bytes):
            return entry
        line = entry.encode()
        self._queued += len(line) - entry.size  # the estimate becomes the exact size
        return line

    async def pump(self, stream: trio.abc.SendStream, on_broken: Callable[[], None]) -> None:
        """The writer task: send queued lines, joined into batches, until closed."""
        try:
            while True:
                while not self._lines:
                    if self._closed:
                        return
                    await self._wake_writer.park()
                batch = [self._pop()]
                size = len(batch[0])
                while self._lines and size + _size(self._lines[0]) <= WRITE_BATCH:
                    line = self._pop()
                    batch.append(line)
                    size += len(line)
                await stream.send_all(b"".join(batch))
                self._queued -= size
                self._room.unpark_all()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            # The reader went away: nothing more can be said, so stop serving.
            self.broken = True
            self._lines.clear()
            self._queued = 0
            self._room.unpark_all()
            on_broken()


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _size(entry: bytes | _Update) -> int:
    return len(entry) if isinstance(entry, bytes) else entry.size
