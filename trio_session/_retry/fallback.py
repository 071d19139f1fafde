"""Fallback models (R-65 … R-67): the next model once the policy has nothing left to try.

A session given ``fallback_models`` keeps them here, in order. Each prompt starts on the
session's own model; when a retry chain gives up on a retryable error, or (pi-1.6) a
usage limit finds no free key, the controller asks for the next model of the list this
prompt has not tried, switches the agent to it and goes on (R-65). The switch lasts
until the prompt ends: ``restore`` puts the session's model back (R-66), so the next
prompt starts on it again — as pydantic-ai's ``FallbackModel`` starts every request
on its first model, and litellm every call on the model asked for.

The session's own ``model`` never changes here, and no ``model_change`` entry is
written: the replies say which model answered (``AssistantMessage.model``).
"""

from __future__ import annotations

import attrs

from .._agent.loop import Agent
from .._core.classes import define
from ..providers._base import Model, clamp_thinking_level


def model_name(model: Model) -> str:
    """``"provider/id"``, as ``model_fallback`` names a model.

    Args:
        model: the model.
    """
    return f"{model.provider}/{model.id}"


def _same(a: Model, b: Model) -> bool:
    return a.provider == b.provider and a.id == b.id


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class Fallbacks:
    """A session's fallback models, and how far the running prompt has gone down them.

    Attributes:
        models: the fallback models, in the order they are tried.
    """

    models: tuple[Model, ...]
    # The next index of ``models`` this prompt may try.
    _next: int = attrs.field(default=0, init=False)
    # While the prompt is on a fallback: the model and thinking level it started with,
    # and the fallback it is on now (``restore`` puts them back).
    _primary: Model | None = attrs.field(default=None, init=False)
    _level: str = attrs.field(default="off", init=False)
    _on: Model | None = attrs.field(default=None, init=False)

    def _find(self, agent: Agent) -> int | None:
        """The index of the next model to try: not tried yet this prompt, and neither
        the model the prompt started on nor the one it is on."""
        primary = self._primary if self._primary is not None else agent.model
        for index in range(self._next, len(self.models)):
            model = self.models[index]
            if not _same(model, primary) and not _same(model, agent.model):
                return index
        return None

    def left(self, agent: Agent) -> bool:
        """Whether a fallback model is left for this prompt.

        Args:
            agent: the agent the prompt runs.
        """
        return self._find(agent) is not None

    def switch(self, agent: Agent) -> tuple[str, str]:
        """Move the agent to the next fallback model (call only when ``left``).

        The thinking level is clamped to the new model, as ``set_model`` clamps it;
        ``restore`` puts the old one back.

        Args:
            agent: the agent the prompt runs.

        Returns:
            The names (``model_name``) of the model given up on and of the one the run
            continues on, as ``model_fallback`` gives them.
        """
        index = self._find(agent)
        assert index is not None
        was = agent.model
        if self._primary is None:
            self._primary, self._level = was, agent.thinking_level
        model = self._on = self.models[index]
        self._next = index + 1
        agent.model = model
        agent.thinking_level = clamp_thinking_level(model, self._level)
        return model_name(was), model_name(model)

    def restore(self, agent: Agent) -> None:
        """The prompt is over: back to the model it started on, unless ``set_model``
        chose another meanwhile (that choice stands).

        Args:
            agent: the agent the prompt ran.
        """
        if self._primary is not None and agent.model is self._on:
            agent.model = self._primary
            agent.thinking_level = self._level
        self._next = 0
        self._primary = self._on = None
