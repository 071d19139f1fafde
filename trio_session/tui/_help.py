"""What the chat offers: its keys and slash commands, and the ``/help`` text."""

from __future__ import annotations

from ._render import Style, render_note, wrap

#: Below this many cells for a description, it goes under its key instead.
NARROW = 16

#: The status line when nothing else is to be said.
HINT = "enter: send · alt+enter: newline · esc: abort · /help: keys, commands"

COMMANDS = {
    "/new": "start a new session",
    "/resume": "pick an earlier session of this directory to continue",
    "/model": "choose the model (/model NAME picks directly)",
    "/compact": "summarize the conversation so far (/compact INSTRUCTIONS)",
    "/name": "name this session (/name TEXT)",
    "/help": "this help",
    "/quit": "leave the chat",
}

KEYS = (
    ("Enter", "send (while the agent works: queue it as a steer)"),
    ("Shift+Enter, Ctrl+J", "insert a newline (Alt+Enter too)"),
    ("Esc", "abort the running prompt; while a retry waits: cancel the retry"),
    ("Ctrl+C", "abort, else clear the editor; twice: exit"),
    ("Ctrl+D", "exit (on an empty editor)"),
    ("←/→, Ctrl/Alt+←/→", "move by character / by word"),
    ("Home/End, Ctrl+A/E", "start / end of the line"),
    ("↑/↓", "move between lines; on the first/last line: input history"),
    ("Ctrl+U / K / W", "cut to line start / to line end / the word before"),
    ("Ctrl+Y / Alt+Y", "paste what was cut last / then an earlier cut instead"),
    ("Ctrl+_ (Ctrl+-)", "undo the last edit"),
    ("Ctrl+G", "edit the message in $VISUAL or $EDITOR"),
    ("Tab", "complete a /command (the matches show above the editor)"),
    ("Ctrl+O", "show tool results in full, or collapsed again"),
    ("Ctrl+L", "redraw the screen"),
)


def render_help(width: int, *, style: Style) -> list[str]:
    """The ``/help`` text for ``width`` cells: a description that wraps keeps its column.

    Args:
        width: the terminal's width.
        style: colours or not.
    """
    key_width = max(len(key) for key, _ in KEYS)
    name_width = max(len(name) for name in COMMANDS)
    lines: list[str] = []
    for title, rows, column in (
        ("keys:", KEYS, key_width),
        ("commands:", tuple(COMMANDS.items()), name_width),
    ):
        lines += render_note(title, width, style=style)
        indent = 2 + column + 2
        for key, what in rows:
            if width - indent >= NARROW:
                first, *rest = wrap(what, width - indent)
                lines.append(f"  {key:<{column}}  {first}")
                lines += [" " * indent + row for row in rest]
            else:  # too narrow for two columns: the key, then what it does under it
                lines += ["  " + row for row in wrap(key, max(width - 2, 2))]
                lines += ["    " + row for row in wrap(what, max(width - 4, 2))]
    return lines
