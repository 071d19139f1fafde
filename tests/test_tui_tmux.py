"""The terminal UI end to end: the real ``trio-session demo`` in a real terminal (tmux)."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .tmux_support import Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

ERROR = "503 Service Unavailable: the server is temporarily overloaded"


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Callable[..., Tmux]]:
    """Start ``trio-session demo`` in tmux with the given retry settings."""
    started: list[Tmux] = []

    def start(**retry: int) -> Tmux:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"retry": retry}))
        program = shlex.join(
            [sys.executable, "-m", "trio_session", "demo", "--settings", str(settings)]
        )
        before, after, done = (tmp_path / n for n in ("stty-before", "stty-after", "done"))
        command = (
            f"stty -a > {before}.a; stty -g > {before}; {program}; echo EXIT=$? > {done}; "
            f"stty -a > {after}.a; stty -g > {after}; sleep 60"
        )
        tmux = Tmux(command)
        started.append(tmux)
        return tmux

    yield start
    for tmux in started:
        tmux.kill()


def test_each_terminal_has_a_private_tmux_server() -> None:
    """Tests share no tmux server: each terminal is alone on its own, and ends with it."""
    first, second = Tmux("sleep 60"), Tmux("sleep 60")
    try:
        assert first.socket != second.socket
        for tmux in (first, second):
            listed = tmux.tmux("list-sessions", "-F", "#{session_name}").stdout
            assert listed.split() == [tmux.name]
    finally:
        first.kill()
    assert first.tmux("list-sessions", check=False).returncode != 0  # its server is gone
    try:
        assert second.tmux("list-sessions", check=False).returncode == 0  # the other lives
    finally:
        second.kill()


def test_r46_loader_appears_and_counts_down(demo: Callable[..., Tmux]) -> None:
    """R-46: "Retrying (1/3) in 3s… (esc to cancel)" appears, then counts down."""
    tmux = demo(baseDelayMs=3000)
    tmux.wait_text("Retrying (1/3) in 3s… (esc to cancel)")
    tmux.wait_text("Retrying (1/3) in 2s… (esc to cancel)")
    tmux.wait_text("Retrying (1/3) in 1s… (esc to cancel)")
    screen = tmux.wait_text("Retrying (2/3) in 6s… (esc to cancel)")
    assert screen.count(f"✗ {ERROR}") == 2


def test_r46_r47_esc_cancels_the_retry(demo: Callable[..., Tmux]) -> None:
    """R-46, R-47: Esc during the loader cancels; the outcome shows; the prompt is back."""
    tmux = demo(baseDelayMs=5000)
    tmux.wait_text("Retrying (1/3) in 5s… (esc to cancel)")
    tmux.keys("Escape")
    screen = tmux.wait_text("Retry failed after 1 attempts: Retry cancelled")
    assert "(esc to cancel)" not in screen
    # back at the prompt: a new message goes out and is answered
    tmux.keys("hello again", "Enter")
    tmux.wait_text("you: hello again")


def test_r47_failure_after_max_retries(demo: Callable[..., Tmux]) -> None:
    """R-47: when the retries run out, "Retry failed after N attempts: <error>" shows."""
    tmux = demo(baseDelayMs=200, maxRetries=1)
    tmux.wait_text(f"Retry failed after 1 attempts: {ERROR}")


def test_ctrl_c_twice_exits_and_restores_the_terminal(
    demo: Callable[..., Tmux], tmp_path: Path
) -> None:
    """Ctrl+C aborts, a second Ctrl+C exits 0, and the terminal modes are restored (stty -g)."""
    tmux = demo(baseDelayMs=5000)
    tmux.wait_text("Retrying (1/3)")
    tmux.keys("C-c")
    tmux.wait_text("press Ctrl+C again to exit")
    tmux.keys("C-c")
    tmux.wait_for(lambda _: (tmp_path / "stty-after").exists() and (tmp_path / "done").exists())
    assert (tmp_path / "done").read_text() == "EXIT=0\n"
    tmux.wait_for(lambda _: (tmp_path / "stty-after").stat().st_size > 0)
    assert (tmp_path / "stty-after").read_text() == (tmp_path / "stty-before").read_text()

    def settings(name: str) -> list[str]:  # stty -a, its line wrapping aside
        return sorted((tmp_path / name).read_text().replace(";", " ").split())

    assert settings("stty-after.a") == settings("stty-before.a")
