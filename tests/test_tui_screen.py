"""The screen: scrollback lines above, a live region below, redrawn by difference."""

from __future__ import annotations

from trio_session.tui._terminal import CLEAR_ALL, Screen

from .vt import VirtualTerminal


def make(width: int = 30, height: int = 8) -> tuple[VirtualTerminal, Screen]:
    vt = VirtualTerminal(width, height)
    return vt, Screen(vt, size=vt.size)


def test_live_region_is_drawn_and_the_cursor_placed() -> None:
    """The live region shows at the top of a fresh screen; the cursor goes where asked."""
    vt, screen = make()
    screen.live(["status", "> hello"], cursor=(1, 7))
    assert vt.rows[:3] == ["status", "> hello", ""]
    assert vt.cursor == (1, 7)


def test_a_redraw_rewrites_only_from_the_first_changed_row() -> None:
    """Unchanged rows above the first change are not written again."""
    vt, screen = make()
    screen.live(["reply line", "status", "> a"], cursor=(2, 3))
    vt.written.clear()
    screen.live(["reply line", "status", "> ab"], cursor=(2, 4))
    drawn = "".join(vt.written)
    assert "reply line" not in drawn
    assert "status" not in drawn
    assert "> ab" in drawn
    assert vt.rows[:3] == ["reply line", "status", "> ab"]
    assert vt.cursor == (2, 4)


def test_a_shorter_live_region_leaves_nothing_behind() -> None:
    """Rows the new region no longer has are erased."""
    vt, screen = make()
    screen.live(["one", "two", "three", "> x"], cursor=(3, 3))
    screen.live(["> x"], cursor=(0, 3))
    assert vt.rows[:4] == ["> x", "", "", ""]


def test_printed_lines_go_above_the_live_region() -> None:
    """Finished lines are added above; the live region is drawn again below them."""
    vt, screen = make()
    screen.live(["status", "> "], cursor=(1, 2))
    screen.print(["you: hi", "assistant:"], ["status", "> "], cursor=(1, 2))
    assert vt.rows[:4] == ["you: hi", "assistant:", "status", ">"]
    assert vt.cursor == (3, 2)


def test_lines_scroll_into_the_scrollback_and_stay_in_order() -> None:
    """More lines than the screen holds scroll up, in order, none lost or repeated."""
    vt, screen = make(height=5)
    screen.live(["status", "> "], cursor=(1, 2))
    for i in range(10):
        screen.print([f"line {i}"], ["status", "> "], cursor=(1, 2))
    shown = [row for row in vt.scrollback() + vt.rows if row.startswith("line")]
    assert shown == [f"line {i}" for i in range(10)]
    assert vt.rows[-2:] == ["status", ">"]


def test_the_cursor_can_sit_on_any_row_of_the_region() -> None:
    """A cursor in the middle of the region (a multi-row editor) is found again next time."""
    vt, screen = make()
    screen.live(["status", "> one", "  two", "footer"], cursor=(1, 5))
    assert vt.cursor == (1, 5)
    screen.live(["status", "> one", "  two!", "footer"], cursor=(2, 6))
    assert vt.rows[:4] == ["status", "> one", "  two!", "footer"]
    assert vt.cursor == (2, 6)
    screen.live(["status", "> one", "  two!", "footer"], cursor=(0, 0))
    assert vt.cursor == (0, 0)


def test_wide_characters_are_placed_by_display_width() -> None:
    """CJK rows are drawn as given; the cursor column is in cells."""
    vt, screen = make()
    screen.live(["> 日本語"], cursor=(0, 8))
    assert vt.rows[0] == "> 日本語"
    assert vt.cursor == (0, 8)


def test_redraw_all_clears_and_draws_everything_again() -> None:
    """After a resize the screen and scrollback are cleared and redrawn at the new size."""
    vt, screen = make()
    screen.print(["old line"], ["status"], cursor=(0, 0))
    vt.resize(20, 8)
    screen.redraw_all(["new line"], ["status", "> "], cursor=(1, 2))
    assert CLEAR_ALL in vt.written[-1]
    assert vt.rows[:3] == ["new line", "status", ">"]
    assert vt.cursor == (2, 2)


def test_close_erases_the_live_region_only() -> None:
    """On exit the live region goes; the transcript stays."""
    vt, screen = make()
    screen.print(["you: hi"], ["status", "> ", "footer"], cursor=(1, 2))
    screen.close()
    assert vt.rows[:4] == ["you: hi", "", "", ""]
    assert vt.cursor == (1, 0)
