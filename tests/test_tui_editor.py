"""Editor: key sequences → text and cursor, and the layout (width, wrap, scroll)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import wcwidth
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_session.tui._editor import Editor, EditorLayout, snap_to_boundary, wrap
from trio_session.tui._external import EditorError, edit_text, editor_command
from trio_session.tui._input_history import InputHistory
from trio_session.tui._keys import Key, KeyDecoder

FAMILY = "👩\u200d👩\u200d👧"
E_ACUTE = "e\u0301"


def type_bytes(editor: Editor, data: bytes, width: int = 80) -> list[Key]:
    """Feed raw terminal bytes through a KeyDecoder into the editor; the unhandled keys."""
    decoder = KeyDecoder()
    return [key for key in decoder.feed(data) + decoder.flush() if not editor.handle(key, width)]


def editor_with(
    text: str,
    cursor: int | None = None,
    *,
    history: InputHistory | None = None,
    prompt: str = "> ",
) -> Editor:
    editor = Editor(history=history, prompt=prompt)
    editor.set_text(text, cursor)
    return editor


def test_typed_keys_edit_text_and_cursor() -> None:
    """ "hello", two lefts, "xy" → "helxylo" with the cursor after "xy"."""
    editor = Editor()
    assert type_bytes(editor, b"hello\x1b[D\x1b[Dxy") == []
    assert (editor.text, editor.cursor) == ("helxylo", 5)


def test_bracketed_paste_is_one_insert() -> None:
    """A 3-line bracketed paste is one paste key, inserted whole at the cursor."""
    decoder = KeyDecoder()
    keys = decoder.feed(b"ab\x1b[D\x1b[200~one\r\ntwo\r\nthree\x1b[201~")
    assert [key.name for key in keys] == ["char", "left", "paste"]
    editor = Editor()
    for key in keys:
        assert editor.handle(key, 40)
    assert editor.text == "aone\ntwo\nthreeb"
    assert editor.cursor == len("aone\ntwo\nthree")
    assert editor.layout(40) == EditorLayout(("> aone", "  two", "  threeb"), 2, 7)


def test_shift_and_alt_enter_insert_newline_enter_is_left_to_app() -> None:
    """Shift+Enter and Alt+Enter insert "\\n"; Enter is not handled (the app sends)."""
    editor = Editor()
    left = type_bytes(editor, b"a\x1b[13;2ub\x1b\rc\rd")
    assert editor.text == "a\nb\ncd"
    assert left == [Key("enter")]


def test_unhandled_keys_return_false() -> None:
    """enter, esc, tab, ctrl_c, ctrl_d, ctrl_l, page keys and other are the app's."""
    editor = editor_with("abc")
    for name in ("enter", "esc", "tab", "ctrl_c", "ctrl_d", "ctrl_l", "page_up", "page_down"):
        assert not editor.handle(Key(name), 80)
    assert not editor.handle(Key("other", "\x1b[15~"), 80)
    assert (editor.text, editor.cursor) == ("abc", 3)


def test_left_right_backspace_delete_step_over_grapheme_clusters() -> None:
    """e + combining accent, a ZWJ family, CJK: one step and one deletion each."""
    text = f"a{E_ACUTE}{FAMILY}中"
    editor = editor_with(text)
    steps = []
    for _ in range(5):
        editor.handle(Key("left"), 80)
        steps.append(editor.cursor)
    assert steps == [len(text) - 1, 2 + 1, 1, 0, 0]
    editor.handle(Key("right"), 80)
    editor.handle(Key("delete"), 80)
    assert editor.text == f"a{FAMILY}中"
    editor.handle(Key("end"), 80)
    editor.handle(Key("backspace"), 80)
    editor.handle(Key("backspace"), 80)
    assert (editor.text, editor.cursor) == ("a", 1)


def test_left_right_cross_newlines() -> None:
    """Left from the start of a line goes to the end of the line above."""
    editor = editor_with("ab\ncd", cursor=3)
    editor.handle(Key("left"), 80)
    assert editor.cursor == 2
    editor.handle(Key("right"), 80)
    editor.handle(Key("right"), 80)
    assert editor.cursor == 4


def test_home_end_are_the_logical_line() -> None:
    """Home/End go to the start/end of the logical line, even when it wraps."""
    text = "first line\n" + "word " * 20 + "\nlast"
    editor = editor_with(text, cursor=30)
    editor.handle(Key("home"), 20)
    assert editor.cursor == len("first line\n")
    editor.handle(Key("end"), 20)
    assert editor.cursor == len("first line\n" + "word " * 20)
    assert type_bytes(editor, b"\x01") == []  # Ctrl+A
    assert editor.cursor == len("first line\n")


def test_word_jumps() -> None:
    """Word left/right skip separators then a word (readline's M-b / M-f)."""
    editor = editor_with("foo bar.baz  qux")
    editor.handle(Key("word_left"), 80)
    assert editor.cursor == 13
    editor.handle(Key("word_left"), 80)
    assert editor.cursor == 8
    editor.handle(Key("word_left"), 80)
    assert editor.cursor == 4
    type_bytes(editor, b"\x1b[1;5D")  # Ctrl+Left
    assert editor.cursor == 0
    editor.handle(Key("word_left"), 80)
    assert editor.cursor == 0
    editor.handle(Key("word_right"), 80)
    assert editor.cursor == 3
    type_bytes(editor, b"\x1bf")  # Alt+f
    assert editor.cursor == 7
    editor.handle(Key("word_right"), 80)
    editor.handle(Key("word_right"), 80)
    assert editor.cursor == 16
    editor.handle(Key("word_right"), 80)
    assert editor.cursor == 16


def test_ctrl_u_deletes_to_line_start_and_joins_at_column_zero() -> None:
    """Ctrl+U kills back to the logical line's start; at its start it joins the lines."""
    editor = editor_with("one\ntwo three", cursor=7)
    type_bytes(editor, b"\x15")
    assert (editor.text, editor.cursor) == ("one\n three", 4)
    editor.handle(Key("ctrl_u"), 80)
    assert (editor.text, editor.cursor) == ("one three", 3)
    editor.set_text("x", cursor=0)
    editor.handle(Key("ctrl_u"), 80)
    assert (editor.text, editor.cursor) == ("x", 0)


def test_ctrl_k_deletes_to_line_end_and_joins_at_the_end() -> None:
    """Ctrl+K kills to the logical line's end; at its end it deletes the "\\n"."""
    editor = editor_with("one two\nthree", cursor=3)
    type_bytes(editor, b"\x0b")
    assert (editor.text, editor.cursor) == ("one\nthree", 3)
    editor.handle(Key("ctrl_k"), 80)
    assert (editor.text, editor.cursor) == ("onethree", 3)
    editor.handle(Key("end"), 80)
    editor.handle(Key("ctrl_k"), 80)
    assert (editor.text, editor.cursor) == ("onethree", 8)


def test_ctrl_w_and_alt_backspace_delete_the_word_before() -> None:
    """Ctrl+W kills spaces then a whitespace-delimited word before the cursor."""
    editor = editor_with("git commit -m 'fix it'  ")
    type_bytes(editor, b"\x17")
    assert editor.text == "git commit -m 'fix "
    type_bytes(editor, b"\x1b\x7f")
    assert editor.text == "git commit -m "
    editor.set_text("ab\n  cd", cursor=5)
    editor.handle(Key("ctrl_w"), 80)
    assert (editor.text, editor.cursor) == ("cd", 0)


def test_layout_empty_text_is_one_prompt_row() -> None:
    """An empty editor shows the prompt alone with the cursor after it."""
    assert Editor().layout(40) == EditorLayout(("> ",), 0, 2)


def test_layout_cjk_and_emoji_at_width_40() -> None:
    """CJK and emoji are 2 cells; a wide character never straddles; words wrap at spaces."""
    text = (
        f"日本語のテキストと絵文字{FAMILY}が混ざった入力です。 Mixed with English words and "
        f"中文 too, plus {E_ACUTE} and 🇫🇷 flags."
    )
    layout = editor_with(text).layout(40)
    assert layout.lines == (
        f"> 日本語のテキストと絵文字{FAMILY}が混ざった入",
        "  力です。 Mixed with English words and ",
        f"  中文 too, plus {E_ACUTE} and 🇫🇷 flags.",
    )
    assert [wcwidth.width(line) for line in layout.lines] == [40, 40, 32]
    assert (layout.cursor_row, layout.cursor_col) == (2, 32)


def test_layout_cjk_and_emoji_at_width_60() -> None:
    """The same text at width 60 takes two rows."""
    text = (
        f"日本語のテキストと絵文字{FAMILY}が混ざった入力です。 Mixed with English words and "
        f"中文 too, plus {E_ACUTE} and 🇫🇷 flags."
    )
    editor = editor_with(text, cursor=3)
    layout = editor.layout(60)
    assert layout.lines == (
        f"> 日本語のテキストと絵文字{FAMILY}が混ざった入力です。 Mixed with ",
        f"  English words and 中文 too, plus {E_ACUTE} and 🇫🇷 flags.",
    )
    assert (layout.cursor_row, layout.cursor_col) == (0, 8)


def test_wide_character_does_not_straddle() -> None:
    """A wide character that would end one cell past the row goes to the next row."""
    layout = editor_with("abcdefg中").layout(10)
    assert layout.lines == ("> abcdefg", "  中")
    assert (layout.cursor_row, layout.cursor_col) == (1, 4)


def test_long_input_at_width_40_wraps_with_nothing_lost() -> None:
    """A long paragraph wraps into rows of at most 40 cells that hold every character."""
    text = " ".join(f"word{n}" for n in range(60))
    layout = editor_with(text).layout(40)
    assert len(layout.lines) == 12
    assert all(wcwidth.width(line) <= 40 for line in layout.lines)
    assert all(line.startswith("  ") for line in layout.lines[1:])
    assert layout.lines[0] == "> word0 word1 word2 word3 word4 word5 "
    assert "".join(line[2:] for line in layout.lines) == text
    assert (layout.cursor_row, layout.cursor_col) == (11, wcwidth.width(layout.lines[-1]))


def test_word_longer_than_a_row_breaks_hard() -> None:
    """A word with no space to break at is cut at the row's width, nothing dropped."""
    layout = editor_with("x" * 25).layout(12)
    assert layout.lines == ("> xxxxxxxxxx", "  xxxxxxxxxx", "  xxxxx")


def test_cursor_after_a_full_row_goes_to_the_next_row() -> None:
    """At the end of an exactly full row the cursor is drawn on a new row below it."""
    editor = editor_with("a" * 8)
    assert editor.layout(10) == EditorLayout(("> aaaaaaaa", "  "), 1, 2)
    editor.insert("\nb")
    editor.handle(Key("up"), 10)
    editor.handle(Key("end"), 10)
    assert editor.layout(10) == EditorLayout(("> aaaaaaaa", "  ", "  b"), 1, 2)
    editor.handle(Key("left"), 10)
    assert editor.layout(10) == EditorLayout(("> aaaaaaaa", "  b"), 0, 9)


def test_soft_wrap_boundary_cursor_is_at_the_next_row_start() -> None:
    """The index where a row wraps is drawn at the start of the next row."""
    editor = editor_with("hello world", cursor=6)
    assert editor.layout(10) == EditorLayout(("> hello ", "  world"), 1, 2)


def test_up_down_move_by_visual_row_keeping_the_column() -> None:
    """Up/down move one wrapped row, keeping the column across a shorter row."""
    editor = editor_with("aaaaaaaaaaaaaaaa\nbb\ncccccccc", cursor=6)
    assert editor.layout(10).cursor_col == 8
    editor.handle(Key("down"), 10)  # second row of the first line
    assert editor.cursor == 14
    editor.handle(Key("down"), 10)
    assert editor.cursor == 19  # end of "bb": the line is shorter
    editor.handle(Key("down"), 10)
    assert editor.cursor == 26  # column 8 again
    editor.handle(Key("up"), 10)
    editor.handle(Key("up"), 10)
    editor.handle(Key("up"), 10)
    assert editor.cursor == 6


def test_up_down_over_wide_characters() -> None:
    """A column in the middle of a wide character lands before it."""
    editor = editor_with("abc\n中文字", cursor=3)
    editor.handle(Key("down"), 40)
    assert editor.cursor == 5  # column 5 is inside 文: before it
    editor.handle(Key("up"), 40)
    assert editor.cursor == 3  # the goal column (5) is kept


def test_history_up_down_restores_the_draft() -> None:
    """Up on the first row recalls older entries; down past the newest brings the draft back."""
    history = InputHistory(entries=["first", "second\nline"])
    editor = editor_with("draft", history=history)
    editor.handle(Key("up"), 40)
    assert editor.text == "second\nline"
    assert editor.browsing_history
    editor.handle(Key("up"), 40)  # the cursor is on the entry's last row: up moves in it
    assert editor.text == "second\nline"
    editor.handle(Key("up"), 40)
    assert editor.text == "first"
    editor.handle(Key("up"), 40)  # nothing older: to the start
    assert (editor.text, editor.cursor) == ("first", 0)
    editor.handle(Key("down"), 40)
    assert (editor.text, editor.cursor) == ("second\nline", 11)
    editor.handle(Key("down"), 40)
    assert (editor.text, editor.cursor) == ("draft", 5)
    assert not editor.browsing_history
    editor.handle(Key("down"), 40)
    assert editor.text == "draft"


def test_edit_ends_history_browsing() -> None:
    """Typing into a recalled entry makes it the text; down no longer brings the draft."""
    history = InputHistory(entries=["old"])
    editor = editor_with("draft", history=history)
    type_bytes(editor, b"\x1b[A!")
    assert editor.text == "old!"
    assert not editor.browsing_history
    editor.handle(Key("down"), 40)
    assert (editor.text, editor.cursor) == ("old!", 4)


def test_take_clears_and_adds_to_history() -> None:
    """take() returns the text unchanged, clears the editor and records it (not blanks)."""
    history = InputHistory()
    editor = Editor(history=history)
    editor.insert("  hi\nthere ")
    assert editor.take() == "  hi\nthere "
    assert (editor.text, editor.cursor) == ("", 0)
    editor.insert("   ")
    assert editor.take() == "   "
    assert history.entries == ["  hi\nthere "]
    editor.handle(Key("up"), 40)
    assert editor.text == "  hi\nthere "


def test_up_without_history_goes_to_start_down_to_end() -> None:
    """With no history, up on the first row goes to the start, down on the last to the end."""
    editor = editor_with("abc", cursor=1)
    editor.handle(Key("up"), 40)
    assert editor.cursor == 0
    editor.handle(Key("down"), 40)
    assert editor.cursor == 3


def test_max_rows_window_follows_the_cursor() -> None:
    """With max_rows, a window of rows scrolls to keep the cursor's row in view."""
    editor = editor_with("\n".join(str(n) for n in range(10)))
    layout = editor.layout(20, max_rows=3)
    assert layout == EditorLayout(("  7", "  8", "  9"), 2, 3)
    for _ in range(4):
        editor.handle(Key("up"), 20)
    layout = editor.layout(20, max_rows=3)
    assert layout == EditorLayout(("  5", "  6", "  7"), 0, 3)
    editor.handle(Key("down"), 20)
    assert editor.layout(20, max_rows=3) == EditorLayout(("  5", "  6", "  7"), 1, 3)


def test_narrow_width_keeps_every_character() -> None:
    """At the smallest width (prompt + 4) every character is still shown."""
    text = f"ab中{FAMILY}c d"
    layout = editor_with(text).layout(6)
    assert layout.lines == ("> ab中", f"  {FAMILY}c ", "  d")
    too_narrow = editor_with("abcd").layout(3)
    assert too_narrow.lines == ("abc", "d")  # no room for the prompt: it is dropped


def test_control_characters_never_reach_the_text() -> None:
    """Tabs become spaces; escape sequences and controls are dropped from inserts."""
    editor = Editor()
    editor.insert("a\tb\x1b[31mc\x00\r\nd")
    assert editor.text == "a    bc\nd"


def test_prompt_with_colour_is_measured_by_cells() -> None:
    """An SGR-coloured prompt counts only its visible cells."""
    editor = editor_with("hi", prompt="\x1b[1m❯\x1b[0m ")
    assert editor.layout(20) == EditorLayout(("\x1b[1m❯\x1b[0m hi",), 0, 4)


# -- properties ------------------------------------------------------------------

_PIECES = st.sampled_from(
    ["a", "b", "Z", "1", " ", " ", "\n", "中", "文", "é", E_ACUTE, FAMILY, "🇫🇷", "🇺", "\u0301",
     "\u200d", "😀", "\ufe0f", "ｗ", "_", ".", "x" * 15]
)  # fmt: skip
TEXTS = st.lists(_PIECES, max_size=60).map("".join)
WIDTHS = st.integers(min_value=6, max_value=120)


@settings(deadline=None, max_examples=300)
@given(TEXTS, WIDTHS, st.data())
def test_layout_rows_fit_and_hold_the_text(text: str, width: int, data: st.DataObject) -> None:
    """Every row fits; the rows hold exactly the text; the cursor is inside the rows."""
    cursor = snap_to_boundary(text, data.draw(st.integers(0, len(text))))
    editor = editor_with(text, cursor=cursor)
    layout = editor.layout(width)
    assert all(wcwidth.width(line) <= width for line in layout.lines)
    assert 0 <= layout.cursor_row < len(layout.lines)
    assert 0 <= layout.cursor_col < width
    # Cells by grapheme: wcwidth.width() counts "a\u200db" as one cell, a terminal as two.
    row = layout.lines[layout.cursor_row]
    assert layout.cursor_col <= sum(wcwidth.width(g) for g in wcwidth.iter_graphemes(row))
    assert "".join(line[2:] for line in layout.lines) == text.replace("\n", "")
    rows = wrap(text, width - 2, width - 2)
    pieces = [text[row.start : row.end] + ("" if row.soft else "\n") for row in rows]
    assert "".join(pieces) == text + "\n"
    assert all(row.start <= row.end for row in rows)


@settings(deadline=None, max_examples=300)
@given(TEXTS, WIDTHS, st.data())
def test_left_then_right_returns(text: str, width: int, data: st.DataObject) -> None:
    """Left then right comes back to the same place (when not at the start)."""
    cursor = snap_to_boundary(text, data.draw(st.integers(0, len(text))))
    editor = editor_with(text, cursor=cursor)
    editor.handle(Key("left"), width)
    assert editor.cursor < cursor or cursor == 0
    editor.handle(Key("right"), width)
    if cursor > 0:
        assert editor.cursor == cursor


_EDIT_KEY_NAMES = (
    "newline", "backspace", "delete", "left", "right", "home", "end", "word_left",
    "word_right", "ctrl_u", "ctrl_k", "ctrl_w", "up", "down",
)  # fmt: skip
_KEYS = st.one_of(
    st.sampled_from([Key(name) for name in _EDIT_KEY_NAMES]),
    TEXTS.map(lambda text: Key("char", text)),
)


@settings(deadline=None, max_examples=300)
@given(TEXTS, WIDTHS, st.lists(_KEYS, max_size=25))
def test_keys_keep_the_cursor_on_a_grapheme_boundary(
    text: str, width: int, keys: list[Key]
) -> None:
    """After any key the cursor is on a grapheme boundary and the layout holds."""
    editor = editor_with(text, history=InputHistory(entries=["older", "中文\nnewer"]))
    for key in keys:
        editor.handle(key, width)
        assert snap_to_boundary(editor.text, editor.cursor) == editor.cursor
        layout = editor.layout(width, max_rows=4)
        assert 0 <= layout.cursor_row < len(layout.lines) <= 4
        assert 0 <= layout.cursor_col < width


@settings(deadline=None, max_examples=200)
@given(TEXTS, WIDTHS, st.integers(1, 6), st.lists(_KEYS, max_size=15))
def test_max_rows_window_is_a_slice_of_the_full_layout(
    text: str, width: int, max_rows: int, keys: list[Key]
) -> None:
    """The max_rows window is consecutive rows of the full layout, with the cursor's row."""
    editor = editor_with(text)
    for key in [Key("home"), *keys]:
        editor.handle(key, width)
        window = editor.layout(width, max_rows=max_rows)
        full = editor_with(editor.text, editor.cursor).layout(width)
        assert len(window.lines) == min(max_rows, len(full.lines))
        top = full.cursor_row - window.cursor_row
        assert window.lines == full.lines[top : top + len(window.lines)]
        assert window.cursor_col == full.cursor_col


def test_wrap_cache_rewraps_only_changed_lines() -> None:
    """With a cache, a second wrap of an edited text gives the same rows as a fresh one."""
    cache: dict[tuple[str, int, int], tuple[tuple[int, int, bool], ...]] = {}
    text = "alpha beta gamma\n中文字符\n\nlast line here"
    assert wrap(text, 8, 10, cache) == wrap(text, 8, 10)
    assert len(cache) == 4
    edited = text.replace("中文字符", "中文x字符")
    assert wrap(edited, 8, 10, cache) == wrap(edited, 8, 10)
    assert ("中文字符", 10, 10) not in cache
    assert ("中文x字符", 10, 10) in cache


def keys(editor: Editor, *names: str) -> None:
    """Press keys by name (a name with a ``:`` is a ``char`` key of the text after it)."""
    for name in names:
        key = Key("char", name[1:]) if name.startswith(":") else Key(name)
        editor.handle(key, 80)


def test_ctrl_y_pastes_what_ctrl_k_cut() -> None:
    """Ctrl+K cuts to the line's end; Ctrl+Y pastes it back at the cursor."""
    editor = editor_with("hello world", 5)
    keys(editor, "ctrl_k")
    assert (editor.text, editor.cursor) == ("hello", 5)
    keys(editor, "home", "ctrl_y")
    assert (editor.text, editor.cursor) == (" worldhello", 6)


def test_cuts_in_a_row_join_and_alt_y_swaps_in_an_earlier_one() -> None:
    """Two Ctrl+W in a row are one cut; Alt+Y right after Ctrl+Y replaces the paste
    with the cut before it, and again with the one before that (a ring)."""
    editor = editor_with("one two three")
    keys(editor, "ctrl_w", "ctrl_w")  # "two three" as one cut
    assert editor.text == "one "
    keys(editor, "ctrl_u")  # a third cut in a row: it joins too
    assert editor.text == ""
    keys(editor, "ctrl_y")
    assert editor.text == "one two three"
    editor = editor_with("alpha beta")
    keys(editor, "ctrl_w", "left", "ctrl_w", "end", "ctrl_y")  # cuts: "beta", "alpha"
    assert editor.text == " alpha"
    keys(editor, "alt_y")
    assert (editor.text, editor.cursor) == (" beta", 5)
    keys(editor, "alt_y")
    assert editor.text == " alpha"


def test_alt_y_does_nothing_unless_it_follows_a_paste() -> None:
    """Alt+Y after any other key changes nothing; Ctrl+Y with nothing cut does nothing."""
    editor = editor_with("abc")
    keys(editor, "ctrl_y", "alt_y")
    assert editor.text == "abc"
    keys(editor, "ctrl_w", ":x", "alt_y")
    assert editor.text == "x"


def test_undo_takes_back_edits_a_typed_word_at_a_time() -> None:
    """Undo (Ctrl+_) takes back a cut, then typed words (a word with the space before it)
    one at a time."""
    editor = Editor()
    keys(editor, ":h", ":e", ":l", ":l", ":o", ": ", ":y", ":o", ":u")
    assert editor.text == "hello you"
    keys(editor, "ctrl_w")
    assert editor.text == "hello "
    keys(editor, "undo")
    assert (editor.text, editor.cursor) == ("hello you", 9)
    keys(editor, "undo")
    assert editor.text == "hello"
    keys(editor, "undo")
    assert (editor.text, editor.cursor) == ("", 0)
    keys(editor, "undo")
    assert editor.text == ""


def test_undo_brings_back_text_cleared_by_set_text_but_not_after_take() -> None:
    """A replaced text (Ctrl+C's clear, Tab's completion) can be undone; a sent one not."""
    editor = editor_with("draft")
    editor.set_text("")
    keys(editor, "undo")
    assert editor.text == "draft"
    editor.take()
    keys(editor, "undo")
    assert editor.text == ""


def test_editor_command_prefers_visual_then_editor() -> None:
    """$VISUAL wins over $EDITOR, split as a shell would; neither set is a clear error."""
    assert editor_command({"VISUAL": "code --wait", "EDITOR": "vi"}) == ["code", "--wait"]
    assert editor_command({"VISUAL": " ", "EDITOR": "vi -n"}) == ["vi", "-n"]
    with pytest.raises(EditorError) as raised:
        editor_command({})
    assert str(raised.value) == "set $VISUAL or $EDITOR to edit the message in an editor"


async def test_edit_text_returns_what_the_editor_saved(tmp_path: Path) -> None:
    """The text goes to a 0600 file, a real editor process changes it, the new text
    comes back without the editor's final newline, and the file is gone after."""
    seen = tmp_path / "seen"
    script = tmp_path / "fake-editor"
    script.write_text(
        '#!/bin/sh\necho "$1" > "$2"\nstat -c %a "$1" >> "$2"\ncat "$1" >> "$2"\n'
        'printf "edited\\n" >> "$1"\n'
    )
    script.chmod(0o700)
    # the seen file goes before the message's path, which the editor gets last
    result = await edit_text("first line\n", ["sh", "-c", f'exec {script} "$0" {seen}'])
    assert result == "first line\nedited"
    path, mode, text = (await trio.Path(seen).read_text()).split("\n", 2)
    assert (mode, text) == ("600", "first line\n")
    assert not await trio.Path(path).parent.exists()


async def test_edit_text_keeps_nothing_when_the_editor_fails(tmp_path: Path) -> None:
    """An editor that exits 1, or cannot start, is an error naming it."""
    with pytest.raises(EditorError) as raised:
        await edit_text("x", ["false"])
    assert str(raised.value) == "false exited with status 1; the message is unchanged"
    with pytest.raises(EditorError) as raised:
        await edit_text("x", [str(tmp_path / "no-such-editor")])
    assert str(raised.value) == (
        f"cannot run {tmp_path / 'no-such-editor'}: No such file or directory"
    )
