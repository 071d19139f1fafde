"""The OpenAI Chat Completions API, streamed: OpenAI and OpenAI-compatible servers.

One request is ``POST {base_url}/chat/completions`` with ``stream: true`` and
``stream_options: {include_usage: true}``; the answer comes back as server-sent
events whose ``data`` is a JSON chunk, ending with ``data: [DONE]``:

```text
{"choices": [{"index": 0, "delta": {"content": "Hel"}}]}
{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
    "function": {"name": "read", "arguments": "{\\"pa"}}]}}]}
{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
{"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3,
    "prompt_tokens_details": {"cached_tokens": 8}}}
[DONE]
```

Text deltas go to the sink as they arrive. Tool-call pieces are joined by their
``index`` and handed over whole when the stream ends. ``finish_reason`` maps
``stop → "stop"``, ``length → "length"``, ``tool_calls → "toolUse"``.

Local servers (llama.cpp, vLLM, Ollama, LM Studio) speak the same API with gaps,
which are tolerated: no usage chunk, tool calls without an ``index`` or ``id``, a
``finish_reason`` of ``stop`` next to tool calls, no ``[DONE]`` after a finish
reason, an ``{"error": …}`` chunk in the middle of a stream. A body that ends with
neither a finish reason nor ``[DONE]`` was cut: that is a connection error (retried),
and the text streamed so far stays on the message.
"""

from __future__ import annotations

import json
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
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._base import Model, ProviderRequest, StreamEnd, StreamSink, ToolSpec, token_count
from ._error_text import STREAM_CUT_MESSAGE, event_error_message, excerpt, invalid_response_message
from ._http import HttpProvider
from ._http_body import StreamParser
from ._images import readable
from ._openai_compat import context_estimate, openai_compat, output_cap
from ._sse import ServerSentEvent

logger = logging.getLogger("trio_session")

FINISH_REASONS: Mapping[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "content_filter": "stop",
}


def openai_usage(usage: Mapping[str, Any]) -> Usage:
    """Our ``Usage`` from a Chat Completions ``usage`` object.

    ``input`` is ``prompt_tokens`` minus the cached ones, which are ``cache_read``;
    ``output`` is ``completion_tokens`` (reasoning tokens included), of which
    ``reasoning`` are ``completion_tokens_details.reasoning_tokens`` (or a top-level
    ``reasoning_tokens``, as some compatible servers send; pi 1.6.0 reads both). Missing
    fields count 0.
    """
    details = usage.get("prompt_tokens_details")
    cached = token_count(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    prompt = token_count(usage.get("prompt_tokens"))
    completion = usage.get("completion_tokens_details")
    reasoning = (
        token_count(completion.get("reasoning_tokens")) if isinstance(completion, Mapping) else 0
    )
    return Usage(
        input=max(prompt - cached, 0),
        output=token_count(usage.get("completion_tokens")),
        cache_read=cached,
        reasoning=reasoning or token_count(usage.get("reasoning_tokens")),
    )


#: Where OpenAI-compatible servers stream reasoning (llama.cpp, DeepSeek, OpenRouter …).
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


def _compact(arguments: Any) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def openai_messages(
    messages: tuple[Message, ...],
    system_prompt: str | None,
    *,
    system_role: str = "system",
) -> list[Any]:
    """The Chat Completions ``messages`` for a context (failed messages are already out).

    As pi sends them: a user message's parts as a list of parts (its empty text parts
    left out, the message too when nothing is left), a string as a string. A tool
    result is its text parts joined by newlines (``(see attached image)`` when it holds
    only images, ``(no tool output)`` when nothing); the images of a run of tool results
    follow it in one user message, ``Attached image(s) from tool result:`` and the
    images (for a model that reads none, ``_images.readable`` has put pi's texts in
    their place first).

    Args:
        messages: the context.
        system_prompt: sent first, as a ``system_role`` message.
        system_role: ``"system"``, or ``"developer"`` (``openai_compat``).
    """
    wire: list[Any] = []
    if system_prompt:
        wire.append({"role": system_role, "content": system_prompt})
    attached: list[dict[str, Any]] = []
    for message in messages:
        if attached and not isinstance(message, ToolResultMessage):
            wire.append(_attached(attached))
            attached = []
        if isinstance(message, AssistantMessage):
            entry: dict[str, Any] = {"role": "assistant", "content": message.text}
            if message.tool_calls:
                entry["content"] = message.text or None
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        # As pi writes them (JSON.stringify): no spaces.
                        "function": {"name": call.name, "arguments": _compact(call.arguments)},
                    }
                    for call in message.tool_calls
                ]
            wire.append(entry)
        elif isinstance(message, ToolResultMessage):
            wire.append(_tool_result(message))
            attached.extend(_image_part(p) for p in message.content if isinstance(p, ImageContent))
        else:
            content = _openai_user_content(message)
            if content != []:
                wire.append({"role": "user", "content": content})
    if attached:
        wire.append(_attached(attached))
    return wire


def _tool_result(message: ToolResultMessage) -> dict[str, Any]:
    text = "\n".join(p.text for p in message.content if isinstance(p, TextContent))
    if not text.strip():
        has_images = any(isinstance(p, ImageContent) for p in message.content)
        text = "(see attached image)" if has_images else "(no tool output)"
    return {"role": "tool", "content": text, "tool_call_id": message.tool_call_id}


def _attached(parts: list[dict[str, Any]]) -> dict[str, Any]:
    intro = {"type": "text", "text": "Attached image(s) from tool result:"}
    return {"role": "user", "content": [intro, *parts]}


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"},
    }


def _openai_user_content(message: Message) -> Any:
    """A user turn: a plain string, or text and ``image_url`` parts (data URLs)."""
    if not isinstance(message, UserMessage) or isinstance(message.content, str):
        return message.text
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, ImageContent):
            parts.append(_image_part(part))
        elif part.text:
            parts.append({"type": "text", "text": part.text})
    return parts


def openai_tools(tools: tuple[ToolSpec, ...]) -> list[Any]:
    """Function tools for our ``ToolSpec`` list."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]


@define
class _ToolDraft:
    id: str = ""
    name: str = ""
    arguments: list[str] = attrs.field(factory=list)


@define(eq=False)
class ChatCompletionsParser:
    """Reads Chat Completions chunks into a sink (see the module docstring)."""

    _sink: StreamSink
    _secrets: tuple[str, ...] = ()
    _drafts: dict[object, _ToolDraft] = attrs.field(factory=dict, init=False)
    _finish_reason: str | None = attrs.field(default=None, init=False)

    def feed(self, event: ServerSentEvent) -> StreamEnd | None:
        """Take one event; return the end on ``[DONE]`` or an error."""
        data = event.data.strip()
        if data == "[DONE]":
            return self._end()
        try:
            chunk = loads(data)
        except ValueError:  # not JSON, or too deep for the parser
            logger.debug(
                "event stream data is not valid JSON: %r",
                excerpt(event.data, 200, secrets=self._secrets),
            )
            return StreamEnd.error(invalid_response_message("event stream data is not valid JSON"))
        if not isinstance(chunk, Mapping):
            return StreamEnd.error(
                invalid_response_message("event stream data is not a JSON object")
            )
        error = chunk.get("error")
        if error or event.event == "error":
            detail = error if isinstance(error, Mapping) else {"message": error or chunk}
            return StreamEnd.error(event_error_message(detail, secrets=self._secrets))
        response_id, model = chunk.get("id"), chunk.get("model")
        if isinstance(response_id, str) or isinstance(model, str):
            self._sink.response(
                response_id if isinstance(response_id, str) else None,
                model if isinstance(model, str) else None,
            )
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._sink.usage(openai_usage(usage))
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
                self._choice(choice)
        return None

    def finish(self) -> StreamEnd:
        """End of body: fine after a finish reason, a cut stream otherwise."""
        if self._finish_reason is None:
            return StreamEnd.error(STREAM_CUT_MESSAGE)
        return self._end()

    def _choice(self, choice: Mapping[str, Any]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._sink.text(content)
            # Reasoning, where OpenAI-compatible servers put it (the first field that has
            # some: a server may send the same text in two of them).
            for field in REASONING_FIELDS:
                reasoning = delta.get(field)
                if isinstance(reasoning, str) and reasoning:
                    self._sink.thinking(reasoning)
                    break
            calls = delta.get("tool_calls")
            for position, call in enumerate(calls if isinstance(calls, list) else ()):
                if isinstance(call, Mapping):
                    self._tool_delta(position, call)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self._finish_reason = reason

    def _tool_delta(self, position: int, call: Mapping[str, Any]) -> None:
        index = call.get("index")
        call_id = call.get("id") if isinstance(call.get("id"), str) else None
        key: object = index if isinstance(index, int) else call_id or f"position {position}"
        draft = self._drafts.get(key)
        if draft is None:
            draft = self._drafts[key] = _ToolDraft()
        if call_id and not draft.id:
            draft.id = call_id
        function = call.get("function")
        if isinstance(function, Mapping):
            name = function.get("name")
            if isinstance(name, str) and name and not draft.name:
                draft.name = name  # sent once; some servers repeat it, never split it
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                draft.arguments.append(arguments)
            elif isinstance(arguments, Mapping):  # some servers send an object
                draft.arguments.append(json.dumps(arguments))

    def _end(self) -> StreamEnd:
        reason = FINISH_REASONS.get(self._finish_reason or "stop", "stop")
        calls: list[ToolCall] = []
        for number, draft in enumerate(self._drafts.values()):
            text = "".join(draft.arguments).strip() or "{}"
            try:
                arguments = loads(text)
            except CodecError:  # too deep for the parser
                return StreamEnd.error(invalid_response_message(TOO_DEEP_ARGUMENTS))
            except ValueError:
                arguments = None
            if isinstance(arguments, dict):
                calls.append(
                    ToolCall(id=draft.id or f"call_{number}", name=draft.name, arguments=arguments)
                )
            elif reason != "length":  # cut off by max tokens: just an unfinished call
                return StreamEnd.error(
                    invalid_response_message(
                        f"the arguments of tool call {draft.name!r} are not a JSON object"
                    )
                )
        for call in calls:
            self._sink.tool_call(call)
        if calls and reason == "stop":
            reason = "toolUse"  # servers that say "stop" next to tool calls
        return StreamEnd(stop_reason=reason, raw_stop_reason=self._finish_reason)


@define(eq=False)
class OpenAIProvider(HttpProvider):
    """A provider speaking the OpenAI Chat Completions API, streamed.

    Works with OpenAI and with OpenAI-compatible servers:

    ```python
    async with OpenAIProvider(api_key=key) as provider:
        async with open_session(provider, "gpt-4.1") as session: ...

    local = OpenAIProvider(base_url="http://127.0.0.1:8080/v1", name="llama.cpp")
    ```

    Without ``base_url``, ``$OPENAI_BASE_URL`` is the endpoint if it is set (as in the
    openai SDK), else ``https://api.openai.com/v1``.

    Args:
        include_usage: ask for a usage chunk (``stream_options.include_usage``);
            turn off for a server that rejects the option.
    """

    DEFAULT_NAME: ClassVar[str] = "openai"
    DEFAULT_BASE_URL: ClassVar[str] = "https://api.openai.com/v1"
    BASE_URL_VARIABLE: ClassVar[str | None] = "OPENAI_BASE_URL"

    _include_usage: bool = attrs.field(default=True, alias="include_usage", kw_only=True)

    def _url(self, model: Model) -> str:
        return f"{self._root(model)}/chat/completions"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        model = request.model
        compat = openai_compat(model)
        role = "developer" if model.reasoning and compat.developer_role else "system"
        body: dict[str, Any] = {
            "model": model.id,
            "messages": openai_messages(
                readable(request.messages, model), request.system_prompt, system_role=role
            ),
            "stream": True,
        }
        if self._include_usage:
            body["stream_options"] = {"include_usage": True}
        if compat.store:
            body["store"] = False
        estimate = context_estimate(request.messages, request.system_prompt, request.tools)
        body[compat.max_tokens_field] = output_cap(model, estimate)
        if request.tools:
            body["tools"] = openai_tools(request.tools)
        if request.model.reasoning and request.thinking_level != "off":
            body["reasoning_effort"] = request.thinking_level  # as the reference sends it
        return body

    def _parser(self, sink: StreamSink, secrets: tuple[str, ...]) -> StreamParser:
        return ChatCompletionsParser(sink, secrets)
