"""The chat's multi-line input editor. Pure: keys in, text, cursor and rows out.

The text is a plain ``str`` with ``"\\n"`` between lines (no other control
characters: what comes in goes through ``clean_text``). The cursor is an index
into it, always at a grapheme-cluster boundary: every step, deletion and width is
by grapheme cluster, so ``"e\\u0301"`` or a ZWJ family emoji is one step, and CJK
and emoji take two cells (``wcwidth``).

``layout`` turns the text into screen rows: the prompt before the first row, the
continuation prefix before every other one. Each logical line wraps at the last
space that still fits, else at a grapheme boundary; the spaces stay in their rows,
so no character is ever dropped — only a ``max_rows`` window scrolls.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

import attrs
import wcwidth

from .._core.classes import define, frozen
from ._input_history import InputHistory
from ._keys import Key, clean_text

_BREAK_SPACES = (" ", "\u3000")
_MIN_TEXT_CELLS = 2  # room for one wide character


def _cells(grapheme: str) -> int:
    return max(0, wcwidth.width(grapheme))


def _text_cells(text: str) -> int:
    return sum(_cells(g) for g in wcwidth.iter_graphemes(text))


def next_boundary(text: str, index: int) -> int:
    """The grapheme boundary after ``index`` (``len(text)`` at the end)."""
    if index >= len(text):
        return len(text)
    for grapheme in wcwidth.iter_graphemes(text, index):
        return index + len(grapheme)
    return len(text)  # pragma: no cover - iter_graphemes yields for non-empty text


def previous_boundary(text: str, index: int) -> int:
    """The grapheme boundary before ``index`` (0 at the start)."""
    if index <= 0:
        return 0
    return wcwidth.grapheme_boundary_before(text, min(index, len(text)))


def snap_to_boundary(text: str, index: int) -> int:
    """``index`` if it is a grapheme boundary, else the end of the cluster it is in."""
    index = max(0, min(index, len(text)))
    if index in (0, len(text)):
        return index
    start = wcwidth.grapheme_boundary_before(text, index + 1)
    return index if start == index else next_boundary(text, start)


def _is_word(grapheme: str) -> bool:
    return grapheme[0].isalnum() or grapheme[0] == "_"


@frozen
class Row:
    """One screen row of the text: ``text[start:end]``.

    ``soft`` is true when the logical line goes on in the next row (a wrap), false
    when the row ends a logical line (at a ``"\\n"`` or the end of the text).
    """

    start: int
    end: int
    soft: bool


_Spans = tuple[tuple[int, int, bool], ...]
WrapCache = dict[tuple[str, int, int], _Spans]


def wrap(text: str, first_cells: int, rest_cells: int, cache: WrapCache | None = None) -> list[Row]:
    """Rows of ``text``: ``first_cells`` wide for the first row, ``rest_cells`` after.

    A logical line (between ``"\\n"``) breaks after its last space that fits, or,
    with no such space, before the grapheme that does not fit; a wide character
    never straddles two rows. Every character of ``text`` but the ``"\\n"`` is in
    exactly one row, in order.

    ``cache`` (logical line and widths → its rows) is read, then left holding
    just this text's lines: an edit re-wraps only the lines it changed.
    """
    rows: list[Row] = []
    old = cache.copy() if cache else {}
    if cache is not None:
        cache.clear()
    base = 0
    for line in text.split("\n"):
        key = (line, first_cells if not rows else rest_cells, rest_cells)
        spans = old.get(key)
        if spans is None:
            spans = _wrap_line(line, key[1], rest_cells)
        if cache is not None:
            cache[key] = spans
        rows.extend(Row(base + start, base + end, soft) for start, end, soft in spans)
        base += len(line) + 1
    return rows


def _wrap_line(line: str, first_cells: int, rest_cells: int) -> _Spans:
    """The rows of one logical line, as (start, end, soft) offsets into it."""
    spans: list[tuple[int, int, bool]] = []
    row_start = 0
    cells = 0
    avail = first_cells
    # The last place to break in this row (after a space that is not the row's
    # first grapheme) and the row's cells up to it.
    break_at: int | None = None
    break_cells = 0
    pos = 0
    for grapheme in wcwidth.iter_graphemes(line):
        width = _cells(grapheme)
        while cells + width > avail and pos > row_start:
            if break_at is not None:
                end, cells = break_at, cells - break_cells
            else:
                end, cells = pos, 0
            spans.append((row_start, end, True))
            row_start, avail, break_at = end, rest_cells, None
        cells += width
        pos += len(grapheme)
        if grapheme in _BREAK_SPACES and pos - len(grapheme) > row_start:
            break_at, break_cells = pos, cells
    spans.append((row_start, len(line), False))
    return tuple(spans)


@frozen
class EditorLayout:
    """The editor on screen: rows (prefixes included) and where the cursor is.

    Every row is at most ``width`` cells (``wcwidth.width``); ``cursor_row``
    indexes ``lines`` and ``0 <= cursor_col < width``.
    """

    lines: tuple[str, ...]
    cursor_row: int
    cursor_col: int


@frozen
class _Screen:
    """The full layout before the ``max_rows`` window, for drawing and for up/down."""

    rows: list[Row]
    prompt: str
    continuation: str
    first_cells: int  # the prompt's width
    rest_cells: int  # the continuation's width
    width: int
    text_row: int  # the row the cursor's index is in
    cursor_row: int
    cursor_col: int
    # The cursor sits after a full row that ends a logical line: it is drawn on an
    # extra empty row below that one (cursor_row is text_row + 1).
    overflow: bool

    def prefix_cells(self, row: int) -> int:
        return self.first_cells if row == 0 else self.rest_cells


#: Keys that cut into the kill ring, and keys that paste from it.
KILLS = frozenset({"ctrl_u", "ctrl_k", "ctrl_w"})
YANKS = frozenset({"ctrl_y", "alt_y"})
#: Cuts the kill ring keeps.
KILL_RING = 30


@define(eq=False)
class Editor:
    """A multi-line input: text and a cursor, edited by ``Key`` values.

    ``prompt`` starts the first row, ``continuation`` every other row (both may
    hold SGR colour sequences; their width is measured with ``wcwidth``).
    """

    history: InputHistory | None = None
    prompt: str = "> "
    continuation: str = "  "
    _text: str = attrs.field(default="", init=False)
    _cursor: int = attrs.field(default=0, init=False)
    # Up/down keep the display column they started from.
    _goal_col: int | None = attrs.field(default=None, init=False)
    # While browsing history: the entry shown, and the draft to come back to.
    _browse: int | None = attrs.field(default=None, init=False)
    _draft: str = attrs.field(default="", init=False)
    _top: int = attrs.field(default=0, init=False)
    # Cut text, the latest last (Ctrl+Y pastes it, Alt+Y an earlier one instead).
    _kills: list[str] = attrs.field(factory=list, init=False)
    _yanked: tuple[int, int] | None = attrs.field(default=None, init=False)
    # (text, cursor) before each edit, for undo; a run of typing is one edit.
    _undo: list[tuple[str, int]] = attrs.field(factory=list, init=False)
    _last_key: str = attrs.field(default="", init=False)
    _wrap_cache: WrapCache = attrs.field(factory=dict, init=False)
    _last_wrap: tuple[tuple[str, int, int], list[Row]] | None = attrs.field(
        default=None, init=False
    )

    @property
    def text(self) -> str:
        """The text being edited."""
        return self._text

    @property
    def cursor(self) -> int:
        """The cursor: an index into ``text``, at a grapheme boundary."""
        return self._cursor

    @property
    def browsing_history(self) -> bool:
        """True while the text shown is a history entry recalled with up/down."""
        return self._browse is not None

    def set_text(self, text: str, cursor: int | None = None) -> None:
        """Replace the text (cleaned as ``clean_text`` does); cursor at the end by default.

        A change can be undone.
        """
        cleaned = clean_text(text)
        before = text if cursor is None else text[: max(0, cursor)]
        if cleaned != self._text:
            self._undo.append((self._text, self._cursor))
            self._last_key = ""
        self._replace(cleaned, len(clean_text(before)))

    def insert(self, text: str) -> None:
        """Insert typed or pasted text (may hold ``"\\n"``) at the cursor."""
        text = clean_text(text)
        if not text:
            return
        self._replace(
            self._text[: self._cursor] + text + self._text[self._cursor :],
            self._cursor + len(text),
        )

    def take(self) -> str:
        """The text, for sending: clears the editor and adds the text to history."""
        text = self._text
        if self.history is not None and text.strip():
            self.history.add(text)
        self._replace("", 0)
        self._top = 0
        self._undo.clear()
        return text

    # -- keys -------------------------------------------------------------------

    def handle(self, key: Key, width: int) -> bool:
        """Apply an editing key; False for a key the editor leaves to the app.

        Those are enter, esc, tab, ctrl_c, ctrl_d, ctrl_l, ctrl_o, ctrl_g, page_up,
        page_down and other. ``width`` is the terminal's, for up/down over wrapped rows.
        Ctrl+U, Ctrl+K and Ctrl+W cut into a kill ring (cuts in a row join into one),
        Ctrl+Y pastes the latest cut, Alt+Y right after it swaps in an earlier one;
        undo takes back the last edit (a run of typed text is one edit).
        """
        name = key.name
        if name == "undo":
            if self._undo:
                self._replace(*self._undo.pop())
            self._last_key = name
            return True
        before = (self._text, self._cursor)
        handled = self._edit(key, width)
        typing = name == "char" == self._last_key and not key.text.isspace()
        if handled and self._text != before[0] and not typing:
            self._undo.append(before)
        if handled:
            self._last_key = name
        return handled

    def _edit(self, key: Key, width: int) -> bool:
        name = key.name
        if name in ("up", "down"):
            self._vertical(name == "up", width)
            return True
        self._goal_col = None
        text, cursor = self._text, self._cursor
        if name in ("char", "paste"):
            self.insert(key.text)
        elif name == "newline":
            self.insert("\n")
        elif name == "backspace":
            self._delete(previous_boundary(text, cursor), cursor)
        elif name == "delete":
            self._delete(cursor, next_boundary(text, cursor))
        elif name == "left":
            self._cursor = previous_boundary(text, cursor)
        elif name == "right":
            self._cursor = next_boundary(text, cursor)
        elif name == "home":
            self._cursor = self._line_start()
        elif name == "end":
            self._cursor = self._line_end()
        elif name == "word_left":
            self._cursor = self._word_left()
        elif name == "word_right":
            self._cursor = self._word_right()
        elif name == "ctrl_u":
            start = self._line_start()
            self._kill(start if start < cursor else previous_boundary(text, cursor), cursor)
        elif name == "ctrl_k":
            end = self._line_end()
            self._kill(cursor, end if end > cursor else next_boundary(text, cursor), backward=False)
        elif name == "ctrl_w":
            self._kill(self._unix_word_start(), cursor)
        elif name == "ctrl_y" and self._kills:
            self._yank(self._kills[-1], cursor, cursor)
        elif name == "alt_y" and self._yanked is not None and self._last_key in YANKS:
            self._kills.insert(0, self._kills.pop())
            self._yank(self._kills[-1], *self._yanked)
        elif name not in YANKS:
            return False
        return True

    def _kill(self, start: int, end: int, *, backward: bool = True) -> None:
        """Cut ``start``…``end`` into the kill ring; right after another cut, join it
        (before it when cutting ``backward`` from the cursor, else after it)."""
        if start >= end:
            return
        cut = self._text[start:end]
        if self._last_key in KILLS and self._kills:
            joined = cut + self._kills[-1] if backward else self._kills[-1] + cut
            self._kills[-1] = joined
        else:
            self._kills.append(cut)
            del self._kills[:-KILL_RING]
        self._delete(start, end)

    def _yank(self, text: str, start: int, end: int) -> None:
        """Put ``text`` in place of ``start``…``end``; remember where, for Alt+Y."""
        self._replace(self._text[:start] + text + self._text[end:], start + len(text))
        self._yanked = (start, start + len(text))

    def _replace(self, text: str, cursor: int) -> None:
        """Every edit goes through here: it ends history browsing."""
        self._text = text
        self._cursor = snap_to_boundary(text, cursor)
        self._browse = None
        self._draft = ""
        self._goal_col = None

    def _delete(self, start: int, end: int) -> None:
        if start < end:
            self._replace(self._text[:start] + self._text[end:], start)

    def _line_start(self) -> int:
        return self._text.rfind("\n", 0, self._cursor) + 1

    def _line_end(self) -> int:
        end = self._text.find("\n", self._cursor)
        return len(self._text) if end < 0 else end

    def _backward(self) -> Iterator[str]:
        return wcwidth.iter_graphemes_reverse(self._text, 0, self._cursor)

    def _word_left(self) -> int:
        """Back over what is not a word, then over a word (readline's M-b)."""
        index = self._cursor
        seen_word = False
        for grapheme in self._backward():
            if _is_word(grapheme):
                seen_word = True
            elif seen_word:
                break
            index -= len(grapheme)
        return index

    def _word_right(self) -> int:
        """Forward over what is not a word, then over a word (readline's M-f)."""
        index = self._cursor
        seen_word = False
        for grapheme in wcwidth.iter_graphemes(self._text, index):
            if _is_word(grapheme):
                seen_word = True
            elif seen_word:
                break
            index += len(grapheme)
        return index

    def _unix_word_start(self) -> int:
        """Back over whitespace, then over what is not whitespace (Ctrl+W)."""
        index = self._cursor
        seen_word = False
        for grapheme in self._backward():
            if not grapheme.isspace():
                seen_word = True
            elif seen_word:
                break
            index -= len(grapheme)
        return index

    # -- up/down and history -------------------------------------------------------

    def _vertical(self, up: bool, width: int) -> None:
        screen = self._screen(width, self.prompt, self.continuation)
        if self._goal_col is None:
            self._goal_col = screen.cursor_col
        # The row the cursor's index is in; on the extra row below it, up goes to it.
        row = screen.text_row
        target = (row if screen.overflow else row - 1) if up else row + 1
        if 0 <= target < len(screen.rows):
            self._cursor = self._column_in_row(screen, target, self._goal_col)
        elif up:
            self._history_back()
        else:
            self._history_forward()

    def _column_in_row(self, screen: _Screen, target: int, goal: int) -> int:
        """The index in row ``target`` whose display column is the last one <= ``goal``."""
        row = screen.rows[target]
        text = self._text
        last = previous_boundary(text, row.end) if row.soft else row.end
        col = screen.prefix_cells(target)
        best = row.start
        index = row.start
        for grapheme in wcwidth.iter_graphemes(text, row.start, row.end):
            if index >= last:
                break
            col += _cells(grapheme)
            index += len(grapheme)
            if col > goal or col >= screen.width:
                break
            best = index
        return best

    def _history_back(self) -> None:
        entries = self.history.entries if self.history is not None else []
        if self._browse is None:
            if not entries:
                self._cursor = 0
                return
            draft, index = self._text, len(entries) - 1
        elif self._browse > 0:
            draft, index = self._draft, self._browse - 1
        else:
            self._cursor = 0
            return
        self._show_entry(entries[index], index, draft)

    def _history_forward(self) -> None:
        entries = self.history.entries if self.history is not None else []
        if self._browse is None:
            self._cursor = len(self._text)
            return
        index = self._browse + 1
        if index >= len(entries):
            self._replace(self._draft, len(self._draft))
        else:
            self._show_entry(entries[index], index, self._draft)

    def _show_entry(self, entry: str, index: int, draft: str) -> None:
        goal = self._goal_col
        entry = clean_text(entry)
        self._replace(entry, len(entry))
        self._browse, self._draft, self._goal_col = index, draft, goal

    # -- layout -----------------------------------------------------------------

    def _rows(self, first_cells: int, rest_cells: int) -> list[Row]:
        key = (self._text, first_cells, rest_cells)
        if self._last_wrap is None or self._last_wrap[0] != key:
            rows = wrap(self._text, first_cells, rest_cells, self._wrap_cache)
            self._last_wrap = (key, rows)
        return self._last_wrap[1]

    def _screen(self, width: int, prompt: str, continuation: str) -> _Screen:
        first, rest = _cells_of_prefix(prompt), _cells_of_prefix(continuation)
        width = max(width, _MIN_TEXT_CELLS)
        if width - max(first, rest) < _MIN_TEXT_CELLS:  # too narrow for the prefixes
            prompt, continuation, first, rest = "", "", 0, 0
        rows = self._rows(width - first, width - rest)
        row_index = bisect.bisect_right(rows, self._cursor, key=lambda row: row.start) - 1
        row = rows[row_index]
        before = self._text[row.start : self._cursor]
        col = (first if row_index == 0 else rest) + _text_cells(before)
        overflow = col >= width
        if overflow:  # after a full row that ends a logical line: an extra row below
            col = rest
        return _Screen(
            rows=rows,
            prompt=prompt,
            continuation=continuation,
            first_cells=first,
            rest_cells=rest,
            width=width,
            text_row=row_index,
            cursor_row=row_index + int(overflow),
            cursor_col=col,
            overflow=overflow,
        )

    def layout(
        self,
        width: int,
        *,
        max_rows: int | None = None,
        prompt: str | None = None,
        continuation: str | None = None,
    ) -> EditorLayout:
        """The rows to draw at ``width`` cells and where the cursor goes.

        ``prompt``/``continuation`` default to the editor's. With ``max_rows`` a
        window of that many rows scrolls to keep the cursor's row in view (it moves
        only as far as it must). A width too narrow for the prefixes (under
        prefix + 2 cells) drops them; widths under 2 count as 2.
        """
        screen = self._screen(
            width,
            self.prompt if prompt is None else prompt,
            self.continuation if continuation is None else continuation,
        )
        total = len(screen.rows) + int(screen.overflow)
        cursor_row = screen.cursor_row
        top = 0
        if max_rows is not None and 0 < max_rows < total:
            top = min(self._top, cursor_row)
            top = max(top, cursor_row - max_rows + 1)
            top = min(top, total - max_rows)
            bottom = top + max_rows
        else:
            bottom = total
        self._top = top
        lines = []
        for index in range(top, bottom):
            if screen.overflow and index >= screen.cursor_row:
                if index == screen.cursor_row:
                    lines.append(screen.continuation)
                    continue
                index -= 1
            row = screen.rows[index]
            prefix = screen.prompt if index == 0 else screen.continuation
            lines.append(prefix + self._text[row.start : row.end])
        return EditorLayout(tuple(lines), cursor_row - top, screen.cursor_col)


def _cells_of_prefix(prefix: str) -> int:
    return max(0, wcwidth.width(prefix))
