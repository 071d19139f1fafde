"""What a Chat Completions server is sent beside the messages, as pi 1.6.0 decides it.

pi 1.6.0 (``openai-completions.js``, ``detectCompat``) sends every OpenAI-compatible
server ``store: false`` and the answer's cap as ``max_completion_tokens`` — both as
OpenAI's API documents them today — except to the hosts it knows to reject them:

- ``store`` is left out for the non-standard hosts (Cerebras, xAI, Together, Chutes,
  DeepSeek, Z.ai, Moonshot, OpenCode, Cloudflare, NVIDIA, Ant Ling);
- the cap is sent as the deprecated ``max_tokens`` to Chutes, DeepSeek, Moonshot,
  Cloudflare's AI gateway, Together, NVIDIA, Ant Ling and Z.ai;
- the system prompt is a ``developer`` message only for a reasoning model on OpenAI's
  own API (other hosts' chat templates often reject the role).

A host is known by the model's provider name or its base URL. The model's ``compat``
(models.json's, as pi reads it) overrides each: ``supportsStore``, ``maxTokensField``
(``"max_tokens"`` or ``"max_completion_tokens"``), ``supportsDeveloperRole``.

The cap is the model's ``max_tokens``, fitted into its context window as pi 1.6.0's
``clampMaxTokensToContext`` fits it:

```text
input  = the context's estimate (the last answer's usage plus 3.5 characters a
         token for what came after it; all of it estimated before any answer)
margin = max(4096, ceil(input * 0.15))
room   = window - input - margin
if room < 32768: room = min(32768, window - input - 4096)
cap    = min(max_tokens, max(1, room))
```

(pi 0.73.1 sent ``min(max_tokens, 32000)``; the seed profile sends pi 1.6.0's cap too.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .._core.classes import frozen
from .._core.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
)
from ._base import Model, ToolSpec

#: Characters a token is taken for in the estimate (pi 1.6.0's ``CHARS_PER_TOKEN``).
CHARS_PER_TOKEN = 3.5
#: Characters an image is taken for (pi 1.6.0's ``ESTIMATED_IMAGE_CHARS``).
IMAGE_CHARS = 4800
#: The least room left for the input being counted higher than estimated.
SAFETY_TOKENS = 4096
#: The share of the input added to that margin while it leaves enough room.
SAFETY_RATIO = 0.15
#: Below this much room the ratio is dropped and the cap is at most this.
MIN_OUTPUT_WITH_RATIO = 32768

_NON_STANDARD_PROVIDERS = frozenset(
    {"cerebras", "xai", "together", "deepseek", "zai", "zai-coding-cn", "moonshotai"}
    | {"moonshotai-cn", "opencode", "cloudflare-workers-ai", "cloudflare-ai-gateway"}
    | {"nvidia", "ant-ling"}
)
_NON_STANDARD_HOSTS = (
    "cerebras.ai",
    "api.x.ai",
    "api.together.ai",
    "api.together.xyz",
    "chutes.ai",
    "deepseek.com",
    "api.z.ai",
    "open.bigmodel.cn",
    "api.moonshot.",
    "opencode.ai",
    "api.cloudflare.com",
    "gateway.ai.cloudflare.com",
    "integrate.api.nvidia.com",
    "api.ant-ling.com",
)
_MAX_TOKENS_PROVIDERS = frozenset(
    {"deepseek", "moonshotai", "moonshotai-cn", "cloudflare-ai-gateway", "together"}
    | {"nvidia", "ant-ling", "zai", "zai-coding-cn"}
)
_MAX_TOKENS_HOSTS = (
    "chutes.ai",
    "deepseek.com",
    "api.moonshot.",
    "gateway.ai.cloudflare.com",
    "api.together.ai",
    "api.together.xyz",
    "integrate.api.nvidia.com",
    "api.ant-ling.com",
    "api.z.ai",
    "open.bigmodel.cn",
)

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]


@frozen
class OpenAICompat:
    """What one model's server accepts beside the messages.

    Attributes:
        store: send ``store: false``.
        max_tokens_field: the name the answer's cap is sent under.
        developer_role: send the system prompt as a ``developer`` message.
    """

    store: bool
    max_tokens_field: MaxTokensField
    developer_role: bool


def openai_compat(model: Model) -> OpenAICompat:
    """pi 1.6.0's detection for ``model`` (its provider name and base URL), with the
    model's ``compat`` on top (see the module docstring)."""
    provider, url = model.provider, model.base_url or ""
    non_standard = provider in _NON_STANDARD_PROVIDERS or any(
        host in url.lower() for host in _NON_STANDARD_HOSTS
    )
    old_field = provider in _MAX_TOKENS_PROVIDERS or any(
        host in url.lower() for host in _MAX_TOKENS_HOSTS
    )
    compat: Mapping[str, Any] = model.compat or {}
    store = compat.get("supportsStore")
    field = compat.get("maxTokensField")
    developer = compat.get("supportsDeveloperRole")
    return OpenAICompat(
        store=store if isinstance(store, bool) else not non_standard,
        max_tokens_field=(
            field
            if field in ("max_tokens", "max_completion_tokens")
            else ("max_tokens" if old_field else "max_completion_tokens")
        ),
        developer_role=(
            developer
            if isinstance(developer, bool)
            else provider == "openai" or "api.openai.com" in url
        ),
    )


def _js_len(text: str) -> int:
    """``text.length`` as JavaScript counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _content_chars(content: str | Sequence[Any]) -> int:
    if isinstance(content, str):
        return _js_len(content)
    chars = 0
    for part in content:
        if isinstance(part, TextContent):
            chars += _js_len(part.text)
        elif isinstance(part, ImageContent):
            chars += IMAGE_CHARS
    return chars


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _message_tokens(message: Message) -> int:
    if not isinstance(message, AssistantMessage):
        return _tokens(_content_chars(getattr(message, "content", "")))
    chars = 0
    for part in message.content:
        if isinstance(part, TextContent):
            chars += _js_len(part.text)
        elif isinstance(part, ThinkingContent):
            chars += _js_len(part.thinking)
        elif isinstance(part, ToolCall):
            arguments = json.dumps(part.arguments, ensure_ascii=False, separators=(",", ":"))
            chars += _js_len(part.name) + _js_len(arguments)
    return _tokens(chars)


def _system_tokens(system_prompt: str | None, tools: Sequence[ToolSpec]) -> int:
    """pi 1.6.0's estimate of its system message: the prompt and the tools it adds."""
    tokens = _tokens(_js_len(system_prompt or ""))
    if tools:
        declared = [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in tools
        ]
        tokens += _tokens(_js_len(json.dumps(declared, ensure_ascii=False, separators=(",", ":"))))
    return tokens


def context_estimate(
    messages: Sequence[Message], system_prompt: str | None, tools: Sequence[ToolSpec]
) -> int:
    """pi 1.6.0's ``estimateContextTokens`` of a request: the last answer's usage (one
    that came after every message before it) plus the estimate of what followed, or
    the estimate of all of it — the system message too — before any answer."""
    last, newest = None, -math.inf
    for index, message in enumerate(messages):
        if (
            isinstance(message, AssistantMessage)
            and message.timestamp >= newest
            and not message.failed
            and message.usage.total_tokens > 0
        ):
            last = index
        newest = max(newest, message.timestamp)
    if last is None:
        return _system_tokens(system_prompt, tools) + sum(_message_tokens(m) for m in messages)
    answer = messages[last]
    assert isinstance(answer, AssistantMessage)
    return answer.usage.total_tokens + sum(_message_tokens(m) for m in messages[last + 1 :])


def output_cap(model: Model, input_tokens: int) -> int:
    """The answer's cap: ``model.max_tokens`` fitted into the window (module docstring).

    Args:
        model: the model asked.
        input_tokens: the context's estimate (``context_estimate``).
    """
    if model.context_window <= 0:
        return max(1, model.max_tokens)
    margin = max(SAFETY_TOKENS, math.ceil(input_tokens * SAFETY_RATIO))
    room = model.context_window - input_tokens - margin
    if room < MIN_OUTPUT_WITH_RATIO:
        room = min(MIN_OUTPUT_WITH_RATIO, model.context_window - input_tokens - SAFETY_TOKENS)
    return min(model.max_tokens, max(1, room))
