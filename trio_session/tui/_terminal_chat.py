"""The chat on a real terminal: raw mode, the screen on stdout, keys from a descriptor."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

from .._pi.prompt_input import PromptInput
from .._session.facade import AgentSession
from ._app import Banner, ChatApp, SessionOpener
from ._input_history import InputHistory
from ._render import Style
from ._terminal import KeyReader, Screen, cooked_terminal, raw_terminal


def color_wanted() -> bool:
    """Colour unless ``NO_COLOR`` is set (https://no-color.org) or ``TERM=dumb``."""
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


async def run_terminal_chat(
    session: AgentSession | None = None,
    *,
    opener: SessionOpener | None = None,
    resume: Path | None = None,
    sessions_dir: Path | None = None,
    history: InputHistory | None = None,
    first_prompt: str | None = None,
    banner: Banner | None = None,
    prompt_input: PromptInput | None = None,
    pick_session: bool = False,
    fd: int = 0,
    out: TextIO | None = None,
) -> None:
    """Run the chat on the terminal at ``fd`` (keys) and ``out`` (screen, stdout).

    Give it a ``session`` to chat with, or an ``opener`` (with ``resume``) that
    opens sessions, so ``/new`` and ``/resume`` work; ``pick_session`` opens the
    ``/resume`` picker at the start.
    """
    out = out or sys.stdout
    with raw_terminal(fd, out) as saved:
        app = ChatApp(
            Screen(out),
            KeyReader(fd),
            history=history if history is not None else InputHistory(),
            opener=opener,
            sessions_dir=sessions_dir,
            style=Style(color=color_wanted()),
            prompt_input=prompt_input if prompt_input is not None else PromptInput(),
            suspend=lambda: cooked_terminal(fd, saved, out),
        )
        await app.run(
            session,
            resume=resume,
            first_prompt=first_prompt,
            banner=banner,
            pick_session=pick_session,
        )
