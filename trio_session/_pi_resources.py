"""pi's prompt templates and skills, read from its agent directory and the project's.

Filled in by ``load_resources``; ``PiResources.expand`` is what pi's prompt does to
``/skill:name args`` and ``/template args`` before the model sees the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class PiResources:
    """The prompt templates and skills found, and what could not be read.

    Attributes:
        warnings: one line per file left out, and why.
    """

    warnings: tuple[str, ...] = ()

    def commands(self) -> list[dict[str, Any]]:
        """The ``get_commands`` entries, pi's shape."""
        return []

    def expand(self, text: str) -> str:
        """``text`` with its slash command expanded (as it is if it has none)."""
        return text


def load_resources(agent_dir: Path | None, *, cwd: Path) -> PiResources:
    """The templates and skills of ``agent_dir`` and of ``cwd``'s ``.pi`` directory.

    Args:
        agent_dir: pi's agent directory; none are read without it.
        cwd: the working directory, whose ``.pi/prompts`` and ``.pi/skills`` count too.

    Returns:
        What was found.
    """
    del agent_dir, cwd
    return PiResources()
