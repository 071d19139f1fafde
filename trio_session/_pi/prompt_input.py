"""What a front end does to a prompt before the session gets it, as pi does it.

pi's ``AgentSession.prompt`` first expands the text (``/skill:name args``, then
``/template args``: see ``trio_session._pi.resources``), then — only when the prompt
would start a run, not when it is queued — checks that the model's provider has a key,
and refuses the prompt in words like ``"No API key found for openai."`` when it has
none. ``PromptInput`` is that step; the RPC server and the ``chat`` line mode call it,
so the session itself only ever sees the text to send.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._core.classes import define

if TYPE_CHECKING:
    from ..providers._base import Model
    from .resources import PiResources


class PromptRefused(Exception):
    """The prompt cannot be sent; the text says why, as pi says it."""


@define(eq=False)
class PromptInput:
    """Expands a prompt's slash command and refuses one that cannot be sent.

    Args:
        resources: the prompt templates and skills of pi's directories; none if ``None``.
        key_check: given the model a new run would use, the message refusing it (no key
            for its provider), or ``None`` when it may be sent.
    """

    resources: PiResources | None = None
    key_check: Callable[[Model], str | None] | None = None

    def commands(self) -> list[dict[str, Any]]:
        """The ``get_commands`` list: pi's shape, ``{name, description, source, sourceInfo}``.

        Returns:
            One object per prompt template (``source: "prompt"``), then per skill
            (``name: "skill:NAME"``, ``source: "skill"``).
        """
        return self.resources.commands() if self.resources is not None else []

    def expand(self, text: str) -> str:
        """``text`` with a leading ``/skill:name`` or ``/template`` expanded; else as it is.

        Args:
            text: the prompt as typed.

        Returns:
            The text the model is to get.
        """
        return self.resources.expand(text) if self.resources is not None else text

    def prepare(self, text: str, model: Model, *, starting: bool) -> str:
        """The text to send for a prompt (expanded); refused if a new run cannot start.

        Args:
            text: the prompt as typed.
            model: the model a new run would use.
            starting: the prompt starts a run (nothing is running to queue it behind).

        Returns:
            The text to send.

        Raises:
            PromptRefused: it starts a run and its provider has no key.
        """
        expanded = self.expand(text)
        if starting and self.key_check is not None:
            problem = self.key_check(model)
            if problem is not None:
                raise PromptRefused(problem)
        return expanded
