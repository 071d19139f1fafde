"""What the provider tests share on the client side: a recording sink, a decision helper.

The server side is in :mod:`tests.http_server`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias

import attrs

from trio_session import REFERENCE_CLASSIFIER, AssistantMessage, ToolCall, Usage

Decision: TypeAlias = Literal["retry", "overflow", "none"]


@attrs.define
class RecordingSink:
    """A :class:`~trio_session.StreamSink` that collects text, tool calls and usage.

    ``on_text`` (if set) is called after each text delta: tests use it to cancel a
    request at a known point of the stream.
    """

    deltas: list[str] = attrs.field(factory=list)
    tool_calls: list[ToolCall] = attrs.field(factory=list)
    usages: list[Usage] = attrs.field(factory=list)
    responses: list[tuple[str | None, str | None]] = attrs.field(factory=list)
    thoughts: list[str] = attrs.field(factory=list)
    signatures: list[str] = attrs.field(factory=list)
    on_text: Callable[[], object] | None = None

    def text(self, delta: str) -> None:
        """Record a text delta."""
        self.deltas.append(delta)
        if self.on_text is not None:
            self.on_text()

    def tool_call(self, call: ToolCall) -> None:
        """Record a finished tool call."""
        self.tool_calls.append(call)

    def usage(self, usage: Usage) -> None:
        """Record a usage report."""
        self.usages.append(usage)

    def response(self, response_id: str | None, model: str | None = None) -> None:
        """Record a response id / model report."""
        self.responses.append((response_id, model))

    def thinking(self, delta: str) -> None:
        """Record a reasoning delta."""
        self.thoughts.append(delta)

    def thinking_signature(self, signature: str) -> None:
        """Record a reasoning signature."""
        self.signatures.append(signature)

    @property
    def joined(self) -> str:
        """All text deltas joined."""
        return "".join(self.deltas)

    @property
    def last_usage(self) -> Usage | None:
        """The usage report that counts (the last one)."""
        return self.usages[-1] if self.usages else None


def decision(error_message: str | None) -> Decision:
    """What the default (reference) classifier does with a run ending in this error."""
    message = AssistantMessage(stop_reason="error", error_message=error_message)
    if REFERENCE_CLASSIFIER.is_context_overflow(message):
        return "overflow"
    if REFERENCE_CLASSIFIER.is_retryable(message):
        return "retry"
    return "none"
