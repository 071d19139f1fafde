"""The Anthropic Messages API, streamed.

One request is ``POST {base_url}/v1/messages`` with ``stream: true`` and the headers
``x-api-key`` and ``anthropic-version: 2023-06-01``. The answer comes back as named
server-sent events:

```text
message_start        {"message": {"usage": {"input_tokens": 25, "output_tokens": 1,
                                            "cache_read_input_tokens": 0, …}}}
content_block_start  {"index": 0, "content_block": {"type": "text", "text": ""}}
content_block_delta  {"index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
content_block_stop   {"index": 0}
content_block_start  {"index": 1, "content_block": {"type": "tool_use", "id": …,
                                                    "name": "read", "input": {}}}
content_block_delta  {"index": 1, "delta": {"type": "input_json_delta",
                                            "partial_json": "{\\"path\\": "}}
content_block_stop   {"index": 1}                    ← the tool call is complete
message_delta        {"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}
message_stop         {}
ping                 {}                              ← keep-alive, ignored
error                {"error": {"type": "overloaded_error", "message": "Overloaded"}}
```

Text deltas go to the sink as they arrive, tool calls at their ``content_block_stop``.
``stop_reason`` maps ``end_turn``/``stop_sequence`` → ``"stop"``, ``max_tokens`` →
``"length"``, ``tool_use`` → ``"toolUse"``. An ``error`` event (the API is overloaded
in the middle of an answer) ends the stream as ``"529 overloaded_error: Overloaded"``,
keeping the text streamed so far. A body that ends before ``message_stop`` (and
before any ``stop_reason``) was cut: a connection error, retried.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from .._core.classes import define
from .._core.errors import CodecError
from .._core.json_bounds import TOO_DEEP_ARGUMENTS, loads
from .._core.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._base import (
    THINKING_BUDGETS,
    Model,
    ProviderRequest,
    StreamEnd,
    StreamSink,
    ToolSpec,
    token_count,
)
from ._error_text import STREAM_CUT_MESSAGE, event_error_message, excerpt, invalid_response_message
from ._http import HttpProvider
from ._http_body import StreamParser
from ._images import readable
from ._sse import ServerSentEvent

logger = logging.getLogger("trio_session")

#: The ``anthropic-version`` header sent with every request.
ANTHROPIC_VERSION = "2023-06-01"

#: ``max_tokens`` is required by the Messages API; this is sent when none is configured.
DEFAULT_MAX_TOKENS = 8192

#: Output tokens a thinking request keeps for the answer itself (the reference's value).
_MIN_OUTPUT_TOKENS = 1024

STOP_REASONS: Mapping[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "refusal": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}

_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def anthropic_messages(messages: tuple[Message, ...]) -> list[Any]:
    """The Messages API ``messages`` for a context (failed messages are already out).

    Tool results become ``tool_result`` blocks of a user message; consecutive results
    share one message, as the API requires them right after their ``tool_use`` turn.
    Assistant messages with nothing in them are left out (the API rejects empty content).
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            # Signed reasoning goes back first and verbatim: with thinking on, the API
            # wants it before the tool_use blocks of the same turn. Unsigned reasoning
            # (another provider's) cannot be verified, so it is left out.
            blocks: list[dict[str, Any]] = [
                {"type": "thinking", "thinking": p.thinking, "signature": p.thinking_signature}
                for p in message.content
                if isinstance(p, ThinkingContent) and p.thinking_signature
            ]
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": dict(call.arguments),
                }
                for call in message.tool_calls
            )
            if blocks:
                wire.append({"role": "assistant", "content": blocks})
        elif isinstance(message, ToolResultMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": _tool_result_content(message),
            }
            if message.is_error:
                block["is_error"] = True
            previous = wire[-1] if wire else None
            if (
                previous is not None
                and previous["role"] == "user"
                and isinstance(previous["content"], list)
            ):
                previous["content"].append(block)
            else:
                wire.append({"role": "user", "content": [block]})
        else:
            wire.append({"role": "user", "content": _anthropic_user_content(message)})
    return wire


def _image_block(image: ImageContent) -> dict[str, Any]:
    source = {"type": "base64", "media_type": image.mime_type, "data": image.data}
    return {"type": "image", "source": source}


def _tool_result_content(message: ToolResultMessage) -> Any:
    """A tool result's ``content``, as pi 1.6.0 sends it: its text parts joined by
    newlines; with images, text and ``image`` blocks (``(see attached image)`` first
    when it has no text)."""
    if not any(isinstance(part, ImageContent) for part in message.content):
        return "\n".join(p.text for p in message.content if isinstance(p, TextContent))
    blocks = [
        _image_block(part)
        if isinstance(part, ImageContent)
        else {"type": "text", "text": part.text}
        for part in message.content
    ]
    if not any(block["type"] == "text" for block in blocks):
        blocks.insert(0, {"type": "text", "text": "(see attached image)"})
    return blocks


def _anthropic_user_content(message: Message) -> Any:
    """A user turn: a plain string, or text and base64 ``image`` blocks."""
    if not isinstance(message, UserMessage) or isinstance(message.content, str):
        return message.text
    if not message.images:
        return message.text
    blocks: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, ImageContent):
            blocks.append(_image_block(part))
        else:
            blocks.append({"type": "text", "text": part.text})
    return blocks


def anthropic_tools(tools: tuple[ToolSpec, ...]) -> list[Any]:
    """Messages API tools for our ``ToolSpec`` list."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": dict(tool.parameters)}
        for tool in tools
    ]


@define
class _ToolBlock:
    id: str
    name: str
    json_parts: list[str] = attrs.field(factory=list)
    initial: Mapping[str, Any] = attrs.field(factory=dict)


@define(eq=False)
class MessagesParser:
    """Reads Messages API events into a sink (see the module docstring)."""

    _sink: StreamSink
    _secrets: tuple[str, ...] = ()
    _usage: dict[str, int] = attrs.field(factory=dict, init=False)
    _tools: dict[object, _ToolBlock] = attrs.field(factory=dict, init=False)
    _calls: int = attrs.field(default=0, init=False)
    _stop_reason: str | None = attrs.field(default=None, init=False)
    _unfinished: str | None = attrs.field(default=None, init=False)

    def feed(self, event: ServerSentEvent) -> StreamEnd | None:
        """Take one event; return the end on ``message_stop`` or an error."""
        try:
            data = loads(event.data)
        except ValueError:  # not JSON, or too deep for the parser
            logger.debug(
                "event stream data is not valid JSON: %r",
                excerpt(event.data, 200, secrets=self._secrets),
            )
            return StreamEnd.error(invalid_response_message("event stream data is not valid JSON"))
        if not isinstance(data, Mapping):
            return StreamEnd.error(
                invalid_response_message("event stream data is not a JSON object")
            )
        kind = data.get("type")
        kind = kind if isinstance(kind, str) else event.event
        if kind == "message_start":
            message = data.get("message")
            if isinstance(message, Mapping):
                self._add_usage(message.get("usage"))
                if isinstance(message.get("id"), str):
                    self._sink.response(message["id"])
        elif kind == "content_block_start":
            self._block_start(data.get("index"), data.get("content_block"))
        elif kind == "content_block_delta":
            self._block_delta(data.get("index"), data.get("delta"))
        elif kind == "content_block_stop":
            return self._block_stop(data.get("index"))
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping) and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = delta["stop_reason"]
            self._add_usage(data.get("usage"))
        elif kind == "message_stop":
            return self._end()
        elif kind == "error":
            error = data.get("error")
            detail = error if isinstance(error, Mapping) else {}
            return StreamEnd.error(event_error_message(detail, secrets=self._secrets))
        return None  # ping, and events this adapter does not use

    def finish(self) -> StreamEnd:
        """End of body: fine after a ``stop_reason``, a cut stream otherwise."""
        if self._stop_reason is None:
            return StreamEnd.error(STREAM_CUT_MESSAGE)
        return self._end()

    def _add_usage(self, usage: object) -> None:
        if not isinstance(usage, Mapping):
            return
        for field in _USAGE_FIELDS:
            value = usage.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                self._usage[field] = token_count(value)
        self._sink.usage(
            Usage(
                input=self._usage.get("input_tokens", 0),
                output=self._usage.get("output_tokens", 0),
                cache_read=self._usage.get("cache_read_input_tokens", 0),
                cache_write=self._usage.get("cache_creation_input_tokens", 0),
            )
        )

    def _block_start(self, index: object, block: object) -> None:
        if not isinstance(block, Mapping):
            return
        text = block.get("text")
        thinking = block.get("thinking")
        if block.get("type") == "text" and isinstance(text, str) and text:
            self._sink.text(text)
        elif block.get("type") == "thinking" and isinstance(thinking, str) and thinking:
            self._sink.thinking(thinking)
        elif block.get("type") == "tool_use":
            initial = block.get("input")
            self._tools[index] = _ToolBlock(
                id=str(block.get("id") or f"toolu_{len(self._tools)}"),
                name=str(block.get("name") or ""),
                initial=initial if isinstance(initial, Mapping) else {},
            )

    def _block_delta(self, index: object, delta: object) -> None:
        if not isinstance(delta, Mapping):
            return
        text = delta.get("text")
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(text, str) and text:
            self._sink.text(text)
        elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            self._sink.thinking(delta["thinking"])
        elif kind == "signature_delta" and isinstance(delta.get("signature"), str):
            self._sink.thinking_signature(delta["signature"])
        elif kind == "input_json_delta" and index in self._tools:
            part = delta.get("partial_json")
            if isinstance(part, str):
                self._tools[index].json_parts.append(part)

    def _block_stop(self, index: object) -> StreamEnd | None:
        """Close a block; a tool call's input too deep for the parser ends the stream."""
        tool = self._tools.pop(index, None)
        if tool is None:
            return None
        text = "".join(tool.json_parts).strip()
        try:
            arguments = loads(text) if text else dict(tool.initial)
        except CodecError:
            return StreamEnd.error(invalid_response_message(TOO_DEEP_ARGUMENTS))
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            self._unfinished = tool.name  # fine if max_tokens cut it off: decided at the end
            return None
        self._sink.tool_call(ToolCall(id=tool.id, name=tool.name, arguments=arguments))
        self._calls += 1
        return None

    def _end(self) -> StreamEnd:
        reason = STOP_REASONS.get(self._stop_reason or "end_turn", "stop")
        if self._unfinished is not None and reason != "length":
            return StreamEnd.error(
                invalid_response_message(
                    f"the input of tool call {self._unfinished!r} is not a JSON object"
                )
            )
        if self._calls and reason == "stop":
            reason = "toolUse"
        return StreamEnd(stop_reason=reason, raw_stop_reason=self._stop_reason)


def thinking_budget(base_max_tokens: int, model_max_tokens: int, level: str) -> tuple[int, int]:
    """``(max_tokens, budget_tokens)`` for a thinking ``level`` (the reference's
    ``adjustMaxTokensForThinking``).

    The answer's budget grows by the level's ``THINKING_BUDGETS`` entry, capped at the
    model's ``max_tokens``; when the cap leaves no room for an answer, thinking gets
    what is left above 1024 tokens of output (at least 1024, the API's minimum, as
    the reference sends it).
    """
    budget = THINKING_BUDGETS["high" if level == "xhigh" else level]
    max_tokens = min(base_max_tokens + budget, model_max_tokens)
    if max_tokens <= budget:
        budget = max(0, max_tokens - _MIN_OUTPUT_TOKENS)
    return max_tokens, budget or _MIN_OUTPUT_TOKENS


@define(eq=False)
class AnthropicProvider(HttpProvider):
    """A provider speaking the Anthropic Messages API, streamed:

    ```python
    async with AnthropicProvider(api_key=key) as provider:
        async with open_session(provider, "claude-sonnet-4-5") as session: ...
    ```

    Without ``base_url``, ``$ANTHROPIC_BASE_URL`` is the endpoint if it is set (as in
    the anthropic SDK), else ``https://api.anthropic.com``.

    Args:
        max_tokens: the answer's token budget (required by the API).
    """

    DEFAULT_NAME: ClassVar[str] = "anthropic"
    DEFAULT_BASE_URL: ClassVar[str] = "https://api.anthropic.com"
    BASE_URL_VARIABLE: ClassVar[str | None] = "ANTHROPIC_BASE_URL"

    _max_tokens: int = attrs.field(default=DEFAULT_MAX_TOKENS, alias="max_tokens", kw_only=True)

    def _url(self, model: Model) -> str:
        return f"{self._root(model)}/v1/messages"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model.id,
            "max_tokens": self._max_tokens,
            "messages": anthropic_messages(readable(request.messages, request.model)),
            "stream": True,
        }
        if request.system_prompt:
            body["system"] = request.system_prompt
        if request.tools:
            body["tools"] = anthropic_tools(request.tools)
        if request.model.reasoning and request.thinking_level != "off":
            max_tokens, budget = thinking_budget(
                self._max_tokens, request.model.max_tokens, request.thinking_level
            )
            body["max_tokens"] = max_tokens
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        return body

    def _parser(self, sink: StreamSink, secrets: tuple[str, ...]) -> StreamParser:
        return MessagesParser(sink, secrets)
