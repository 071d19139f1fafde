"""Models and thinking levels: which model a session asks, and how hard it thinks.

The public face (``set_model``, ``cycle_model``, ``set_thinking_level`` …) of
``AgentSession``; the state is the facade's model, the agent's thinking level and the
level asked for (restored when a model that reasons comes back).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._errors import TrioSessionError
from .._events import ThinkingLevelChanged
from ..providers._base import (
    DEFAULT_THINKING_LEVEL,
    THINKING_LEVELS,
    Model,
    clamp_thinking_level,
    supported_thinking_levels,
)

if TYPE_CHECKING:
    from .._agent import Agent
    from .._retry.controller import PromptController
    from .._settings import SettingsStore
    from ..providers._base import Provider
    from ..store._loaded import LoadedSession
    from .hub import EventHub
    from .journal import Journal

logger = logging.getLogger("trio_session")


def remember(settings: SettingsStore, key: str, value: str) -> None:
    """Save a choice the reference saves in its settings (``defaultThinkingLevel``,
    ``steeringMode``, ``followUpMode``).

    A settings file that cannot be written is logged, not raised: the choice is
    already in effect for this session.

    Args:
        settings: the session's settings store.
        key: the dotted settings key.
        value: the value to save.
    """
    try:
        settings.set_and_persist(key, value)
    except (OSError, TrioSessionError) as exc:
        logger.warning("could not save %s: %s", key, exc)


class ModelsPart:
    """``AgentSession``'s models and thinking levels (a base class of the facade)."""

    if not TYPE_CHECKING:
        __slots__ = ()
    _model: Model
    _models: tuple[Model, ...]
    _fallback_models: tuple[Model, ...]
    _preferred_thinking: str | None
    _provider: Provider
    _agent: Agent
    _settings: SettingsStore
    _hub: EventHub
    _journal: Journal
    _control: PromptController

    def _init_models_and_thinking(self, loaded: LoadedSession | None) -> None:
        """Resume the model and thinking level a session file last recorded, if any;
        hand the fallback models to the prompts (R-65)."""
        if self._fallback_models:
            from .._retry.fallback import Fallbacks  # only with fallback models

            self._control.fallbacks = Fallbacks(self._fallback_models)
        level = self._preferred_thinking
        if level is not None and level not in THINKING_LEVELS:
            msg = f"thinking_level must be one of {', '.join(THINKING_LEVELS)}, not {level!r}"
            raise ValueError(msg)
        if loaded is not None:
            from ..store._entries import ModelChangeEntry, ThinkingLevelChangeEntry

            for entry in loaded.entries:
                if isinstance(entry, ModelChangeEntry):
                    found = self._find_model(entry.provider, entry.model_id)
                    if found is not None:
                        self._switch_model(found)
                elif isinstance(entry, ThinkingLevelChangeEntry) and (
                    entry.thinking_level in THINKING_LEVELS and self._preferred_thinking is None
                ):
                    level = entry.thinking_level
        if level is None:
            level = self._settings.current.default_thinking_level or DEFAULT_THINKING_LEVEL
        self._preferred_thinking = level
        self._agent.thinking_level = clamp_thinking_level(self._model, level)

    def _find_model(self, provider: str, model_id: str) -> Model | None:
        for model in self.available_models:
            if model.provider == provider and model.id == model_id:
                return model
        return None

    def _switch_model(self, model: Model) -> None:
        self._model = model
        self._agent.model = model

    @property
    def available_models(self) -> tuple[Model, ...]:
        """The models ``set_model`` and ``cycle_model`` move between: ``models``, with
        the session's model first if it is not among them."""
        current = self._model
        if any(m.provider == current.provider and m.id == current.id for m in self._models):
            return self._models
        return (current, *self._models)

    async def set_model(self, model: Model) -> None:
        """Ask ``model`` from the next request on (a running turn finishes with the old one).

        As the reference does, this is allowed while a prompt runs. The thinking level
        is clamped to what ``model`` supports: one that does not reason gets ``"off"``,
        and a later switch to one that does restores the level asked for. With a session
        file, a ``model_change`` entry is recorded (written now when idle, else by the
        prompt's next flush).

        Args:
            model: the model to switch to; it uses the session's provider.
        """
        self._switch_model(model)
        if self._journal.file is not None:
            self._journal.file.append_model_change_nowait(model.provider, model.id)
        self._apply_thinking_level(self._preferred_thinking or DEFAULT_THINKING_LEVEL)
        if self._journal.file is not None and not self._control.running:
            await self._journal.flush()

    async def cycle_model(self) -> Model | None:
        """Switch to the model after the current one in ``available_models`` (wrapping).

        Returns:
            The new model, or ``None`` when there is only one model (nothing changes).
        """
        models = self.available_models
        if len(models) <= 1:
            return None
        current = self._model
        index = next(
            (
                i
                for i, m in enumerate(models)
                if (m.provider, m.id) == (current.provider, current.id)
            ),
            0,
        )
        model = models[(index + 1) % len(models)]
        await self.set_model(model)
        return model

    @property
    def thinking_level(self) -> str:
        """The thinking level requests are sent with (one of ``THINKING_LEVELS``)."""
        return self._agent.thinking_level

    @property
    def available_thinking_levels(self) -> tuple[str, ...]:
        """The levels the current model supports: ``("off",)`` unless it reasons."""
        return supported_thinking_levels(self._model)

    def set_thinking_level(self, level: str) -> None:
        """Set the thinking level, clamped to the model as the reference clamps it.

        A model that does not reason stays at ``"off"``; ``"xhigh"`` becomes ``"high"``.
        For a model that reasons, the level asked for is also remembered for later
        model switches. A change is recorded as a ``thinking_level_change`` entry
        (written by the session file's next flush).

        Args:
            level: one of ``THINKING_LEVELS``.

        Raises:
            ValueError: ``level`` is not one of ``THINKING_LEVELS``.
        """
        if level not in THINKING_LEVELS:
            msg = f"thinking level must be one of {', '.join(THINKING_LEVELS)}, not {level!r}"
            raise ValueError(msg)
        if self._model.reasoning:
            self._preferred_thinking = level
        self._apply_thinking_level(level)

    def _apply_thinking_level(self, level: str) -> None:
        effective = clamp_thinking_level(self._model, level)
        if effective != self._agent.thinking_level:
            self._agent.thinking_level = effective
            if self._journal.file is not None:
                self._journal.file.append_thinking_level_change_nowait(effective)
            if self._model.reasoning or effective != "off":
                remember(self._settings, "defaultThinkingLevel", effective)
            self._hub.emit(ThinkingLevelChanged(level=effective))

    def cycle_thinking_level(self) -> str | None:
        """Move to the next level the model supports (wrapping to ``"off"``).

        Returns:
            The new level, or ``None`` when the model does not reason (nothing changes).
        """
        if not self._model.reasoning:
            return None
        levels = self.available_thinking_levels
        current = self.thinking_level
        index = levels.index(current) if current in levels else -1
        level = levels[(index + 1) % len(levels)]
        self.set_thinking_level(level)
        return level


def models_tuple(models: Sequence[Model]) -> tuple[Model, ...]:
    """The models a session may switch between, as a tuple (an attrs converter).

    Args:
        models: the models, in order.
    """
    return tuple(models)
