"""``/`` completion: the matching commands listed, Tab completing, Enter on a unique one."""

from __future__ import annotations

from trio_session.tui._complete import (
    MENU_ROWS,
    command_matches,
    complete,
    menu_lines,
    the_command,
)
from trio_session.tui._help import COMMANDS
from trio_session.tui._render import Style

PLAIN = Style(color=False)


def test_matches_are_the_commands_a_slash_word_starts() -> None:
    """``/`` lists every command; ``/re`` only /resume; text with a space lists none."""
    assert [name for name, _ in command_matches("/", COMMANDS)] == list(COMMANDS)
    assert command_matches("/re", COMMANDS) == [("/resume", COMMANDS["/resume"])]
    assert command_matches("/model x", COMMANDS) == []
    assert command_matches("hello", COMMANDS) == []
    assert command_matches("/x\n", COMMANDS) == []


def test_tab_completes_a_unique_match_with_a_space_else_the_common_part() -> None:
    """Tab: ``/mo`` → ``/model `` (one match); ``/n`` → ``/n`` stays (two: /new, /name)."""
    commands = {"/compact": "", "/compare": "", "/model": "", "/new": "", "/name": ""}
    assert complete("/mo", commands) == "/model "
    assert complete("/c", commands) == "/compa"
    assert complete("/n", commands) is None
    assert complete("/zzz", commands) is None
    assert complete("plain", commands) is None


def test_enter_picks_the_one_command_a_prefix_names() -> None:
    """``/he`` names /help alone; ``/n`` names two, so it names none."""
    assert the_command("/he", COMMANDS) == "/help"
    assert the_command("/n", COMMANDS) is None


def test_menu_lines_align_and_say_how_many_more() -> None:
    """The menu lists name and description in two columns; past ``MENU_ROWS`` it counts."""
    many = {f"/c{n:02d}": f"command {n}" for n in range(10)}
    lines = menu_lines(command_matches("/", many), 40, PLAIN)
    assert lines[0] == "  /c00  command 0"
    assert len(lines) == MENU_ROWS
    assert lines[-1] == f"  … {10 - MENU_ROWS + 1} more"
    assert menu_lines([], 40, PLAIN) == []
    assert all(len(line) <= 12 for line in menu_lines(command_matches("/", many), 12, PLAIN))
