"""``/`` completion: the slash commands that match what is typed, and Tab. Pure.

While the editor holds one line that starts with ``/`` and has no space yet, the
commands it is a prefix of are listed above the editor (``menu_lines``). Tab
completes (``complete``): to the command and a space when one matches, else as far
as the matches agree.
"""

from __future__ import annotations

from collections.abc import Mapping

from ._render import Style, fit
from ._transcript import styled

#: At most this many matches are listed; a last row says how many more there are.
MENU_ROWS = 6


def command_matches(text: str, commands: Mapping[str, str]) -> list[tuple[str, str]]:
    """The (command, what it does) pairs ``text`` is a prefix of, in ``commands``' order.

    Args:
        text: the editor's text.
        commands: the command names (with their ``/``) and what each does.

    Returns:
        No pair unless ``text`` is one line that starts with ``/`` and has no space.
    """
    if not text.startswith("/") or any(c.isspace() for c in text):
        return []
    return [(name, what) for name, what in commands.items() if name.startswith(text)]


def complete(text: str, commands: Mapping[str, str]) -> str | None:
    """What Tab makes of ``text``: ``"/model "`` for ``"/mo"``; None if nothing to add.

    Args:
        text: the editor's text.
        commands: the command names and what each does.
    """
    names = [name for name, _ in command_matches(text, commands)]
    if len(names) == 1:
        return names[0] + " "
    prefix = min(names, default="")
    last = max(names, default="")
    while not last.startswith(prefix):  # the first and last sorted names bound the rest
        prefix = prefix[:-1]
    return prefix if len(prefix) > len(text) else None


def the_command(text: str, commands: Mapping[str, str]) -> str | None:
    """The one command ``text`` is a prefix of (``"/mo"``: ``"/model"``), if one only.

    Args:
        text: the editor's text, stripped.
        commands: the command names and what each does.
    """
    matches = command_matches(text, commands)
    return matches[0][0] if len(matches) == 1 else None


def menu_lines(matches: list[tuple[str, str]], width: int, style: Style) -> list[str]:
    """The matches as rows: ``  /model    choose the model…``, each cut to ``width``.

    Args:
        matches: what ``command_matches`` found.
        width: the terminal's width.
        style: colours or not.
    """
    if not matches:
        return []
    name_width = max(len(name) for name, _ in matches)
    shown = matches if len(matches) <= MENU_ROWS else matches[: MENU_ROWS - 1]
    rows = [f"  {styled(name.ljust(name_width), '36', style)}  {what}" for name, what in shown]
    if len(shown) < len(matches):
        rows.append(styled(f"  … {len(matches) - len(shown)} more", "2", style))
    return [fit(row, width) for row in rows]
