"""The live region's layout, the footer, the picker and the transcript: pure, no terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
import wcwidth

from trio_session import AssistantMessage, TextContent, ToolCall, UserMessage
from trio_session._core.messages import ThinkingContent
from trio_session.tui._keys import Key
from trio_session.tui._layout import (
    SMALL_HEIGHT,
    FooterInfo,
    compose,
    editor_rows,
    fixed_rows,
    footer_lines,
    format_tokens,
)
from trio_session.tui._picker import Picker
from trio_session.tui._render import Style
from trio_session.tui._transcript import LABEL, ReplyView, Transcript

PLAIN = Style(color=False)


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0"),
        (999, "999"),
        (1000, "1.0k"),
        (1234, "1.2k"),
        (45_600, "46k"),
        (1_300_000, "1.3M"),
        (12_000_000, "12M"),
    ],
)
def test_format_tokens(count: int, text: str) -> None:
    """Token counts read as the reference's footer writes them."""
    assert format_tokens(count) == text


def test_footer_says_where_tokens_cost_context_and_model() -> None:
    """Line one: place and session name; line two: ↑in ↓out $cost ctx% … model, right-aligned."""
    info = FooterInfo(
        place="~/project",
        model="gpt-x",
        session_name="refactor",
        thinking="high",
        input_tokens=1234,
        output_tokens=56,
        cost=0.0123,
        context_percent=12.34,
        context_window=128_000,
    )
    top, bottom = footer_lines(info, 60, PLAIN)
    assert top == "~/project • refactor"
    assert bottom.startswith("↑1.2k ↓56 $0.012 12.3%/128k (auto)")
    assert bottom.endswith("gpt-x • high")
    assert wcwidth.width(bottom) == 60


def test_footer_shows_the_retry_state_and_the_queue() -> None:
    """While a chain runs and messages wait, the footer says so."""
    info = FooterInfo(place="/w", model="m", retry="retry 2", queued=3, context_window=1000)
    _, bottom = footer_lines(info, 80, PLAIN)
    assert "?/1.0k (auto) ↻ retry 2 ⋯ 3 queued" in bottom


def test_footer_fits_a_narrow_screen() -> None:
    """At 20 columns nothing is wider than the screen."""
    info = FooterInfo(
        place="/a/very/long/path/of/directories",
        model="some-long-model-name",
        input_tokens=10**6,
        output_tokens=10**5,
        cost=12.5,
        context_window=10**6,
    )
    assert all(wcwidth.width(line) <= 20 for line in footer_lines(info, 20, PLAIN))


def _compose(
    reply: list[str],
    height: int = 20,
    editor: tuple[str, ...] = ("> hi",),
    queue: tuple[str, ...] = (),
) -> tuple[list[str], tuple[int, int], int]:
    frame = compose(
        width=30,
        height=height,
        reply=reply,
        queue=list(queue),
        status="status",
        editor=list(editor),
        editor_cursor=(len(editor) - 1, 4),
        footer=["f1", "f2"],
        style=PLAIN,
    )
    return list(frame.lines), frame.cursor, frame.overflow


def test_compose_stacks_reply_queue_status_editor_footer() -> None:
    """Top to bottom: the reply, queued messages, status, a rule, the editor, a rule, footer."""
    lines, cursor, overflow = _compose(["r1", "r2"], queue=("  ⋯ steer: x",))
    assert lines == ["r1", "r2", "  ⋯ steer: x", "status", "─" * 30, "> hi", "─" * 30, "f1", "f2"]
    assert cursor == (5, 4)
    assert overflow == 0


def test_a_reply_taller_than_the_screen_overflows_from_the_top() -> None:
    """The reply's tail stays; the head is reported as overflow (it goes to the scrollback)."""
    reply = [f"r{i}" for i in range(30)]
    lines, cursor, overflow = _compose(reply, height=12)
    assert len(lines) == 12
    assert overflow == 30 - 6
    assert lines[:6] == reply[-6:]
    assert cursor == (6 + 2, 4)


def test_a_small_screen_drops_rules_and_footer() -> None:
    """Below SMALL_HEIGHT rows only the reply, status and editor show."""
    lines, _, _ = _compose(["r"], height=SMALL_HEIGHT - 1)
    assert lines == ["r", "status", "> hi"]


def test_the_editor_may_grow_to_half_the_screen() -> None:
    """Editor rows: at least one, up to half the screen."""
    assert editor_rows(40, fixed_rows(40, 0)) == 20
    assert editor_rows(12, fixed_rows(12, 0)) == 6
    assert editor_rows(3, fixed_rows(3, 0)) == 1


def test_picker_filters_moves_and_chooses() -> None:
    """Typing filters, Down moves, Enter chooses; Esc closes with nothing chosen."""
    picker = Picker("pick", [("apple pie", 1), ("banana split", 2), ("apple tart", 3)])
    picker.handle(Key("char", "apple"))
    assert [label for label, _ in picker.visible] == ["apple pie", "apple tart"]
    picker.handle(Key("down"))
    picker.handle(Key("down"))  # stays on the last
    picker.handle(Key("enter"))
    assert picker.closed
    assert picker.chosen == 3
    other = Picker("pick", [("x", Path("/x"))])
    other.handle(Key("esc"))
    assert other.closed
    assert other.chosen is None


def test_picker_renders_within_its_rows() -> None:
    """Title, filter line, then the items around the selection; the selection is marked."""
    picker = Picker("pick one", [(f"item {i}", i) for i in range(50)])
    for _ in range(30):
        picker.handle(Key("down"))
    lines, cursor = picker.render(30, 8, PLAIN)
    assert len(lines) == 8
    assert lines[:2] == ["pick one", "filter: "]
    assert "› item 30" in lines
    assert cursor == (1, len("filter: "))


def test_a_reply_has_one_label_whatever_its_parts() -> None:
    """Thinking, text with blank lines, a tool call: one label, every part shown."""
    message = AssistantMessage(
        content=(
            ThinkingContent("let me think"),
            TextContent("para one\n\npara two\n"),
            ToolCall(id="t", name="read", arguments={"path": "a.txt"}),
        )
    )
    lines = ReplyView(message, style=PLAIN).render(40)
    text = "\n".join(lines)
    assert lines[0] == LABEL
    assert text.count(LABEL) == 1
    assert "let me think" in text
    assert "para one" in text
    assert "para two" in text
    assert '→ read("path": "a.txt")' in text


def test_a_failed_reply_without_text_is_one_error_line() -> None:
    """An error reply with no content shows the error, no empty label."""
    message = AssistantMessage(stop_reason="error", error_message="503 overloaded")
    assert ReplyView(message, style=PLAIN).render(40) == ["  ✗ 503 overloaded"]


def test_transcript_prints_each_block_once_and_everything_on_redraw() -> None:
    """``unprinted`` gives new blocks once; ``all_lines`` gives everything again."""
    transcript = Transcript(style=PLAIN)
    transcript.add_messages([UserMessage("hello"), AssistantMessage(content=(TextContent("hi"),))])
    first = transcript.unprinted(40)
    assert first[0] == "you: hello"
    assert LABEL in first
    assert "  hi" in first
    assert transcript.unprinted(40) == []
    transcript.note("  ✓ done")
    assert transcript.unprinted(40) == ["  ✓ done"]
    assert transcript.all_lines(40) == [*first, "  ✓ done"]


def test_compose_fits_every_row_it_is_given() -> None:
    """A row wider than the screen is cut: the terminal must never wrap a live row."""
    frame = compose(
        width=20,
        height=20,
        reply=["r" * 50],
        queue=[],
        status="s" * 30,
        editor=["e" * 40],
        editor_cursor=(0, 0),
        footer=["f" * 25, "g"],
        style=PLAIN,
    )
    assert all(wcwidth.width(line) <= 20 for line in frame.lines)


def test_picker_rows_fit_even_when_empty() -> None:
    """The 'nothing to choose' row is cut to the width too."""
    picker: Picker[int] = Picker("t", [], empty="x" * 100)
    lines, _ = picker.render(30, 8, PLAIN)
    assert all(wcwidth.width(line) <= 30 for line in lines)
