"""What a model provider is: the seam between the agent loop and a model.

A provider streams one answer into a :class:`StreamSink` and returns how it
ended. It never raises for a failed request and never retries on its own
(R-28a): a failure is a :class:`StreamEnd` with ``stop_reason="error"`` and an
``error_message`` that the retry policy classifies (R-52). Cancellation is the
one exception that passes through: the agent turns it into an ``aborted``
message, keeping whatever the sink received.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from .._messages import Message, StopReason, ToolCall, Usage


@attrs.frozen
class Model:
    """A model at a provider.

    Attributes:
        id: the provider's model id (``"gpt-4.1"``, ``"claude-sonnet-4-5"``).
        provider: the provider's name (``"openai"``, ``"anthropic"``, ``"faux"``);
            credentials are looked up by it.
        context_window: tokens the model accepts; used for silent-overflow
            detection (R-7b) and by the default compactor.
        base_url: the API endpoint, for providers that speak HTTP.
    """

    id: str
    provider: str
    context_window: int = 128_000
    base_url: str | None = None


@attrs.frozen
class ToolSpec:
    """A tool as the model sees it: name, description, JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}
    )


@attrs.frozen
class ProviderRequest:
    """Everything one model request needs.

    ``messages`` never contains assistant messages that ended in ``error`` or
    ``aborted`` (R-20a). ``api_key`` is excluded from ``repr`` so it cannot leak
    into logs by accident.
    """

    model: Model
    messages: tuple[Message, ...]
    system_prompt: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    api_key: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class StreamEnd:
    """How a provider's stream ended."""

    stop_reason: StopReason = "stop"
    error_message: str | None = None

    @classmethod
    def error(cls, message: str) -> StreamEnd:
        """A failed request, described by ``message`` (status, server text, hints)."""
        return cls(stop_reason="error", error_message=message)


class StreamSink(Protocol):
    """Where a provider puts an answer while it streams."""

    def text(self, delta: str) -> None:
        """Append streamed text."""
        ...

    def tool_call(self, call: ToolCall) -> None:
        """Add a complete tool call."""
        ...

    def usage(self, usage: Usage) -> None:
        """Report token usage (the last report wins)."""
        ...


class Provider(Protocol):
    """A model provider. ``FauxProvider`` is the one to use in tests."""

    @property
    def name(self) -> str:
        """The provider name credentials are keyed by."""
        ...

    async def stream(self, request: ProviderRequest, sink: StreamSink) -> StreamEnd:
        """Stream one answer into ``sink``; return how it ended. Never raise for a
        failed request; let cancellation through."""
        ...
