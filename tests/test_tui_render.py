"""The terminal chat's text layout: display widths, word wrap, Markdown replies (pure)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trio_session.tui import _render
from trio_session.tui._help import render_help
from trio_session.tui._render import (
    MarkdownRenderer,
    Style,
    display_width,
    fit,
    render_note,
    render_user,
    split_chunks,
    wrap,
)

PLAIN = Style(color=False)
SGR = re.compile(r"\x1b\[[0-9;]*m")

POEM = (
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。Spring sleep 🌸 knows no dawn 🐦, "
    "birds sing everywhere 👨\u200d👩\u200d👧 — 夜来风雨声 🇯🇵 花落知多少"
)
FAMILY = "👨\u200d👩\u200d👧"

# Pieces the generated texts are made of: words of every width, Markdown punctuation,
# clusters that are one grapheme of several code points, long words, newlines.
PIECES = [
    " ",
    "  ",
    "\n",
    "\n\n",
    "word",
    "a",
    "supercalifragilisticexpialidocious",
    "x" * 70,
    "中文",
    "日本語のテキスト",
    "한국어",
    "😀",
    "👍🏽",
    "❤️",
    "🇺🇸",
    FAMILY,
    "e\u0301",
    "\u0301",
    "\u200d",
    "\ufe0f",
    "#",
    "## ",
    "- ",
    "1. ",
    "* ",
    "**",
    "_",
    "`",
    "```",
    "```python\n",
    "~~~",
    "> ",
    "[link](http://example.com/a/very/long/path)",
    "|",
    "---",
    "    ",
    "\t",
]
texts = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=60).map("".join),
    st.text(max_size=200),
)
widths = st.integers(min_value=10, max_value=160)


def plain(lines: list[str]) -> str:
    return "\n".join(lines)


# -- display_width ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cells"),
    [
        ("hello", 5),
        ("中文", 4),
        ("e\u0301", 1),  # a combining mark takes no cell
        ("😀", 2),
        (FAMILY, 2),  # a ZWJ sequence is one glyph
        ("🇺🇸", 2),
        ("\x1b[1;31mred\x1b[0m", 3),  # SGR takes no cell
        ("", 0),
    ],
)
def test_display_width_counts_cells(text: str, cells: int) -> None:
    """Wide characters take two cells, combining marks and SGR sequences none."""
    assert display_width(text) == cells


# -- wrap ------------------------------------------------------------------------------------


def test_wrap_breaks_at_spaces() -> None:
    """Words go to the next row whole; the spaces at the break are dropped, others kept."""
    assert wrap("the quick brown fox jumps", 10) == ["the quick", "brown fox", "jumps"]
    assert wrap("a  b", 10) == ["a  b"]


def test_wrap_keeps_lines_and_indentation() -> None:
    """Newlines split rows, empty lines stay, a line's own indentation stays."""
    assert wrap("one\n\n  two", 10) == ["one", "", "  two"]
    assert wrap("", 10) == [""]


def test_wrap_breaks_a_long_word_between_graphemes() -> None:
    """A word longer than the width is cut into rows of exactly the width."""
    assert wrap("abcdefghijkl", 5) == ["abcde", "fghij", "kl"]
    assert wrap("see abcdefghijkl", 8) == ["see abcd", "efghijkl"]


def test_wrap_never_splits_a_wide_character() -> None:
    """A wide character that would straddle the edge starts the next row."""
    assert wrap("a中文字", 4) == ["a中", "文字"]
    assert wrap(FAMILY * 3, 5) == [FAMILY * 2, FAMILY]
    assert wrap("e\u0301" * 5, 2) == ["e\u0301" * 2, "e\u0301" * 2, "e\u0301"]


@pytest.mark.parametrize(
    ("width", "rows"),
    [
        (
            40,
            [
                "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落",
                "知多少。Spring sleep 🌸 knows no dawn",
                f"🐦, birds sing everywhere {FAMILY} —",
                "夜来风雨声 🇯🇵 花落知多少",
            ],
        ),
        (
            60,
            [
                "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。Spring sleep",
                f"🌸 knows no dawn 🐦, birds sing everywhere {FAMILY} — 夜来风雨声",
                "🇯🇵 花落知多少",
            ],
        ),
    ],
)
def test_cjk_and_emoji_within_40_and_60_columns(width: int, rows: list[str]) -> None:
    """Acceptance: CJK and emoji text on a 40- and a 60-column screen, no row too wide."""
    assert wrap(POEM, width) == rows
    assert MarkdownRenderer(PLAIN).render(POEM, width) == rows
    assert all(display_width(row) <= width for row in rows)


def test_wrap_makes_control_characters_visible() -> None:
    """An escape sequence in plain text is shown, not obeyed; tabs become spaces."""
    assert wrap("a\x1b[2Jb\rc\x07", 20) == ["a␛[2Jb␍c␇"]
    assert wrap("a\r\nb\tc", 20) == ["a", "b       c"]


def test_wrap_rejects_a_width_below_two() -> None:
    """A wide character needs two cells: a narrower width is an error."""
    with pytest.raises(ValueError, match=r"^width must be at least 2 cells, not 1$"):
        wrap("x", 1)


@given(text=texts, width=widths)
def test_wrap_fits_and_loses_nothing(text: str, width: int) -> None:
    """Any text, any width: no row wider than the width, every non-space character kept."""
    rows = wrap(text, width)
    assert all(display_width(row) <= width for row in rows)
    if not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text):
        assert re.sub(r"[ \t\n]", "", "".join(rows)) == re.sub(r"[ \t\n]", "", text)
        assert len(rows) >= text.count("\n") + 1


# -- fit -------------------------------------------------------------------------------------


def test_fit_returns_a_fitting_line_unchanged() -> None:
    """A line that fits comes back as it was, styles and all."""
    line = "\x1b[1mbold\x1b[0m 中文"
    assert fit(line, 9) is line


def test_fit_cuts_keeping_styles_and_resets() -> None:
    """A styled line that is too wide is cut at the width and ends with a reset."""
    cut = fit("\x1b[31mhello world", 5)
    assert cut == "\x1b[31mhello\x1b[0m"
    assert fit("plain text here", 5) == "plain"


def test_fit_never_leaves_half_a_wide_character() -> None:
    """Cutting inside a wide character leaves the row within the width."""
    cut = fit("ab中文", 3)
    assert display_width(cut) <= 3
    assert cut.startswith("ab")


HEART = "\u2764\ufe0f"  # ❤️: U+2764 and the emoji variation selector, two cells together


def test_fit_measures_a_grapheme_split_by_a_style_as_one() -> None:
    """A character and its variation selector in separately styled pieces are one grapheme:
    measured together (two cells), cut together."""
    line = "\x1b[31m\u2764\x1b[0m\x1b[32m\ufe0f\x1b[0m ab"
    assert display_width(line) == 5
    assert fit(line, 4) == "\x1b[31m\u2764\x1b[0m\x1b[32m\ufe0f\x1b[0m a\x1b[0m"
    assert fit(line, 2) == "\x1b[31m\u2764\x1b[0m\x1b[32m\ufe0f\x1b[0m\x1b[0m"
    assert fit(line, 1) == "\x1b[31m\x1b[0m"  # no half of the heart is left


# -- user rows and notes -----------------------------------------------------------------------


def test_render_user_labels_and_indents() -> None:
    """A user message reads ``you: …``; continuation rows line up under the text."""
    assert render_user("hello", 40, style=PLAIN) == ["you: hello"]
    assert render_user("hello there world\n\nagain", 14, style=PLAIN) == [
        "you: hello",
        "     there",
        "     world",
        "",
        "     again",
    ]


def test_render_user_in_colour_styles_only_the_label() -> None:
    """In colour the label is styled; the text reads the same once SGR is removed."""
    (row,) = render_user("hello", 40)
    assert row.startswith("\x1b[")
    assert SGR.sub("", row) == "you: hello"


def test_render_note_hangs_its_continuation() -> None:
    """A note's later rows are indented 4 spaces under its first."""
    rows = render_note("  ✗ 503 Service Unavailable: the server is overloaded", 20, style=PLAIN)
    assert rows == ["  ✗ 503 Service", "    Unavailable: the", "    server is", "    overloaded"]


def test_render_note_colours_by_its_mark() -> None:
    """Errors are red, retries yellow; without colour there is no SGR at all."""
    assert render_note("  ✗ 503", 40) == ["\x1b[31m  ✗ 503\x1b[0m"]
    assert render_note("  ↻ retry 1/3 in 2s", 40) == ["\x1b[33m  ↻ retry 1/3 in 2s\x1b[0m"]
    assert render_note("  ↻ retry 1/3 in 2s", 40, style=PLAIN) == ["  ↻ retry 1/3 in 2s"]


@given(text=texts, width=widths)
def test_user_and_note_rows_fit(text: str, width: int) -> None:
    """Any text, any width: user and note rows are no wider than the width."""
    for row in [*render_user(text, width), *render_note(text, width)]:
        assert display_width(row) <= width


# -- Markdown ------------------------------------------------------------------------------------


def md(text: str, width: int = 40) -> list[str]:
    return MarkdownRenderer(PLAIN).render(text, width)


def test_markdown_headings() -> None:
    """Headings show their text, left-aligned, without the ``#`` markers."""
    assert md("# Heading\n\n## Sub\n\ntext") == ["Heading", "", "Sub", "", "text"]


def test_markdown_lists() -> None:
    """Bullets and numbers."""
    assert md("- a\n- b") == [" • a", " • b"]
    assert md("1. x\n2. y") == [" 1 x", " 2 y"]


def test_markdown_emphasis_markers_are_gone() -> None:
    """Emphasis, strong and inline code lose their markers."""
    assert md("*em* **strong** `code`") == ["em strong code"]


def test_markdown_code_block_keeps_lines_and_indentation() -> None:
    """Acceptance: a fenced code block renders, its lines and indentation intact."""
    text = "Look:\n\n```python\ndef f(x):\n    if x:\n        return 1\n```\n\nDone."
    assert md(text) == [
        "Look:",
        "",
        " def f(x):",
        "     if x:",
        "         return 1",
        "",
        "Done.",
    ]


def test_markdown_blockquote_and_link() -> None:
    """A quote gets a bar; a link shows its text and its address."""
    assert md("> quoted words") == ["▌ quoted words"]
    assert md("see [the docs](https://example.com/docs)") == [
        "see the docs (https://example.com/docs)"
    ]


def test_markdown_has_no_trailing_blanks() -> None:
    """Copied text has no padding at the ends of its rows."""
    lines = md("# Title\n\nsome words\n\n- item\n\n> quote\n\n```\ncode\n```", 60)
    assert all(line == line.rstrip() for line in lines)


def test_markdown_in_colour_styles_and_keeps_the_code_block_a_block() -> None:
    """In colour there are SGR styles; code rows keep their background to the full width."""
    text = "# Title\n\n**bold**\n\n```python\nx = 1\nprint(x)\n```"
    lines = MarkdownRenderer().render(text, 30)
    assert SGR.search(lines[0])
    assert SGR.search(lines[2])
    code = lines[4:]
    assert code
    assert all("\x1b[48;5;" in line for line in code)  # a background colour
    assert {display_width(line) for line in code} == {30}
    assert [SGR.sub("", line).strip() for line in code] == ["", "x = 1", "print(x)", ""]


def test_markdown_without_colour_has_no_escape_at_all() -> None:
    """``Style(color=False)``: not one escape sequence, whatever the Markdown."""
    text = "# T\n\n*a* **b** `c`\n\n```python\nx = 1\n```\n\n> q\n\n- l\n\n[x](http://y)"
    assert not any("\x1b" in line for line in md(text))


def test_markdown_unclosed_fence_is_a_code_block_in_progress() -> None:
    """While a code block streams in, its lines already show as code."""
    lines = MarkdownRenderer().render("Here:\n\n```python\nx = 1\n\ny = 2", 30)
    assert lines[0] == "Here:"
    assert all("\x1b[48;5;" in line for line in lines[2:])
    assert [SGR.sub("", line).strip() for line in lines[2:]] == ["", "x = 1", "", "y = 2", ""]


def test_markdown_escape_sequences_in_a_reply_are_shown_not_obeyed() -> None:
    """A reply cannot clear the screen or move the cursor."""
    assert md("a \x1b[2J b") == ["a ␛[2J b"]


def test_markdown_rejects_a_width_below_two() -> None:
    """Like ``wrap``."""
    with pytest.raises(ValueError, match=r"^width must be at least 2 cells, not 0$"):
        md("x", 0)


def texts_of(text: str) -> list[tuple[str, bool]]:
    return [(chunk.text, chunk.tight) for chunk in split_chunks(text)]


def test_split_chunks_at_blank_lines_outside_fences() -> None:
    """Blank lines split; inside a fence, or before an indented line, they do not."""
    assert texts_of("a\n\n\nb") == [("a", False), ("b", False)]
    assert texts_of("```\nx\n\ny\n```\n\nz") == [("```\nx\n\ny\n```", False), ("z", False)]
    assert texts_of("- item\n\n  more\n\nnext") == [("- item\n\n  more", False), ("next", False)]
    assert texts_of("\n\n") == []
    assert texts_of("~~~\n```\n\n~~~\n\nq") == [("~~~\n```\n\n~~~", False), ("q", False)]


def test_split_chunks_around_code_blocks_and_between_list_items() -> None:
    """A column-0 fence is a chunk of its own; list items of one kind split tight."""
    assert texts_of("Look:\n```\nx\n```\nafter") == [
        ("Look:", False),
        ("```\nx\n```", False),
        ("after", False),
    ]
    assert texts_of("Steps:\n1. a\n2. b\n   more\n- c") == [
        ("Steps:\n1. a", False),
        ("2. b\n   more\n- c", True),
    ]


def test_split_chunks_cuts_a_long_code_block_between_full_lines() -> None:
    """A long code block becomes fenced pieces of about ``CODE_PIECE`` lines."""
    body = [f"line {n}" for n in range(40)]
    body[16] = ""  # no cut next to a blank line: the first cut moves down to 18
    chunks = split_chunks("\n".join(["```py", *body]))  # still streaming: no closing fence
    assert [(c.tight, c.trim_top, c.trim_bottom) for c in chunks] == [
        (False, False, True),
        (True, True, True),
        (True, True, False),
    ]
    assert chunks[0].text == "\n".join(["```py", *body[:18], "```"])
    assert chunks[1].text == "\n".join(["```py", *body[18:34], "```"])
    assert chunks[2].text == "\n".join(["```py", *body[34:]])


def test_long_code_block_reads_as_one_block() -> None:
    """The pieces of a long code block join into one block: no gap, no padding between."""
    code = "\n".join(f"x{n} = {n}" for n in range(50))
    lines = MarkdownRenderer().render(f"```python\n{code}\n```", 30)
    assert [SGR.sub("", line).strip() for line in lines] == ["", *code.split("\n"), ""]
    assert all("\x1b[48;5;" in line for line in lines)
    assert md(f"```python\n{code}\n```") == [f" {line}" for line in code.split("\n")]


def test_tight_list_reads_as_one_list() -> None:
    """Items rendered one by one read like the list rendered whole."""
    items = "\n".join(f"- item {n}" for n in range(30))
    assert md(f"Intro:\n{items}") == ["Intro:", "", *(f" • item {n}" for n in range(30))]


def test_a_numbered_list_reaching_ten_keeps_one_number_column() -> None:
    """A 12-item list, at every point of its streaming, draws every item's text from
    one column, and its final lines are those of the list rendered whole."""
    items = [f"{n}. item {n} has words enough to wrap at thirty cells" for n in range(1, 13)]
    renderer = MarkdownRenderer(style=PLAIN)
    for count in range(1, 13):
        lines = renderer.render("\n".join(items[:count]), 30)
        columns = {line.index("item") for line in lines if re.match(r" *[0-9]+ item", line)}
        assert len(columns) == 1, lines
    assert lines == rich_whole("\n".join(items), 30)


def rich_whole(text: str, width: int) -> list[str]:
    """``text`` rendered by rich in one piece, without colour or trailing blanks."""
    import io

    from rich.console import Console
    from rich.markdown import Markdown

    out = io.StringIO()
    Console(width=width, file=out, color_system=None).print(Markdown(text))
    return [line.rstrip() for line in out.getvalue().strip("\n").splitlines()]


def test_a_numbered_list_is_numbered_as_one_list() -> None:
    """Items all written "1." are numbered 1, 2, 3, as the whole list renders them."""
    assert md("1. a\n1. b\n1. c") == [" 1 a", " 2 b", " 3 c"]


@pytest.mark.parametrize("width", [50, 60, 80])
def test_help_wraps_a_description_under_its_own_column(width: int) -> None:
    """/help: a description too long for its row goes on under where it began."""
    lines = render_help(width, style=PLAIN)
    assert all(display_width(line) <= width for line in lines)
    start = lines.index(next(line for line in lines if line.startswith("  Esc ")))
    column = lines[start].index("abort")
    follow = lines[start + 1]
    assert follow[:column].strip() == "", lines
    assert follow[column] != " ", lines


def test_help_below_two_columns_puts_what_a_key_does_under_it() -> None:
    """At 24 cells the key stands on its row and what it does goes under it, indented."""
    lines = render_help(24, style=PLAIN)
    assert lines[1:3] == ["  Enter", "    send (while the"]
    assert all(display_width(line) <= 24 for line in lines)


def test_streaming_renders_only_the_growing_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Complete chunks come from the cache: only the last one goes through rich again."""
    calls: list[str] = []
    markdown_class = _render._markdown_class

    def counting() -> Callable[..., object]:
        def make(chunk: str, **options: Any) -> object:
            calls.append(chunk)
            return markdown_class()(chunk, **options)

        return make

    monkeypatch.setattr(_render, "_markdown_class", counting)
    renderer = MarkdownRenderer(PLAIN)
    renderer.render("one\n\ntw", 40)
    renderer.render("one\n\ntwo\n\nthr", 40)
    assert calls == ["one", "tw", "two", "thr"]
    renderer.render("one\n\ntwo\n\nthree", 50)  # a new width: everything again
    assert calls[4:] == ["one", "two", "three"]
    renderer.render("one\n\ntwo\n\nthree", 50)  # the last chunk is not kept
    assert calls[7:] == ["three"]


@pytest.mark.parametrize("width", [10, 11, 17, 40, 80])
@pytest.mark.parametrize(
    "code",
    [HEART, f"a{HEART}b", f"x = '{HEART}'", f"{HEART}{HEART} love", f"e\u0301{HEART}"],
)
def test_markdown_code_block_with_an_emoji_fits_in_colour(code: str, width: int) -> None:
    """❤️ in a highlighted code block (pygments styles its two code points apart): every
    row fits the width in colour, and the heart is shown whole."""
    rows = MarkdownRenderer(Style()).render(f"```python\n{code}\n```", width)
    assert [row for row in rows if display_width(row) > width] == []
    shown = SGR.sub("", "\n".join(rows))
    assert shown.count(HEART) == shown.count("\u2764") == code.count(HEART)


@settings(max_examples=60, deadline=None)
@given(text=texts, width=widths)
@example(text=f"```python\n{HEART}\n```", width=10)  # found by this test (issue 25)
@example(text=f"```python\n\u200d{HEART}\n```", width=10)
def test_markdown_rows_fit(text: str, width: int) -> None:
    """Any text, any width: no Markdown row wider than the width, in colour or not."""
    for style in (Style(), PLAIN):
        for row in MarkdownRenderer(style).render(text, width):
            assert display_width(row) <= width


@settings(max_examples=40, deadline=None)
@given(
    text=texts,
    width=widths,
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
    color=st.booleans(),
)
def test_streamed_render_equals_a_fresh_render(
    text: str, width: int, cuts: list[int], color: bool
) -> None:
    """A text rendered as it grows reads as a fresh render at every step: the cache is invisible."""
    style = Style(color=color)
    streaming = MarkdownRenderer(style)
    for cut in sorted({min(c, len(text)) for c in cuts}):
        prefix = text[:cut]
        assert streaming.render(prefix, width) == MarkdownRenderer(style).render(prefix, width)
    assert streaming.render(text, width) == MarkdownRenderer(style).render(text, width)


def test_rich_markdown_is_imported_on_first_render_only() -> None:
    """Importing the renderer does not import rich's Markdown (markdown-it, pygments lexers)."""
    code = (
        "import sys, trio_session.tui._render as r\n"
        "print('rich.markdown' in sys.modules, 'markdown_it' in sys.modules)\n"
        "r.MarkdownRenderer().render('*x*', 20)\n"
        "print('rich.markdown' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False", "True"]
