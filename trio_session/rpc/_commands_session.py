"""The RPC commands of models, thinking, stats, bash, info, queues and compaction.

Pure: one frozen class each, and ``DECLARED``, each class with the fields it reads,
from which ``_protocol`` builds the parse table.
"""

from __future__ import annotations

from typing import Final, Literal

from .._core.classes import frozen
from .._core.messages import ImageContent
from ._fields import (
    COMMAND,
    EXCLUDE,
    IMAGES,
    INSTRUCTIONS,
    LEVEL,
    MESSAGE,
    MODE,
    MODEL_ID,
    OUTPUT_PATH,
    PROVIDER,
    Field,
)
from ._wire import CommandId


@frozen
class GetAvailableModels:
    """``{"type": "get_available_models"}`` — ``{"models": [Model, …]}``."""

    id: CommandId | None = None
    type: Literal["get_available_models"] = "get_available_models"


@frozen
class SetModel:
    """``{"type": "set_model", "provider": …, "modelId": …}`` — the Model object it chose."""

    provider: str
    model_id: str
    id: CommandId | None = None
    type: Literal["set_model"] = "set_model"


@frozen
class CycleModel:
    """``{"type": "cycle_model"}`` — ``{model, thinkingLevel, isScoped}``, or ``null``."""

    id: CommandId | None = None
    type: Literal["cycle_model"] = "cycle_model"


@frozen
class SetThinkingLevel:
    """``{"type": "set_thinking_level", "level": …}`` — clamped to the model."""

    level: str
    id: CommandId | None = None
    type: Literal["set_thinking_level"] = "set_thinking_level"


@frozen
class CycleThinkingLevel:
    """``{"type": "cycle_thinking_level"}`` — ``{"level": …}``, or ``null`` without reasoning."""

    id: CommandId | None = None
    type: Literal["cycle_thinking_level"] = "cycle_thinking_level"


@frozen
class GetSessionStats:
    """``{"type": "get_session_stats"}`` — counts, tokens, cost, context use."""

    id: CommandId | None = None
    type: Literal["get_session_stats"] = "get_session_stats"


@frozen
class GetLastAssistantText:
    """``{"type": "get_last_assistant_text"}`` — ``{"text": …}`` (``null`` if none)."""

    id: CommandId | None = None
    type: Literal["get_last_assistant_text"] = "get_last_assistant_text"


@frozen
class Bash:
    """``{"type": "bash", "command": …, "excludeFromContext"?: …}`` — answered when the
    command is over; with ``excludeFromContext`` its result is recorded but never sent to
    the model (pi's ``!!`` prefix)."""

    command: str
    exclude_from_context: bool | None = None
    id: CommandId | None = None
    type: Literal["bash"] = "bash"


@frozen
class AbortBash:
    """``{"type": "abort_bash"}`` — stop the running bash command."""

    id: CommandId | None = None
    type: Literal["abort_bash"] = "abort_bash"


@frozen
class ExportHtml:
    """``{"type": "export_html", "outputPath"?: …}`` — ``{"path": …}``."""

    output_path: str | None = None
    id: CommandId | None = None
    type: Literal["export_html"] = "export_html"


@frozen
class GetCommands:
    """``{"type": "get_commands"}`` — ``{"commands": […]}`` (none are registered yet)."""

    id: CommandId | None = None
    type: Literal["get_commands"] = "get_commands"


# -- queues and compaction -------------------------------------------------------


@frozen
class Steer:
    """``{"type": "steer", "message": …, "images"?: […]}`` — queue a steering message."""

    message: str
    images: tuple[ImageContent, ...] = ()
    id: CommandId | None = None
    type: Literal["steer"] = "steer"


@frozen
class FollowUp:
    """``{"type": "follow_up", "message": …, "images"?: […]}`` — queue a follow-up."""

    message: str
    images: tuple[ImageContent, ...] = ()
    id: CommandId | None = None
    type: Literal["follow_up"] = "follow_up"


@frozen
class SetSteeringMode:
    """``{"type": "set_steering_mode", "mode": "all" | "one-at-a-time"}``."""

    mode: str
    id: CommandId | None = None
    type: Literal["set_steering_mode"] = "set_steering_mode"


@frozen
class SetFollowUpMode:
    """``{"type": "set_follow_up_mode", "mode": "all" | "one-at-a-time"}``."""

    mode: str
    id: CommandId | None = None
    type: Literal["set_follow_up_mode"] = "set_follow_up_mode"


@frozen
class Compact:
    """``{"type": "compact", "customInstructions"?: str}`` — compact now (aborts a run first)."""

    custom_instructions: str | None = None
    id: CommandId | None = None
    type: Literal["compact"] = "compact"


@frozen
class ClearQueue:
    """``{"type": "clear_queue"}`` — ``{"steering": [text, …], "followUp": [text, …]}``.

    Takes every queued steering and follow-up message back (pi 1.6.0, R-54).
    """

    id: CommandId | None = None
    type: Literal["clear_queue"] = "clear_queue"


@frozen
class GetAvailableThinkingLevels:
    """``{"type": "get_available_thinking_levels"}`` — ``{"levels": […]}`` (pi 1.6.0)."""

    id: CommandId | None = None
    type: Literal["get_available_thinking_levels"] = "get_available_thinking_levels"


#: Each command class of this module, with the fields it reads.
DECLARED: Final[tuple[tuple[type, tuple[Field, ...]], ...]] = (
    (GetAvailableModels, ()),
    (SetModel, (PROVIDER, MODEL_ID)),
    (CycleModel, ()),
    (SetThinkingLevel, (LEVEL,)),
    (CycleThinkingLevel, ()),
    (GetSessionStats, ()),
    (GetLastAssistantText, ()),
    (Bash, (COMMAND, EXCLUDE)),
    (AbortBash, ()),
    (ExportHtml, (OUTPUT_PATH,)),
    (GetCommands, ()),
    (Steer, (MESSAGE, IMAGES)),
    (FollowUp, (MESSAGE, IMAGES)),
    (SetSteeringMode, (MODE,)),
    (SetFollowUpMode, (MODE,)),
    (Compact, (INSTRUCTIONS,)),
    (ClearQueue, ()),
    (GetAvailableThinkingLevels, ()),
)
