"""The terminal: raw keys in, a redrawn live region out.

``raw_terminal`` puts the terminal in a raw mode — keys arrive one by one, Ctrl+C
is a key rather than a signal, bracketed paste is on — and restores the saved
modes on every way out (return, exception, cancellation), the cursor shown and
bracketed paste off again.

``KeyReader`` reads bytes from the terminal through Trio and turns them into
``Key`` values with the pure ``KeyDecoder``; a lone ESC byte is Esc only if no
other byte follows within ``ESC_TIMEOUT`` (arrow keys and the like start with
ESC too).

``Screen`` writes finished lines to the scrollback and keeps a *live region* at
the bottom (the reply being streamed, the status line, the editor, the footer).
Each redraw rewrites only the rows that changed, from the first changed row down,
inside one synchronized-output write with the cursor hidden, so nothing flickers.
"""

from __future__ import annotations

import contextlib
import os
import termios
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TextIO

import attrs
import trio

from .._core.classes import define
from ._keys import ESC_TIMEOUT, Key, KeyDecoder

#: Synchronized output (terminals that know it draw a frame at once; others ignore it).
SYNC_BEGIN = "\x1b[?2026h"
SYNC_END = "\x1b[?2026l"
HIDE_CURSOR = "\x1b[?25l"
SHOW_CURSOR = "\x1b[?25h"
PASTE_ON = "\x1b[?2004h"
PASTE_OFF = "\x1b[?2004l"
#: Home, clear the screen and the scrollback (a full redraw after a resize).
CLEAR_ALL = "\x1b[H\x1b[2J\x1b[3J"
RESET_STYLE = "\x1b[0m"


@contextlib.contextmanager
def raw_terminal(fd: int, out: TextIO) -> Iterator[list[int | list[bytes | int]]]:
    """Keys unbuffered and unechoed, Ctrl+C/Ctrl+Z/Ctrl+S as keys, bracketed paste on.

    Everything is restored on the way out: the saved ``termios`` modes (``stty -g``
    reads the same after), bracketed paste off, the cursor shown.
    """
    saved = termios.tcgetattr(fd)
    mode = termios.tcgetattr(fd)
    mode[0] &= ~(termios.IXON | termios.ICRNL | termios.INLCR)  # iflag: CR stays CR
    mode[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN)  # lflag
    mode[6] = list(mode[6])
    mode[6][termios.VMIN] = 1
    mode[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSADRAIN, mode)
    try:
        with contextlib.suppress(OSError):
            out.write(PASTE_ON)
            out.flush()
        yield saved
    finally:
        # After SIGHUP the terminal may be gone: then there is nothing to restore.
        with contextlib.suppress(OSError, ValueError):
            out.write(RESET_STYLE + PASTE_OFF + SHOW_CURSOR)
            out.flush()
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def cooked_terminal(fd: int, saved: list[Any], out: TextIO) -> Iterator[None]:
    """The terminal as it was before ``raw_terminal`` (``saved``), raw again after.

    For a program that needs the terminal for a while (an editor on Ctrl+G).

    Args:
        fd: the terminal's descriptor.
        saved: the modes ``raw_terminal`` saved (what it yields).
        out: where the screen writes.
    """
    raw = termios.tcgetattr(fd)
    out.write(RESET_STYLE + PASTE_OFF + SHOW_CURSOR)
    out.flush()
    termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, raw)
        with contextlib.suppress(OSError, ValueError):
            out.write(PASTE_ON)
            out.flush()


@define(eq=False)
class KeyReader:
    """Reads keys from a terminal file descriptor through Trio."""

    fd: int
    _decoder: KeyDecoder = attrs.field(factory=KeyDecoder, init=False)
    _ready: list[Key] = attrs.field(factory=list, init=False)

    async def _fill(self, wait: float = float("inf")) -> bool:
        """Decode what is available, waiting at most ``wait`` seconds; False if nothing."""
        with trio.move_on_after(wait):
            await trio.lowlevel.wait_readable(self.fd)
            data = os.read(self.fd, 65536)
            if not data:
                raise EOFError
            self._ready += self._decoder.feed(data)
            return True
        return False

    async def read(self) -> Key:
        """The next key press (or paste). Raises ``EOFError`` when the terminal closes."""
        while not self._ready:
            if self._decoder.waiting_for_escape:
                if not await self._fill(ESC_TIMEOUT):
                    self._ready += self._decoder.flush()
            else:
                await self._fill()
        return self._ready.pop(0)


class Output(Protocol):
    """Where the screen writes: a text stream (``sys.stdout``, or a terminal emulator)."""

    def write(self, text: str, /) -> object:
        """Write ``text``."""

    def flush(self) -> None:
        """Send what was written."""


def terminal_size(out: object) -> tuple[int, int]:
    """(columns, rows) of the terminal behind ``out``; 80×24 when it has none."""
    try:
        size = os.get_terminal_size(out.fileno())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return 80, 24
    return max(size.columns, 1), max(size.lines, 1)


@define(eq=False)
class Screen:
    """Scrollback lines above, a live region below, redrawn by difference.

    Lines handed to ``print`` and ``live`` must already fit the width (the layout
    wraps them); each is ended with a style reset so no colour leaks into the next.
    The cursor is left where the live region says (the editor's cursor).
    """

    out: Output
    size: Callable[[], tuple[int, int]] | None = None
    _shown: list[str] = attrs.field(factory=list, init=False)
    _cursor_row: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        if self.size is None:
            self.size = lambda: terminal_size(self.out)

    @property
    def width(self) -> int:
        """Columns of the terminal."""
        assert self.size is not None
        return self.size()[0]

    @property
    def height(self) -> int:
        """Rows of the terminal."""
        assert self.size is not None
        return self.size()[1]

    def _to_top(self) -> str:
        """Move from the cursor to the first column of the live region's first row."""
        return f"\r\x1b[{self._cursor_row}A" if self._cursor_row else "\r"

    def print(self, lines: Sequence[str], live: Sequence[str], cursor: tuple[int, int]) -> None:
        """Add finished ``lines`` to the scrollback, then draw ``live`` below them."""
        text = "".join(line + RESET_STYLE + "\r\n" for line in lines)
        self._write(self._to_top() + "\x1b[J" + text + self._draw(live, 0, cursor))

    def live(self, lines: Sequence[str], cursor: tuple[int, int]) -> None:
        """Replace the live region with ``lines``; the cursor goes to ``cursor`` (row, col)."""
        first = 0
        shown = self._shown
        while first < len(lines) and first < len(shown) and lines[first] == shown[first]:
            first += 1
        if first == len(lines) == len(shown):  # nothing changed: only the cursor may move
            self._write(self._to_top() + self._place(cursor, from_row=0))
            return
        move = self._to_top() + (f"\x1b[{first}B" if first else "")
        self._write(move + "\x1b[J" + self._draw(lines, first, cursor))

    def redraw_all(
        self, lines: Sequence[str], live: Sequence[str], cursor: tuple[int, int]
    ) -> None:
        """Clear the screen and its scrollback, then draw everything again (after a resize)."""
        self._cursor_row = 0
        self._shown = []
        text = "".join(line + RESET_STYLE + "\r\n" for line in lines)
        self._write(CLEAR_ALL + text + self._draw(live, 0, cursor))

    def _draw(self, lines: Sequence[str], first: int, cursor: tuple[int, int]) -> str:
        """Rows ``first`` … of ``lines`` from the cursor's row down, then place the cursor."""
        self._shown = list(lines)
        body = "\r\n".join(line + RESET_STYLE for line in lines[first:])
        last = max(len(lines) - 1, 0)
        return body + self._place(cursor, from_row=last)

    def _place(self, cursor: tuple[int, int], *, from_row: int) -> str:
        row, col = cursor
        row = min(max(row, 0), max(len(self._shown) - 1, 0))
        up = from_row - row
        self._cursor_row = row
        move = f"\x1b[{up}A" if up > 0 else f"\x1b[{-up}B" if up < 0 else ""
        return f"{move}\r\x1b[{col}C" if col else f"{move}\r"

    def close(self) -> None:
        """Erase the live region and leave the cursor at the start of its first row."""
        self._write(self._to_top() + "\x1b[J")
        self._shown = []
        self._cursor_row = 0

    def _write(self, text: str) -> None:
        self.out.write(SYNC_BEGIN + HIDE_CURSOR + text + SHOW_CURSOR + SYNC_END)
        self.out.flush()
