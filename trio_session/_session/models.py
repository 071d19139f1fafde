"""Models and thinking levels: which model a session asks, and how hard it thinks.

``ModelChoice`` switches the agent's model and thinking level, records each change and
remembers the level asked for; ``AgentSession``'s ``set_model``, ``cycle_model``,
``set_thinking_level`` … are its public face.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._core.classes import define
from .._core.errors import TrioSessionError
from .._core.events import ThinkingLevelChanged
from ..providers._base import (
    DEFAULT_THINKING_LEVEL,
    THINKING_LEVELS,
    Model,
    clamp_thinking_level,
    supported_thinking_levels,
)

if TYPE_CHECKING:
    from .._agent.loop import Agent
    from .._settings.store import SettingsStore
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


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class ModelChoice:
    """Which model one session asks, and how hard it thinks.

    ``current`` is the session's model (``AgentSession.model``); the agent asks it,
    except while a prompt runs on a fallback model (R-66, which sets the agent's model
    and restores it). The thinking level is the agent's (``agent.thinking_level``,
    clamped); beside it this keeps the level asked for (``preferred_thinking``),
    restored when a model that reasons comes back.

    Attributes:
        current: the session's model.
        agent: whose model and thinking level are switched.
        settings: where ``defaultThinkingLevel`` is read and saved.
        hub: where ``thinking_level_changed`` goes.
        journal: the session file the changes are recorded in, if any.
        models: the models a session may switch between (``AgentSession``'s ``models``).
        preferred_thinking: the thinking level asked for; ``None`` until resolved.
    """

    current: Model
    agent: Agent
    settings: SettingsStore
    hub: EventHub
    journal: Journal
    models: tuple[Model, ...] = ()
    preferred_thinking: str | None = None

    def resume(self, loaded: LoadedSession | None) -> None:
        """Take the model and thinking level a session file last recorded, if any;
        else the level asked for, the settings' ``defaultThinkingLevel`` or the
        reference's default.

        Raises:
            ValueError: the level asked for is not one of ``THINKING_LEVELS``.
        """
        level = self.preferred_thinking
        if level is not None and level not in THINKING_LEVELS:
            msg = f"thinking_level must be one of {', '.join(THINKING_LEVELS)}, not {level!r}"
            raise ValueError(msg)
        if loaded is not None:
            from ..store._entries import ModelChangeEntry, ThinkingLevelChangeEntry

            for entry in loaded.entries:
                if isinstance(entry, ModelChangeEntry):
                    found = self._find(entry.provider, entry.model_id)
                    if found is not None:
                        self.current = self.agent.model = found
                elif isinstance(entry, ThinkingLevelChangeEntry) and (
                    entry.thinking_level in THINKING_LEVELS and self.preferred_thinking is None
                ):
                    level = entry.thinking_level
        if level is None:
            level = self.settings.current.default_thinking_level or DEFAULT_THINKING_LEVEL
        self.preferred_thinking = level
        self.agent.thinking_level = clamp_thinking_level(self.current, level)

    def _find(self, provider: str, model_id: str) -> Model | None:
        for model in self.available:
            if model.provider == provider and model.id == model_id:
                return model
        return None

    @property
    def available(self) -> tuple[Model, ...]:
        """``models``, with the current model first if it is not among them."""
        current = self.current
        if any(m.provider == current.provider and m.id == current.id for m in self.models):
            return self.models
        return (current, *self.models)

    async def switch(self, model: Model, *, idle: bool) -> None:
        """Ask ``model`` from the next request on; the thinking level follows it.

        Args:
            model: the model to switch to.
            idle: no prompt runs: the ``model_change`` entry is written now (else the
                prompt's next flush writes it).
        """
        self.current = self.agent.model = model
        file = self.journal.file
        if file is not None:
            file.append_model_change_nowait(model.provider, model.id)
        self._apply_thinking_level(self.preferred_thinking or DEFAULT_THINKING_LEVEL)
        if file is not None and idle:
            await self.journal.flush()

    def next_model(self) -> Model | None:
        """The model after the current one in ``available`` (wrapping); ``None`` when
        there is only one."""
        models = self.available
        if len(models) <= 1:
            return None
        current = self.current
        index = next(
            (
                i
                for i, m in enumerate(models)
                if (m.provider, m.id) == (current.provider, current.id)
            ),
            0,
        )
        return models[(index + 1) % len(models)]

    def set_thinking_level(self, level: str) -> None:
        """Set the level, clamped to the model; remembered for later switches when the
        model reasons.

        Raises:
            ValueError: ``level`` is not one of ``THINKING_LEVELS``.
        """
        if level not in THINKING_LEVELS:
            msg = f"thinking level must be one of {', '.join(THINKING_LEVELS)}, not {level!r}"
            raise ValueError(msg)
        if self.current.reasoning:
            self.preferred_thinking = level
        self._apply_thinking_level(level)

    def _apply_thinking_level(self, level: str) -> None:
        model = self.current
        effective = clamp_thinking_level(model, level)
        if effective != self.agent.thinking_level:
            self.agent.thinking_level = effective
            if self.journal.file is not None:
                self.journal.file.append_thinking_level_change_nowait(effective)
            if model.reasoning or effective != "off":
                remember(self.settings, "defaultThinkingLevel", effective)
            self.hub.emit(ThinkingLevelChanged(level=effective))

    def next_thinking_level(self) -> str | None:
        """The level after the current one the model supports (wrapping to ``"off"``);
        ``None`` when the model does not reason."""
        model = self.current
        if not model.reasoning:
            return None
        levels = supported_thinking_levels(model)
        current = self.agent.thinking_level
        index = levels.index(current) if current in levels else -1
        return levels[(index + 1) % len(levels)]


def models_tuple(models: Sequence[Model]) -> tuple[Model, ...]:
    """The models a session may switch between, as a tuple (an attrs converter).

    Args:
        models: the models, in order.
    """
    return tuple(models)
