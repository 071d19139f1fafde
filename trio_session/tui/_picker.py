"""A list to choose from in place of the editor (``/resume``, ``/model``). Pure.

Up/Down (and Page Up/Down) move the selection, typing filters the list (every
word of the filter must appear, case ignored), Backspace edits the filter,
Enter chooses, Esc closes without choosing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import attrs

from .._core.classes import define
from ._keys import Key
from ._render import Style, display_width, fit
from ._transcript import styled

T = TypeVar("T")


@define(eq=False)
class Picker(Generic[T]):
    """A titled list of ``(label, value)`` items with a selection and a filter."""

    title: str
    items: Sequence[tuple[str, T]]
    query: str = ""
    selected: int = 0
    empty: str = "(nothing to choose)"
    chosen: T | None = attrs.field(default=None, init=False)
    closed: bool = attrs.field(default=False, init=False)

    @property
    def visible(self) -> list[tuple[str, T]]:
        """The items the filter lets through, in order."""
        words = self.query.lower().split()
        return [item for item in self.items if all(w in item[0].lower() for w in words)]

    def handle(self, key: Key, page: int = 10) -> None:
        """Apply one key; sets ``chosen`` (Enter on an item) or ``closed`` (Esc, Enter)."""
        count = len(self.visible)
        if key.name == "esc" or key.name == "ctrl_c":
            self.closed = True
        elif key.name == "enter":
            if count:
                self.chosen = self.visible[min(self.selected, count - 1)][1]
            self.closed = True
        elif key.name in ("up", "down", "page_up", "page_down") and count:
            step = {"up": -1, "down": 1, "page_up": -page, "page_down": page}[key.name]
            self.selected = min(max(self.selected + step, 0), count - 1)
        elif key.name in ("char", "paste"):
            self.query += key.text.replace("\n", " ")
            self.selected = 0
        elif key.name == "backspace":
            self.query = self.query[:-1]
            self.selected = 0

    def render(self, width: int, rows: int, style: Style) -> tuple[list[str], tuple[int, int]]:
        """At most ``rows`` lines (title, filter, items around the selection) and the cursor."""
        visible = self.visible
        head = [
            fit(styled(self.title, "1", style), width),
            fit(f"filter: {self.query}", width),
        ]
        room = max(rows - len(head), 1)
        start = min(max(self.selected - room // 2, 0), max(len(visible) - room, 0))
        lines = list(head)
        for index, (label, _value) in enumerate(visible[start : start + room], start):
            marker = "› " if index == self.selected else "  "
            line = fit(marker + label, width)
            lines.append(styled(line, "7", style) if index == self.selected else line)
        if not visible:
            lines.append(fit("  (nothing matches)" if self.items else f"  {self.empty}", width))
        cursor = (1, min(display_width("filter: " + self.query), width - 1))
        return lines[: max(rows, 2)], cursor
