"""Conversation messages: what the model sees and what the history keeps.

The shapes follow the reference's ("pi" 0.73.1) messages so that session files
and wire formats stay compatible: a user message (text, or text and image
parts), an assistant message (with ``api``, ``stopReason``, ``errorMessage``
and ``usage`` including its cost), a tool result — the three a model is sent —
and the reference's extended messages that live in the conversation but reach
the model only as user text: a ``bash`` command's output, an extension's custom
message, a branch summary and a compaction summary (``to_llm`` converts them,
as the reference's ``convertToLlm`` does). They are frozen values; the JSON
codec in ``trio_session._core.codec`` turns them into the reference's camelCase
objects and back.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from .classes import frozen
from .failure import ProviderFailure

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]
STOP_REASONS: frozenset[str] = frozenset({"stop", "length", "toolUse", "error", "aborted"})


def now_ms() -> int:
    """Wall-clock time in integer milliseconds, as message timestamps use."""
    return int(time.time() * 1000)


@frozen
class TextContent:
    """A piece of text in a message.

    Attributes:
        text: the text.
        type: always ``"text"``; the part's kind on the wire.
    """

    text: str
    type: Literal["text"] = "text"


@frozen
class ImageContent:
    """An image in a user message or tool result: base64 ``data`` and its MIME type.

    Attributes:
        data: the image's bytes, base64-encoded.
        mime_type: its MIME type (``"image/png"``).
        type: always ``"image"``; the part's kind on the wire.
    """

    data: str
    mime_type: str
    type: Literal["image"] = "image"


@frozen
class ThinkingContent:
    """Reasoning the model showed before answering (kept, never re-sent as text)."""

    thinking: str
    thinking_signature: str | None = None
    type: Literal["thinking"] = "thinking"


@frozen
class ToolCall:
    """The model asking for a tool to be run.

    Attributes:
        id: the call's id, which its ``ToolResultMessage`` answers.
        name: the tool's name.
        arguments: the arguments, parsed from the model's JSON.
        type: always ``"toolCall"``; the part's kind on the wire.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    type: Literal["toolCall"] = "toolCall"


ContentPart: TypeAlias = TextContent | ThinkingContent | ToolCall
UserContent: TypeAlias = TextContent | ImageContent


@frozen
class Cost:
    """What one assistant message cost, in dollars, by kind of token.

    Attributes:
        input: the input tokens' cost (cache reads not included).
        output: the output tokens' cost.
        cache_read: the cost of the tokens read from the provider's cache.
        cache_write: the cost of the tokens written to the provider's cache.
        total: the four added up.
        total_from_provider: whether ``total`` is what the provider billed (pi 1.6.0's
            ``totalFromProvider``): ``False`` when it was priced from the model's
            rates after the provider reported usage; ``None`` when nothing was reported.
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0
    total_from_provider: bool | None = None


#: The zero cost: the default of every ``Usage`` (frozen, so one is shared by all).
ZERO_COST = Cost()


#: The largest token count a ``Usage`` holds: ``2**53 - 1``, the largest integer a
#: JavaScript reader (pi's) holds exactly. A count from a server or a session file is
#: clamped to ``[0, MAX_TOKEN_COUNT]``, so no price, sum or ratio of counts meets an
#: integer too large for a float.
MAX_TOKEN_COUNT = 2**53 - 1


def bounded_count(value: int) -> int:
    """``value`` clamped to ``[0, MAX_TOKEN_COUNT]`` (``Usage``'s converter)."""
    return min(max(value, 0), MAX_TOKEN_COUNT)


def _bounded_or_none(value: int | None) -> int | None:
    return None if value is None else bounded_count(value)


@frozen
class Usage:
    """Token counts reported by the provider for one assistant message, and their cost.

    Every count is clamped to ``[0, MAX_TOKEN_COUNT]``.

    Attributes:
        input: input tokens, not counting cache reads.
        output: output tokens.
        cache_read: input tokens read from the provider's cache.
        cache_write: input tokens written to the provider's cache.
        cost: what those tokens cost, in dollars.
        reasoning: of ``output``, the reasoning tokens, when the provider says (pi 1.6.0's
            ``usage.reasoning``; OpenAI's ``completion_tokens_details.reasoning_tokens``);
            ``None`` when it gives no breakdown.
    """

    input: int = attrs.field(default=0, converter=bounded_count)
    output: int = attrs.field(default=0, converter=bounded_count)
    cache_read: int = attrs.field(default=0, converter=bounded_count)
    cache_write: int = attrs.field(default=0, converter=bounded_count)
    cost: Cost = ZERO_COST
    reasoning: int | None = attrs.field(default=None, converter=_bounded_or_none)

    @property
    def total_tokens(self) -> int:
        """All tokens counted for the request and its answer."""
        return self.input + self.output + self.cache_read + self.cache_write

    @property
    def context_tokens(self) -> int:
        """Tokens that occupied the context window (``input + cacheRead``, R-7)."""
        return self.input + self.cache_read


#: No tokens, no cost: the default usage of a message (frozen, so one is shared by all).
ZERO_USAGE = Usage()


def _user_content(value: Any) -> str | tuple[UserContent, ...]:
    return value if isinstance(value, str) else tuple(value)


def _joined_text(content: str | tuple[Any, ...]) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextContent))


@frozen
class UserMessage:
    """A message the user sent: a string, or text and image parts (as the reference writes it).

    Attributes:
        content: a string, or text and image parts (a list is kept as a tuple).
        timestamp: when it was sent, in epoch milliseconds; now unless given.
        role: always ``"user"``; the message's kind on the wire.
    """

    content: str | tuple[UserContent, ...] = attrs.field(converter=_user_content)
    timestamp: int = attrs.field(factory=now_ms)
    role: Literal["user"] = "user"

    @classmethod
    def of(
        cls, text: str, images: tuple[ImageContent, ...] | list[ImageContent] = ()
    ) -> UserMessage:
        """A user message as the reference makes one: ``[text, *images]`` parts.

        Args:
            text: the text part.
            images: image parts that follow it.
        """
        return cls((TextContent(text), *images))

    @property
    def text(self) -> str:
        """The message text (text parts joined)."""
        return _joined_text(self.content)

    @property
    def images(self) -> tuple[ImageContent, ...]:
        """The image parts, in order."""
        if isinstance(self.content, str):
            return ()
        return tuple(p for p in self.content if isinstance(p, ImageContent))


def _parts(value: Any) -> tuple[ContentPart, ...]:
    return tuple(value)


#: The metadata of a field that is ours and stays in memory: the codec neither writes
#: nor reads it, so no event, RPC message or session file shows it (pi has no such field).
IN_MEMORY: Mapping[str, bool] = {"wire": False}


@frozen
class AssistantMessage:
    """A message produced by the model, possibly ending in an error.

    Errors at the provider boundary are values, not exceptions: a failed
    request ends as an ``AssistantMessage`` with ``stop_reason == "error"`` and
    a human-readable ``error_message`` (HTTP status, the server's own message,
    retry headers). The retry policy reads only that text.

    Attributes:
        content: the text, thinking and tool-call parts, in order (a list is kept as a tuple).
        stop_reason: why the answer ended: ``"stop"``, ``"length"``, ``"toolUse"``, ``"error"`` or
            ``"aborted"``.
        error_message: what went wrong, when ``stop_reason`` is ``"error"`` or ``"aborted"``.
        usage: the tokens the request used, and their cost.
        provider: the provider's name (``"openai"``).
        model: the model id.
        timestamp: when it was made, in epoch milliseconds; now unless given.
        api: the wire API the provider spoke (the reference's ``api`` field).
        response_id: the provider's id for the response, when it gave one.
        response_model: the model the response says answered, when it said.
        thinking_level: the thinking level the request was sent with (pi 1.6.0's
            ``thinkingLevel``); ``None`` for a message made outside a session's turn.
        raw_stop_reason: why the provider said the answer ended, in its own words
            (OpenAI's ``finish_reason``, Anthropic's ``stop_reason``, Gemini's
            ``finishReason``), when it said.
        duration_ms: milliseconds from the request's start to the answer's end, on the
            run's clock (pi 1.6.0's ``durationMs``); not compared by ``==``.
        role: always ``"assistant"``; the message's kind on the wire.
        failure: a failed HTTP response as data — status, wait hint, request id,
            selected headers, the body's error type and code (R-64); ``None`` when the
            failure had no response (or the reply did not fail). Ours, in memory only:
            not in events, RPC or session files; not compared by ``==``.
        last_error: on a failed reply of a retry's re-attempt — aborted, or an error —
            the provider error the chain was retrying (the one that caused the wait,
            R-63); ``None`` otherwise. In memory only, not compared, like ``failure``.
    """

    content: tuple[ContentPart, ...] = attrs.field(default=(), converter=_parts)
    stop_reason: StopReason = "stop"
    error_message: str | None = None
    usage: Usage = ZERO_USAGE
    provider: str = ""
    model: str = ""
    timestamp: int = attrs.field(factory=now_ms)
    api: str = ""
    response_id: str | None = None
    response_model: str | None = None
    thinking_level: str | None = None
    raw_stop_reason: str | None = None
    duration_ms: int | None = attrs.field(default=None, eq=False)
    role: Literal["assistant"] = "assistant"
    failure: ProviderFailure | None = attrs.field(
        default=None, eq=False, repr=False, metadata=IN_MEMORY
    )
    last_error: AssistantMessage | None = attrs.field(
        default=None, eq=False, repr=False, metadata=IN_MEMORY
    )

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

    def raise_for_error(self, context_window: int | None = None) -> AssistantMessage:
        """Raise the ``ProviderError`` this reply ended with; return the reply if it did not.

        The exception's class is read from ``error_message`` (R-52): ``RateLimitError``,
        ``OverloadedError``, ``AuthenticationError``, ``ContextOverflowError``,
        ``ProviderConnectionError``, ``ServerError`` or ``ProviderError``. An aborted
        reply is not an error here. ``context_window`` lets a silent overflow count.

        Args:
            context_window: the model's context window, if known; with it, a reply whose usage
                overflowed it counts as a context overflow.

        When the reply is a retry's re-attempt that failed, the error it was retrying
        (``last_error``) is the exception's ``__cause__`` (R-63).

        Raises:
            ProviderError: ``stop_reason`` is ``"error"``.
        """
        if self.stop_reason != "error":
            return self
        from .._retry.reply import reply_error  # below _messages: typed by FailedReply

        error = reply_error(self, context_window)
        cause = self.last_error
        if cause is not None and cause.stop_reason == "error":
            raise error from reply_error(cause, context_window)
        raise error


@frozen
class ToolResultMessage:
    """The outcome of running one tool call.

    Attributes:
        tool_call_id: the id of the ``ToolCall`` it answers.
        tool_name: the tool's name.
        content: the tool's output: text and image parts.
        is_error: whether the tool failed.
        timestamp: when it was made, in epoch milliseconds; now unless given.
        details: tool-specific data kept beside the output (the reference's ``details``).
        role: always ``"toolResult"``; the message's kind on the wire.
    """

    tool_call_id: str
    tool_name: str
    content: tuple[UserContent, ...] = ()
    is_error: bool = False
    timestamp: int = attrs.field(factory=now_ms)
    details: Any = None
    role: Literal["toolResult"] = "toolResult"

    @property
    def text(self) -> str:
        """All text parts joined."""
        return _joined_text(self.content)


@frozen
class BashExecutionMessage:
    """A shell command the user ran (RPC ``bash``) and its output.

    It reaches the model with the next prompt, as user text (``to_llm``), unless
    ``exclude_from_context``.

    Attributes:
        command: the command line as the user typed it.
        output: what it printed (stdout and stderr), as kept.
        exit_code: its exit status, or ``None`` if it did not exit (cancelled).
        cancelled: whether it was cancelled (RPC ``abort_bash``).
        truncated: whether ``output`` was cut to the size limit.
        full_output_path: where the whole output was saved, when it was cut.
        exclude_from_context: keep it from the model (written only when true).
        timestamp: when it ran, in milliseconds since the epoch.
        role: always ``"bashExecution"``; the message's kind on the wire.
    """

    command: str
    output: str
    exit_code: int | None = None
    cancelled: bool = False
    truncated: bool = False
    full_output_path: str | None = None
    exclude_from_context: bool | None = None  # written only when true, as the reference
    timestamp: int = attrs.field(factory=now_ms)
    role: Literal["bashExecution"] = "bashExecution"

    @property
    def text(self) -> str:
        """The text the model is sent for it (the reference's wording)."""
        text = f"Ran `{self.command}`\n"
        text += f"```\n{self.output}\n```" if self.output else "(no output)"
        if self.cancelled:
            text += "\n\n(command cancelled)"
        elif self.exit_code not in (None, 0):
            text += f"\n\nCommand exited with code {self.exit_code}"
        if self.truncated and self.full_output_path:
            text += f"\n\n[Output truncated. Full output: {self.full_output_path}]"
        return text


@frozen
class CustomMessage:
    """A message an extension put into the conversation (the reference's ``custom`` role).

    Attributes:
        custom_type: the extension's name for this kind of message.
        content: its text, or text and image parts.
        display: whether a front end shows it.
        details: anything else the extension keeps with it (JSON-shaped).
        timestamp: when it was made, in milliseconds since the epoch.
        role: always ``"custom"``; the message's kind on the wire.
    """

    custom_type: str
    content: str | tuple[UserContent, ...] = attrs.field(converter=_user_content)
    display: bool = True
    details: Any = None
    timestamp: int = attrs.field(factory=now_ms)
    role: Literal["custom"] = "custom"

    @property
    def text(self) -> str:
        """The text parts joined."""
        return _joined_text(self.content)


COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"


@frozen
class BranchSummaryMessage:
    """What a branch the conversation came back from did (from a ``branch_summary`` entry).

    Attributes:
        summary: the branch's summary.
        from_id: the id of the entry the branch left from.
        timestamp: when it was made, in milliseconds since the epoch.
        role: always ``"branchSummary"``; the message's kind on the wire.
    """

    summary: str
    from_id: str
    timestamp: int = attrs.field(factory=now_ms)
    role: Literal["branchSummary"] = "branchSummary"

    @property
    def text(self) -> str:
        """The text the model is sent for it (the reference's wording)."""
        return BRANCH_SUMMARY_PREFIX + self.summary + BRANCH_SUMMARY_SUFFIX


@frozen
class CompactionSummaryMessage:
    """The summary that stands for the messages a compaction removed.

    Attributes:
        summary: the compactor's summary of them.
        tokens_before: the context's size, in tokens, before the compaction.
        timestamp: when it was made, in milliseconds since the epoch.
        role: always ``"compactionSummary"``; the message's kind on the wire.
    """

    summary: str
    tokens_before: int = 0
    timestamp: int = attrs.field(factory=now_ms)
    role: Literal["compactionSummary"] = "compactionSummary"

    @property
    def text(self) -> str:
        """The text the model is sent for it (the reference's wording)."""
        return COMPACTION_SUMMARY_PREFIX + self.summary + COMPACTION_SUMMARY_SUFFIX


LlmMessage: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage
Message: TypeAlias = (
    UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage
)
"""Every message a session holds: the three a model is sent (``UserMessage``,
``AssistantMessage``, ``ToolResultMessage``) and the reference's custom ones (bash output,
branch and compaction summaries, extension messages). Each has a ``role``."""


def to_llm(messages: Iterable[Message]) -> tuple[LlmMessage, ...]:
    """The messages as a model is sent them: the reference's ``convertToLlm``.

    A bash execution, a custom message and the two summaries become user
    messages carrying their text; a bash execution marked
    ``exclude_from_context`` is left out; the rest pass unchanged.
    """
    out: list[LlmMessage] = []
    for m in messages:
        if isinstance(m, (UserMessage, AssistantMessage, ToolResultMessage)):
            out.append(m)
        elif isinstance(m, BashExecutionMessage):
            if not m.exclude_from_context:
                out.append(UserMessage((TextContent(m.text),), timestamp=m.timestamp))
        elif isinstance(m, CustomMessage):
            content = (TextContent(m.content),) if isinstance(m.content, str) else m.content
            out.append(UserMessage(content, timestamp=m.timestamp))
        else:
            out.append(UserMessage((TextContent(m.text),), timestamp=m.timestamp))
    return tuple(out)
