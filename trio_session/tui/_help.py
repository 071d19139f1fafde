"""What the chat offers: its keys and slash commands, and the ``/help`` text."""

from __future__ import annotations

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
    ("Shift+Enter, Alt+Enter, Ctrl+J", "insert a newline"),
    ("Esc", "abort the running prompt; while a retry waits: cancel the retry"),
    ("Ctrl+C", "abort, else clear the editor; twice: exit"),
    ("Ctrl+D", "exit (on an empty editor)"),
    ("←/→, Ctrl/Alt+←/→", "move by character / by word"),
    ("Home/End, Ctrl+A/E", "start / end of the line"),
    ("↑/↓", "move between lines; on the first/last line: input history"),
    ("Ctrl+U / Ctrl+K / Ctrl+W", "delete to line start / to line end / the word before"),
    ("Ctrl+L", "redraw the screen"),
)


def help_text() -> str:
    """The ``/help`` text: the keys, then the commands."""
    key_width = max(len(key) for key, _ in KEYS)
    name_width = max(len(name) for name in COMMANDS)
    lines = ["keys:"]
    lines += [f"  {key:<{key_width}}  {what}" for key, what in KEYS]
    lines.append("commands:")
    lines += [f"  {name:<{name_width}}  {what}" for name, what in COMMANDS.items()]
    return "\n".join(lines)
