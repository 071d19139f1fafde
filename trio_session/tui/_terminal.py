"""The terminal: raw keys in, a redrawn live region out.

``raw_terminal`` puts the terminal in a cbreak-like raw mode — keys arrive one by
one, Ctrl+C is a key rather than a signal, output newlines still work — and restores
the saved modes on every way out (return, exception, cancellation).

``KeyReader`` turns bytes from the terminal into ``Key`` values; a lone ESC
byte is Esc only if no other byte follows within ``ESC_TIMEOUT`` (arrow keys and
the like start with ESC too).

``Screen`` writes finished lines to the scrollback and keeps a *live region*
(streaming text, the status or loader line, the input line) at the bottom, redrawn in
place with one write, so it does not flicker.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import termios
from collections.abc import Iterator, Sequence
from typing import Literal, TextIO

import attrs
import trio

ESC_TIMEOUT = 0.05

KeyName = Literal[
    "char", "enter", "backspace", "esc", "ctrl_c", "ctrl_d", "ctrl_u", "up", "down", "other"
]


@attrs.frozen
class Key:
    """One key press; ``text`` is set for ``"char"`` keys."""

    name: KeyName
    text: str = ""


@contextlib.contextmanager
def raw_terminal(fd: int) -> Iterator[list[int | list[bytes | int]]]:
    """Keys unbuffered and unechoed, Ctrl+C/Ctrl+Z/Ctrl+S as keys; restored on exit."""
    saved = termios.tcgetattr(fd)
    mode = termios.tcgetattr(fd)
    mode[0] &= ~(termios.IXON | termios.ICRNL)  # iflag: no flow control, keep CR as CR
    mode[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)  # lflag
    mode[6] = list(mode[6])
    mode[6][termios.VMIN] = 1
    mode[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSADRAIN, mode)
    try:
        yield saved
    finally:
        # After SIGHUP the terminal may be gone: then there is nothing to restore.
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@attrs.define(eq=False)
class KeyReader:
    """Reads keys from a terminal file descriptor through Trio."""

    fd: int
    _pending: bytearray = attrs.field(factory=bytearray, init=False)
    _decoder: codecs.IncrementalDecoder = attrs.field(
        factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"), init=False
    )

    async def _fill(self, wait: float = float("inf")) -> bool:
        """Read what is available, waiting at most ``wait`` seconds; False if nothing."""
        with trio.move_on_after(wait):
            await trio.lowlevel.wait_readable(self.fd)
            data = os.read(self.fd, 1024)
            if not data:
                raise EOFError
            self._pending += data
            return True
        return False

    async def read(self) -> Key:
        """The next key press. Raises ``EOFError`` when the terminal closes."""
        while not self._pending:
            await self._fill()
        first = self._pending[0]
        if first == 0x1B:
            if len(self._pending) == 1 and not await self._fill(ESC_TIMEOUT):
                del self._pending[0]
                return Key("esc")
            return self._escape_sequence()
        del self._pending[0]
        simple: dict[int, KeyName] = {
            0x0D: "enter",
            0x0A: "enter",
            0x7F: "backspace",
            0x08: "backspace",
            0x03: "ctrl_c",
            0x04: "ctrl_d",
            0x15: "ctrl_u",
        }
        if first in simple:
            return Key(simple[first])
        if first < 0x20:
            return Key("other")
        text = self._decoder.decode(bytes([first]))
        while not text:  # the rest of a multi-byte character
            if not self._pending:
                await self._fill()
            text = self._decoder.decode(bytes([self._pending.pop(0)]))
        return Key("char", text)

    def _escape_sequence(self) -> Key:
        # ESC [ ... final byte (0x40–0x7E), or ESC O x, or ESC + one key (Alt+key).
        data = self._pending
        if len(data) >= 2 and data[1] in (ord("["), ord("O")):
            end = 2
            while end < len(data) and not 0x40 <= data[end] <= 0x7E:
                end += 1
            final = data[end] if end < len(data) else None
            del data[: end + 1]
            arrows: dict[int, KeyName] = {ord("A"): "up", ord("B"): "down"}
            return Key(arrows.get(final or 0, "other"))
        del data[:2]
        return Key("other")


def _width(out: TextIO) -> int:
    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError):
        return 80


@attrs.define(eq=False)
class Screen:
    """Scrollback lines above, a live region below, redrawn in place."""

    out: TextIO
    _live_rows: int = attrs.field(default=0, init=False)
    _live: list[str] = attrs.field(factory=list, init=False)

    @property
    def width(self) -> int:
        """Columns of the terminal."""
        return _width(self.out)

    def _clip(self, line: str) -> str:
        width = self.width
        return line if len(line) < width else line[: max(0, width - 2)] + "…"

    def _erase_live(self) -> str:
        if self._live_rows == 0:
            return ""
        up = f"\x1b[{self._live_rows - 1}A" if self._live_rows > 1 else ""
        return f"\r{up}\x1b[J"

    def print(self, *lines: str) -> None:
        """Add finished lines above the live region."""
        text = "".join(line + "\r\n" for line in lines)
        self._write(self._erase_live() + text + self._draw(self._live))

    def live(self, lines: Sequence[str], cursor_col: int | None = None) -> None:
        """Replace the live region; put the cursor at ``cursor_col`` of its last line."""
        self._live = [self._clip(line) for line in lines]
        self._write(self._erase_live() + self._draw(self._live, cursor_col))

    def _draw(self, lines: Sequence[str], cursor_col: int | None = None) -> str:
        self._live_rows = len(lines)
        text = "\r\n".join(lines)
        if cursor_col is not None and lines:
            text += f"\r\x1b[{min(cursor_col, self.width - 1) + 1}G" if cursor_col else "\r"
        return text

    def close(self) -> None:
        """Leave the live region on screen and move below it."""
        self._write("\r\n")
        self._live_rows = 0

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
