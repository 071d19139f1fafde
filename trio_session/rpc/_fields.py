"""The fields of RPC commands on the wire: each one's JSON key, attrs name and check."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final

from .._core.classes import frozen
from .._core.messages import ImageContent

#: The thinking levels ``set_thinking_level`` accepts (the reference's).
THINKING_LEVEL_NAMES: Final = ("off", "minimal", "low", "medium", "high", "xhigh")


@frozen
class Field:
    """One field of a command on the wire: its JSON key, attrs name and type check."""

    key: str
    name: str
    check: Callable[[Any], bool]
    expected: str
    required: bool = True


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_path(value: Any) -> bool:
    """A string the file system can take as a path: no NUL, nothing ``os.fsencode`` refuses
    (a lone surrogate from a ``\\ud800`` escape)."""
    if not isinstance(value, str) or "\0" in value:
        return False
    try:
        os.fsencode(value)
    except UnicodeEncodeError:
        return False
    return True


#: What a path field must be, as its error says.
PATH_EXPECTED: Final = "a file path (a string without NUL characters or lone surrogates)"


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


MESSAGE = Field("message", "message", _is_str, "a string")
ENABLED = Field("enabled", "enabled", _is_bool, "true or false")
PARENT = Field("parentSession", "parent_session", _is_path, PATH_EXPECTED, required=False)
PROVIDER = Field("provider", "provider", _is_str, "a string")
MODEL_ID = Field("modelId", "model_id", _is_str, "a string")
LEVEL = Field(
    "level",
    "level",
    lambda value: value in THINKING_LEVEL_NAMES,
    "one of " + ", ".join(f'"{name}"' for name in THINKING_LEVEL_NAMES),
)
COMMAND = Field("command", "command", _is_str, "a string")
EXCLUDE = Field(
    "excludeFromContext", "exclude_from_context", _is_bool, "true or false", required=False
)
OUTPUT_PATH = Field("outputPath", "output_path", _is_path, PATH_EXPECTED, required=False)


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


IMAGES = Field(
    "images",
    "images",
    _is_images,
    'a list of {"type": "image", "data": base64, "mimeType": str}',
    required=False,
)
BEHAVIOR = Field(
    "streamingBehavior",
    "streaming_behavior",
    _is_behavior,
    '"steer" or "followUp"',
    required=False,
)
MODE = Field("mode", "mode", _is_mode, '"all" or "one-at-a-time"')
INSTRUCTIONS = Field(
    "customInstructions", "custom_instructions", _is_str, "a string", required=False
)

SINCE = Field("since", "since", _is_str, "a string", required=False)
SESSION_PATH = Field("sessionPath", "session_path", _is_path, PATH_EXPECTED)
ENTRY_ID = Field("entryId", "entry_id", _is_str, "a string")
NAME = Field("name", "name", _is_str, "a string")


def images(value: list[dict[str, str]]) -> tuple[ImageContent, ...]:
    """The ``images`` field's value as image contents."""
    return tuple(ImageContent(data=item["data"], mime_type=item["mimeType"]) for item in value)
