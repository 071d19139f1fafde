"""The RPC wire format: JSON lines, spoken as the reference's ``--mode rpc`` speaks them.

A client writes one JSON command per line; the server writes JSON lines back —
a response to every command line, and every session event as it happens:

```text
→ {"id": "req_1", "type": "prompt", "message": "Hello"}
← {"id":"req_1","type":"response","command":"prompt","success":true,"data":{…}}
← {"type":"agent_start"}
…
← {"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"503 …"}
```

Field names are the reference's (``isStreaming``, ``autoCompactionEnabled``,
``parentSession``); events are encoded by the one codec, ``trio_session.event_to_json``.

This module holds the commands: one frozen class each and the table ``COMMANDS`` of
the fields each reads; ``parse_command`` turns a line into a command object or a
``Rejected`` (never an exception). Below them, in ``_wire``: answers, JSON lines and
the line splitter. Pure: no I/O, no session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from .._messages import ImageContent

# The wire's names, importable from here as they always were.
from ._wire import MAX_LINE_BYTES as MAX_LINE_BYTES
from ._wire import PARSE_ERROR_PREFIX as PARSE_ERROR_PREFIX
from ._wire import CommandId as CommandId
from ._wire import LineSplitter as LineSplitter
from ._wire import Overlong as Overlong
from ._wire import Rejected as Rejected
from ._wire import Response as Response
from ._wire import decode_json_line as decode_json_line
from ._wire import describe as describe
from ._wire import encode_line as encode_line
from ._wire import json_kind, parse_failure
from ._wire import response_to_json as response_to_json


@attrs.frozen
class Prompt:
    """``{"type": "prompt", "message": …, "images"?: […], "streamingBehavior"?: …}``.

    Starts a prompt; answered at once, events follow. While a prompt runs (its
    retries and backoff sleeps included), ``streamingBehavior`` ``"steer"`` or
    ``"followUp"`` queues the message instead; without it the answer is an error.

    Attributes:
        message: the prompt text.
        images: images sent with it.
        streaming_behavior: what to do if a prompt is already running: ``"steer"`` or
            ``"followUp"`` queues the message; ``None`` answers an error.
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"prompt"``; the command's name on the wire.
    """

    message: str
    images: tuple[ImageContent, ...] = ()
    streaming_behavior: Literal["steer", "followUp"] | None = None
    id: CommandId | None = None
    type: Literal["prompt"] = "prompt"


@attrs.frozen
class Abort:
    """``{"type": "abort"}`` — cancel any retry, then the run; answered once idle (R-32).

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"abort"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["abort"] = "abort"


@attrs.frozen
class AbortRetry:
    """``{"type": "abort_retry"}`` — cancel the retry chain, if one is alive (R-29, R-39).

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"abort_retry"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["abort_retry"] = "abort_retry"


@attrs.frozen
class RetryNow:
    """``{"type": "retry_now"}`` — skip the rest of the backoff sleep (R-34a).

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"retry_now"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["retry_now"] = "retry_now"


@attrs.frozen
class SetAutoRetry:
    """``{"type": "set_auto_retry", "enabled": bool}`` — write ``retry.enabled`` (R-39).

    Attributes:
        enabled: whether retryable errors are retried.
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"set_auto_retry"``; the command's name on the wire.
    """

    enabled: bool
    id: CommandId | None = None
    type: Literal["set_auto_retry"] = "set_auto_retry"


@attrs.frozen
class SetAutoCompaction:
    """``{"type": "set_auto_compaction", "enabled": bool}`` — write ``compaction.enabled``.

    Attributes:
        enabled: whether compaction runs automatically.
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"set_auto_compaction"``; the command's name on the wire.
    """

    enabled: bool
    id: CommandId | None = None
    type: Literal["set_auto_compaction"] = "set_auto_compaction"


@attrs.frozen
class GetState:
    """``{"type": "get_state"}`` — the session's state, with the retry state (R-41).

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"get_state"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["get_state"] = "get_state"


@attrs.frozen
class GetMessages:
    """``{"type": "get_messages"}`` — the runtime context, as message objects.

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"get_messages"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["get_messages"] = "get_messages"


@attrs.frozen
class NewSession:
    """``{"type": "new_session", "parentSession"?: str}`` — abort, then start afresh.

    ``parentSession`` goes into the new session file's header.

    Attributes:
        parent_session: the path of the session it continues, if any.
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"new_session"``; the command's name on the wire.
    """

    parent_session: str | None = None
    id: CommandId | None = None
    type: Literal["new_session"] = "new_session"


# -- models, thinking, stats, bash and info ------------------------------------------------


@attrs.frozen
class GetAvailableModels:
    """``{"type": "get_available_models"}`` — ``{"models": [Model, …]}``."""

    id: CommandId | None = None
    type: Literal["get_available_models"] = "get_available_models"


@attrs.frozen
class SetModel:
    """``{"type": "set_model", "provider": …, "modelId": …}`` — the Model object it chose."""

    provider: str
    model_id: str
    id: CommandId | None = None
    type: Literal["set_model"] = "set_model"


@attrs.frozen
class CycleModel:
    """``{"type": "cycle_model"}`` — ``{model, thinkingLevel, isScoped}``, or ``null``."""

    id: CommandId | None = None
    type: Literal["cycle_model"] = "cycle_model"


@attrs.frozen
class SetThinkingLevel:
    """``{"type": "set_thinking_level", "level": …}`` — clamped to the model."""

    level: str
    id: CommandId | None = None
    type: Literal["set_thinking_level"] = "set_thinking_level"


@attrs.frozen
class CycleThinkingLevel:
    """``{"type": "cycle_thinking_level"}`` — ``{"level": …}``, or ``null`` without reasoning."""

    id: CommandId | None = None
    type: Literal["cycle_thinking_level"] = "cycle_thinking_level"


@attrs.frozen
class GetSessionStats:
    """``{"type": "get_session_stats"}`` — counts, tokens, cost, context use."""

    id: CommandId | None = None
    type: Literal["get_session_stats"] = "get_session_stats"


@attrs.frozen
class GetLastAssistantText:
    """``{"type": "get_last_assistant_text"}`` — ``{"text": …}`` (``null`` if none)."""

    id: CommandId | None = None
    type: Literal["get_last_assistant_text"] = "get_last_assistant_text"


@attrs.frozen
class Bash:
    """``{"type": "bash", "command": …}`` — answered when the command is over."""

    command: str
    id: CommandId | None = None
    type: Literal["bash"] = "bash"


@attrs.frozen
class AbortBash:
    """``{"type": "abort_bash"}`` — stop the running bash command."""

    id: CommandId | None = None
    type: Literal["abort_bash"] = "abort_bash"


@attrs.frozen
class ExportHtml:
    """``{"type": "export_html", "outputPath"?: …}`` — ``{"path": …}``."""

    output_path: str | None = None
    id: CommandId | None = None
    type: Literal["export_html"] = "export_html"


@attrs.frozen
class GetCommands:
    """``{"type": "get_commands"}`` — ``{"commands": […]}`` (none are registered yet)."""

    id: CommandId | None = None
    type: Literal["get_commands"] = "get_commands"


#: The thinking levels ``set_thinking_level`` accepts (the reference's).
THINKING_LEVEL_NAMES: Final = ("off", "minimal", "low", "medium", "high", "xhigh")
# -- queues and compaction -------------------------------------------------------


@attrs.frozen
class Steer:
    """``{"type": "steer", "message": …, "images"?: […]}`` — queue a steering message."""

    message: str
    images: tuple[ImageContent, ...] = ()
    id: CommandId | None = None
    type: Literal["steer"] = "steer"


@attrs.frozen
class FollowUp:
    """``{"type": "follow_up", "message": …, "images"?: […]}`` — queue a follow-up."""

    message: str
    images: tuple[ImageContent, ...] = ()
    id: CommandId | None = None
    type: Literal["follow_up"] = "follow_up"


@attrs.frozen
class SetSteeringMode:
    """``{"type": "set_steering_mode", "mode": "all" | "one-at-a-time"}``."""

    mode: str
    id: CommandId | None = None
    type: Literal["set_steering_mode"] = "set_steering_mode"


@attrs.frozen
class SetFollowUpMode:
    """``{"type": "set_follow_up_mode", "mode": "all" | "one-at-a-time"}``."""

    mode: str
    id: CommandId | None = None
    type: Literal["set_follow_up_mode"] = "set_follow_up_mode"


@attrs.frozen
class Compact:
    """``{"type": "compact", "customInstructions"?: str}`` — compact now (aborts a run first)."""

    custom_instructions: str | None = None
    id: CommandId | None = None
    type: Literal["compact"] = "compact"


@attrs.frozen
class ClearQueue:
    """``{"type": "clear_queue"}`` — ``{"steering": [text, …], "followUp": [text, …]}``.

    Takes every queued steering and follow-up message back (pi 1.6.0, R-54).
    """

    id: CommandId | None = None
    type: Literal["clear_queue"] = "clear_queue"


@attrs.frozen
class GetAvailableThinkingLevels:
    """``{"type": "get_available_thinking_levels"}`` — ``{"levels": […]}`` (pi 1.6.0)."""

    id: CommandId | None = None
    type: Literal["get_available_thinking_levels"] = "get_available_thinking_levels"


# -- session tree --


@attrs.frozen
class GetEntries:
    """``{"type": "get_entries", "since"?: entryId}`` — ``{"entries": […], "leafId"}``.

    The session file's entries in append order (no header), only those after ``since``
    when given (pi 1.6.0).
    """

    since: str | None = None
    id: CommandId | None = None
    type: Literal["get_entries"] = "get_entries"


@attrs.frozen
class GetTree:
    """``{"type": "get_tree"}`` — ``{"tree": [node, …], "leafId"}`` (pi 1.6.0).

    A node is ``{"entry", "children", "label"?, "labelTimestamp"?}``.
    """

    id: CommandId | None = None
    type: Literal["get_tree"] = "get_tree"


@attrs.frozen
class SwitchSession:
    """``{"type": "switch_session", "sessionPath": str}`` — abort, then resume that file.

    Attributes:
        session_path: the session file to resume.
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"switch_session"``; the command's name on the wire.
    """

    session_path: str
    id: CommandId | None = None
    type: Literal["switch_session"] = "switch_session"


@attrs.frozen
class Fork:
    """``{"type": "fork", "entryId": str}`` — a new session: the branch before that user message.

    Answered ``{"text": <the message's text>, "cancelled": false}``.

    Attributes:
        entry_id: the id of the user message entry to fork before (see ``get_fork_messages``).
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"fork"``; the command's name on the wire.
    """

    entry_id: str
    id: CommandId | None = None
    type: Literal["fork"] = "fork"


@attrs.frozen
class Clone:
    """``{"type": "clone"}`` — a new session holding the whole current branch.

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"clone"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["clone"] = "clone"


@attrs.frozen
class GetForkMessages:
    """``{"type": "get_fork_messages"}`` — ``{"messages": [{"entryId", "text"}, …]}``.

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"get_fork_messages"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["get_fork_messages"] = "get_fork_messages"


@attrs.frozen
class SetSessionName:
    """``{"type": "set_session_name", "name": str}`` — the display name (not empty).

    Attributes:
        name: the new display name.
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"set_session_name"``; the command's name on the wire.
    """

    name: str
    id: CommandId | None = None
    type: Literal["set_session_name"] = "set_session_name"


Command: TypeAlias = (
    Prompt
    | Abort
    | AbortRetry
    | RetryNow
    | SetAutoRetry
    | SetAutoCompaction
    | GetState
    | GetMessages
    | NewSession
    # -- models, thinking, stats, bash and info --
    | GetAvailableModels
    | SetModel
    | CycleModel
    | SetThinkingLevel
    | CycleThinkingLevel
    | GetSessionStats
    | GetLastAssistantText
    | Bash
    | AbortBash
    | ExportHtml
    | GetCommands
    | Steer
    | FollowUp
    | SetSteeringMode
    | SetFollowUpMode
    | Compact
    | ClearQueue
    | GetAvailableThinkingLevels
    # -- session tree --
    | GetEntries
    | GetTree
    | SwitchSession
    | Fork
    | Clone
    | GetForkMessages
    | SetSessionName
)
"""Every command the RPC server accepts, as ``parse_command`` returns it; each has the
``type`` it is written with on the wire and an optional ``id`` echoed in its response."""


Parsed: TypeAlias = Command | Rejected


@attrs.frozen
class _Field:
    """One field of a command on the wire: its JSON key, attrs name and type check."""

    key: str
    name: str
    check: Callable[[Any], bool]
    expected: str
    required: bool = True


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


_MESSAGE = _Field("message", "message", _is_str, "a string")
_ENABLED = _Field("enabled", "enabled", _is_bool, "true or false")
_PARENT = _Field("parentSession", "parent_session", _is_str, "a string", required=False)
# -- models, thinking, stats, bash and info --
_PROVIDER = _Field("provider", "provider", _is_str, "a string")
_MODEL_ID = _Field("modelId", "model_id", _is_str, "a string")
_LEVEL = _Field(
    "level",
    "level",
    lambda value: value in THINKING_LEVEL_NAMES,
    "one of " + ", ".join(f'"{name}"' for name in THINKING_LEVEL_NAMES),
)
_COMMAND = _Field("command", "command", _is_str, "a string")
_OUTPUT_PATH = _Field("outputPath", "output_path", _is_str, "a string", required=False)


def _is_images(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, dict)
        and item.get("type") == "image"
        and isinstance(item.get("data"), str)
        and isinstance(item.get("mimeType"), str)
        for item in value
    )


def _is_behavior(value: Any) -> bool:
    return value in ("steer", "followUp")


def _is_mode(value: Any) -> bool:
    return value in ("all", "one-at-a-time")


_IMAGES = _Field(
    "images",
    "images",
    _is_images,
    'a list of {"type": "image", "data": base64, "mimeType": str}',
    required=False,
)
_BEHAVIOR = _Field(
    "streamingBehavior",
    "streaming_behavior",
    _is_behavior,
    '"steer" or "followUp"',
    required=False,
)
_MODE = _Field("mode", "mode", _is_mode, '"all" or "one-at-a-time"')
_INSTRUCTIONS = _Field(
    "customInstructions", "custom_instructions", _is_str, "a string", required=False
)

#: Every command this server runs, by ``type``, with the fields it reads.
COMMANDS: Final[Mapping[str, tuple[type[Command], tuple[_Field, ...]]]] = {
    "prompt": (Prompt, (_MESSAGE, _IMAGES, _BEHAVIOR)),
    "abort": (Abort, ()),
    "abort_retry": (AbortRetry, ()),
    "retry_now": (RetryNow, ()),
    "set_auto_retry": (SetAutoRetry, (_ENABLED,)),
    "set_auto_compaction": (SetAutoCompaction, (_ENABLED,)),
    "get_state": (GetState, ()),
    "get_messages": (GetMessages, ()),
    "new_session": (NewSession, (_PARENT,)),
    # -- models, thinking, stats, bash and info --
    "get_available_models": (GetAvailableModels, ()),
    "set_model": (SetModel, (_PROVIDER, _MODEL_ID)),
    "cycle_model": (CycleModel, ()),
    "set_thinking_level": (SetThinkingLevel, (_LEVEL,)),
    "cycle_thinking_level": (CycleThinkingLevel, ()),
    "get_session_stats": (GetSessionStats, ()),
    "get_last_assistant_text": (GetLastAssistantText, ()),
    "bash": (Bash, (_COMMAND,)),
    "abort_bash": (AbortBash, ()),
    "export_html": (ExportHtml, (_OUTPUT_PATH,)),
    "get_commands": (GetCommands, ()),
    # -- queues and compaction --
    "steer": (Steer, (_MESSAGE, _IMAGES)),
    "follow_up": (FollowUp, (_MESSAGE, _IMAGES)),
    "set_steering_mode": (SetSteeringMode, (_MODE,)),
    "set_follow_up_mode": (SetFollowUpMode, (_MODE,)),
    "compact": (Compact, (_INSTRUCTIONS,)),
    "clear_queue": (ClearQueue, ()),
    "get_available_thinking_levels": (GetAvailableThinkingLevels, ()),
    # -- session tree --
    "get_entries": (GetEntries, (_Field("since", "since", _is_str, "a string", required=False),)),
    "get_tree": (GetTree, ()),
    "switch_session": (
        SwitchSession,
        (_Field("sessionPath", "session_path", _is_str, "a string"),),
    ),
    "fork": (Fork, (_Field("entryId", "entry_id", _is_str, "a string"),)),
    "clone": (Clone, ()),
    "get_fork_messages": (GetForkMessages, ()),
    "set_session_name": (SetSessionName, (_Field("name", "name", _is_str, "a string"),)),
}

#: Commands of the reference's protocol that this server does not implement; they get
#: a clearer error than an unknown command.
UNSUPPORTED_COMMANDS: Final = frozenset(
    {
        "queue_message",
        "reset",
        "set_model",
        "cycle_model",
        "get_available_models",
        "set_thinking_level",
        "cycle_thinking_level",
        "set_queue_mode",
        "bash",
        "abort_bash",
        "get_session_stats",
        "export_html",
        "branch",
        "get_branch_messages",
        "get_last_assistant_text",
        "get_commands",
        "get_context",
        "extension_ui_response",
        "hook_ui_response",
    }
)


def parse_command(line: bytes) -> Parsed:
    """Turn one line (without its newline) into a command, or the reason it is not one.

    Never raises: every line gets exactly one answer (R-42). Fields the command
    does not know are ignored, as the reference does; a field it knows must have
    the right type.

    Args:
        line: the line, without its newline.
    """
    data = decode_json_line(line)
    if isinstance(data, Rejected):
        return data
    return command_from_json(data)


def command_from_json(data: Any) -> Parsed:
    """Validate decoded JSON as a command (see ``parse_command``)."""
    if not isinstance(data, dict):
        return parse_failure(f"expected a JSON object, not {json_kind(data)}")
    kind = data.get("type")
    command = kind if isinstance(kind, str) else "parse"
    raw_id = data.get("id")
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))):
        error = f'"id" must be a string or an integer, not {describe(raw_id)}'
        return Rejected(command=command, error=error)
    command_id: CommandId | None = raw_id
    if "type" not in data:
        return Rejected("parse", PARSE_ERROR_PREFIX + 'the "type" field is missing', command_id)
    if not isinstance(kind, str):
        error = f'{PARSE_ERROR_PREFIX}"type" must be a string, not {describe(kind)}'
        return Rejected("parse", error, command_id)
    spec = COMMANDS.get(kind)
    if spec is None:
        if kind in UNSUPPORTED_COMMANDS:
            known = ", ".join(sorted(COMMANDS))
            error = f"Unsupported command: {kind} (this server implements {known})"
            return Rejected(kind, error, command_id)
        return Rejected(kind, f"Unknown command: {kind}", command_id)
    cls, fields = spec
    kwargs: dict[str, Any] = {}
    for field in fields:
        value = data.get(field.key)
        if value is None:
            if field.required:
                error = f'{kind} needs "{field.key}" ({field.expected})'
                return Rejected(kind, error, command_id)
            continue
        if not field.check(value):
            error = f"{kind}.{field.key} must be {field.expected}, not {describe(value)}"
            return Rejected(kind, error, command_id)
        kwargs[field.name] = _images(value) if field is _IMAGES else value
    parsed: Command = cls(id=command_id, **kwargs)
    return parsed


def _images(value: list[dict[str, str]]) -> tuple[ImageContent, ...]:
    return tuple(ImageContent(data=item["data"], mime_type=item["mimeType"]) for item in value)
