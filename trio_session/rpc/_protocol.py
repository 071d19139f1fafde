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

from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from .._core.classes import frozen
from .._core.messages import ImageContent
from . import _commands_session, _commands_tree
from ._commands_session import AbortBash as AbortBash
from ._commands_session import Bash as Bash
from ._commands_session import ClearQueue as ClearQueue
from ._commands_session import Compact as Compact
from ._commands_session import CycleModel as CycleModel
from ._commands_session import CycleThinkingLevel as CycleThinkingLevel
from ._commands_session import ExportHtml as ExportHtml
from ._commands_session import FollowUp as FollowUp

# The commands declared by concern, importable from here as they always were.
from ._commands_session import GetAvailableModels as GetAvailableModels
from ._commands_session import GetAvailableThinkingLevels as GetAvailableThinkingLevels
from ._commands_session import GetCommands as GetCommands
from ._commands_session import GetLastAssistantText as GetLastAssistantText
from ._commands_session import GetSessionStats as GetSessionStats
from ._commands_session import SetFollowUpMode as SetFollowUpMode
from ._commands_session import SetModel as SetModel
from ._commands_session import SetSteeringMode as SetSteeringMode
from ._commands_session import SetThinkingLevel as SetThinkingLevel
from ._commands_session import Steer as Steer
from ._commands_tree import Clone as Clone
from ._commands_tree import Fork as Fork
from ._commands_tree import GetEntries as GetEntries
from ._commands_tree import GetForkMessages as GetForkMessages
from ._commands_tree import GetTree as GetTree
from ._commands_tree import SetSessionName as SetSessionName
from ._commands_tree import SwitchSession as SwitchSession
from ._fields import BEHAVIOR, ENABLED, IMAGES, MESSAGE, PARENT, Field, images

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


@frozen
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


@frozen
class Abort:
    """``{"type": "abort"}`` — cancel any retry, then the run; answered once idle (R-32).

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"abort"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["abort"] = "abort"


@frozen
class AbortRetry:
    """``{"type": "abort_retry"}`` — cancel the retry chain, if one is alive (R-29, R-39).

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"abort_retry"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["abort_retry"] = "abort_retry"


@frozen
class RetryNow:
    """``{"type": "retry_now"}`` — skip the rest of the backoff sleep (R-34a).

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"retry_now"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["retry_now"] = "retry_now"


@frozen
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


@frozen
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


@frozen
class GetState:
    """``{"type": "get_state"}`` — the session's state, with the retry state (R-41).

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"get_state"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["get_state"] = "get_state"


@frozen
class GetMessages:
    """``{"type": "get_messages"}`` — the runtime context, as message objects.

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"get_messages"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["get_messages"] = "get_messages"


@frozen
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


#: The commands of this module, with the fields each reads; then those of the others.
_DECLARED: Final[tuple[tuple[type, tuple[Field, ...]], ...]] = (
    (Prompt, (MESSAGE, IMAGES, BEHAVIOR)),
    (Abort, ()),
    (AbortRetry, ()),
    (RetryNow, ()),
    (SetAutoRetry, (ENABLED,)),
    (SetAutoCompaction, (ENABLED,)),
    (GetState, ()),
    (GetMessages, ()),
    (NewSession, (PARENT,)),
    *_commands_session.DECLARED,
    *_commands_tree.DECLARED,
)


def _wire_name(cls: type) -> str:
    """A command class's ``type`` on the wire: its ``type`` field's default."""
    name = attrs.fields_dict(cls)["type"].default
    assert isinstance(name, str)
    return name


#: Every command this server runs, by ``type``, with the fields it reads.
COMMANDS: Final[Mapping[str, tuple[type[Command], tuple[Field, ...]]]] = {
    _wire_name(cls): (cls, fields) for cls, fields in _DECLARED
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
        kwargs[field.name] = images(value) if field is IMAGES else value
    parsed: Command = cls(id=command_id, **kwargs)
    return parsed
