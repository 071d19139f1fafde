"""A running tool in the chat's live region: its call, the last rows of its output
(all with Ctrl+O) and how long it has run, as pi 1.6.0's bash row shows them."""

from __future__ import annotations

import pytest

from trio_session.tui._render import Style
from trio_session.tui._tool_view import RunningTool, format_duration

PLAIN = Style(color=False)


def test_a_bash_call_and_its_last_five_rows() -> None:
    """Collapsed: ``$ command``, how many rows are hidden, the last five, the time."""
    tool = RunningTool("bash", {"command": "make test"}, started=10.0)
    tool.output = "".join(f"line {n}\n" for n in range(1, 9))
    assert tool.render(60, 13.25, expanded=False, style=PLAIN) == [
        "  $ make test",
        "    … (3 earlier lines, ctrl+o to expand)",
        "    line 4",
        "    line 5",
        "    line 6",
        "    line 7",
        "    line 8",
        "    Elapsed 3.2s",
    ]


def test_expanded_shows_every_row() -> None:
    """Expanded (Ctrl+O): every row of the output so far, wrapped to the width."""
    tool = RunningTool("bash", {"command": "ls", "timeout": 5}, started=0.0)
    tool.output = "a\n" + "x" * 30 + "\nb\n"
    assert tool.render(24, 0.0, expanded=True, style=PLAIN) == [
        "  $ ls (timeout 5s)",
        "    a",
        "    " + "x" * 20,
        "    " + "x" * 10,
        "    b",
        "    Elapsed 0.0s",
    ]


def test_before_any_output_and_another_tool() -> None:
    """No output yet: the call and the time only; a tool other than bash shows as a call."""
    tool = RunningTool("grep", {"pattern": "TODO"}, started=0.0)
    assert tool.render(60, 1.0, expanded=False, style=PLAIN) == [
        '  → grep("pattern": "TODO")',
        "    Elapsed 1.0s",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.04, "0.0s"), (4.25, "4.2s"), (59.9, "59.9s"), (65, "1m 5s"), (3725, "1h 2m 5s")],
)
def test_durations_as_pi_writes_them(seconds: float, text: str) -> None:
    """pi's formatToolDuration: a decimal under a minute, then minutes and hours."""
    assert format_duration(seconds) == text
