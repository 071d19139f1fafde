"""A real terminal for tests: one tmux server per terminal, on a private socket."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest


class Tmux:
    """A detached tmux session running one shell command in a ``width``×``height`` terminal.

    Each has its own tmux server on a private socket (``tmux -L``) and no config file:
    nobody else's tmux, nor another test, can change or end it, and killing it ends
    nothing else.
    """

    def __init__(self, command: str, *, width: int = 100, height: int = 30) -> None:
        token = uuid.uuid4().hex[:8]
        self.socket = f"trio-session-test-{token}"
        self.name = f"trio-session-test-{token}"
        self.width = width
        size = ["-x", str(width), "-y", str(height)]
        self.tmux("new-session", "-d", "-s", self.name, *size, command)
        # The window keeps the size it is given (no client decides it for us).
        self.tmux("set-option", "-t", self.name, "window-size", "manual", check=False)
        self.socket_path = Path(self.tmux("display-message", "-p", "#{socket_path}").stdout.strip())

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a tmux command against this terminal's own server."""
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            check=check,
            capture_output=True,
            text=True,
        )

    def screen(self) -> str:
        """The visible screen, as text."""
        return self.tmux("capture-pane", "-p", "-t", self.name).stdout

    def rows(self, *, history: bool = False) -> list[str]:
        """The screen's rows with lines tmux wrapped joined again (``capture-pane -J``).

        A row we drew wider than the terminal comes back wider than the terminal here,
        so the width checks see it. With ``history``, the scrollback too.
        """
        start = ["-S", "-"] if history else []
        out = self.tmux("capture-pane", "-p", "-J", *start, "-t", self.name).stdout
        return [row.rstrip() for row in out.split("\n")]

    def keys(self, *keys: str) -> None:
        """Type keys (tmux names: ``Escape``, ``C-c``, ``Enter``, or literal text)."""
        self.tmux("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        """Type ``text`` literally (no key names), as one burst of input."""
        self.tmux("send-keys", "-t", self.name, "-l", text)

    def paste(self, text: str) -> None:
        """Paste ``text`` as a terminal does: bracketed, if the program asked for it."""
        buffer = f"b{uuid.uuid4().hex[:6]}"
        self.tmux("set-buffer", "-b", buffer, text)
        self.tmux("paste-buffer", "-p", "-d", "-b", buffer, "-t", self.name)

    def resize(self, width: int, height: int) -> None:
        """Resize the terminal (the program gets SIGWINCH)."""
        self.width = width
        self.tmux("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))

    def wait_for(self, condition: Callable[[str], bool], timeout: float = 60) -> str:
        """Poll the screen until ``condition(screen)`` holds; fail with the screen if not."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if condition(screen):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting; the screen was:\n{screen}")
            time.sleep(0.05)  # polling interval, not a wait for an outcome

    def wait_text(self, text: str, timeout: float = 60) -> str:
        """Wait until ``text`` is on the screen."""
        return self.wait_for(lambda screen: text in screen, timeout)

    def kill(self) -> None:
        """End this terminal's tmux server, and only it; remove its socket."""
        self.tmux("kill-server", check=False)
        self.socket_path.unlink(missing_ok=True)
