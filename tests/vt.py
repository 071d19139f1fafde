"""A terminal emulated in memory (pyte), for drawing tests that need no real terminal."""

from __future__ import annotations

import pyte
import trio


class VirtualTerminal:
    """Text written to it is interpreted as a terminal would; ``rows`` is what shows.

    It is the ``out`` of a ``trio_session.tui`` ``Screen`` (``write``/``flush``), and
    its ``size`` is the screen's size callable. ``resize`` changes the size as a
    terminal window would (the content is kept; the program redraws on SIGWINCH).
    """

    def __init__(self, width: int, height: int) -> None:
        self.screen = pyte.HistoryScreen(width, height, history=10_000)
        self.stream = pyte.Stream(self.screen)
        self.written: list[str] = []
        self.changed = trio.Event()  # set (and replaced) on every write

    def write(self, text: str) -> int:
        self.written.append(text)
        self.stream.feed(text)
        self.changed.set()
        self.changed = trio.Event()
        return len(text)

    def flush(self) -> None:
        pass

    def size(self) -> tuple[int, int]:
        return self.screen.columns, self.screen.lines

    def resize(self, width: int, height: int) -> None:
        self.screen.resize(height, width)

    @property
    def rows(self) -> list[str]:
        """The visible rows, trailing blanks removed."""
        return [row.rstrip() for row in self.screen.display]

    @property
    def cursor(self) -> tuple[int, int]:
        """(row, column) of the cursor."""
        return self.screen.cursor.y, self.screen.cursor.x

    def scrollback(self) -> list[str]:
        """Rows that scrolled off the top, oldest first."""
        top = self.screen.history.top
        return ["".join(char.data for char in row.values()).rstrip() for row in top]
