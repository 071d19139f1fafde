"""Conversation messages: what the model sees and what the history keeps.

The shapes follow the reference's messages so that files and wire formats stay
compatible: a user message, an assistant message (with ``stopReason``,
``errorMessage`` and ``usage``), and a tool result. They are frozen values; the
JSON codec in ``trio_session._codec`` turns them into the reference's camelCase
objects and back.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]
STOP_REASONS: frozenset[str] = frozenset({"stop", "length", "toolUse", "error", "aborted"})


def now_ms() -> int:
    """Wall-clock time in integer milliseconds, as message timestamps use."""
    return int(time.time() * 1000)


@attrs.frozen
class TextContent:
    """A piece of text in a message."""

    text: str
    type: Literal["text"] = "text"


@attrs.frozen
class ToolCall:
    """The model asking for a tool to be run."""

    id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    type: Literal["toolCall"] = "toolCall"


ContentPart: TypeAlias = TextContent | ToolCall


@attrs.frozen
class Usage:
    """Token counts reported by the provider for one assistant message."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total_tokens(self) -> int:
        """All tokens counted for the request and its answer."""
        return self.input + self.output + self.cache_read + self.cache_write

    @property
    def context_tokens(self) -> int:
        """Tokens that occupied the context window (``input + cacheRead``, R-7)."""
        return self.input + self.cache_read


@attrs.frozen
class UserMessage:
    """A message the user sent."""

    content: str
    timestamp: int = attrs.field(factory=now_ms)
    role: Literal["user"] = "user"

    @property
    def text(self) -> str:
        """The message text."""
        return self.content


def _parts(value: Any) -> tuple[ContentPart, ...]:
    return tuple(value)


@attrs.frozen
class AssistantMessage:
    """A message produced by the model, possibly ending in an error.

    Errors at the provider boundary are values, not exceptions: a failed
    request ends as an ``AssistantMessage`` with ``stop_reason == "error"`` and
    a human-readable ``error_message`` (HTTP status, the server's own message,
    retry headers). The retry policy reads only that text.
    """

    content: tuple[ContentPart, ...] = attrs.field(default=(), converter=_parts)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    usage: Usage = attrs.field(factory=Usage)
    provider: str = ""
    model: str = ""
    timestamp: int = attrs.field(factory=now_ms)
    role: Literal["assistant"] = "assistant"

    @property
    def text(self) -> str:
        """All text parts joined."""
        return "".join(p.text for p in self.content if isinstance(p, TextContent))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls the model asked for, in order."""
        return tuple(p for p in self.content if isinstance(p, ToolCall))

    @property
    def failed(self) -> bool:
        """Whether the message ended in ``error`` or ``aborted`` (never re-sent, R-20a)."""
        return self.stop_reason in ("error", "aborted")


@attrs.frozen
class ToolResultMessage:
    """The outcome of running one tool call."""

    tool_call_id: str
    tool_name: str
    content: tuple[TextContent, ...] = ()
    is_error: bool = False
    timestamp: int = attrs.field(factory=now_ms)
    role: Literal["toolResult"] = "toolResult"

    @property
    def text(self) -> str:
        """All text parts joined."""
        return "".join(p.text for p in self.content)


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
