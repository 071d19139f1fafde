"""Images a model does not read, as pi 1.6.0 sends them: a text in their place.

pi's ``transformMessages`` (every API) replaces each run of image parts of a user
message or tool result with one text part when the model's ``input`` has no
``"image"``: ``(image omitted: model does not support images)`` in a user message,
``(tool image omitted: model does not support images)`` in a tool result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._core.messages import ImageContent, Message, TextContent, ToolResultMessage, UserMessage
from ._base import Model

NO_TOOL_IMAGE = "(tool image omitted: model does not support images)"
NO_USER_IMAGE = "(image omitted: model does not support images)"


def without_images(parts: Sequence[Any], placeholder: str) -> tuple[Any, ...]:
    """``parts`` with each run of images as one ``placeholder`` text part."""
    kept: list[Any] = []
    for part in parts:
        if isinstance(part, ImageContent):
            last = kept[-1] if kept else None
            if not (isinstance(last, TextContent) and last.text == placeholder):
                kept.append(TextContent(placeholder))
        else:
            kept.append(part)
    return tuple(kept)


def readable(messages: tuple[Message, ...], model: Model) -> tuple[Message, ...]:
    """``messages`` as ``model`` can read them: unchanged for a model that reads images,
    else with pi's placeholders where user messages and tool results had images."""
    if "image" in model.input:
        return messages
    return tuple(_readable(message) for message in messages)


def _readable(message: Message) -> Message:
    if isinstance(message, UserMessage) and message.images:
        return attrs.evolve(message, content=without_images(message.content, NO_USER_IMAGE))
    if isinstance(message, ToolResultMessage) and any(
        isinstance(p, ImageContent) for p in message.content
    ):
        return attrs.evolve(message, content=without_images(message.content, NO_TOOL_IMAGE))
    return message
