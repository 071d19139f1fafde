"""The message builder: a provider's stream told as the reference's stream events.

``MessageBuilder`` is the ``StreamSink`` the agent hands a provider for one answer: it
collects the content parts as they arrive and emits ``message_start`` and one
``message_update`` per change, shaped as pi-ai's ``assistant_message_event``; its
``finish`` makes the ``AssistantMessage`` of how the stream ended.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import trio

from .._core.classes import define
from .._core.events import (
    GrowingPart,
    MessageStart,
    MessageUpdate,
    PartialMessage,
    SessionEvent,
    StreamEvent,
)
from .._core.json_bounds import MAX_JSON_DEPTH, TOO_DEEP_ARGUMENTS, json_depth
from .._core.messages import (
    ZERO_USAGE,
    AssistantMessage,
    ContentPart,
    Cost,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    now_ms,
)
from ..providers._base import Model, StreamEnd
from ..providers._error_text import invalid_response_message

#: A reported usage of no tokens (an error reply's), priced here: one shared by all.
_REPORTED_ZERO = Usage(cost=Cost(total_from_provider=False))

#: Where the agent sends its events (the session's handler).
Emit = Callable[[SessionEvent], None]


def _now() -> float | None:
    """The run's clock (virtual under a test's ``MockClock``); ``None`` outside a run."""
    try:
        return trio.current_time()
    except RuntimeError:
        return None


@define(eq=False)
class MessageBuilder:
    """Collects a streaming answer and tells it as the reference's stream events.

    Content parts are kept in the order they arrive. Each change is a
    ``message_update`` whose ``assistant_message_event`` is shaped as pi-ai's
    (``text_start`` / ``text_delta`` / ``text_end``, ``thinking_*``,
    ``toolcall_start`` / ``toolcall_delta`` / ``toolcall_end``, each with its
    ``contentIndex`` and the ``partial`` message so far). ``message_start`` is
    sent when the answer begins to arrive — or, for a request that failed
    before anything came, with the finished (error) message, as the reference does.

    A chunk costs the same however long the answer is: the growing part keeps its
    deltas as a list of pieces, and each update carries a ``PartialMessage`` view
    (a few references and counts) that makes the message only if someone reads it.
    A part's text is joined once, when it ends.

    The final message also says what pi 1.6.0's do: the ``thinking_level`` the request
    was sent with, the provider's ``raw_stop_reason``, ``duration_ms`` from the
    builder's making (just before the request) to the end on the run's clock, and, once
    the provider reported usage, ``cost.total_from_provider`` false (priced from the
    model's rates).
    """

    _emit: Emit
    _provider: str
    _model: Model
    _thinking_level: str | None = None
    _begun: float | None = attrs.field(factory=lambda: _now(), init=False)
    _reported: bool = attrs.field(default=False, init=False)  # the provider gave usage
    _priced: Usage | None = attrs.field(default=None, init=False)  # _usage, priced
    _parts: list[ContentPart] = attrs.field(factory=list, init=False)  # finished parts
    _growing: GrowingPart | None = attrs.field(default=None, init=False)  # the last, open
    _usage: Usage = attrs.field(default=ZERO_USAGE, init=False)
    _response_id: str | None = attrs.field(default=None, init=False)
    _response_model: str | None = attrs.field(default=None, init=False)
    _head: AssistantMessage | None = attrs.field(default=None, init=False)  # fields, no content
    _too_deep: bool = attrs.field(default=False, init=False)  # a tool call was refused
    started: bool = attrs.field(default=False, init=False)

    def _start(self) -> None:
        if not self.started:
            self.started = True
            self._emit(MessageStart(message=self.snapshot()))

    def _update(self, fields: dict[str, Any], delta: str = "") -> None:
        """Emit a ``message_update``: ``fields`` and a view of the message as it is now."""
        growing = self._growing
        head = self._head
        if head is None:
            head = self._head = self.snapshot(content=False)
        if growing is None:
            view = PartialMessage(self._parts, len(self._parts), None, 0, None, head, now_ms())
        else:
            pieces, signature = len(growing.pieces), growing.signature
            view = PartialMessage(
                self._parts, len(self._parts), growing, pieces, signature, head, now_ms()
            )
        self._emit(MessageUpdate(view, delta, StreamEvent(fields, view)))

    def _close_part(self) -> None:
        """Send the ``*_end`` of the part that was growing, if one was."""
        growing = self._growing
        if growing is None:
            return
        part = growing.part(len(growing.pieces), growing.signature)
        self._growing = None
        self._parts.append(part)
        index = len(self._parts) - 1
        if isinstance(part, TextContent):
            self._update({"type": "text_end", "contentIndex": index, "content": part.text})
        else:
            self._update({"type": "thinking_end", "contentIndex": index, "content": part.thinking})

    def _grow(self, kind: type[TextContent] | type[ThinkingContent], delta: str) -> None:
        growing = self._growing
        if growing is None or growing.kind is not kind:
            self._start()
            self._close_part()
            growing = self._growing = GrowingPart(kind)
            name = "text_start" if kind is TextContent else "thinking_start"
            self._update({"type": name, "contentIndex": len(self._parts)})
        growing.pieces.append(delta)
        if kind is TextContent:
            fields = {"type": "text_delta", "contentIndex": len(self._parts), "delta": delta}
            self._update(fields, delta)
        else:
            fields = {"type": "thinking_delta", "contentIndex": len(self._parts), "delta": delta}
            self._update(fields)

    def text(self, delta: str) -> None:
        if delta:
            self._grow(TextContent, delta)

    def thinking(self, delta: str) -> None:
        """Append streamed reasoning (a ``thinking`` part)."""
        if delta:
            self._grow(ThinkingContent, delta)

    def thinking_signature(self, signature: str) -> None:
        """Sign the reasoning part that is growing (Anthropic sends it back verbatim)."""
        if not signature:
            return
        growing = self._growing
        if growing is not None:
            if growing.kind is ThinkingContent:
                growing.signature = (growing.signature or "") + signature
            return
        last = self._parts[-1] if self._parts else None
        if isinstance(last, ThinkingContent):  # a new list: earlier views keep the old part
            sig = (last.thinking_signature or "") + signature
            self._parts = [*self._parts[:-1], attrs.evolve(last, thinking_signature=sig)]

    def tool_call(self, call: ToolCall) -> None:
        if json_depth(call.arguments) > MAX_JSON_DEPTH:  # the answer ends as an error
            self._too_deep = True
            return
        self._start()
        self._close_part()
        self._parts.append(call)
        index = len(self._parts) - 1
        # pi 1.6.0 names the call at its start: its id and its tool's name.
        self._update(
            {"type": "toolcall_start", "contentIndex": index, "id": call.id, "toolName": call.name}
        )
        arguments = json.dumps(dict(call.arguments), ensure_ascii=False)
        self._update({"type": "toolcall_delta", "contentIndex": index, "delta": arguments})
        self._update({"type": "toolcall_end", "contentIndex": index, "toolCall": call})

    def usage(self, usage: Usage) -> None:
        self._usage = usage
        self._reported = True
        self._priced = None
        self._head = None

    def finish(self, end: StreamEnd) -> AssistantMessage:
        """The final message, with ``message_start`` sent first if it was not.

        A successful or aborted answer closes its growing part (``text_end`` …); an
        error does not — as the reference's providers do. An answer with a tool call
        whose arguments nest deeper than ``MAX_JSON_DEPTH`` (left out when it came:
        no part of the session could encode it) ends as an error that says so.
        """
        if self._too_deep and end.stop_reason not in ("error", "aborted"):
            end = StreamEnd.error(invalid_response_message(TOO_DEEP_ARGUMENTS))
        if self.started and end.stop_reason != "error":
            if end.stop_reason == "aborted":  # the closing update says so, as pi's does
                self._head = self.snapshot(end, content=False)
            self._close_part()
        message = self.snapshot(end, final=True)
        if not self.started:
            self.started = True
            self._emit(MessageStart(message=message))
        return message

    def snapshot(
        self, end: StreamEnd | None = None, *, content: bool = True, final: bool = False
    ) -> AssistantMessage:
        """The message as it is now (without its content if ``content`` is false); the
        ``final`` one also says its thinking level, raw stop reason and duration."""
        end = end or StreamEnd()
        parts: list[ContentPart] = []
        if content:
            parts = list(self._parts)
            growing = self._growing
            if growing is not None:
                parts.append(growing.part(len(growing.pieces), growing.signature))
        duration: int | None = None
        if final and (now := _now()) is not None and self._begun is not None:
            duration = round((now - self._begun) * 1000)
        return AssistantMessage(
            content=parts,
            stop_reason=end.stop_reason,
            error_message=end.error_message,
            usage=self._priced_usage(),
            provider=self._provider,
            model=self._model.id,
            api=self._model.api,
            response_id=self._response_id,
            response_model=self._response_model,
            thinking_level=self._thinking_level if final else None,
            raw_stop_reason=end.raw_stop_reason if final else None,
            duration_ms=duration,
            failure=end.failure,
        )

    def _priced_usage(self) -> Usage:
        """The usage so far, priced by the model's rates (made once per report)."""
        priced = self._priced
        if priced is None:
            priced = self._model.priced(self._usage)
            if self._reported and priced == ZERO_USAGE:  # the usual error reply: share one
                priced = _REPORTED_ZERO
            elif self._reported:  # priced here, not billed by the provider (pi 1.6.0 says so)
                cost = priced.cost
                priced = Usage(
                    priced.input,
                    priced.output,
                    priced.cache_read,
                    priced.cache_write,
                    Cost(
                        cost.input,
                        cost.output,
                        cost.cache_read,
                        cost.cache_write,
                        cost.total,
                        False,
                    ),
                    priced.reasoning,
                )
            self._priced = priced
        return priced

    def response(self, response_id: str | None, model: str | None = None) -> None:
        """Record the provider's id of this response, and the model that answered when
        it is not the one asked (the first report of each wins, as the reference keeps).

        The answer has begun, so ``message_start`` goes out first — without them, as the
        reference's does (its ``start`` comes before the first chunk is read)."""
        self._start()
        self._response_id = self._response_id or response_id or None
        if model and model != self._model.id:
            self._response_model = self._response_model or model
        self._head = None
