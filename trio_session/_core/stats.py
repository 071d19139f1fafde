"""Session statistics, as the reference's ``get_session_stats`` reports them.

Counts and token totals are taken over the runtime context (what the model is sent
next), as the reference takes them over its agent state; the cost is the sum of the
assistant messages' ``usage.cost.total`` (``Model.priced`` fills it in).

The context estimate is the reference's ``estimateContextTokens``: the usage the
last successful answer reported (``input + output + cacheRead + cacheWrite``), plus
about a token per four characters for every message after it. After a compaction
the usage of earlier answers no longer describes the context, so until an answer
comes back after it the token count is unknown (``None``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from .classes import frozen
from .messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

#: Characters an image counts for in the estimate (the reference's 1200 tokens).
_IMAGE_CHARS = 4800


@frozen
class ContextUsage:
    """How full the model's context window is.

    Attributes:
        tokens: the estimate, or ``None`` right after a compaction.
        context_window: the model's window.
        percent: ``tokens`` as a percentage of the window (not rounded), or ``None``.
    """

    tokens: int | None
    context_window: int
    percent: float | None


@frozen
class TokenTotals:
    """Tokens the assistant messages reported, summed by kind.

    Attributes:
        input: input tokens, not counting cache reads.
        output: output tokens.
        cache_read: input tokens read from the provider's cache.
        cache_write: input tokens written to the provider's cache.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        """All of them."""
        return self.input + self.output + self.cache_read + self.cache_write


@frozen
class SessionStats:
    """What ``AgentSession.stats`` reports (the reference's ``SessionStats``).

    Attributes:
        session_file: the session file's path, if the session has one.
        session_id: the session's id.
        user_messages: user messages in the runtime context.
        assistant_messages: assistant messages in it.
        tool_calls: tool calls those assistant messages made.
        tool_results: tool results in it.
        total_messages: every message in it, of any role.
        tokens: usage totals of its assistant messages.
        cost: their cost in dollars.
        context_usage: the context-window estimate; ``None`` when the model has no window.
    """

    session_file: str | None
    session_id: str
    user_messages: int
    assistant_messages: int
    tool_calls: int
    tool_results: int
    total_messages: int
    tokens: TokenTotals
    cost: float
    context_usage: ContextUsage | None

    def to_json(self) -> dict[str, Any]:
        """The reference's JSON object: camelCase, ``sessionFile`` and ``contextUsage``
        left out when there is none, ``tokens.total`` included."""
        out: dict[str, Any] = {}
        if self.session_file is not None:
            out["sessionFile"] = self.session_file
        out |= {
            "sessionId": self.session_id,
            "userMessages": self.user_messages,
            "assistantMessages": self.assistant_messages,
            "toolCalls": self.tool_calls,
            "toolResults": self.tool_results,
            "totalMessages": self.total_messages,
            "tokens": {
                "input": self.tokens.input,
                "output": self.tokens.output,
                "cacheRead": self.tokens.cache_read,
                "cacheWrite": self.tokens.cache_write,
                "total": self.tokens.total,
            },
            "cost": self.cost,
        }
        if self.context_usage is not None:
            usage = self.context_usage
            out["contextUsage"] = {
                "tokens": usage.tokens,
                "contextWindow": usage.context_window,
                "percent": usage.percent,
            }
        return out


def _js_len(text: str) -> int:
    """``text.length`` as JavaScript counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _parts_chars(content: str | Sequence[Any], *, images: bool) -> int:
    if isinstance(content, str):
        return _js_len(content)
    chars = 0
    for part in content:
        if isinstance(part, TextContent):
            chars += _js_len(part.text)
        elif images and isinstance(part, ImageContent):
            chars += _IMAGE_CHARS
    return chars


def estimate_tokens(message: Message) -> int:
    """About a token per four characters of ``message`` (the reference's ``estimateTokens``).

    Images count 1200 tokens in tool results and custom messages, nothing in user
    messages — as the reference counts them.
    """
    if isinstance(message, UserMessage):
        chars = _parts_chars(message.content, images=False)
    elif isinstance(message, AssistantMessage):
        chars = 0
        for part in message.content:
            if isinstance(part, TextContent):
                chars += _js_len(part.text)
            elif isinstance(part, ThinkingContent):
                chars += _js_len(part.thinking)
            elif isinstance(part, ToolCall):
                arguments = json.dumps(part.arguments, ensure_ascii=False, separators=(",", ":"))
                chars += _js_len(part.name) + _js_len(arguments)
    elif isinstance(message, (CustomMessage, ToolResultMessage)):
        chars = _parts_chars(message.content, images=True)
    elif isinstance(message, BashExecutionMessage):
        chars = _js_len(message.command) + _js_len(message.output)
    elif isinstance(message, (BranchSummaryMessage, CompactionSummaryMessage)):
        chars = _js_len(message.summary)
    else:  # pragma: no cover - every role is handled above
        return 0
    return math.ceil(chars / 4)


def _usable(message: Message) -> AssistantMessage | None:
    if isinstance(message, AssistantMessage) and not message.failed:
        return message
    return None


def estimate_context_tokens(messages: Sequence[Message]) -> int:
    """The reference's ``estimateContextTokens``: last usage plus the estimate after it."""
    for index in range(len(messages) - 1, -1, -1):
        last = _usable(messages[index])
        if last is not None:
            trailing = sum(estimate_tokens(m) for m in messages[index + 1 :])
            return last.usage.total_tokens + trailing
    return sum(estimate_tokens(m) for m in messages)


def context_usage(messages: Sequence[Message], context_window: int) -> ContextUsage | None:
    """How full the window is (the reference's ``getContextUsage``, over the runtime context).

    The latest compaction is the last compaction summary in ``messages``; if no
    successful answer with a usage came after it (the kept messages before it do not
    count), the tokens are unknown.
    """
    if context_window <= 0:
        return None
    summary_at = max(
        (i for i, m in enumerate(messages) if isinstance(m, CompactionSummaryMessage)),
        default=None,
    )
    if summary_at is not None:
        # As the reference: only an answer that came after the compaction counts (the
        # messages it kept come after the summary in the context, but are older).
        since = messages[summary_at].timestamp
        after = [
            m for m in messages[summary_at + 1 :] if _usable(m) is not None and m.timestamp >= since
        ]
        last = _usable(after[-1]) if after else None
        if last is None or last.usage.total_tokens <= 0:
            return ContextUsage(tokens=None, context_window=context_window, percent=None)
    tokens = estimate_context_tokens(messages)
    return ContextUsage(
        tokens=tokens, context_window=context_window, percent=tokens / context_window * 100
    )


def session_stats(
    messages: Sequence[Message],
    *,
    session_id: str,
    session_file: str | None,
    context_window: int,
) -> SessionStats:
    """Count ``messages`` (the runtime context) as the reference's ``getSessionStats`` does."""
    assistants = [m for m in messages if isinstance(m, AssistantMessage)]
    return SessionStats(
        session_file=session_file,
        session_id=session_id,
        user_messages=sum(isinstance(m, UserMessage) for m in messages),
        assistant_messages=len(assistants),
        tool_calls=sum(len(m.tool_calls) for m in assistants),
        tool_results=sum(isinstance(m, ToolResultMessage) for m in messages),
        total_messages=len(messages),
        tokens=TokenTotals(
            input=sum(m.usage.input for m in assistants),
            output=sum(m.usage.output for m in assistants),
            cache_read=sum(m.usage.cache_read for m in assistants),
            cache_write=sum(m.usage.cache_write for m in assistants),
        ),
        cost=sum(m.usage.cost.total for m in assistants),
        context_usage=context_usage(messages, context_window),
    )
