"""What a model provider is: the seam between the agent loop and a model.

A provider streams one answer into a ``StreamSink`` and returns how it
ended. It never raises for a failed request and never retries on its own
(R-28a): a failure is a ``StreamEnd`` with ``stop_reason="error"`` and an
``error_message`` that the retry policy classifies (R-52). Cancellation is the
one exception that passes through: the agent turns it into an ``aborted``
message, keeping whatever the sink received.

``._error_text`` turns HTTP failures into that ``error_message`` text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs

from .._core.classes import frozen
from .._core.failure import ProviderFailure
from .._core.messages import (
    ZERO_COST,
    Cost,
    Message,
    StopReason,
    ToolCall,
    Usage,
    bounded_count,
)
from .._core.rate_headers import RateLimitHeaders


def token_count(value: Any) -> int:
    """A token count from a server's usage object, bounded before any arithmetic.

    An integer is clamped to ``[0, MAX_TOKEN_COUNT]``; anything else (missing, a
    boolean, a float, a string) counts 0.

    Args:
        value: the field as the server's JSON had it.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        return 0
    return bounded_count(value)


@frozen
class ModelCost:
    """A model's prices in dollars per million tokens (the reference's ``cost``).

    Attributes:
        input: dollars per million input tokens.
        output: dollars per million output tokens.
        cache_read: dollars per million tokens read from the cache.
        cache_write: dollars per million tokens written to the cache.
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


#: Free: the default prices of a model (frozen, so one is shared by all).
FREE = ModelCost()


def _name_from_id(model: Model) -> str:
    return model.id


@frozen
class Model:
    """A model at a provider, with the reference's model fields.

    Attributes:
        id: the provider's model id (``"gpt-4.1"``, ``"claude-sonnet-4-5"``).
        provider: the provider's name (``"openai"``, ``"anthropic"``, ``"faux"``);
            credentials are looked up by it.
        context_window: tokens the model accepts; used for silent-overflow
            detection (R-7(b)) and by the default compactor.
        base_url: the API endpoint, for providers that speak HTTP.
        name: a display name (the id if not given).
        api: the wire protocol, as the reference names it (``"openai-completions"``,
            ``"anthropic-messages"``); recorded on every assistant message.
        reasoning: whether the model accepts a thinking level.
        input: what the model reads: ``("text",)`` or ``("text", "image")``.
        max_tokens: the longest answer the model gives.
        cost: its prices; every assistant message's ``usage.cost`` is computed from them.
        compat: the reference's ``compat`` object from models.json (the provider's, then
            the model's on top, as pi merges them), shown as it is in the RPC Model
            object; ``None`` when models.json gives none. ``OpenAIProvider`` reads
            ``supportsStore``, ``maxTokensField`` and ``supportsDeveloperRole`` from it,
            as pi does; nothing else reads it.
    """

    id: str
    provider: str
    context_window: int = 128_000
    base_url: str | None = None
    name: str = attrs.field(default=attrs.Factory(_name_from_id, takes_self=True))
    api: str = ""
    reasoning: bool = False
    input: tuple[str, ...] = attrs.field(default=("text",), converter=tuple)
    max_tokens: int = 16_384
    cost: ModelCost = FREE
    compat: Mapping[str, Any] | None = attrs.field(default=None, hash=False)

    def priced(self, usage: Usage) -> Usage:
        """``usage`` with its ``cost`` computed from this model's prices (as the reference does).

        Args:
            usage: the token counts to price.
        """
        rate = self.cost
        # The price per token first, then the count: pi's order, to the last digit.
        parts = (
            rate.input / 1e6 * usage.input,
            rate.output / 1e6 * usage.output,
            rate.cache_read / 1e6 * usage.cache_read,
            rate.cache_write / 1e6 * usage.cache_write,
        )
        if usage.cost is ZERO_COST and not any(parts):
            return usage  # nothing to price: the usage as it is (its cost is zero already)
        return attrs.evolve(usage, cost=Cost(*parts, total=sum(parts)))


# -- thinking levels ----------------------------------------------------------------------
#
# The reference's (pi-ai's) reasoning levels. A model that does not reason supports only
# "off"; one that does supports "off" … "high". "xhigh" exists only for models whose
# reference entry maps it explicitly (OpenAI codex-max); ``Model`` carries no such map,
# so it is never offered here and is clamped to "high", as the reference clamps it.

THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")
"""Every thinking level, weakest first (the reference's ``EXTENDED_THINKING_LEVELS``)."""

#: The level a session starts at when nothing says otherwise (clamped to the model).
DEFAULT_THINKING_LEVEL = "medium"

#: Anthropic ``budget_tokens`` per level (the reference's defaults; xhigh counts as high).
THINKING_BUDGETS: Mapping[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
}


def supported_thinking_levels(model: Model) -> tuple[str, ...]:
    """The levels ``model`` accepts: ``("off",)`` unless it reasons (the reference's
    ``getSupportedThinkingLevels``)."""
    if not model.reasoning:
        return ("off",)
    return THINKING_LEVELS[:-1]


def clamp_thinking_level(model: Model, level: str) -> str:
    """``level`` if ``model`` supports it, else the nearest supported one above, then below.

    The reference's ``clampThinkingLevel``: a non-reasoning model always gets ``"off"``;
    ``"xhigh"`` becomes ``"high"``. ``level`` must be one of ``THINKING_LEVELS``.
    """
    available = supported_thinking_levels(model)
    if level in available:
        return level
    index = THINKING_LEVELS.index(level)
    for candidate in (*THINKING_LEVELS[index:], *reversed(THINKING_LEVELS[:index])):
        if candidate in available:
            return candidate
    return available[0]  # pragma: no cover - "off" is always available


@frozen
class ToolSpec:
    """A tool as the model sees it: name, description, JSON-schema parameters.

    Attributes:
        name: the tool's name, as the model calls it.
        description: what the tool does, for the model.
        parameters: the JSON schema of its arguments; an object with no properties unless given.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}
    )


@frozen
class ProviderRequest:
    """Everything one model request needs.

    ``messages`` never contains assistant messages that ended in ``error`` or
    ``aborted`` (R-20a). ``api_key`` is excluded from ``repr`` so it cannot leak
    into logs by accident. ``thinking_level`` is one of ``THINKING_LEVELS``, already
    clamped to what the model supports (``"off"`` for a model that does not reason).

    Attributes:
        model: the model to ask.
        messages: the conversation so far.
        system_prompt: the system prompt, if any.
        tools: the tools the model may call.
        api_key: the key for this request; ``None`` leaves it to the provider's own key.
        thinking_level: how much the model should reason.
        attempt_timeout: seconds this attempt may take as a whole, overriding the
            provider's own ``attempt_timeout``; ``None`` keeps the provider's. A
            session sets it from ``retry.provider.timeoutMs`` when a settings layer
            sets that key.
        idle_timeout: the longest silence (seconds) while waiting for or reading
            the answer, overriding the provider's own read, write and pool timeouts;
            ``None`` keeps the provider's. A session sets it from
            ``retry.provider.idleTimeoutMs`` when a settings layer sets that key.
    """

    model: Model
    messages: tuple[Message, ...]
    system_prompt: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    api_key: str | None = attrs.field(default=None, repr=False)
    thinking_level: str = "off"
    attempt_timeout: float | None = None
    idle_timeout: float | None = None


@frozen
class StreamEnd:
    """How a provider's stream ended.

    Attributes:
        stop_reason: why the answer ended (as ``AssistantMessage.stop_reason``).
        error_message: what went wrong, when it failed.
        failure: the failed response as data, when there was one (R-64): it becomes
            the reply's ``AssistantMessage.failure``; not compared by ``==``.
        raw_stop_reason: the provider's own word for why the answer ended
            (``finish_reason``, ``stop_reason``, ``finishReason``), when it gave one.
        rate_limits: the rate limits the response's headers stated, success or failure
            (``read_rate_limits``; the HTTP adapters set it); the rate budget learns
            from it when the settings name no limit (R-69). ``None``: none stated —
            a provider that does not set it changes nothing. Not compared by ``==``.
    """

    stop_reason: StopReason = "stop"
    error_message: str | None = None
    failure: ProviderFailure | None = attrs.field(default=None, eq=False)  # as the reply's
    raw_stop_reason: str | None = None
    rate_limits: RateLimitHeaders | None = attrs.field(default=None, eq=False)

    @classmethod
    def error(cls, message: str, failure: ProviderFailure | None = None) -> StreamEnd:
        """A failed request, described by ``message`` (status, server text, hints).

        Args:
            message: the error text.
            failure: the response as data, if there was a response.
        """
        return cls(stop_reason="error", error_message=message, failure=failure)


class StreamSink(Protocol):
    """Where a provider puts an answer while it streams."""

    def text(self, delta: str) -> None:
        """Append streamed text.

        Args:
            delta: the text that arrived.
        """
        ...

    def tool_call(self, call: ToolCall) -> None:
        """Add a complete tool call.

        Args:
            call: the tool call, its arguments parsed.
        """
        ...

    def usage(self, usage: Usage) -> None:
        """Report token usage (the last report wins).

        Args:
            usage: the token counts so far.
        """
        ...

    def response(self, response_id: str | None, model: str | None = None) -> None:
        """Report the provider's id for the response and the model that answered.

        Args:
            response_id: the provider's id for the response, if it gave one.
            model: the model the response says answered, if it said.
        """
        ...

    def thinking(self, delta: str) -> None:
        """Append streamed reasoning (a ``thinking`` part).

        Args:
            delta: the reasoning text that arrived.
        """
        ...

    def thinking_signature(self, signature: str) -> None:
        """Attach the provider's signature to the reasoning part being streamed.

        Args:
            signature: the provider's signature.
        """
        ...


class Provider(Protocol):
    """A model provider. ``FauxProvider`` is the one to use in tests.

    A provider that holds secrets of its own (an API key it was built with) may also
    have a ``secrets()`` method returning them as a tuple of strings, as
    ``HttpProvider`` does: a session then keeps them out of its logs and spans. The
    method is optional, so it is not part of this protocol.
    """

    @property
    def name(self) -> str:
        """The provider name credentials are keyed by."""
        ...

    async def stream(self, request: ProviderRequest, sink: StreamSink) -> StreamEnd:
        """Stream one answer into ``sink``; return how it ended. Never raise for a
        failed request; let cancellation through.

        Args:
            request: the model, context, tools and key of the request.
            sink: where the streamed text, thinking, tool calls and usage go.
        """
        ...
