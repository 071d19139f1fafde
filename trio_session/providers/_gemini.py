"""The Google Gemini API (Generative Language, ``v1beta``), streamed over plain httpx.

One request is ``POST {base_url}/models/{model}:streamGenerateContent?alt=sse`` with
the key in the ``x-goog-api-key`` header — never in the URL, where it would end up in
error texts, proxies' logs and tracebacks. The answer comes back as server-sent events
whose ``data`` is a ``GenerateContentResponse``; the body simply ends after the last:

```text
{"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}],
 "responseId": "r1", "modelVersion": "gemini-2.5-flash"}
{"candidates": [{"content": {"parts": [{"text": "why", "thought": true}]}}]}
{"candidates": [{"content": {"parts": [{"functionCall": {"name": "read",
    "args": {"path": "a.txt"}}}]}}]}
{"candidates": [{"content": {"parts": [{"text": "lo"}]}, "finishReason": "STOP"}],
 "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 3,
                   "thoughtsTokenCount": 5, "cachedContentTokenCount": 8}}
```

Text parts go to the sink as text, ``thought: true`` parts as thinking (with their
``thoughtSignature``), each ``functionCall`` part as one whole tool call. Gemini gives
calls no ids (only some backends send ``functionCall.id``), so each gets
``call_<responseId>_<n>``: stable for the response, unique in the conversation. Usage:
``input`` is ``promptTokenCount`` less the cached tokens (``cache_read``); ``output`` is
``candidatesTokenCount`` plus ``thoughtsTokenCount``, as the reference counts them.

``finishReason`` maps ``STOP`` → ``"stop"`` (``"toolUse"`` with calls), ``MAX_TOKENS``
→ ``"length"``; every other reason (``SAFETY``, ``RECITATION``, ``PROHIBITED_CONTENT``,
``MALFORMED_FUNCTION_CALL`` …) and a blocked prompt (``promptFeedback.blockReason``)
end the message as an error that says why, which is not retried. A body that ends
before any ``finishReason`` was cut: a connection error, retried.

Errors, in an HTTP error body or as an SSE event inside the stream, have Google's
shape:

```text
{"error": {"code": 429, "message": "Resource has been exhausted …",
           "status": "RESOURCE_EXHAUSTED",
           "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": "7s"}]}}
```

and become the same text as the other adapters' (R-52):

```text
429 Too Many Requests: Resource has been exhausted … (RESOURCE_EXHAUSTED)
retry-after: 7
```

so the classifier retries 429/500/503, reads the wait (R-18), sees "The input token
count … exceeds the maximum number of tokens allowed" as an overflow, and leaves
400/401/403 alone.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote

import attrs

from .._core.classes import define
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
from .._retry.classify import MAX_HINT_MS
from ._base import Model, ProviderRequest, StreamEnd, StreamSink, ToolSpec, token_count
from ._error_text import (
    MAX_MESSAGE_CHARS,
    RETRY_HINT_HEADERS,
    STREAM_CUT_MESSAGE,
    excerpt,
    http_error_message,
    invalid_response_message,
)
from ._http import HttpProvider
from ._http_body import StreamParser
from ._images import readable
from ._sse import ServerSentEvent

logger = logging.getLogger("trio_session")

#: What each ``finishReason`` that is not a normal end means (Google's ``FinishReason``).
FINISH_ERRORS: Mapping[str, str] = {
    "SAFETY": "the answer was blocked by Gemini's safety filters",
    "RECITATION": "the answer was stopped for reciting training data",
    "LANGUAGE": "the answer was stopped: the language is not supported",
    "BLOCKLIST": "the answer was stopped: it contained a blocked term",
    "PROHIBITED_CONTENT": "the answer was blocked for prohibited content",
    "SPII": "the answer was blocked for sensitive personal information",
    "MALFORMED_FUNCTION_CALL": "the model wrote a function call that could not be parsed",
    "UNEXPECTED_TOOL_CALL": "the model called a tool that was not offered",
    "TOO_MANY_TOOL_CALLS": "the model made too many tool calls in a row",
    "IMAGE_SAFETY": "the answer was blocked by Gemini's image safety filters",
    "IMAGE_PROHIBITED_CONTENT": "the answer was blocked for prohibited image content",
    "IMAGE_RECITATION": "the image was stopped for reciting training data",
    "IMAGE_OTHER": "the image was stopped for an unspecified reason",
    "NO_IMAGE": "the model was expected to make an image and made none",
    "OTHER": "the answer was stopped for an unspecified reason",
    "FINISH_REASON_UNSPECIFIED": "the answer was stopped for an unspecified reason",
}

#: Google's ``google.rpc.RetryInfo`` detail, which carries the wait a 429 asks for.
RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"
_ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)s\s*")

#: Sent as the ``thoughtSignature`` of a replayed function call on Gemini 3 models,
#: which reject a call without one; trio_session does not keep the real signature of a
#: call (only those of thinking parts), and Google documents this value for history
#: that has none.
SKIP_SIGNATURE = "skip_thought_signature_validator"

#: ``thinkingBudget`` per level for Gemini 2.5 models (the reference's values); other
#: models that reason and take a budget get -1 (the model decides).
_BUDGETS: Mapping[str, Mapping[str, int]] = {
    "2.5-pro": {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768},
    "2.5-flash-lite": {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576},
    "2.5-flash": {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576},
}


def gemini_usage(metadata: Mapping[str, Any]) -> Usage:
    """Our ``Usage`` from a ``usageMetadata`` object (missing fields count 0)."""
    cached = token_count(metadata.get("cachedContentTokenCount"))
    prompt = token_count(metadata.get("promptTokenCount"))
    output = token_count(metadata.get("candidatesTokenCount")) + token_count(
        metadata.get("thoughtsTokenCount")
    )
    return Usage(input=max(prompt - cached, 0), output=output, cache_read=cached)


# -- errors ------------------------------------------------------------------------------------


def _error_object(body: str) -> Mapping[str, Any] | None:
    """The ``error`` object of a Google error body (bare, or in a one-item list)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    error = data.get("error") if isinstance(data, Mapping) else None
    return error if isinstance(error, Mapping) else None


def retry_delay_seconds(error: Mapping[str, Any]) -> float | None:
    """The ``retryDelay`` of a ``RetryInfo`` detail (``"7s"``, ``"0.5s"``), in seconds."""
    details = error.get("details")
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, Mapping) and detail.get("@type") == RETRY_INFO_TYPE:
            delay = detail.get("retryDelay")
            match = _DURATION.fullmatch(delay) if isinstance(delay, str) else None
            if match:  # 400 digits are an infinity: bounded as any hint is
                return min(float(match.group(1)), MAX_HINT_MS / 1000)
    return None


def _error_reason(error: Mapping[str, Any]) -> str | None:
    details = error.get("details")
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, Mapping) and detail.get("@type") == _ERROR_INFO_TYPE:
            reason = detail.get("reason")
            if isinstance(reason, str) and reason:
                return reason
    return None


def gemini_error_message(
    status: int,
    reason: str = "",
    body: str = "",
    headers: Mapping[str, str] | None = None,
    *,
    content_type: str = "",
    secrets: tuple[str, ...] = (),
) -> str:
    """The ``errorMessage`` for a Gemini error (R-52), in ``http_error_message``'s shape.

    ``"<status> <reason>: <message> (<STATUS>[, <ErrorInfo reason>])"``, then the
    retry-hint lines: the response's headers, else ``retry-after: N`` from the body's
    ``RetryInfo`` (only where waiting may help: 408, 409, 425, 429, 5xx). A body that
    is not Google's error shape is worded as every adapter words it.
    """
    error = _error_object(body)
    if error is None:
        return http_error_message(
            status, reason, body, headers, content_type=content_type, secrets=secrets
        )
    message = error.get("message")
    text = message.strip() if isinstance(message, str) else ""
    tags = [t for t in (error.get("status"), _error_reason(error)) if isinstance(t, str) and t]
    tags = [t for t in tags if t.lower() not in text.lower()]
    if tags:
        text = f"{text} ({', '.join(tags)})" if text else ", ".join(tags)
    hints = {name.lower(): value for name, value in (headers or {}).items()}
    delay = retry_delay_seconds(error)
    if delay is not None and not any(name in hints for name in RETRY_HINT_HEADERS):
        hints["retry-after"] = f"{delay:g}"
    normalized = json.dumps({"error": {"message": text}}) if text else ""
    return http_error_message(
        status, reason, normalized, hints, content_type="application/json", secrets=secrets
    )


def _stream_error_message(error: Mapping[str, Any], secrets: tuple[str, ...]) -> str:
    """An error object sent inside the stream, worded as the same error over HTTP."""
    code = error.get("code")
    status = code if isinstance(code, int) and 100 <= code <= 599 else 500
    return gemini_error_message(status, body=json.dumps({"error": error}), secrets=secrets)


# -- requests ----------------------------------------------------------------------------------


def _is_gemini_3(model_id: str) -> bool:
    return re.match(r"gemini-3(?:\.\d+)?-", model_id.lower()) is not None


def gemini_contents(messages: tuple[Message, ...], model: Model) -> list[Any]:
    """The ``contents`` for a context (failed messages are already out).

    Roles are ``user`` and ``model``. Tool results are ``functionResponse`` parts of a
    user turn, consecutive ones in one turn. Thinking goes back only to the model that
    wrote it, with its signature (another model cannot verify it); empty turns are left
    out, as the API rejects them.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            parts = _model_parts(message, model)
            if parts:
                wire.append({"role": "model", "parts": parts})
        elif isinstance(message, ToolResultMessage):
            part, images = _function_response(message, model)
            previous = wire[-1] if wire else None
            if (
                previous is not None
                and previous["role"] == "user"
                and any("functionResponse" in p for p in previous["parts"])
            ):
                previous["parts"].append(part)
            else:
                wire.append({"role": "user", "parts": [part]})
            if images:
                wire.append({"role": "user", "parts": [{"text": "Tool result image:"}, *images]})
        else:
            parts = _user_parts(message)
            if parts:
                wire.append({"role": "user", "parts": parts})
    return wire


def _model_parts(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    same_model = message.provider == model.provider and message.model == model.id
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if same_model and block.thinking_signature and block.thinking.strip():
                parts.append(
                    {
                        "thought": True,
                        "text": block.thinking,
                        "thoughtSignature": block.thinking_signature,
                    }
                )
        elif isinstance(block, TextContent):
            if block.text.strip():
                parts.append({"text": block.text})
        elif isinstance(block, ToolCall):
            call: dict[str, Any] = {
                "functionCall": {"name": block.name, "args": dict(block.arguments)}
            }
            if _is_gemini_3(model.id):
                call["thoughtSignature"] = SKIP_SIGNATURE
            parts.append(call)
    return parts


def _inline(image: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": image.mime_type, "data": image.data}}


def _gemini_major(model_id: str) -> int | None:
    found = re.match(r"gemini(?:-live)?-(\d+)", model_id.lower())
    return int(found.group(1)) if found else None


def _function_response(
    message: ToolResultMessage, model: Model
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A tool result's ``functionResponse`` part, and the image parts to send after it
    in a user turn of their own — as pi 1.6.0 sends them: the text parts joined by
    newlines (``(see attached image)`` when there are only images), the images inside
    the response for Gemini 3 and later (and models that are not Gemini), after it for
    older Gemini models (for a model that reads none, ``_images.readable`` has put pi's
    texts in their place first)."""
    text = "\n".join(p.text for p in message.content if isinstance(p, TextContent))
    images = [_inline(p) for p in message.content if isinstance(p, ImageContent)]
    value = text if text.strip() else "(see attached image)" if images else ""
    response = {
        "name": message.tool_name,
        "response": {"error" if message.is_error else "output": value},
    }
    major = _gemini_major(model.id)
    if images and (major is None or major >= 3):
        return {"functionResponse": {**response, "parts": images}}, []
    return {"functionResponse": response}, images


def _user_parts(message: Message) -> list[dict[str, Any]]:
    """A user turn: text and ``inlineData`` images."""
    if not isinstance(message, UserMessage) or isinstance(message.content, str):
        return [{"text": message.text}] if message.text else []
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, ImageContent):
            parts.append(_inline(part))
        elif part.text:
            parts.append({"text": part.text})
    return parts


def gemini_tools(tools: tuple[ToolSpec, ...]) -> list[Any]:
    """One ``functionDeclarations`` tool for our ``ToolSpec`` list (JSON Schema as is)."""
    return [
        {
            "functionDeclarations": [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "parametersJsonSchema": dict(tool.parameters),
                }
                for tool in tools
            ]
        }
    ]


def thinking_config(model: Model, level: str) -> dict[str, Any] | None:
    """The ``generationConfig.thinkingConfig`` for ``level`` (already clamped), as the
    reference sends it: a ``thinkingLevel`` for Gemini 3, a ``thinkingBudget`` for
    others; thoughts included whenever thinking is on. ``None`` for a model that does
    not reason, and for Gemini 2.5 Pro at ``"off"`` (it cannot stop thinking)."""
    if not model.reasoning:
        return None
    model_id = model.id.lower()
    level = "high" if level == "xhigh" else level
    pro = "-pro" in model_id
    if level == "off":
        if _is_gemini_3(model_id):
            return {"thinkingLevel": "LOW" if pro else "MINIMAL"}
        if "2.5-pro" in model_id:
            return None
        return {"thinkingBudget": 0}
    if _is_gemini_3(model_id):
        if pro:
            pro_level = "LOW" if level in ("minimal", "low") else "HIGH"
            return {"includeThoughts": True, "thinkingLevel": pro_level}
        return {"includeThoughts": True, "thinkingLevel": level.upper()}
    for family, budgets in _BUDGETS.items():
        if family in model_id:
            return {"includeThoughts": True, "thinkingBudget": budgets[level]}
    return {"includeThoughts": True, "thinkingBudget": -1}


# -- responses ---------------------------------------------------------------------------------


@define(eq=False)
class GenerateContentParser:
    """Reads ``GenerateContentResponse`` events into a sink (see the module docstring)."""

    _sink: StreamSink
    _secrets: tuple[str, ...] = ()
    _finish_reason: str | None = attrs.field(default=None, init=False)
    _finish_message: str | None = attrs.field(default=None, init=False)
    _response_id: str | None = attrs.field(default=None, init=False)
    _fallback_id: str = attrs.field(factory=lambda: uuid.uuid4().hex[:12], init=False)
    _call_ids: set[str] = attrs.field(factory=set, init=False)

    def feed(self, event: ServerSentEvent) -> StreamEnd | None:
        """Take one event; return the end on an error or a blocked prompt."""
        try:
            chunk = json.loads(event.data)
        except (ValueError, RecursionError):
            logger.debug(
                "event stream data is not valid JSON: %r",
                excerpt(event.data, 200, secrets=self._secrets),
            )
            return StreamEnd.error(invalid_response_message("event stream data is not valid JSON"))
        if isinstance(chunk, list) and len(chunk) == 1:
            chunk = chunk[0]
        if not isinstance(chunk, Mapping):
            return StreamEnd.error(
                invalid_response_message("event stream data is not a JSON object")
            )
        error = chunk.get("error")
        if error:
            detail = error if isinstance(error, Mapping) else {"message": str(error)}
            return StreamEnd.error(_stream_error_message(detail, self._secrets))
        response_id, version = chunk.get("responseId"), chunk.get("modelVersion")
        if isinstance(response_id, str) and response_id and self._response_id is None:
            self._response_id = response_id
            self._sink.response(response_id, version if isinstance(version, str) else None)
        usage = chunk.get("usageMetadata")
        if isinstance(usage, Mapping):
            self._sink.usage(gemini_usage(usage))
        feedback = chunk.get("promptFeedback")
        block = feedback.get("blockReason") if isinstance(feedback, Mapping) else None
        if isinstance(block, str) and block:
            return StreamEnd.error(f"Gemini blocked the prompt (blockReason {block})")
        candidates = chunk.get("candidates")
        first = candidates[0] if isinstance(candidates, list) and candidates else None
        if isinstance(first, Mapping):
            return self._candidate(first)
        return None

    def finish(self) -> StreamEnd:
        """End of body: how the last ``finishReason`` said it ended; cut without one."""
        reason = self._finish_reason
        if reason is None:
            return StreamEnd.error(STREAM_CUT_MESSAGE)
        stop: StopReason
        if reason == "STOP":
            stop = "toolUse" if self._call_ids else "stop"
        elif reason == "MAX_TOKENS":
            stop = "length"
        else:
            meaning = FINISH_ERRORS.get(reason, "the answer was stopped")
            text = f"Gemini stopped the answer (finishReason {reason}): {meaning}"
            if self._finish_message:
                detail = excerpt(self._finish_message, MAX_MESSAGE_CHARS, secrets=self._secrets)
                text += f" — {detail}"
            return StreamEnd.error(text)
        return StreamEnd(stop_reason=stop, raw_stop_reason=reason)

    def _candidate(self, candidate: Mapping[str, Any]) -> StreamEnd | None:
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, Mapping) else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, Mapping) and (end := self._part(part)) is not None:
                return end
        reason = candidate.get("finishReason")
        if isinstance(reason, str) and reason:
            self._finish_reason = reason
            message = candidate.get("finishMessage")
            self._finish_message = message if isinstance(message, str) and message else None
        return None

    def _part(self, part: Mapping[str, Any]) -> StreamEnd | None:
        text = part.get("text")
        if isinstance(text, str):
            if part.get("thought") is True:
                if text:
                    self._sink.thinking(text)
                signature = part.get("thoughtSignature")
                if isinstance(signature, str) and signature:
                    self._sink.thinking_signature(signature)
            elif text:
                self._sink.text(text)
        call = part.get("functionCall")
        if isinstance(call, Mapping):
            name = call.get("name")
            arguments = call.get("args", {})
            if arguments is None:
                arguments = {}
            if not isinstance(name, str) or not name:
                return StreamEnd.error(invalid_response_message("a function call has no name"))
            if not isinstance(arguments, dict):
                return StreamEnd.error(
                    invalid_response_message(f"function call {name!r}: its args are not an object")
                )
            self._sink.tool_call(ToolCall(id=self._call_id(call), name=name, arguments=arguments))
        return None

    def _call_id(self, call: Mapping[str, Any]) -> str:
        given = call.get("id")
        if isinstance(given, str) and given and given not in self._call_ids:
            call_id = given
        else:
            call_id = f"call_{self._response_id or self._fallback_id}_{len(self._call_ids)}"
        self._call_ids.add(call_id)
        return call_id


@define(eq=False)
class GeminiProvider(HttpProvider):
    """A provider speaking Google's Gemini API (``streamGenerateContent``, SSE):

    ```python
    async with GeminiProvider(api_key=key) as provider:
        async with open_session(provider, "gemini-2.5-flash") as session: ...
    ```

    Without ``base_url``, ``$GEMINI_BASE_URL`` is the endpoint if it is set, else
    ``https://generativelanguage.googleapis.com/v1beta``. The key goes in the
    ``x-goog-api-key`` header.

    Args:
        max_tokens: ``generationConfig.maxOutputTokens``; ``None`` (the default) sends
            none, and the model's own limit applies.
    """

    DEFAULT_NAME: ClassVar[str] = "gemini"
    DEFAULT_BASE_URL: ClassVar[str] = "https://generativelanguage.googleapis.com/v1beta"
    BASE_URL_VARIABLE: ClassVar[str | None] = "GEMINI_BASE_URL"

    _max_tokens: int | None = attrs.field(default=None, alias="max_tokens", kw_only=True)

    def _url(self, model: Model) -> str:
        model_id = model.id.removeprefix("models/")
        root = self._root(model)
        return f"{root}/models/{quote(model_id, safe='')}:streamGenerateContent?alt=sse"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": api_key} if api_key else {}

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        contents = gemini_contents(readable(request.messages, request.model), request.model)
        body: dict[str, Any] = {"contents": contents}
        if request.system_prompt:
            body["systemInstruction"] = {"parts": [{"text": request.system_prompt}]}
        if request.tools:
            body["tools"] = gemini_tools(request.tools)
        config: dict[str, Any] = {}
        if self._max_tokens is not None:
            config["maxOutputTokens"] = self._max_tokens
        thinking = thinking_config(request.model, request.thinking_level)
        if thinking is not None:
            config["thinkingConfig"] = thinking
        if config:
            body["generationConfig"] = config
        return body

    def _http_error_message(
        self,
        status: int,
        reason: str = "",
        body: str = "",
        headers: Mapping[str, str] | None = None,
        *,
        content_type: str = "",
        secrets: tuple[str, ...] = (),
    ) -> str:
        return gemini_error_message(
            status, reason, body, headers, content_type=content_type, secrets=secrets
        )

    def _parser(self, sink: StreamSink, secrets: tuple[str, ...]) -> StreamParser:
        return GenerateContentParser(sink, secrets)
